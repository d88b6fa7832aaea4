"""A thread-block cluster (PTX ISA "Cluster of cooperative thread arrays"): the scheduler that runs its CTAs, the
shared::cluster address space, and barrier.cluster.

- The cluster owns one scheduler (step counter, seeded RNG, async events, `run`) interleaving the warps and async
  completions of all its CTAs: uniformly ("random"), in turn ("round_robin"), or by seeded warp priorities
  ("priority": one warp races ahead). Warps are generators that yield at blocking points (`Wait`) or to let others
  run (None). A launch without clusters runs each CTA as a cluster of one.
- Shared-memory address spaces (PTX ISA "State spaces": shared::cta within shared::cluster): a CTA's shared::cta
  window is [smem_base, smem_base + smem_bytes) in every CTA; in shared::cluster, CTA rank r's window is the same
  range plus `DSMEM_BASE + r * DSMEM_RANK_STRIDE`, and a CTA's own shared::cta addresses are valid shared::cluster
  addresses of itself. The rank windows are made distinct on purpose, so an address used in the wrong space, or in
  the wrong CTA, lands outside every window and is reported.
- barrier.cluster arrive / wait phases (exited threads no longer count); the phase publishes fenced mbarrier inits
  and what its arrivals knew happened before (order.py). Memory ordering (.release/.acquire/.relaxed) is not
  modelled otherwise: every access is visible at once.
"""
from __future__ import annotations

import random

import numpy as np

from . import order
from .core import WARP, AsyncOp, OpInfo, Warp, lane_list
from .errors import BarrierError, DeadlockError, EmulationError, MbarrierError, OutOfBoundsError
from .mbarrier import MBARRIER_BYTES

PRIORITY_DEMOTE = 32                   # order "priority": the chance 1/32 that the warp that ran drops to the lowest
DSMEM_BASE = 1 << 28                   # shared::cluster window of CTA rank r: DSMEM_BASE + r * DSMEM_RANK_STRIDE
DSMEM_RANK_STRIDE = 1 << 24            #   + its shared::cta address (low 24 bits kept, so swizzle bits agree)
MAX_CLUSTER_CTAS = 16                  # PTX ISA "Cluster of cooperative thread arrays": 8 portable, 16 non-portable


