"""Attention variants written out as graph ops (q kᵀ -> score and mask ops -> softmax -> @ v), each beside the same
modifiers written as the Python functions warploom.score traces: wl-fuse must fold the first into the second's
ScoreMods (tests/unit/test_fuse_mods.py) and the kernel built from it must compute the graph
(tests/emulate/test_fuse_mods.py).

`VARIANTS[name](g, s)` writes the ops on the scaled scores `s` of graph `g` and returns the value the softmax takes;
`PYTHON[name]` is (score_mod, mask_mod, causal) in warploom.score's form; `values(name, sq, sk, heads, rng)` gives
the runtime scalars and captured tensors of one call.
"""
from __future__ import annotations

import numpy as np

import warploom as wl
from warploom.score import exp2, tanh

NEG_INF = float("-inf")


def softcap(g, s):
    cap = g.scalar("cap")
    return g.causal_mask(g.mul(cap, g.tanh(g.div(s, cap))))


def alibi_window(g, s):
    """ALiBi slopes from the head index, and a symmetric window as a mask."""
    h, qi, ki = g.index(s, "h"), g.index(s, "q_idx"), g.index(s, "kv_idx")
    slope = g.exp2(g.div(g.mul(-8.0, g.add(h, 1)), g.scalar("heads", "i32")))
    s = g.sub(s, g.mul(slope, g.abs(g.sub(qi, ki))))
    size = g.scalar("size", "i32")
    keep = g.and_(g.le(g.sub(qi, ki), size), g.le(g.sub(ki, qi), size))
    return g.where(keep, s, NEG_INF)


def bias_documents(g, s):
    """A learned relative-position bias table [H, Sq + Sk - 1] and packed documents from a doc_id per token (both
    graph inputs read through wl.gather), the document mask written as where(other document, -inf, s)."""
    bias, doc = g.input("bias", (s.shape[1], "R"), "f32"), g.input("doc_id", ("T",), "i32")
    h, qi, ki = g.index(s, "h"), g.index(s, "q_idx"), g.index(s, "kv_idx")
    s = g.add(s, g.gather(bias, h, g.add(g.sub(qi, ki), g.scalar("shift", "i32"))))
    other = g.ne(g.gather(doc, qi), g.gather(doc, ki))
    return g.where(other, NEG_INF, s)


def prefix_lm(g, s):
    """A bidirectional prefix of a length per batch row (a captured tensor), causal after it; rows before
    `first_row` see no key (their output is 0); the masked scores scaled by 2 on top."""
    prefix = g.input("prefix", ("B",), "i32")
    b, qi, ki = g.index(s, "b"), g.index(s, "q_idx"), g.index(s, "kv_idx")
    keep = g.or_(g.le(ki, qi), g.lt(ki, g.gather(prefix, b)))
    s = g.where(keep, s, NEG_INF)
    s = g.where(g.ge(qi, g.scalar("first_row", "i32")), s, NEG_INF)
    return g.scale(s, 2.0)             # a positive scale over the masks: it joins the attention's (0.125 * 2)


VARIANTS = {"softcap": softcap, "alibi-window": alibi_window, "bias-documents": bias_documents,
            "prefix-lm": prefix_lm}


def _softcap(score, b, h, q_idx, kv_idx, cap):
    return cap * tanh(score / cap)


def _alibi(score, b, h, q_idx, kv_idx, heads):
    return score - exp2(-8.0 * (h + 1) / heads) * abs(q_idx - kv_idx)


def _window(b, h, q_idx, kv_idx, size):
    return (q_idx - kv_idx <= size) & (kv_idx - q_idx <= size)


def _bias(score, b, h, q_idx, kv_idx, bias, shift):
    return score + bias[h, q_idx - kv_idx + shift]


def _same_document(b, h, q_idx, kv_idx, doc_id):
    return ~(doc_id[q_idx] != doc_id[kv_idx])


def _prefix(b, h, q_idx, kv_idx, prefix, first_row):
    return ((kv_idx <= q_idx) | (kv_idx < prefix[b])) & (q_idx >= first_row)


PYTHON = {"softcap": (_softcap, None, True), "alibi-window": (_alibi, _window, False),
          "bias-documents": (_bias, _same_document, False), "prefix-lm": (None, _prefix, False)}
SCALE = {"prefix-lm": 0.25}             # the fused attention's scale where it is not the graph's 0.125


def values(name: str, bsz: int, sq: int, sk: int, heads: int, rng) -> dict:
    """The runtime scalars and captured tensors of one call of variant `name`."""
    if name == "softcap":
        return {"cap": 4.0}
    if name == "alibi-window":
        return {"heads": heads, "size": max(3, sk // 4)}
    if name == "bias-documents":
        cuts = np.sort(rng.choice(np.arange(1, max(sq, sk)), size=3, replace=False))
        doc = np.searchsorted(cuts, np.arange(max(sq, sk)), side="right").astype(np.int32)
        return {"bias": (rng.standard_normal((heads, sq + sk - 1)) * 2).astype(np.float32), "shift": sk - 1,
                "doc_id": doc}
    if name == "prefix-lm":
        return {"prefix": rng.integers(0, sk, size=bsz).astype(np.int32), "first_row": 3}
    raise KeyError(name)


def graph(name: str, elem: str, bsz: int, heads: int, sq, sk, d: int, scale: float = 0.125,
          kv_heads: int | None = None) -> wl.Graph:
    """The long form of variant `name`: [B, H, S, D] inputs (bhsd), the scores scaled by `scale`; with `kv_heads`
    (fewer than `heads`) k and v have that many heads, repeated to `heads` (wl.repeat: grouped-query attention
    written out as torch's repeat_interleave writes it)."""
    g = wl.Graph(name.replace("-", "_"))
    kv_heads = kv_heads or heads
    q = g.input("q", (bsz, heads, sq, d), elem)
    k = g.input("k", (bsz, kv_heads, sk, d), elem)
    v = g.input("v", (bsz, kv_heads, sk, d), elem)
    if kv_heads != heads:
        k, v = g.repeat(k, heads // kv_heads, axis=1), g.repeat(v, heads // kv_heads, axis=1)
    s = g.scale(g.matmul(q, k, transpose_b=True), scale)
    g.output(g.matmul(g.softmax(VARIANTS[name](g, s)), v))
    return g
