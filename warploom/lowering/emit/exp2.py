"""exp2 on the FMA units: FA4's way to take part of a softmax's exponentials off the MUFU (16 a clock per SM).

    y = exp2_fma(b, x)            # 2^x in f32 for x <= 128; +0.0 for x <= -127 (and -inf)
    y0, y1 = exp2_fma_x2(b, x0, x1)   # the same on a vector<2xf32> (sm_100a: packed f32x2 adds and FMAs)

    xc = max(x, -127)
    r  = xc + 1.5 * 2^23          # round to nearest: r's low mantissa bits hold n = round(xc), exactly
    n  = r - 1.5 * 2^23           # n as a float, exactly
    f  = xc - n                   # in [-0.5, 0.5], exactly
    p  = 1 + f (c1 + f (c2 + ...))        # 2^f, Horner, one FMA a step (`exp2_poly_coefficients`)
    y  = bits(p) + (bits(r) << 23)        # n added to p's exponent field (bits(r) << 23 = n << 23 mod 2^32)

Every step is an FP32 add, an FMA or an integer op: no conversion (F2I/I2F and FRND run at the MUFU's rate on
sm_90 and sm_100) and no rounding-mode variant, so the emulator computes the same bits as the GPU. At x <= -127
the clamp makes f = 0 and p = 1 exactly (c0 is 1), so y is +0.0: a masked score (-inf) gives P = 0. Between -127
and -126 y is a subnormal (ex2.approx.ftz would give 0): below 2^-126 either way. The polynomial's relative error
is about 1.1e-7 (degree 5; tests/unit/test_exp2_fma.py measures it against float64), under ex2.approx's own.
"""
from __future__ import annotations

import functools

import numpy as np
from mlir import ir

from .builder import Builder

DEGREE = 5          # degree 3 (1e-4 relative) hides under P's 16-bit rounding, but the row sums and the LSE add the
#                     f32 P and show it; degree 5: 1.1e-7, under ex2.approx's error
ROUND = 1.5 * 2.0 ** 23         # adding it rounds |x| < 2^22 to an integer, kept in the low mantissa bits
LOWEST = -127.0                 # 2^LOWEST comes out as +0.0


@functools.cache
def exp2_poly_coefficients(degree: int = DEGREE) -> tuple[float, ...]:
    """c1 .. c_degree (float32; c0 = 1) of p(f) = 1 + f (c1 + f (c2 + ..)) ~ 2^f on [-0.5, 0.5], fitted for the
    least maximum relative error (weighted least squares reweighted toward the worst points: a few rounds of a
    Lawson-style iteration)."""
    f = np.linspace(-0.5, 0.5, 20001)
    y = np.exp2(f)
    powers = np.stack([f ** k for k in range(1, degree + 1)], axis=1)
    w = 1.0 / y
    for _ in range(60):
        c = np.linalg.lstsq(powers * w[:, None], (y - 1.0) * w, rcond=None)[0]
        err = np.abs(1.0 + powers @ c - y) / y
        w = w * (1.0 + 20.0 * err / err.max())
    return tuple(float(x) for x in np.float32(c))


def exp2_fma(b: Builder, x: ir.Value) -> ir.Value:
    """2^x (f32) by the steps in the module's docstring: 4 float adds or max, `DEGREE` FMAs, a shift and an add."""
    return _steps(b, x, b.f32, b.i32)


def exp2_fma_x2(b: Builder, x0: ir.Value, x1: ir.Value) -> tuple[ir.Value, ir.Value]:
    """2^x0, 2^x1 by the same steps on a vector<2xf32>: the same values bit for bit, but on sm_100a the adds and
    FMAs become packed f32x2 instructions (add.rn.f32x2, fma.rn.f32x2: FADD2/FFMA2, two lanes' worth each; the
    clamp stays two FMNMX), FA4's way of halving the polynomial's issue cost. sm_90a has no packed f32 ops."""
    v2, i2 = ir.VectorType.get([2], b.f32), ir.VectorType.get([2], b.i32)
    xv = b.insertelement(b.insertelement(b.undef(v2), x0, b.const(0)), x1, b.const(1))
    y = _steps(b, xv, v2, i2)
    return b.extractelement(y, 0), b.extractelement(y, 1)


def _steps(b: Builder, x: ir.Value, fty: ir.Type, ity: ir.Type) -> ir.Value:
    """The module docstring's steps on a value of type fty (f32 or vector<2xf32>); ity: its integer twin."""
    xc = b.maxnumf(x, b.constf(LOWEST, fty))
    r = b.addf(xc, b.constf(ROUND, fty))
    f = b.subf(xc, b.subf(r, b.constf(ROUND, fty)))
    cs = exp2_poly_coefficients()
    p = b.constf(cs[-1], fty)
    for coef in (*reversed(cs[:-1]), 1.0):
        p = b.fma(p, f, b.constf(coef, fty))
    bits = b.add(b.bitcast(p, ity), b.shl(b.bitcast(r, ity), b.const(23, ity)))
    return b.bitcast(bits, fty)


def exp2_fma_reference(x: np.ndarray) -> np.ndarray:
    """What `exp2_fma` computes, in numpy (float32 steps; each FMA as one rounding of the exact float64 product
    plus the addend, which equals fma's single rounding but for rare double-rounding ties): for the tests."""
    x = np.asarray(x, np.float32)
    xc = np.maximum(x, np.float32(LOWEST))
    r = (xc + np.float32(ROUND)).astype(np.float32)
    f = (xc - (r - np.float32(ROUND))).astype(np.float32)
    cs = exp2_poly_coefficients()
    p = np.full_like(f, np.float32(cs[-1]))
    for coef in (*reversed(cs[:-1]), 1.0):
        p = (p.astype(np.float64) * f + np.float32(coef)).astype(np.float32)
    bits = p.view(np.uint32) + (r.view(np.uint32) << np.uint32(23))
    return bits.view(np.float32)
