"""The emulator's shared vocabulary: lane and warp sizes, where an op is (`OpInfo`), why a warp is blocked (`Wait`),
an in-flight result (`Pending`), something the scheduler completes later (`AsyncOp`), and one warp's state (`Warp`).

Every hardware unit (smem.py, mbarrier.py, tma.py, wgmma.py, registers.py, named_barriers.py, tcgen05.py), the
CTA that composes them (machine.py), the cluster's scheduler (cluster.py) and the op handlers (ops_*.py) speak in
these terms; this module imports nothing of the emulator.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

WARP = 32
WARPGROUP_WARPS = 4
NUMPY_ELEMS = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}


@dataclass(frozen=True)
class OpInfo:
    """Where an op is, for messages: computed lazily from the MLIR op (printing is slow, errors are rare)."""
    name: str
    op: object = field(repr=False, compare=False)

    @property
    def text(self) -> str:
        loc = str(self.op.location)
        if loc != "loc(unknown)":
            return f"{self.name} {loc}"
        if len(self.op.regions):
            return self.name
        asm = self.op.get_asm().strip().splitlines()[0]
        return asm if len(asm) <= 160 else asm[:157] + "..."


class Wait:
    """What a blocked warp waits for: `ready()` says when it may run again; `what` says why it waits;
    `error()`, when given, is the error a deadlock with this warp blocked here reports (its root cause)."""
    __slots__ = ("ready", "what", "error")

    def __init__(self, ready, what: str, error=None):
        self.ready, self.what, self.error = ready, what, error


class LazyText:
    """A message part computed when printed (a deadlock report shows a barrier's state at the deadlock)."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __str__(self) -> str:
        return self.fn()

    __format__ = lambda self, spec: format(str(self), spec)   # noqa: E731


class Pending:
    """One warp's accumulator registers written by a wgmma: valid once the group completed (`value`) and
    readable once the warp's own wgmma.wait_group retired it (`retired`), PTX ISA 9.7.15.6."""
    __slots__ = ("value", "retired")

    def __init__(self):
        self.value, self.retired = None, False


class PendingPart:
    """Register `index` of an in-flight accumulator, passed on unread: an llvm.extractvalue whose only users are
    register-A wgmmas (inline asm) taking it as a tied accumulator input, as `mma_async_reg_a` builds them."""
    __slots__ = ("pending", "index")

    def __init__(self, pending: Pending, index: int):
        self.pending, self.index = pending, index



@dataclass
class AsyncOp:
    """Something in flight that the scheduler completes: a TMA landing or a wgmma group."""
    ready_step: int
    origin: OpInfo
    what: str
    fire: object
    eligible: object = None         # callable; None = always
    cta: object = None              # the CTA whose state it changes (errors on landing name it)

    def can_fire(self) -> bool:
        return self.eligible is None or self.eligible()




class Warp:
    """One warp's state: its SSA values (`env`, slots assigned by the compiler), active lanes, blocking state."""
    __slots__ = ("cta", "index", "env", "mask", "tid", "wait", "gen", "exited", "last_op", "unfenced",
                 "tc_unpublished", "tc_unordered", "tc_touched", "knows")

    def __init__(self, cta, index: int, nslots: int, threads: int):
        self.cta, self.index = cta, index
        self.env = [None] * nslots
        self.tid = np.arange(WARP * index, WARP * index + WARP, dtype=np.uint64)
        self.mask = self.tid < threads
        self.wait: Wait | None = None
        self.gen = None
        self.exited = False
        self.last_op: OpInfo | None = None
        # why the next wgmma needs a wgmma.fence first (None once fenced): PTX ISA 9.7.15.6.1 asks for one before
        # the warp's first wgmma and after any other access to accumulator / A-fragment registers; a reason,
        # or (OpInfo, what it accessed) of the last such access
        self.unfenced: str | tuple | None = "the warp started (no wgmma.fence before its first wgmma)"
        # tcgen05 fences (TmemFenceError): lanes that accessed TMEM since their last fence::before_thread_sync, with
        # the last such op; lanes that passed a synchronisation carrying tcgen05 work since their last
        # fence::after_thread_sync, with what it was; whether the warp ever accessed TMEM (its signals carry work)
        self.tc_unpublished: tuple | None = None
        self.tc_unordered: tuple | None = None
        self.tc_touched = False
        # happens-before (order.py): {warp: n} = the first n TMEM accesses of that warp are ordered before this
        # warp's next op
        self.knows: dict = {}


def lane_list(mask: np.ndarray) -> str:
    """'0..31' or '0, 3, 5': the lanes set in a mask, runs shortened."""
    lanes = np.flatnonzero(mask).tolist()
    runs, start = [], None
    for i, lane in enumerate(lanes):
        if start is None:
            start = lane
        if i + 1 == len(lanes) or lanes[i + 1] != lane + 1:
            runs.append(str(start) if lane == start else f"{start}..{lane}")
            start = None
    return ", ".join(runs)


def describe_lanes(values: np.ndarray, mask: np.ndarray) -> str:
    """'lane 0 = 7, lane 1 = 9, ...': the values of the first few active lanes."""
    lanes = np.flatnonzero(mask)
    shown = ", ".join(f"lane {i} = {values[i]}" for i in lanes[:4])
    return shown + (", ..." if lanes.size > 4 else "")
