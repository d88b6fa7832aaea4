"""The sm_100a FA4-style attention (warploom.lowering.attention_tmem), emulated thread by thread against the float64
reference (warploom.reference.ops.attention: bottom-right causal mask, LSE). No Blackwell GPU exists here: this,
ptxas and the SASS checks (tests/unit/test_assemble_sm100.py) are how these kernels are verified.

Every standard sm_100a attention kernel (bf16 and f16, head dims 64 and 128, causal or not) at small ragged sizes
(Sq, Sk not multiples of the CTA's 256 query rows or of the 128-key block; Sq > Sk and Sq < Sk), GQA 1, 2 and 4,
both layouts, three interleavings each, bit-equal across them. GQA with 1 < Hkv < Hq (4 query heads on 2 kv heads:
a kv head other than q_head / (Hq / Hkv), e.g. q_head % Hkv, changes the output) runs causal and not, and on the
shared K/V ring. Then the FA4 specifics: the conditional rescaling (a row whose max grows past the threshold mid-row
is rescaled by the correction warpgroup, one that grows by less is not, and both match the reference), the
polynomial exp2 (the kernel with every column by the polynomial still matches), and rows that see no key.
"""
import dataclasses

import numpy as np
import pytest

from warploom.build import planned_sm100_attention
from warploom.emulate import emulate_attention
from warploom.emulate.judge import judge_attention
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.reference.ops import round_to

SEEDS = [(0, 4), (1, 8), (2, 16)]            # (interleaving seed, most scheduler steps an async op takes)

# (elem, D, causal, Sq, Sk, Hq, Hkv, layout, B)
CASES = [
    ("bf16", 64, False, 130, 300, 1, 1, "bshd", 1),     # 3 key blocks: the 2-stage K/V rings wrap; ragged last
    ("bf16", 64, True, 300, 130, 4, 1, "bhsd", 1),      # Sq > Sk: the first 170 rows see no key; GQA 4; 2 CTAs
    ("bf16", 64, True, 400, 50, 1, 1, "bshd", 1),       # CTA 0's 256 rows see no key: no key block at all, O 0
    ("bf16", 128, False, 60, 129, 4, 2, "bhsd", 1),     # Q tile 1 wholly past Sq; one key in the last block; 4 q heads
                                                        # on 2 kv heads (q heads 1, 2 read other keys under h % Hkv)
    ("bf16", 128, True, 200, 260, 2, 1, "bshd", 1),     # the diagonal crosses both Q tiles and all 3 blocks
    ("f16", 64, False, 257, 64, 1, 1, "bhsd", 1),       # 2 CTAs, the second with one row; one key block
    ("f16", 64, True, 100, 350, 4, 2, "bshd", 1),       # Sq < Sk; 4 query heads on 2 kv heads (1 < Hkv < Hq)
    ("f16", 128, False, 129, 200, 1, 1, "bshd", 2),     # 2 batches
    ("f16", 128, True, 130, 130, 1, 1, "bhsd", 1),
]
assert {(e, d, c) for e, d, c, *_ in CASES} == {(e, d, c) for e in ("bf16", "f16") for d in (64, 128)
                                                for c in (False, True)}
IDS = [f"{e}-d{d}-{'causal' if c else 'full'}-{sq}x{sk}-h{hq}/{hkv}-{lay}-b{b}"
       for e, d, c, sq, sk, hq, hkv, lay, b in CASES]


def inputs(elem, d, sq, sk, hq, hkv, layout, bsz, rng):
    shape = (lambda s, h: (bsz, s, h, d)) if layout == "bshd" else (lambda s, h: (bsz, h, s, d))
    return tuple(round_to(rng.standard_normal(shape(s, h)), elem) for s, h in ((sq, hq), (sk, hkv), (sk, hkv)))


