"""The arith dialect: integer ops on canonical unsigned N-bit values, and the float ops (whose semantics, shared with
their llvm twins, are in semantics.py: IEEE-754 round to nearest even, PTX's canonical NaN, exact conversions).
"""
from __future__ import annotations

import numpy as np
from mlir import ir

from . import semantics as sem
from .compiler import FLOATS, TypeInfo, handles, int_attr, lanes, operand_slots, result_slot, signed
from .errors import EmulationError, UnknownOpError
from .semantics import dense_vector, int_width

# arith.cmpi predicate codes (arith::CmpIPredicate)
CMPI = {0: "eq", 1: "ne", 2: "slt", 3: "sle", 4: "sgt", 5: "sge", 6: "ult", 7: "ule", 8: "ugt", 9: "uge"}


# ---- arith (MLIR arith dialect semantics on canonical unsigned integers) ------------------------------

@handles("arith.constant")
def _constant(c, op, info):
    r, t = result_slot(c, op)
    attr = op.attributes["value"]
    if t.kind == "int":
        v = ir.IntegerAttr(attr).value
        value = bool(v & 1) if t.width == 1 else v & t.mask
    elif t.kind == "float":
        value = FLOATS[t.elem](ir.FloatAttr(attr).value)
    elif t.kind == "vector":
        vec = dense_vector(attr, t)

        def fn_vec(w):
            w.env[r] = vec.copy()
        return False, fn_vec
    else:
        raise UnknownOpError(f"arith.constant of type {t.kind}: only integer and float scalars and vectors are "
                             "modelled")

    def fn(w):
        w.env[r] = value
    return False, fn


def _binary(compute):
    def handler(c, op, info):
        a, b = operand_slots(c, op)
        r, t = result_slot(c, op)
        m = t.mask if t.width > 1 else None
        f = compute(t, m)

        def fn(w):
            e = w.env
            e[r] = f(e[a], e[b], w)
        return False, fn
    return handler


handles("arith.addi")(_binary(lambda t, m: (lambda x, y, w: (x + y) & m) if m else (lambda x, y, w: x ^ y)))
handles("arith.subi")(_binary(lambda t, m: (lambda x, y, w: (x - y) & m) if m else (lambda x, y, w: x ^ y)))
handles("arith.muli")(_binary(lambda t, m: (lambda x, y, w: (x * y) & m) if m else (lambda x, y, w: x & y)))
handles("arith.andi")(_binary(lambda t, m: lambda x, y, w: x & y))
handles("arith.ori")(_binary(lambda t, m: lambda x, y, w: x | y))
handles("arith.xori")(_binary(lambda t, m: lambda x, y, w: x ^ y))


def _nonzero_divisor(y, w, what: str):
    """y with inactive lanes' zeros replaced; division by zero on an active lane is undefined (an error)."""
    if isinstance(y, np.ndarray):
        zero = y == 0
        if zero.any():
            if (zero & w.mask).any():
                raise EmulationError(f"{what} by zero on lanes {np.flatnonzero(zero & w.mask).tolist()}")
            return np.where(zero, np.uint64(1), y)
        return y
    if y == 0:
        raise EmulationError(f"{what} by zero")
    return y


