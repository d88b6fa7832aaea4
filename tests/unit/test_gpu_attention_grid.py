"""The GPU attention tests' case grid (tests/gpu/test_attention.py) covers every value of every axis; checked here on
the CPU, since the GPU file only runs on the H200 (its module imports without torch)."""
import importlib.util
from pathlib import Path

_path = Path(__file__).parents[1] / "gpu" / "test_attention.py"
_spec = importlib.util.spec_from_file_location("gpu_test_attention", _path)
gpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu)


def test_grid_covers_every_value():
    values = [c.values for c in gpu.grid_cases()]
    assert len(values) == 50
    assert {v[1] for v in values} == set(gpu.SEQLENS) and {v[2] for v in values} == set(gpu.SEQLENS)
    assert {(v[1], v[2], v[8]) for v in values} == {(a, b, c) for a in gpu.SEQLENS for b in gpu.SEQLENS
                                                   for c in (False, True)}
    assert {v[5] for v in values} == set(gpu.HEAD_DIMS) and {v[3] // v[4] for v in values} == set(gpu.GQA_RATIOS)
    assert {v[6] for v in values} == set(gpu.DTYPES) and {v[7] for v in values} == set(gpu.LAYOUTS)
    assert {v[9] for v in values} == {False, True}
    for d in gpu.HEAD_DIMS:        # every head dim meets both layouts, dtypes, masks, lse or not and every GQA ratio
        sub = [v for v in values if v[5] == d]
        assert {v[7] for v in sub} == set(gpu.LAYOUTS) and {v[6] for v in sub} == set(gpu.DTYPES)
        assert {v[8] for v in sub} == {False, True} and {v[3] // v[4] for v in sub} == set(gpu.GQA_RATIOS)
        assert {v[9] for v in sub} == {False, True}
    for sq in gpu.SEQLENS:         # every query length meets every head dim
        assert {v[5] for v in values if v[1] == sq} == set(gpu.HEAD_DIMS), sq


def test_reference_semantics_are_documented():
    assert gpu.TOL == 2e-2 and "max |out - ref| / max |ref|" in gpu.__doc__
