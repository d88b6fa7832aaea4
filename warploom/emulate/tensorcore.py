"""The sm_90a tensor core's fp32 accumulation (HGMMA, bf16/f16 inputs), bit for bit: what `wgmma.mma_async` adds.

Measured on the device (exp/mma_probe.py through triton's wgmma, an H100, 2026-12-06; benchmarks/NOTES.md "The
tensor core's and MUFU's arithmetic"): for one k16 step D = A[m, 16] B[16, n] + C, per output element

    e(x)   = floor(log2 |x|) of each input (a 16-bit A or B element, or the f32 accumulator C)
    emax   = max(e(a_k) + e(b_k) over the nonzero products, e(C) when C != 0)
    q      = 2^(emax - 25)
    D      = RZ_f32( sum_k trunc(a_k b_k / q) q + trunc(C / q) q )

i.e. the 16 exact products and C are aligned to the largest exponent (the products' exponents taken as the sum
of their factors' exponents, before normalization), truncated toward zero to 25 bits below it, summed exactly, and
the sum is truncated to f32. Over 2.1 M outputs (bf16 and f16; one and two k16 steps; exponent spreads up to
2^+-20; C zero, small and large) this model and the H100 agree on every bit; the nearest alternatives (24 or 26
bits, floor instead of truncation, the products' own leading bits, round to nearest) miss 20-90% of the outputs.
Not covered by the measurement: NaN/Inf, f16 subnormal inputs (e(x) is then the true leading bit, which the
hardware may not use), f32 subnormal or overflowing results. The H200 has the same GH100 tensor cores; the
attention and GEMM calibration replays (tests/emulate/calibration*.py) check it against recordings made there.
"""
from __future__ import annotations

import numpy as np

ALIGN_BITS = 25          # the aligned terms keep 25 bits below the largest exponent (truncated toward zero)
K_STEP = 16              # products summed together: one k16 wgmma step (16-bit inputs)


ZERO_EXPONENT = -16000    # floor(log2 0) stands in as this (int16: twice it still fits), far below any real one


def _exponent(x: np.ndarray) -> np.ndarray:
    """floor(log2 |x|) as int16, ZERO_EXPONENT for 0."""
    _, e = np.frexp(x)                                   # x = f 2^e, 0.5 <= |f| < 1
    return np.where(x != 0, e - 1, ZERO_EXPONENT).astype(np.int16)


def _rz_f32(s: np.ndarray) -> np.ndarray:
    """float64 -> float32, truncated toward zero."""
    f = s.astype(np.float32)
    over = np.abs(f.astype(np.float64)) > np.abs(s)
    return np.where(over, np.nextafter(f, np.float32(0)), f)


def mma_f32(a: np.ndarray, b: np.ndarray, acc: np.ndarray | None) -> np.ndarray:
    """A[m, k] B[n, k]^T (+ acc[m, n]) as the sm_90a tensor core computes it with an f32 accumulator: k16 steps in
    order, each aligned, truncated and summed as the module docstring says. a, b: float64 holding 16-bit values
    (exact); acc: float32 or None (no accumulator: wgmma's scale-d = 0). Returns float32 [m, n]."""
    m, k = a.shape
    if k % K_STEP:
        raise ValueError(f"mma_f32: k = {k} is not a whole number of k{K_STEP} steps")
    ea, eb = _exponent(a), _exponent(b)
    d = None if acc is None else np.asarray(acc, np.float32).astype(np.float64)
    for k0 in range(0, k, K_STEP):
        ks = slice(k0, k0 + K_STEP)
        emax = (ea[:, None, ks] + eb[None, :, ks]).max(axis=-1)         # a zero factor: far below any other
        emax = np.where(emax < ZERO_EXPONENT // 2, ZERO_EXPONENT, emax)
        if d is not None:
            emax = np.maximum(emax, _exponent(d))
        shift = np.where(emax > ZERO_EXPONENT, ALIGN_BITS - emax.astype(np.int32), 0).astype(np.int32)
        # trunc(term / q), q = 2^(emax - 25): the terms scaled by 1 / q (exact: a power of two, far from the
        # float64 range's ends for 16-bit inputs), truncated, summed (exact: under 2^32)
        inv_q = np.ldexp(1.0, shift)
        terms = a[:, None, ks] * b[None, :, ks]
        terms *= inv_q[..., None]
        scaled = np.trunc(terms, out=terms).sum(axis=-1)
        if d is not None:
            scaled = scaled + np.trunc(d * inv_q)
        d = _rz_f32(scaled / inv_q).astype(np.float64)
    out = d.astype(np.float32)
    if not (np.isfinite(a).all() and np.isfinite(b).all() and (acc is None or np.isfinite(acc).all())):
        # NaN / Inf inputs (not measured): IEEE propagation of the exact sum, where the result is not finite
        plain = a @ b.T + (0.0 if acc is None else np.asarray(acc, np.float64))
        out = np.where(np.isfinite(plain), out, plain.astype(np.float32))
    return out
