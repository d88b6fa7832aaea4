"""Float arithmetic, conversions, vector/struct element ops and warp-collective data movement for the emulator.

Values are lane vectors as compiler.py describes them (f32/bf16/f16: numpy scalars when uniform, else (32,)
arrays; vector<n x T>: (32, n) arrays, integer elements as uint64; iN: Python int or uint64 array).
Each handler cites the definition it follows: the MLIR/LLVM op and the PTX instruction NVPTX lowers it to
(PTX ISA chapter 9.7.3 "Floating Point Instructions", 9.7.4 "Half Precision Floating Point Instructions",
9.7.9 "Data Movement and Conversion Instructions" (cvt, shfl.sync), 9.7.13 "Parallel Synchronization and
Communication Instructions" (redux.sync)).

Bit-exact (the bits the ISA defines):
  - addf/subf/mulf/divf (and llvm.fadd/...): IEEE-754 round to nearest even, subnormals kept (PTX add/sub/
    mul/div.rn.f32 without .ftz, which is what NVPTX emits when the kernel does not ask for flush-to-zero;
    add/sub/mul.rn.bf16/f16). bf16/f16 are computed in f32 and rounded once: exact, since f32 has more than
    2p + 2 significand bits for p = 8, 11 (double rounding is innocuous for + - * /).
  - fma (llvm.intr.fma/fmuladd, math.fma, vector.fma): one rounding (fma.rn), computed exactly (product exact
    in f64, sum rounded to odd in f64 then to nearest even in the target: correct as 53 >= 24 + 2).
  - maximumf/minimumf (llvm.intr.maximum/minimum, PTX max/min.NaN): NaN if either is NaN; maxnumf/minnumf
    (llvm.intr.maxnum/minnum, PTX max/min): the number if one input is NaN. -0 < +0 in all four (LLVM
    leaves the sign of zero unspecified for maxnum/minnum; PTX orders -0 below +0).
  - cmpf/fcmp (ordered and unordered predicates), select, negf/absf (the sign bit), extf (exact),
    truncf/fptrunc in all five arith rounding modes (to_nearest_even, downward, upward, toward_zero,
    to_nearest_away), sitofp/uitofp (round to nearest even), fptosi/fptoui (toward zero; out of range or NaN
    on an active lane is poison in LLVM: an error here), nvvm.convert.f32x2.to.bf16x2/f16x2 (cvt.rn/rz
    {.relu}{.satfinite}.bf16x2.f32: d = {cvt(a) high, cvt(b) low}), bitcasts, vector/struct element ops.
  - NaN results of arithmetic and conversions are PTX's canonical NaN (0x7FFFFFFF for f32, 0x7FFF for
    bf16/f16), the bits the GPU produces (LLVM leaves NaN payloads unspecified); neg/abs/select/bitcast only
    move bits.
  - shfl.sync (all four modes, segment mask and clamp), redux.sync: exact, with the membermask rules.

Measured on the device, bit for bit:
  - ex2.approx.ftz.f32 (llvm.call_intrinsic llvm.nvvm.ex2.approx.ftz.f, what every warploom softmax uses): the
    sm_90a MUFU's table (warploom.emulate.mufu). The sm_100a MUFU has not been measured (no Blackwell GPU
    here): sm_100a kernels get the same values, an assumption.

Approximate (documented differences from the device):
  - ex2.approx without .ftz, or of bf16/f16 (llvm.intr.exp2, math.exp2, llvm.nvvm.ex2.approx.{f,bf16,f16}):
    computed as float32(exp2(float64(x))), i.e. (nearly always) correctly rounded; the hardware's
    ex2.approx.f32 has a maximum relative error of about 2^-22 (PTX ISA 9.7.3 "ex2"), so single ulps differ.
    .ftz flushes subnormal inputs and results to sign-preserving zero; NVPTX emits ex2.approx.f32 (no .ftz)
    for f32 llvm.exp2 in kernels without flush-to-zero, ex2.approx.ftz.bf16 for bf16, ex2.approx.f16 for f16.
  - rcp.approx.ftz.f32 (nvvm.rcp.approx.ftz.f): correctly rounded 1/x with .ftz; the hardware's error is up
    to 1 ulp.
  - lg2.approx.f32 below 1 (llvm.call_intrinsic llvm.nvvm.lg2.approx[.ftz].f): float32(log2(float64(x))), -inf
    at +-0, NaN below 0; the hardware's maximum absolute error is about 2^-22 (PTX ISA 9.7.3 "lg2"). From 1 up
    (every attention LSE's row sum) it is the sm_90a MUFU's own value (warploom.emulate.mufu).
  - fastmath flags are ignored: an fmul and fadd that both carry `contract` may be fused into one fma.rn by
    NVPTX (one rounding; the emulator rounds twice), and afn/arcp may turn divf into div.approx/div.full.
"""
from __future__ import annotations

import re

import numpy as np
from mlir import ir

from .compiler import BAR_RED_OR, FLOATS, HANDLERS, TypeInfo, _bar_red_or, _operands, _result, lanes, signed, uniform
from .errors import AccumulatorReadError, DivergenceError, EmulationError, OutOfBoundsError, UnknownOpError
from .machine import WARP, Pending
from .mufu import ex2_approx_ftz_f32, lg2_approx_f32

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
DYNAMIC = ir.ShapedType.get_dynamic_size()


