"""The sm_90a FA3-style attention kernel (planned_fa3, lowered by warploom.lowering.attention_regs), emulated thread
by thread against the float64 reference (warploom.reference.ops.attention, bottom-right causal mask, LSE).

Ragged sizes (Sq, Sk not multiples of the 128-row query block or of the key block; Sq > Sk and Sq < Sk), causal
and not, GQA ratios 1, 2 and 4 (4 query heads on 2 kv heads in the grid, persistent, causal table walk, stream-K,
192-row, two-Q-stage and polynomial kernels: a kv head other than q_head / (Hq / Hkv), e.g. q_head % Hkv, changes
the output), head dims 64 / 128 / 256, bf16 and f16, both layouts (the tensor maps see each input
through its (D, S, H, B) view; out is written through its strides), three interleavings each (seed and async
delay). Both consumer schedules: the overlapped one (planned_fa3's default: the softmax of key block j beside
the P V of block j - 1, a peeled first block and a last P V after the loop; the cases include CTAs with no key
block, causal Sq > Sk, and exactly one key block) and the serial one (overlap=False). Then hand-broken kernels,
to show each protocol check can fail.

Tolerance: warploom.emulate.judge (the bound is derived there; `warploom emulate --op attention` uses it too).
"""
import dataclasses

import numpy as np
import pytest

from warploom import targets
from warploom.emulate import (AccumulatorReadError, BarrierError, DeadlockError, EmulatedKernel, SmemRaceError,
                              emulate_attention)
from warploom.emulate.judge import judge_attention
from warploom.emulate.launch import emulate_launch
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.emulate.names import SmemNames
from warploom.kernel import Arrive, Compute, Loop, MmaWait, Sync, Wait
from warploom.kernel.verify import problems
from warploom.dialect import make_context
from warploom.lowering import attention_regs, kernel_name
from warploom.reference.ops import round_to

from .fa3_plan import planned_fa3

SEEDS = [(0, 4), (1, 8), (2, 16)]            # (interleaving seed, most scheduler steps an async op takes)

# (elem, D, causal, Sq, Sk, Hq, Hkv, layout, B): every kernel at least once; Sk spans more key blocks than the
# 2-stage ring has stages where cheap, so K/V stages are reused and phases wrap
CASES = [
    ("bf16", 64, False, 130, 200, 1, 1, "bshd", 1),      # 2 query blocks, ragged last key block
    ("bf16", 64, True, 200, 63, 4, 1, "bhsd", 1),        # Sq > Sk: the first 137 rows see no key; GQA 4
    ("bf16", 64, True, 63, 300, 1, 1, "bshd", 2),        # Sq < Sk: 3 key blocks (ring wraps), 2 batches
    ("bf16", 128, False, 63, 130, 4, 2, "bhsd", 1),      # 4 q heads on 2 kv heads: heads 1, 2 differ under h % Hkv
    ("bf16", 128, True, 130, 130, 4, 2, "bshd", 1),      # the diagonal crosses both query blocks; GQA 4 on 2 kv heads
    ("bf16", 128, True, 100, 400, 2, 1, "bshd", 1),      # 3 key blocks of 176 (ring wraps, ragged last); GQA 2
    ("bf16", 256, False, 1, 200, 1, 1, "bshd", 1),       # 3 key blocks of 80
    ("bf16", 256, True, 130, 63, 2, 1, "bhsd", 1),
    ("f16", 64, True, 130, 200, 4, 1, "bhsd", 1),
    ("f16", 128, False, 200, 1, 1, 1, "bshd", 1),        # one key
    ("f16", 64, False, 70, 129, 2, 2, "bshd", 1),        # the rest of the 12 standard kernels, small
    ("f16", 128, True, 64, 200, 1, 1, "bhsd", 1),        # Sq < Sk: 2 key blocks, the second crosses the diagonal
    ("f16", 256, False, 40, 90, 1, 1, "bhsd", 1),        # 2 key blocks of 80, ragged
    ("f16", 256, True, 90, 90, 2, 2, "bshd", 1),
]
# every standard kernel (elem x head dim x causal) is among the cases
assert {(e, d, c) for e, d, c, *_ in CASES} == {(e, d, c) for e in ("bf16", "f16") for d in (64, 128, 256)
                                                for c in (False, True)}
