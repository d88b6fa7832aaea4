"""The IR namespace in which the lowering evaluates an attention's score and mask modifiers (warploom.score).

    value = warploom.score.evaluate(mods.score, env, ModOps(b))     # env: the score, indices and scalars as IR values

f32 arithmetic is arith's (add, sub, mul, min/max with NaN propagating as torch's), and x / y is x rcp.approx(y)
(MUFU.RCP, at most 1 ulp from 1/y, then a rounded multiply: within 2 ulp of the quotient; a divisor that is a
scalar or a constant gets one reciprocal for all scores); i32 is arith's signed integer ops, booleans are i1. The
f32 functions: exp2 is ex2.approx.ftz (MUFU.EX2), log2 lg2.approx (MUFU.LG2), exp and log through them with log2(e)
and ln 2, and tanh(x) = sign(x) (1 - t) rcp(1 + t) with t = 2^(-2 |x| log2(e)) (t underflows to 0 for |x| > 44,
where tanh is 1 in f32). The emulator computes ex2.approx and rcp.approx bit for bit as the GPU does, lg2.approx
only for arguments >= 1 (warploom/emulate/mufu.py, tables measured on an H100).
"""
from __future__ import annotations

import math

from mlir import ir
from mlir.dialects import arith
from mlir.dialects import math as mathd

from .builder import Builder

LOG2E = math.log2(math.e)
LN2 = math.log(2.0)

_CMPF = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_CMPI = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}


class ModOps:
    """warploom.score.evaluate's namespace over a Builder's IR values."""

    def __init__(self, b: Builder, loads: dict | None = None):
        self.b = b
        self.loads = loads          # a memo of `load`s by (tensor, index values): reused where they dominate the use

    def const(self, value, type_: str):
        b = self.b
        if type_ == "f32":
            return b.constf(float(value))
        if type_ == "bool":
            return b.const(int(bool(value)), ir.IntegerType.get_signless(1))
        return b.const(int(value))

    def to_f32(self, x, type_: str):
        return arith.SIToFPOp(self.b.f32, x, loc=self.b.loc()).result

    def arith(self, op: str, x, y, type_: str):
        b = self.b
        if type_ == "f32":
            if op == "minimum":
                return arith.MinimumFOp(x, y, loc=b.loc()).result
            if op == "maximum":
                return arith.MaximumFOp(x, y, loc=b.loc()).result
            return {"add": b.addf, "sub": b.subf, "mul": b.mulf}[op](x, y)
        return {"add": b.add, "sub": b.sub, "mul": b.mul, "minimum": b.mins, "maximum": b.maxs}[op](x, y)

    def div(self, x, y):
        """x / y as x rcp.approx(y): a MUFU.RCP and a multiply instead of div.rn's subroutine (two of those per
        score made a softcap cost five plain attentions: benchmarks/NOTES.md, run 65); a divisor that is a scalar or
        a constant is the same value for every score, so its reciprocal is computed once (cse)."""
        return self.b.mulf(x, self.b.rcp(y))

    def neg(self, x, type_: str):
        return self.b.negf(x) if type_ == "f32" else self.b.sub(self.b.const(0), x)

    def abs(self, x, type_: str):
        b = self.b
        if type_ == "f32":
            return mathd.AbsFOp(x, loc=b.loc()).result
        return b.select(b.cmp("slt", x, b.const(0)), b.sub(b.const(0), x), x)

    def compare(self, op: str, x, y, type_: str):
        return self.b.cmpf(_CMPF[op], x, y) if type_ == "f32" else self.b.cmp(_CMPI[op], x, y)

    def logic(self, op: str, x, y):
        return self.b.and_(x, y) if op == "and" else self.b.or_(x, y)

    def not_(self, x):
        return self.b.xor(x, self.const(True, "bool"))

    def where(self, c, x, y):
        return self.b.select(c, x, y)

    def floordiv(self, x, y):
        """x // y of i32 values, rounded toward -inf (Python's and torch's): div.s32 rounds toward 0, so a quotient
        with a remainder of the divisor's opposite sign steps down by one."""
        b = self.b
        q = arith.DivSIOp(x, y, loc=b.loc()).result
        r = b.sub(x, b.mul(q, y))
        zero = b.const(0)
        signs = b.xor(b.cmp("slt", r, zero), b.cmp("slt", y, zero))
        return b.select(b.and_(b.cmp("ne", r, zero), signs), b.sub(q, b.const(1)), q)

    def load(self, tensor, index: list, type_: str):
        """ld.global of a captured tensor's element: `tensor` is (its address, its strides in elements), the index
        one i32 per dimension; the offset sum(index_i stride_i) in i32 (the host refuses a tensor whose
        elements the index expressions could reach past, and one of 2^31 elements or more)."""
        b = self.b
        address, strides = tensor
        key = (address, *strides, *index)
        if self.loads is not None and key in self.loads:
            return self.loads[key]
        offset = None
        for i, s in zip(index, strides):
            term = b.mul(i, s)
            offset = term if offset is None else b.add(offset, term)
        ty = b.f32 if type_ == "f32" else b.i32
        value = b.load(ty, b.gep(address, offset, ty), 4, "captured")
        if self.loads is not None:
            self.loads[key] = value
        return value

    def unary(self, op: str, x):
        b = self.b
        if op == "exp2":
            return b.exp2(x)
        if op == "log2":
            return b.log2(x)
        if op == "exp":
            return b.exp2(b.mulf(x, b.constf(LOG2E)))
        if op == "log":
            return b.mulf(b.log2(x), b.constf(LN2))
        if op == "tanh":
            t = b.exp2(b.mulf(mathd.AbsFOp(x, loc=b.loc()).result, b.constf(-2.0 * LOG2E)))
            one = b.constf(1.0)
            r = b.mulf(b.subf(one, t), b.rcp(b.addf(one, t)))
            return b.select(b.cmpf("olt", x, b.constf(0.0)), b.negf(r), r)
        raise ValueError(f"the lowering has no {op!r} for score modifiers")
