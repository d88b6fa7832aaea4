"""One CTA's mbarriers (PTX ISA 9.7.13.15 "mbarrier"): phase, pending arrivals, tx-count, and the visibility of inits.

mbarriers are kept by smem address. An init is visible to other warps only after the initialising warp's
fence.mbarrier_init and a barrier both take part in (bar.sync: named_barriers.py; barrier.cluster: cluster.py), and
to TMA's complete_tx only after that fence. When the launch knows the plan's rings (`launch.releases`), a release
barrier completing a phase while its stage holds loaded data nobody read is a race.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import MbarrierError, OutOfBoundsError, SmemRaceError

MBARRIER_BYTES = 8
MBARRIER_MAX_COUNT = (1 << 20) - 1     # PTX ISA 9.7.13.15 "mbarrier": counts and tx-count are 20-bit


@dataclass
class Mbarrier:
    """PTX ISA 9.7.13.15 "mbarrier" contents: expected count, pending arrivals, tx-count, current phase."""
    addr: int
    count: int
    pending: int
    tx: int = 0
    phase: int = 0
    # fence.mbarrier_init tracking: the initialising warp, whether it has since run fence.mbarrier_init, and the
    # warps the init is visible to (None: not tracked)
    init_warp: int | None = None
    fenced: bool = False
    visible: set | None = None
    tc_phases: set = field(default_factory=set)   # phases an arrival carrying tcgen05 work counted toward
    # phases that counted a cluster-scope release of another CTA's thread: a wait passing one must acquire at cluster
    # scope (ops_nvvm._parity_wait), or the release and the acquire are not morally strong
    cluster_phases: set = field(default_factory=set)
    # happens-before (order.py): what the arrivals of the current phase knew, and what each completed phase's did
    hb_open: dict | None = None
    hb_done: dict = field(default_factory=dict)

    def maybe_complete(self) -> None:
        # "Phase completion of the mbarrier object": pending arrivals and tx-count both reach zero;
        # the phase flips and pending arrivals reset to the expected count.
        if self.pending == 0 and self.tx == 0:
            if self.hb_open is not None:
                self.hb_done[self.phase] = self.hb_open
                self.hb_done.pop(self.phase - 2, None)
                self.hb_open = None
            self.phase += 1
            self.pending = self.count

    def passed(self, parity: int) -> bool:
        # try_wait.parity P succeeds once the phase with parity P completed: the current phase has the other parity
        return (self.phase & 1) != parity


class Mbarriers:
    """The mbarriers of one CTA (`table`: smem address -> Mbarrier)."""

    def __init__(self, cta):
        self.cta = cta
        self.table: dict[int, Mbarrier] = {}

    def get(self, addr: int, warp: int | None = None) -> Mbarrier:
        """The mbarrier at `addr`, as used by warp `warp` (None: not checked for the init's visibility)."""
        cta = self.cta
        bar = self.table.get(addr)
        if bar is None:
            if not 0 <= addr - cta.base < cta.size:
                cta.shared.offset(addr, MBARRIER_BYTES, "an mbarrier op (shared::cta)")
            raise MbarrierError(f"mbarrier at smem 0x{addr:x} (byte {addr - cta.base} of dynamic smem) is used before "
                                "mbarrier.init: initialise it (one thread, then fence.mbarrier_init and a barrier)")
        if warp is not None and bar.visible is not None and warp not in bar.visible:
            # PTX ISA 9.7.13.15 "mbarrier.init" and "membar/fence" (fence.mbarrier_init): another thread sees
            # the init only after the initialising thread's fence.mbarrier_init and a barrier both take part in
            how = (f"warp {bar.init_warp}'s fence.mbarrier_init ran, but no CTA barrier (bar.sync) since then included "
                   "both warps" if bar.fenced else f"warp {bar.init_warp} never ran fence.mbarrier_init after it")
            raise MbarrierError(f"mbarrier at smem 0x{addr:x} (byte {addr - cta.base} of dynamic smem) was "
                                f"initialised by warp {bar.init_warp} and is used by warp {warp} before the init is "
                                "visible to it: "
                                f"{how}; follow mbarrier.init with fence.mbarrier_init and a CTA barrier")
        return bar

    def fenced_by(self, warp: int) -> list[Mbarrier]:
        """The mbarriers warp `warp` initialised and fenced: a barrier it takes part in publishes their inits."""
        return [b for b in self.table.values() if b.fenced and b.init_warp == warp]

    def fence_init(self, warp: int) -> None:
        """fence.mbarrier_init.release.cluster by warp `warp`: its earlier mbarrier.inits become visible to the async
        proxy now, and to other warps at the next barrier they share with it (see `NamedBarriers.sync`)."""
        for bar in self.table.values():
            if bar.init_warp == warp:
                bar.fenced = True

    def init(self, addr: int, count: int, warp: int | None = None) -> None:
        # 9.7.13.15 "mbarrier.init": 8-byte aligned object in shared memory; count in 1..2^20-1;
        # phase 0, pending arrivals = count, tx-count 0
        if addr % MBARRIER_BYTES:
            raise OutOfBoundsError(f"mbarrier.init at 0x{addr:x}: an mbarrier is {MBARRIER_BYTES}-byte aligned")
        self.cta.shared.offset(addr, MBARRIER_BYTES, "mbarrier.init")
        if not 1 <= count <= MBARRIER_MAX_COUNT:
            raise MbarrierError(f"mbarrier.init at 0x{addr:x} with count {count}: must be 1..{MBARRIER_MAX_COUNT}")
        self.table[addr] = Mbarrier(addr, count, count, init_warp=warp, visible=None if warp is None else {warp})

    def arrive(self, addr: int, count: int = 1, tx: int = 0, warp: int | None = None, knows: dict | None = None) -> int:
        # 9.7.13.15 "mbarrier.expect_tx" (tx-count += tx) then "mbarrier.arrive" (pending -= count);
        # returns the state token (the phase the arrival counted towards). `knows`: what the arriving thread knows
        # happened before (order.py), handed to the threads that wait for this phase.
        cta = self.cta
        bar = self.get(addr, warp)
        state = bar.phase
        bar.tx += tx
        bar.pending -= count
        if bar.pending < 0:
            raise MbarrierError(f"mbarrier at 0x{addr:x} (byte {addr - cta.base} of dynamic smem) got more arrivals than its count "
                                f"{bar.count} in phase {bar.phase}: the init count or the number of arriving "
                                "threads is wrong")
        if knows:
            bar.hb_open = dict(knows) if bar.hb_open is None else _merged(bar.hb_open, knows)
        bar.maybe_complete()
        if bar.phase != state and addr in cta.launch.releases:
            self._check_release(addr, bar.phase - 1)
        return state

    def _check_release(self, addr: int, phase: int) -> None:
        """The plan says barrier `addr` hands a ring stage back to its producer: when one of its phases completes,
        every byte a TMA copy loaded into the stage must have been read (by an MMA or ld.shared)."""
        sm = self.cta.shared
        for lo, hi in self.cta.launch.releases[addr]:
            # bytes of this fill or an earlier one (a later fill's bytes, multicast by a CTA that is ahead, are not
            # this release's)
            unread = np.flatnonzero(sm.unread[lo:hi] & (sm.writer_fill[lo:hi] <= phase))
            if unread.size:
                byte = lo + int(unread[0])
                raise SmemRaceError(f"mbarrier 0x{addr:x} completes phase {phase}, handing smem 0x{sm.base + lo:x}.."
                                    f"0x{sm.base + hi - 1:x} back to its producer, while {unread.size} of its bytes "
                                    f"(from {sm.copy_names[sm.writer[byte]]}) were never read by an MMA or "
                                    "ld.shared: a stage is released before its consumers used it (check which stage "
                                    "the consumers free, and when)")

    def complete_tx(self, addr: int, nbytes: int) -> None:
        # 9.7.13.15 "mbarrier.complete_tx", as performed by a TMA copy landing: tx-count -= bytes
        bar = self.get(addr)
        bar.tx -= nbytes
        bar.maybe_complete()


def _merged(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        if out.get(k, 0) < v:
            out[k] = v
    return out