IDS = [f"{e}-d{d}-{'causal' if c else 'full'}-{sq}x{sk}-h{hq}/{hkv}-{lay}-b{b}"
       for e, d, c, sq, sk, hq, hkv, lay, b in CASES]


def inputs(elem, d, sq, sk, hq, hkv, layout, bsz, rng):
    shape = (lambda s, h: (bsz, s, h, d)) if layout == "bshd" else (lambda s, h: (bsz, h, s, d))
    q, k, v = (round_to(rng.standard_normal(shape(s, h)), elem) for s, h in ((sq, hq), (sk, hkv), (sk, hkv)))
    return q, k, v


def check(out, lse, q, k, v, elem, causal, layout):
    assert out.dtype == NUMPY_ELEMS[elem] and lse.dtype == np.float32
    verdict = judge_attention(out, lse, q, k, v, elem, causal, layout)
    assert verdict.ok, verdict.problem


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "serial"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_attention_matches_the_reference(case, overlap):
    elem, d, causal, sq, sk, hq, hkv, layout, bsz = case
    q, k, v = inputs(elem, d, sq, sk, hq, hkv, layout, bsz, np.random.default_rng(sq * 1000 + sk))
    program = planned_fa3(elem, d, causal, overlap=overlap)
    first = None
    for seed, delay in SEEDS:
        out, lse = emulate_attention(q, k, v, causal=causal, seed=seed, delay=delay, layout=layout, program=program)
        check(out, lse, q, k, v, elem, causal, layout)
        if first is None:
            first = (out.copy(), lse.copy())
        else:   # the interleaving changes no bit: each CTA's arithmetic order is fixed by the program
            np.testing.assert_array_equal(out.view(np.uint16), first[0].view(np.uint16))
            np.testing.assert_array_equal(lse, first[1])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_persistent_schedule_matches_the_grid_bit_for_bit(case):
    """The persistent kernel (3 CTAs standing in for the SMs, each walking several tiles: the K/V rings and Q's
    phase go on across tiles, a tile with no key block skips Q) in both tile orders and three interleavings:
    within the reference's bound, and bit for bit the grid kernel's output (a tile's arithmetic does not depend
    on which CTA runs it, or after which tiles)."""
    elem, d, causal, sq, sk, hq, hkv, layout, bsz = case
    q, k, v = inputs(elem, d, sq, sk, hq, hkv, layout, bsz, np.random.default_rng(sq * 1000 + sk))
    program = planned_fa3(elem, d, causal, schedule="persistent")
    grid = planned_fa3(elem, d, causal, block_n=program.attrs["tile"][1])      # the same tile, a CTA per tile
    grid_out, grid_lse = emulate_attention(q, k, v, causal=causal, layout=layout, program=grid)
    for (seed, delay), order in zip(SEEDS, (0, 1, None)):
        out, lse = emulate_attention(q, k, v, causal=causal, seed=seed, delay=delay, layout=layout, program=program,
                                     sms=3, tile_order=order)
        check(out, lse, q, k, v, elem, causal, layout)
        np.testing.assert_array_equal(out.view(np.uint16), grid_out.view(np.uint16))
        np.testing.assert_array_equal(lse, grid_lse)


# two Q stages (wl-pipeline{q-stages=2}): (elem, D, causal, Sq, Sk, Hq, Hkv, layout, B); 3 CTAs walk 6 to 8 tiles, so
# each CTA's Q stages turn over (phases wrap) and, causal, tiles with no key block leave the stage count alone; the
# last element is block_m (None: the standard 128 rows; 192: three consumer warpgroups, head dim 64's tall tile)
# the 192-row case has 4 query heads on 2 kv heads (GQA with 1 < Hkv < Hq, on the tall tile and the two Q stages)
Q2_CASES = [("bf16", 64, False, 250, 140, 2, 1, "bshd", 2, None), ("f16", 128, True, 300, 200, 2, 2, "bhsd", 1, None),
            ("bf16", 64, False, 450, 140, 4, 2, "bshd", 1, 192)]