def register(*names):
    """Add handlers for ops no other emulator module gives semantics to (a clash is an import error)."""
    def add(fn):
        for n in names:
            if n in HANDLERS:
                raise RuntimeError(f"{n} already has emulator semantics elsewhere")
            HANDLERS[n] = fn
        return fn
    return add


# ---- float helpers (exact) --------------------------------------------------------------------------

def _s(v):
    """A 0-d array as its numpy scalar (uniform values stay scalars)."""
    return v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v


def _felem(t: TypeInfo, what: str) -> str:
    if t.kind == "float" or (t.kind == "vector" and t.elem in FLOATS):
        return t.elem
    raise UnknownOpError(f"{what} on {t.kind}: only f32/bf16/f16 scalars and vectors of them are modelled")


def _f32(v):
    """A float lane value as float32 (exact for bf16/f16)."""
    return v if getattr(v, "dtype", None) == np.float32 else v.astype(np.float32)


def canonical(v, elem: str):
    """v with every NaN replaced by PTX's canonical NaN of `elem`."""
    nan = np.isnan(v)
    if np.any(nan):
        return _s(np.where(nan, CANONICAL_NAN[elem], v))
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
    return _s(canonical(y.astype(FLOATS[elem]), elem))


def to_elem(x32, elem: str):
    """float32 value(s) rounded to nearest even as `elem`, NaN canonical (the fast path of round_float)."""
    return canonical(x32 if elem == "f32" else x32.astype(FLOATS[elem]), elem)


def _flush(v, elem: str):
    """.ftz: subnormal values of `elem` become zero of the same sign."""
    sub = (v != 0) & (np.abs(_f32(v)) < MIN_NORMAL[elem])
    if np.any(sub):
        return _s(np.where(sub, np.copysign(np.zeros_like(v), v), v))
    return v


def fma_exact(a, b, c, elem: str):
    """a * b + c rounded once to `elem` (round to nearest even), for f32/bf16/f16 lane values."""
    a64, b64, c64 = (np.asarray(_f32(v), np.float64) for v in (a, b, c))
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
    return _s(canonical(np.asarray(s).astype(FLOATS[elem]), elem))


# ---- arithmetic -------------------------------------------------------------------------------------

def _arith(ufunc):
    def handler(c, op, info):
        a, b = _operands(c, op)
        r, t = _result(c, op)
        elem = _felem(t, op.name)
        if elem == "f32":
            def fn(w):
                e = w.env
                e[r] = canonical(ufunc(e[a], e[b]), "f32")
        else:
            def fn(w):
                e = w.env
                e[r] = to_elem(ufunc(_f32(e[a]), _f32(e[b])), elem)
        return False, fn
    return handler


# IEEE-754 add/sub/mul/div, round to nearest even: PTX ISA 9.7.3 add/sub/mul/div (.rn), 9.7.4 add/sub/mul (.bf16/.f16)
for _name, _ufunc in (("addf", np.add), ("subf", np.subtract), ("mulf", np.multiply), ("divf", np.divide)):
    register(f"arith.{_name}")(_arith(_ufunc))
for _name, _ufunc in (("fadd", np.add), ("fsub", np.subtract), ("fmul", np.multiply), ("fdiv", np.divide)):
    register(f"llvm.{_name}")(_arith(_ufunc))


@register("arith.negf", "llvm.fneg", "math.absf", "llvm.intr.fabs")
def _sign(c, op, info):
    # fneg flips the sign bit, fabs clears it (LLVM LangRef "fneg", "llvm.fabs"; PTX neg/abs); NaN bits kept
    (a,) = _operands(c, op)
    r, t = _result(c, op)
    elem = _felem(t, op.name)
    u, dt = UINT[elem], FLOATS[elem]
    neg = op.name in ("arith.negf", "llvm.fneg")
    bit = u(SIGN_BIT[elem])
    keep = u(~SIGN_BIT[elem] & ((1 << (8 * np.dtype(u).itemsize)) - 1))

    def fn(w):
        e = w.env
        bits = np.asarray(e[a]).view(u)
        e[r] = _s(((bits ^ bit) if neg else (bits & keep)).view(dt))
    return False, fn


def _minmax(is_max: bool, nan_wins: bool, ftz: bool = False):
    """max/min with -0 < +0; nan_wins: NaN if any input is NaN (maximum/minimum, max.NaN), else the number
    (maxnum/minnum, max), NaN only when both are."""
    def compute(x, y, elem):
        if ftz:
            x, y = _flush(x, elem), _flush(y, elem)
        xf, yf = _f32(x), _f32(y)
        take_x = (xf > yf) if is_max else (xf < yf)
        zeros = (xf == 0) & (yf == 0)
        take_x = take_x | (zeros & (np.signbit(yf) if is_max else np.signbit(xf)))
        out = np.where(take_x, x, y)
        xn, yn = np.isnan(xf), np.isnan(yf)
        if nan_wins:
            nan = xn | yn
        else:
            out = np.where(yn & ~xn, x, np.where(xn & ~yn, y, out))
            nan = xn & yn
        out = np.where(nan, CANONICAL_NAN[elem], out)
        return _s(_flush(out, elem) if ftz else out)
    return compute


def _minmax_handler(is_max: bool, nan_wins: bool):
    f = _minmax(is_max, nan_wins)

    def handler(c, op, info):
        a, b = _operands(c, op)
        r, t = _result(c, op)
        elem = _felem(t, op.name)

        def fn(w):
            e = w.env
            e[r] = f(e[a], e[b], elem)
        return False, fn
    return handler


