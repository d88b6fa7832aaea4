"""The core of the emit layer: a kernel function being built, its constants, arithmetic and structured control.

    b = Builder.kernel_module(module_block, "k_mod", "k", target, args, arg_attrs, arg_names, attrs, smem)
    with b.at_body():
        tid = b.sreg("tid", "x")
        with b.if_(b.cmp("eq", tid, b.const(0))):
            ...
        with b.for_(b.const(0), trips, b.const(1), iter_args=[acc]) as loop:
            ...
            loop.yield_(new_acc)

Every op is created through the real `mlir.dialects` builders, typed and verified
on creation; nothing is formatted as text. Two things keep the printed IR shaped
like hand-written MLIR:
  - i32/i64 constants are uniqued and hoisted to the entry block, in first-use
    order, so one value serves every use and always dominates it;
  - each result gets a name location (`%v12`, `%tid3`, `%ci32_7`, ...), which
    `text(op)` prints as SSA names (`use_name_loc_as_prefix`); a plain
    `str(op)` prints MLIR's default names.
"""
from __future__ import annotations

from contextlib import contextmanager

from mlir import ir
from mlir.dialects import arith, gpu, llvm, nvvm, scf

from .nobuilder import llvm_array, llvm_function_type, llvm_linkage

# kDynamicIndex of llvm.getelementptr: this position of rawConstantIndices takes the next dynamic index
GEP_DYNAMIC = -(1 << 31)


def ptr_type(address_space: int = 0) -> ir.Type:
    """!llvm.ptr in `address_space` (1 global, 3 shared::cta, 7 shared::cluster)."""
    return llvm.PointerType.get(address_space) if address_space else llvm.PointerType.get()


def text(op) -> str:
    """The op printed with the builder's value names (%tid3, %ci32_7) instead of %0, %c7_i32."""
    return op.operation.get_asm(use_name_loc_as_prefix=True)


class ForLoop:
    """An `scf.for` under construction: the induction variable, the iter_args, and what the body yields."""

    def __init__(self, op: scf.ForOp):
        self.op = op
        self.iv = op.induction_variable
        self.args = list(op.inner_iter_args)
        self.yielded: list[ir.Value] = []

    def yield_(self, *values: ir.Value) -> None:
        self.yielded = list(values)

    @property
    def results(self) -> list[ir.Value]:
        return list(self.op.results)


