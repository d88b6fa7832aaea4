"""Compile a lowered kernel (the `llvm.func` of a `gpu.module`) once into Python closures over a warp's state.

The MLIR objects are walked once, here; running a kernel never touches them again (except to print
an op in an error message). Every SSA value gets a slot in the warp's `env`; every op becomes a
function of the warp (`fn(warp)`), or a generator function where the op blocks or holds a region
(`scf.for`, `scf.if`, waits, barriers). Values are lane vectors of one warp:

  iN (N > 1)        a Python int when uniform, else a uint64 array of 32 lanes, always in 0..2^N-1
  i1                a bool, or a bool array of 32 lanes
  f32 / bf16 / f16  numpy scalars or (32,) arrays of float32 / ml_dtypes.bfloat16 / float16
  vector<n x T>     (32, n) arrays
  struct of n f32   (32, n) float32 arrays, or a `Pending` wgmma result (machine.py); a `PendingPart` is one
                    register of an in-flight one passed on unread to a register-A wgmma (regwgmma.py)
  other structs     a tuple of their members (shfl.sync's (value, valid))
  !llvm.ptr<as>     the integer address, like i64 (the address space is static, from the type); shared::cta (3)
                    and shared::cluster (7) addresses follow machine.py's windows (DSMEM_BASE for other CTAs)

Divergent `scf.if` runs each side under an active-lane mask; `scf.for` needs bounds uniform across
the active lanes. An op without semantics here raises UnknownOpError when the kernel is compiled:
nothing is ever skipped. Float arithmetic, conversions and warp shuffles are in arith.py, the
register-A wgmma (inline asm) and the wgmma.fence analysis in regwgmma.py; they register into HANDLERS.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
from mlir import ir

from .errors import (AccumulatorReadError, DivergenceError, EmulationError, MbarrierError, OutOfBoundsError,
                     SmemRaceError, UnknownOpError)
from .machine import LazyText, OpInfo, Pending, PendingPart, Wait, WARP, describe_lanes, lane_list

FLOATS = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
INT_VECTOR_ELEMS = {"i8": np.uint8, "i16": np.uint16, "i32": np.uint32, "i64": np.uint64}   # vector<n x iN> lanes
GEP_DYNAMIC = -(1 << 31)              # llvm.getelementptr rawConstantIndices: "take the next dynamic index"
M64 = (1 << 64) - 1
# arith.cmpi predicate codes (arith::CmpIPredicate)
CMPI = {0: "eq", 1: "ne", 2: "slt", 3: "sle", 4: "sgt", 5: "sge", 6: "ult", 7: "ule", 8: "ugt", 9: "uge"}
SREGS = {"tid", "ntid", "ctaid", "nctaid", "laneid", "warpid"}
# PTX ISA "Special Registers" of a cluster: op suffix -> (Launch.sreg name, axis)
CLUSTER_SREGS = {"cluster.ctarank": ("cluster_ctarank", 0), "cluster.nctarank": ("cluster_nctarank", 0)}
for _a, _k in (("x", 0), ("y", 1), ("z", 2)):
    CLUSTER_SREGS.update({f"clusterid.{_a}": ("clusterid", _k), f"nclusterid.{_a}": ("nclusterid", _k),
                          f"cluster.ctaid.{_a}": ("cluster_ctaid", _k), f"cluster.nctaid.{_a}": ("cluster_nctaid", _k)})


class TypeInfo:
    """What the interpreter needs of an MLIR type, parsed once from its printed form."""
    __slots__ = ("kind", "width", "space", "count", "elem")

    def __init__(self, t: ir.Type):
        s = str(t)
        self.kind, self.width, self.space, self.count, self.elem = s, 0, 0, 0, None
        if m := re.fullmatch(r"i(\d+)", s):
            self.kind, self.width = "int", int(m.group(1))
        elif s in FLOATS:
            self.kind, self.elem = "float", s
        elif m := re.fullmatch(r"!llvm\.ptr(?:<(\d+)>)?", s):
            self.kind, self.width, self.space = "ptr", 64, int(m.group(1) or 0)
        elif m := re.fullmatch(r"!llvm\.struct<\(((?:f32(?:, )?)+)\)>", s):
            self.kind, self.count, self.elem = "struct", m.group(1).count("f32"), "f32"
        elif m := re.fullmatch(r"vector<(\d+)x(\w+)>", s):
            self.kind, self.count, self.elem = "vector", int(m.group(1)), m.group(2)
            if ints := re.fullmatch(r"i(\d+)", self.elem):      # integer elements: their width (and mask)
                self.width = int(ints.group(1))

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


def signed(v, bits: int):
    """The two's-complement value of an N-bit canonical integer (int, or uint64 array -> int64 array)."""
    s = 1 << (bits - 1)
    if isinstance(v, np.ndarray):
        return v.astype(np.int64) if bits == 64 else (v.astype(np.int64) ^ s) - s
    return (v ^ s) - s


def uniform(v, mask: np.ndarray, what: str):
    """v as one Python value, or DivergenceError when the active lanes disagree."""
    if not isinstance(v, np.ndarray):
        return v
    act = v[mask]
    if act.size and (act != act[0]).any():
        raise DivergenceError(f"{what} differs across the active lanes ({describe_lanes(v, mask)}); it must be "
                              "warp-uniform here")
    first = act[0] if act.size else v[0]
    return bool(first) if v.dtype == np.bool_ else int(first)


def lanes(v, dtype=None) -> np.ndarray:
    """v as a (32, ...) array (a uniform value broadcast to every lane)."""
    a = np.asarray(v, dtype=dtype)
    return a if a.ndim and a.shape[0] == WARP else np.broadcast_to(a, (WARP,) + a.shape)


def active_ints(v, mask: np.ndarray) -> list[int]:
    """The distinct values of the active lanes, as ints (for per-lane side effects)."""
    if not isinstance(v, np.ndarray):
        return [int(v)]
    return [int(x) for x in np.unique(v[mask])]


