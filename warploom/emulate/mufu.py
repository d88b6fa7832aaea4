"""The sm_90a MUFU's ex2.approx.ftz.f32 (MUFU.EX2), lg2.approx.f32 (MUFU.LG2, for x >= 1) and rcp.approx.ftz.f32
(MUFU.RCP), bit for bit, from tables measured on the device.

Measured (exp/mufu_probe.py, exp/mufu_probe2.py; an H100, 2026-12-06; benchmarks/NOTES.md "The tensor core's and
MUFU's arithmetic"): the hardware reads x as a fixed-point number with 23 fraction bits, truncated toward zero,
X = trunc(x 2^23); with n = trunc(X / 2^23) and r = X - n 2^23 (|r| < 2^23, the sign of x) it returns
2^n T(r), T the hardware's value at r / 2^23 in (-1, 1), then flushes results below 2^-126 to +0 (a subnormal x
reads as 0: 2^0 = 1). The two halves of T (r <= 0 and r >= 0, 2^23 + 1 values each) are stored in
data/ex2_gh100.npz as the first value's bit pattern and the int8 differences of consecutive bit patterns (285 KB).
Checked on the device against 100 M inputs in six ranges (x in [-127, 0], [-1, 0], tiny magnitudes, [0, 16],
around -126, [-20, 0]): no bit differs. x >= 128 gives +inf (as the hardware does); NaN stays NaN.

MUFU.LG2 (tests/gpu/probe_lg2.py): for x = 2^e m, m = 1 + k / 2^23, e >= 0 the hardware returns
RZ_f32(e + L[k]), L its own result at m (checked on 8 M mantissas for each of e = 1, 2, 3, 4, 8, 16: no bit
differs). L (2^23 + 1 values) is data/lg2_gh100.npz (the first bit pattern and the int32 differences, 443 KB).
For x < 1 the same rule misses (L carries bits below its f32 value): there `lg2_approx_f32` says it does not
cover x, and the caller keeps its correctly rounded log2. The attention LSE takes log2 of row sums >= 1: covered.

MUFU.RCP (tests/gpu/probe_rcp.py, an H100, 2026-12-07, run 66): for x = s 2^e m, m in [1, 2) on the 2^-23 grid,
the hardware returns s 2^-e R(m), flushed to 0 below 2^-126; a zero or subnormal input reads as 0 (+-inf), +-inf
gives +-0. Checked on 5 x 16 M random inputs ([1, 2), [-64, 64], magnitudes 2^-125 .. 2^125, near 2^126,
[0.5, 32]) and the special values: no bit differs. R (2^23 + 1 values, data/rcp_gh100.npz: the first bit pattern
and the int8 differences, -2 .. 0) is the correctly rounded 1/m for 7280087 of them; the others are 1 ulp off.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

DATA = Path(__file__).with_name("data") / "ex2_gh100.npz"
LG2_DATA = Path(__file__).with_name("data") / "lg2_gh100.npz"
RCP_DATA = Path(__file__).with_name("data") / "rcp_gh100.npz"
FRACTION_BITS = 23
MIN_NORMAL = 2.0 ** -126


@functools.cache
def _line() -> np.ndarray:
    """T at r / 2^23 for r = -2^23 .. 2^23 (float32), at index r + 2^23: the table's two halves in one array."""
    d = np.load(DATA)
    halves = []
    for half in ("neg", "pos"):
        diff = d[f"ex2_{half}_diff"]
        bits = np.empty(diff.size + 1, np.int32)            # positive floats: their bit patterns fit in int32
        bits[0] = int(d[f"ex2_{half}_first"][0])
        np.cumsum(diff, dtype=np.int32, out=bits[1:])
        bits[1:] += bits[0]
        halves.append(bits.view(np.float32))
    return np.concatenate([halves[0][::-1], halves[1][1:]])


def ex2_approx_ftz_f32(x: np.ndarray) -> np.ndarray:
    """ex2.approx.ftz.f32 of a float32 array, as the sm_90a MUFU computes it."""
    x64 = np.asarray(x, np.float32).astype(np.float64)
    line = _line()
    scale = 1 << FRACTION_BITS
    tiny = np.abs(x64) < MIN_NORMAL                                       # .ftz: a subnormal input reads as 0
    finite = np.isfinite(x64) & (np.abs(x64) < 256.0)
    fixed = np.trunc(np.where(finite & ~tiny, x64, 0.0) * scale).astype(np.int64)
    n = (fixed / scale).astype(np.int64)                                 # toward zero
    y = np.ldexp(line[fixed - n * scale + scale].astype(np.float64), n)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.where(y < MIN_NORMAL, 0.0, y)                             # .ftz: subnormal results flush to +0
        if not finite.all():                                             # NaN, +-inf, |x| >= 256
            y = np.where(finite, y, np.where(np.isnan(x64), np.nan, np.where(x64 > 0, np.inf, 0.0)))
        return y.astype(np.float32)



@functools.cache
def _lg2_table() -> np.ndarray:
    """L[k] = the hardware's lg2 at 1 + k / 2^23, k = 0 .. 2^23 (float64)."""
    d = np.load(LG2_DATA)
    bits = np.concatenate([d["lg2_first"].astype(np.int64), d["lg2_diff"].astype(np.int64)]).cumsum()
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def lg2_approx_f32(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """lg2.approx.f32 as the sm_90a MUFU computes it where the measured rule holds: (values, covered), covered
    True where x is finite and >= 1 (e >= 0); elsewhere the values are meaningless and the caller keeps its own."""
    x = np.asarray(x, np.float32)
    covered = np.isfinite(x) & (x >= 1.0)
    bits = np.where(covered, x, np.float32(1.0)).view(np.uint32).astype(np.int64)
    e = (bits >> 23) - 127
    s = e + _lg2_table()[bits & ((1 << 23) - 1)]
    f = s.astype(np.float32)                                              # then truncated toward zero
    return np.where(f.astype(np.float64) > s, np.nextafter(f, np.float32(0)), f), covered


@functools.cache
def _rcp_table() -> np.ndarray:
    """R[k] = the hardware's 1 / (1 + k / 2^23), k = 0 .. 2^23 (float64)."""
    d = np.load(RCP_DATA)
    bits = np.concatenate([d["rcp_first"].astype(np.int64), d["rcp_diff"].astype(np.int64)]).cumsum()
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def rcp_approx_ftz_f32(x: np.ndarray) -> np.ndarray:
    """rcp.approx.ftz.f32 of a float32 array, as the sm_90a MUFU computes it (the module docstring's rule)."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.int64)
    negative = (bits >> 31) == 1
    e = ((bits >> 23) & 0xFF) - 127
    y = np.ldexp(_rcp_table()[bits & ((1 << 23) - 1)], -e)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.where(y < MIN_NORMAL, 0.0, y)                               # .ftz: subnormal results flush to 0
        y = np.where(e == -127, np.inf, y)                                 # zero or subnormal input: 1/0
        y = np.where(e == 128, np.where(np.isnan(x), np.nan, 0.0), y)      # +-inf -> 0, NaN stays NaN
        return np.where(negative, -y, y).astype(np.float32)
