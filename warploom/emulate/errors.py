"""What the emulator reports: one exception class per kind of kernel bug, each naming where it happened.

Every error carries the CTA, the warp, the op (its name and MLIR location) and the address or
barrier involved, filled in by the interpreter as the error leaves the op that raised it, so a
message reads "CTA (1, 0, 0) warp 4, nvvm.wgmma.mma_async loc("acc137"): ...".
"""
from __future__ import annotations


class EmulationError(RuntimeError):
    """A kernel did something the hardware does not define (or the emulator does not model)."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail
        self.cta: tuple | None = None
        self.warp: int | None = None
        self.op: str | None = None

    def locate(self, cta=None, warp=None, op=None) -> EmulationError:
        """Fill in where the error happened (once: the innermost op that raised it wins)."""
        if self.cta is None and cta is not None:
            self.cta = cta
        if self.warp is None and warp is not None:
            self.warp = warp
        if self.op is None and op is not None:
            self.op = op
        self.args = (str(self),)
        return self

    def __str__(self) -> str:
        where = []
        if self.cta is not None:
            where.append(f"CTA {self.cta}")
        if self.warp is not None:
            where.append(f"warp {self.warp}")
        if self.op is not None:
            where.append(self.op)
        return f"{', '.join(where)}: {self.detail}" if where else self.detail


class UnknownOpError(EmulationError):
    """The kernel holds an op (or an op form) the emulator has no semantics for; it is never skipped."""


class DeadlockError(EmulationError):
    """Every live warp is blocked and nothing asynchronous is in flight."""


class SmemRaceError(EmulationError):
    """An async proxy (TMA, wgmma) touches shared-memory bytes another in-flight async operation owns."""


class AccumulatorReadError(EmulationError):
    """Registers an async op writes read too early: wgmma accumulators before the wgmma.wait_group that
    retires their group, or tcgen05.ld destinations before the warp's tcgen05.wait::ld."""


class OutOfBoundsError(EmulationError):
    """A shared- or global-memory access outside what the launch provides (or misaligned)."""


class MbarrierError(EmulationError):
    """An mbarrier misused: not initialised, too many arrivals, a bad count."""


class ScopeError(MbarrierError):
    """A wait acquiring at CTA scope passed a phase that another CTA's thread released at cluster scope: the release
    and the acquire are not morally strong (PTX ISA "Memory Consistency Model"), so what the releasing thread
    ordered before its arrival is not ordered before the waiter's next operations; wait with .acquire.cluster."""


class BarrierError(EmulationError):
    """A barrier.cluster misused: a thread arrives twice in one phase, or waits without having arrived."""


class DivergenceError(EmulationError):
    """A value that must be uniform (loop bounds, a collective op's lanes or operands) differs across lanes."""


class AsyncLeakError(EmulationError):
    """A warp exited with asynchronous work (wgmma groups, tcgen05.mma no tcgen05.commit tracks) it never
    waited for."""


class TmemError(EmulationError):
    """Tensor Memory (sm_100a) misused: touched before tcgen05.alloc or after tcgen05.dealloc, outside the
    allocated columns or lanes 0..127, outside the lane quadrant a warp may reach, a bad alloc/dealloc
    (size, relinquished permit, another warp), or columns still allocated when the allocating warp exits."""


class TmemRaceError(EmulationError):
    """A Tensor Memory access races an in-flight async tcgen05 operation: tcgen05.ld of cells a
    tcgen05.mma still writes (no tcgen05.commit arrival observed), or cells whose tcgen05.ld / tcgen05.st
    was not yet retired by tcgen05.wait."""


class TmemFenceError(EmulationError):
    """A thread synchronisation that hands Tensor Memory work from one thread to another without the tcgen05 fences
    the ISA asks for (PTX ISA 9.7.16.6 "tcgen05-memory-consistency-model"): a thread that accessed TMEM signals
    (mbarrier.arrive, bar.arrive, bar.sync) with no tcgen05.fence::before_thread_sync since, or a thread that passed
    a synchronisation carrying another thread's tcgen05 work (a tcgen05.commit arrival, an arrival or barrier of a
    thread that accessed TMEM) accesses TMEM with no tcgen05.fence::after_thread_sync since."""


class WgmmaFenceError(EmulationError):
    """A wgmma issued after its accumulator or A-fragment registers were accessed by other instructions with no
    wgmma.fence in between (PTX ISA 9.7.15.6.1 "wgmma.fence")."""


class RegisterBudgetError(EmulationError):
    """setmaxnreg misused: a budget beyond the register file, or .inc/.dec in the wrong direction."""


class PairDeallocError(TmemRaceError):
    """tcgen05.dealloc.cta_group::2 (the CTA pair's Tensor Memory, freed by one warp of each CTA together, PTX ISA
    9.7.16.7.1) while a warp of either CTA may still use the pair's TMEM: its last tcgen05.ld / st / mma is not
    ordered before the dealloc by any synchronisation (order.py), or is still in flight. Both CTAs' last uses, then a
    cluster barrier (or an mbarrier hand-off between the two deallocating warps), then the dealloc."""
