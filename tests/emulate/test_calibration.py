"""The emulator against the H200: every current calibration run (tests/gpu/calibration/run*.npz, one per kernel family,
written on the GPU by tests/gpu/calibrate.py; superseded ones are in git history (calibration/README.md) and not
replayed here; tests/unit/test_calibration_budget.py holds the folder to that) must replay bit for bit, on exact
inputs and on random ones (the tensor core's arithmetic: warploom.emulate.tensorcore). The full table (three
interleavings per case) is `python -m tests.emulate.calibration`; its last output is recorded in
tests/gpu/calibration/README.md."""
import pytest

from .calibration import CALIBRATION, compare, recordings

RUNS = recordings("gemm")


def test_there_is_a_recorded_run():
    assert RUNS, f"no calibration recordings in {CALIBRATION}"


@pytest.mark.parametrize("npz", RUNS, ids=[p.stem for p in RUNS])
def test_emulator_replays_the_h200(npz):
    rows = compare(npz, seeds=1)
    exact = [r for r in rows if r.exact]
    # a run records three kernels or more (the swap-AB recording: its three), each with an exact-input case
    assert len({r.kernel for r in exact}) >= 3 and {r.kernel for r in exact} == {r.kernel for r in rows}
    assert any(not r.exact for r in rows)
    for r in rows:
        assert r.differ == 0, (f"{r.key} ({r.kernel}, {r.shape}): {r.differ} elements differ from the H200's bits "
                               f"(worst {r.worst_ratio:.2f}x the bound)")
