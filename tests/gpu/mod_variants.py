"""The attention variants of issue 34 that the GPU tests run (tests/gpu/test_attention_mods.py) and whose kernels
`python3 -m tests.gpu.extra_kernels` builds into the AOT cache: each a score and/or mask modifier written with
warploom.score's functions (which trace on the CPU host and compute eagerly on torch tensors for the reference), its
runtime scalars (captured tensors among them), and whether the kernel is causal. No torch import here: the CPU
host traces these.
"""
from __future__ import annotations

import numpy as np

from warploom.score import nondecreasing, trace_mods
from warploom.variants import alibi, prefix_lm, softcap, symmetric_window
from warploom.variants import sliding_window as left_window  # with causal: the last `size` + 1 keys of each query


def relative_bias(score, b, h, q_idx, kv_idx, bias, shift):      # T5-style: a learned bias per head and distance
    return score + bias[h, q_idx - kv_idx + shift]


def same_document(b, h, q_idx, kv_idx, doc_id):                  # packed documents: a key of the query's own only
    return doc_id[q_idx] == doc_id[kv_idx]


def per_head(b, h, q_idx, kv_idx):                       # heads 0 and 1 see every key, the others are causal
    return (h < 2) | (kv_idx <= q_idx)


def empty_rows(b, h, q_idx, kv_idx, first_row):          # rows before first_row see no key: 0 out, -inf LSE
    return q_idx >= first_row


def prefix_per_batch(b, h, q_idx, kv_idx, prefix):       # a bidirectional prefix of its own length per batch row
    return (kv_idx <= q_idx) | (kv_idx < prefix[b])


