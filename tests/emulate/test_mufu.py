"""warploom.emulate.mufu (ex2.approx.ftz.f32 and lg2.approx.f32 as the sm_90a MUFU computes them) against
independent device recordings: tests/emulate/data/ex2-h100-sample-2026-12-06.npz (20000 points of the 2^-23 grids
of [-1, 0] and [0, 1] from the first MUFU probe, not the run that made the table) and lg2-h100-sample-2026-12-06.npz
(20000 inputs in [2, 4) and [16, 32) from tests/gpu/probe_lg2.py: the rule RZ(e + L(m)) at e = 1 and 4), and the
structure the tables' use rests on."""
from pathlib import Path

import numpy as np

from warploom.emulate import mufu
from warploom.emulate.mufu import ex2_approx_ftz_f32, lg2_approx_f32

SAMPLE = np.load(Path(__file__).with_name("data") / "ex2-h100-sample-2026-12-06.npz")
LG2 = np.load(Path(__file__).with_name("data") / "lg2-h100-sample-2026-12-06.npz")


def test_the_table_gives_the_recorded_bits():
    np.testing.assert_array_equal(ex2_approx_ftz_f32(SAMPLE["x"]).view(np.uint32), SAMPLE["bits"])


def test_the_hardware_is_not_correctly_rounded():
    """Where the recorded value and the correctly rounded one differ (about 60% of the grid points), the table
    follows the recording: the emulator's earlier model (float32(exp2(float64 x))) misses these."""
    cr = np.exp2(SAMPLE["x"].astype(np.float64)).astype(np.float32).view(np.uint32)
    assert (cr != SAMPLE["bits"]).mean() > 0.3


def test_integer_part_and_truncated_fraction():
    """2^(n + f) = 2^n T(f): the integer part scales exactly; x is read truncated to 23 fraction bits."""
    f = -np.linspace(0.0, 0.999, 1001).astype(np.float32)
    base = ex2_approx_ftz_f32(f).astype(np.float64)
    for n in (-5, -1, 3):
        shifted = ex2_approx_ftz_f32((f + np.float32(n)).astype(np.float32))
        exact = (f + np.float32(n)).astype(np.float64) == f.astype(np.float64) + n
        if n < 0:    # x = n + f with both <= 0: the same fraction
            np.testing.assert_array_equal(shifted[exact], (base * 2.0 ** n).astype(np.float32)[exact])
    x = np.float32(-0.3)
    below = np.nextafter(x, np.float32(0))          # the same 23-bit truncation: the same result
    assert np.trunc(np.float64(x) * 2 ** 23) != np.trunc(np.float64(below) * 2 ** 23) or \
        ex2_approx_ftz_f32(np.float32([x]))[0] == ex2_approx_ftz_f32(np.float32([below]))[0]


def test_ftz_and_special_values():
    x = np.float32([0.0, -0.0, 1e-40, -1e-40, -126.0, -126.5, -127.0, -1e30, -np.inf, 127.9, 128.0, np.nan])
    y = ex2_approx_ftz_f32(x)
    assert list(y[:4]) == [1.0, 1.0, 1.0, 1.0] and y[4] == np.float32(2.0 ** -126)
    assert list(y[5:9]) == [0.0] * 4 and not np.signbit(y[5:9]).any()
    assert y[9] == np.float32(3.17495018884007e+38) and y[10] == np.inf and np.isnan(y[11])


def test_within_the_ptx_bound_everywhere_normal():
    x = np.linspace(-126.0, 127.0, 200001).astype(np.float32)
    rel = np.abs(ex2_approx_ftz_f32(x).astype(np.float64) / np.exp2(x.astype(np.float64)) - 1)
    assert rel.max() <= 2.0 ** -22


def test_a_table_off_by_one_ulp_is_caught(monkeypatch):
    line = mufu._line()
    up = (line.astype(np.float32).view(np.uint32) + 1).view(np.float32).astype(np.float64)     # one f32 ulp up
    monkeypatch.setattr(mufu, "_line", lambda: up)
    assert (ex2_approx_ftz_f32(SAMPLE["x"]).view(np.uint32) != SAMPLE["bits"]).any()