class Builder:
    """Emission state of one kernel function: value names, the entry block for hoisted constants, types."""

    def __init__(self, module: gpu.GPUModuleOp, func: llvm.LLVMFuncOp):
        self.module, self.func = module, func
        self.entry = func.regions[0].blocks[0]
        self.n = 0
        self._consts: dict[tuple[int, str], ir.Value] = {}
        self._last_const: ir.Operation | None = None
        self.i1 = ir.IntegerType.get_signless(1)
        self.i8 = ir.IntegerType.get_signless(8)
        self.i16 = ir.IntegerType.get_signless(16)
        self.i32 = ir.IntegerType.get_signless(32)
        self.i64 = ir.IntegerType.get_signless(64)
        self.f32 = ir.F32Type.get()

    # ---- the module, the kernel function and its body --------------------------------------------
    @classmethod
    def kernel_module(cls, block: ir.Block, module_name: str, func_name: str, target: ir.Attribute,
                      args: list[ir.Type], arg_attrs: list[dict], arg_names: list[str],
                      attrs: dict[str, ir.Attribute], smem: tuple[str, int] | None = None) -> "Builder":
        """Append `gpu.module @module_name [target]` to `block`, holding (when `smem` = (symbol, alignment))
        an extern dynamic-smem global, and `llvm.func @func_name(args)` with an empty entry block.
        Call within a context and location."""
        with ir.InsertionPoint(block):
            mod = gpu.GPUModuleOp(module_name, targets=ir.ArrayAttr.get([target]))
        body = mod.regions[0].blocks.append()
        with ir.InsertionPoint(body):
            if smem is not None:
                symbol, alignment = smem
                # extern .shared with a 0-byte type: the size comes from the launch's dynamic smem
                llvm.GlobalOp(ir.TypeAttr.get(llvm_array(0, ir.IntegerType.get_signless(8))), symbol,
                              llvm_linkage("external"), addr_space=3, alignment=alignment)
            func = llvm.LLVMFuncOp(func_name, ir.TypeAttr.get(llvm_function_type(args)),
                                   arg_attrs=ir.ArrayAttr.get([ir.DictAttr.get(a) for a in arg_attrs]))
        for key, value in attrs.items():
            func.attributes[key] = value
        func.regions[0].blocks.append(*args, arg_locs=[ir.Location.name(n) for n in arg_names])
        return cls(mod, func)

    @property
    def args(self) -> list[ir.Value]:
        return list(self.entry.arguments)

    @contextmanager
    def at_body(self):
        """Insert into the entry block; ends the function with llvm.return."""
        with ir.InsertionPoint(self.entry):
            yield
            llvm.ReturnOp()

    # ---- names and constants -------------------------------------------------------------------
    def fresh(self, prefix: str = "v") -> str:
        """A fresh value name: prefix + counter (one counter for all prefixes)."""
        self.n += 1
        return f"{prefix}{self.n}"

    def loc(self, prefix: str = "v") -> ir.Location:
        """The location that names the next result `fresh(prefix)`."""
        return ir.Location.name(self.fresh(prefix))

    def const(self, value: int, ty: ir.Type | None = None) -> ir.Value:
        """An integer constant (i32 unless `ty`; a vector type: every element `value`), uniqued and hoisted to the
        entry block in first-use order."""
        ty = ty or self.i32
        key = (value, str(ty))
        if key not in self._consts:
            attr = value
            if isinstance(ty, ir.VectorType):
                attr = ir.DenseElementsAttr.get_splat(ty, ir.IntegerAttr.get(ir.VectorType(ty).element_type, value))
            name = f"c{str(ty).replace('<', '').replace('>', '')}_{'m' if value < 0 else ''}{abs(value)}"
            self._consts[key] = self._hoisted_const(ty, attr, name)
        return self._consts[key]

    def _hoisted_const(self, ty: ir.Type, value, name: str) -> ir.Value:
        """arith.constant in the entry block, after the constants made before it (first-use order)."""
        op = arith.ConstantOp(ty, value, loc=ir.Location.name(name), ip=ir.InsertionPoint.at_block_begin(self.entry))
        if self._last_const is not None:
            op.operation.move_after(self._last_const)
        self._last_const = op.operation
        return op.result

    def typed(self, ty: ir.Type) -> "TypedOps":
        """This builder as an arithmetic namespace whose constants have type `ty` (warploom/layout/ops.py)."""
        return TypedOps(self, ty)

    @property
    def i64_ops(self) -> "TypedOps":
        return self.typed(self.i64)

    # ---- arithmetic (integer, the type of the operands) -------------------------------------------
    def _binary(self, op, a: ir.Value, b: ir.Value) -> ir.Value:
        return op(a, b, loc=self.loc()).result

    def add(self, a, b):
        return self._binary(arith.AddIOp, a, b)

    def sub(self, a, b):
        return self._binary(arith.SubIOp, a, b)

    def mul(self, a, b):
        return self._binary(arith.MulIOp, a, b)

    def divu(self, a, b):
        return self._binary(arith.DivUIOp, a, b)

    def remu(self, a, b):
        return self._binary(arith.RemUIOp, a, b)

    def and_(self, a, b):
        return self._binary(arith.AndIOp, a, b)

    def or_(self, a, b):
        return self._binary(arith.OrIOp, a, b)

    def xor(self, a, b):
        return self._binary(arith.XOrIOp, a, b)

    def shru(self, a, b):
        return self._binary(arith.ShRUIOp, a, b)

    def shl(self, a, b):
        return self._binary(arith.ShLIOp, a, b)

    def minu(self, a, b):
        return self._binary(arith.MinUIOp, a, b)

    def mins(self, a, b):
        return self._binary(arith.MinSIOp, a, b)

    def maxs(self, a, b):
        return self._binary(arith.MaxSIOp, a, b)

    def clz(self, a):
        """llvm.intr.ctlz (PTX clz.b32): the number of leading zero bits of `a` (its width for 0: not poison)."""
        return llvm.CountLeadingZerosOp(a, False, loc=self.loc()).result

    def cmp(self, pred: str, a: ir.Value, b: ir.Value) -> ir.Value:
        """arith.cmpi with a predicate name ('eq', 'ule', 'slt', ...)."""
        return arith.CmpIOp(getattr(arith.CmpIPredicate, pred), a, b, loc=self.loc()).result

    def ext64(self, a: ir.Value, signed: bool = True) -> ir.Value:
        op = arith.ExtSIOp if signed else arith.ExtUIOp
        return op(self.i64, a, loc=self.loc()).result

    def truncf(self, a: ir.Value, ty: ir.Type) -> ir.Value:
        return arith.TruncFOp(ty, a, loc=self.loc()).result

    # ---- float arithmetic (f32 unless the operands say otherwise) -----------------------------------
    def constf(self, value: float, ty: ir.Type | None = None) -> ir.Value:
        """A float constant (f32 unless `ty`), uniqued and hoisted to the entry block like `const`."""
        ty = ty or self.f32
        key = (float(value), str(ty))
        if key not in self._consts:
            text = {float("inf"): "inf", float("-inf"): "minf"}.get(float(value), repr(float(value)))
            if isinstance(ty, ir.VectorType):          # a splat: every element `value`
                attr = ir.DenseElementsAttr.get_splat(ty, ir.FloatAttr.get(ir.VectorType(ty).element_type, float(value)))
            else:
                attr = ir.FloatAttr.get(ty, float(value))
            name = f"c{str(ty).replace('<', '').replace('>', '')}_" + text.replace("-", "m").replace(".", "p").replace("+", "")
            self._consts[key] = self._hoisted_const(ty, attr, name)
        return self._consts[key]

    def addf(self, a, b):
        return self._binary(arith.AddFOp, a, b)

    def subf(self, a, b):
        return self._binary(arith.SubFOp, a, b)

    def mulf(self, a, b):
        return self._binary(arith.MulFOp, a, b)

    def divf(self, a, b):
        return self._binary(arith.DivFOp, a, b)

    def maxnumf(self, a, b):
        """max.f32 (PTX max: the number when one input is NaN)."""
        return self._binary(arith.MaxNumFOp, a, b)

    def negf(self, a):
        return arith.NegFOp(a, loc=self.loc()).result

    def fma(self, a, b, c):
        """a * b + c with one rounding (llvm.intr.fma -> fma.rn.f32)."""
        return llvm.FMAOp(a, b, c, loc=self.loc()).result

    def intrinsic(self, name: str, args: list[ir.Value], ty: ir.Type) -> ir.Value:
        """llvm.call_intrinsic of an LLVM intrinsic MLIR 22 has no op for (one result)."""
        return llvm.CallIntrinsicOp(ty, ir.StringAttr.get(name), args, [], ir.DenseI32ArrayAttr.get([]),
                                    loc=self.loc()).result

    def exp2(self, a):
        """2^a, f32: ex2.approx.ftz.f32 (llvm.nvvm.ex2.approx.ftz.f; convert-gpu-to-nvvm would turn llvm.intr.exp2
        into a libdevice call). Flush-to-zero: a subnormal input counts as 0 and a result below 2^-126 becomes 0.
        Without .ftz ptxas wraps each MUFU.EX2 in a range check (an FSETP and two FMULs: 264 more instructions
        per 128-key block of the attention softmax, measured); the values lost are below 2^-126, which no softmax
        sum or rescale of O can see."""
        return self.intrinsic("llvm.nvvm.ex2.approx.ftz.f", [a], self.f32)

    def rcp(self, a):
        """1/a, f32: rcp.approx.ftz.f32 (one MUFU.RCP; at most 1 ulp from 1/a; a subnormal input counts as 0)."""
        return nvvm.RcpApproxFtzF32Op(self.f32, a, loc=self.loc()).res

    def log2(self, a):
        """log2(a), f32: lg2.approx.f32 (llvm.nvvm.lg2.approx.f)."""
        return self.intrinsic("llvm.nvvm.lg2.approx.f", [a], self.f32)

    def cmpf(self, pred: str, a: ir.Value, b: ir.Value) -> ir.Value:
        """arith.cmpf with a predicate name ('oeq', 'olt', ...)."""
        return arith.CmpFOp(getattr(arith.CmpFPredicate, pred.upper()), a, b, loc=self.loc()).result

    def select(self, cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
        return arith.SelectOp(cond, a, b, loc=self.loc()).result

    def bitcast(self, a: ir.Value, ty: ir.Type) -> ir.Value:
        return llvm.BitcastOp(ty, a, loc=self.loc()).result

    # ---- special registers -------------------------------------------------------------------------
    def sreg(self, reg: str, axis: str, prefix: str = "v") -> ir.Value:
        """nvvm.read.ptx.sreg.<reg>.<axis> (reg: tid, ctaid, nctaid), an i32."""
        return getattr(nvvm, f"read_ptx_sreg_{reg}_{axis}")(self.i32, loc=self.loc(prefix))

    # ---- pointers (llvm dialect) -------------------------------------------------------------------
    def ptr(self, address_space: int = 0) -> ir.Type:
        return ptr_type(address_space)

    def gep(self, base: ir.Value, index, elem: ir.Type | None = None) -> ir.Value:
        """&base[index] in units of `elem` (i8 unless given); index an SSA value or a Python int."""
        elem = elem or self.i8
        dynamic = isinstance(index, ir.Value)
        return llvm.GEPOp(base.type, base, [index] if dynamic else [], [GEP_DYNAMIC if dynamic else index],
                          elem, llvm.GEPNoWrapFlags.none, loc=self.loc()).result

    def addressof(self, symbol: str, ty: ir.Type, prefix: str = "v") -> ir.Value:
        return llvm.AddressOfOp(ty, symbol, loc=self.loc(prefix)).result

    def ptrtoint(self, p: ir.Value, ty: ir.Type) -> ir.Value:
        return llvm.PtrToIntOp(ty, p, loc=self.loc()).result

    def addrspacecast(self, p: ir.Value, address_space: int) -> ir.Value:
        return llvm.AddrSpaceCastOp(self.ptr(address_space), p, loc=self.loc()).result

    def store(self, value: ir.Value, p: ir.Value, alignment: int) -> None:
        llvm.StoreOp(value, p, alignment=alignment)

    def load(self, ty: ir.Type, p: ir.Value, alignment: int, prefix: str = "v") -> ir.Value:
        return llvm.LoadOp(ty, p, alignment=alignment, loc=self.loc(prefix)).result

    # ---- aggregates and vectors --------------------------------------------------------------------
    def struct(self, elems: list[ir.Type]) -> ir.Type:
        return llvm.StructType.get_literal(elems)

    def zero(self, ty: ir.Type, prefix: str = "v") -> ir.Value:
        return llvm.ZeroOp(ty, loc=self.loc(prefix)).result

    def undef(self, ty: ir.Type) -> ir.Value:
        return llvm.UndefOp(ty, loc=self.loc()).result

    def extractvalue(self, agg: ir.Value, index: int, ty: ir.Type, prefix: str = "v") -> ir.Value:
        return llvm.ExtractValueOp(ty, agg, [index], loc=self.loc(prefix)).result

    def insertvalue(self, agg: ir.Value, value: ir.Value, index: int) -> ir.Value:
        return llvm.InsertValueOp(agg, value, [index], loc=self.loc()).result

    def insertelement(self, vec: ir.Value, value: ir.Value, position: ir.Value) -> ir.Value:
        return llvm.InsertElementOp(vec, value, position, loc=self.loc()).result

    def extractelement(self, vec: ir.Value, position: int, prefix: str = "v") -> ir.Value:
        return llvm.ExtractElementOp(vec, self.const(position), loc=self.loc(prefix)).result

    def fptrunc(self, value: ir.Value, ty: ir.Type) -> ir.Value:
        return llvm.FPTruncOp(ty, value, loc=self.loc()).result

    # ---- structured control flow ------------------------------------------------------------------
    @contextmanager
    def if_(self, cond: ir.Value):
        """scf.if cond { body }."""
        op = scf.IfOp(cond)
        with ir.InsertionPoint(op.then_block):
            yield op
            scf.YieldOp([])

    def if_else(self, cond: ir.Value):
        """scf.if cond { then } else { else }: two context managers, entered one after the other."""
        op = scf.IfOp(cond, has_else=True)

        @contextmanager
        def branch(block):
            with ir.InsertionPoint(block):
                yield op
                scf.YieldOp([])
        return branch(op.then_block), branch(op.else_block)

    def if_values(self, cond: ir.Value, types: list[ir.Type]):
        """scf.if cond -> (types) { then } else { else }: (then, else, results); each branch is a context manager
        giving a list, which its body fills with the values the branch yields."""
        op = scf.IfOp(cond, list(types), has_else=True)

        @contextmanager
        def branch(block):
            with ir.InsertionPoint(block):
                out: list = []
                yield out
                scf.YieldOp(out)
        return branch(op.then_block), branch(op.else_block), list(op.results)

    @contextmanager
    def for_(self, lower: ir.Value, upper: ir.Value, step: ir.Value, iter_args=(), iv: str | None = None,
             args: list[str] | None = None, results: str | None = None):
        """scf.for iv = lower to upper step step iter_args(...): yields a ForLoop; the body sets
        `loop.yield_(...)` to the values carried to the next iteration (nothing without iter_args).
        `iv`, `args` and `results` name the induction variable, the iter_args and the results
        (full names, e.g. from `fresh`; fresh ones when left out)."""
        iter_args = list(iter_args)
        iv = iv or self.fresh("i")
        loc = ir.Location.name(results or self.fresh()) if iter_args else None
        op = scf.ForOp(lower, upper, step, iter_args, loc=loc)
        block_args = list(op.body.arguments)
        block_args[0].set_location(ir.Location.name(iv))
        for arg, name in zip(block_args[1:], args or [self.fresh() for _ in iter_args]):
            arg.set_location(ir.Location.name(name))
        loop = ForLoop(op)
        with ir.InsertionPoint(op.body):
            yield loop
            scf.YieldOp(loop.yielded)


class TypedOps:
    """A Builder whose `const` makes constants of one type (the other operations take their operands' type)."""

    def __init__(self, builder: Builder, ty: ir.Type):
        self._b, self._ty = builder, ty

    def const(self, value: int) -> ir.Value:
        return self._b.const(value, self._ty)

    def __getattr__(self, name: str):
        return getattr(self._b, name)