# arith.maximumf/minimumf = llvm.intr.maximum/minimum (IEEE-754-2019 maximum/minimum) -> PTX max/min.NaN;
# arith.maxnumf/minnumf = llvm.intr.maxnum/minnum (maximumNumber) -> PTX max/min (PTX ISA 9.7.3 "max", "min")
register("arith.maximumf", "llvm.intr.maximum")(_minmax_handler(True, True))
register("arith.minimumf", "llvm.intr.minimum")(_minmax_handler(False, True))
register("arith.maxnumf", "llvm.intr.maxnum")(_minmax_handler(True, False))
register("arith.minnumf", "llvm.intr.minnum")(_minmax_handler(False, False))


@register("llvm.intr.fma", "llvm.intr.fmuladd", "math.fma", "vector.fma")
def _fma(c, op, info):
    # llvm.fma: a * b + c with one rounding (PTX ISA 9.7.3 "fma": fma.rn.f32; 9.7.4 fma.rn.bf16/f16);
    # llvm.fmuladd may fuse or not: NVPTX fuses it (fma.rn)
    a, b, cc = _operands(c, op)
    r, t = _result(c, op)
    elem = _felem(t, op.name)

    def fn(w):
        e = w.env
        e[r] = fma_exact(e[a], e[b], e[cc], elem)
    return False, fn


@register("arith.cmpf", "llvm.fcmp")
def _cmpf(c, op, info):
    # arith.cmpf / llvm.fcmp: ordered predicates are false on NaN, unordered true (PTX ISA 9.3.1 "Floating
    # Point Comparisons": setp eq/ne/lt/... and equ/neu/ltu/...)
    a, b = _operands(c, op)
    r, _ = _result(c, op)
    _felem(TypeInfo(op.operands[0].type), op.name)
    pred = FCMP[ir.IntegerAttr(op.attributes["predicate"]).value]
    rel = {"eq": np.equal, "ne": np.not_equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less,
           "le": np.less_equal}.get(pred[1:])

    def fn(w):
        e = w.env
        x, y = _f32(e[a]), _f32(e[b])
        unordered = np.isnan(x) | np.isnan(y)
        if pred == "false":
            v = np.zeros_like(unordered)
        elif pred == "true":
            v = np.ones_like(unordered)
        elif pred == "ord":
            v = ~unordered
        elif pred == "uno":
            v = unordered
        elif pred[0] == "o":
            v = rel(x, y) & ~unordered
        else:
            v = rel(x, y) | unordered
        e[r] = v if isinstance(v, np.ndarray) and v.ndim else bool(v)
    return False, fn


@register("arith.select", "llvm.select")
def _select(c, op, info):
    # select %cond, %a, %b: per lane (an i1 condition) or whole (a uniform one)
    cond, a, b = _operands(c, op)
    r, t = _result(c, op)
    ct = TypeInfo(op.operands[0].type)
    if not ((ct.kind == "int" and ct.width == 1) or (ct.kind == "vector" and ct.elem == "i1")):
        raise UnknownOpError(f"{op.name} with a {op.operands[0].type} condition: only i1 (or vector of i1) "
                             "conditions are modelled")
    dtype = np.uint64 if t.kind in ("int", "ptr") and t.width > 1 else bool if t.kind == "int" else None

    def fn(w):
        e = w.env
        cv, x, y = e[cond], e[a], e[b]
        if not isinstance(cv, np.ndarray):
            e[r] = x if cv else y
            return
        if any(isinstance(v, (Pending, tuple)) for v in (x, y)):
            raise DivergenceError(f"{op.name} picks a wgmma accumulator per lane: select it with a uniform condition")
        xa, ya = lanes(x, dtype), lanes(y, dtype)
        if cv.ndim < xa.ndim:                     # an i1 per lane; a vector<n x i1> condition picks per element
            cv = cv.reshape((WARP,) + (1,) * (xa.ndim - 1))
        e[r] = np.where(cv, xa, ya)
    return False, fn


# ---- approximate transcendentals ----------------------------------------------------------------------

def _ex2(x, elem: str, ftz: bool):
    if ftz and elem == "f32":                 # MUFU.EX2 itself, bit for bit (warploom.emulate.mufu)
        return _s(ex2_approx_ftz_f32(_f32(x)))
    if ftz:
        x = _flush(x, elem)
    y = np.exp2(np.asarray(_f32(x), np.float64))
    y = round_float(y, elem) if elem == "bf16" else _s(canonical(y.astype(FLOATS[elem]), elem))
    return _flush(y, elem) if ftz else y


def _unary_approx(f, ftz_of):
    def handler(c, op, info):
        (a,) = _operands(c, op)
        r, t = _result(c, op)
        elem = _felem(t, op.name)
        ftz = ftz_of(op, elem)

        def fn(w):
            e = w.env
            e[r] = f(e[a], elem, ftz)
        return False, fn
    return handler


# llvm.exp2 -> ex2.approx.f32 (no .ftz unless the kernel flushes f32 subnormals), ex2.approx.ftz.bf16,
# ex2.approx.f16 (LLVM NVPTX); math.exp2 likewise; PTX ISA 9.7.3 "ex2", 9.7.4 "ex2"
register("llvm.intr.exp2", "math.exp2")(_unary_approx(_ex2, lambda op, elem: elem == "bf16"))


def _rcp(x, elem, ftz):
    x = _flush(x, elem)
    y = np.asarray(1.0) / np.asarray(_f32(x), np.float64)
    return _flush(_s(canonical(y.astype(np.float32), elem)), elem)


