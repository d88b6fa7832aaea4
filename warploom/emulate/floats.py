"""Float formats and exact rounding for the emulator: canonical NaNs, round to any of f32 / bf16 / f16 in every
rounding mode, flush-to-zero, and an exactly rounded fma. The op semantics (semantics.py, ops_*.py) are built on
these; nothing here knows an MLIR op.
"""
from __future__ import annotations

import numpy as np

from .compiler import FLOATS, TypeInfo
from .errors import UnknownOpError


UINT = {"f32": np.uint32, "bf16": np.uint16, "f16": np.uint16}
SIGN_BIT = {"f32": 1 << 31, "bf16": 1 << 15, "f16": 1 << 15}
CANONICAL_NAN_BITS = {"f32": 0x7FFFFFFF, "bf16": 0x7FFF, "f16": 0x7FFF}
CANONICAL_NAN = {k: np.array(v, UINT[k]).view(FLOATS[k])[()] for k, v in CANONICAL_NAN_BITS.items()}
# significand bits (with the implicit one), smallest normal exponent, largest exponent
FORMAT = {"f32": (24, -126, 127), "bf16": (8, -126, 127), "f16": (11, -14, 15)}
MAX_FINITE = {k: (2.0 - 2.0 ** (1 - p)) * 2.0 ** emax for k, (p, _, emax) in FORMAT.items()}
MIN_NORMAL = {k: 2.0 ** emin for k, (_, emin, _) in FORMAT.items()}
# arith::RoundingMode
ROUNDING = {0: "rne", 1: "rm", 2: "rp", 3: "rz", 4: "rna"}
# arith::CmpFPredicate and LLVM::FCmpPredicate (the same order)
FCMP = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une", "uno",
        "true")
UINTS = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


# ---- float helpers (exact) --------------------------------------------------------------------------

def scalar(v):
    """A 0-d array as its numpy scalar (uniform values stay scalars)."""
    return v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v


def float_elem(t: TypeInfo, what: str) -> str:
    if t.kind == "float" or (t.kind == "vector" and t.elem in FLOATS):
        return t.elem
    raise UnknownOpError(f"{what} on {t.kind}: only f32/bf16/f16 scalars and vectors of them are modelled")


def as_f32(v):
    """A float lane value as float32 (exact for bf16/f16)."""
    return v if getattr(v, "dtype", None) == np.float32 else v.astype(np.float32)


def canonical(v, elem: str):
    """v with every NaN replaced by PTX's canonical NaN of `elem`."""
    nan = np.isnan(v)
    if nan.any():
        return scalar(np.where(nan, CANONICAL_NAN[elem], v))
    return v


def round_float(x, elem: str, mode: str = "rne"):
    """The float64 value(s) x rounded to `elem` in rounding mode rne/rz/rm/rp/rna (IEEE-754 roundTiesToEven,
    toward zero, toward -inf, toward +inf, roundTiesToAway), as `elem`, subnormals and overflow included."""
    p, emin, _ = FORMAT[elem]
    x = np.asarray(x, np.float64)
    finite = np.isfinite(x) & (x != 0)
    _, e = np.frexp(np.where(finite, x, 1.0))               # |x| = m 2^e, m in [0.5, 1)
    q = np.maximum(e - 1, emin) - (p - 1)                    # the exponent of one ulp at x
    scaled = np.ldexp(x, -q)                                 # exact
    if mode == "rne":
        n = np.rint(scaled)
    elif mode == "rz":
        n = np.trunc(scaled)
    elif mode == "rm":
        n = np.floor(scaled)
    elif mode == "rp":
        n = np.ceil(scaled)
    elif mode == "rna":
        n = np.copysign(np.floor(np.abs(scaled) + 0.5), scaled)
    else:
        raise ValueError(f"rounding mode {mode!r}")
    y = np.ldexp(n, q)
    big = MAX_FINITE[elem]
    over = finite & (np.abs(y) > big)
    if over.any():
        pos = x > 0
        to_inf = {"rne": np.ones_like(pos), "rna": np.ones_like(pos), "rz": np.zeros_like(pos), "rm": ~pos,
                  "rp": pos}[mode]
        y = np.where(over, np.where(to_inf, np.copysign(np.inf, x), np.copysign(big, x)), y)
    y = np.where(finite, y, x)                               # +-0, +-inf and NaN as they are
    return scalar(canonical(y.astype(FLOATS[elem]), elem))


def to_elem(x32, elem: str):
    """float32 value(s) rounded to nearest even as `elem`, NaN canonical (the fast path of round_float)."""
    return canonical(x32 if elem == "f32" else x32.astype(FLOATS[elem]), elem)


def flush(v, elem: str):
    """.ftz: subnormal values of `elem` become zero of the same sign."""
    sub = (v != 0) & (np.abs(as_f32(v)) < MIN_NORMAL[elem])
    if sub.any():
        return scalar(np.where(sub, np.copysign(np.zeros_like(v), v), v))
    return v


def fma_exact(a, b, c, elem: str):
    """a * b + c rounded once to `elem` (round to nearest even), for f32/bf16/f16 lane values."""
    a64, b64, c64 = (np.asarray(as_f32(v), np.float64) for v in (a, b, c))
    prod = a64 * b64                                          # exact: at most 2 x 24 significand bits
    s = prod + c64
    bb = s - prod                                             # TwoSum: s + err == prod + c exactly
    err = (prod - (s - bb)) + (c64 - bb)
    bits = s.view(np.uint64) if s.ndim else np.asarray(s).reshape(1).view(np.uint64)
    even = (bits.reshape(s.shape) & 1) == 0
    inexact = np.isfinite(s) & (err != 0) & even              # round to odd: step to the odd neighbour toward err
    s = np.where(inexact, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    if elem == "bf16":
        return round_float(s, elem)
    return scalar(canonical(np.asarray(s).astype(FLOATS[elem]), elem))
