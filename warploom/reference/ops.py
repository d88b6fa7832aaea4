"""Numpy reference semantics of the graph-level ``wl`` ops, used as the ground truth kernels are checked against.

Every op converts its inputs to float64 first and computes in float64, so the
reference is (much) more precise than any kernel it judges; only ``cast``
returns a low-precision array, and ``round_to`` models a store to a narrow
element type while staying in float64.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from warploom.runtime.dtypes import numpy_dtype

__all__ = [
    "round_to", "cast",
    "matmul", "attention",
    "add", "mul", "maximum", "scale", "exp", "exp2", "relu", "gelu", "silu",
    "reduce_max", "reduce_sum", "softmax", "logsumexp", "causal_mask", "repeat",
    "sub", "div", "minimum", "neg", "absolute", "tanh", "log", "log2", "compare", "logical_and", "logical_or",
    "logical_not", "where", "index", "gather",
    "OPS",
]

LAYOUTS = ("bhsd", "bshd")


def _f64(x) -> np.ndarray:
    # ml_dtypes arrays (bf16, fp8, fp4) convert exactly: float64 holds all their values.
    return np.asarray(x, dtype=np.float64)


# ---------------------------------------------------------------- rounding


def round_to(x, dtype: str) -> np.ndarray:
    """Round to the nearest value of element type ``dtype`` (ties to even) and return it as float64.

    The cast goes straight from float64: going through float32 first would
    round twice and can land on the wrong neighbour at near-ties.
    Out-of-range values follow ml_dtypes: inf for f16/bf16/f32/e5m2, NaN for
    e4m3fn (it has no inf), saturation to +-6 for e2m1fn (it has neither).
    """
    return _f64(x).astype(numpy_dtype(dtype)).astype(np.float64)


def cast(x, dtype: str) -> np.ndarray:
    """The values of ``x`` as an array of element type ``dtype`` (rounded like ``round_to``)."""
    return _f64(x).astype(numpy_dtype(dtype))


# ---------------------------------------------------------------- contractions


def _swap_last_two(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def matmul(a, b, transpose_a: bool = False, transpose_b: bool = False) -> np.ndarray:
    """``a @ b`` in float64; rank 2, or rank N with identical leading batch dims (no broadcasting)."""
    a, b = _f64(a), _f64(b)
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"matmul needs operands of rank >= 2, got shapes {a.shape} and {b.shape}")
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]:
        raise ValueError(
            f"matmul batch dims must be identical: a {a.shape} has batch {a.shape[:-2]}, "
            f"b {b.shape} has batch {b.shape[:-2]}")
    if transpose_a:
        a = _swap_last_two(a)
    if transpose_b:
        b = _swap_last_two(b)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(
            f"matmul K mismatch: a is [..., M={a.shape[-2]}, K={a.shape[-1]}] and b is "
            f"[..., K={b.shape[-2]}, N={b.shape[-1]}] (after transposes); a's K must equal b's K")
    return a @ b


def attention(q, k, v, *, causal: bool = False, scale: float | None = None,
              layout: str = "bhsd", return_lse: bool = False, mods=None, scalars: dict | None = None,
              batch0: int = 0):
    """softmax(q k^T * scale [+ causal mask]) v, per batch and query head, in float64.

    layout "bhsd": q [B, Hq, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv].
    layout "bshd": q [B, Sq, Hq, D], k [B, Sk, Hkv, D], v [B, Sk, Hkv, Dv].
    The output has q's layout with head dim Dv.

    GQA: query head h reads kv head h // (Hq // Hkv).
    scale defaults to 1/sqrt(D).
    causal: query i sees key j only if j <= i + Sk - Sq, the mask aligned to the
    bottom-right corner as FlashAttention >= 2.1 aligns it (the last query sees
    every key; for Sq == Sk this is torch's is_causal). When Sq > Sk the first
    Sq - Sk queries see no key: such rows give 0 output (what a flash kernel
    yields when its running denominator stays 0).

    return_lse: also return the log-sum-exp of each row of scaled scores,
    [B, Hq, Sq] in either layout (natural log; -inf for a row that sees no key).

    mods (warploom.score.ScoreMods): the score modifier replaces each scaled score by its value at (b, h, q_idx,
    kv_idx) (query head h, positions from 0, b from batch0), the mask modifier drops the keys where it is false
    (as the causal mask does, both apply); `scalars`: the values of the runtime scalars they read, by name.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown attention layout {layout!r}: expected one of {', '.join(LAYOUTS)}")
    q, k, v = _f64(q), _f64(k), _f64(v)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 4:
            raise ValueError(f"attention {name} must have rank 4 ({layout}), got shape {t.shape}")
    if layout == "bshd":
        # Work in bhsd; the transposes are views, so this costs nothing.
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    _check_attention_shapes(q.shape, k.shape, v.shape, layout)

    hq, hkv, d = q.shape[1], k.shape[1], q.shape[3]
    group = hq // hkv
    # np.repeat puts copy h of kv head g at index g*group + r, i.e. head h reads h // group.
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)

    if scale is None:
        scale = 1.0 / math.sqrt(d)
    scores = (q @ _swap_last_two(k)) * scale
    if mods:
        scores = apply_mods(scores, mods, scalars or {}, batch0)
    if causal:
        scores = causal_mask(scores)
    out = softmax(scores, axis=-1) @ v
    if layout == "bshd":
        out = out.transpose(0, 2, 1, 3)
    if not return_lse:
        return out
    return out, logsumexp(scores, axis=-1)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal: bool = False, scale: float | None = None,
                     return_lse: bool = False, mods=None, scalars: dict | None = None):
    """Packed variable-length attention (flash_attn_varlen_func's), in float64: q [Tq, Hq, D], k [Tk, Hkv, D],
    v [Tk, Hkv, Dv] hold B sequences one after another, sequence i at rows cu_seqlens_q[i] .. cu_seqlens_q[i + 1] - 1
    of q (cu_seqlens_k's of k and v); each attends within itself as `attention` does one batch (causal bottom-right
    per sequence, b = i for the modifiers). out [Tq, Hq, Dv]; lse [Hq, Tq]."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    cu_q, cu_k = (np.asarray(x, np.int64) for x in (cu_seqlens_q, cu_seqlens_k))
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(f"attention_varlen: q {q.shape}, k {k.shape}, v {v.shape} must be [T, H, D]")
    if cu_q.shape != cu_k.shape or cu_q.ndim != 1 or len(cu_q) < 1:
        raise ValueError(f"attention_varlen: cu_seqlens_q {cu_q.tolist()} and cu_seqlens_k {cu_k.tolist()} must be "
                         "1-d of one length (B + 1)")
    out = np.zeros(q.shape[:2] + (v.shape[2],))
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    for i in range(len(cu_q) - 1):
        rq, rk = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        o, l_ = attention(q[None, rq], k[None, rk], v[None, rk], causal=causal, scale=scale, layout="bshd",
                          return_lse=True, mods=mods, scalars=scalars, batch0=i)
        out[rq], lse[:, rq] = o[0], l_[0]
    return (out, lse) if return_lse else out


def apply_mods(scores: np.ndarray, mods, scalars: dict, batch0: int = 0) -> np.ndarray:
    """[B, H, Sq, Sk] scaled scores with a score modifier and a mask modifier (warploom.score.ScoreMods) applied:
    each evaluated in float64 over the index grids; a dropped key's score is -inf."""
    from warploom.score import evaluate
    from warploom.score.expr import NumpyOps
    from warploom.score.trace import unwrap
    names = [name for name, _ in mods.scalars] + [name for name, _, _ in mods.tensors]
    missing = sorted(name for name in names if name not in scalars)
    if missing:
        raise ValueError(f"attention: the modifiers read the runtime scalars {missing}: pass scalars={{name: value}}")
    b_, h_, sq, sk = scores.shape
    env = {"b": np.arange(batch0, batch0 + b_).reshape(-1, 1, 1, 1), "h": np.arange(h_).reshape(1, -1, 1, 1),
           "q_idx": np.arange(sq).reshape(1, 1, -1, 1), "kv_idx": np.arange(sk).reshape(1, 1, 1, -1),
           **{name: unwrap(scalars[name]) for name in names}}         # captured tensors: indexed by NumpyOps.load
    if mods.score is not None:
        scores = np.broadcast_to(evaluate(mods.score, {**env, "score": scores}, NumpyOps), scores.shape)
        scores = np.asarray(scores, dtype=np.float64)
    if mods.mask is not None:
        keep = np.broadcast_to(evaluate(mods.mask, env, NumpyOps), scores.shape)
        scores = np.where(keep, scores, -np.inf)
    return scores