# nvvm.rcp.approx.ftz.f -> rcp.approx.ftz.f32 (PTX ISA 9.7.3 "rcp.approx"): 1/x, subnormals flushed
register("nvvm.rcp.approx.ftz.f")(_unary_approx(_rcp, lambda op, elem: True))

def _lg2(x, elem, ftz):
    if ftz:
        x = _flush(x, elem)
    with np.errstate(all="ignore"):
        y = np.log2(np.asarray(_f32(x), np.float64)).astype(np.float32)
    if elem == "f32":                         # MUFU.LG2 itself where measured, x >= 1 (warploom.emulate.mufu)
        hw, covered = lg2_approx_f32(_f32(x))
        y = np.where(covered, hw, y)
    return _s(canonical(y, elem))


_LG2_INTRINSIC = re.compile(r"llvm\.nvvm\.lg2\.approx(?P<ftz>\.ftz)?\.(?P<t>f|f32)")
_EX2_INTRINSIC = re.compile(r"llvm\.nvvm\.ex2\.approx(?P<ftz>\.ftz)?\.(?P<t>f|f32|bf16|f16)")
_MINMAX_INTRINSIC = re.compile(r"llvm\.nvvm\.f(?P<op>max|min)(?P<ftz>\.ftz)?(?P<nan>\.nan)?\.(?P<t>f|bf16|f16)")


@register("llvm.call_intrinsic")
def _call_intrinsic(c, op, info):
    # the NVVM intrinsics MLIR 22 has no op for: llvm.nvvm.ex2.approx[.ftz].{f,f32,bf16,f16} (PTX "ex2") and
    # llvm.nvvm.f{max,min}[.ftz][.nan].{f,bf16,f16} (PTX "max", "min")
    name = ir.StringAttr(op.attributes["intrin"]).value
    if name == BAR_RED_OR:         # a barrier (it blocks): compiler.py has the barriers
        return _bar_red_or(c, op, info, name)
    args = _operands(c, op)
    if len(op.results) != 1:
        raise UnknownOpError(f"llvm.call_intrinsic {name!r} without one result is not modelled")
    r, t = _result(c, op)
    if m := _EX2_INTRINSIC.fullmatch(name):
        elem = _felem(t, name)
        ftz = bool(m["ftz"])

        def fn(w):
            e = w.env
            e[r] = _ex2(e[args[0]], elem, ftz)
        return False, fn
    if m := _LG2_INTRINSIC.fullmatch(name):
        elem = _felem(t, name)
        ftz = bool(m["ftz"])

        def fn3(w):
            e = w.env
            e[r] = _lg2(e[args[0]], elem, ftz)
        return False, fn3
    if m := _MINMAX_INTRINSIC.fullmatch(name):
        elem = _felem(t, name)
        f = _minmax(m["op"] == "max", bool(m["nan"]), ftz=bool(m["ftz"]))

        def fn2(w):
            e = w.env
            e[r] = f(e[args[0]], e[args[1]], elem)
        return False, fn2
    raise UnknownOpError(f"llvm.call_intrinsic {name!r}: the emulator models llvm.nvvm.ex2.approx.*, "
                         f"llvm.nvvm.lg2.approx.*, llvm.nvvm.f{{max,min}}.* and {BAR_RED_OR} only")


# ---- conversions ---------------------------------------------------------------------------------------

@register("arith.extf", "llvm.fpext")
def _extf(c, op, info):
    # bf16/f16 -> f32 is exact (PTX cvt.f32.bf16 / cvt.f32.f16)
    (a,) = _operands(c, op)
    r, t = _result(c, op)
    src, dst = _felem(TypeInfo(op.operands[0].type), op.name), _felem(t, op.name)
    if dst != "f32" or src == "f32":
        raise UnknownOpError(f"{op.name} {src} -> {dst}: only bf16/f16 -> f32 is modelled")

    def fn(w):
        e = w.env
        e[r] = canonical(e[a].astype(np.float32), "f32")
    return False, fn


@register("arith.truncf", "llvm.fptrunc")
def _truncf(c, op, info):
    # f32 -> bf16/f16 (PTX cvt.{rn,rz,rm,rp,rna}.bf16.f32 / .f16.f32): arith.truncf's roundingmode (default
    # to_nearest_even, as llvm.fptrunc)
    (a,) = _operands(c, op)
    r, t = _result(c, op)
    src, dst = _felem(TypeInfo(op.operands[0].type), op.name), _felem(t, op.name)
    if src != "f32" or dst == "f32":
        raise UnknownOpError(f"{op.name} {src} -> {dst}: only f32 -> bf16/f16 is modelled")
    mode = "rne"
    if "roundingmode" in op.attributes:
        mode = ROUNDING[ir.IntegerAttr(op.attributes["roundingmode"]).value]

    if mode == "rne":
        def fn(w):
            e = w.env
            e[r] = to_elem(e[a], dst)
    else:
        def fn(w):
            e = w.env
            e[r] = round_float(np.asarray(e[a], np.float64), dst, mode)
    return False, fn


def _int_width(t: TypeInfo, what: str) -> int:
    if t.kind == "int" or (t.kind == "vector" and t.width):      # a vector of integers: elementwise
        return t.width
    if t.kind == "index":
        return 64
    raise UnknownOpError(f"{what} on {t.kind}: only integers (and vectors of them) are modelled")