def test_lg2_gives_the_recorded_bits_from_1_up():
    y, covered = lg2_approx_f32(LG2["x"])
    assert covered.all()
    np.testing.assert_array_equal(y.view(np.uint32), LG2["bits"])


def test_lg2_is_truncated_not_rounded_to_nearest(monkeypatch):
    """Rounding e + L(m) to nearest instead of toward zero misses a third or more of the recording."""
    x = LG2["x"]
    bits = x.view(np.uint32).astype(np.int64)
    s = ((bits >> 23) - 127) + mufu._lg2_table()[bits & ((1 << 23) - 1)]
    assert (s.astype(np.float32).view(np.uint32) != LG2["bits"]).mean() > 0.3


def test_lg2_covers_finite_inputs_from_1_only():
    y, covered = lg2_approx_f32(np.float32([1.0, 2.0, 3.0, 0.5, 0.999, np.inf, np.nan, 0.0, -1.0]))
    assert list(covered) == [True, True, True, False, False, False, False, False, False]
    assert y[0] == 0.0 and y[1] == 1.0 and y[2] == np.float32(1.5849624872207642)


def test_lg2_in_the_emulator_is_the_table_from_1_and_log2_below():
    """The emulated llvm.nvvm.lg2.approx.f: the table where it is measured, correctly rounded log2 below 1."""
    from tests.emulate.test_arith import run
    x = np.concatenate([LG2["x"][:16], np.float32([0.3, 0.7, 0.999, 0.5] * 4)])
    got = run("%a: f32", '%r = llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"(%a) : (f32) -> f32', x)
    np.testing.assert_array_equal(got[:16].view(np.uint32), LG2["bits"][:16])
    np.testing.assert_array_equal(got[16:], np.log2(x[16:].astype(np.float64)).astype(np.float32))


# MUFU.RCP's special values as the H100 returned them (tests/gpu/probe_rcp.py, run 66; tests/gpu/logs/run66-rcp.json)
RCP_SPECIAL = [(0.0, float("inf")), (-0.0, float("-inf")), (1e-40, float("inf")), (-1e-40, float("-inf")),
               (1.0, 1.0), (-1.0, -1.0), (2.0, 0.5), (3.0, 0.3333333432674408), (1e30, 1.0000000031710769e-30),
               (float("inf"), 0.0), (float("-inf"), -0.0), (2.0 ** 126, 2.0 ** -126), (2.0 ** 127, 0.0),
               (1.5 * 2.0 ** 126, 0.0)]


def test_rcp_table_gives_the_device_special_values():
    from warploom.emulate.mufu import rcp_approx_ftz_f32
    x = np.array([a for a, _ in RCP_SPECIAL], np.float32)
    want = np.array([b for _, b in RCP_SPECIAL], np.float32)
    assert np.array_equal(rcp_approx_ftz_f32(x).view(np.uint32), want.view(np.uint32))
    assert np.isnan(rcp_approx_ftz_f32(np.array([np.nan], np.float32)))[0]


def test_rcp_table_is_within_one_ulp_and_scales_by_powers_of_two():
    """The measured R(m) is 1/m correctly rounded or 1 ulp off (13% of mantissas), and rcp(2^e m) = 2^-e rcp(m)
    (the rule the device was checked against on 80 M inputs)."""
    from warploom.emulate.mufu import rcp_approx_ftz_f32
    m = np.random.default_rng(1).uniform(1.0, 2.0, 200_000).astype(np.float32)
    exact = (1.0 / m.astype(np.float64)).astype(np.float32)
    got = rcp_approx_ftz_f32(m)
    ulps = np.abs(got.view(np.int32) - exact.view(np.int32))
    assert ulps.max() == 1 and 0.8 < (ulps == 0).mean() < 0.95
    for e in (-100, -3, 7, 60):
        scaled = rcp_approx_ftz_f32(np.ldexp(m, e).astype(np.float32))
        assert np.array_equal(scaled, np.ldexp(got.astype(np.float64), -e).astype(np.float32))
    assert np.array_equal(rcp_approx_ftz_f32(-m), -got)