def per_lane(v, mask: np.ndarray) -> list[tuple[int, int]]:
    """(lane, value) for each active lane."""
    a = lanes(v)
    return [(int(i), int(a[i])) for i in np.flatnonzero(mask)]


class Compiled:
    """A kernel function compiled to closures: call `start(warp, args)` to get the warp's generator."""

    def __init__(self, name: str, nslots: int, arg_slots: list[int], arg_types: list[TypeInfo], entry, globals_: dict,
                 keep):
        self.name, self.nslots, self.arg_slots, self.arg_types = name, nslots, arg_slots, arg_types
        self.entry, self.globals, self._keep = entry, globals_, keep

    def start(self, warp, args: list) -> None:
        for slot, value in zip(self.arg_slots, args):
            warp.env[slot] = value
        warp.gen = self.entry(warp)


def compile_kernel(gpu_module, name: str | None = None) -> Compiled:
    """Compile the kernel `name` (the only nvvm.kernel function when None) of a gpu.module op."""
    op = gpu_module.operation if hasattr(gpu_module, "operation") else gpu_module
    if op.name != "gpu.module":
        raise ValueError(f"expected a gpu.module op, got {op.name}")
    body = op.regions[0].blocks[0]
    globals_, funcs = {}, []
    for child in body.operations:
        child = child.operation
        if child.name == "llvm.mlir.global":
            sym = ir.StringAttr(child.attributes["sym_name"]).value
            space = ir.IntegerAttr(child.attributes["addr_space"]).value if "addr_space" in child.attributes else 0
            globals_[sym] = space
        elif child.name == "llvm.func" and "nvvm.kernel" in child.attributes:
            funcs.append(child)
    names = [ir.StringAttr(f.attributes["sym_name"]).value for f in funcs]
    if name is None and len(funcs) == 1:
        func = funcs[0]
    elif name in names:
        func = funcs[names.index(name)]
    else:
        raise ValueError(f"kernel {name!r} not in the gpu.module; its kernels are {names}")
    if len(func.regions[0].blocks) != 1:
        raise UnknownOpError(f"kernel {names[funcs.index(func)]!r} has {len(func.regions[0].blocks)} blocks; the "
                             "emulator runs structured control flow (scf) only, not cf branches")
    c = _Compiler(globals_)
    from .regwgmma import register_accesses          # registers handlers too; imported here to avoid a cycle
    c.touches = register_accesses(func)
    entry_block = func.regions[0].blocks[0]
    args = list(entry_block.arguments)
    arg_slots = [c.slot(a) for a in args]
    entry = c.block(entry_block)

    def run(warp):
        yield from entry(warp)

    return Compiled(names[funcs.index(func)], len(c.slots), arg_slots, [TypeInfo(a.type) for a in args], run,
                    globals_, keep=op)


class _Compiler:
    def __init__(self, globals_: dict):
        self.slots: dict = {}
        self.globals = globals_
        self.touches: dict = {}     # op -> what accumulator / A-fragment registers it accesses (wgmma.fence rule)

    def slot(self, value) -> int:
        return self.slots.setdefault(value, len(self.slots))

    # ---- blocks --------------------------------------------------------------------------------
    def block(self, block):
        """A generator function running the block's ops; it returns the values its scf.yield yields."""
        ops = [o.operation for o in block.operations]
        yields: list[int] = []
        if ops and ops[-1].name in ("scf.yield", "llvm.return"):
            yields = [self.slot(v) for v in ops[-1].operands]
            if ops[-1].name == "llvm.return" and yields:
                raise UnknownOpError("llvm.return with a value: a kernel returns nothing")
            ops = ops[:-1]
        steps = [self.op(o) for o in ops]
        fns = [s[1] for s in steps]
        gens = [s[0] for s in steps]
        infos = [s[2] for s in steps]
        n = len(steps)

        def run(warp):
            i = 0
            try:
                for i in range(n):
                    if gens[i]:
                        yield from fns[i](warp)
                    else:
                        fns[i](warp)
            except EmulationError as e:
                raise e.locate(warp.cta.id, warp.index, infos[i].text)
            env = warp.env
            return [env[s] for s in yields]

        return run

    def op(self, op):
        """(is_generator, fn, OpInfo) for one op."""
        name = op.name
        info = OpInfo(name, op)
        handler = HANDLERS.get(name)
        if handler is None and name.startswith("nvvm.read.ptx.sreg."):
            handler = _sreg
        if handler is None:
            raise UnknownOpError(f"the emulator has no semantics for {info.text}: add them to "
                                 "warploom/emulate/compiler.py (ops are never skipped)").locate(op=info.text)
        try:
            is_gen, fn = handler(self, op, info)
        except EmulationError as e:
            raise e.locate(op=info.text)
        touch = self.touches.get(op)
        if touch is not None:
            fn = _touching(fn, is_gen, (info, touch))
        return is_gen, fn, info


def _touching(fn, is_gen: bool, access: tuple):
    """fn, then the warp's next wgmma needs a wgmma.fence (the op accessed accumulator / A-fragment registers)."""
    if is_gen:
        def gen(w):
            w.unfenced = access
            yield from fn(w)
        return gen

    def run(w):
        fn(w)
        w.unfenced = access
    return run


HANDLERS = {}


def handles(*names):
    def register(fn):
        for n in names:
            HANDLERS[n] = fn
        return fn
    return register


def _operands(c: _Compiler, op) -> list[int]:
    return [c.slot(v) for v in op.operands]