def _check_attention_shapes(qs, ks, vs, layout: str) -> None:
    """Shapes are given in bhsd order; messages say which layout the user passed."""
    b, hq, sq, d = qs
    if ks[0] != b or vs[0] != b:
        raise ValueError(f"attention batch mismatch: q B={b}, k B={ks[0]}, v B={vs[0]}; all must be equal")
    if ks[3] != d:
        raise ValueError(f"attention head-dim mismatch: q D={d}, k D={ks[3]}; q and k must share D")
    if vs[1] != ks[1] or vs[2] != ks[2]:
        raise ValueError(
            f"attention k/v mismatch: k has Hkv={ks[1]}, Sk={ks[2]}; v has Hkv={vs[1]}, Sk={vs[2]} "
            f"({layout}); k and v must agree on heads and sequence length")
    hkv = ks[1]
    if hkv == 0 or hq % hkv != 0:
        raise ValueError(f"attention GQA: Hq={hq} must be a multiple of Hkv={hkv}")


# ---------------------------------------------------------------- elementwise


def add(a, b) -> np.ndarray:
    return _f64(a) + _f64(b)


def mul(a, b) -> np.ndarray:
    return _f64(a) * _f64(b)


def maximum(a, b) -> np.ndarray:
    return np.maximum(_f64(a), _f64(b))


