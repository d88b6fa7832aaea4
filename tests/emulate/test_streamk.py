"""The stream-K GEMMs (schedule "streamk"), emulated: pieces of a tile summed through the workspace.

A stream-K launch of P CTAs splits the (tile, K tile) iterations into P equal runs (rules.streamk_start); a tile
whose K tiles several CTAs share is summed by the last of them to finish. The emulator runs CTAs one after
another, so `cta_order` decides which one that is: forward, reverse and shuffled orders must give the same bits
(the sum runs in K order whoever finishes last). Sizes are ragged (M, N, K not multiples of the tile), and the
SM counts are picked so that tiles have one, two and three or more pieces, and a CTA's whole run can lie inside
one tile (its first piece is also its last).
"""
import numpy as np
import pytest

from warploom import tuning
from warploom.emulate import emulate_gemm
from warploom.emulate.errors import OutOfBoundsError
from warploom.kernels import GemmSpec, SMALL_M_STAGES
from warploom.reference.ops import matmul, round_to
from warploom.runtime import rules

SPECS = [s for s in tuning.all_candidates() if s.schedule == "streamk"]
# (M, N, K, SMS): per tile the piece counts differ (see test_the_cases_cover_every_kind_of_piece); the last case of
# each has two waves of tiles or more, so data-parallel tiles come before the stream-K ones
CASES = {64: [(5, 300, 330, 2), (33, 70, 1100, 9), (130, 300, 520, 4)],
         128: [(130, 200, 300, 3), (129, 257, 650, 13), (330, 520, 330, 4)]}
ORDERS = ("forward", "reverse", "shuffle")


def rule_of(spec):
    return ("streamk", "M", spec.block_m, "N", spec.block_n, "K", spec.block_k, "SMS")


def pieces(spec, m, n, k, sms):
    sizes = {"M": m, "N": n, "K": k, "SMS": sms}
    rule = rule_of(spec)
    return rules.streamk_pieces(rules.evaluate(rule, sizes), *rules.streamk_tiles(rule, sizes))


def operands(spec, m, n, k, rng, exact: bool):
    draw = (lambda shape: rng.integers(-1, 2, shape).astype(np.float64)) if exact else rng.standard_normal
    a = round_to(draw((m, k)), spec.elem)
    b = round_to(draw((k, n) if spec.b_layout == "kn" else (n, k)), spec.elem)
    return a, b, matmul(a, b, transpose_b=spec.b_layout == "nk")


def test_the_cases_cover_every_kind_of_piece():
    """Whole tiles, tiles of 2 and of 3+ pieces, and a CTA whose run is inside one tile, for both row counts; and
    data-parallel tiles before stream-K ones."""
    for rows, cases in CASES.items():
        spec = GemmSpec("bf16", "kn", 128, 4, "sm_90a", "streamk", rows)
        m, n, k, sms = cases[-1]
        tiles, k_tiles = rules.streamk_tiles(rule_of(spec), {"M": m, "N": n, "K": k})
        dp = rules.streamk_dp_tiles(tiles, sms)
        assert dp and any(len(p) > 1 for p in pieces(spec, *cases[-1])[dp:]), rows
        counts = [len(p) for case in cases for p in pieces(spec, *case)]
        assert {1, 2} <= set(counts) and max(counts) >= 3, (rows, counts)
        inside = [c for case in cases for tile in pieces(spec, *case) for c, lo, hi in tile
                  if lo > 0 and hi < -(-case[2] // 64)]
        assert inside, rows


@pytest.mark.parametrize("spec", SPECS, ids=[s.kernel_name for s in SPECS])
def test_exact_inputs_give_the_exact_result(spec):
    """One of the cases per kernel, in a CTA order of its own (cases and orders rotate over the kernels)."""
    rng = np.random.default_rng(5)
    cases = CASES[spec.block_m]
    for i in range(1):
        m, n, k, sms = cases[(SPECS.index(spec) + i) % len(cases)]
        a, b, ref = operands(spec, m, n, k, rng, exact=True)
        order = ORDERS[(SPECS.index(spec) + i) % len(ORDERS)]
        c = emulate_gemm(spec, a, b, seed=3, sms=sms, cta_order=order)
        np.testing.assert_array_equal(c.astype(np.float64), ref, err_msg=f"{(m, n, k, sms)} {order}")


@pytest.mark.parametrize("rows", [64, 128])
def test_random_inputs_give_the_same_bits_whoever_finishes_last(rows):
    spec = GemmSpec("bf16", "nk", 64 if rows == 64 else 128, SMALL_M_STAGES if rows == 64 else 4, "sm_90a", "streamk",
                    rows)
    m, n, k, sms = CASES[rows][1 if rows == 64 else 2]
    a, b, ref = operands(spec, m, n, k, np.random.default_rng(8), exact=False)
    got = [emulate_gemm(spec, a, b, seed=s, sms=sms, cta_order=o, delay=8)
           for s, o in ((0, "forward"), (1, "reverse"), (2, "shuffle"))]
    for c in got[1:]:
        np.testing.assert_array_equal(c.view(np.uint16), got[0].view(np.uint16))
    np.testing.assert_allclose(got[0].astype(np.float64), ref, rtol=2 ** -7, atol=1e-3)


def test_buffers_are_reused_across_launches_and_left_zero():
    """What warploom.ops does: one workspace and one set of counters for every launch on a stream. The counters
    must be zero after each launch (emulate_gemm checks); a stale workspace (the last launch's pieces) must not leak
    into the next result."""
    spec = GemmSpec("f16", "kn", 128, 4, "sm_90a", "streamk", 128)
    rng = np.random.default_rng(2)
    m, n, k, sms = CASES[128][1]
    floats, counts = spec.streamk_buffers(sms, m, n)
    fixup = {"workspace": np.full(floats, np.nan, np.float32), "counters": np.zeros(counts, np.int32)}
    for _ in range(2):
        a, b, ref = operands(spec, m, n, k, rng, exact=True)
        c = emulate_gemm(spec, a, b, sms=sms, fixup=fixup, cta_order="shuffle")
        np.testing.assert_array_equal(c.astype(np.float64), ref)
        assert not fixup["counters"].any()


def test_counters_left_by_a_broken_launch_are_reported():
    spec = GemmSpec("bf16", "kn", 128, 4, "sm_90a", "streamk", 128)
    m, n, k, sms = CASES[128][0]
    floats, counts = spec.streamk_buffers(sms, m, n)
    fixup = {"workspace": np.zeros(floats, np.float32), "counters": np.full(counts, 7, np.int32)}
    a, b, _ = operands(spec, m, n, k, np.random.default_rng(1), exact=True)
    with pytest.raises(OutOfBoundsError, match="not zero after the launch"):
        emulate_gemm(spec, a, b, sms=sms, fixup=fixup)
