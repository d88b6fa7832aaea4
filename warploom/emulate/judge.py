"""How an emulated attention output is judged against the float64 reference: one bound, used by
tests/emulate/test_attention.py and by `warploom emulate --op attention`.

The kernel rounds P = exp2(S * scale_log2 - max) to the input type before P V (the register-A wgmma), while
row_sum adds the unrounded f32 p; everything else is f32 (wgmma accumulation, ex2/lg2 approx ~2^-22 relative)
and O is rounded once to the output type. With u the unit roundoff of the 16-bit type (bf16 2^-8, f16 2^-11),
per output element:
    |out - ref| <= u * max_j |v_j| (P rounding: sum_j p_j (1 + d_j) v_j / sum_j p_j, |d_j| <= u)
                 + u * |ref| (the output rounding) + 1e-4 (f32 arithmetic)
and |lse - ref| <= 1e-5 * (1 + |ref|) (f32 only). Rows that see no key must give out exactly 0 and lse exactly
-inf, never NaN.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

UNIT = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}
LSE_TOL = 1e-5
F32_SLACK = 1e-4


@dataclass(frozen=True)
class Verdict:
    ok: bool
    max_error: float          # max |out - ref| (nan when out holds NaN)
    lse_error: float          # max |lse - ref| over rows that see a key (0 without lse)
    problem: str = ""         # what failed, with the numbers; "" when ok


def judge_attention(out, lse, q, k, v, elem: str, causal: bool, layout: str, scale: float | None = None,
                    mods=None, scalars: dict | None = None, batch0: int = 0, reference=None) -> Verdict:
    """The emulated (out, lse) against warploom.reference.ops.attention under the bound above; lse may be None;
    mods, scalars: the kernel's score/mask modifiers and their scalars' values (warploom.score); batch0: the
    modifiers' b of the first batch (a packed sequence judged alone: its index). `reference`: the float64 output to
    judge against instead (the interpreter's of a graph written out; then lse is not judged)."""
    if reference is not None:
        ref, ref_lse, lse = np.asarray(reference, dtype=np.float64), None, None
    else:
        from warploom.reference.ops import attention
        ref, ref_lse = attention(q, k, v, causal=causal, scale=scale, layout=layout, return_lse=True, mods=mods,
                                 scalars=scalars, batch0=batch0)
    o = np.asarray(out).astype(np.float64)
    if np.isnan(o).any():
        return Verdict(False, float("nan"), 0.0, f"{int(np.isnan(o).sum())} output elements are NaN (never written, "
                                                 "or a masked row divided 0 by 0)")
    v = np.asarray(v, dtype=np.float64)
    # max |v| over each (batch, kv head)'s keys, broadcast to the query heads that read it
    if layout == "bshd":
        vmax = np.abs(v).max(axis=(1, 3), keepdims=True)
        vmax = np.repeat(vmax, q.shape[2] // v.shape[2], axis=2)
    else:
        vmax = np.abs(v).max(axis=(2, 3), keepdims=True)
        vmax = np.repeat(vmax, q.shape[1] // v.shape[1], axis=1)
    u = UNIT[elem]
    err = np.abs(o - ref)
    max_err = float(err.max()) if err.size else 0.0
    excess = err - (u * vmax + u * np.abs(ref) + F32_SLACK)
    if (excess > 0).any():
        return Verdict(False, max_err, 0.0, f"{int((excess > 0).sum())} outputs beyond the bound (max error "
                                            f"{max_err:.3g}, worst excess {float(excess.max()):.3g})")
    if ref_lse is None:
        return Verdict(True, max_err, 0.0)
    blind = np.isneginf(ref_lse)
    rows = np.moveaxis(o, 2, 1) if layout == "bshd" else o           # [B, Hq, Sq, D]
    if not (rows[blind] == 0).all():
        return Verdict(False, max_err, 0.0, "a row that sees no key is not exactly 0")
    if lse is None:
        return Verdict(True, max_err, 0.0)
    lse = np.asarray(lse)
    if np.isnan(lse).any():
        return Verdict(False, max_err, float("nan"), f"{int(np.isnan(lse).sum())} LSE values are NaN")
    if not np.array_equal(np.isneginf(lse), blind):
        return Verdict(False, max_err, float("nan"), "LSE is -inf exactly where a row sees no key: it is not")
    seen = ~blind
    lerr = np.abs(lse[seen].astype(np.float64) - ref_lse[seen])
    lse_err = float(lerr.max()) if lerr.size else 0.0
    if (lerr > LSE_TOL * (1 + np.abs(ref_lse[seen]))).any():
        return Verdict(False, max_err, lse_err, f"LSE error {lse_err:.3g} beyond {LSE_TOL:g} relative")
    return Verdict(True, max_err, lse_err)