def check(out, lse, q, k, v, elem, causal, layout, scale=None):
    assert out.dtype == NUMPY_ELEMS[elem] and lse.dtype == np.float32
    verdict = judge_attention(out, lse, q, k, v, elem, causal, layout, scale=scale)
    assert verdict.ok, verdict.problem


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_attention_matches_the_reference(case):
    elem, d, causal, sq, sk, hq, hkv, layout, bsz = case
    q, k, v = inputs(elem, d, sq, sk, hq, hkv, layout, bsz, np.random.default_rng(sq * 1000 + sk))
    program = planned_sm100_attention(elem, d, causal)
    first = None
    for seed, delay in SEEDS:
        out, lse = emulate_attention(q, k, v, causal=causal, seed=seed, delay=delay, layout=layout, program=program)
        check(out, lse, q, k, v, elem, causal, layout)
        if first is None:
            first = (out.copy(), lse.copy())
        else:   # the interleaving changes no bit: each thread's arithmetic order is fixed by the program
            np.testing.assert_array_equal(out.view(np.uint16), first[0].view(np.uint16))
            np.testing.assert_array_equal(lse, first[1])


def _growing(d, sk, jump, rng, elem="bf16"):
    """One head; keys of the second block score `jump` (in log2 units after the scale) above those of the first:
    the running max of every row grows by about `jump` at block 1."""
    q = np.abs(rng.standard_normal((1, 1, 100, d))) / np.sqrt(d)
    k = rng.standard_normal((1, 1, sk, d)) * 0.1
    k[:, :, 128:] += 1.0                            # block 1: s = q . k about sum(q) larger
    q *= jump / (np.log2(np.e) / np.sqrt(d)) / q.sum(axis=-1, keepdims=True)   # sum(q) * scale_log2 = jump
    v = rng.standard_normal((1, 1, sk, d))
    return (round_to(x, elem) for x in (q, k, v))


# (elem, jump, rescales). The last two: a wrong rescale decision changes the judged output, not only the store count
# (an inverted threshold test never moves the max off -inf, so P = 2^s): f16, a jump of 20 puts P of the stale max at
# 2^20, past f16's 65504; bf16, a jump of 160 puts it past f32's range (exp2 = inf, then inf / inf)
RESCALE_CASES = [("bf16", 20.0, True), ("bf16", 4.0, False), ("f16", 20.0, True), ("bf16", 160.0, True)]


@pytest.mark.parametrize("elem, jump, rescales", RESCALE_CASES,
                         ids=["past-threshold", "within", "f16-past-threshold", "bf16-far-past-threshold"])
def test_conditional_rescaling(elem, jump, rescales):
    """FA4 rescales O only when a row's max grew past the threshold (8 in log2 units): with a jump of 20 (or 160) at
    the second key block the correction warpgroup rescales O in TMEM (its tcgen05.st show in the count), with a jump
    of 4 it does not (P then reaches 2^4, still exact after the final normalization); all match the reference. With
    the max kept where it should move, P of the second block overflows f16 at a jump of 20 and f32 at 160."""
    program = planned_sm100_attention(elem, 64, False)
    assert program.attrs["rescale_threshold"] == 8.0
    q, k, v = _growing(64, 200, jump, np.random.default_rng(3), elem)
    report: list = []
    out, lse = emulate_attention(q, k, v, layout="bhsd", program=program, report=report)
    check(out, lse, q, k, v, elem, False, "bhsd")
    # the softmax warpgroups store P: 2 Q tiles x 4 warps x (128 keys / 32 columns a load) x 2 key blocks; the
    # correction adds D / 32 per warp whose quadrant holds a rescaled row (Q tile 1 is past Sq = 100: zero scores)
    softmax_stores = 2 * 4 * 4 * 2
    stores = report[0].stats["tcgen05_st"]
    assert (stores > softmax_stores) == rescales, (stores, softmax_stores)


def test_every_exp2_by_the_polynomial():
    """exp2_poly = 1: every P element by the FMA polynomial (warploom.lowering.attention_tmem);
    the result stays within the reference's bound (the polynomial's relative error, below 8e-5, is under the
    16-bit rounding of P)."""
    program = planned_sm100_attention("f16", 64, True)
    program = dataclasses.replace(program, attrs={**program.attrs, "exp2_poly": 1.0})
    q, k, v = inputs("f16", 64, 150, 200, 1, 1, "bhsd", 1, np.random.default_rng(11))
    out, lse = emulate_attention(q, k, v, causal=True, layout="bhsd", program=program)
    check(out, lse, q, k, v, "f16", True, "bhsd")


