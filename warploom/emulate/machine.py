"""The emulated CTA: one object per CTA of a launch, composed of one unit per hardware block.

    shared     smem.py            the bytes of dynamic shared memory, who owns each byte, ld/st.shared
    mbar       mbarrier.py        mbarriers: phases, arrivals, tx-count, init visibility
    tma        tma.py             TMA loads (multicast too) and stores, bulk async-groups
    wgmma      wgmma.py           warpgroups, wgmma issue / commit / wait, accumulators (sm_90a)
    tmem       tcgen05.py         Tensor Memory and the tcgen05 ops (sm_100a; made by the CTA's first tcgen05 op)
    registers  registers.py       setmaxnreg budgets
    named      named_barriers.py  bar.sync / bar.arrive / bar.red.or
and, per warp, the tcgen05 fences (tmem_fence.py) and happens-before (order.py). Its `Cluster` (cluster.py) runs it:
the scheduler, shared::cluster and barrier.cluster. The op handlers (ops_*.py, tcgen05.py, regwgmma.py) call the
units; the CTA itself keeps what they share: the launch window (`base`, `size`), the warps, the trace, the async
events (through its cluster) and what happens when a warp exits.

Names that other modules imported from here before the units were split out are re-exported below.
"""
from __future__ import annotations

import random

from .cluster import (DSMEM_BASE, DSMEM_RANK_STRIDE, MAX_CLUSTER_CTAS, PRIORITY_DEMOTE, Cluster)  # noqa: F401
from .core import (NUMPY_ELEMS, WARP, WARPGROUP_WARPS, AsyncOp, LazyText, OpInfo, Pending,  # noqa: F401
                   PendingPart, Wait, Warp, describe_lanes, lane_list)
from .gmem import GlobalMemory  # noqa: F401
from .mbarrier import MBARRIER_BYTES, MBARRIER_MAX_COUNT, Mbarrier, Mbarriers  # noqa: F401
from .named_barriers import NamedBarriers
from .registers import RegisterBudgets
from .smem import SMEM_BASE, SharedMemory  # noqa: F401
from .tma import TMA_SMEM_ALIGN, TmaUnit  # noqa: F401
from .wgmma import WgmmaUnit


class CTA:
    """One CTA of a launch: its units (see the module docstring) and warps. Its cluster runs it (`cluster.run`, or
    `run` for a CTA made alone, which is a cluster of one)."""

    def __init__(self, launch, cta_id: tuple[int, int, int], rng: random.Random, delay: int, order: str,
                 cluster: Cluster | None = None):
        self.launch, self.id, self.rng, self.delay, self.order = launch, cta_id, rng, delay, order
        self.base = launch.smem_base
        self.size = launch.smem_bytes
        self.shared = SharedMemory(self, self.base, self.size)
        self.mbar = Mbarriers(self)
        self.tma = TmaUnit(self)
        self.wgmma = WgmmaUnit(self)
        self.registers = RegisterBudgets(self)
        self.named = NamedBarriers(self)
        self.tmem = None                                      # tcgen05.TensorMemory, made by the CTA's first tcgen05 op
        self.warps: list[Warp] = []
        self.stats = launch.stats
        self.live_warps = 0                                   # warps not exited yet (0 after the CTA exited)
        if cluster is None:
            cluster = Cluster(launch, cta_id, (1, 1, 1), rng, delay, order)
        self.cluster = cluster
        self.rank = cluster.add(self)                         # %cluster_ctarank
        self.trace: list | None = None        # when a list: (step, warp, kind, text) records (warploom emulate --timeline)

    def note(self, warp: int, kind: str, text: str) -> int:
        """Append a trace record (callers check `trace is not None` first); returns its index for `note_passed`."""
        self.trace.append((self.step, warp, kind, text))
        return len(self.trace) - 1

    def note_passed(self, i: int) -> None:
        """A traced wait (record i) has passed: say at which scheduler step."""
        step, warp, kind, text = self.trace[i]
        self.trace[i] = (step, warp, kind, f"{text}  passed " + ("at once" if step == self.step else f"at step {self.step}"))

    # the scheduler's state is the cluster's: one step counter and one event list for all its CTAs
    @property
    def step(self) -> int:
        return self.cluster.step

    @property
    def events(self) -> list[AsyncOp]:
        return self.cluster.events

    @property
    def exited(self) -> bool:
        """Every warp of the CTA has exited (its shared memory is gone for the other CTAs of the cluster)."""
        return bool(self.warps) and self.live_warps == 0

    # ---- a warp exits ----------------------------------------------------------------------------------
    def check_warp_exit(self, warp: Warp) -> None:
        """What a warp may not leave behind: allocated TMEM, uncommitted or unwaited tcgen05 / wgmma work."""
        if self.tmem is not None:
            self.tmem.check_warp_exit(warp)
        self.wgmma.check_warp_exit(warp)

    def warp_exited(self, warp: Warp) -> None:
        """The scheduler saw `warp` finish: its own checks, then the named barriers it no longer holds up, then (the
        CTA's last warp) the CTA's exit checks."""
        self.live_warps -= 1
        self.check_warp_exit(warp)
        self.named.release()
        if self.live_warps == 0:
            self.named.check_at_exit()
            self.tma.check_at_exit()

    # ---- scheduler --------------------------------------------------------------------------------
    def _async(self, origin: OpInfo, what: str, fire, eligible=None) -> None:
        self.cluster.async_op(self, origin, what, fire, eligible)

    def run(self, warps: list[Warp]) -> None:
        """Run this CTA's warps to completion (its cluster's run loop; a CTA made alone is a cluster of one)."""
        self.cluster.run(warps)

    def _deadlock(self, live: list[Warp]):
        return self.cluster._deadlock(live)