@pytest.mark.parametrize("case", Q2_CASES, ids=[f"{c[0]}-d{c[1]}-{'causal' if c[2] else 'full'}-m{c[9] or 128}"
                                                for c in Q2_CASES])
def test_two_q_stages_match_one_bit_for_bit(case):
    """The persistent kernel whose Q ring has two stages (the producer loads the next tile's Q while this one runs,
    tile t on stage t % 2, phase (t / 2) & 1) in two interleavings: within the reference's bound and bit for bit the
    one-stage kernel's output (a tile's arithmetic does not depend on the stage its Q sits in)."""
    from warploom.build import planned_attention_program
    elem, d, causal, sq, sk, hq, hkv, layout, bsz, block_m = case
    q, k, v = inputs(elem, d, sq, sk, hq, hkv, layout, bsz, np.random.default_rng(sq + sk))
    plan = (lambda **kw: planned_attention_program(elem, d, causal, block_m=192, schedule="persistent", **kw)) \
        if block_m else (lambda **kw: planned_fa3(elem, d, causal, schedule="persistent", **kw))
    one = emulate_attention(q, k, v, causal=causal, layout=layout, sms=3, program=plan(q_stages=1))
    two = plan(q_stages=2)
    assert two.rings["q"].stages == 2
    for seed, delay in SEEDS[:2]:
        out, lse = emulate_attention(q, k, v, causal=causal, seed=seed, delay=delay, layout=layout, program=two,
                                     sms=3)
        check(out, lse, q, k, v, elem, causal, layout)
        np.testing.assert_array_equal(out.view(np.uint16), one[0].view(np.uint16))
        np.testing.assert_array_equal(lse, one[1])


# three consumer warpgroups (block_m 192: FA3's tile at head dim 64): (elem, D, causal, Sq, Sk, Hq, Hkv, layout, B);
# Sq spans a ragged second query block, Sk a wrapping K/V ring
THREE_WG_CASES = [("bf16", 64, False, 250, 300, 2, 1, "bshd", 1), ("f16", 64, True, 250, 300, 1, 1, "bhsd", 2)]


@pytest.mark.parametrize("case", THREE_WG_CASES, ids=[f"{c[0]}-{'causal' if c[2] else 'full'}" for c in THREE_WG_CASES])
def test_three_consumer_warpgroups_match_two_bit_for_bit(case):
    """192 query rows a tile, 64 per consumer warpgroup, the turns at the tensor cores going round three
    warpgroups (each instance of the turn barrier joins a warpgroup and the one before it): persistent, on 3 CTAs,
    two interleavings; within the reference's bound and bit for bit the 128-row kernel's output (each row's
    arithmetic is the same: the key blocks are)."""
    from warploom.build import planned_attention_program
    elem, d, causal, sq, sk, hq, hkv, layout, bsz = case
    q, k, v = inputs(elem, d, sq, sk, hq, hkv, layout, bsz, np.random.default_rng(sq * 1000 + sk))
    program = planned_attention_program(elem, d, causal, block_m=192, schedule="persistent")
    assert program.threads == 512 and program.named_barriers["turn"].count == 3
    two = planned_attention_program(elem, d, causal, block_n=program.attrs["tile"][1], schedule="persistent")
    ref_out, ref_lse = emulate_attention(q, k, v, causal=causal, layout=layout, program=two, sms=3)
    for seed, delay in SEEDS[:2]:
        out, lse = emulate_attention(q, k, v, causal=causal, seed=seed, delay=delay, layout=layout, program=program,
                                     sms=3)
        check(out, lse, q, k, v, elem, causal, layout)
        np.testing.assert_array_equal(out.view(np.uint16), ref_out.view(np.uint16))
        np.testing.assert_array_equal(lse, ref_lse)


