"""Compile a lowered kernel (the `llvm.func` of a `gpu.module`) once into Python closures over a warp's state.

The MLIR objects are walked once, here; running a kernel never touches them again (except to print
an op in an error message). Every SSA value gets a slot in the warp's `env`; every op becomes a
function of the warp (`fn(warp)`), or a generator function where the op blocks or holds a region
(`scf.for`, `scf.if`, waits, barriers). Values are lane vectors of one warp:

  iN (N > 1)        a Python int when uniform, else a uint64 array of 32 lanes, always in 0..2^N-1
  i1                a bool, or a bool array of 32 lanes
  f32 / bf16 / f16  numpy scalars or (32,) arrays of float32 / ml_dtypes.bfloat16 / float16
  vector<n x T>     (32, n) arrays
  struct of n f32   (32, n) float32 arrays, or a `Pending` wgmma result (core.py); a `PendingPart` is one
                    register of an in-flight one passed on unread to a register-A wgmma (regwgmma.py)
  other structs     a tuple of their members (shfl.sync's (value, valid))
  !llvm.ptr<as>     the integer address, like i64 (the address space is static, from the type); shared::cta (3)
                    and shared::cluster (7) addresses follow cluster.py's windows (DSMEM_BASE for other CTAs)

Divergent `scf.if` runs each side under an active-lane mask; `scf.for` needs bounds uniform across
the active lanes. An op without semantics here raises UnknownOpError when the kernel is compiled:
nothing is ever skipped.

This module is the driver (the walk, slots, `handles`) and the helpers every handler uses; the handlers are one file
per dialect, registered on import (warploom/emulate/__init__.py imports them all): ops_arith.py, ops_math.py,
ops_vector.py, ops_scf.py, ops_llvm.py, ops_nvvm.py, tcgen05.py (nvvm.tcgen05.*) and regwgmma.py (llvm.inline_asm,
the register-A wgmma); semantics that several dialects share (arith.addf and llvm.fadd, ...) are in semantics.py.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
from mlir import ir

from .core import WARP, OpInfo, describe_lanes
from .errors import DivergenceError, EmulationError, UnknownOpError

FLOATS = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}
INT_VECTOR_ELEMS = {"i8": np.uint8, "i16": np.uint16, "i32": np.uint32, "i64": np.uint64}   # vector<n x iN> lanes


class TypeInfo:
    """What the interpreter needs of an MLIR type, parsed once from its printed form (each form once per process:
    _PARSED)."""
    __slots__ = ("kind", "width", "space", "count", "elem")

    def __init__(self, t: ir.Type):
        s = str(t)
        parsed = _PARSED.get(s)
        if parsed is None:
            self._parse(s)
            _PARSED[s] = (self.kind, self.width, self.space, self.count, self.elem)
        else:
            self.kind, self.width, self.space, self.count, self.elem = parsed

    def _parse(self, s: str) -> None:
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


_PARSED: dict[str, tuple] = {}      # a type's printed form -> TypeInfo's fields


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
    if REGISTER_ACCESSES is None:
        raise RuntimeError("the wgmma register analysis is not registered: import warploom.emulate (its __init__ "
                           "imports every op module, regwgmma.py among them)")
    c.touches = REGISTER_ACCESSES(func)
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
        if handler is None:
            handler = next((h for prefix, h in PREFIX_HANDLERS.items() if name.startswith(prefix)), None)
        if handler is None:
            raise UnknownOpError(f"the emulator has no semantics for {info.text}: add them to the handlers of its "
                                 "dialect (warploom/emulate/ops_<dialect>.py; ops are never skipped)"
                                 ).locate(op=info.text)
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


HANDLERS = {}               # op name -> handler(compiler, op, OpInfo) -> (is_generator, fn(warp))
# func -> {op: the accumulator / A-fragment registers it accesses}: the kernel-wide analysis of the wgmma.fence rule,
# registered by regwgmma.py (`analyses`) as handlers are, so that this module imports no op module
REGISTER_ACCESSES = None
PREFIX_HANDLERS = {}        # op name prefix -> handler, for families of ops (nvvm.read.ptx.sreg.*)


# llvm.inline_asm semantics by what its asm says: (test(asm) -> bool, handler); the one registered with test None is
# asked when no test matches (regwgmma.py: the register-A wgmma, which names what it cannot read)
INLINE_ASM: list = []


def inline_asm(test):
    """Register a handler for the llvm.inline_asm ops whose asm string `test` accepts (None: the fallback)."""
    def register(fn):
        INLINE_ASM.append((test, fn))
        return fn
    return register


def _inline_asm(c, op, info):
    asm = ir.StringAttr(op.attributes["asm_string"]).value
    fallback = None
    for test, fn in INLINE_ASM:
        if test is None:
            fallback = fn
        elif test(asm):
            return fn(c, op, info)
    if fallback is None:
        raise UnknownOpError(f"llvm.inline_asm {asm!r}: no emulator semantics")
    return fallback(c, op, info)


def analyses(fn):
    """Register the kernel-wide register-access analysis (regwgmma.register_accesses); one only."""
    global REGISTER_ACCESSES
    if REGISTER_ACCESSES is not None:
        raise RuntimeError("the register-access analysis is registered twice")
    REGISTER_ACCESSES = fn
    return fn


def handles(*names):
    """Register a handler for ops `names` (one dialect file gives each op its semantics: a second is an import
    error)."""
    def register(fn):
        for n in names:
            if n in HANDLERS:
                raise RuntimeError(f"{n} already has emulator semantics elsewhere")
            HANDLERS[n] = fn
        return fn
    return register


def operand_slots(c: _Compiler, op) -> list[int]:
    return [c.slot(v) for v in op.operands]


def int_attr(op, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def result_slot(c: _Compiler, op) -> tuple[int, TypeInfo]:
    r = op.results[0]
    return c.slot(r), TypeInfo(r.type)


def enum_attr(attr) -> str:
    """'#nvvm.wgmma_type<bf16>' -> 'bf16': the case of an enum attribute."""
    s = str(attr)
    return s[s.index("<") + 1:s.rindex(">")] if "<" in s else s


HANDLERS["llvm.inline_asm"] = _inline_asm      # dispatches on the asm string (INLINE_ASM)