def _int_attr(op, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _result(c: _Compiler, op) -> tuple[int, TypeInfo]:
    r = op.results[0]
    return c.slot(r), TypeInfo(r.type)


# ---- arith (MLIR arith dialect semantics on canonical unsigned integers) ------------------------------

@handles("arith.constant")
def _constant(c, op, info):
    r, t = _result(c, op)
    attr = op.attributes["value"]
    if t.kind == "int":
        v = ir.IntegerAttr(attr).value
        value = bool(v & 1) if t.width == 1 else v & t.mask
    elif t.kind == "float":
        value = FLOATS[t.elem](ir.FloatAttr(attr).value)
    elif t.kind == "vector":
        from .arith import dense_vector
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
        a, b = _operands(c, op)
        r, t = _result(c, op)
        m = t.mask if t.width > 1 else None
        f = compute(t, m)

        def fn(w):
            e = w.env
            e[r] = f(e[a], e[b], w)
        return False, fn
    return handler


HANDLERS["arith.addi"] = _binary(lambda t, m: (lambda x, y, w: (x + y) & m) if m else (lambda x, y, w: x ^ y))
HANDLERS["arith.subi"] = _binary(lambda t, m: (lambda x, y, w: (x - y) & m) if m else (lambda x, y, w: x ^ y))
HANDLERS["arith.muli"] = _binary(lambda t, m: (lambda x, y, w: (x * y) & m) if m else (lambda x, y, w: x & y))
HANDLERS["arith.andi"] = _binary(lambda t, m: lambda x, y, w: x & y)
HANDLERS["arith.ori"] = _binary(lambda t, m: lambda x, y, w: x | y)
HANDLERS["arith.xori"] = _binary(lambda t, m: lambda x, y, w: x ^ y)


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


HANDLERS["arith.divui"] = _binary(lambda t, m: lambda x, y, w: x // _nonzero_divisor(y, w, "arith.divui"))
HANDLERS["arith.remui"] = _binary(lambda t, m: lambda x, y, w: x % _nonzero_divisor(y, w, "arith.remui"))


def _shrui(t, m):
    def f(x, y, w):
        if np.any(lanes(y)[w.mask] >= t.width):
            raise EmulationError(f"arith.shrui by {y} >= the bit width {t.width}: the result is poison")
        return x >> y
    return f


HANDLERS["arith.shrui"] = _binary(_shrui)


@handles("arith.cmpi")
def _cmpi(c, op, info):
    a, b = _operands(c, op)
    r, _ = _result(c, op)
    width = TypeInfo(op.operands[0].type).width
    pred = CMPI[_int_attr(op, "predicate")]
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
    (a,) = _operands(c, op)
    r, t = _result(c, op)
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


# ---- llvm ---------------------------------------------------------------------------------------------

@handles("llvm.mlir.addressof")
def _addressof(c, op, info):
    r, _ = _result(c, op)
    sym = ir.FlatSymbolRefAttr(op.attributes["global_name"]).value
    if c.globals.get(sym) != 3:
        raise UnknownOpError(f"llvm.mlir.addressof @{sym}: only the dynamic shared-memory global (address space 3) "
                             "is modelled")

    def fn(w):
        w.env[r] = w.cta.base
    return False, fn


@handles("llvm.ptrtoint")
def _ptrtoint(c, op, info):
    (a,) = _operands(c, op)
    r, t = _result(c, op)
    m = t.mask

    def fn(w):
        e = w.env
        e[r] = e[a] & m
    return False, fn


@handles("llvm.inttoptr")
def _inttoptr(c, op, info):
    # an address computed as an integer (a TMEM address read from smem, !llvm.ptr<6>): pointers are integers here
    (a,) = _operands(c, op)
    r, _ = _result(c, op)

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
    (a,) = _operands(c, op)
    r, t = _result(c, op)
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
    r, _ = _result(c, op)
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
    r, t = _result(c, op)
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
    vec, val, pos = _operands(c, op)
    r, t = _result(c, op)

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
    (a,) = _operands(c, op)
    r, _ = _result(c, op)
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
    if "ordering" in op.attributes and _int_attr(op, "ordering") != 0:
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
    (addr,) = _operands(c, op)
    space = TypeInfo(op.operands[0].type).space
    if space not in (1, 3, 7):
        raise UnknownOpError(f"llvm.load from address space {space}: only global (1) and shared memory loads "
                             "(shared::cta 3, shared::cluster 7) are modelled")
    _plain_access(op)
    r, t = _result(c, op)
    nbytes, _, unpack = _value_bytes(t)
    align = _int_attr(op, "alignment") if "alignment" in op.attributes else nbytes
    if space == 1:
        def fn_global(w):
            e = w.env
            e[r] = unpack(w.cta.launch.memory.load(lanes(e[addr], np.uint64), w.mask, nbytes, align))
        return False, fn_global
    what = f"ld.shared::{'cluster' if space == 7 else 'cta'} of {nbytes} B"

    def fn(w):
        e = w.env
        raw = w.cta.smem_load(lanes(e[addr], np.uint64), w.mask, nbytes, align, space == 7, what)
        e[r] = unpack(raw)
    return False, fn


def _smem_store(c, op, info, val: int, addr: int, space: int):
    # PTX ISA "Data movement and conversion instructions: st" (.shared::cta, .shared::cluster)
    _plain_access(op)
    nbytes, pack, _ = _value_bytes(TypeInfo(op.operands[0].type))
    align = _int_attr(op, "alignment") if "alignment" in op.attributes else nbytes
    what = f"st.shared::{'cluster' if space == 7 else 'cta'} of {nbytes} B"

    def fn(w):
        e = w.env
        w.cta.smem_store(lanes(e[addr], np.uint64), pack(e[val]), w.mask, align, space == 7, what, w.index)
    return False, fn


@handles("llvm.store")
def _store(c, op, info):
    val, addr = _operands(c, op)
    space = TypeInfo(op.operands[1].type).space
    if space in (3, 7):
        return _smem_store(c, op, info, val, addr, space)
    if space != 1:
        raise UnknownOpError(f"llvm.store to address space {space}: only global (1) and shared (3, 7) stores are "
                             "modelled")
    align = _int_attr(op, "alignment") if "alignment" in op.attributes else 1
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


# ---- scf ----------------------------------------------------------------------------------------------

@handles("scf.if")
def _if(c, op, info):
    (cond,) = _operands(c, op)
    then = c.block(op.regions[0].blocks[0])
    orelse = c.block(op.regions[1].blocks[0]) if len(op.regions[1].blocks) else None
    results = [c.slot(v) for v in op.results]

    def gen(w):
        e = w.env
        cv = e[cond]
        saved = w.mask
        if not isinstance(cv, np.ndarray):        # uniform condition: one side, all active lanes
            if cv:
                vals = yield from then(w)
            elif orelse is not None:
                vals = yield from orelse(w)
            else:
                vals = []
        else:
            tmask, emask = saved & cv, saved & ~cv
            vals = tvals = evals = None
            if tmask.any():
                w.mask = tmask
                vals = tvals = yield from then(w)
            if orelse is not None and emask.any():
                w.mask = emask
                vals = evals = yield from orelse(w)
            w.mask = saved
            if results and tvals is not None and evals is not None:
                vals = [_merge(cv, x, y) for x, y in zip(tvals, evals)]
        for s, v in zip(results, vals or []):
            e[s] = v
    return True, gen


def _merge(cond: np.ndarray, x, y):
    if isinstance(x, Pending) or isinstance(y, Pending):
        raise DivergenceError("scf.if yields a wgmma accumulator from divergent lanes")
    xa, ya = lanes(x), lanes(y)
    return np.where(cond.reshape((WARP,) + (1,) * (xa.ndim - 1)), xa, ya)


@handles("scf.for")
def _for(c, op, info):
    ops = list(op.operands)
    lb, ub, step = (c.slot(v) for v in ops[:3])
    inits = [c.slot(v) for v in ops[3:]]
    width = TypeInfo(ops[0].type).width
    unsigned_cmp = "unsignedCmp" in op.attributes
    block = op.regions[0].blocks[0]
    args = [c.slot(a) for a in block.arguments]
    body = c.block(block)
    results = [c.slot(v) for v in op.results]

    def gen(w):
        e = w.env
        lo = uniform(e[lb], w.mask, "scf.for lower bound")
        hi = uniform(e[ub], w.mask, "scf.for upper bound")
        st = uniform(e[step], w.mask, "scf.for step")
        if not unsigned_cmp:
            lo, hi, st = signed(lo, width), signed(hi, width), signed(st, width)
        if st <= 0:
            raise EmulationError(f"scf.for step {st}: must be positive")
        carried = [e[s] for s in inits]
        m = (1 << width) - 1
        iv = lo
        while iv < hi:
            e[args[0]] = iv & m
            for s, v in zip(args[1:], carried):
                e[s] = v
            carried = yield from body(w)
            iv += st
        for s, v in zip(results, carried):
            e[s] = v
    return True, gen


# ---- nvvm: special registers, warp and CTA synchronisation ------------------------------------------

def _sreg(c, op, info):
    # PTX ISA 10 "Special Registers": %tid, %ntid, %ctaid, %nctaid (x, y, z), %laneid, %warpid
    reg = op.name[len("nvvm.read.ptx.sreg."):]
    r, _ = _result(c, op)
    if reg in CLUSTER_SREGS:
        # %cluster_ctarank, %cluster_nctarank, %clusterid, %nclusterid, %cluster_ctaid, %cluster_nctaid
        name, k = CLUSTER_SREGS[reg]

        def fn_cluster(w):
            w.env[r] = w.cta.launch.sreg(name, k, w.cta)
        return False, fn_cluster
    base, _, axis = reg.partition(".")
    if base not in SREGS or (axis and axis not in "xyz"):
        raise UnknownOpError(f"special register %{reg} is not modelled")
    k = "xyz".index(axis) if axis else 0
    if base == "tid":
        if k:
            def fn(w):
                w.env[r] = 0          # blocks are 1-D (block = (threads, 1, 1))
        else:
            def fn(w):
                w.env[r] = w.tid
    elif base == "laneid":
        def fn(w):
            w.env[r] = w.tid % WARP
    elif base == "warpid":
        def fn(w):
            w.env[r] = w.index
    else:
        def fn(w):
            w.env[r] = w.cta.launch.sreg(base, k, w.cta)
    return False, fn


@handles("nvvm.elect.sync")
def _elect(c, op, info):
    # PTX ISA 9.7.13 "elect.sync": one active leader lane of the membermask (the lowest), all of whose lanes
    # must execute it
    if op.operands:
        raise UnknownOpError("nvvm.elect.sync with a membermask operand: only the full warp is modelled")
    r, _ = _result(c, op)
    lane = np.arange(WARP)

    def fn(w):
        if not w.mask.all():
            raise DivergenceError(f"elect.sync with lanes {np.flatnonzero(~w.mask).tolist()} inactive; its membermask "
                                  "(the full warp) must all execute it")
        w.env[r] = lane == 0
    return False, fn


@handles("nvvm.barrier")
def _barrier(c, op, info):
    # PTX ISA 9.7.13 "bar, barrier" (bar.sync): wait until the barrier's expected threads (default: the whole CTA) arrive
    v = op.opview
    if v.reductionPredicate is not None:
        raise UnknownOpError("nvvm.barrier with a reduction: not modelled")
    bid = c.slot(v.barrierId) if v.barrierId is not None else None
    cnt = c.slot(v.numberOfThreads) if v.numberOfThreads is not None else None

    def gen(w):
        e = w.env
        b = 0 if bid is None else uniform(e[bid], w.mask, "barrier id")
        n = None if cnt is None else uniform(e[cnt], w.mask, "barrier thread count")
        w.last_op = info
        cta = w.cta
        if cta.trace is not None:
            t = cta.note(w.index, "bar", f"bar.sync {b}" + (f" ({n} threads)" if n is not None else ""))
        wait = cta.bar_sync(w, b, n)
        if wait is not None:
            yield wait
        if cta.trace is not None:
            cta.note_passed(t)
    return True, gen


BAR_RED_OR = "llvm.nvvm.barrier.cta.red.or.aligned.count"


def _bar_red_or(c, op, info, name: str):
    # PTX ISA 9.7.13 "bar, barrier" (bar.red.or.pred d, a, b, c): bar.sync a with b threads that also ORs predicate c
    # over every thread taking part; d is the OR, in each of them
    bid, cnt, pred = _operands(c, op)
    r, _ = _result(c, op)

    def gen(w):
        e = w.env
        if not w.mask.all():
            raise DivergenceError(f"{name} with lanes {np.flatnonzero(~w.mask).tolist()} inactive: the .aligned form "
                                  "must be executed by every thread of the warp")
        b = uniform(e[bid], w.mask, "barrier id")
        n = uniform(e[cnt], w.mask, "barrier thread count")
        w.last_op = info
        cta = w.cta
        gen_at = cta.bars[b][1] if b in cta.bars else 0
        if cta.trace is not None:
            t = cta.note(w.index, "bar", f"bar.red.or {b} ({n} threads)")
        wait = cta.bar_sync(w, b, n, lanes(e[pred], bool))
        if wait is not None:
            yield wait
        if cta.trace is not None:
            cta.note_passed(t)
        e[r] = np.full(WARP, cta.bar_or[(b, gen_at)])
    return True, gen


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
    kind = _int_attr(op, "bin_op")
    ptr_t, val_t = TypeInfo(op.operands[0].type), TypeInfo(op.operands[1].type)
    if kind != ATOMIC_ADD or ptr_t.space != 1 or val_t.kind != "int" or val_t.width not in (32, 64):
        raise UnknownOpError(f"llvm.atomicrmw (bin_op {kind}) of {val_t.kind}{val_t.width or ''} in address space "
                             f"{ptr_t.space}: only an integer add (bin_op {ATOMIC_ADD}) in global memory is modelled")
    addr, val = _operands(c, op)
    r, _ = _result(c, op)
    nbytes = val_t.width // 8

    def fn(w):
        e = w.env
        e[r] = w.cta.launch.memory.atomic_add(lanes(e[addr], np.uint64), lanes(e[val], np.uint64), w.mask, nbytes)
    return False, fn


@handles("nvvm.barrier.arrive")
def _barrier_arrive(c, op, info):
    # PTX ISA 9.7.13 "bar, barrier" (bar.arrive a, b): count the threads at barrier a (b threads expected, a
    # multiple of the warp size) without waiting; a bar.sync with the same id and count waits for the rest
    v = op.opview
    bid = c.slot(v.barrierId) if v.barrierId is not None else None
    cnt = c.slot(v.numberOfThreads)

    def gen(w):
        e = w.env
        b = 0 if bid is None else uniform(e[bid], w.mask, "barrier id")
        n = uniform(e[cnt], w.mask, "barrier thread count")
        w.last_op = info
        cta = w.cta
        if cta.trace is not None:
            cta.note(w.index, "bar", f"bar.arrive {b} ({n} threads)")
        cta.bar_arrive(w, b, n)
        yield None
    return True, gen


@handles("nvvm.setmaxregister")
def _setmaxnreg(c, op, info):
    # PTX ISA "setmaxnreg" (miscellaneous instructions): a warpgroup's register budget, 24..256 in steps of 8; no effect on values
    n = _int_attr(op, "regCount")
    if not 24 <= n <= 256 or n % 8:
        raise EmulationError(f"setmaxnreg {n}: must be a multiple of 8 in 24..256")
    inc = "increase" in str(op.attributes["action"])

    def gen(w):
        if not w.mask.all():
            raise DivergenceError("setmaxnreg is .sync.aligned: every lane of the warp must execute it")
        w.last_op = info
        wait = w.cta.setmaxnreg(w, n, inc)
        while wait is not None:                  # .inc blocks until the CTA's pool has the registers
            yield wait
            wait = w.cta.setmaxnreg_take(w, n)
    return True, gen


@handles("nvvm.fence.mbarrier.init", "nvvm.wgmma.fence.aligned", "nvvm.fence.proxy", "nvvm.fence.sc.cluster",
         "nvvm.fence.sync_restrict", "nvvm.fence.proxy.sync_restrict")
def _ordering_fence(c, op, info):
    # fence.mbarrier_init, fence.proxy.async{.shared::cta,.shared::cluster,.global}, fence.sc.cluster and the
    # .sync_restrict fences (PTX ISA "Parallel synchronization and communication instructions: membar/fence"), and
    # wgmma.fence (9.7.15.6.1), order memory and register accesses. The emulator executes ops of one warp in order,
    # makes every generic store visible to every CTA of the cluster at once, and makes async results visible only
    # at their waits. wgmma.fence and fence.mbarrier_init are checked to be there (machine.CTA.wgmma_fence,
    # fence_mbarrier_init); the others are ordering points only, and a missing one is NOT detected.
    if op.name == "nvvm.wgmma.fence.aligned":
        def fn(w):
            w.cta.wgmma_fence(w)
    elif op.name == "nvvm.fence.mbarrier.init":
        def fn(w):
            w.cta.fence_mbarrier_init(w.index)
    elif op.name == "nvvm.fence.proxy" and _enum(op.attributes["kind"]) in ("async", "async.shared"):
        # fence.proxy.async(.shared::cta): checked, by the TMA store that reads what the generic proxy wrote
        def fn(w):
            w.cta.fence_proxy_async(w.index)
    else:
        def fn(w):
            pass
    return False, fn


# ---- nvvm: clusters (PTX ISA "Cluster of cooperative thread arrays", "Distributed shared memory") ---------------

@handles("nvvm.mapa")
def _mapa(c, op, info):
    # PTX ISA "Parallel synchronization and communication instructions: mapa" (.shared::cluster): the address, in the
    # shared::cluster window of CTA rank b, of the shared memory variable at a (same offset in that CTA)
    v = op.opview
    src, dst = TypeInfo(v.a.type).space, TypeInfo(op.results[0].type).space
    if (src, dst) != (3, 7):
        raise UnknownOpError(f"nvvm.mapa from address space {src} to {dst}: only the shared::cluster form "
                             "(!llvm.ptr<3> -> !llvm.ptr<7>) is modelled, not generic addresses")
    a, b = c.slot(v.a), c.slot(v.b)
    r = c.slot(op.results[0])

    def fn(w):
        e = w.env
        cta = w.cta
        av, bv = e[a], e[b]
        if not isinstance(av, np.ndarray) and not isinstance(bv, np.ndarray):
            e[r] = cta.cluster.mapa(cta, av, bv)
            return
        out = np.zeros(WARP, np.uint64)
        av, bv = lanes(av, np.uint64), lanes(bv, np.uint64)
        for lane in np.flatnonzero(w.mask):
            try:
                out[lane] = cta.cluster.mapa(cta, int(av[lane]), int(bv[lane]))
            except EmulationError as err:
                err.detail += f" (lane {lane})"
                raise
        e[r] = out
    return False, fn


def _cluster_aligned(op, w, what: str) -> None:
    # .aligned: every (non-exited) thread of the warp executes the same barrier.cluster instruction
    if "aligned" in op.attributes and not w.mask.all() and (w.mask != w.cta.cluster.launch_lanes(w)).any():
        raise DivergenceError(f"{what}.aligned with lanes {lane_list(~w.mask)} inactive: every thread "
                              "of the warp must execute it (drop .aligned for divergent code)")


@handles("nvvm.cluster.arrive", "nvvm.cluster.arrive.relaxed")
def _cluster_arrive(c, op, info):
    # PTX ISA "Parallel synchronization and communication instructions: barrier.cluster": barrier.cluster.arrive
    # {.release (default), .relaxed}{.aligned} marks the executing threads' arrival in the current phase and does not
    # wait. The memory semantics differ, which the emulator does not model (see machine.Cluster).
    def gen(w):
        _cluster_aligned(op, w, "barrier.cluster.arrive")
        w.cta.cluster.barrier_arrive(w)
        w.last_op = info
        yield None                       # let the arrival be seen before this warp goes on
    return True, gen


@handles("nvvm.cluster.wait")
def _cluster_wait(c, op, info):
    # PTX ISA "... barrier.cluster": barrier.cluster.wait{.acquire}{.aligned} waits until every non-exited thread of
    # the cluster arrived in the phase this thread arrived in
    def gen(w):
        _cluster_aligned(op, w, "barrier.cluster.wait")
        cl = w.cta.cluster
        phase = cl.barrier_wait_target(w)
        w.last_op = info
        if cl.barrier_phase <= phase:
            yield Wait(lambda: cl.barrier_phase > phase, LazyText(lambda: cl.barrier_state(phase)))
        cl.barrier_waited(w)
    return True, gen


@handles("nvvm.prefetch")
def _prefetch(c, op, info):
    # PTX ISA 9.7.9 "prefetch, prefetchu" (prefetch.tensormap): a cache hint; the operand must be a tensor map
    v = op.opview
    if "tensormap" not in op.attributes:
        raise UnknownOpError("nvvm.prefetch of anything but a tensor map is not modelled")
    a = c.slot(v.addr)

    def fn(w):
        for addr in active_ints(w.env[a], w.mask):
            w.cta.launch.tensor_map_at(addr)
    return False, fn


# ---- nvvm: mbarriers, PTX ISA 9.7.13.15 --------------------------------------------------------------

def _no_extras(op, *names):
    for n in names:
        if getattr(op.opview, n) is not None:
            raise UnknownOpError(f"{op.name} with a {n} operand: not modelled")


@handles("nvvm.mbarrier.init")
def _mbar_init(c, op, info):
    # 9.7.13.15 "mbarrier.init"
    _no_extras(op, "predicate")
    a, n = (c.slot(x) for x in (op.opview.addr, op.opview.count))

    def fn(w):
        e = w.env
        for lane, addr in per_lane(e[a], w.mask):
            w.cta.mbarrier_init(addr, int(lanes(e[n])[lane]), w.index)
            if w.cta.trace is not None:
                w.cta.note(w.index, "init", f"mbarrier.init 0x{addr:x} count {int(lanes(e[n])[lane])}")
    return False, fn


@handles("nvvm.mbarrier.arrive", "nvvm.mbarrier.arrive.expect_tx")
def _mbar_arrive(c, op, info):
    # 9.7.13.15 "mbarrier.arrive" (each active thread arrives once) and "mbarrier.arrive.expect_tx"
    # (expect-tx of txCount bytes, then arrive-on)
    v = op.opview
    expect = op.name.endswith("expect_tx")
    if expect:
        _no_extras(op, "predicate")
    a = c.slot(v.addr)
    tx = c.slot(v.txcount) if expect else None
    r = c.slot(op.results[0]) if len(op.results) else None
    cnt = c.slot(v.count) if not expect and v.count is not None else None
    if TypeInfo(v.addr.type).space == 7 or cnt is not None:
        return True, _mbar_arrive_cluster(op, info, a, tx, cnt, r, TypeInfo(v.addr.type).space == 7)

    def gen(w):
        e = w.env
        token = np.zeros(WARP, np.uint64)
        carries = w.cta.tc_signal(w, w.mask, "mbarrier.arrive")
        for lane, addr in per_lane(e[a], w.mask):
            if carries:                    # its waiters must order their TMEM accesses after this thread's
                w.cta.mbarrier(addr, w.index).tc_phases.add(w.cta.mbarrier(addr, w.index).phase)
            token[lane] = w.cta.mbarrier_arrive(addr, 1, int(lanes(e[tx])[lane]) if expect else 0, w.index)
        if r is not None:
            e[r] = token
        w.last_op = info
        if w.cta.trace is not None:
            arrivals = [(addr, int(lanes(e[tx])[lane]) if expect else 0) for lane, addr in per_lane(e[a], w.mask)]
            for addr in sorted({addr for addr, _ in arrivals}):
                bar = w.cta.mbarriers[addr]
                tx_bytes = sum(n for x, n in arrivals if x == addr)
                tx_text = f" expect_tx {tx_bytes} B" if expect else ""
                w.cta.note(w.index, "arrive", f"mbarrier 0x{addr:x} x{sum(x == addr for x, _ in arrivals)}{tx_text} (now phase "
                                              f"{bar.phase}, {bar.pending} arrivals and {bar.tx} tx B pending)")
        yield None                       # let the arrival be seen before this warp goes on
    return True, gen


def _mbar_arrive_cluster(op, info, a: int, tx, cnt, r, cluster_space: bool):
    # 9.7.13.15 "mbarrier.arrive" on a .shared::cluster address (e.g. mbarrier.arrive.release.cluster.shared::cluster:
    # a remote arrive on another CTA's mbarrier, which returns no state), and the count operand (pending -= count)
    name = op.name[len("nvvm."):]

    def gen(w):
        e = w.env
        cta = w.cta
        token = np.zeros(WARP, np.uint64)
        carries = cta.tc_signal(w, w.mask, name)      # tcgen05 fences: as for a local arrive (_mbar_arrive)
        for lane, addr in per_lane(e[a], w.mask):
            n = int(lanes(e[cnt])[lane]) if cnt is not None else 1
            if cluster_space:
                target, local = cta.cluster.remote_mbarrier(cta, addr, name)
            else:
                target, local = cta, addr
            if n < 1:
                raise MbarrierError(f"{name} with count {n} on mbarrier 0x{local:x}: the count must be at least 1")
            if carries:
                target.mbarrier(local).tc_phases.add(target.mbarrier(local).phase)
            token[lane] = target.mbarrier_arrive(local, n, int(lanes(e[tx])[lane]) if tx is not None else 0)
        if r is not None:
            e[r] = token
        w.last_op = info
        yield None
    return gen


@handles("nvvm.mbarrier.try_wait.parity")
def _mbar_wait(c, op, info):
    # 9.7.13.15 "mbarrier.test_wait/try_wait": .parity P succeeds once the phase with parity P has completed;
    # the NVVM op loops on try_wait until it does
    v = op.opview
    a, p = c.slot(v.addr), c.slot(v.phase)

    def gen(w):
        e = w.env
        waits = sorted({(addr, int(lanes(e[p])[lane]) & 1) for lane, addr in per_lane(e[a], w.mask)})
        cta = w.cta
        bars = [(cta.mbarrier(addr, w.index), parity) for addr, parity in waits]
        w.last_op = info
        if cta.trace is not None:
            t = cta.note(w.index, "wait", ", ".join(f"mbarrier 0x{b.addr:x} parity {par}" for b, par in bars))
        if not all(b.passed(par) for b, par in bars):
            what = ", ".join(f"mbarrier 0x{b.addr:x} (byte {b.addr - cta.base} of dynamic smem) parity {par}: phase {b.phase}, "
                             f"{b.pending} arrivals and {b.tx} tx bytes pending" for b, par in bars)
            yield Wait(lambda: all(b.passed(par) for b, par in bars), what)
        for b, par in bars:          # the last phase of parity `par` completed: did it carry tcgen05 work?
            done = b.phase - 1 if (b.phase - 1) & 1 == par else b.phase - 2
            if done in b.tc_phases:
                cta.tc_passed(w, w.mask, f"its wait on mbarrier 0x{b.addr:x} (phase {done}, completed by a "
                                         "tcgen05.commit or a thread that accessed TMEM)")
        if cta.trace is not None:
            cta.note_passed(t)
    return True, gen


# ---- nvvm: TMA, PTX ISA 9.7.9.25 ----------------------------------------------------------------------

@handles("nvvm.cp.async.bulk.tensor.shared.cluster.global")
def _tma_load(c, op, info):
    # 9.7.9.25 cp.async.bulk.tensor.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    # .multicast::cluster (multicastMask operand, 16-bit ctaMask): the box lands at the same CTA-relative offset in
    # every CTA of the mask, and complete_tx goes to the mbarrier at the same offset in each (machine.CTA.tma_load)
    v = op.opview
    _no_extras(op, "l2CacheHint", "predicate")
    if len(v.im2colOffsets) or ("mode" in op.attributes and _enum(op.attributes["mode"]) != "tile"):
        raise UnknownOpError("TMA load in im2col (or another non-tile) mode: only tile mode is modelled")
    if "group" in op.attributes:
        raise UnknownOpError(f"TMA load with {op.attributes['group']} (.cta_group): the mbarrier of a CTA pair is not "
                             "modelled")
    if TypeInfo(v.mbar.type).space != 3:
        raise UnknownOpError("TMA load with an mbarrier outside shared::cta: not modelled")
    dst, tmap, bar = c.slot(v.dstMem), c.slot(v.tmaDescriptor), c.slot(v.mbar)
    mask = c.slot(v.multicastMask) if v.multicastMask is not None else None
    coords = [(c.slot(x), TypeInfo(x.type).width) for x in v.coordinates]

    def gen(w):
        e = w.env
        for lane, d in per_lane(e[dst], w.mask):
            box = [signed(int(lanes(e[s])[lane]), width) for s, width in coords]
            m = None if mask is None else int(lanes(e[mask])[lane]) & 0xFFFF
            w.cta.tma_load(info, d, int(lanes(e[tmap])[lane]), int(lanes(e[bar])[lane]), box, m, w.index)
        w.last_op = info
        yield None
    return True, gen


@handles("nvvm.cp.async.bulk.tensor.global.shared.cta")
def _tma_store(c, op, info):
    # 9.7.9.25 cp.async.bulk.tensor.global.shared::cta.tile.bulk_group: smem box -> global through the tensor map,
    # completing in the issuing thread's bulk async-group (machine.CTA.tma_store)
    v = op.opview
    _no_extras(op, "l2CacheHint", "predicate")
    if "mode" in op.attributes and _enum(op.attributes["mode"]) != "tile":
        raise UnknownOpError("TMA store in a non-tile mode: only tile mode is modelled")
    src, tmap = c.slot(v.srcMem), c.slot(v.tmaDescriptor)
    coords = [(c.slot(x), TypeInfo(x.type).width) for x in v.coordinates]

    def gen(w):
        e = w.env
        for lane, s_ in per_lane(e[src], w.mask):
            box = [signed(int(lanes(e[x])[lane]), width) for x, width in coords]
            w.cta.tma_store(info, s_, int(lanes(e[tmap])[lane]), box, w.index, lane)
        w.last_op = info
        yield None
    return True, gen


@handles("nvvm.cp.async.bulk.commit.group")
def _bulk_commit(c, op, info):
    # 9.7.9.27 cp.async.bulk.commit_group: per thread
    def fn(w):
        for lane in np.flatnonzero(w.mask):
            w.cta.bulk_commit(w.index, int(lane))
    return False, fn


@handles("nvvm.cp.async.bulk.wait_group")
def _bulk_wait(c, op, info):
    # 9.7.9.28 cp.async.bulk.wait_group[.read] N: per thread
    n = _int_attr(op, "group")
    read = "read" in op.attributes

    def gen(w):
        w.last_op = info
        for lane in np.flatnonzero(w.mask):
            while True:
                wait = w.cta.bulk_wait(w.index, int(lane), n, read)
                if wait is None:
                    break
                yield wait
    return True, gen


# ---- nvvm: wgmma, PTX ISA 9.7.15 ----------------------------------------------------------------------

def _enum(attr) -> str:
    """'#nvvm.wgmma_type<bf16>' -> 'bf16'."""
    s = str(attr)
    return s[s.index("<") + 1:s.rindex(">")] if "<" in s else s


@handles("nvvm.wgmma.mma_async")
def _wgmma(c, op, info):
    # 9.7.15.5.2 wgmma.mma_async.sync.aligned.shape.dtype.atype.btype d, a-desc, b-desc, scale-d, imm-scale-a,
    # imm-scale-b, imm-trans-a, imm-trans-b: A and B from smem descriptors, D in registers
    v = op.opview
    shape = str(op.attributes["shape"])
    m, n, k = (int(x) for x in re.findall(r"= (\d+)", shape))
    ta, tb, td = (_enum(op.attributes[x]) for x in ("typeA", "typeB", "typeD"))
    if ta != tb or ta not in ("bf16", "f16") or td != "f32":
        raise UnknownOpError(f"wgmma {ta} x {tb} -> {td}: only bf16/f16 inputs with f32 accumulators are modelled")
    if (m, k) != (64, 16):
        raise UnknownOpError(f"wgmma shape m{m}n{n}k{k}: only m64nNk16 is modelled for {ta}")
    if "satfinite" in op.attributes and _enum(op.attributes["satfinite"]) not in ("wrapped", "none"):
        raise UnknownOpError(f"wgmma satfinite {op.attributes['satfinite']}: not modelled")
    scale = {"one": 1.0, "neg": -1.0}
    attrs = {
        "m": m, "n": n, "k": k, "type_a": ta,
        # MMALayout: A row = K-major (col = transposed, M-major); B col = K-major, row = N-major (imm-trans-b)
        "major_a": {"row": "K", "col": "MN"}[_enum(op.attributes["layoutA"])],
        "major_b": {"col": "K", "row": "MN"}[_enum(op.attributes["layoutB"])],
        "scale_a": scale[_enum(op.attributes["scaleA"])], "scale_b": scale[_enum(op.attributes["scaleB"])],
        "scale_d": _enum(op.attributes["scaleD"]) == "one",
    }
    acc, da, db = c.slot(v.inouts), c.slot(v.descriptorA), c.slot(v.descriptorB)
    r = c.slot(op.results[0])

    def fn(w):
        e = w.env
        if not w.mask.all():
            raise DivergenceError("wgmma.mma_async is .sync.aligned: every lane of the warp must execute it")
        a_bits = uniform(e[da], w.mask, "wgmma descriptor A")
        b_bits = uniform(e[db], w.mask, "wgmma descriptor B")
        acc_in = e[acc]
        if not isinstance(acc_in, Pending):
            acc_in = lanes(acc_in)
        e[r] = w.cta.wgmma_issue(w, info, attrs, a_bits, b_bits, acc_in)
    return False, fn


@handles("nvvm.wgmma.commit.group.sync.aligned")
def _wgmma_commit(c, op, info):
    # 9.7.15.6.2 wgmma.commit_group
    def gen(w):
        if not w.mask.all():
            raise DivergenceError("wgmma.commit_group is .sync.aligned: every lane of the warp must execute it")
        w.cta.wgmma_commit(w)
        w.last_op = info
        yield None
    return True, gen


@handles("nvvm.wgmma.wait.group.sync.aligned")
def _wgmma_wait(c, op, info):
    # 9.7.15.6.3 wgmma.wait_group N
    n = _int_attr(op, "group")

    def gen(w):
        if not w.mask.all():
            raise DivergenceError("wgmma.wait_group is .sync.aligned: every lane of the warp must execute it")
        w.last_op = info
        cta = w.cta
        if cta.trace is not None:
            t = cta.note(w.index, "wait", f"wgmma.wait_group {n}")
        while True:
            wait = cta.wgmma_wait(w, n)
            if wait is None:
                break
            yield wait
        if cta.trace is not None:
            cta.note_passed(t)
    return True, gen