handles("arith.divui")(_binary(lambda t, m: lambda x, y, w: x // _nonzero_divisor(y, w, "arith.divui")))
handles("arith.remui")(_binary(lambda t, m: lambda x, y, w: x % _nonzero_divisor(y, w, "arith.remui")))


def _shrui(t, m):
    def f(x, y, w):
        if np.any(lanes(y)[w.mask] >= t.width):
            raise EmulationError(f"arith.shrui by {y} >= the bit width {t.width}: the result is poison")
        return x >> y
    return f


handles("arith.shrui")(_binary(_shrui))


@handles("arith.cmpi")
def _cmpi(c, op, info):
    a, b = operand_slots(c, op)
    r, _ = result_slot(c, op)
    width = TypeInfo(op.operands[0].type).width
    pred = CMPI[int_attr(op, "predicate")]
    sgn = pred[0] == "s"
    rel = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
           "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y}[pred[-2:]]

    def fn(w):
        e = w.env
        x, y = e[a], e[b]
        if sgn:
            x, y = signed(x, width), signed(y, width)
        e[r] = rel(x, y)
    return False, fn


@handles("arith.extui", "arith.extsi")
def _ext(c, op, info):
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    src = TypeInfo(op.operands[0].type).width
    sign = op.name == "arith.extsi"
    m = t.mask
    s = 1 << (src - 1)

    def fn(w):
        e = w.env
        x = e[a]
        if src == 1:
            one = m if sign else 1
            e[r] = np.where(x, np.uint64(one), np.uint64(0)) if isinstance(x, np.ndarray) else (one if x else 0)
        else:
            e[r] = (((x ^ s) - s) & m) if sign else x
    return False, fn


# ---- integer ops the float code needs ------------------------------------------------------------------

def _int_unary(compute):
    def handler(c, op, info):
        (a,) = operand_slots(c, op)
        r, t = result_slot(c, op)
        src = int_width(TypeInfo(op.operands[0].type), op.name)
        dst = int_width(t, op.name)
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
handles("arith.trunci", "arith.index_cast", "arith.index_castui")(_int_unary(_cast_int))


def _ctlz(name, src, dst):
    """llvm.intr.ctlz / math.ctlz (PTX clz.b32, 9.7.1 "clz"): the count of leading zero bits, the width for 0 (the
    lowering asks for is_zero_poison = false)."""
    def f(x):
        v = np.asarray(x, dtype=np.uint64)
        length = sum(((v >> np.uint64(k)) != 0).astype(np.uint64) for k in range(src))   # the bit length
        out = np.uint64(src) - length
        return out if isinstance(x, np.ndarray) else int(out)
    return f


handles("math.ctlz", "llvm.intr.ctlz")(_int_unary(_ctlz))


def _int_binary(compute):
    def handler(c, op, info):
        a, b = operand_slots(c, op)
        r, t = result_slot(c, op)
        width = int_width(t, op.name)
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


def _divsi(width, m):
    """Signed division rounding toward 0 (PTX div.s32); by zero and MIN / -1 (the quotient overflows) are
    undefined: errors on an active lane."""
    def f(x, y, w):
        y = _nonzero_divisor(y, w, "arith.divsi")
        xs, ys = signed(x, width), signed(y, width)
        low = -(1 << (width - 1))
        over = np.asarray((xs == low) & (ys == -1))
        if over.any() and (not over.shape or (over & w.mask).any()):
            raise EmulationError(f"arith.divsi of {low} by -1: the quotient overflows i{width}")
        q = np.where(np.asarray(xs) * np.asarray(ys) < 0, -(np.abs(xs) // np.abs(ys)), np.abs(xs) // np.abs(ys))
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            return q.astype(np.int64).astype(np.uint64) & np.uint64(m)
        return int(q) & m
    return f


handles("arith.divsi")(_int_binary(_divsi))
handles("arith.shli")(_int_binary(_shli))
handles("arith.shrsi")(_int_binary(_shrsi))
handles("arith.maxsi")(_int_binary(_minmax_int(True, True)))
handles("arith.minsi")(_int_binary(_minmax_int(False, True)))
handles("arith.maxui")(_int_binary(_minmax_int(True, False)))
handles("arith.minui")(_int_binary(_minmax_int(False, False)))


# ---- float ops (semantics.py) -------------------------------------------------------------------------------
# IEEE-754 add/sub/mul/div, round to nearest even: PTX ISA 9.7.3 add/sub/mul/div (.rn), 9.7.4 add/sub/mul (.bf16/.f16)
for _name, _ufunc in (("addf", np.add), ("subf", np.subtract), ("mulf", np.multiply), ("divf", np.divide)):
    handles(f"arith.{_name}")(sem.float_binary(_ufunc))
handles("arith.negf")(sem.sign_op)
# arith.maximumf/minimumf (IEEE-754-2019 maximum/minimum) -> PTX max/min.NaN; arith.maxnumf/minnumf (maximumNumber)
# -> PTX max/min (PTX ISA 9.7.3 "max", "min")
handles("arith.maximumf")(sem.minmax_op(True, True))
handles("arith.minimumf")(sem.minmax_op(False, True))
handles("arith.maxnumf")(sem.minmax_op(True, False))
handles("arith.minnumf")(sem.minmax_op(False, False))
handles("arith.cmpf")(sem.cmpf_op)
handles("arith.select")(sem.select_op)
handles("arith.extf")(sem.extf_op)
handles("arith.truncf")(sem.truncf_op)
handles("arith.sitofp", "arith.uitofp")(sem.itofp_op)
handles("arith.fptosi", "arith.fptoui")(sem.fptoi_op)
handles("arith.bitcast")(sem.bitcast_op)