def _large_logits(elem, d, sq, sk, layout, rng):
    """Scores of magnitude 50-100 in log2 units (s * scale_log2): row r's score of key j is sign_r (50 + 50 j / Sk)
    plus noise of a few units, sign_r alternating by row, so the max of a + row grows by about 20 a key block (O
    rescaled by about 2^-20 each time) and a - row's stays at its first keys while the others fall to -100 (P down
    to 2^-50: 0 in f16). Without the max subtracted P would overflow f16 (2^16) and f32 (2^128)."""
    sl2 = np.log2(np.e) / np.sqrt(d)
    q = np.abs(rng.standard_normal((sq, d)))
    q *= (np.where(np.arange(sq) % 2, -1.0, 1.0) / (sl2 * q.sum(axis=-1)))[:, None]   # sum(q) scale_log2 = sign
    k = 50 + 50 * np.arange(sk)[:, None] / sk + 16 * rng.standard_normal((sk, d))       # s scale_log2: k's mean
    v = rng.standard_normal((sk, d))
    as_input = (lambda x: x[None, :, None]) if layout == "bshd" else (lambda x: x[None, None])
    return tuple(round_to(as_input(x), elem) for x in (q, k, v))


# large logits (sm_90a, grid): (elem, D, causal, Sq, Sk, layout); scores of magnitude 50-100 in log2 units, rows whose
# max grows by about 20 a key block over 3 blocks and rows whose max stays while the rest fall to -100
LARGE_CASES = [("f16", 64, True, 130, 300, "bshd"), ("bf16", 128, False, 70, 400, "bhsd")]


@pytest.mark.parametrize("case", LARGE_CASES, ids=[f"{c[0]}-d{c[1]}-{'causal' if c[2] else 'full'}"
                                                   for c in LARGE_CASES])
def test_large_logits_match_the_reference(case):
    """The FA3 kernel's online softmax (the exact max, O *= 2^(m_old - m_new) at each growth) on scores far past
    the 16-bit types' and f32's exp2 range: within the reference's bound."""
    elem, d, causal, sq, sk, layout = case
    q, k, v = _large_logits(elem, d, sq, sk, layout, np.random.default_rng(sq + sk))
    sl2 = np.log2(np.e) / np.sqrt(d)
    s = np.einsum("qd,kd->qk", *(x.reshape(-1, d).astype(np.float64) for x in (q, k))) * sl2
    assert np.abs(s).max() > 90 and np.abs(s).min() > 25          # the inputs are what the case says
    out, lse = emulate_attention(q, k, v, causal=causal, layout=layout, program=planned_fa3(elem, d, causal))
    check(out, lse, q, k, v, elem, causal, layout)


def test_scale_and_no_lse_pointer():
    """A scale other than 1/sqrt(D) goes through scale_log2; a null lse pointer stores no LSE (any access through
    it would be out of bounds in the emulator)."""
    q, k, v = inputs("bf16", 64, 70, 90, 2, 2, "bshd", 1, np.random.default_rng(5))
    out, lse = emulate_attention(q, k, v, causal=True, scale=0.3, with_lse=False, program=planned_fa3("bf16", 64, True))
    assert lse is None
    verdict = judge_attention(out, None, q, k, v, "bf16", True, "bshd", scale=0.3)
    assert verdict.ok, verdict.problem


# ---- hand-broken kernels: each check can fail ---------------------------------------------------------------

def _consumer_edit(program, edit, sections=("first", "body", "last")):
    """The program with the consumer role's body (and its loop's `sections`) rewritten by edit(ops) -> ops."""
    roles = []
    for role in program.roles:
        if role.name == "consumer":
            body = []
            for op in edit(list(role.body)):
                if isinstance(op, Loop):
                    op = dataclasses.replace(op, **{name: tuple(edit(list(ops))) for name, ops in op.sections
                                                    if name in sections})
                body.append(op)
            role = dataclasses.replace(role, body=tuple(body))
        roles.append(role)
    return dataclasses.replace(program, roles=roles)