@register("arith.sitofp", "arith.uitofp", "llvm.sitofp", "llvm.uitofp")
def _itofp(c, op, info):
    # integer -> float, round to nearest even (PTX cvt.rn.f32.s32 / .u32, cvt.rn.bf16/f16...)
    (a,) = _operands(c, op)
    r, t = _result(c, op)
    elem = _felem(t, op.name)
    width = _int_width(TypeInfo(op.operands[0].type), op.name)
    sign = op.name.endswith("sitofp")

    def fn(w):
        e = w.env
        x = e[a]
        if width == 1:                            # i1: true is -1 signed, 1 unsigned
            v = np.asarray(x).astype(np.int64) * (-1 if sign else 1)
        elif sign:
            v = np.asarray(signed(x, width), np.int64)
        else:
            v = np.asarray(x, np.uint64)
        if elem == "f32":                         # numpy's int -> float32 cast rounds to nearest even
            e[r] = _s(v.astype(np.float32))
        else:
            e[r] = round_float(v.astype(np.float64), elem)     # exact in f64 below 2^53
    return False, fn


@register("arith.fptosi", "arith.fptoui", "llvm.fptosi", "llvm.fptoui")
def _fptoi(c, op, info):
    # float -> integer, toward zero (PTX cvt.rzi); NaN or out of range is poison in LLVM/MLIR (the GPU
    # saturates): an error on an active lane
    (a,) = _operands(c, op)
    r, t = _result(c, op)
    width = _int_width(t, op.name)
    sign = op.name.endswith("fptosi")
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if sign else (0, (1 << width) - 1)
    mask = (1 << width) - 1

    def fn(w):
        e = w.env
        x = np.trunc(np.asarray(_f32(e[a]), np.float64))
        bad = ~((x >= lo) & (x <= hi))
        if x.ndim:
            bad &= w.mask
        if np.any(bad):
            shown = x[bad][:4] if x.ndim else x
            raise EmulationError(f"{op.name} of {shown} to i{width}: NaN or outside {lo}..{hi}, the result is poison")
        v = np.where(np.isfinite(x) & (x >= lo) & (x <= hi), x, 0).astype(np.int64)
        if x.ndim:
            e[r] = v.astype(np.uint64) & np.uint64(mask)
        else:
            e[r] = int(v) & mask
    return False, fn


def _cvt_pair(c, op, info):
    # nvvm.convert.f32x2.to.{bf16x2,f16x2} = cvt.{rn,rz}{.relu}{.satfinite}.{bf16x2,f16x2}.f32 d, a, b
    # (PTX ISA 9.7.9 "cvt"): d's upper half is cvt(a) = src_hi, the lower half cvt(b) = src_lo; in the
    # vector<2 x T> result element 0 is the low half. .relu: negative results become +0, NaN canonical;
    # .satfinite: +-inf and out-of-range results become +-MAX_NORM, NaN stays NaN
    v = op.opview
    hi, lo = c.slot(v.src_hi), c.slot(v.src_lo)
    if v.random_bits is not None:
        raise UnknownOpError(f"{op.name} with stochastic rounding (.rs): not modelled")
    r, t = _result(c, op)
    elem = "bf16" if "bf16x2" in op.name else "f16"
    if t.kind != "vector" or t.count != 2 or t.elem != elem:
        raise UnknownOpError(f"{op.name} to {op.results[0].type}: only vector<2x{elem}> is modelled")
    rnd = str(op.attributes["rnd"]) if "rnd" in op.attributes else "#nvvm.fp_rnd_mode<rn>"
    mode = {"rn": "rne", "rz": "rz"}.get(rnd[rnd.index("<") + 1:rnd.rindex(">")])
    if mode is None:
        raise UnknownOpError(f"{op.name} rounding {rnd}: only rn and rz are modelled")
    relu = "relu" in op.attributes and ir.BoolAttr(op.attributes["relu"]).value
    sat = "sat" in op.attributes and "satfinite" in str(op.attributes["sat"])
    big = MAX_FINITE[elem]

    def convert(x):
        y = to_elem(np.asarray(x, np.float32), elem) if mode == "rne" else round_float(
            np.asarray(x, np.float64), elem, mode)
        y = np.asarray(y)
        if sat:
            y = np.where(np.isinf(_f32(y)) | (np.abs(_f32(y)) > big),
                         np.copysign(np.asarray(big, np.float32), _f32(y)).astype(y.dtype), y)
        if relu:
            y = np.where(_f32(y) <= 0, np.zeros_like(y), y)
        return canonical(y, elem)

    def fn(w):
        e = w.env
        out = np.empty((WARP, 2), FLOATS[elem])
        out[:, 0] = lanes(convert(e[lo]))
        out[:, 1] = lanes(convert(e[hi]))
        e[r] = out
    return False, fn


register("nvvm.convert.f32x2.to.bf16x2", "nvvm.convert.f32x2.to.f16x2")(_cvt_pair)


# ---- bitcasts, vectors and structs ----------------------------------------------------------------------

def _scalar_dtype(kind: str, elem: str | None, width: int):
    if kind == "float":
        return FLOATS[elem]
    if kind in ("int", "ptr") and width in UINTS:
        return UINTS[width]
    raise UnknownOpError(f"bitcast of {kind} {elem or width}: only floats and 8/16/32/64-bit integers are modelled")


def _layout(t: TypeInfo):
    """(storage dtype, element count or None for a scalar, is_float) of a bitcast operand or result type."""
    if t.kind == "vector":
        m = re.fullmatch(r"i(\d+)", t.elem)
        if t.elem in FLOATS:
            return FLOATS[t.elem], t.count, True
        if m and int(m.group(1)) in UINTS:
            return UINTS[int(m.group(1))], t.count, False
        raise UnknownOpError(f"bitcast of vector<{t.count}x{t.elem}> is not modelled")
    return _scalar_dtype(t.kind, t.elem, t.width), None, t.kind == "float"