def scale(x, factor: float) -> np.ndarray:
    return _f64(x) * float(factor)


def exp(x) -> np.ndarray:
    return np.exp(_f64(x))


def exp2(x) -> np.ndarray:
    return np.exp2(_f64(x))


def relu(x) -> np.ndarray:
    return np.maximum(_f64(x), 0.0)


# numpy has no erf; math.erf is correctly rounded enough (well under 1e-15) for a reference.
_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(x, approximate: str = "none") -> np.ndarray:
    """GELU: exact erf form by default, or the tanh approximation (approximate="tanh")."""
    x = _f64(x)
    if approximate == "none":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if approximate == "tanh":
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)
        return 0.5 * x * (1.0 + np.tanh(inner))
    raise ValueError(f"unknown gelu approximation {approximate!r}: expected 'none' or 'tanh'")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # exp(-|x|) never overflows, and the two branches keep full relative precision in both tails.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def silu(x) -> np.ndarray:
    x = _f64(x)
    return x * _sigmoid(x)


# ---------------------------------------------------------------- reductions


def repeat(x, axis: int, times: int) -> np.ndarray:
    """Each slice along `axis` repeated `times` times in place (torch.repeat_interleave)."""
    return np.repeat(_f64(x), times, axis=axis)


def reduce_max(x, axis: int) -> np.ndarray:
    return np.max(_f64(x), axis=axis)


def reduce_sum(x, axis: int) -> np.ndarray:
    return np.sum(_f64(x), axis=axis)