def _emulate_program(program, lowering=attention_regs.RegisterAttention, sq=64, sk=300, seed=0,
                     row=64):
    """One head, bhsd inputs, D = 64; O stored by TMA into rows of `row` elements (> 64: a strided view, read by
    the emulator's tensor map through the view)."""
    name = kernel_name(program) + "_broken"
    kernel = EmulatedKernel.of(lowering(program, name).lower(make_context()))
    kernel.names = SmemNames.of_program(program, targets.get("sm_90a"))     # barrier names in messages
    q, k, v = (x.astype(NUMPY_ELEMS["bf16"]) for x in inputs("bf16", 64, sq, sk, 1, 1, "bhsd", 1, np.random.default_rng(9)))
    base = np.full((1, 1, sq, row), np.nan, NUMPY_ELEMS["bf16"])
    lse = np.full((1, 1, sq), np.nan, np.float32)
    args = {"q": q, "k": k, "v": v, "out": base[..., :64], "lse": lse, "scale_log2": np.float32(np.log2(np.e) / 8)}
    emulate_launch(kernel, args, {"Sq": sq, "Sk": sk, "Hq": 1, "Hkv": 1, "B": 1}, seed=seed)
    assert np.isnan(base[..., 64:].astype(np.float32)).all()        # nothing written past D
    return base[..., :64], lse, (q, k, v)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "serial"])
def test_the_unbroken_helper_passes(overlap):
    out, lse, (q, k, v) = _emulate_program(planned_fa3("bf16", 64, overlap=overlap), row=72)
    check(out, lse, q, k, v, "bf16", False, "bhsd")


def test_ragged_rows_are_dropped_by_the_tma_store():
    """Sq = 70: the second warpgroup's 64-row TMA box reaches row 127; rows 70.. are outside the tensor and dropped
    (the strided view's other columns stay NaN)."""
    out, lse, (q, k, v) = _emulate_program(planned_fa3("bf16", 64, True), sq=70, sk=90, row=80)
    check(out, lse, q, k, v, "bf16", True, "bhsd")


@pytest.mark.parametrize("seed", [0, 1])
def test_o_store_without_the_proxy_fence_is_caught(seed, monkeypatch):
    """The threads' st.shared of O not fenced for the async proxy before the TMA store reads them."""
    from warploom.lowering.emit import sync
    monkeypatch.setattr(sync, "fence_proxy_async_smem", lambda: None)
    with pytest.raises(SmemRaceError, match=r"TMA store of 'out' box \[0, \d+, 0, 0\] .* a generic st.shared by warp "
                                            r"\d+ wrote with no fence.proxy.async by that warp since"):
        _emulate_program(planned_fa3("bf16", 64), seed=seed)


def test_o_store_without_waiting_for_its_read_is_caught(monkeypatch):
    """Without cp.async.bulk.wait_group.read the CTA may exit (grid) before the TMA store has read O's smem."""
    from warploom.lowering.emit import tma
    monkeypatch.setattr(tma, "bulk_wait_group", lambda pending, read=True: None)
    with pytest.raises(SmemRaceError, match=r"exits while TMA store of 'out' .* has not read its smem yet"):
        for seed in range(6):
            _emulate_program(planned_fa3("bf16", 64), seed=seed)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "serial"])
def test_missing_v_empty_arrive_deadlocks(overlap):
    """Without the consumers' v_empty arrivals the producer waits forever for the third key block's V stage."""
    broken = _consumer_edit(planned_fa3("bf16", 64, overlap=overlap),
                            lambda ops: [o for o in ops if not (isinstance(o, Arrive) and o.barrier == "v_empty")])
    with pytest.raises(DeadlockError, match=r"v_empty"):
        _emulate_program(broken)


# ---- the overlapped schedule, broken ---------------------------------------------------------------------------

