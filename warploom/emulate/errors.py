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
    """wgmma accumulator registers read before the wgmma.wait_group that retires their group."""


class OutOfBoundsError(EmulationError):
    """A shared- or global-memory access outside what the launch provides (or misaligned)."""


class MbarrierError(EmulationError):
    """An mbarrier misused: not initialised, too many arrivals, a bad count."""


class DivergenceError(EmulationError):
    """A value that must be uniform (loop bounds, a collective op's lanes or operands) differs across lanes."""


class AsyncLeakError(EmulationError):
    """A warp exited with asynchronous work (wgmma groups) it never waited for."""


class WgmmaFenceError(EmulationError):
    """A wgmma issued after its accumulator or A-fragment registers were accessed by other instructions with no
    wgmma.fence in between (PTX ISA 9.7.15.6.1 "wgmma.fence")."""


class RegisterBudgetError(EmulationError):
    """setmaxnreg misused: a budget beyond the register file, or .inc/.dec in the wrong direction."""