@register("llvm.bitcast", "arith.bitcast", "vector.bitcast")
def _bitcast(c, op, info):
    # the same bits, another type (LLVM LangRef "bitcast"); little-endian: element 0 of a vector is the low part
    (a,) = _operands(c, op)
    r, t = _result(c, op)
    sdt, scount, sfloat = _layout(TypeInfo(op.operands[0].type))
    ddt, dcount, dfloat = _layout(t)

    def fn(w):
        e = w.env
        x = e[a]
        uniform_in = not isinstance(x, np.ndarray)
        v = lanes(x) if sfloat else lanes(x, np.uint64).astype(sdt)
        raw = np.ascontiguousarray(v).view(np.uint8).reshape(WARP, -1)
        out = raw.view(ddt)
        out = out if dcount is not None else out.reshape(WARP)
        if not dfloat:
            out = out.astype(np.uint64)
        if uniform_in and dcount is None:
            out = int(out[0]) if not dfloat else out[0]
        e[r] = out
    return False, fn


def _position(op, c, what: str):
    """The static position of a rank-1 vector op, or the slot of its dynamic one."""
    static = list(ir.DenseI64ArrayAttr(op.attributes["static_position"]))
    if len(static) != 1:
        raise UnknownOpError(f"{what} at {static}: only one position (rank-1 vectors) is modelled")
    if static[0] == DYNAMIC:
        return None, c.slot(op.opview.dynamic_position[0])
    return static[0], None


def _element(vec, p, count: int, w, what: str):
    if not isinstance(p, int):
        p = uniform(p, w.mask, f"{what} position")
    if not 0 <= p < count:
        raise OutOfBoundsError(f"{what} at position {p} of a vector of {count}")
    return p


@register("vector.extract")
def _vextract(c, op, info):
    # vector.extract %v[p] : T from vector<n x T>
    (src,) = [c.slot(op.opview.source)]
    p, pslot = _position(op, c, op.name)
    r, _ = _result(c, op)
    count = TypeInfo(op.operands[0].type).count

    def fn(w):
        e = w.env
        q = _element(e[src], p if pslot is None else e[pslot], count, w, op.name)
        e[r] = lanes(e[src])[:, q]
    return False, fn


@register("vector.insert")
def _vinsert(c, op, info):
    # vector.insert %x, %v[p]
    v = op.opview
    val, dest = c.slot(v.valueToStore), c.slot(v.dest)
    p, pslot = _position(op, c, op.name)
    r, t = _result(c, op)

    def fn(w):
        e = w.env
        q = _element(e[dest], p if pslot is None else e[pslot], t.count, w, op.name)
        out = np.array(lanes(e[dest]))
        out[:, q] = e[val]
        e[r] = out
    return False, fn


@register("llvm.extractelement")
def _extractelement(c, op, info):
    vec, pos = _operands(c, op)
    r, _ = _result(c, op)
    count = TypeInfo(op.operands[0].type).count

    def fn(w):
        e = w.env
        q = _element(e[vec], e[pos], count, w, op.name)
        e[r] = lanes(e[vec])[:, q]
    return False, fn


def _vector_dtype(t: TypeInfo):
    if t.elem in FLOATS:
        return FLOATS[t.elem]
    if re.fullmatch(r"i\d+", t.elem):
        return bool if t.elem == "i1" else np.uint64
    raise UnknownOpError(f"vector<{t.count}x{t.elem}> is not modelled")


@register("vector.broadcast")
def _broadcast(c, op, info):
    # vector.broadcast of a scalar (the former vector.splat)
    (a,) = _operands(c, op)
    r, t = _result(c, op)
    if t.kind != "vector" or TypeInfo(op.operands[0].type).kind == "vector":
        raise UnknownOpError("vector.broadcast: only scalar -> rank-1 vector is modelled")
    dt = _vector_dtype(t)

    def fn(w):
        e = w.env
        e[r] = np.repeat(lanes(e[a], dt).reshape(WARP, 1), t.count, axis=1)
    return False, fn


@register("vector.from_elements")
def _from_elements(c, op, info):
    parts = _operands(c, op)
    r, t = _result(c, op)
    dt = _vector_dtype(t)

    def fn(w):
        e = w.env
        e[r] = np.stack([lanes(e[s], dt) for s in parts], axis=1)
    return False, fn


@register("llvm.insertvalue")
def _insertvalue(c, op, info):
    # llvm.insertvalue %x, %struct[p]: a struct of f32 (accumulator registers) with register p replaced
    container, val = c.slot(op.opview.container), c.slot(op.opview.value)
    r, t = _result(c, op)
    pos = list(ir.DenseI64ArrayAttr(op.attributes["position"]))
    if t.kind != "struct" or len(pos) != 1:
        raise UnknownOpError(f"llvm.insertvalue into {op.results[0].type} at {pos}: only flat structs of f32 are "
                             "modelled")
    p = pos[0]

    def fn(w):
        e = w.env
        s = e[container]
        if isinstance(s, Pending):
            if not s.retired:
                raise AccumulatorReadError(f"accumulator register {p} written before the wgmma.wait_group that "
                                           "retires the wgmma writing it: wait (wgmma.wait_group) for its group first")
            s = s.value
        out = np.array(lanes(s, np.float32))
        out[:, p] = e[val]
        e[r] = out
    return False, fn


