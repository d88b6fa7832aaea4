"""Attention with score and mask modifiers (warploom.score; issue 34), emulated on both targets against the float64
reference of the same graph (warploom.reference.ops.attention with the same ScoreMods).

Each variant is traced from Python once, lowered into the shared softmax of the sm_90a (FA3-style) and sm_100a
(FA4-style) kernels, and run with its runtime scalars as kernel arguments: softcap (tanh from ex2.approx and
div.rn) with the causal mask, a symmetric sliding window with an ALiBi bias whose slopes come from the head index,
and a prefix-LM mask that also leaves some rows with no key (their output exactly 0, LSE -inf). GQA with
1 < Hkv < Hq, Sq != Sk, ragged sizes, both element types and layouts. The sm_100a kernels have never run on
hardware here: this, ptxas and the SASS checks are how they are verified.
"""
import numpy as np
import pytest

from warploom.build import planned_attention_program, planned_sm100_attention
from warploom.emulate import emulate_attention
from warploom.emulate.judge import judge_attention
from warploom.reference.ops import attention as reference_attention
from warploom.reference.ops import round_to
from warploom.score import exp2, nondecreasing, tanh, trace_mods, where


def softcap(score, b, h, q_idx, kv_idx, cap):
    return cap * tanh(score / cap)


def alibi(score, b, h, q_idx, kv_idx, heads):
    slope = exp2(-8.0 * (h + 1) / heads)                     # ALiBi's geometric slopes, from the head index
    return score - slope * abs(q_idx - kv_idx)


def window(b, h, q_idx, kv_idx, size):                       # symmetric: |q - kv| <= size
    return (q_idx - kv_idx <= size) & (kv_idx - q_idx <= size)


def prefix_lm(b, h, q_idx, kv_idx, prefix, first_row):       # the prefix is bidirectional; rows < first_row see none
    return ((kv_idx <= q_idx) | (kv_idx < prefix)) & (q_idx >= first_row)


VARIANTS = {
    "softcap": (softcap, None, {"cap": 20.0}),
    "alibi-window": (alibi, window, {"heads": 4, "size": 50}),
    "prefix-lm": (None, prefix_lm, {"prefix": 37, "first_row": 5}),
}

# (target, elem, D, causal, variant, B, Sq, Sk, Hq, Hkv, layout)
CASES = [
    ("sm_90a", "bf16", 64, True, "softcap", 1, 130, 200, 4, 2, "bshd"),
    ("sm_90a", "f16", 128, False, "alibi-window", 1, 100, 200, 4, 2, "bhsd"),
    ("sm_90a", "bf16", 64, False, "prefix-lm", 1, 150, 140, 2, 1, "bshd"),
    ("sm_100a", "bf16", 64, True, "softcap", 1, 130, 200, 4, 2, "bshd"),
    ("sm_100a", "f16", 128, False, "alibi-window", 1, 100, 200, 4, 2, "bhsd"),
    ("sm_100a", "bf16", 64, False, "prefix-lm", 1, 150, 140, 2, 1, "bshd"),
]
IDS = [f"{t}-{e}-d{d}-{'causal' if c else 'full'}-{var}-{sq}x{sk}-h{hq}/{hkv}-{lay}"
       for t, e, d, c, var, _, sq, sk, hq, hkv, lay in CASES]


