"""Op semantics that several dialects share (arith.addf and llvm.fadd are one operation; arith.select, llvm.select;
the conversions, bitcasts, min/max, fma, compares), as handler makers the ops_<dialect>.py files register under
their own op names; and the definitions they follow.

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
  - rcp.approx.ftz.f32 (nvvm.rcp.approx.ftz.f, the score modifiers' division and tanh): the sm_90a MUFU's table
    (warploom.emulate.mufu); the same assumption for sm_100a.

Approximate (documented differences from the device):
  - ex2.approx without .ftz, or of bf16/f16 (llvm.intr.exp2, math.exp2, llvm.nvvm.ex2.approx.{f,bf16,f16}):
    computed as float32(exp2(float64(x))), i.e. (nearly always) correctly rounded; the hardware's
    ex2.approx.f32 has a maximum relative error of about 2^-22 (PTX ISA 9.7.3 "ex2"), so single ulps differ.
    .ftz flushes subnormal inputs and results to sign-preserving zero; NVPTX emits ex2.approx.f32 (no .ftz)
    for f32 llvm.exp2 in kernels without flush-to-zero, ex2.approx.ftz.bf16 for bf16, ex2.approx.f16 for f16.
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

from .compiler import FLOATS, TypeInfo, lanes, operand_slots, result_slot, signed, uniform
from .core import WARP, Pending
from .errors import DivergenceError, EmulationError, OutOfBoundsError, UnknownOpError
from .floats import (CANONICAL_NAN, FCMP, ROUNDING, SIGN_BIT, UINT, UINTS, as_f32, canonical, fma_exact, flush,
                     float_elem, round_float, scalar, to_elem)
from .mufu import ex2_approx_ftz_f32, lg2_approx_f32, rcp_approx_ftz_f32

DYNAMIC = ir.ShapedType.get_dynamic_size()



# ---- arithmetic -------------------------------------------------------------------------------------

def float_binary(ufunc):
    def handler(c, op, info):
        a, b = operand_slots(c, op)
        r, t = result_slot(c, op)
        elem = float_elem(t, op.name)
        if elem == "f32":
            def fn(w):
                e = w.env
                e[r] = canonical(ufunc(e[a], e[b]), "f32")
        else:
            def fn(w):
                e = w.env
                e[r] = to_elem(ufunc(as_f32(e[a]), as_f32(e[b])), elem)
        return False, fn
    return handler


def sign_op(c, op, info):
    # fneg flips the sign bit, fabs clears it (LLVM LangRef "fneg", "llvm.fabs"; PTX neg/abs); NaN bits kept
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    elem = float_elem(t, op.name)
    u, dt = UINT[elem], FLOATS[elem]
    neg = op.name in ("arith.negf", "llvm.fneg")
    bit = u(SIGN_BIT[elem])
    keep = u(~SIGN_BIT[elem] & ((1 << (8 * np.dtype(u).itemsize)) - 1))

    def fn(w):
        e = w.env
        bits = np.asarray(e[a]).view(u)
        e[r] = scalar(((bits ^ bit) if neg else (bits & keep)).view(dt))
    return False, fn


def minmax(is_max: bool, nan_wins: bool, ftz: bool = False):
    """max/min with -0 < +0; nan_wins: NaN if any input is NaN (maximum/minimum, max.NaN), else the number
    (maxnum/minnum, max), NaN only when both are."""
    def compute(x, y, elem):
        if ftz:
            x, y = flush(x, elem), flush(y, elem)
        xf, yf = as_f32(x), as_f32(y)
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
        return scalar(flush(out, elem) if ftz else out)
    return compute


def minmax_op(is_max: bool, nan_wins: bool):
    f = minmax(is_max, nan_wins)

    def handler(c, op, info):
        a, b = operand_slots(c, op)
        r, t = result_slot(c, op)
        elem = float_elem(t, op.name)

        def fn(w):
            e = w.env
            e[r] = f(e[a], e[b], elem)
        return False, fn
    return handler


def fma_op(c, op, info):
    # llvm.fma: a * b + c with one rounding (PTX ISA 9.7.3 "fma": fma.rn.f32; 9.7.4 fma.rn.bf16/f16);
    # llvm.fmuladd may fuse or not: NVPTX fuses it (fma.rn)
    a, b, cc = operand_slots(c, op)
    r, t = result_slot(c, op)
    elem = float_elem(t, op.name)

    def fn(w):
        e = w.env
        e[r] = fma_exact(e[a], e[b], e[cc], elem)
    return False, fn


def cmpf_op(c, op, info):
    # arith.cmpf / llvm.fcmp: ordered predicates are false on NaN, unordered true (PTX ISA 9.3.1 "Floating
    # Point Comparisons": setp eq/ne/lt/... and equ/neu/ltu/...)
    a, b = operand_slots(c, op)
    r, _ = result_slot(c, op)
    float_elem(TypeInfo(op.operands[0].type), op.name)
    pred = FCMP[ir.IntegerAttr(op.attributes["predicate"]).value]
    rel = {"eq": np.equal, "ne": np.not_equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less,
           "le": np.less_equal}.get(pred[1:])

    def fn(w):
        e = w.env
        x, y = as_f32(e[a]), as_f32(e[b])
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


def select_op(c, op, info):
    # select %cond, %a, %b: per lane (an i1 condition) or whole (a uniform one)
    cond, a, b = operand_slots(c, op)
    r, t = result_slot(c, op)
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

def ex2(x, elem: str, ftz: bool):
    if ftz and elem == "f32":                 # MUFU.EX2 itself, bit for bit (warploom.emulate.mufu)
        return scalar(ex2_approx_ftz_f32(as_f32(x)))
    if ftz:
        x = flush(x, elem)
    y = np.exp2(np.asarray(as_f32(x), np.float64))
    y = round_float(y, elem) if elem == "bf16" else scalar(canonical(y.astype(FLOATS[elem]), elem))
    return flush(y, elem) if ftz else y


def unary_approx(f, ftz_of):
    def handler(c, op, info):
        (a,) = operand_slots(c, op)
        r, t = result_slot(c, op)
        elem = float_elem(t, op.name)
        ftz = ftz_of(op, elem)

        def fn(w):
            e = w.env
            e[r] = f(e[a], elem, ftz)
        return False, fn
    return handler


def rcp(x, elem, ftz):
    if elem == "f32" and ftz:                 # MUFU.RCP itself, measured (warploom.emulate.mufu)
        return scalar(canonical(rcp_approx_ftz_f32(as_f32(x)), elem))
    x = flush(x, elem)
    y = np.asarray(1.0) / np.asarray(as_f32(x), np.float64)
    return flush(scalar(canonical(y.astype(np.float32), elem)), elem)

def lg2(x, elem, ftz):
    if ftz:
        x = flush(x, elem)
    with np.errstate(all="ignore"):
        y = np.log2(np.asarray(as_f32(x), np.float64)).astype(np.float32)
    if elem == "f32":                         # MUFU.LG2 itself where measured, x >= 1 (warploom.emulate.mufu)
        hw, covered = lg2_approx_f32(as_f32(x))
        y = np.where(covered, hw, y)
    return scalar(canonical(y, elem))


# ---- conversions ---------------------------------------------------------------------------------------

def extf_op(c, op, info):
    # bf16/f16 -> f32 is exact (PTX cvt.f32.bf16 / cvt.f32.f16)
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    src, dst = float_elem(TypeInfo(op.operands[0].type), op.name), float_elem(t, op.name)
    if dst != "f32" or src == "f32":
        raise UnknownOpError(f"{op.name} {src} -> {dst}: only bf16/f16 -> f32 is modelled")

    def fn(w):
        e = w.env
        e[r] = canonical(e[a].astype(np.float32), "f32")
    return False, fn


def truncf_op(c, op, info):
    # f32 -> bf16/f16 (PTX cvt.{rn,rz,rm,rp,rna}.bf16.f32 / .f16.f32): arith.truncf's roundingmode (default
    # to_nearest_even, as llvm.fptrunc)
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    src, dst = float_elem(TypeInfo(op.operands[0].type), op.name), float_elem(t, op.name)
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


def int_width(t: TypeInfo, what: str) -> int:
    if t.kind == "int" or (t.kind == "vector" and t.width):      # a vector of integers: elementwise
        return t.width
    if t.kind == "index":
        return 64
    raise UnknownOpError(f"{what} on {t.kind}: only integers (and vectors of them) are modelled")


def itofp_op(c, op, info):
    # integer -> float, round to nearest even (PTX cvt.rn.f32.s32 / .u32, cvt.rn.bf16/f16...)
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    elem = float_elem(t, op.name)
    width = int_width(TypeInfo(op.operands[0].type), op.name)
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
            e[r] = scalar(v.astype(np.float32))
        else:
            e[r] = round_float(v.astype(np.float64), elem)     # exact in f64 below 2^53
    return False, fn


def fptoi_op(c, op, info):
    # float -> integer, toward zero (PTX cvt.rzi); NaN or out of range is poison in LLVM/MLIR (the GPU
    # saturates): an error on an active lane
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    width = int_width(t, op.name)
    sign = op.name.endswith("fptosi")
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if sign else (0, (1 << width) - 1)
    mask = (1 << width) - 1

    def fn(w):
        e = w.env
        x = np.trunc(np.asarray(as_f32(e[a]), np.float64))
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


# ---- bitcasts, vectors and structs ----------------------------------------------------------------------

def scalar_dtype(kind: str, elem: str | None, width: int):
    if kind == "float":
        return FLOATS[elem]
    if kind in ("int", "ptr") and width in UINTS:
        return UINTS[width]
    raise UnknownOpError(f"bitcast of {kind} {elem or width}: only floats and 8/16/32/64-bit integers are modelled")


def value_layout(t: TypeInfo):
    """(storage dtype, element count or None for a scalar, is_float) of a bitcast operand or result type."""
    if t.kind == "vector":
        m = re.fullmatch(r"i(\d+)", t.elem)
        if t.elem in FLOATS:
            return FLOATS[t.elem], t.count, True
        if m and int(m.group(1)) in UINTS:
            return UINTS[int(m.group(1))], t.count, False
        raise UnknownOpError(f"bitcast of vector<{t.count}x{t.elem}> is not modelled")
    return scalar_dtype(t.kind, t.elem, t.width), None, t.kind == "float"


def bitcast_op(c, op, info):
    # the same bits, another type (LLVM LangRef "bitcast"); little-endian: element 0 of a vector is the low part
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    sdt, scount, sfloat = value_layout(TypeInfo(op.operands[0].type))
    ddt, dcount, dfloat = value_layout(t)

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


def position(op, c, what: str):
    """The static position of a rank-1 vector op, or the slot of its dynamic one."""
    static = list(ir.DenseI64ArrayAttr(op.attributes["static_position"]))
    if len(static) != 1:
        raise UnknownOpError(f"{what} at {static}: only one position (rank-1 vectors) is modelled")
    if static[0] == DYNAMIC:
        return None, c.slot(op.opview.dynamic_position[0])
    return static[0], None


def element(vec, p, count: int, w, what: str):
    if not isinstance(p, int):
        p = uniform(p, w.mask, f"{what} position")
    if not 0 <= p < count:
        raise OutOfBoundsError(f"{what} at position {p} of a vector of {count}")
    return p


def dense_vector(attr, t: TypeInfo) -> np.ndarray:
    """A dense vector constant (a splat, or f32/integer elements) as a (32, n) lane array."""
    dt = vector_dtype(t)
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


def vector_dtype(t: TypeInfo):
    if t.elem in FLOATS:
        return FLOATS[t.elem]
    if re.fullmatch(r"i\d+", t.elem):
        return bool if t.elem == "i1" else np.uint64
    raise UnknownOpError(f"vector<{t.count}x{t.elem}> is not modelled")
