"""warploom.emulate.tensorcore against the H100's wgmma, bit for bit: the recording of tests/gpu/probe_tensorcore.py
(tests/emulate/data/hgmma-h100-2026-12-06.npz: bf16 and f16, one and two k16 steps, exponent spreads up to 2^+-20,
C zero, small and large). The model's neighbours (another alignment width, floor instead of truncation, round to
nearest at the end) miss a large share of the same outputs: the recording tells them apart."""
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from warploom.emulate import tensorcore
from warploom.emulate.tensorcore import mma_f32

DATA = np.load(Path(__file__).with_name("data") / "hgmma-h100-2026-12-06.npz")
DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
CONFIGS = sorted({k.rsplit("_", 1)[0] for k in DATA.files})


def problems(config):
    dt = DTYPES[config.split("_")[0]]
    a = DATA[config + "_a"].view(dt).astype(np.float64)           # [P, 64, K]
    b = DATA[config + "_b"].view(dt).astype(np.float64)           # [P, K, 64]
    for p in range(a.shape[0]):
        yield a[p], np.ascontiguousarray(b[p].T), DATA[config + "_c"][p], DATA[config + "_d"][p]


def mismatches(config):
    return sum(int((mma_f32(a, b, c).view(np.uint32) != d.view(np.uint32)).sum()) for a, b, c, d in problems(config))


def test_the_recording_covers_both_types_both_step_counts_and_every_c():
    assert len(CONFIGS) == 16 and {c.split("_")[0] for c in CONFIGS} == {"bf16", "f16"}
    assert {c.split("_")[1] for c in CONFIGS} == {"k16", "k32"}
    assert {c.split("_")[2] for c in CONFIGS} == {"narrow", "wide", "bigc", "zeroc"}


@pytest.mark.parametrize("config", CONFIGS)
def test_mma_f32_is_the_h100_bit_for_bit(config):
    assert mismatches(config) == 0


def test_without_an_accumulator_is_c_zero():
    """scale-d = 0 (no accumulator) gives the bits of a zero accumulator."""
    for config in ("bf16_k16_zeroc", "f16_k32_zeroc"):
        for a, b, c, d in problems(config):
            assert not c.any()
            np.testing.assert_array_equal(mma_f32(a, b, None).view(np.uint32), d.view(np.uint32))


@pytest.mark.parametrize("bits", [24, 26])
def test_another_alignment_width_misses(monkeypatch, bits):
    monkeypatch.setattr(tensorcore, "ALIGN_BITS", bits)
    assert sum(mismatches(c) for c in CONFIGS) > 10000


def test_rounding_to_nearest_misses(monkeypatch):
    monkeypatch.setattr(tensorcore, "_rz_f32", lambda s: s.astype(np.float32))
    assert sum(mismatches(c) for c in CONFIGS) > 10000


def test_the_old_model_misses():
    """The emulator's model before the measurement: the k16 step's exact sum rounded to f32 once, then added to
    the accumulator."""
    bad = 0
    for config in CONFIGS:
        for a, b, c, d in problems(config):
            acc = c.astype(np.float64)
            for k0 in range(0, a.shape[1], 16):
                acc = (acc + (a[:, k0:k0 + 16] @ b[:, k0:k0 + 16].T)).astype(np.float32).astype(np.float64)
            bad += int((acc.astype(np.float32).view(np.uint32) != d.view(np.uint32)).sum())
    assert bad > 10000