def inputs(elem, d, bsz, sq, sk, hq, hkv, layout, rng):
    shape = (lambda s, h: (bsz, s, h, d)) if layout == "bshd" else (lambda s, h: (bsz, h, s, d))
    # scores of a few units: softcap 20 bends them, and the mask and bias decide which keys dominate
    return tuple(round_to(rng.standard_normal(shape(s, h)) * scale, elem)
                 for (s, h), scale in (((sq, hq), 1.5), ((sk, hkv), 1.5), ((sk, hkv), 1.0)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_modified_attention_matches_the_reference(case):
    target, elem, d, causal, variant, bsz, sq, sk, hq, hkv, layout = case
    score_mod, mask_mod, scalars = VARIANTS[variant]
    mods, values = trace_mods(score_mod, mask_mod, scalars)
    assert values == tuple(scalars[n] for n, _ in mods.scalars)
    plan = planned_attention_program if target == "sm_90a" else planned_sm100_attention
    program = plan(elem, d, causal, mods=mods)
    q, k, v = inputs(elem, d, bsz, sq, sk, hq, hkv, layout, np.random.default_rng(sq + sk))
    out, lse = emulate_attention(q, k, v, causal=causal, layout=layout, program=program, scalars=scalars)
    verdict = judge_attention(out, lse, q, k, v, elem, causal, layout, mods=mods, scalars=scalars)
    assert verdict.ok, verdict.problem
    # the modifiers changed the result: the same call without them is far off
    plain = reference_attention(q, k, v, causal=causal, layout=layout)
    assert np.abs(out.astype(np.float64) - plain).max() > 0.05
    if variant == "prefix-lm":           # rows 0..4 see no key: exactly 0 and LSE -inf, never NaN
        rows = out[:, :5] if layout == "bshd" else out[:, :, :5]
        assert (rows == 0).all() and np.isneginf(lse[:, :, :5]).all()


def test_another_scalar_value_runs_the_same_kernel_and_changes_the_result():
    """The softcap value is a kernel argument: one program, two values, each matching its own reference."""
    mods, _ = trace_mods(softcap, None, {"cap": 20.0})
    assert trace_mods(softcap, None, {"cap": 3.0})[0] == mods
    program = planned_attention_program("bf16", 64, False, mods=mods)
    q, k, v = inputs("bf16", 64, 1, 70, 90, 1, 1, "bshd", np.random.default_rng(7))
    outs = []
    for cap in (20.0, 3.0):
        out, lse = emulate_attention(q, k, v, layout="bshd", program=program, scalars={"cap": cap})
        verdict = judge_attention(out, lse, q, k, v, "bf16", False, "bshd", mods=mods, scalars={"cap": cap})
        assert verdict.ok, (cap, verdict.problem)
        outs.append(out.astype(np.float64))
    assert np.abs(outs[0] - outs[1]).max() > 0.01


def test_the_emulator_refuses_a_missing_scalar():
    mods, _ = trace_mods(None, window, {"size": 4})
    program = planned_attention_program("bf16", 64, False, mods=mods)
    q, k, v = inputs("bf16", 64, 1, 10, 10, 1, 1, "bshd", np.random.default_rng(1))
    with pytest.raises(ValueError, match="size"):
        emulate_attention(q, k, v, layout="bshd", program=program)


def test_where_on_the_score_masks_like_a_mask_mod():
    """A score modifier returning -inf where a condition holds drops those keys, as the same mask_mod would."""
    def causal_by_score(score, b, h, q_idx, kv_idx):
        return where(kv_idx <= q_idx, score, -float("inf"))
    mods, _ = trace_mods(causal_by_score, None, {})
    q, k, v = inputs("f16", 64, 1, 90, 90, 1, 1, "bhsd", np.random.default_rng(3))
    out, lse = emulate_attention(q, k, v, layout="bhsd", program=planned_attention_program("f16", 64, False, mods=mods))
    verdict = judge_attention(out, lse, q, k, v, "f16", True, "bhsd")         # the plain causal reference
    assert verdict.ok, verdict.problem


def left_window(b, h, q_idx, kv_idx, size):
    return q_idx - kv_idx <= size


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_window_walks_only_the_blocks_it_keeps(target):
    """Block sparsity: with a causal left window of 100 keys over 640 rows and keys (tiles of 128 keys), each query
    tile loads only the key blocks holding a key some row of it keeps, counted here from the mask at every
    (row, key): the emulator's TMA load count is Q's boxes per tile plus K and V per walked block (the plain causal
    kernel walks 15 blocks, the window 9 on the 128-row tiles, 7 on the FA4 kernel's 256-row ones)."""
    values = {"size": 100}
    mods, _ = trace_mods(None, left_window, values)
    plan = planned_attention_program if target == "sm_90a" else planned_sm100_attention
    program = plan("bf16", 64, True, mods=mods)
    bm = program.attrs["tile"][0]
    q, k, v = inputs("bf16", 64, 1, 640, 640, 1, 1, "bshd", np.random.default_rng(5))
    report = []
    out, lse = emulate_attention(q, k, v, causal=True, layout="bshd", program=program, scalars=values, report=report)
    verdict = judge_attention(out, lse, q, k, v, "bf16", True, "bshd", mods=mods, scalars=values)
    assert verdict.ok, verdict.problem
    rows, keys = np.meshgrid(np.arange(640), np.arange(640), indexing="ij")
    kept = (keys <= rows) & (rows - keys <= 100)
    walked = sum(kept[i:i + bm, j:j + 128].any() for i in range(0, 640, bm) for j in range(0, 640, 128))
    assert walked == {128: 9, 256: 7}[bm]
    tiles = -(-640 // bm)
    assert report[0].stats["tma_loads"] == tiles * (bm // 128) + 2 * walked, report[0]


def relative_bias(score, b, h, q_idx, kv_idx, bias, shift):      # T5-style: a learned bias per head and distance
    return score + bias[h, q_idx - kv_idx + shift]


def same_document(b, h, q_idx, kv_idx, doc_id):                 # packed documents: a key of the query's own only
    return doc_id[q_idx] == doc_id[kv_idx]


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_captured_tensors_bias_table_and_document_ids(target):
    """Captured tensors: a relative-position bias table [Hq, Sq + Sk - 1] (f32, indexed by the head and the shifted
    distance) and a document id per token (i32, packed documents of 30, 70, 60 and 40 tokens), loaded per score;
    their addresses and strides are kernel arguments. Ragged sizes (150 rows and keys: the last block's keys past
    Sk are clamped into the tables), GQA 2/1; against the float64 reference of the same graph."""
    sq = sk = 150
    rng = np.random.default_rng(11)
    scalars = {"bias": (rng.standard_normal((2, sq + sk - 1)) * 2).astype(np.float32), "shift": sk - 1,
               "doc_id": np.repeat(np.arange(4), [30, 50, 40, 30]).astype(np.int32)}
    mods, _ = trace_mods(relative_bias, same_document, scalars)
    assert [t for t, _, _ in mods.tensors] == ["bias", "doc_id"]
    plan = planned_attention_program if target == "sm_90a" else planned_sm100_attention
    program = plan("bf16", 64, False, mods=mods)
    q, k, v = inputs("bf16", 64, 1, sq, sk, 2, 1, "bshd", rng)
    out, lse = emulate_attention(q, k, v, layout="bshd", program=program, scalars=scalars)
    verdict = judge_attention(out, lse, q, k, v, "bf16", False, "bshd", mods=mods, scalars=scalars)
    assert verdict.ok, verdict.problem
    plain = reference_attention(q, k, v, layout="bshd")
    assert np.abs(out.astype(np.float64) - plain).max() > 0.05


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_sorted_document_ids_walk_only_their_blocks(target):
    """Block sparsity from document ids (issue 34): packed documents of 150, 300, 90 and 160 tokens with causal,
    ragged (700 rows and keys), GQA 2/1, the ids given three ways. Declared non-decreasing
    (warploom.score.nondecreasing), each query tile walks the key blocks between the first and last holding a key of
    its own documents (the bisection over the ids' ends); undeclared, the host's block table (warploom.score.table)
    lists exactly the blocks holding one; as float32 ids neither applies and every causal block is walked. Counted
    here from the mask at every (row, key) and read off the emulator's TMA loads (Q's boxes per tile, K and V per
    walked block, for each of the 2 heads); all three give the same bits, against the float64 reference."""
    lengths = [150, 300, 90, 160]
    s = sum(lengths)
    ids = np.repeat(np.arange(4), lengths).astype(np.int32)
    rows, keys = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
    kept = (keys <= rows) & (ids[rows] == ids[keys])
    q, k, v = inputs("bf16", 64, 1, s, s, 2, 1, "bshd", np.random.default_rng(5))
    plan = planned_attention_program if target == "sm_90a" else planned_sm100_attention
    loads, outs = {}, {}
    for form, given in (("sorted", nondecreasing(ids)), ("table", ids), ("dense", ids.astype(np.float32))):
        scalars = {"doc_id": given}
        mods, _ = trace_mods(None, same_document, scalars)
        assert mods.tabled == (form == "table")
        program = plan("bf16", 64, True, mods=mods)
        bm = program.attrs["tile"][0]
        report = []
        out, lse = emulate_attention(q, k, v, causal=True, layout="bshd", program=program, scalars=scalars,
                                     report=report)
        verdict = judge_attention(out, lse, q, k, v, "bf16", True, "bshd", mods=mods, scalars=scalars)
        assert verdict.ok, verdict.problem
        loads[form] = report[0].stats["tma_loads"]
        outs[form] = (out, lse)
    for form in ("table", "dense"):                                             # skipped blocks added nothing
        assert all(np.array_equal(a, b) for a, b in zip(outs[form], outs["sorted"]))
    tiles = -(-s // bm)
    spanned = listed = 0
    for i in range(0, s, bm):
        some = [j for j in range(0, s, 128) if kept[i:i + bm, j:j + 128].any()]
        spanned += (some[-1] - some[0]) // 128 + 1
        listed += len(some)
    causal_blocks = sum(-(-min(i + bm, s) // 128) for i in range(0, s, bm))
    assert loads["sorted"] == 2 * (tiles * (bm // 128) + 2 * spanned)
    assert loads["table"] == 2 * (tiles * (bm // 128) + 2 * listed)
    assert loads["dense"] == 2 * (tiles * (bm // 128) + 2 * causal_blocks) > loads["sorted"]


@pytest.mark.parametrize("target,causal", [("sm_90a", False), ("sm_90a", True), ("sm_100a", False),
                                           ("sm_100a", True)])
def test_block_table_walks_the_blocks_an_element_mask_keeps(target, causal):
    """A mask read from a captured [H, Sq, Sk] tensor (`keep[h, q_idx, kv_idx] != 0`, what a block-sparse pattern
    from Python looks like): the bounds know nothing of it, so the host's block table (warploom.score.table) lists
    each query tile's key blocks. Per head and 64 x 64 cell the pattern is empty, full or random, ragged (300 x 420),
    GQA 2/1, with causal and without; some tiles keep nothing at all (no Q load, zero rows). The emulator's TMA loads
    are the table's blocks exactly (K and V for each listed block, Q for each tile with one), and the output is the
    float64 reference's."""
    rng = np.random.default_rng(11 + causal)
    sq, sk, hq, cell = 300, 420, 2, 64
    kinds = rng.choice(3, size=(hq, -(-sq // cell), -(-sk // cell)), p=[0.5, 0.25, 0.25])   # empty, full, random
    kinds[:, 1] = 0                                                             # rows 64 .. 127 keep nothing
    keep = np.zeros((hq, sq, sk), np.int32)
    for (h, i, j), kind in np.ndenumerate(kinds):
        cellv = keep[h, i * cell:(i + 1) * cell, j * cell:(j + 1) * cell]
        cellv[:] = 1 if kind == 1 else (rng.random(cellv.shape) < 0.5) if kind == 2 else 0
    scalars = {"keep": keep}
    mods, _ = trace_mods(None, lambda b, h, q_idx, kv_idx, keep: keep[h, q_idx, kv_idx] != 0, scalars)
    assert mods.tabled
    plan = planned_attention_program if target == "sm_90a" else planned_sm100_attention
    program = plan("bf16", 64, causal, mods=mods)
    bm, bn, _ = program.attrs["tile"]
    q, k, v = inputs("bf16", 64, 1, sq, sk, hq, 1, "bshd", rng)
    report = []
    out, lse = emulate_attention(q, k, v, causal=causal, layout="bshd", program=program, scalars=scalars,
                                 report=report)
    verdict = judge_attention(out, lse, q, k, v, "bf16", causal, "bshd", mods=mods, scalars=scalars)
    assert verdict.ok, verdict.problem
    rows, keys = np.meshgrid(np.arange(sq), np.arange(sk), indexing="ij")
    seen = (keep != 0) & ((keys <= rows + sk - sq) if causal else True)
    expected = 0
    for h in range(hq):
        for i in range(0, sq, bm):
            listed = sum(seen[h, i:i + bm, j:j + bn].any() for j in range(0, sk, bn))
            expected += (bm // 128 if listed else 0) + 2 * listed
    assert report[0].stats["tma_loads"] == expected
    assert np.all(out[0, 64:128] == 0)                                          # rows that keep no key


def test_ids_declared_sorted_out_of_order_are_refused():
    """The emulator refuses ids declared non-decreasing that are not, as ops.attention does before a launch (the
    kernel would skip key blocks the mask keeps), naming the first pair out of order."""
    ids = np.array([0, 0, 1, 1, 0, 2, 2, 2, 2, 2], np.int32)
    scalars = {"doc_id": nondecreasing(ids)}
    mods, _ = trace_mods(None, same_document, scalars)
    program = planned_attention_program("bf16", 64, True, mods=mods)
    q, k, v = inputs("bf16", 64, 1, 10, 10, 1, 1, "bshd", np.random.default_rng(1))
    with pytest.raises(ValueError, match=r"doc_id\[3\] = 1 > doc_id\[4\] = 0"):
        emulate_attention(q, k, v, causal=True, layout="bshd", program=program, scalars=scalars)


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_a_tensor_read_per_batch_row_bounds_the_walk(target):
    """prefix[b] (a bidirectional prefix of its own length per batch row, read at b only) is one value over a tile,
    so the kernel's bounds read it (warploom.score.bounds `Known`): each tile walks from the first to the last key
    block its rows keep, per batch row, as the TMA loads show; the float64 reference's output."""
    def prefix_per_batch(b, h, q_idx, kv_idx, prefix):
        return (kv_idx <= q_idx) | (kv_idx < prefix[b])
    prefix = np.array([50, 300], np.int32)
    sq = sk = 400
    scalars = {"prefix": prefix}
    mods, _ = trace_mods(None, prefix_per_batch, scalars)
    assert not mods.tabled
    plan = planned_attention_program if target == "sm_90a" else planned_sm100_attention
    program = plan("bf16", 64, False, mods=mods)
    bm = program.attrs["tile"][0]
    q, k, v = inputs("bf16", 64, 2, sq, sk, 2, 1, "bshd", np.random.default_rng(9))
    report = []
    out, lse = emulate_attention(q, k, v, layout="bshd", program=program, scalars=scalars, report=report)
    verdict = judge_attention(out, lse, q, k, v, "bf16", False, "bshd", mods=mods, scalars=scalars)
    assert verdict.ok, verdict.problem
    rows, keys = np.meshgrid(np.arange(sq), np.arange(sk), indexing="ij")
    expected = 0
    for b in range(2):
        kept = (keys <= rows) | (keys < prefix[b])
        for i in range(0, sq, bm):
            some = [j for j in range(0, sk, 128) if kept[i:i + bm, j:j + 128].any()]
            expected += 2 * (bm // 128 + 2 * ((some[-1] - some[0]) // 128 + 1))          # 2 heads
    assert report[0].stats["tma_loads"] == expected