def block_sparse(b, h, q_idx, kv_idx, pattern=np.zeros((1, 1, 1), np.int32), size=64):  # a per-head block pattern
    return pattern[h, q_idx // size, kv_idx // size] != 0


# name -> (score_mod, mask_mod, scalars, causal)
VARIANTS = {
    "softcap30-causal": (softcap, None, {"cap": 30.0}, True),
    "softcap50-causal": (softcap, None, {"cap": 50.0}, True),
    "window256-causal": (None, left_window, {"size": 256}, True),
    "window1024-causal": (None, left_window, {"size": 1024}, True),
    "window256-symmetric": (None, symmetric_window, {"size": 256}, False),
    "window1024-symmetric": (None, symmetric_window, {"size": 1024}, False),     # the symmetric-256 kernel
    "alibi-causal": (alibi, None, {"heads": 8}, True),
    "prefix-lm": (None, prefix_lm, {"prefix": 300}, False),
    "per-head": (None, per_head, {}, False),
    "empty-rows": (None, empty_rows, {"first_row": 40}, False),
    # captured tensors: the arrays here fix only the dtype and rank the kernel is traced with; the tests make tables
    # of each case's sizes (captured_scalars)
    "relative-bias": (relative_bias, None, {"bias": np.zeros((1, 1), np.float32), "shift": 0}, False),
    "document-causal": (None, same_document, {"doc_id": np.zeros(1, np.int32)}, True),
    # the same ids declared non-decreasing: the kernel walks only the key blocks of each query tile's documents
    "document-sorted-causal": (None, same_document, {"doc_id": nondecreasing(np.zeros(1, np.int32))}, True),
    "prefix-lm-batch": (None, prefix_per_batch, {"prefix": np.zeros(1, np.int32)}, False),
    # a mask its bounds cannot follow (a captured tensor at a position): the kernel walks the host's block table
    "block-sparse": (None, block_sparse, {"pattern": np.zeros((1, 1, 1), np.int32), "size": 64}, False),
}


def captured_scalars(name: str, sq: int, sk: int, hq: int, rng, bsz: int = 1) -> dict:
    """The scalars of variant `name` for a case of these sizes (numpy): a bias table [Hq, Sq + Sk - 1] and its shift,
    document ids of the longer of Sq and Sk tokens (packed documents of random lengths), a prefix length per batch
    row, or a block pattern per head; else the variant's own."""
    if name == "relative-bias":
        return {"bias": (rng.standard_normal((hq, sq + sk - 1)) * 2).astype(np.float32), "shift": sk - 1}
    if name in ("document-causal", "document-sorted-causal"):
        n = max(sq, sk)
        cuts = np.sort(rng.choice(np.arange(1, n), size=min(5, n - 1), replace=False)) if n > 1 else np.zeros(0)
        ids = np.searchsorted(cuts, np.arange(n), side="right").astype(np.int32)
        return {"doc_id": nondecreasing(ids) if name == "document-sorted-causal" else ids}
    if name == "prefix-lm-batch":
        return {"prefix": rng.integers(0, sk + 1, size=bsz).astype(np.int32)}
    if name == "block-sparse":                          # 40% of the 64 x 64 blocks kept, the diagonal's always
        pattern = rng.random((hq, -(-sq // 64), -(-sk // 64))) < 0.4
        pattern |= np.eye(pattern.shape[1], pattern.shape[2], dtype=bool)
        return {"pattern": pattern.astype(np.int32), "size": 64}
    return VARIANTS[name][2]


def traced(name: str):
    """(ScoreMods, scalars, causal) of variant `name`."""
    score_mod, mask_mod, scalars, causal = VARIANTS[name]
    return trace_mods(score_mod, mask_mod, scalars)[0], scalars, causal

# (variant, head dim, dtype, B, Sq, Sk, Hq, Hkv, layout): tests/gpu/test_attention_mods.py's cases
GPU_CASES = [
    ("softcap30-causal", 128, "bf16", 2, 1000, 1000, 8, 2, "bshd"),
    ("softcap30-causal", 64, "f16", 1, 17, 4097, 8, 8, "bhsd"),
    ("softcap50-causal", 128, "bf16", 1, 4097, 4097, 8, 1, "bshd"),         # the softcap-30 kernel, cap 50
    ("window256-causal", 128, "bf16", 1, 4097, 4097, 8, 2, "bshd"),
    ("window256-causal", 256, "bf16", 1, 1000, 1000, 8, 4, "bhsd"),
    ("window1024-causal", 128, "bf16", 1, 4097, 4097, 8, 2, "bshd"),       # the window-256 kernel, size 1024
    ("window256-symmetric", 64, "bf16", 1, 4097, 1000, 8, 2, "bshd"),
    ("alibi-causal", 128, "f16", 1, 1000, 1000, 8, 2, "bhsd"),
    ("alibi-causal", 64, "bf16", 2, 1, 17, 8, 8, "bshd"),
    ("prefix-lm", 128, "bf16", 2, 1000, 1000, 8, 2, "bshd"),
    ("per-head", 64, "f16", 1, 1000, 4097, 8, 4, "bhsd"),
    ("empty-rows", 128, "bf16", 1, 1000, 1000, 8, 2, "bshd"),
    ("softcap30-causal", 64, "bf16", 1, 300, 300, 2, 2, "bshd"),           # test_another_scalar_value_compiles_nothing
    ("relative-bias", 128, "bf16", 2, 1000, 1000, 8, 2, "bshd"),
    ("relative-bias", 64, "f16", 1, 17, 4097, 8, 4, "bhsd"),
    ("document-causal", 128, "bf16", 1, 4097, 4097, 8, 2, "bshd"),
    ("document-causal", 64, "bf16", 2, 1000, 1000, 4, 4, "bshd"),
    ("document-sorted-causal", 128, "bf16", 1, 4097, 4097, 8, 2, "bshd"),
    ("prefix-lm-batch", 128, "bf16", 3, 1000, 1000, 8, 2, "bshd"),
]

# the grid of issue 34's list: every variant at each head dim (64, 128, 256) and dtype, GQA (8/2) and MQA (8/1) in
# turn, the sizes (1, 17, 1000, 4097 among Sq and Sk, Sq != Sk) and layouts rotating
GRID_SIZES = [(1000, 1000), (17, 4097), (4097, 1000), (1, 17), (1000, 4097), (4097, 4097)]


def grid_cases() -> list:
    out = []
    for i, (variant, d, dtype) in enumerate((v, d, t) for v in VARIANTS for d in (64, 128, 256)
                                            for t in ("bf16", "f16")):
        sq, sk = GRID_SIZES[i % len(GRID_SIZES)]
        hkv = 2 if i % 2 == 0 else 1
        out.append((variant, d, dtype, 1 + i % 2, sq, sk, 8, hkv, ("bshd", "bhsd")[(i // 2) % 2]))
    return out


GPU_CASES += grid_cases()


def gpu_specs() -> list:
    """The AttentionSpecs ops.attention picks for GPU_CASES on sm_90a (the standard kernel with the modifiers)."""
    from dataclasses import replace

    from warploom.ops_attention import pick_spec
    out = []
    for variant, d, dtype, *_ in GPU_CASES:
        mods, _, causal = traced(variant)
        spec = replace(pick_spec(dtype, d, causal, "sm_90a"), mods=mods)
        if spec not in out:
            out.append(spec)
    return out


# (variant or None, head dim, dtype, query lengths, key lengths, Hq, Hkv): tests/gpu/test_attention_varlen.py's packed
# cases with modifiers (the plain ones need only the standard varlen kernels)
VARLEN_MOD_CASES = [
    ("window256-causal", 128, "bf16", [1000, 17, 4097, 1], [1000, 300, 4097, 1], 8, 2),
    ("softcap30-causal", 64, "f16", [513, 1, 200], [600, 40, 200], 4, 1),
]


def gpu_varlen_specs() -> list:
    """The AttentionSpecs ops.attention_varlen picks for VARLEN_MOD_CASES on sm_90a."""
    from warploom.ops_varlen import varlen_spec
    out = []
    for variant, d, dtype, *_ in VARLEN_MOD_CASES:
        mods, _, causal = traced(variant)
        spec = varlen_spec(dtype, d, causal, "sm_90a", mods)
        if spec not in out:
            out.append(spec)
    return out