def test_scale_and_no_lse_pointer():
    q, k, v = inputs("bf16", 64, 70, 90, 2, 2, "bshd", 1, np.random.default_rng(5))
    out, lse = emulate_attention(q, k, v, causal=True, scale=0.3, with_lse=False,
                                 program=planned_sm100_attention("bf16", 64, True))
    assert lse is None
    verdict = judge_attention(out, None, q, k, v, "bf16", True, "bshd", scale=0.3)
    assert verdict.ok, verdict.problem


SHARED_KV = [("bf16", 64, True, 200, 500, 4, 2, "bshd", 1),        # 3-4 key blocks through 3 slots: K and V turn
             ("f16", 128, False, 130, 520, 1, 1, "bhsd", 1)]       # over the ring in every slot, phases wrap
# the causal case: 4 query heads on 2 kv heads (GQA with 1 < Hkv < Hq on the shared ring)


@pytest.mark.parametrize("case", SHARED_KV, ids=[f"{e}-d{d}-{'causal' if c else 'full'}-{sq}x{sk}"
                                                 for e, d, c, sq, sk, *_ in SHARED_KV])
def test_shared_kv_ring(case):
    """use_shared_kv: K and V through one ring of 3 slots (K of block j at position 2j, V at 2j + 1), three
    interleavings, bit-equal to the kernel with separate K and V rings (the same arithmetic, other smem slots)."""
    elem, d, causal, sq, sk, hq, hkv, layout, bsz = case
    q, k, v = inputs(elem, d, sq, sk, hq, hkv, layout, bsz, np.random.default_rng(sq + sk))
    program = planned_sm100_attention(elem, d, causal, shared_kv=True)
    assert program.rings["kv"].uses == 2 and program.rings["kv"].stages == 3
    separate, _ = emulate_attention(q, k, v, causal=causal, layout=layout, program=planned_sm100_attention(elem, d, causal))
    for seed, delay in SEEDS:
        out, lse = emulate_attention(q, k, v, causal=causal, seed=seed, delay=delay, layout=layout, program=program)
        check(out, lse, q, k, v, elem, causal, layout)
        np.testing.assert_array_equal(out.view(np.uint16), separate.view(np.uint16))


def test_threshold_zero_is_the_classic_online_softmax():
    """rescale_threshold = 0 (wl-tile{rescale-threshold=0}): the max moves at every growth and O is rescaled each
    time, as the classic online softmax does; with a jump of 4 (under the default threshold: no rescale there) the
    correction warpgroup now rescales, and the result still matches the reference."""
    program = planned_sm100_attention("bf16", 64, False)
    program = dataclasses.replace(program, attrs={**program.attrs, "rescale_threshold": 0.0})
    q, k, v = _growing(64, 200, 4.0, np.random.default_rng(3))
    report: list = []
    out, lse = emulate_attention(q, k, v, layout="bhsd", program=program, report=report)
    check(out, lse, q, k, v, "bf16", False, "bhsd")
    assert report[0].stats["tcgen05_st"] > 2 * 4 * 4 * 2        # more than the softmax's P stores


def test_packed_pairs_give_the_scalar_polynomials_bits(monkeypatch):
    """The softmax computes the polynomial's columns two at a time on vector<2xf32> (packed f32x2 FMAs on sm_100a:
    emit.exp2.exp2_fma_x2); elementwise they are the scalar steps, so the kernel's output and LSE are bit for bit
    those of the scalar version (every column on the polynomial: exp2_poly = 1)."""
    from warploom.lowering import attention
    from warploom.lowering.emit.exp2 import exp2_fma
    program = planned_sm100_attention("bf16", 64, True)
    program = dataclasses.replace(program, attrs={**program.attrs, "exp2_poly": 1.0})
    q, k, v = inputs("bf16", 64, 130, 200, 1, 1, "bshd", 1, np.random.default_rng(17))
    pairs = emulate_attention(q, k, v, causal=True, layout="bshd", program=program)
    monkeypatch.setattr(attention, "exp2_fma_x2", lambda b, x0, x1: (exp2_fma(b, x0), exp2_fma(b, x1)))
    scalar = emulate_attention(q, k, v, causal=True, layout="bshd", program=program)
    np.testing.assert_array_equal(pairs[0].view(np.uint16), scalar[0].view(np.uint16))
    np.testing.assert_array_equal(pairs[1], scalar[1])
    check(*pairs, q, k, v, "bf16", True, "bshd")
