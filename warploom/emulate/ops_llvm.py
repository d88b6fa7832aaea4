"""The llvm dialect: pointers and address spaces, getelementptr, loads and stores (shared memory through smem.py, global
memory through gmem.py), constants, struct and vector elements, llvm.fence, atomicrmw, llvm.call_intrinsic (the NVVM
intrinsics warploom calls by name), and the float ops whose semantics they share with arith (semantics.py).
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
from mlir import ir

from . import semantics as sem
from .compiler import (FLOATS, INT_VECTOR_ELEMS, TypeInfo, handles, int_attr, lanes, operand_slots, per_lane,
                       result_slot, uniform)
from .core import WARP, Pending, PendingPart
from .errors import AccumulatorReadError, OutOfBoundsError, UnknownOpError
from .floats import float_elem
from .ops_nvvm import BAR_RED_OR, bar_red_or
from .semantics import dense_vector, element, ex2, lg2, minmax

GEP_DYNAMIC = -(1 << 31)              # llvm.getelementptr rawConstantIndices: "take the next dynamic index"
M64 = (1 << 64) - 1


# ---- llvm ---------------------------------------------------------------------------------------------

@handles("llvm.mlir.addressof")
def _addressof(c, op, info):
    r, _ = result_slot(c, op)
    sym = ir.FlatSymbolRefAttr(op.attributes["global_name"]).value
    if c.globals.get(sym) != 3:
        raise UnknownOpError(f"llvm.mlir.addressof @{sym}: only the dynamic shared-memory global (address space 3) "
                             "is modelled")

    def fn(w):
        w.env[r] = w.cta.base
    return False, fn


@handles("llvm.ptrtoint")
def _ptrtoint(c, op, info):
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    m = t.mask

    def fn(w):
        e = w.env
        e[r] = e[a] & m
    return False, fn


@handles("llvm.inttoptr")
def _inttoptr(c, op, info):
    # an address computed as an integer (a TMEM address read from smem, !llvm.ptr<6>): pointers are integers here
    (a,) = operand_slots(c, op)
    r, _ = result_slot(c, op)

    def fn(w):
        e = w.env
        e[r] = e[a] & M64
    return False, fn


_BITS = {"i16": np.uint16, "i32": np.uint32, "f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


@handles("llvm.addrspacecast")
def _addrspacecast(c, op, info):
    # shared::cta (3) -> shared::cluster (7): a CTA's own shared::cta address is valid in the shared::cluster window.
    # shared::cluster -> shared::cta (7 -> 3): only for an address of the executing CTA (PTX ISA "cvta": the
    # shared::cta window holds no other CTA's memory)
    (a,) = operand_slots(c, op)
    r, t = result_slot(c, op)
    src = TypeInfo(op.operands[0].type).space
    if (src, t.space) == (7, 3):
        def to_cta(w):
            e = w.env
            cta = w.cta
            out = np.zeros(WARP, np.uint64)
            for lane, addr in per_lane(e[a], w.mask):
                target, local = cta.cluster.resolve(cta, addr, 1, "llvm.addrspacecast to shared::cta")
                if target is not cta:
                    raise OutOfBoundsError(f"llvm.addrspacecast of shared::cluster 0x{addr:x} (CTA {target.id}, rank "
                                           f"{target.rank}) to shared::cta (lane {lane}): only the executing CTA's "
                                           "own shared memory has a shared::cta address")
                out[lane] = local
            e[r] = out
        return False, to_cta
    if (src, t.space) != (3, 7):
        raise UnknownOpError(f"llvm.addrspacecast from {src} to {t.space}: only shared::cta <-> shared::cluster "
                             "(3 <-> 7) is modelled")

    def fn(w):
        e = w.env
        e[r] = e[a]
    return False, fn


ELEM_BYTES = {"i8": 1, "i16": 2, "i32": 4, "i64": 8, "bf16": 2, "f16": 2, "f32": 4}


@handles("llvm.getelementptr")
def _gep(c, op, info):
    # one index: base + index * sizeof(elem_type), the index sign-extended (LLVM GEP indices are signed)
    elem = str(ir.TypeAttr(op.attributes["elem_type"]).value)
    if elem not in ELEM_BYTES:
        raise UnknownOpError(f"llvm.getelementptr over {elem}: only scalar element types are modelled")
    size = ELEM_BYTES[elem]
    raw = list(ir.DenseI32ArrayAttr(op.attributes["rawConstantIndices"]))
    ops = list(op.operands)
    base = c.slot(ops[0])
    if len(raw) != 1:
        raise UnknownOpError(f"llvm.getelementptr with {len(raw)} indices: only one index is modelled")
    r, _ = result_slot(c, op)
    if raw[0] != GEP_DYNAMIC:
        delta = (raw[0] * size) & M64

        def fn(w):
            e = w.env
            e[r] = (e[base] + delta) & M64
        return False, fn
    idx = c.slot(ops[1])
    width = TypeInfo(ops[1].type).width
    s = 1 << (width - 1)

    def fn_dyn(w):
        e = w.env
        i = e[idx]
        e[r] = (e[base] + (((i ^ s) - s) & M64) * size) & M64
    return False, fn_dyn


@handles("llvm.mlir.zero", "llvm.mlir.undef")
def _zero(c, op, info):
    # undef is modelled as zero: a kernel that depends on undef bits is wrong anyway
    r, t = result_slot(c, op)
    if t.kind in ("struct", "vector"):
        if t.elem not in FLOATS and t.elem not in INT_VECTOR_ELEMS:
            raise UnknownOpError(f"{op.name} of a vector of {t.elem}: only float and i8..i64 vectors are modelled")
        shape, dt = (WARP, t.count), FLOATS.get(t.elem) or INT_VECTOR_ELEMS[t.elem]

        def fn(w):
            w.env[r] = np.zeros(shape, dt)
    elif t.kind in ("int", "ptr"):
        def fn(w):
            w.env[r] = 0
    else:
        raise UnknownOpError(f"{op.name} of type {t.kind}")
    return False, fn


@handles("llvm.insertelement")
def _insertelement(c, op, info):
    vec, val, pos = operand_slots(c, op)
    r, t = result_slot(c, op)

    def fn(w):
        e = w.env
        out = np.array(lanes(e[vec]))
        p = uniform(e[pos], w.mask, "llvm.insertelement position")
        if not 0 <= p < t.count:
            raise OutOfBoundsError(f"llvm.insertelement at position {p} of a vector of {t.count}")
        out[:, p] = e[val]
        e[r] = out
    return False, fn


@handles("llvm.extractvalue")
def _extractvalue(c, op, info):
    (a,) = operand_slots(c, op)
    r, _ = result_slot(c, op)
    pos = list(ir.DenseI64ArrayAttr(op.attributes["position"]))
    if len(pos) != 1:
        raise UnknownOpError("llvm.extractvalue with a nested position: only flat structs are modelled")
    p = pos[0]
    # an in-flight accumulator passed on unread to register-A wgmmas only (their tied inputs) is not a read
    plumbing = any(True for _ in op.results[0].uses) and all(
        u.owner.name == "llvm.inline_asm" for u in op.results[0].uses)

    def fn(w):
        e = w.env
        v = e[a]
        if isinstance(v, tuple):                 # a mixed struct, e.g. shfl.sync's (value, valid)
            e[r] = v[p]
            return
        if isinstance(v, Pending):
            if plumbing and not v.retired:
                e[r] = PendingPart(v, p)
                return
            if not v.retired:
                raise AccumulatorReadError(f"accumulator register {p} read before the wgmma.wait_group that retires "
                                           "the wgmma writing it: wait (wgmma.wait_group) for its group first")
            v = v.value
        e[r] = v[:, p]
    return False, fn


def _plain_access(op) -> None:
    if "ordering" in op.attributes and int_attr(op, "ordering") != 0:
        raise UnknownOpError(f"{op.name} with atomic ordering {op.attributes['ordering']}: only non-atomic accesses "
                             "are modelled")


def _value_bytes(vt: TypeInfo):
    """(bytes per lane, value -> (32, bytes) uint8, (32, bytes) uint8 -> value) for a loaded/stored type."""
    if vt.kind == "int" and vt.width in (8, 16, 32, 64):
        nb = vt.width // 8
        dt = np.dtype(f"u{nb}")
        return (nb, lambda v: np.ascontiguousarray(lanes(v, np.uint64).astype(dt)).view(np.uint8).reshape(WARP, nb),
                lambda b: b.view(dt).reshape(WARP).astype(np.uint64))
    if vt.kind == "float" or (vt.kind == "vector" and (vt.elem in FLOATS or vt.elem in INT_VECTOR_ELEMS)):
        dt = np.dtype(FLOATS.get(vt.elem) or INT_VECTOR_ELEMS[vt.elem])
        n = vt.count if vt.kind == "vector" else 1
        nb = n * dt.itemsize
        shape = (WARP, n) if vt.kind == "vector" else (WARP,)
        return (nb, lambda v: np.ascontiguousarray(lanes(v, dt)).view(np.uint8).reshape(WARP, nb),
                lambda b: b.view(dt).reshape(shape))
    raise UnknownOpError(f"memory access of {vt.kind}: only i8/i16/i32/i64, float scalars and float or i8..i64 "
                         "vectors are modelled")


@handles("llvm.load")
def _load(c, op, info):
    # PTX ISA "Data movement and conversion instructions: ld" (.shared::cta, .shared::cluster, .global): a
    # generic-proxy load
    (addr,) = operand_slots(c, op)
    space = TypeInfo(op.operands[0].type).space
    if space not in (1, 3, 7):
        raise UnknownOpError(f"llvm.load from address space {space}: only global (1) and shared memory loads "
                             "(shared::cta 3, shared::cluster 7) are modelled")
    _plain_access(op)
    r, t = result_slot(c, op)
    nbytes, _, unpack = _value_bytes(t)
    align = int_attr(op, "alignment") if "alignment" in op.attributes else nbytes
    if space == 1:
        def fn_global(w):
            e = w.env
            e[r] = unpack(w.cta.launch.memory.load(lanes(e[addr], np.uint64), w.mask, nbytes, align))
        return False, fn_global
    what = f"ld.shared::{'cluster' if space == 7 else 'cta'} of {nbytes} B"

    def fn(w):
        e = w.env
        raw = w.cta.shared.load(lanes(e[addr], np.uint64), w.mask, nbytes, align, space == 7, what)
        e[r] = unpack(raw)
    return False, fn


def _smem_store(c, op, info, val: int, addr: int, space: int):
    # PTX ISA "Data movement and conversion instructions: st" (.shared::cta, .shared::cluster)
    _plain_access(op)
    nbytes, pack, _ = _value_bytes(TypeInfo(op.operands[0].type))
    align = int_attr(op, "alignment") if "alignment" in op.attributes else nbytes
    what = f"st.shared::{'cluster' if space == 7 else 'cta'} of {nbytes} B"

    def fn(w):
        e = w.env
        w.cta.shared.store(lanes(e[addr], np.uint64), pack(e[val]), w.mask, align, space == 7, what, w.index)
    return False, fn


@handles("llvm.store")
def _store(c, op, info):
    val, addr = operand_slots(c, op)
    space = TypeInfo(op.operands[1].type).space
    if space in (3, 7):
        return _smem_store(c, op, info, val, addr, space)
    if space != 1:
        raise UnknownOpError(f"llvm.store to address space {space}: only global (1) and shared (3, 7) stores are "
                             "modelled")
    align = int_attr(op, "alignment") if "alignment" in op.attributes else 1
    vt = TypeInfo(op.operands[0].type)
    if vt.kind == "int":
        _plain_access(op)
        _, pack, _ = _value_bytes(vt)

        def fn_int(w):
            e = w.env
            w.cta.launch.memory.store(lanes(e[addr], np.uint64), pack(e[val]), w.mask, align)
        return False, fn_int
    if vt.kind not in ("float", "vector"):
        raise UnknownOpError(f"llvm.store of {vt.kind}: only integer and float scalars and vectors are modelled")

    def fn(w):
        e = w.env
        v = np.ascontiguousarray(lanes(e[val]))
        data = v.view(np.uint8).reshape(WARP, -1)
        w.cta.launch.memory.store(lanes(e[addr], np.uint64), data, w.mask, align)
    return False, fn


@handles("llvm.fence")
def _fence(c, op, info):
    # PTX ISA "membar / fence" (fence.acq_rel.gpu, from llvm.fence acq_rel syncscope("device")): an ordering point
    # only. Global memory here is one array every CTA sees at once (CTAs run one after another), so a missing fence
    # is NOT detected by the emulator; the lowering's lit tests check that the fences are there.
    return False, lambda w: None


ATOMIC_ADD = 1          # llvm::AtomicRMWInst::Add, the `bin_op` attribute of llvm.atomicrmw add


@handles("llvm.atomicrmw")
def _atomicrmw(c, op, info):
    # PTX ISA "atom" (atom.global.add.u32, from llvm.atomicrmw add on an i32 in address space 1): the old value; the
    # active lanes add one after another, in lane order
    kind = int_attr(op, "bin_op")
    ptr_t, val_t = TypeInfo(op.operands[0].type), TypeInfo(op.operands[1].type)
    if kind != ATOMIC_ADD or ptr_t.space != 1 or val_t.kind != "int" or val_t.width not in (32, 64):
        raise UnknownOpError(f"llvm.atomicrmw (bin_op {kind}) of {val_t.kind}{val_t.width or ''} in address space "
                             f"{ptr_t.space}: only an integer add (bin_op {ATOMIC_ADD}) in global memory is modelled")
    addr, val = operand_slots(c, op)
    r, _ = result_slot(c, op)
    nbytes = val_t.width // 8

    def fn(w):
        e = w.env
        e[r] = w.cta.launch.memory.atomic_add(lanes(e[addr], np.uint64), lanes(e[val], np.uint64), w.mask, nbytes)
    return False, fn


_LG2_INTRINSIC = re.compile(r"llvm\.nvvm\.lg2\.approx(?P<ftz>\.ftz)?\.(?P<t>f|f32)")
_EX2_INTRINSIC = re.compile(r"llvm\.nvvm\.ex2\.approx(?P<ftz>\.ftz)?\.(?P<t>f|f32|bf16|f16)")
_MINMAX_INTRINSIC = re.compile(r"llvm\.nvvm\.f(?P<op>max|min)(?P<ftz>\.ftz)?(?P<nan>\.nan)?\.(?P<t>f|bf16|f16)")


@handles("llvm.call_intrinsic")
def _call_intrinsic(c, op, info):
    # the NVVM intrinsics MLIR 22 has no op for: llvm.nvvm.ex2.approx[.ftz].{f,f32,bf16,f16} (PTX "ex2") and
    # llvm.nvvm.f{max,min}[.ftz][.nan].{f,bf16,f16} (PTX "max", "min")
    name = ir.StringAttr(op.attributes["intrin"]).value
    if name == BAR_RED_OR:         # a barrier (it blocks): ops_nvvm.py has the barriers
        return bar_red_or(c, op, info, name)
    args = operand_slots(c, op)
    if len(op.results) != 1:
        raise UnknownOpError(f"llvm.call_intrinsic {name!r} without one result is not modelled")
    r, t = result_slot(c, op)
    if m := _EX2_INTRINSIC.fullmatch(name):
        elem = float_elem(t, name)
        ftz = bool(m["ftz"])

        def fn(w):
            e = w.env
            e[r] = ex2(e[args[0]], elem, ftz)
        return False, fn
    if m := _LG2_INTRINSIC.fullmatch(name):
        elem = float_elem(t, name)
        ftz = bool(m["ftz"])

        def fn3(w):
            e = w.env
            e[r] = lg2(e[args[0]], elem, ftz)
        return False, fn3
    if m := _MINMAX_INTRINSIC.fullmatch(name):
        elem = float_elem(t, name)
        f = minmax(m["op"] == "max", bool(m["nan"]), ftz=bool(m["ftz"]))

        def fn2(w):
            e = w.env
            e[r] = f(e[args[0]], e[args[1]], elem)
        return False, fn2
    raise UnknownOpError(f"llvm.call_intrinsic {name!r}: the emulator models llvm.nvvm.ex2.approx.*, "
                         f"llvm.nvvm.lg2.approx.*, llvm.nvvm.f{{max,min}}.* and {BAR_RED_OR} only")


@handles("llvm.extractelement")
def _extractelement(c, op, info):
    vec, pos = operand_slots(c, op)
    r, _ = result_slot(c, op)
    count = TypeInfo(op.operands[0].type).count

    def fn(w):
        e = w.env
        q = element(e[vec], e[pos], count, w, op.name)
        e[r] = lanes(e[vec])[:, q]
    return False, fn


@handles("llvm.insertvalue")
def _insertvalue(c, op, info):
    # llvm.insertvalue %x, %struct[p]: a struct of f32 (accumulator registers) with register p replaced
    container, val = c.slot(op.opview.container), c.slot(op.opview.value)
    r, t = result_slot(c, op)
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


@handles("llvm.mlir.constant")
def _llvm_constant(c, op, info):
    r, t = result_slot(c, op)
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


# ---- float ops (semantics.py) -------------------------------------------------------------------------------
for _name, _ufunc in (("fadd", np.add), ("fsub", np.subtract), ("fmul", np.multiply), ("fdiv", np.divide)):
    handles(f"llvm.{_name}")(sem.float_binary(_ufunc))
handles("llvm.fneg", "llvm.intr.fabs")(sem.sign_op)
# llvm.intr.maximum/minimum (IEEE-754-2019) -> PTX max/min.NaN; llvm.intr.maxnum/minnum -> PTX max/min
handles("llvm.intr.maximum")(sem.minmax_op(True, True))
handles("llvm.intr.minimum")(sem.minmax_op(False, True))
handles("llvm.intr.maxnum")(sem.minmax_op(True, False))
handles("llvm.intr.minnum")(sem.minmax_op(False, False))
handles("llvm.intr.fma", "llvm.intr.fmuladd")(sem.fma_op)
handles("llvm.fcmp")(sem.cmpf_op)
handles("llvm.select")(sem.select_op)
# llvm.exp2 -> ex2.approx.f32 (no .ftz unless the kernel flushes f32 subnormals), ex2.approx.ftz.bf16,
# ex2.approx.f16 (LLVM NVPTX); PTX ISA 9.7.3 "ex2", 9.7.4 "ex2"
handles("llvm.intr.exp2")(sem.unary_approx(sem.ex2, lambda op, elem: elem == "bf16"))
handles("llvm.fpext")(sem.extf_op)
handles("llvm.fptrunc")(sem.truncf_op)
handles("llvm.sitofp", "llvm.uitofp")(sem.itofp_op)
handles("llvm.fptosi", "llvm.fptoui")(sem.fptoi_op)
handles("llvm.bitcast")(sem.bitcast_op)