def _drop_rescale_wait(ops):
    """The body's wgmma.wait_group 0 (after the softmax, before O *= corr) removed."""
    at = next((i for i, o in enumerate(ops) if isinstance(o, Compute) and o.kind == "rescale"), 0)
    return [o for i, o in enumerate(ops) if not (i < at and isinstance(o, MmaWait) and o.pending == 0)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rescale_before_the_p_v_retired_is_caught(seed):
    """Without wait_group 0 before the rescale, O *= corr reads the accumulator while P_{j-1} V_{j-1} is still in
    flight: the emulator stops at the first read of O (under every interleaving)."""
    broken = _consumer_edit(planned_fa3("bf16", 64), _drop_rescale_wait, sections=("body",))
    assert problems(broken) == []         # no mbarrier protocol is broken: only the emulator sees it
    with pytest.raises(AccumulatorReadError, match=r"extractvalue loc\(\"o\d+\"\): accumulator register 0 read "
                       r"before the wgmma.wait_group that retires the wgmma writing it"):
        _emulate_program(broken, seed=seed)


def test_softmax_on_s_in_flight_is_caught():
    """wait_group 2 in place of 1 leaves S_j in flight too: the softmax reads S before its wgmma retired."""
    broken = _consumer_edit(planned_fa3("bf16", 64), lambda ops: [MmaWait(2) if o == MmaWait(1) else o for o in ops],
                            sections=("body",))
    with pytest.raises(AccumulatorReadError, match=r"accumulator register .* read before the wgmma.wait_group"):
        _emulate_program(broken)


def test_unlagged_v_wait_is_refused_by_the_verifier():
    """P_{j-1} V_{j-1} guarded by the wait for V_j's barrier (lag 0): the V it reads may not have landed. The kernel
    verifier names it (the Mma's lag and the Wait's must agree)."""
    broken = _consumer_edit(planned_fa3("bf16", 64),
                            lambda ops: [Wait("v_full") if o == Wait("v_full", lag=1) else o for o in ops],
                            sections=("body",))
    found = problems(broken)
    assert [p.check for p in found] == ["protocol"], found
    assert "without waiting on 'v_full' (lag 1: the stage of iteration - 1) first" in found[0].message


def test_swapped_ping_pong_slots_are_caught():
    """Each warpgroup waiting on the other's turn barrier and handing over its own: the counts still balance,
    but warpgroup 1's first bar.sync completes turn[0] with its own hand-over (no mutual exclusion): the same
    warps arrive twice in one generation."""
    def swap(ops):
        return [dataclasses.replace(o, slot={"own": "next", "next": "own"}[o.slot])
                if isinstance(o, Sync) and o.warpgroup is None else o for o in ops]
    with pytest.raises(BarrierError, match=r"arrives at named barrier 1 twice in one generation"):
        _emulate_program(_consumer_edit(planned_fa3("bf16", 64), swap))


def test_missing_first_hand_over_deadlocks():
    """Without warpgroup 1's first bar.arrive, each warpgroup waits for the other to hand over the turn."""
    broken = _consumer_edit(planned_fa3("bf16", 64),
                            lambda ops: [o for o in ops if not (isinstance(o, Sync) and o.warpgroup == 1)])
    with pytest.raises(DeadlockError, match=r"bar.sync 1 \(128 of 256 threads arrived\)"):
        _emulate_program(broken)


def test_unbalanced_ping_pong_is_caught_at_exit():
    """Dropping warpgroup 0's last bar.sync leaves warpgroup 1's final hand-over pending when the CTA exits."""
    broken = _consumer_edit(planned_fa3("bf16", 64),
                            lambda ops: [o for o in ops if not (isinstance(o, Sync) and o.warpgroup == 0)])
    with pytest.raises(BarrierError, match=r"named barrier 1 at 128 of 256 threads"):
        _emulate_program(broken)


class _WrongMaskRow(attention_regs.RegisterAttention):
    """The causal mask of each thread's row r0 computed with row r0 + 8's limit and vice versa."""
    def _rows(self, ctx):
        rows = super()._rows(ctx)
        return dict(rows, rows=rows["rows"][::-1]) if ctx.loop is not None else rows    # in the key loop: the mask


def test_wrong_mask_row_gives_a_mismatch():
    out, lse, (q, k, v) = _emulate_program(planned_fa3("bf16", 64, True), _WrongMaskRow, sq=100, sk=100)
    with pytest.raises(AssertionError):
        check(out, lse, q, k, v, "bf16", True, "bhsd")


# a share of exp2 on the FMA units (wl-tile{exp2-poly}; warploom.lowering.emit.exp2): (elem, D, causal, Sq, Sk, Hq,
# Hkv, layout, B, share); persistent, 3 CTAs; Sq > Sk (rows that see no key: every score masked, P = 0 from the
# polynomial too) and a ragged last key block
# the second case: 4 query heads on 2 kv heads (GQA with 1 < Hkv < Hq on the polynomial kernel)
POLY_CASES = [("bf16", 64, True, 300, 140, 2, 1, "bshd", 1, 0.25), ("f16", 128, False, 100, 300, 4, 2, "bhsd", 1, 1.0)]


@pytest.mark.parametrize("case", POLY_CASES, ids=[f"{c[0]}-d{c[1]}-{'causal' if c[2] else 'full'}-p{c[9]:g}"
                                                  for c in POLY_CASES])
def test_polynomial_exp2_share_matches_the_reference(case):
    """The kernel with the last 2 of each 8 exp2 (0.25), or all of them (1.0), by the FMA polynomial: within the
    reference's bound in two interleavings, bit for bit the same in both, and not bit for bit the all-MUFU kernel's
    output (the emulator rounds ex2.approx correctly; the polynomial is 1e-7 off: some P lands on another 16-bit
    value), so the share is really computed another way."""
    from warploom.build import planned_attention_program
    from warploom.kernels import AttentionSpec
    elem, d, causal, sq, sk, hq, hkv, layout, bsz, share = case
    q, k, v = inputs(elem, d, sq, sk, hq, hkv, layout, bsz, np.random.default_rng(sq + sk + 7))
    program = planned_attention_program(elem, d, causal, schedule="persistent", exp2_poly=share)
    assert program.attrs["exp2_poly"] == share
    assert kernel_name(program) == AttentionSpec(elem, d, causal, exp2_poly=share).kernel_name
    assert kernel_name(program).endswith(f"_p{round(share * 8)}")
    mufu = emulate_attention(q, k, v, causal=causal, layout=layout, sms=3,
                             program=planned_attention_program(elem, d, causal, schedule="persistent"))
    first = None
    for seed, delay in SEEDS[:2]:
        out, lse = emulate_attention(q, k, v, causal=causal, seed=seed, delay=delay, layout=layout, program=program,
                                     sms=3)
        check(out, lse, q, k, v, elem, causal, layout)
        if first is None:
            first = (out.copy(), lse.copy())
        np.testing.assert_array_equal(out.view(np.uint16), first[0].view(np.uint16))
        np.testing.assert_array_equal(lse, first[1])
    assert (first[0].view(np.uint16) != mufu[0].view(np.uint16)).any() or (first[1] != mufu[1]).any()


# stream-K (schedule "streamk", non-causal): (elem, D, Sq, Sk, Hq, Hkv, layout, B, SMs). Tiles T, key blocks kt:
# 8 x 4 on 3 CTAs: 3 whole tiles, then 20 iterations in runs of 6, 7, 7 (a run of a partial, a whole and a partial
# piece); 6 x 3 on 4 CTAs: fewer than two waves, so every tile is stream-K (runs of 4-5 blocks); 2 x 5 on 4 CTAs:
# fewer tiles than CTAs, runs shorter than a tile; 4 x 6 on 3 CTAs: 3 whole, one tile in 3 pieces.
STREAMK_CASES = [
    ("bf16", 64, 250, 450, 4, 2, "bshd", 1, 3),        # 4 query heads on 2 kv heads (GQA with 1 < Hkv < Hq)
    ("f16", 128, 130, 300, 3, 1, "bhsd", 1, 4),
    ("bf16", 128, 63, 600, 1, 1, "bshd", 2, 4),
    ("f16", 64, 100, 700, 2, 2, "bhsd", 2, 3),
]
STREAMK_IDS = [f"{c[0]}-d{c[1]}-{c[2]}x{c[3]}-h{c[4]}/{c[5]}-{c[6]}-b{c[7]}-sms{c[8]}" for c in STREAMK_CASES]


def _streamk_pieces(case) -> list:
    from warploom.runtime import rules
    elem, d, sq, sk, hq, hkv, layout, bsz, sms = case
    tiles, kt = rules.cdiv(sq, 128) * hq * bsz, rules.cdiv(sk, 128)
    return rules.streamk_pieces(min(sms, tiles * kt), tiles, kt)


@pytest.mark.parametrize("case", STREAMK_CASES, ids=STREAMK_IDS)
def test_streamk_schedule_matches_the_reference_whoever_finishes_last(case):
    """The stream-K kernel (a few CTAs standing in for the SMs) with its CTAs run forward, backward and shuffled
    (which piece of a split tile merges the others) and two interleavings: within the reference's bound, the same
    bits every time (the merge reads the pieces in key order, its own too), its counters back at zero after each
    launch (the fix-up buffers reused, as ops.attention does); the tiles it computes whole are bit for bit the
    persistent kernel's (one tile's arithmetic), the split ones are not (the merge rounds differently)."""
    from warploom.build import planned_attention_program
    elem, d, sq, sk, hq, hkv, layout, bsz, sms = case
    pieces = _streamk_pieces(case)
    assert any(len(p) > 1 for p in pieces), "the case must split a tile"
    q, k, v = inputs(elem, d, sq, sk, hq, hkv, layout, bsz, np.random.default_rng(sq * 1000 + sk))
    program = planned_attention_program(elem, d, False, schedule="streamk")
    assert program.attrs["schedule"] == "streamk" and kernel_name(program).endswith("_streamk_q2")
    persistent = planned_attention_program(elem, d, False, schedule="persistent")
    ref_out, ref_lse = emulate_attention(q, k, v, layout=layout, program=persistent, sms=sms, tile_order=0)
    fixup, first = {}, None
    for (seed, delay), cta_order in zip(SEEDS, ("forward", "reverse", "shuffle")):
        out, lse = emulate_attention(q, k, v, seed=seed, delay=delay, layout=layout, program=program, sms=sms,
                                     cta_order=cta_order, fixup=fixup)
        check(out, lse, q, k, v, elem, False, layout)
        assert not fixup["counters"].any()
        if first is None:
            first = (out.copy(), lse.copy())
        np.testing.assert_array_equal(out.view(np.uint16), first[0].view(np.uint16))
        np.testing.assert_array_equal(lse, first[1])
    # tile t = (query block m, head h, batch b) in tile order 0: m fastest
    blocks = -(-sq // 128)
    to_bhsd = (lambda x: x) if layout == "bhsd" else (lambda x: np.swapaxes(x, 1, 2))
    got, want = to_bhsd(first[0]).view(np.uint16), to_bhsd(ref_out).view(np.uint16)
    for t, tile_pieces in enumerate(pieces):
        m, hb = t % blocks, t // blocks
        h, b = hb % hq, hb // hq
        rows = slice(128 * m, min(sq, 128 * m + 128))
        same = (np.array_equal(got[b, h, rows], want[b, h, rows])
                and np.array_equal(first[1][b, h, rows], ref_lse[b, h, rows]))
        if len(tile_pieces) == 1:
            assert same, f"tile {t} (computed whole) differs from the persistent kernel's"


def test_streamk_counts_every_key_block_once():
    """rules.attention_streamk_run / attention_streamk_piece (what the kernel walks): the data-parallel rounds deal
    tiles 0 .. D - 1 once each (the snake deal), and each CTA's pieces after them are exactly its run's share of
    the stream-K (tile, key block) iterations as rules.streamk_pieces has them, in key order, for many shapes."""
    from warploom.runtime import rules
    for tiles in (1, 2, 5, 8, 131, 132, 133, 264, 2048):
        for kt in (1, 2, 3, 7, 64):
            for ctas in (1, 3, 4, 132):
                ctas = min(ctas, tiles * kt)           # the grid rule's CTA count
                dp = rules.streamk_dp_tiles(tiles, ctas)
                want = {c: [] for c in range(ctas)}
                for t, tile_pieces in enumerate(rules.streamk_pieces(ctas, tiles, kt)[dp:]):
                    for c, lo, hi in tile_pieces:
                        want[c].append((t, lo, hi))
                whole = []
                for c in range(ctas):
                    d, iters, lo, hi, n = rules.attention_streamk_run(tiles, kt, c, ctas)
                    assert (d, iters) == (dp, (tiles - dp) * kt)
                    rounds = dp // ctas
                    whole += [rules.snake_tile(r, c, ctas) for r in range(rounds)]
                    got, x = [], lo
                    for _ in range(n):
                        t, first, end = rules.attention_streamk_piece(x, hi, kt)
                        assert 0 <= first < end <= kt
                        got.append((t, first, end))
                        x = t * kt + end
                    assert x == hi or n == 0
                    assert got == sorted(want[c]), (tiles, kt, ctas, c)
                assert sorted(whole) == list(range(dp))