def dense_vector(attr, t: TypeInfo) -> np.ndarray:
    """A dense vector constant (a splat, or f32/integer elements) as a (32, n) lane array."""
    dt = _vector_dtype(t)
    dense = ir.DenseElementsAttr(attr)
    if dense.is_splat:
        v = dense.get_splat_value()
        values = [ir.FloatAttr(v).value if t.elem in FLOATS else ir.IntegerAttr(v).value] * t.count
    elif t.elem == "f32":
        values = list(ir.DenseFPElementsAttr(attr))
    elif t.elem not in FLOATS:
        values = list(ir.DenseIntElementsAttr(attr))
    else:
        raise UnknownOpError(f"a non-splat vector<{t.count}x{t.elem}> constant is not modelled")
    if dt is np.uint64:
        width = int(t.elem[1:])
        values = [v & ((1 << width) - 1) for v in values]
    return np.tile(np.array(values).astype(dt), (WARP, 1))


@register("llvm.mlir.constant")
def _llvm_constant(c, op, info):
    r, t = _result(c, op)
    attr = op.attributes["value"]
    if t.kind == "vector":
        vec = dense_vector(attr, t)

        def fn_vec(w):
            w.env[r] = vec.copy()
        return False, fn_vec
    if t.kind == "int":
        v = ir.IntegerAttr(attr).value
        value = bool(v & 1) if t.width == 1 else v & t.mask
    elif t.kind == "float":
        value = FLOATS[t.elem](ir.FloatAttr(attr).value)
    else:
        raise UnknownOpError(f"llvm.mlir.constant of {op.results[0].type}: only integer and float scalars are modelled")

    def fn(w):
        w.env[r] = value
    return False, fn


# ---- integer ops the float code needs ------------------------------------------------------------------

def _int_unary(compute):
    def handler(c, op, info):
        (a,) = _operands(c, op)
        r, t = _result(c, op)
        src = _int_width(TypeInfo(op.operands[0].type), op.name)
        dst = _int_width(t, op.name)
        f = compute(op.name, src, dst)

        def fn(w):
            e = w.env
            e[r] = f(e[a])
        return False, fn
    return handler


def _cast_int(name, src, dst):
    m = (1 << dst) - 1
    if name in ("arith.index_cast",) and dst > src:            # sign-extend
        s = 1 << (src - 1)
        return lambda x: ((x ^ s) - s) & m if not isinstance(x, np.ndarray) else (
            ((x.astype(np.int64) ^ s) - s).astype(np.uint64) & np.uint64(m))
    if m == (1 << 64) - 1:
        return lambda x: x
    return lambda x: x & m if not isinstance(x, np.ndarray) else x & np.uint64(m)


# arith.trunci: the low bits; index_cast: sign-extends or truncates; index_castui: zero-extends or truncates
register("arith.trunci", "arith.index_cast", "arith.index_castui")(_int_unary(_cast_int))


def _int_binary(compute):
    def handler(c, op, info):
        a, b = _operands(c, op)
        r, t = _result(c, op)
        width = _int_width(t, op.name)
        f = compute(width, (1 << width) - 1)

        def fn(w):
            e = w.env
            e[r] = f(e[a], e[b], w)
        return False, fn
    return handler


def _shift_amount(y, w, width: int, what: str):
    if np.any(lanes(y)[w.mask] >= width):
        raise EmulationError(f"{what} by {y} >= the bit width {width}: the result is poison")
    return y


def _shli(width, m):
    def f(x, y, w):
        y = _shift_amount(y, w, width, "arith.shli")
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            out = (np.asarray(x, np.uint64) << np.asarray(y, np.uint64)) & np.uint64(m)
            return out.astype(x.dtype) if isinstance(x, np.ndarray) else out   # vector lanes keep their type
        return (x << y) & m
    return f


def _shrsi(width, m):
    def f(x, y, w):
        y = _shift_amount(y, w, width, "arith.shrsi")
        v = signed(x, width) >> (np.asarray(y, np.int64) if isinstance(y, np.ndarray) else y)
        return (v.astype(np.int64).astype(np.uint64) & np.uint64(m)) if isinstance(v, np.ndarray) else v & m
    return f


def _minmax_int(is_max, is_signed):
    def make(width, m):
        def f(x, y, w):
            xs, ys = (signed(x, width), signed(y, width)) if is_signed else (x, y)
            pick = (xs >= ys) if is_max else (xs <= ys)
            if isinstance(pick, np.ndarray):
                return np.where(pick, lanes(x, np.uint64), lanes(y, np.uint64))
            return x if pick else y
        return f
    return make


register("arith.shli")(_int_binary(_shli))
register("arith.shrsi")(_int_binary(_shrsi))
register("arith.maxsi")(_int_binary(_minmax_int(True, True)))
register("arith.minsi")(_int_binary(_minmax_int(False, True)))
register("arith.maxui")(_int_binary(_minmax_int(True, False)))
register("arith.minui")(_int_binary(_minmax_int(False, False)))


# ---- warp-collective: shfl.sync, redux.sync (PTX ISA 9.7.9 "shfl.sync", 9.7.13 "redux.sync") ---------------

LANE = np.arange(WARP)


