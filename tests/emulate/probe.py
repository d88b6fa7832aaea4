"""The emulator as a bug detector: emulate a few standard sm_90a and sm_100a GEMMs and attention kernels and say
whether (and how) they fail.

    python -m tests.emulate.probe [--json] [--only gemm,sm100,attention,fa4,streamk,attention-streamk,cluster,group,swap]

The mutation harness (tests/mutation) runs this in each mutated copy of the repository, so that every
deliberate bug must be caught by the emulator itself, not only by a lit or unit test. The kernels
cover both schedules, both B layouts, both block widths and both dtypes, at ragged sizes whose K
spans more k-tiles than the ring has stages (phases wrap) and, for persistent kernels, more tiles
than CTAs (ring iterations count on across tiles) in a grid of tiles that is not square. Inputs are small integers, so any correct
kernel gives the float64 result exactly; two interleavings per kernel (INTERLEAVINGS). The attention kernels (planned by the
passes, as warploom.build plans them) run at ragged sizes, causal with Sq > Sk (query blocks with no key) and
not, GQA, more key blocks than ring stages, and are judged by warploom.emulate.judge.

The verdict is the first failure: an emulator check (its error class and message), a mismatch with
the reference (how many elements, the first one), or an exception outside the emulator (the
lowering itself broke). Exit status 0 when every kernel matched, 1 otherwise.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import traceback

import numpy as np

# (dtype, b_layout, block_n, schedule, M, N, K, SMS)
CASES = [
    ("bf16", "kn", 128, "grid", 130, 136, 328, None),
    ("bf16", "nk", 256, "grid", 130, 264, 200, None),
    ("bf16", "kn", 256, "persistent", 130, 520, 200, 2),      # 2 x 3 tiles: a tile order that is not a
    ("f16", "nk", 128, "persistent", 330, 136, 328, 2),       # permutation shows (3 x 2 tiles)
]
# sm_100a (tcgen05, TMEM; never run on hardware here): both B layouts, both widths, both dtypes; SMS = 2 and 5-6 tiles,
# so each CTA's two accumulator stages turn over and the operand ring counts on across tiles
SM100_CASES = [
    ("bf16", "kn", 256, "persistent", 130, 520, 200, 2),
    ("f16", "nk", 128, "persistent", 330, 136, 328, 2),
    ("bf16", "nk", 256, "persistent", 300, 520, 200, 2, 256),    # a CTA pair (cta_group::2): 2 x 3 pair tiles
]
# stream-K (sm_90a): tiles of 2 and 3+ pieces, CTAs whose run lies inside one tile, whole tiles, data-parallel tiles
# before the stream-K ones; each seed runs the
# CTAs in another order (forward, then shuffled), so another CTA sums a shared tile
STREAMK_CASES = [
    ("bf16", "kn", 128, "streamk", 129, 257, 650, 13, 128),
    ("bf16", "nk", 128, "streamk", 330, 520, 330, 4, 128),     # 8 data-parallel tiles, then 7 stream-K ones
    ("f16", "nk", 128, "streamk", 33, 300, 1100, 9, 64),
]
# 2x1 clusters sharing B by multicast (sm_90a, persistent; the last field: cluster_m): an odd count of 128-row tiles
# (a cluster's second CTA without rows) and 2 clusters walking 2+ tiles each; B split by boxes ([K, N]) and by the rows
# of its one box ([N, K], 128 columns)
CLUSTER_CASES = [
    ("bf16", "kn", 256, "persistent", 300, 520, 200, 4, 128, 2),
    ("f16", "nk", 128, "persistent", 390, 264, 136, 4, 128, 2),
]
# the persistent walk in bands of rows of tiles (sm_90a; the last field: group_m): a last band with fewer rows, CTAs
# (clusters) walking 5+ tiles each; one kernel of one CTA per tile, one of 2x1 clusters (bands of pair tiles)
GROUP_CASES = [
    ("f16", "nk", 128, "persistent", 650, 300, 72, 3, 128, 1, 4),     # 6 x 3 tiles, bands of 4 and 2 rows
    ("bf16", "kn", 256, "persistent", 1100, 520, 72, 4, 128, 2, 2),   # 5 x 3 pair tiles, bands of 2, 2 and 1
]
# swap-AB (sm_90a, grid, 8 stages, C stored transposed; the last field: swap): M inside one tile and over two, K of 11
# k-tiles over the 8-stage ring; B [K, N] as the wgmma's MN-major A; one and two consumer warpgroups
SWAP_CASES = [
    ("bf16", "kn", 64, "grid", 19, 200, 650, None, 16, 1, 1, True),
    ("f16", "nk", 128, "grid", 5, 136, 200, None, 8, 1, 1, True),
]
# the interleavings each kernel runs under: (seed, scheduler order). "random" mixes warps uniformly; "priority" lets
# the seed's highest-priority warp race ahead of its partners as far as the barriers allow (a warpgroup handing
# over twice before its partner took the first hand-over shows there, and rarely under "random")
INTERLEAVINGS = ((0, "random"), (1, "priority"))
DELAY = 8
# (dtype, head dim, causal, B, Sq, Sk, Hq, Hkv, layout, plan options: planned_attention_program's block_m, q_stages)
# the standard kernels of head dims 64 and 128 are persistent: emulated on 3 CTAs, each walks 2 tiles or more
ATTENTION_CASES = [
    ("bf16", 64, True, 1, 300, 60, 4, 1, "bshd", {}),       # 240 rows see no key: tiles with no key block; GQA 4
    # 3 key blocks over a 2-stage ring; ragged last block; 2 of each 8 exp2 by the FMA polynomial (wl-tile{exp2-poly})
    ("f16", 128, False, 2, 70, 400, 2, 1, "bhsd", {"exp2_poly": 0.25}),
    ("bf16", 64, True, 1, 250, 300, 2, 1, "bshd", {"block_m": 192}),    # three consumer warpgroups taking turns
    # two Q stages (the next tile's Q loads during this one): 8 tiles over 3 CTAs, so Q's stages turn over and
    # its phases wrap; 4 query heads on 2 kv heads (GQA with 1 < Hkv < Hq: a kv head of q_head % Hkv differs)
    ("bf16", 64, False, 1, 250, 140, 4, 2, "bshd", {"q_stages": 2}),
]
# the stream-K attention (non-causal; the "attention-streamk" family, apart from the stream-K GEMMs' "streamk", so
# that a bug in the attention's own code is not first run past the GEMM cases, which cannot catch it): 8 tiles on 3
# CTAs = 3 whole tiles, then 5 tiles' 20 key-block iterations in runs of 6, 7, 7: split tiles of 2, 3 and 4
# pieces' worth, one run of a partial, a whole and a partial piece; GQA 2; the ragged last key block in every piece that ends a tile
STREAMK_ATTENTION_CASES = [
    ("bf16", 64, False, 1, 250, 450, 4, 2, "bshd", {"schedule": "streamk"}),
]

# the sm_100a attention (FA4-style; never run on hardware here), grid: (dtype, head dim, causal, B, Sq, Sk, Hq, Hkv,
# layout, grow). grow: positive queries and shifted keys: keys 64.. of the first block score about 26 (log2 units)
# above its first 32-column chunk, which the softmax reads alone first (an f16 P of a max missing them overflows), and
# keys past the first block about 13 higher again, so every row's max grows past the rescaling threshold mid-row and
# the correction warpgroup rescales O in TMEM; "skv": the shared K/V ring instead
FA4_CASES = [
    ("bf16", 64, True, 1, 300, 130, 4, 2, "bshd", False),   # 2 CTAs; Sq > Sk: rows with no key; 4 q heads, 2 kv heads
    ("f16", 128, False, 1, 130, 300, 1, 1, "bhsd", True),   # 3 key blocks over the 2-stage rings; rescaled rows
    ("bf16", 64, False, 1, 100, 520, 1, 1, "bshd", "skv"),  # K and V through one ring of 3 slots (use_shared_kv)
]


# the attention with score and mask modifiers (warploom.score; the "mods" family), on both targets: an ALiBi bias
# from the head index under a softcap (scalars cap, heads) and a prefix-LM mask (scalar prefix) that leaves rows
# 0..2 with no key, within a window of 30 keys back (so the diagonal block is partial, the second key block empty:
# the key range skips it); a captured per-(head, key) bias table [4, 140] loaded per score (the ragged second key
# block's keys past 140 clamp into it); GQA 4/2. (target, dtype, head dim, causal, B, Sq, Sk, Hq, Hkv, layout)
MODS_CASES = [
    ("sm_90a", "bf16", 64, False, 1, 70, 140, 4, 2, "bshd"),
    ("sm_100a", "f16", 64, False, 1, 70, 140, 4, 2, "bhsd"),
]
MODS_SCALARS = {"cap": 6.0, "heads": 4, "prefix": 41, "first_row": 3, "window": 30,
                "bias": (np.random.default_rng(4).standard_normal((4, 140)) * 2).astype(np.float32)}


def _mods_score(score, b, h, q_idx, kv_idx, cap, heads, bias):
    from warploom.score import exp2, tanh
    return cap * tanh((score - exp2(-8.0 * (h + 1) / heads) * abs(q_idx - kv_idx) + bias[h, kv_idx]) / cap)


def _mods_mask(b, h, q_idx, kv_idx, prefix, first_row, window):
    return ((kv_idx <= q_idx) | (kv_idx < prefix)) & (q_idx >= first_row) & (q_idx - kv_idx <= window)


# also in the "mods" family: packed documents of 100, 60 and 140 tokens from document ids declared non-decreasing
# (warploom.score.nondecreasing), causal: the key range of each query tile comes from the ids at its blocks' ends
# (query tile 1, rows 128..255 of documents 1 and 2, walks key block 0 for document 1's keys 100..127; query tile 0
# skips nothing it needs), the ragged last tile's boxes clipped to the 300 rows and keys
MODS_SORTED_CASES = [("sm_90a", "bf16", 64, True, 1, 300, 300, 2, 1, "bshd")]
MODS_SORTED_IDS = np.repeat(np.arange(3), [100, 60, 140]).astype(np.int32)


def _same_document(b, h, q_idx, kv_idx, doc_id):
    return doc_id[q_idx] == doc_id[kv_idx]


# also in the "mods" family: a mask read per element from a captured [2, 200, 300] tensor whose 128 x 128 cells are
# empty, full or random, other ones per head (head 0: full, empty, random / empty, full, empty; head 1: empty, random,
# full / full, empty, random), which the host's block table lists (warploom.score.table: each query tile walks its
# listed key blocks, the full ones unmasked; on sm_90a's 128-row tiles each head walks other blocks, and head 1's
# random cell (0, 1) is a block inside the problem, off any diagonal: masked only because it is not listed full);
# GQA 2/1, sm_90a without the causal mask, sm_100a with it
MODS_TABLE_CASES = [("sm_90a", "bf16", 64, False, 1, 200, 300, 2, 1, "bshd"),
                    ("sm_100a", "bf16", 64, True, 1, 200, 300, 2, 1, "bshd")]
TABLE_KINDS = np.array([[[1, 0, 2], [0, 1, 0]], [[0, 2, 1], [1, 0, 2]]])      # 0 empty, 1 full, 2 random


def _table_keep() -> np.ndarray:
    cells = np.kron(TABLE_KINDS, np.ones((128, 128), np.int32))[:, :200, :300]
    random = np.random.default_rng(6).random(cells.shape) < 0.5
    return ((cells == 1) | ((cells == 2) & random)).astype(np.int32)


# also in the "mods" family: a bidirectional prefix of its own length per batch row (prefix[b], read at b only: one
# value over a tile, which the kernel's bounds read), batch row 0's 40 keys inside key block 0, row 1's 200 past it
MODS_PREFIX_CASES = [("sm_90a", "bf16", 64, False, 2, 300, 300, 2, 1, "bshd")]
MODS_PREFIX = np.array([40, 200], np.int32)


def _prefix_per_batch(b, h, q_idx, kv_idx, prefix):
    return (kv_idx <= q_idx) | (kv_idx < prefix[b])


def _kept(b, h, q_idx, kv_idx, keep):
    return keep[h, q_idx, kv_idx] != 0


# packed variable-length sequences (the "varlen" family, ops.attention_varlen's kernels) on both targets: causal,
# GQA 4/2, sequences of more keys than queries and of fewer, one of a single query, one with no query; each sequence
# judged alone. (target, dtype, head dim, causal, query lengths, key lengths, Hq, Hkv)
VARLEN_CASES = [
    ("sm_90a", "bf16", 64, True, [5, 140, 0, 1, 60], [9, 130, 3, 20, 60], 4, 2),
    ("sm_100a", "f16", 64, True, [270, 1, 40], [200, 30, 50], 4, 2),
]

# attentions written out with score and mask ops (tests/longform.py; the "fuse" family), fused by wl-fuse and judged
# against the float64 interpreter of the graph as written: a relative-bias table and packed documents from doc_id
# (gathers, index values, a negated mask); a per-batch prefix under two masks and a scale on top. sm_90a only: the
# fusion is target-neutral; the first with 4 query heads on 2 kv heads written out (k and v repeated, wl.repeat).
# (target, variant, dtype, B, H, Hkv, Sq, Sk, D)
FUSE_CASES = [
    ("sm_90a", "bias-documents", "f16", 2, 4, 2, 70, 60, 64),
    ("sm_90a", "prefix-lm", "bf16", 2, 1, 1, 50, 90, 64),
]

FAMILIES = ("gemm", "sm100", "attention", "fa4", "streamk", "attention-streamk", "cluster", "group", "swap", "mods",
            "varlen", "fuse")
#   what `--only` picks from: sm_90a GEMMs, sm_100a GEMMs, sm_90a attention, sm_100a attention, sm_90a stream-K GEMMs,
#   sm_90a stream-K attention, sm_90a 2x1 clusters, the banded walk, the swap-AB GEMMs, the modified attention, the
#   packed-sequence attention, the attention written out and fused


def probe(families=FAMILIES) -> dict:
    """Run the cases of `families` in order; the first failure ends the probe.

    The kernel program verifier is switched off (WARPLOOM_NO_KERNEL_VERIFY): a plan it would refuse at compile
    time is lowered anyway, so that the emulator has to catch the bug on its own."""
    os.environ["WARPLOOM_NO_KERNEL_VERIFY"] = "1"
    from warploom.emulate import EmulationError, emulate_gemm
    from warploom.kernels import SMALL_M_STAGES, GemmSpec
    from warploom.reference.ops import matmul, round_to

    start = time.monotonic()
    gemms = [("sm_90a", *case) for case in CASES] if "gemm" in families else []
    gemms += [("sm_100a", *case) for case in SM100_CASES] if "sm100" in families else []
    gemms += [("sm_90a", *case) for case in STREAMK_CASES] if "streamk" in families else []
    gemms += [("sm_90a", *case) for case in CLUSTER_CASES] if "cluster" in families else []
    gemms += [("sm_90a", *case) for case in GROUP_CASES] if "group" in families else []
    gemms += [("sm_90a", *case) for case in SWAP_CASES] if "swap" in families else []
    for target, dtype, b_layout, block_n, schedule, m, n, k, sms, *rest in gemms:
        block_m, cluster_m, group_m, swap = (list(rest) + [128, 1, 1, False][len(rest):])[:4]
        spec = (GemmSpec(dtype, b_layout, block_n, SMALL_M_STAGES, target, schedule, block_m, epilogue="direct",
                         swap_ab=True) if swap else
                GemmSpec(dtype, b_layout, block_n, 4, target, schedule, block_m, cluster_m=cluster_m, group_m=group_m))
        rng = np.random.default_rng(11)
        a = round_to(rng.integers(-2, 3, (m, k)).astype(np.float64), dtype)
        b = round_to(rng.integers(-2, 3, (k, n) if b_layout == "kn" else (n, k)).astype(np.float64), dtype)
        ref = round_to(matmul(a, b, transpose_b=b_layout == "nk"), dtype)
        where = f"{spec.kernel_name} M={m} N={n} K={k}" + (f" SMS={sms}" if sms else "")
        for seed, order in INTERLEAVINGS:
            label = f"{where} seed {seed} {order}"
            try:
                ctas = ("forward", "shuffle")[seed % 2] if schedule == "streamk" else "forward"
                c = emulate_gemm(spec, a, b, seed=seed, sms=sms or 2, delay=DELAY, cta_order=ctas,
                                 order=order).astype(np.float64)
            except EmulationError as e:
                return verdict(False, type(e).__name__, label, str(e), start)
            except Exception as e:     # the lowering or the harness broke before or outside the emulation
                tb = traceback.format_exc(limit=-3)
                return verdict(False, f"exception {type(e).__name__}", label, f"{e}\n{tb}", start)
            bad = np.argwhere(~(c == ref))
            if bad.size:
                i, j = bad[0]
                return verdict(False, "mismatch", label,
                               f"{len(bad)} of {c.size} elements differ from the float64 reference; first "
                               f"C[{i}, {j}] = {c[i, j]}, expected {ref[i, j]}", start)
    from warploom.build import planned_attention_program, planned_sm100_attention
    attention = [("sm_90a", *case[:-1], False, case[-1]) for case in (ATTENTION_CASES if "attention" in families
                                                                      else ())]
    attention += [("sm_90a", *case[:-1], False, case[-1]) for case in (STREAMK_ATTENTION_CASES if "attention-streamk"
                                                                       in families else ())]
    attention += [("sm_100a", *case, None) for case in (FA4_CASES if "fa4" in families else ())]
    attention += [(*case, False, "mods") for case in (MODS_CASES if "mods" in families else ())]
    attention += [(*case, False, "sorted") for case in (MODS_SORTED_CASES if "mods" in families else ())]
    attention += [(*case, False, "table") for case in (MODS_TABLE_CASES if "mods" in families else ())]
    attention += [(*case, False, "prefix") for case in (MODS_PREFIX_CASES if "mods" in families else ())]
    for target, dtype, d, causal, bsz, sq, sk, hq, hkv, layout, grow, options in attention:
        from warploom.emulate import emulate_attention
        from warploom.emulate.judge import judge_attention
        rng = np.random.default_rng(12 if target == "sm_90a" else 13)
        shape = (lambda s_, h_: (bsz, s_, h_, d)) if layout == "bshd" else (lambda s_, h_: (bsz, h_, s_, d))
        q, k, v = (rng.standard_normal(shape(s_, h_)) for s_, h_ in ((sq, hq), (sk, hkv), (sk, hkv)))
        shared, grow = grow == "skv", grow is True
        if grow:
            q = np.abs(q)
            keys = (slice(None),) * (1 if layout == "bshd" else 2)
            k[keys + (slice(64, None),)] += 2.0
            k[keys + (slice(128, None),)] += 1.0
        q, k, v = (round_to(x, dtype) for x in (q, k, v))
        where = (f"{target} attention {dtype} D={d} {'causal' if causal else 'full'} B={bsz} Sq={sq} Sk={sk} "
                 f"H={hq}/{hkv} {layout}{' growing max' if grow else ''}{' shared K/V ring' if shared else ''}"
                 f"{''.join(f' {k} {v}' for k, v in (options if isinstance(options, dict) else {}).items())}")
        mods, scalars = None, None
        if options == "mods":
            from warploom.score import trace_mods
            mods, _ = trace_mods(_mods_score, _mods_mask, MODS_SCALARS)
            scalars, options = MODS_SCALARS, {"mods": mods}
            where += " score/mask modifiers"
        if options == "sorted":
            from warploom.score import nondecreasing, trace_mods
            scalars = {"doc_id": nondecreasing(MODS_SORTED_IDS)}
            mods, _ = trace_mods(None, _same_document, scalars)
            options = {"mods": mods}
            where += " sorted document ids"
        if options == "table":
            from warploom.score import trace_mods
            scalars = {"keep": _table_keep()}
            mods, _ = trace_mods(None, _kept, scalars)
            options = {"mods": mods}
            where += " a block table's mask"
        if options == "prefix":
            from warploom.score import trace_mods
            scalars = {"prefix": MODS_PREFIX}
            mods, _ = trace_mods(None, _prefix_per_batch, scalars)
            options = {"mods": mods}
            where += " a prefix per batch row"
        plan = (functools.partial(planned_sm100_attention, shared_kv=shared, **(options or {})) if target == "sm_100a"
                else functools.partial(planned_attention_program, **(options or {})))
        for seed, order in INTERLEAVINGS:
            label = f"{where} seed {seed} {order}"
            try:
                out, lse = emulate_attention(q, k, v, causal=causal, seed=seed, delay=DELAY, layout=layout,
                                             program=plan(dtype, d, causal), order=order, scalars=scalars)
            except EmulationError as e:
                return verdict(False, type(e).__name__, label, str(e), start)
            except Exception as e:     # the planning, the lowering or the harness broke
                tb = traceback.format_exc(limit=-3)
                return verdict(False, f"exception {type(e).__name__}", label, f"{e}\n{tb}", start)
            judged = judge_attention(out, lse, q, k, v, dtype, causal, layout, mods=mods, scalars=scalars)
            if not judged.ok:
                return verdict(False, "mismatch", label, judged.problem, start)
    varlen = VARLEN_CASES if "varlen" in families else []
    for target, dtype, d, causal, lq, lk, hq, hkv in varlen:
        from warploom.emulate import emulate_attention_varlen
        from warploom.emulate.judge import judge_attention
        cu_q, cu_k = (np.concatenate([[0], np.cumsum(x)]).astype(np.int32) for x in (lq, lk))
        rng = np.random.default_rng(14)
        q, k, v = (round_to(rng.standard_normal((rows, h, d)), dtype)
                   for rows, h in ((cu_q[-1], hq), (cu_k[-1], hkv), (cu_k[-1], hkv)))
        where = f"{target} packed attention {dtype} D={d} {'causal' if causal else 'full'} Sq={lq} Sk={lk} H={hq}/{hkv}"
        plan = planned_attention_program if target == "sm_90a" else planned_sm100_attention
        for seed, order in INTERLEAVINGS:
            label = f"{where} seed {seed} {order}"
            try:
                out, lse = emulate_attention_varlen(q, k, v, cu_q, cu_k, causal, seed=seed, delay=DELAY, order=order,
                                                    program=plan(dtype, d, causal, varlen=True))
            except EmulationError as e:
                return verdict(False, type(e).__name__, label, str(e), start)
            except Exception as e:
                tb = traceback.format_exc(limit=-3)
                return verdict(False, f"exception {type(e).__name__}", label, f"{e}\n{tb}", start)
            for i in range(len(lq)):
                rq, rk = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
                judged = judge_attention(out[None, rq], lse[None, :, rq], q[None, rq], k[None, rk], v[None, rk], dtype,
                                         causal, "bshd", batch0=i) if lq[i] else None
                if judged is not None and not judged.ok:
                    return verdict(False, "mismatch", f"{label} sequence {i}", judged.problem, start)
    fuse = FUSE_CASES if "fuse" in families else []
    for target, name, dtype, bsz, heads, kv_heads, sq, sk, d in fuse:
        from tests import longform
        from warploom.build import attention_spec_of, compile_graph
        from warploom.emulate import emulate_attention
        from warploom.emulate.judge import judge_attention
        from warploom.reference.interpret import evaluate
        where = f"{target} attention written out ({name}) {dtype} D={d} B={bsz} H={heads}/{kv_heads} Sq={sq} Sk={sk}"
        rng = np.random.default_rng(15)
        q, k, v = (round_to(rng.standard_normal((bsz, h_, s_, d)) * sc, dtype)
                   for h_, s_, sc in ((heads, sq, 1.5), (kv_heads, sk, 1.5), (kv_heads, sk, 1.0)))
        values = longform.values(name, bsz, sq, sk, heads, rng)
        tensors = {n: x for n, x in values.items() if isinstance(x, np.ndarray)}
        graph = longform.graph(name, dtype, bsz, heads, sq, sk, d, kv_heads=kv_heads)
        ref = evaluate(graph.module, {"q": q, "k": k, "v": v, **tensors},
                       scalars={n: x for n, x in values.items() if n not in tensors})[0]
        for seed, order in INTERLEAVINGS:
            label = f"{where} seed {seed} {order}"
            try:
                kernel = compile_graph(graph, target)
                causal = attention_spec_of(kernel.program, target).causal
                out, _ = emulate_attention(q, k, v, causal=causal, scale=kernel.graph_attrs["scale"], seed=seed,
                                           delay=DELAY, layout="bhsd", program=kernel.program, order=order,
                                           scalars=values)
            except EmulationError as e:
                return verdict(False, type(e).__name__, label, str(e), start)
            except Exception as e:     # the fusion, the planning, the lowering or the harness broke
                tb = traceback.format_exc(limit=-3)
                return verdict(False, f"exception {type(e).__name__}", label, f"{e}\n{tb}", start)
            judged = judge_attention(out, None, q, k, v, dtype, causal, "bhsd", reference=ref)
            if not judged.ok:
                return verdict(False, "mismatch", label, judged.problem, start)
    return verdict(True, "", "", f"{len(gemms)} GEMM, {len(attention)} attention, {len(varlen)} packed attention and "
                   f"{len(fuse)} fused written-out attention kernels x {len(INTERLEAVINGS)} interleavings match", start)


def verdict(ok: bool, check: str, where: str, message: str, start: float) -> dict:
    return {"ok": ok, "check": check, "where": where, "message": message,
            "seconds": round(time.monotonic() - start, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.emulate.probe", description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the verdict as one JSON line")
    ap.add_argument("--only", default=",".join(FAMILIES),
                    help=f"comma-separated families to run, of {', '.join(FAMILIES)} (default: all)")
    args = ap.parse_args(argv)
    families = tuple(f for f in args.only.split(",") if f)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        ap.error(f"unknown famil{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}: use {', '.join(FAMILIES)}")
    v = probe(families)
    if args.json:
        print(json.dumps(v))
    else:
        print(("ok" if v["ok"] else f"CAUGHT by {v['check']} ({v['where']})") + f": {v['message']}")
    return 0 if v["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