class Cluster:
    """The CTAs of one thread-block cluster, run together (PTX ISA "Cluster of cooperative thread arrays").

    It owns what the CTAs share: one scheduler (step counter, seeded RNG, async events, `run`) interleaving
    all their warps and async completions, the shared::cluster address space (`resolve`, `mapa`) and
    barrier.cluster. CTA ranks are %cluster_ctarank = x + nx * (y + ny * z) over the CTA's position in the
    cluster (%cluster_ctaid)."""

    def __init__(self, launch, cluster_id: tuple[int, int, int], shape: tuple[int, int, int], rng: random.Random,
                 delay: int, order: str):
        self.launch, self.id, self.shape = launch, tuple(cluster_id), tuple(shape)
        self.rng, self.delay, self.order = rng, delay, order
        self.size = shape[0] * shape[1] * shape[2]
        self.ctas: list = [None] * self.size                   # by rank
        self.events: list[AsyncOp] = []
        self.step = 0
        self.warps: list[Warp] = []
        # barrier.cluster (PTX ISA "Parallel synchronization and communication instructions: barrier.cluster"):
        # the current phase, the threads that arrived in it, the non-exited threads, and per warp the phase each
        # lane's arrival counted towards (-1: no arrival waiting for its barrier.cluster.wait)
        self.barrier_phase = 0
        self._arrived = 0
        self._live_threads = 0
        self._threads: dict = {}
        self._pending: dict = {}
        self._publish: list = []                # fenced mbarriers whose inits the next barrier.cluster phase publishes
        self._hb_open: dict = {}                # what the current phase's .release arrivals knew (order.py)
        self._hb_done: dict = {}                # phase -> that knowledge, once the phase completed

    def add(self, cta) -> int:
        """Place a CTA by its position in the cluster; returns its rank."""
        x, y, z = (cta.id[i] % self.shape[i] for i in range(3))
        rank = x + self.shape[0] * (y + self.shape[1] * z)
        if self.ctas[rank] is not None:
            raise ValueError(f"CTA {cta.id} and CTA {self.ctas[rank].id} both have rank {rank} in cluster {self.id}")
        self.ctas[rank] = cta
        return rank

    def position(self, cta) -> tuple[int, int, int]:
        """%cluster_ctaid: the CTA's coordinates inside its cluster."""
        return tuple(cta.id[i] % self.shape[i] for i in range(3))

    # ---- scheduler ---------------------------------------------------------------------------------
    def async_op(self, cta, origin: OpInfo, what: str, fire, eligible=None) -> None:
        delay = self.rng.randint(0, self.delay) if self.delay else 0
        self.events.append(AsyncOp(self.step + delay, origin, what, fire, eligible, cta))

    def run(self, warps: list[Warp]) -> None:
        """Run every warp of the cluster's CTAs, and every async operation they start, to completion."""
        self.warps = warps
        for cta in self.ctas:
            cta.warps = [w for w in warps if w.cta is cta]
            cta.live_warps = len(cta.warps)
        self._threads = {w: int(w.mask.sum()) for w in warps}
        self._live_threads = sum(self._threads.values())
        live = [w for w in warps]
        events = self.events
        turn = 0
        # "priority" (after PCT, Burckhardt et al., ASPLOS 2010): each warp gets a random priority and the
        # highest-priority runnable warp runs, so one warp (group) races ahead of its partners as far as the
        # barriers let it; after a step, the warp that ran drops below all others with chance 1/DEMOTE. An async
        # operation (TMA copy or store, wgmma) lands only when no warp can run: as late as any hardware could
        # land it, so a buffer rewritten before its copy finished reading it shows.
        prio = {w: self.rng.random() for w in warps} if self.order == "priority" else None
        while live or events:
            self.step += 1
            runnable = [w for w in live if w.wait is None or w.wait.ready()]
            ready = [e for e in events if e.ready_step <= self.step and e.can_fire()]
            if not runnable and not ready:
                later = [e for e in events if e.can_fire()]
                if later:
                    self.step = min(e.ready_step for e in later)
                    continue
                raise self._deadlock(live)
            n = len(runnable) + len(ready)
            if self.order == "random":
                pick = self.rng.randrange(n)
            elif prio is not None:
                pick = (max(range(len(runnable)), key=lambda i: prio[runnable[i]]) if runnable else
                        self.rng.randrange(len(ready)))
                if pick < len(runnable) and self.rng.randrange(PRIORITY_DEMOTE) == 0:
                    prio[runnable[pick]] = min(prio.values()) - 1.0
            else:
                pick = turn % n
                turn += 1
            if pick >= len(runnable):
                ev = ready[pick - len(runnable)]
                events.remove(ev)
                try:
                    ev.fire()
                except EmulationError as e:
                    raise e.locate(ev.cta.id if ev.cta is not None else None, None, f"{ev.origin.text} ({ev.what})")
                continue
            warp = runnable[pick]
            warp.wait = None
            try:
                warp.wait = next(warp.gen)
            except StopIteration:
                warp.exited = True
                live.remove(warp)
                warp.cta.warp_exited(warp)
                self._barrier_exit(warp)
        self.launch.stats["steps"] += self.step

    def _deadlock(self, live: list[Warp]) -> EmulationError:
        for w in live:                  # a wait that names its own root cause (setmaxnreg beyond the register file)
            if w.wait is not None and w.wait.error is not None:
                return w.wait.error().locate(w.cta.id, w.index, w.last_op.text if w.last_op else None)
        one = self.size == 1

        def who(w: Warp) -> str:
            return f"warp {w.index}" if one else f"CTA {w.cta.id} warp {w.index}"
        lines = [f"{who(w)}: {w.last_op.text if w.last_op else '?'} waits for {w.wait.what}" for w in live]
        stuck = [f"{e.what} (waits for an earlier group)" for e in self.events]
        detail = "; ".join(lines + stuck)
        if one:
            return DeadlockError(f"deadlock: every live warp is blocked and nothing is in flight. {detail}").locate(
                self.ctas[0].id)
        ids = ", ".join(str(c.id) for c in self.ctas)
        return DeadlockError(f"deadlock in cluster {self.id} (CTAs {ids}): every live warp of the cluster is blocked "
                             f"and nothing is in flight. {detail}")

    # ---- shared::cluster addresses (PTX ISA "Distributed shared memory", "State spaces") ----------------
    def windows(self) -> str:
        c = self.ctas[0]
        return (f"shared::cta 0x{c.base:x}..0x{c.base + c.size - 1:x}; shared::cluster rank r at "
                f"0x{DSMEM_BASE:x} + r * 0x{DSMEM_RANK_STRIDE:x} + that, ranks 0..{self.size - 1}")

    def cta_part(self, cta, addr: int, what: str) -> int:
        """The CTA-relative (shared::cta) address of a shared::cta or shared::cluster address."""
        if addr < DSMEM_RANK_STRIDE:
            return addr
        rank, local = divmod(addr - DSMEM_BASE, DSMEM_RANK_STRIDE)
        if addr < DSMEM_BASE or rank >= self.size:
            raise OutOfBoundsError(f"{what}: 0x{addr:x} is in no CTA's shared memory window ({self.windows()})")
        return local

    def check_alive(self, cta, target, what: str) -> None:
        if target is not cta and target.exited:
            raise OutOfBoundsError(f"{what} reaches CTA {target.id} (rank {target.rank}), which has exited: its shared "
                                   "memory is gone; end the kernel with barrier.cluster arrive/wait so that no CTA "
                                   "exits while the others may still access its shared memory")

    def resolve(self, cta, addr: int, nbytes: int, what: str) -> tuple:
        """The CTA and its shared::cta address that shared::cluster address `addr`, used by `cta`, names. A CTA's own
        shared::cta addresses are valid shared::cluster addresses of itself."""
        if addr < DSMEM_RANK_STRIDE:
            target, local = cta, addr
        else:
            rank, local = divmod(addr - DSMEM_BASE, DSMEM_RANK_STRIDE)
            if addr < DSMEM_BASE or rank >= self.size:
                raise OutOfBoundsError(f"{what} at shared::cluster 0x{addr:x}: no CTA's window holds it "
                                       f"({self.windows()}); shared::cluster addresses come from mapa, or are the "
                                       "CTA's own shared::cta addresses")
            target = self.ctas[rank]
        off = local - target.base
        if off < 0 or off + nbytes > target.size:
            where = (f"smem 0x{local:x}..0x{local + nbytes - 1:x}" if target is cta and addr == local else
                     f"shared::cluster 0x{addr:x}..0x{addr + nbytes - 1:x} = smem 0x{local:x}..0x{local + nbytes - 1:x} "
                     f"of CTA {target.id} (rank {target.rank})")
            raise OutOfBoundsError(f"{what} touches {where}, outside the CTA's {target.size} B of dynamic smem "
                                   f"({self.windows()}): check the offset given to mapa")
        self.check_alive(cta, target, f"{what} at shared::cluster 0x{addr:x}")
        return target, local

    def resolve_lanes(self, cta, addr: np.ndarray, nbytes: int, what: str, cluster_space: bool):
        """[(CTA, lane indices into addr, smem offsets)] for per-lane addresses (int64) of one access."""
        own = addr < DSMEM_RANK_STRIDE
        if own.all():
            offs = addr - cta.base
            bad = (offs < 0) | (offs + nbytes > cta.size)
            if bad.any():
                self.resolve(cta, int(addr[np.argmax(bad)]), nbytes, what)
            return [(cta, slice(None), offs)]
        if not cluster_space:
            a = int(addr[np.argmax(~own)])
            raise OutOfBoundsError(f"{what} at 0x{a:x} through a shared::cta pointer (!llvm.ptr<3>), which is not in "
                                   f"this CTA's shared::cta window ({self.windows()}): an address from mapa is a "
                                   "shared::cluster address; access it through !llvm.ptr<7>")
        rel = addr - DSMEM_BASE
        ranks = np.where(own, cta.rank, rel // DSMEM_RANK_STRIDE)
        local = np.where(own, addr, rel % DSMEM_RANK_STRIDE)
        invalid = ~own & ((addr < DSMEM_BASE) | (ranks >= self.size))
        if invalid.any():
            self.resolve(cta, int(addr[np.argmax(invalid)]), nbytes, what)
        out = []
        for r in np.unique(ranks):
            idx = np.flatnonzero(ranks == r)
            target = self.ctas[int(r)]
            offs = local[idx] - target.base
            bad = (offs < 0) | (offs + nbytes > target.size)
            if bad.any() or (target is not cta and target.exited):
                self.resolve(cta, int(addr[idx[np.argmax(bad)]]), nbytes, what)
            out.append((target, idx, offs))
        return out

    def mapa(self, cta, addr: int, rank: int) -> int:
        """PTX ISA "Parallel synchronization and communication instructions: mapa" (.shared::cluster): the
        shared::cluster address, in CTA `rank`, of the variable at shared memory address `addr` of this CTA."""
        if not 0 <= rank < self.size:
            raise OutOfBoundsError(f"mapa of smem 0x{addr:x} to CTA rank {rank}: the cluster {self.shape} has CTA "
                                   f"ranks 0..{self.size - 1} (%cluster_nctarank = {self.size})")
        return DSMEM_BASE + rank * DSMEM_RANK_STRIDE + self.cta_part(cta, addr, f"mapa to CTA rank {rank}")

    def remote_mbarrier(self, cta, addr: int, what: str) -> tuple:
        """The CTA and the shared::cta address of the mbarrier at shared::cluster address `addr`."""
        target, local = self.resolve(cta, addr, MBARRIER_BYTES, what)
        if local not in target.mbar.table:
            raise MbarrierError(f"{what} on shared::cluster 0x{addr:x}, smem 0x{local:x} (byte {local - target.base} "
                                f"of dynamic smem) of CTA {target.id} (rank {target.rank}): no mbarrier is initialised "
                                "there; init it in that CTA, then fence.mbarrier_init.release.cluster and "
                                "barrier.cluster arrive/wait before other CTAs signal it")
        return target, local

    # ---- barrier.cluster: PTX ISA "Parallel synchronization and communication instructions: barrier.cluster" ----
    # The barrier completes once every non-exited thread of the cluster arrived; it then starts its next phase at
    # once. A thread arrives once per phase, and its wait returns once the phase it arrived in completed. Threads
    # that exit no longer count (a wait held up only by exited threads is released). .release/.acquire/.relaxed
    # order memory, which the emulator models only for TMEM accesses (order.py): a .relaxed arrival hands its
    # waiters nothing; otherwise arrive and arrive.relaxed are the same here.
    def barrier_arrive(self, warp: Warp, release: bool = True) -> None:
        """barrier.cluster.arrive by the warp's active lanes; `release` (the default semantics, not .relaxed): what
        the warp knows happened before is handed to the phase's waiters (order.py)."""
        pend = self._pending.get(warp)
        if pend is None:
            pend = self._pending[warp] = np.full(WARP, -1, np.int64)
        lanes = warp.mask
        again = lanes & (pend >= 0)
        if again.any():
            raise BarrierError(f"barrier.cluster.arrive by lanes {lane_list(again)}, which arrived in "
                               f"phase {int(pend[again].max())} and have not waited (barrier.cluster.wait) since: "
                               "each thread arrives once per phase")
        pend[lanes] = self.barrier_phase
        self._arrived += int(lanes.sum())
        if release:
            order.merge(self._hb_open, warp.knows)
        # fence.mbarrier_init.release.cluster, then this barrier: the arriving warp's inits become visible to
        # every thread of the cluster when the phase completes
        self._publish += warp.cta.mbar.fenced_by(warp.index)
        self._release_barrier()

    def barrier_wait_target(self, warp: Warp) -> int:
        """The phase warp's active lanes wait to complete (their arrival's)."""
        pend = self._pending.get(warp)
        lanes = warp.mask
        missing = lanes if pend is None else lanes & (pend < 0)
        if missing.any():
            raise BarrierError(f"barrier.cluster.wait by lanes {lane_list(missing)}, which did not "
                               "barrier.cluster.arrive since their last wait: arrive first, then wait")
        return int(pend[lanes].max())

    def barrier_waited(self, warp: Warp, phase: int | None = None) -> None:
        self._pending[warp][warp.mask] = -1
        if phase is not None:
            order.merge(warp.knows, self._hb_done.get(phase))

    def launch_lanes(self, warp: Warp) -> np.ndarray:
        """The lanes of the warp that are threads of the launch (the last warp may be partial)."""
        return np.arange(WARP) < self._threads.get(warp, WARP)

    def barrier_state(self, phase: int) -> str:
        if self.barrier_phase > phase:
            return f"barrier.cluster phase {phase} (complete)"
        late = []
        for w in self.warps:
            if w.exited:
                continue
            pend = self._pending.get(w)
            alive = self.launch_lanes(w)
            missing = alive if pend is None else alive & (pend != self.barrier_phase)
            if missing.any():
                late.append(f"CTA {w.cta.id} warp {w.index}")
        return (f"barrier.cluster phase {phase}: {self._arrived} of {self._live_threads} non-exited threads of the "
                f"cluster arrived; not arrived: {', '.join(late) or 'none'}")

    def _release_barrier(self) -> None:
        if self._arrived and self._arrived >= self._live_threads:
            if self._hb_open:
                self._hb_done[self.barrier_phase] = self._hb_open
                self._hb_open = {}
            self.barrier_phase += 1
            self._arrived = 0
            for bar in self._publish:
                bar.visible = None            # visible to every warp
            self._publish = []

    def _barrier_exit(self, warp: Warp) -> None:
        self._live_threads -= self._threads.get(warp, 0)
        pend = self._pending.pop(warp, None)
        if pend is not None:
            self._arrived -= int((pend == self.barrier_phase).sum())
        self._release_barrier()