def _members(w, member: int, what: str) -> np.ndarray:
    """The membermask as a lane mask, checked: every executing lane is in it, and every non-exited lane in it
    executes the instruction now (the emulator runs the lanes of a warp that execute one op together)."""
    bits = ((member >> LANE) & 1).astype(bool)
    block = w.cta.launch.kernel.block
    exists = w.tid < block[0] * block[1] * block[2]
    outside = w.mask & ~bits
    if outside.any():
        raise DivergenceError(f"{what}: lanes {np.flatnonzero(outside).tolist()} execute it but are not in its "
                              f"membermask 0x{member:08x} (undefined: a thread must be in the membermask)")
    missing = bits & exists & ~w.mask
    if missing.any():
        raise DivergenceError(f"{what}: membermask 0x{member:08x} names lanes {np.flatnonzero(missing).tolist()}, "
                              "which are inactive here: every non-exited thread of the membermask must execute it "
                              "together (move it out of the divergent branch or narrow the membermask)")
    return bits


@register("nvvm.shfl.sync")
def _shfl(c, op, info):
    # shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask (PTX ISA 9.7.9 "shfl.sync"):
    #   lane = laneid; bval = b[4:0]; cval = c[4:0]; segmask = c[12:8]
    #   maxLane = (lane & segmask) | (cval & ~segmask); minLane = lane & segmask
    #   up: j = lane - bval, p = j >= maxLane   down: j = lane + bval, p = j <= maxLane
    #   bfly: j = lane ^ bval, p = j <= maxLane idx: j = minLane | (bval & ~segmask), p = j <= maxLane
    #   if !p: j = lane; d = a of lane j. Reading a lane that does not execute it is undefined (an error here).
    v = op.opview
    member, val, off, clamp = (c.slot(x) for x in (v.thread_mask, v.val, v.offset, v.mask_and_clamp))
    kind = str(op.attributes["kind"]).split()[-1].rstrip(">")
    pair = "return_value_and_is_valid" in op.attributes
    r = c.slot(op.results[0])
    vt = TypeInfo(op.operands[1].type)
    if not ((vt.kind == "int" and vt.width == 32) or (vt.kind == "float" and vt.elem == "f32")):
        raise UnknownOpError(f"nvvm.shfl.sync of {op.operands[1].type}: only i32 and f32 (b32) are modelled")

    def fn(w):
        e = w.env
        mask = uniform(e[member], w.mask, "shfl.sync membermask")
        _members(w, mask, f"shfl.sync.{kind}")
        b = lanes(e[off], np.uint64).astype(np.int64) & 31
        cv = lanes(e[clamp], np.uint64).astype(np.int64)
        cval, seg = cv & 31, (cv >> 8) & 31
        max_lane = (LANE & seg) | (cval & ~seg)
        if kind == "up":
            j = LANE - b
            ok = j >= max_lane
        elif kind == "down":
            j = LANE + b
            ok = j <= max_lane
        elif kind == "bfly":
            j = LANE ^ b
            ok = j <= max_lane
        else:
            j = (LANE & seg) | (b & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, LANE)
        bad = w.mask & ~w.mask[j]
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DivergenceError(f"shfl.sync.{kind}: lane {i} reads lane {int(j[i])}, which does not execute this "
                                  f"shfl.sync (inactive or not in membermask 0x{mask:08x}): its value is undefined")
        x = e[val]
        out = x if not isinstance(x, np.ndarray) else x[j]
        e[r] = (out, ok) if pair else out
    return False, fn


@register("nvvm.redux.sync")
def _redux(c, op, info):
    # redux.sync.op{.abs}{.NaN}.type d, a, membermask (PTX ISA 9.7.13 "redux.sync"): the reduction over the
    # non-exited threads of the membermask, the same d in each. .u32/.s32 add (wrapping), min/max, umin/umax,
    # and/or/xor; .f32 min/max (sm_100a) with .abs (|a|) and .NaN (NaN if any input is NaN, else NaN inputs
    # are ignored), -0 < +0
    v = op.opview
    val, member = c.slot(v.val), c.slot(v.mask_and_clamp)
    kind = str(op.attributes["kind"]).split()[-1].rstrip(">")
    r, t = _result(c, op)
    absolute = "abs" in op.attributes and ir.BoolAttr(op.attributes["abs"]).value
    nan = "nan" in op.attributes and ir.BoolAttr(op.attributes["nan"]).value
    if kind in ("fmin", "fmax"):
        if t.kind != "float" or t.elem != "f32":
            raise UnknownOpError(f"redux.sync {kind} on {op.results[0].type}: f32 only")
        pick = _minmax(kind == "fmax", nan)
    elif t.kind != "int" or t.width != 32:
        raise UnknownOpError(f"redux.sync {kind} on {op.results[0].type}: i32 only")

    def fn(w):
        e = w.env
        mask = uniform(e[member], w.mask, "redux.sync membermask")
        _members(w, mask, f"redux.sync.{kind}")
        x = lanes(e[val], np.float32 if kind in ("fmin", "fmax") else np.uint64)[w.mask]
        if kind in ("fmin", "fmax"):
            if absolute:
                x = np.abs(x)
            out = x[0]
            for y in x[1:]:
                out = pick(out, y, "f32")
            e[r] = np.float32(out)
            return
        if kind == "add":
            out = int(x.sum(dtype=np.uint64)) & 0xFFFFFFFF
        elif kind in ("min", "max"):
            s = signed(x, 32)
            out = int(s.min() if kind == "min" else s.max()) & 0xFFFFFFFF
        elif kind in ("umin", "umax"):
            out = int(x.min() if kind == "umin" else x.max())
        else:
            ufunc = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
            out = int(ufunc.reduce(x))
        e[r] = out
    return False, fn