def softmax(x, axis: int = -1) -> np.ndarray:
    """Stable softmax; a slice that is entirely -inf (fully masked) gives zeros, not NaN."""
    x = _f64(x)
    # initial=-inf lets an empty axis (Sk == 0) through; subtracting 0 instead of -inf
    # then keeps fully masked slices at exp(-inf) = 0 rather than NaN.
    row_max = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    e = np.exp(x - row_max)
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def logsumexp(x, axis: int = -1) -> np.ndarray:
    """log(sum(exp(x))) along `axis`, stable; -inf for a slice that is entirely -inf (or empty)."""
    x = _f64(x)
    row_max = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    shift = np.where(np.isfinite(row_max), row_max, 0.0)
    total = np.exp(x - shift).sum(axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        return np.squeeze(np.log(total) + shift, axis=axis)


def causal_mask(x) -> np.ndarray:
    """-inf where key j > query i + (Sk - Sq) over the last two axes [Sq, Sk]: the mask aligned to the
    bottom-right corner (FlashAttention >= 2.1; torch's is_causal when Sq == Sk)."""
    x = _f64(x).copy()
    sq, sk = x.shape[-2], x.shape[-1]
    future = np.arange(sk)[None, :] > np.arange(sq)[:, None] + (sk - sq)
    x[..., future] = -np.inf
    return x


# ---------------------------------------------------------------- score and mask modifiers, written out
# (the graph ops wl-fuse folds into an attention's score_mod / mask_mod; i32 values are held as integral float64,
# exact below 2**53; comparisons give numpy booleans)


def sub(a, b) -> np.ndarray:
    return _f64(a) - _f64(b)


def div(a, b) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return _f64(a) / _f64(b)


def minimum(a, b) -> np.ndarray:
    return np.minimum(_f64(a), _f64(b))


def neg(x) -> np.ndarray:
    return -_f64(x)


def absolute(x) -> np.ndarray:
    return np.abs(_f64(x))


def tanh(x) -> np.ndarray:
    return np.tanh(_f64(x))


def log(x) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(_f64(x))


def log2(x) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log2(_f64(x))


_PREDICATES = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
               "ne": np.not_equal}


def compare(a, b, predicate: str) -> np.ndarray:
    if predicate not in _PREDICATES:
        raise ValueError(f"compare: predicate {predicate!r} is not one of {', '.join(_PREDICATES)}")
    return _PREDICATES[predicate](_f64(a), _f64(b))


def logical_and(a, b) -> np.ndarray:
    return np.logical_and(a, b)


def logical_or(a, b) -> np.ndarray:
    return np.logical_or(a, b)


def logical_not(x) -> np.ndarray:
    return np.logical_not(x)


def where(cond, on_true, on_false) -> np.ndarray:
    return np.where(np.asarray(cond, dtype=bool), _f64(on_true), _f64(on_false))


_GRID_AXES = {"b": 0, "h": 1, "q_idx": 2, "kv_idx": 3}


def index(grid, dim: str) -> np.ndarray:
    """The position along axis `dim` (b, h, q_idx, kv_idx) of the [B, H, Sq, Sk] grid, shaped like it."""
    grid = np.asarray(grid)
    axis = _GRID_AXES[dim]
    shape = [1] * grid.ndim
    shape[axis] = grid.shape[axis]
    return np.broadcast_to(np.arange(grid.shape[axis], dtype=np.float64).reshape(shape), grid.shape)


def gather(table, *index) -> np.ndarray:
    """table[index...] elementwise; an index outside the table is an error naming the dimension and the range."""
    table = _f64(table)
    idx = np.broadcast_arrays(*(np.asarray(i) for i in index))
    ints = []
    for d, i in enumerate(idx):
        if np.any(i != np.round(i)):
            raise ValueError(f"gather: index {d} holds a non-integer")
        i = i.astype(np.int64)
        if i.size and (i.min() < 0 or i.max() >= table.shape[d]):
            raise ValueError(f"gather: index {d} reaches {i.min()}..{i.max()}, outside the table's "
                             f"0..{table.shape[d] - 1} (shape {table.shape})")
        ints.append(i)
    return table[tuple(ints)]


# ---------------------------------------------------------------- op table

OPS: dict[str, Callable[..., np.ndarray]] = {
    "matmul": matmul,
    "attention": attention,
    "add": add,
    "mul": mul,
    "maximum": maximum,
    "scale": scale,
    "exp": exp,
    "exp2": exp2,
    "relu": relu,
    "gelu": gelu,
    "silu": silu,
    "reduce_max": reduce_max,
    "reduce_sum": reduce_sum,
    "softmax": softmax,
    "causal_mask": causal_mask,
    "repeat": repeat,
    "cast": cast,
    "sub": sub,
    "div": div,
    "minimum": minimum,
    "neg": neg,
    "absolute": absolute,
    "tanh": tanh,
    "log": log,
    "log2": log2,
    "compare": compare,
    "logical_and": logical_and,
    "logical_or": logical_or,
    "logical_not": logical_not,
    "where": where,
    "index": index,
    "gather": gather,
}
