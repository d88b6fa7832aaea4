"""The emulated machine one CTA runs on: shared memory bytes, mbarriers, TMA copies, wgmma groups, warps, scheduler.

Everything here is the hardware's state and semantics; `compiler.py` turns ops into calls on it.

- Shared memory is one uint8 array of the launch's dynamic smem size at window address `smem_base`
  (by default 16-aligned but not 1024-aligned, so the kernel's run-time round-up is exercised),
  filled with 0xFF first (NaN as bf16/f16); a wgmma reading bytes no TMA copy wrote is an error.
- mbarriers are kept by smem address (PTX ISA 9.7.13.15 "mbarrier": phase, pending arrivals, tx-count).
- A TMA load (PTX ISA 9.7.9.25 cp.async.bulk.tensor, tile mode) reads its box from the global numpy
  array at issue, and lands after a scheduler-chosen delay: the bytes are written at the swizzled
  *absolute* smem addresses, then complete_tx on its mbarrier.
- A wgmma (PTX ISA 9.7.15) is warpgroup-collective: the i-th mma_async of each of the 4 warps forms one
  MMA, issued when the last warp reaches it (its smem operand bytes are then owned until a
  wait_group retires the group); a group completes after a scheduler-chosen delay, computing every
  MMA of the group, and a warp's accumulator registers become readable at its wait_group.
- Tensor Memory and the tcgen05 ops (sm_100a) live in tcgen05.py: `CTA.tmem` is made by the CTA's
  first tcgen05 op; a tcgen05.mma holds its smem operand bytes in `mma_reading` like a wgmma does.
- A wgmma may take A from registers (the register-A inline asm, regwgmma.py): the four warps' b32
  registers are placed by layout.fragments.wgmma_a_k16 when the group completes.
- Checks beyond races: a wgmma needs a wgmma.fence after its warp touched accumulator / A-fragment
  registers (Warp.unfenced, set by the ops regwgmma.register_accesses finds); an mbarrier init is
  visible to other warps only after the initialising warp's fence.mbarrier_init and a bar.sync both
  take part in, and to TMA's complete_tx only after that fence; setmaxnreg moves registers between
  warps within what the CTA got at launch (an .inc blocks until the pool has them; never granted ->
  RegisterBudgetError at the deadlock).
- Warps are generators that yield at blocking points (`Wait`) or to let others run (None); the
  scheduler picks among runnable warps and landable async operations with a seeded RNG: uniformly
  ("random"), in turn ("round_robin"), or by seeded warp priorities ("priority": one warp races ahead).
- A thread-block cluster (PTX ISA "Cluster of cooperative thread arrays") is a `Cluster`: it owns the
  scheduler (step counter, RNG, async events, the run loop) and barrier.cluster, and interleaves the warps
  and async completions of all its CTAs; each CTA keeps its own smem, mbarriers, warpgroups and bar.sync
  state. A launch without clusters runs each CTA as a cluster of one.
- Shared-memory address spaces (PTX ISA "State spaces": shared::cta within shared::cluster): a CTA's
  shared::cta window is [smem_base, smem_base + smem_bytes) in every CTA; in shared::cluster, CTA rank r's
  window is the same range plus `DSMEM_BASE + r * DSMEM_RANK_STRIDE`, and a CTA's own shared::cta addresses
  are valid shared::cluster addresses of itself. The rank windows are made distinct on purpose, so an
  address used in the wrong space, or in the wrong CTA, lands outside every window and is reported.
  Memory ordering (fences, .release/.acquire/.relaxed) is not modelled: every access is visible at once.
- Global memory (`GlobalMemory`) is the launch's numpy arrays: ld/st and atom.add (stream-K's workspace and
  counters) go through it, bounds and alignment checked; CTAs (clusters) run one after another.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from warploom.layout import WgmmaSmemDescriptor, canonical_element_address, swizzle
from warploom.layout.fragments import wgmma_a_k16, wgmma_accumulator

from .errors import (TmemFenceError, AsyncLeakError, BarrierError, DeadlockError, DivergenceError, EmulationError,
                     MbarrierError, OutOfBoundsError, RegisterBudgetError, SmemRaceError, UnknownOpError,
                     WgmmaFenceError)
from .tensorcore import mma_f32

WARP = 32
WARPGROUP_WARPS = 4
SMEM_BASE = 0x210                      # 16-B aligned, deliberately not 1024-B aligned
MBARRIER_BYTES = 8
PRIORITY_DEMOTE = 32                   # order "priority": the chance 1/32 that the warp that ran drops to the lowest
MBARRIER_MAX_COUNT = (1 << 20) - 1     # PTX ISA 9.7.13.15 "mbarrier": counts and tx-count are 20-bit
TMA_SMEM_ALIGN = 128                   # PTX ISA 9.7.9.25: the cp.async.bulk.tensor smem address is 128-B aligned
NUMPY_ELEMS = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "f32": np.float32}
DSMEM_BASE = 1 << 28                   # shared::cluster window of CTA rank r: DSMEM_BASE + r * DSMEM_RANK_STRIDE
DSMEM_RANK_STRIDE = 1 << 24            #   + its shared::cta address (low 24 bits kept, so swizzle bits agree)
MAX_CLUSTER_CTAS = 16                  # PTX ISA "Cluster of cooperative thread arrays": 8 portable, 16 non-portable


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

    def maybe_complete(self) -> None:
        # "Phase completion of the mbarrier object": pending arrivals and tx-count both reach zero;
        # the phase flips and pending arrivals reset to the expected count.
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def passed(self, parity: int) -> bool:
        # try_wait.parity P succeeds once the phase with parity P completed: the current phase has the other parity
        return (self.phase & 1) != parity


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


@dataclass
class WgmmaSlot:
    """The i-th wgmma.mma_async of a warpgroup: each warp's (descriptors, input accumulator, result)."""
    info: OpInfo
    attrs: dict
    parts: dict = field(default_factory=dict)       # warp in warpgroup -> (desc_a, desc_b, acc_in, Pending)
    reads: np.ndarray | None = None                 # smem offsets of the operand bytes, once issued
    a_addr: np.ndarray | None = None
    b_addr: np.ndarray | None = None
    a_regs: dict = field(default_factory=dict)      # A from registers: warp in warpgroup -> (32, 4) b32 registers


@dataclass
class WgmmaGroup:
    index: int
    slots: tuple                                    # slot indices [lo, hi)
    committed: set = field(default_factory=set)
    done: bool = False
    released: bool = False


@dataclass
class Warpgroup:
    index: int
    slots: list = field(default_factory=list)
    groups: list = field(default_factory=list)
    issued: list = field(default_factory=lambda: [0] * WARPGROUP_WARPS)     # mma_async count per warp
    commits: list = field(default_factory=lambda: [0] * WARPGROUP_WARPS)    # commit_group count per warp
    committed_to: list = field(default_factory=lambda: [0] * WARPGROUP_WARPS)


class Warp:
    """One warp's state: its SSA values (`env`, slots assigned by the compiler), active lanes, blocking state."""
    __slots__ = ("cta", "index", "env", "mask", "tid", "wait", "gen", "exited", "last_op", "unfenced",
                 "tc_unpublished", "tc_unordered", "tc_touched")

    def __init__(self, cta: CTA, index: int, nslots: int, threads: int):
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


class GlobalMemory:
    """Global memory: the launch's numpy arrays at made-up, widely spaced device addresses."""
    SPACING = 1 << 36

    def __init__(self):
        self.regions: list[tuple[str, int, np.ndarray]] = []

    def add(self, name: str, array: np.ndarray) -> int:
        if not array.flags.c_contiguous:
            raise ValueError(f"global array {name!r} must be C-contiguous (np.ascontiguousarray) to be addressed")
        base = self.SPACING * (len(self.regions) + 1)
        self.regions.append((name, base, array.reshape(-1).view(np.uint8)))
        return base

    def _places(self, addr: np.ndarray, mask: np.ndarray, nbytes: int, align: int, what: str):
        """(lanes, their array, their byte offsets in it (lanes x nbytes)) per array the active lanes' accesses of
        nbytes at addr[lane] fall in; OutOfBoundsError for a misaligned access or one outside every array."""
        lanes = np.flatnonzero(mask)
        bad = lanes[addr[lanes] % max(align, 1) != 0]
        if bad.size:
            raise OutOfBoundsError(f"{what} of {nbytes} B at 0x{int(addr[bad[0]]):x} (lane {bad[0]}) is not "
                                   f"{align}-byte aligned as its alignment attribute promises; fix the address "
                                   "arithmetic or the alignment attribute")
        places, left = [], lanes
        for name, base, buf in self.regions:
            inside = (addr[left] >= base) & (addr[left] + nbytes <= base + buf.size)
            hit = left[inside]
            if hit.size:
                places.append((hit, buf, (addr[hit] - base).astype(np.int64)[:, None] + np.arange(nbytes)))
            left = left[~inside]
        if left.size:
            a = int(addr[left[0]])
            near = min(self.regions, key=lambda r: abs(a - r[1]))
            raise OutOfBoundsError(f"{what} of {nbytes} B at 0x{a:x} (lane {left[0]}) is outside every array; "
                                   f"nearest is {near[0]!r} at 0x{near[1]:x}..0x{near[1] + near[2].size:x} "
                                   f"(offset {a - near[1]}): check the row/column bounds of the access")
        return places

    def store(self, addr: np.ndarray, data: np.ndarray, mask: np.ndarray, align: int) -> None:
        """Write data[lane] (uint8 rows) at addr[lane] for the active lanes."""
        for hit, buf, offs in self._places(addr, mask, data.shape[1], align, "global store"):
            buf[offs] = data[hit]

    def load(self, addr: np.ndarray, mask: np.ndarray, nbytes: int, align: int) -> np.ndarray:
        """(32, nbytes) uint8: the bytes at addr[lane] for the active lanes (zeros for the others)."""
        out = np.zeros((len(addr), nbytes), np.uint8)
        for hit, buf, offs in self._places(addr, mask, nbytes, align, "global load"):
            out[hit] = buf[offs]
        return out

    def atomic_add(self, addr: np.ndarray, value: np.ndarray, mask: np.ndarray, nbytes: int) -> np.ndarray:
        """atom.add of value[lane] at addr[lane], lane by lane in lane order (one at a time, as atomics are); the old
        values (unsigned, as uint64)."""
        old = np.zeros(len(addr), np.uint64)
        dt = np.dtype(f"u{nbytes}")
        for lane in np.flatnonzero(mask):
            one = np.zeros(len(addr), bool)
            one[lane] = True
            was = self.load(addr, one, nbytes, nbytes)[lane].view(dt)[0]
            old[lane] = int(was)
            new = np.array([(int(was) + int(value[lane])) & ((1 << (8 * nbytes)) - 1)], dt).view(np.uint8)
            data = np.zeros((len(addr), nbytes), np.uint8)
            data[lane] = new
            self.store(addr, data, one, nbytes)
        return old


class CTA:
    """One CTA of a launch: its smem, mbarriers, async units and warps. Its cluster runs it (`cluster.run`, or
    `run` for a CTA made alone, which is a cluster of one)."""

    def __init__(self, launch, cta_id: tuple[int, int, int], rng: random.Random, delay: int, order: str,
                 cluster: Cluster | None = None):
        self.launch, self.id, self.rng, self.delay, self.order = launch, cta_id, rng, delay, order
        self.base = launch.smem_base
        self.size = launch.smem_bytes
        self.smem = np.full(self.size, 0xFF, np.uint8)
        self.tma_pending = np.zeros(self.size, np.int16)     # in-flight TMA copies writing each byte
        self.written = np.zeros(self.size, bool)              # bytes some TMA copy has landed in
        self.mma_reading = np.zeros(self.size, np.int16)     # unretired wgmma / unreleased tcgen05.mma operand bytes
        self.unread = np.zeros(self.size, bool)               # bytes a TMA copy wrote (or will) that no MMA read yet
        # TMA stores (9.7.9.25 cp.async.bulk.tensor.global.shared::cta): bytes they still have to read; bytes the
        # generic proxy (st.shared) wrote with no fence.proxy.async by the writing warp since (-1: fenced or never),
        # so that an async-proxy read of them is caught; each thread's bulk async-groups (9.7.9.27)
        self.bulk_reading = np.zeros(self.size, np.int16)
        self.unfenced = np.full(self.size, -1, np.int16)
        self.bulk_open: dict = {}          # (warp, lane) -> TMA stores issued since the last commit_group
        self.bulk_groups: dict = {}        # (warp, lane) -> committed groups (lists of stores), oldest first
        self.writer = np.full(self.size, -1, np.int32)        # which copy (index into copy_names) wrote each byte
        self.writer_fill = np.full(self.size, -1, np.int64)   # the phase of that copy's mbarrier when it was issued
        self.copy_names: list[str] = []
        self.tmem = None                                      # tcgen05.TensorMemory, made by the CTA's first tcgen05 op
        self.mbarriers: dict[int, Mbarrier] = {}
        self.copies: list[tuple[int, int, str]] = []          # in-flight TMA loads: smem offsets [lo, hi), what
        self.warpgroups: dict[int, Warpgroup] = {}
        self.bars: dict[int, list] = {}                       # bar.sync id -> [arrived threads, generation, ...]
        self.bar_or: dict = {}                                # (bar id, generation) -> bar.red.or's result
        self.regs: dict[int, int] = {}                        # warp -> setmaxnreg budget (absent: the launch's)
        self.reg_calls: dict[int, int] = {}                   # warp -> setmaxnreg instructions run
        self.reg_log: dict[int, list] = {}                    # warpgroup -> [(count, inc)] in order
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

    # ---- shared memory -----------------------------------------------------------------------
    def smem_offset(self, addr: int, nbytes: int, what: str) -> int:
        off = addr - self.base
        if off < 0 or off + nbytes > self.size:
            raise OutOfBoundsError(f"{what} touches smem 0x{addr:x}..0x{addr + nbytes - 1:x}; the launch's dynamic "
                                   f"smem is 0x{self.base:x}..0x{self.base + self.size - 1:x} ({self.size} B): "
                                   "the plan's offsets exceed smem_bytes, or the base was not rounded up")
        return off

    # ---- generic-proxy ld/st.shared::{cta,cluster} (PTX ISA "Data movement and conversion instructions: ld, st") --
    def smem_store(self, addr: np.ndarray, data: np.ndarray, mask: np.ndarray, align: int, cluster_space: bool,
                   what: str, warp: int | None = None) -> None:
        """Write data[lane] (uint8 rows) at addr[lane] (shared::cta, or shared::cluster when cluster_space) for the
        active lanes. Bytes an in-flight TMA copy writes, an unretired wgmma reads, or a TMA store has still to
        read are a race. The bytes stay unfenced for the async proxy until `warp` runs fence.proxy.async."""
        nbytes = data.shape[1]
        act = np.flatnonzero(mask)
        a = addr[act].astype(np.int64)
        self._check_smem_align(a, act, align, what)
        for t, idx, offs in self.cluster.resolve_lanes(self, a, nbytes, what, cluster_space):
            cells = offs[:, None] + np.arange(nbytes)
            self._check_generic_access(t, cells, what, write=True)
            t.smem[cells] = data[act[idx]]
            t.written[cells] = True
            t.unfenced[cells] = -2 if warp is None else warp

    def smem_load(self, addr: np.ndarray, mask: np.ndarray, nbytes: int, align: int, cluster_space: bool,
                  what: str) -> np.ndarray:
        """The bytes (32, nbytes) at addr[lane] for the active lanes (zeros elsewhere). Reading bytes an in-flight TMA
        copy still writes, or that nothing has written, is an error."""
        out = np.zeros((WARP, nbytes), np.uint8)
        act = np.flatnonzero(mask)
        a = addr[act].astype(np.int64)
        self._check_smem_align(a, act, align, what)
        for t, idx, offs in self.cluster.resolve_lanes(self, a, nbytes, what, cluster_space):
            cells = offs[:, None] + np.arange(nbytes)
            self._check_generic_access(t, cells, what, write=False)
            out[act[idx]] = t.smem[cells]
            t.unread[cells] = False               # loaded data consumed by ld.shared (not only by MMAs)
        return out

    @staticmethod
    def _check_smem_align(a: np.ndarray, act: np.ndarray, align: int, what: str) -> None:
        bad = np.flatnonzero(a % max(align, 1))
        if bad.size:
            raise OutOfBoundsError(f"{what} at 0x{int(a[bad[0]]):x} (lane {act[bad[0]]}) is not {align}-byte aligned: "
                                   "shared memory accesses are aligned to their size")

    def _check_generic_access(self, t: CTA, cells: np.ndarray, what: str, write: bool) -> None:
        where = "" if t is self else f" of CTA {t.id} (rank {t.rank})"
        pending = t.tma_pending[cells]
        if pending.any():
            off = int(cells.reshape(-1)[np.argmax(pending.reshape(-1))])
            raise SmemRaceError(f"{what} {'writes' if write else 'reads'} smem 0x{t.base + off:x}{where}, which an "
                                f"in-flight TMA copy still writes ({t._writer_of(off)}): wait on the copy's mbarrier "
                                "first")
        if write:
            reading = t.mma_reading[cells]
            if reading.any():
                off = int(cells.reshape(-1)[np.argmax(reading.reshape(-1))])
                raise SmemRaceError(f"{what} writes smem 0x{t.base + off:x}{where} while an unretired wgmma group "
                                    f"still reads it ({t._reader_of(off)}): wgmma.wait_group first")
            storing = t.bulk_reading[cells]
            if storing.any():
                off = int(cells.reshape(-1)[np.argmax(storing.reshape(-1))])
                raise SmemRaceError(f"{what} writes smem 0x{t.base + off:x}{where} while a TMA store still reads it: "
                                    "the thread that issued the store must cp.async.bulk.wait_group.read (and a "
                                    "barrier tell the writers) before the buffer is written again")
        else:
            unwritten = ~t.written[cells]
            if unwritten.any():
                off = int(cells.reshape(-1)[np.argmax(unwritten.reshape(-1))])
                raise SmemRaceError(f"{what} reads smem 0x{t.base + off:x}{where} (byte {off} of dynamic smem), which "
                                    "nothing has written yet: a missing barrier (bar.sync, barrier.cluster or an "
                                    "mbarrier wait) between the write and this read")

    # ---- mbarriers: PTX ISA 9.7.13.15 ------------------------------------------------------------
    def mbarrier(self, addr: int, warp: int | None = None) -> Mbarrier:
        """The mbarrier at `addr`, as used by warp `warp` (None: not checked for the init's visibility)."""
        bar = self.mbarriers.get(addr)
        if bar is None:
            if not 0 <= addr - self.base < self.size:
                self.smem_offset(addr, MBARRIER_BYTES, "an mbarrier op (shared::cta)")
            raise MbarrierError(f"mbarrier at smem 0x{addr:x} (byte {addr - self.base} of dynamic smem) is used before "
                                "mbarrier.init: initialise it (one thread, then fence.mbarrier_init and a barrier)")
        if warp is not None and bar.visible is not None and warp not in bar.visible:
            # PTX ISA 9.7.13.15 "mbarrier.init" and "membar/fence" (fence.mbarrier_init): another thread sees
            # the init only after the initialising thread's fence.mbarrier_init and a barrier both take part in
            how = (f"warp {bar.init_warp}'s fence.mbarrier_init ran, but no CTA barrier (bar.sync) since then included "
                   "both warps" if bar.fenced else f"warp {bar.init_warp} never ran fence.mbarrier_init after it")
            raise MbarrierError(f"mbarrier at smem 0x{addr:x} (byte {addr - self.base} of dynamic smem) was "
                                f"initialised by warp {bar.init_warp} and is used by warp {warp} before the init is "
                                "visible to it: "
                                f"{how}; follow mbarrier.init with fence.mbarrier_init and a CTA barrier")
        return bar

    def fence_mbarrier_init(self, warp: int) -> None:
        """fence.mbarrier_init.release.cluster by warp `warp`: its earlier mbarrier.inits become visible to the async
        proxy now, and to other warps at the next barrier they share with it (see `bar_sync`)."""
        for bar in self.mbarriers.values():
            if bar.init_warp == warp:
                bar.fenced = True

    def mbarrier_init(self, addr: int, count: int, warp: int | None = None) -> None:
        # 9.7.13.15 "mbarrier.init": 8-byte aligned object in shared memory; count in 1..2^20-1;
        # phase 0, pending arrivals = count, tx-count 0
        if addr % MBARRIER_BYTES:
            raise OutOfBoundsError(f"mbarrier.init at 0x{addr:x}: an mbarrier is {MBARRIER_BYTES}-byte aligned")
        self.smem_offset(addr, MBARRIER_BYTES, "mbarrier.init")
        if not 1 <= count <= MBARRIER_MAX_COUNT:
            raise MbarrierError(f"mbarrier.init at 0x{addr:x} with count {count}: must be 1..{MBARRIER_MAX_COUNT}")
        self.mbarriers[addr] = Mbarrier(addr, count, count, init_warp=warp, visible=None if warp is None else {warp})

    def mbarrier_arrive(self, addr: int, count: int = 1, tx: int = 0, warp: int | None = None) -> int:
        # 9.7.13.15 "mbarrier.expect_tx" (tx-count += tx) then "mbarrier.arrive" (pending -= count);
        # returns the state token (the phase the arrival counted towards)
        bar = self.mbarrier(addr, warp)
        state = bar.phase
        bar.tx += tx
        bar.pending -= count
        if bar.pending < 0:
            raise MbarrierError(f"mbarrier at 0x{addr:x} (byte {addr - self.base} of dynamic smem) got more arrivals than its count "
                                f"{bar.count} in phase {bar.phase}: the init count or the number of arriving "
                                "threads is wrong")
        bar.maybe_complete()
        if bar.phase != state and addr in self.launch.releases:
            self._check_release(addr, bar.phase - 1)
        return state

    def _check_release(self, addr: int, phase: int) -> None:
        """The plan says barrier `addr` hands a ring stage back to its producer: when one of its phases completes,
        every byte a TMA copy loaded into the stage must have been read (by an MMA or ld.shared)."""
        for lo, hi in self.launch.releases[addr]:
            # bytes of this fill or an earlier one (a later fill's bytes, multicast by a CTA that is ahead, are not
            # this release's)
            unread = np.flatnonzero(self.unread[lo:hi] & (self.writer_fill[lo:hi] <= phase))
            if unread.size:
                byte = lo + int(unread[0])
                raise SmemRaceError(f"mbarrier 0x{addr:x} completes phase {phase}, handing smem 0x{self.base + lo:x}.."
                                    f"0x{self.base + hi - 1:x} back to its producer, while {unread.size} of its bytes "
                                    f"(from {self.copy_names[self.writer[byte]]}) were never read by an MMA or "
                                    "ld.shared: a stage is released before its consumers used it (check which stage "
                                    "the consumers free, and when)")

    def complete_tx(self, addr: int, nbytes: int) -> None:
        # 9.7.13.15 "mbarrier.complete_tx", as performed by a TMA copy landing: tx-count -= bytes
        bar = self.mbarrier(addr)
        bar.tx -= nbytes
        bar.maybe_complete()

    # ---- TMA: PTX ISA 9.7.9.25 cp.async.bulk.tensor (tile mode, global -> shared::cluster) -------------
    def tma_load(self, info: OpInfo, dst: int, tmap_addr: int, mbar: int, coords: list[int],
                 multicast: int | None = None, warp: int | None = None) -> None:
        """Issue a TMA load. dst is a shared::cluster address (this CTA's own shared::cta addresses included),
        mbar a shared::cta address. multicast is the 16-bit ctaMask of .multicast::cluster, or None; warp is the
        issuing warp (the mbarrier's visibility to it; trace records)."""
        tmap = self.launch.tensor_map_at(tmap_addr)
        spec, array = tmap.spec, tmap.array
        if multicast is None and dst < DSMEM_RANK_STRIDE:
            bar = self.mbarrier(mbar, warp)
            if bar.visible is not None and not bar.fenced:
                # the copy's complete_tx is performed by the async proxy, which sees the init only after a
                # fence.mbarrier_init (PTX ISA 9.7.13.15 "mbarrier.init"; 9.7.9.25 cp.async.bulk.tensor)
                raise MbarrierError(f"TMA load of {spec.name!r} signals mbarrier at smem 0x{mbar:x} (byte "
                                    f"{mbar - self.base} of dynamic smem), initialised by warp {bar.init_warp} with no "
                                    "fence.mbarrier_init since: the async proxy's complete_tx may not see the init; "
                                    "fence it (and barrier) first")
        rank = len(spec.box)
        if len(coords) != rank:
            raise UnknownOpError(f"TMA load with {len(coords)} coordinates through tensor map {spec.name!r} of rank "
                                 f"{rank}: give one coordinate per dim, innermost first")
        sw = swizzle(spec.swizzle)
        eb = array.dtype.itemsize
        inner = spec.box[0] * eb
        if sw.swizzled and inner != sw.span_bytes:
            raise UnknownOpError(f"tensor map {spec.name!r}: inner box {inner} B under the {sw} swizzle; only boxes "
                                 "exactly one swizzle span wide are modelled")
        nbytes = int(np.prod(spec.box)) * eb
        if multicast is None:
            if dst < DSMEM_RANK_STRIDE:
                targets = [self]                    # the common case: this CTA's own smem
                local = dst
            else:
                target, local = self.cluster.resolve(self, dst, nbytes, f"TMA load of tensor map {spec.name!r}")
                if target is not self:
                    raise UnknownOpError(f"TMA load of {spec.name!r} into shared::cluster 0x{dst:x}, the smem of CTA "
                                         f"{target.id} (rank {target.rank}), without multicast: the mbarrier operand "
                                         "is this CTA's, so the copy could not signal it; use a multicast mask "
                                         "(.cta_group forms are not modelled)")
                self.mbarrier(mbar)
                targets = [self]
        else:
            # 9.7.9.25 .multicast::cluster: bit r of the 16-bit ctaMask selects the CTA whose %cluster_ctarank is r
            # (MLIR's op documentation says %ctaid); the box lands at dst's CTA-relative offset in each destination
            # CTA, and the complete_tx signal goes to the mbarrier at mbar's CTA-relative offset in each.
            cl = self.cluster
            if not 0 < multicast < (1 << 16) or multicast >> cl.size:
                raise OutOfBoundsError(f"TMA load of {spec.name!r} with multicast mask 0x{multicast:04x}: the cluster "
                                       f"{cl.shape} has CTA ranks 0..{cl.size - 1}, so the mask must be a non-zero "
                                       f"subset of 0x{(1 << cl.size) - 1:x}")
            local = cl.cta_part(self, dst, f"TMA multicast destination of {spec.name!r}")
            targets = [cl.ctas[r] for r in range(cl.size) if multicast >> r & 1]
            for t in targets:
                cl.check_alive(self, t, f"TMA multicast of {spec.name!r} box {coords}")
                if mbar not in t.mbarriers:
                    raise MbarrierError(f"TMA multicast of {spec.name!r} box {coords} signals the mbarrier at smem "
                                        f"0x{mbar:x} (byte {mbar - t.base} of dynamic smem) of CTA {t.id} (rank "
                                        f"{t.rank}), which is not initialised there: every destination CTA inits "
                                        "its barrier, then fence.mbarrier_init.release.cluster and a "
                                        "barrier.cluster arrive/wait before any CTA multicasts")
            self.stats["tma_multicast"] += 1
        if local % TMA_SMEM_ALIGN:
            raise OutOfBoundsError(f"TMA destination smem 0x{local:x} is not {TMA_SMEM_ALIGN}-byte aligned "
                                   "(cp.async.bulk.tensor requires it); align the region")
        data = None
        for t in targets:
            into = "" if multicast is None else f" multicast into CTA {t.id} (rank {t.rank})"
            off = t.smem_offset(local, nbytes, f"TMA load of tensor map {spec.name!r}{into}")
            busy = np.flatnonzero(t.mma_reading[off:off + nbytes])
            reader = t.tmem.smem_reader(off + int(busy[0])) if busy.size and t.tmem is not None else None
            if reader is not None:     # a tcgen05.mma (tcgen05.py) holds the bytes until a commit arrival releases them
                raise SmemRaceError(f"TMA load of {spec.name!r} box {coords}{into} writes smem 0x{local:x}.."
                                    f"0x{local + nbytes - 1:x} while {reader} still reads byte 0x{local + int(busy[0]):x}: "
                                    "wait on the ring's empty barrier before reusing a stage, and arrive on it with "
                                    "tcgen05.commit (which arrives once the MMAs reading the stage completed)")
            if busy.size:
                raise SmemRaceError(f"TMA load of {spec.name!r} box {coords}{into} writes smem 0x{local:x}.."
                                    f"0x{local + nbytes - 1:x} while an unretired wgmma group still reads byte "
                                    f"0x{local + int(busy[0]):x} ({t._reader_of(off + int(busy[0]))}): wait on the "
                                    "ring's empty barrier before reusing a stage, and arrive on it only after "
                                    "wgmma.wait_group retired the reads" + (
                                        " (with multicast: in every destination CTA, so the empty barrier must "
                                        "count the consumers of all of them)" if into else ""))
            inflight = np.flatnonzero(t.tma_pending[off:off + nbytes])
            if inflight.size:
                raise SmemRaceError(f"TMA load of {spec.name!r} box {coords}{into} writes smem 0x{local:x}.."
                                    f"0x{local + nbytes - 1:x} while another in-flight TMA copy still writes byte "
                                    f"0x{local + int(inflight[0]):x} ({t._writer_of(off + int(inflight[0]))}): "
                                    "the stage was reissued before its previous copy landed and was consumed")
            phys = sw.apply(np.arange(local, local + nbytes, dtype=np.int64)) - t.base
            unread = np.flatnonzero(t.unread[phys]) if self.launch.check_unread else ()
            if len(unread):
                byte = int(phys[unread[0]])
                raise SmemRaceError(f"TMA load of {spec.name!r} box {coords}{into} overwrites smem 0x{t.base + byte:x}, "
                                    f"which {t.copy_names[t.writer[byte]]} wrote and no MMA has read yet: the stage "
                                    "was handed back to the producer before its consumer used it (check which stage "
                                    "the consumer frees, and when)")
            if data is None:
                data = self._read_box(array, spec, coords).reshape(-1).view(np.uint8)
            self._tma_into(t, info, spec, coords, data, local, off, nbytes, phys, mbar, into, warp)
        self.stats["tma_loads"] += 1

    def _tma_into(self, t: CTA, info: OpInfo, spec, coords, data, local: int, off: int, nbytes: int, phys,
                  mbar: int, into: str, warp: int | None) -> None:
        """One destination of a TMA load: bytes pending now (at smem offsets `phys`, swizzled), landing later in
        CTA t, then complete_tx there."""
        t.tma_pending[off:off + nbytes] += 1
        what = f"TMA load of {spec.name!r} box {coords} -> smem 0x{local:x}{into} (mbarrier 0x{mbar:x})"
        t.unread[phys] = True
        t.writer[phys] = len(t.copy_names)
        t.copy_names.append(what)
        # the fill of the stage this copy belongs to: the phase its mbarrier is in now (a multicast from a CTA that
        # is ahead may land while this CTA's release of the previous fill is one arrival short)
        bar = t.mbarriers.get(mbar)
        t.writer_fill[phys] = -1 if bar is None else bar.phase
        record = (off, off + nbytes, what)
        t.copies.append(record)
        if t.trace is not None:
            t.note(warp, "copy", f"{what}, {nbytes} B")

        def land():
            if t.exited:
                raise OutOfBoundsError(f"{what} lands after CTA {t.id} exited: its shared memory is gone; keep the "
                                       "CTA alive until its copies landed (wait on the mbarrier, and barrier.cluster "
                                       "before exit when other CTAs write into it)")
            t.smem[phys] = data
            t.written[phys] = True
            t.tma_pending[off:off + nbytes] -= 1
            t.copies.remove(record)
            t.complete_tx(mbar, nbytes)
            if t.trace is not None:
                bar = t.mbarriers[mbar]
                t.note(warp, "landed", f"TMA load of {spec.name!r} box {coords} landed: complete_tx {nbytes} B on "
                                       f"mbarrier 0x{mbar:x} (now phase {bar.phase}, {bar.tx} tx B pending)")

        t._async(info, what, land)

    # ---- TMA stores: PTX ISA 9.7.9.25 cp.async.bulk.tensor.global.shared::cta.tile.bulk_group ---------------
    def fence_proxy_async(self, warp: int) -> None:
        """fence.proxy.async(.shared::cta) by `warp`: its generic-proxy smem writes so far are ordered before later
        async-proxy accesses (PTX ISA "membar/fence", proxy fences)."""
        self.unfenced[self.unfenced == warp] = -1

    def tma_store(self, info: OpInfo, src: int, tmap_addr: int, coords: list[int], warp: int, lane: int) -> None:
        """Issue a TMA store of one box from smem `src` (shared::cta) through the tensor map at `tmap_addr`: the async
        proxy reads the box later (before the issuing thread's wait_group.read passes) and writes global memory,
        elements outside the tensor dropped."""
        tmap = self.launch.tensor_map_at(tmap_addr)
        spec, array = tmap.spec, tmap.array
        if len(coords) != len(spec.box):
            raise UnknownOpError(f"TMA store with {len(coords)} coordinates through tensor map {spec.name!r} of rank "
                                 f"{len(spec.box)}: give one coordinate per dim, innermost first")
        sw = swizzle(spec.swizzle)
        eb = array.dtype.itemsize
        if sw.swizzled and spec.box[0] * eb != sw.span_bytes:
            raise UnknownOpError(f"tensor map {spec.name!r}: inner box {spec.box[0] * eb} B under the {sw} swizzle; "
                                 "only boxes exactly one swizzle span wide are modelled")
        if src % TMA_SMEM_ALIGN:
            raise OutOfBoundsError(f"TMA store source smem 0x{src:x} is not {TMA_SMEM_ALIGN}-byte aligned "
                                   "(cp.async.bulk.tensor requires it); align the region")
        nbytes = int(np.prod(spec.box)) * eb
        what = f"TMA store of {spec.name!r} box {coords} from smem 0x{src:x}"
        self.smem_offset(src, nbytes, what)
        phys = sw.apply(np.arange(src, src + nbytes, dtype=np.int64)) - self.base
        for bad, why in ((~self.written[phys], "nothing has written"),
                         (self.tma_pending[phys] > 0, "an in-flight TMA load still writes"),
                         (self.unfenced[phys] != -1, "a generic st.shared by warp {w} wrote with no fence.proxy.async "
                                                     "by that warp since (the async proxy may not see the data)")):
            hit = np.flatnonzero(bad)
            if hit.size:
                byte = int(phys[hit[0]])
                raise SmemRaceError(f"{what} reads smem 0x{self.base + byte:x} (byte {byte} of dynamic smem), which "
                                    f"{why.format(w=int(self.unfenced[byte]))}: write the tile, fence.proxy.async in "
                                    "every writing thread, then a barrier, then the store")
        self.bulk_reading[phys] += 1
        record = {"what": what, "read": False, "written": False}
        self.bulk_open.setdefault((warp, lane), []).append(record)
        self.stats["tma_stores"] += 1
        if self.trace is not None:
            self.note(warp, "copy", f"{what}, {nbytes} B")

        def land():
            if self.exited:
                raise OutOfBoundsError(f"{what} reads smem after CTA {self.id} exited: wait for the store "
                                       "(cp.async.bulk.wait_group.read 0) before the CTA exits")
            data = self.smem[phys].copy().view(array.dtype).reshape(spec.box[::-1])
            self.bulk_reading[phys] -= 1
            record["read"] = True
            self._write_box(array, spec, coords, data)
            record["written"] = True
        self._async(info, what, land)

    def bulk_commit(self, warp: int, lane: int) -> None:
        """cp.async.bulk.commit_group: the thread's stores since its last commit become one bulk async-group."""
        self.bulk_groups.setdefault((warp, lane), []).append(self.bulk_open.pop((warp, lane), []))

    def bulk_wait(self, warp: int, lane: int, pending: int, read: bool) -> Wait | None:
        """cp.async.bulk.wait_group[.read] N: until at most N of the thread's newest groups are pending (.read: their
        smem has been read; otherwise: their writes are done too)."""
        groups = self.bulk_groups.get((warp, lane), [])
        must = groups[:max(0, len(groups) - pending)]
        key = "read" if read else "written"

        def done() -> bool:
            return all(r[key] for g in must for r in g)
        if done():
            return None
        return Wait(done, f"cp.async.bulk.wait_group{'.read' if read else ''} {pending} (lane {lane})")

    def check_bulk_at_exit(self) -> None:
        """A CTA whose TMA stores have still to read its smem may not exit (the smem is released at exit)."""
        stores = [r for rs in self.bulk_open.values() for r in rs]
        stores += [r for gs in self.bulk_groups.values() for g in gs for r in g]
        left = [r["what"] for r in stores if not r["read"]]
        if left:
            raise SmemRaceError(f"CTA {self.id} exits while {left[0]} has not read its smem yet: "
                                "cp.async.bulk.wait_group.read 0 before exit")

    @staticmethod
    def _write_box(array: np.ndarray, spec, coords: list[int], data: np.ndarray) -> None:
        """Write the box at `coords` (innermost first) into a row-major array, dropping elements outside it."""
        rank = len(spec.box)
        shape = array.shape[::-1]
        src, dst = [], []
        for i in reversed(range(rank)):
            lo, hi = coords[i], coords[i] + spec.box[i]
            clo, chi = max(lo, 0), min(hi, shape[i])
            if chi <= clo:
                return
            dst.append(slice(clo, chi))
            src.append(slice(clo - lo, chi - lo))
        array[tuple(dst)] = data[tuple(src)]

    @staticmethod
    def _read_box(array: np.ndarray, spec, coords: list[int]) -> np.ndarray:
        """The box at `coords` (innermost first) of a row-major array; elements outside the tensor are zero
        (oob_fill 'zero')."""
        if spec.oob_fill != "zero":
            raise UnknownOpError(f"tensor map {spec.name!r} oob_fill {spec.oob_fill!r}: only 'zero' is modelled")
        rank = len(spec.box)
        shape = array.shape[::-1]
        tile = np.zeros(spec.box[::-1], array.dtype)
        src, dst = [], []
        for i in reversed(range(rank)):                 # outermost first, as numpy indexes
            lo, hi = coords[i], coords[i] + spec.box[i]
            clo, chi = max(lo, 0), min(hi, shape[i])
            if chi <= clo:
                return tile
            src.append(slice(clo, chi))
            dst.append(slice(clo - lo, chi - lo))
        tile[tuple(dst)] = array[tuple(src)]
        return tile

    def _reader_of(self, offset: int) -> str:
        for wg in self.warpgroups.values():
            for slot in wg.slots:
                if slot.reads is not None and not self._slot_released(wg, slot) and offset in slot.reads:
                    return f"{slot.info.text} of warpgroup {wg.index}"
        return "an unknown wgmma"

    def _writer_of(self, offset: int) -> str:
        for lo, hi, what in self.copies:
            if lo <= offset < hi:
                return what
        return "a TMA copy"

    # ---- wgmma: PTX ISA 9.7.15 -----------------------------------------------------------------
    def warpgroup(self, warp: Warp) -> Warpgroup:
        index = warp.index // WARPGROUP_WARPS
        if index not in self.warpgroups:
            if (index + 1) * WARPGROUP_WARPS > len(self.warps):
                raise DivergenceError(f"wgmma in warpgroup {index}, which has fewer than {WARPGROUP_WARPS} warps in a "
                                      f"block of {len(self.warps)} warps: launch whole warpgroups")
            self.warpgroups[index] = Warpgroup(index)
        return self.warpgroups[index]

    def wgmma_fence(self, warp: Warp) -> None:
        """9.7.15.6.1 wgmma.fence: orders this warp's earlier register accesses before its next wgmma."""
        warp.unfenced = None

    def wgmma_issue(self, warp: Warp, info: OpInfo, attrs: dict, desc_a: int | None, desc_b: int, acc_in,
                    a_regs: np.ndarray | None = None) -> Pending:
        """9.7.15.5.2 wgmma.mma_async: warp `warp`'s part of the warpgroup's next MMA. With A in registers
        (attrs["a_regs"]), desc_a is None and a_regs is the warp's (32, 4) b32 A fragment; acc_in None means
        scale-d = 0 (D = A B, the input accumulator ignored)."""
        if warp.unfenced is not None:
            u = warp.unfenced          # a reason, or (OpInfo of the access, what it accessed)
            why = u if isinstance(u, str) else f"{u[0].text} {u[1]}"
            raise WgmmaFenceError(f"warp {warp.index} issues a wgmma after {why}, with no wgmma.fence in "
                                  "between: PTX ISA 9.7.15.6.1 requires wgmma.fence before the first wgmma and between "
                                  "any other access to accumulator or A-fragment registers and the wgmma using them")
        wg = self.warpgroup(warp)
        w = warp.index % WARPGROUP_WARPS
        i = wg.issued[w]
        wg.issued[w] += 1
        if i == len(wg.slots):
            wg.slots.append(WgmmaSlot(info, attrs))
        slot = wg.slots[i]
        if slot.info.op != info.op:
            raise DivergenceError(f"warp {warp.index} issues {info.text} as wgmma #{i} of warpgroup {wg.index}, other "
                                  f"warps issued {slot.info.text}: wgmma is warpgroup-collective (.aligned)")
        result = Pending()
        slot.parts[w] = (desc_a, desc_b, acc_in, result)
        if a_regs is not None:
            slot.a_regs[w] = a_regs
        if len(slot.parts) == WARPGROUP_WARPS:
            self._issue_slot(wg, i, slot)
        if self.trace is not None:
            self.note(warp.index, "mma", f"wgmma #{i} m{attrs['m']}n{attrs['n']}k{attrs['k']} A {_operand_text(desc_a)} "
                                         f"B {_operand_text(desc_b)}" + ("  -> issued (the warpgroup's last warp)"
                                                                         if slot.reads is not None else ""))
        return result

    def _issue_slot(self, wg: Warpgroup, i: int, slot: WgmmaSlot) -> None:
        descs = {(p[0], p[1]) for p in slot.parts.values()}
        if len(descs) != 1:
            raise DivergenceError(f"the warps of warpgroup {wg.index} give wgmma #{i} different descriptors "
                                  f"{sorted((hex(a), hex(b)) for a, b in descs)}: every warp must pass the same ones")
        (desc_a, desc_b), = descs
        a = slot.attrs
        eb = np.dtype(NUMPY_ELEMS[a["type_a"]]).itemsize
        if not a.get("a_regs"):
            slot.a_addr = self._operand_addresses(desc_a, a["m"], a["k"], eb, a["major_a"], "A")
        slot.b_addr = self._operand_addresses(desc_b, a["n"], a["k"], eb, a["major_b"], "B")
        key = ("reads", desc_a, desc_b, a["m"], a["n"], a["k"], eb, a.get("major_a"), a["major_b"], self.base)
        cache = self.launch.address_cache
        if key not in cache:
            smem_operands = [slot.b_addr] if slot.a_addr is None else [slot.a_addr, slot.b_addr]
            reads = np.concatenate([x.reshape(-1) for x in smem_operands]) - self.base
            cache[key] = np.unique(np.concatenate([reads, reads + (eb - 1)]))
        reads = cache[key]
        pending = np.flatnonzero(self.tma_pending[reads])
        if pending.size:
            off = int(reads[pending[0]])
            raise SmemRaceError(f"wgmma #{i} of warpgroup {wg.index} reads smem 0x{self.base + off:x}, which an "
                                f"in-flight TMA copy has not written yet ({self._writer_of(off)}): wait on the "
                                "stage's full barrier (try_wait.parity) before issuing the MMA")
        unwritten = np.flatnonzero(~self.written[reads])
        if unwritten.size:
            off = int(reads[unwritten[0]])
            raise SmemRaceError(f"wgmma #{i} of warpgroup {wg.index} reads smem 0x{self.base + off:x} (byte {off} of dynamic smem), "
                                "which no TMA copy has written yet: the MMA ran before its stage's copy was issued; "
                                "wait on the stage's full barrier before issuing it")
        self.mma_reading[reads] += 1
        self.unread[reads] = False
        slot.reads = reads
        self.stats["wgmma"] += 1

    def _operand_addresses(self, bits: int, mn: int, k: int, eb: int, major: str, which: str) -> np.ndarray:
        """Absolute smem addresses [mn, k] of a wgmma operand's elements, cached per descriptor."""
        key = (bits, mn, k, eb, major, self.base)
        cache = self.launch.address_cache
        if key not in cache:
            try:
                desc = WgmmaSmemDescriptor.decode(bits)
            except ValueError as e:
                raise UnknownOpError(f"wgmma operand {which} descriptor 0x{bits:x}: {e}") from None
            cache[key] = self.operand_addresses(desc, bits, mn, k, eb, major, f"wgmma operand {which}")
        return cache[key]

    def operand_addresses(self, desc, bits: int, mn: int, k: int, eb: int, major: str, what: str) -> np.ndarray:
        """The smem addresses [mn, k] an MMA operand's decoded descriptor (wgmma or sm_100) walks, checked to lie in
        the dynamic smem window and to be element aligned."""
        try:
            i, j = np.meshgrid(np.arange(mn), np.arange(k), indexing="ij")
            addr = canonical_element_address(desc, i, j, eb, major)
        except ValueError as e:
            raise UnknownOpError(f"{what} descriptor 0x{bits:x}: {e}") from None
        lo, hi = int(addr.min()), int(addr.max()) + eb
        if lo < self.base or hi > self.base + self.size:
            raise OutOfBoundsError(f"{what} (descriptor 0x{bits:x}, start 0x{desc.start_address:x}) reads smem "
                                   f"0x{lo:x}..0x{hi - 1:x}; dynamic smem is 0x{self.base:x}..0x{self.base + self.size - 1:x}: "
                                   "check the descriptor's address, LBO and SBO")
        if lo % eb:
            raise OutOfBoundsError(f"{what} descriptor 0x{bits:x} reads misaligned elements")
        return addr

    def wgmma_commit(self, warp: Warp) -> None:
        """9.7.15.6.2 wgmma.commit_group: this warp's uncommitted wgmmas become the warpgroup's next group."""
        wg = self.warpgroup(warp)
        w = warp.index % WARPGROUP_WARPS
        j = wg.commits[w]
        span = (wg.committed_to[w], wg.issued[w])
        wg.commits[w] += 1
        wg.committed_to[w] = wg.issued[w]
        if j == len(wg.groups):
            wg.groups.append(WgmmaGroup(j, span))
        group = wg.groups[j]
        if group.slots != span:
            raise DivergenceError(f"warp {warp.index} commits wgmmas #{span[0]}..{span[1] - 1} as group {j} of "
                                  f"warpgroup {wg.index}; another warp committed #{group.slots[0]}.."
                                  f"{group.slots[1] - 1}: every warp must issue and commit the same wgmmas")
        group.committed.add(w)
        if self.trace is not None:
            self.note(warp.index, "commit", f"wgmma.commit_group: group {j} = wgmmas #{span[0]}..{span[1] - 1}")
        if len(group.committed) == WARPGROUP_WARPS:
            prev = wg.groups[j - 1] if j else None
            slot = wg.slots[span[0]] if span[1] > span[0] else None
            origin = slot.info if slot else OpInfo("nvvm.wgmma.commit.group.sync.aligned", None)
            self._async(origin, f"wgmma group {j} of warpgroup {wg.index} (wgmmas #{span[0]}..{span[1] - 1})",
                        lambda: self._complete_group(wg, group),
                        eligible=None if prev is None else (lambda: prev.done))

    def _complete_group(self, wg: Warpgroup, group: WgmmaGroup) -> None:
        for i in range(*group.slots):
            slot = wg.slots[i]
            a = slot.attrs
            elem = NUMPY_ELEMS[a["type_a"]]
            smem16 = self.smem.view(np.uint16)
            a16 = _register_a(slot.a_regs) if slot.a_addr is None else smem16[(slot.a_addr - self.base) // 2]
            av = a16.view(elem).astype(np.float64) * a["scale_a"]   # [m, k]
            bv = smem16[(slot.b_addr - self.base) // 2].view(elem).astype(np.float64) * a["scale_b"]   # [n, k]
            # The tensor core's own arithmetic (warploom.emulate.tensorcore, measured bit for bit): the k16 step's
            # products and the accumulator aligned to the largest exponent, truncated, summed, truncated to f32.
            # The accumulator is the warpgroup's: the four warps' fragments put together in the m64 x n tile.
            rows, cols = _fragment(a["n"])
            acc = None
            if a["scale_d"]:
                acc = np.zeros((av.shape[0], bv.shape[0]), np.float32)
                for w, (_, _, acc_in, _) in slot.parts.items():
                    if acc_in is not None:
                        v = acc_in.value if isinstance(acc_in, Pending) else acc_in
                        acc[rows[WARP * w:WARP * (w + 1)], cols[WARP * w:WARP * (w + 1)]] = v
            d = mma_f32(av, bv, acc)
            for w, (_, _, _, result) in slot.parts.items():
                result.value = d[rows[WARP * w:WARP * (w + 1)], cols[WARP * w:WARP * (w + 1)]]
        group.done = True
        if self.trace is not None:
            for w in range(WARPGROUP_WARPS):
                self.note(wg.index * WARPGROUP_WARPS + w, "done", f"wgmma group {group.index} complete "
                          f"(wgmmas #{group.slots[0]}..{group.slots[1] - 1}); its smem operands stay owned until wait_group")

    def wgmma_wait(self, warp: Warp, pending: int) -> Wait | None:
        """9.7.15.6.3 wgmma.wait_group N: until at most N of this warp's committed groups are pending; then their
        accumulator registers may be read and their smem operands reused."""
        wg = self.warpgroup(warp)
        w = warp.index % WARPGROUP_WARPS
        must = wg.groups[:max(0, wg.commits[w] - pending)]
        if all(g.done for g in must):
            self._retire(wg, w, must)
            return None
        return Wait(lambda: all(g.done for g in must), f"wgmma.wait_group {pending} (groups "
                    f"{[g.index for g in must if not g.done]} of warpgroup {wg.index} not complete)")

    def _retire(self, wg: Warpgroup, w: int, groups) -> None:
        for g in groups:
            for i in range(*g.slots):
                wg.slots[i].parts[w][3].retired = True
            if not g.released:
                g.released = True
                for i in range(*g.slots):
                    self.mma_reading[wg.slots[i].reads] -= 1

    def _slot_released(self, wg: Warpgroup, slot: WgmmaSlot) -> bool:
        i = next(j for j, s in enumerate(wg.slots) if s is slot)    # (list.index compares the numpy fields)
        return any(g.released for g in wg.groups if g.slots[0] <= i < g.slots[1])

    def check_warp_exit(self, warp: Warp) -> None:
        if self.tmem is not None:
            self.tmem.check_warp_exit(warp)
        wg = self.warpgroups.get(warp.index // WARPGROUP_WARPS)
        if wg is None:
            return
        w = warp.index % WARPGROUP_WARPS
        unwaited = [g.index for g in wg.groups[:wg.commits[w]] if not all(
            wg.slots[i].parts[w][3].retired for i in range(*g.slots))]
        if wg.issued[w] > wg.committed_to[w] or unwaited:
            first = wg.groups[unwaited[0]].slots[0] if unwaited else wg.committed_to[w]
            op = wg.slots[first].info.text if first < len(wg.slots) else None
            raise AsyncLeakError(f"warp {warp.index} exits with wgmmas #{wg.committed_to[w]}..{wg.issued[w] - 1} "
                                 f"uncommitted and groups {unwaited} not waited for (wgmma #{first} of warpgroup "
                                 f"{wg.index} still owns this warp's accumulator registers): end with commit_group "
                                 "and wait_group 0").locate(self.id, warp.index, op)

    # ---- setmaxnreg: PTX ISA "setmaxnreg" -------------------------------------------------------------
    def setmaxnreg(self, warp: Warp, count: int, inc: bool) -> Wait | None:
        """setmaxnreg.{inc,dec}.sync.aligned.u32 count: the warp's per-thread register budget becomes `count`.
        .dec returns registers to the CTA's pool; .inc takes them from it and blocks until the pool has them. The
        pool is what the CTA got at launch (launch_regs x threads, within the register file); .inc below the
        current count or .dec above it is undefined (an error here). Every warp of a warpgroup must run the
        same setmaxnreg sequence."""
        launch = self.launch
        have = self.regs.get(warp.index, launch.launch_regs)
        verb = "inc" if inc else "dec"
        if (inc and count < have) or (not inc and count > have):
            raise RegisterBudgetError(f"setmaxnreg.{verb} to {count} registers per thread, but warp {warp.index} "
                                      f"holds {have}: .inc must not lower the count and .dec must not raise it (the "
                                      f"launch gives {launch.launch_regs}); use setmaxnreg.{'dec' if inc else 'inc'}")
        k = self.reg_calls.get(warp.index, 0)
        self.reg_calls[warp.index] = k + 1
        log = self.reg_log.setdefault(warp.index // WARPGROUP_WARPS, [])
        if k == len(log):
            log.append((count, inc))
        elif log[k] != (count, inc):
            raise DivergenceError(f"warp {warp.index} runs setmaxnreg.{verb} {count} as setmaxnreg #{k} of warpgroup "
                                  f"{warp.index // WARPGROUP_WARPS}; another warp of it ran "
                                  f"setmaxnreg.{'inc' if log[k][1] else 'dec'} {log[k][0]}: it is warpgroup-collective")
        return self.setmaxnreg_take(warp, count)

    def setmaxnreg_take(self, warp: Warp, count: int) -> Wait | None:
        """Grant `count` registers per thread to the warp if the pool has them, else a Wait for them."""
        if self._regs_after(warp, count) <= self._reg_pool():
            self.regs[warp.index] = count
            return None
        return Wait(lambda: self._regs_after(warp, count) <= self._reg_pool(),
                    f"setmaxnreg.inc {count}: {self._regs_after(warp, count)} registers needed, the CTA holds "
                    f"{self._reg_pool()}", error=lambda: self._budget_error(warp, count))

    def _reg_pool(self) -> int:
        return self.launch.launch_regs * WARP * len(self.warps)

    def _regs_after(self, warp: Warp, count: int) -> int:
        regs = {w.index: self.regs.get(w.index, self.launch.launch_regs) for w in self.warps}
        regs[warp.index] = count
        return WARP * sum(regs.values())

    def _budget_error(self, warp: Warp, count: int) -> RegisterBudgetError:
        launch = self.launch
        budgets = {}
        for w in self.warps:
            budgets.setdefault(w.index // WARPGROUP_WARPS, set()).add(self.regs.get(w.index, launch.launch_regs))
        held = ", ".join(f"warpgroup {g}: {'/'.join(map(str, sorted(b)))}" for g, b in sorted(budgets.items()))
        return RegisterBudgetError(
            f"setmaxnreg.inc to {count} registers per thread for warp {warp.index} (warpgroup "
            f"{warp.index // WARPGROUP_WARPS}) is never granted: it needs {self._regs_after(warp, count)} registers "
            f"in all, but the CTA holds {self._reg_pool()} ({launch.launch_regs} per thread x {WARP * len(self.warps)} "
            f"threads at launch, of the {launch.register_file}-register file) and the others keep theirs ({held}): "
            "lower the budgets (or .dec more in the other warpgroups)")

    # ---- bar.sync: PTX ISA 9.7.13 "bar, barrier" ----------------------------------------------------
    def _bar_state(self, warp: Warp, barrier: int, threads: int | None, what: str) -> list:
        # state: arrived threads, generation, expected threads, arrived warps, fenced mbarriers they publish
        if not 0 <= barrier <= 15:
            raise BarrierError(f"{what} {barrier}: barrier ids are 0..15")
        if threads is not None and (threads <= 0 or threads % WARP or threads > WARP * len(self.warps)):
            raise BarrierError(f"{what} {barrier} with {threads} threads: the count must be a positive multiple of "
                               f"{WARP} and at most the CTA's {WARP * len(self.warps)} threads")
        # state[5]: warps that arrived (bar.sync or bar.arrive) in this generation
        # state[6]: an arrival carried tcgen05 work (its bar.sync waiters must fence::after_thread_sync)
        # state[7]: bar.red.or: whether any arriving thread's predicate held (its result, by generation, in bar_or)
        state = self.bars.setdefault(barrier, [0, 0, threads, set(), [], set(), False, None])
        if state[2] != threads:
            raise DivergenceError(f"{what} {barrier} with {threads} threads; an earlier arrival said {state[2]}")
        if threads is not None and warp.index in state[5]:
            # stricter than the ISA spells out: the count would be met by fewer distinct threads than it names
            raise BarrierError(f"warp {warp.index} arrives at named barrier {barrier} twice in one generation "
                               f"({state[0]} of {threads} threads there): its count would complete with fewer "
                               "distinct threads than it names (a hand-off taken by the warpgroup that gave it)")
        state[5].add(warp.index)
        return state

    # ---- tcgen05 fences (PTX ISA 9.7.16.6 "tcgen05-memory-consistency-model"; TmemFenceError) ------------------
    def tc_access(self, warp: Warp, lanes, info: OpInfo, what: str) -> None:
        """Lanes `lanes` (a bool mask) of `warp` access TMEM with `info` (tcgen05.ld/st/mma/alloc/dealloc): they must
        have run tcgen05.fence::after_thread_sync since passing a synchronisation that carried tcgen05 work, and
        now owe a fence::before_thread_sync before they signal."""
        if warp.tc_unordered is not None and (warp.tc_unordered[0] & lanes).any():
            lane = int(np.flatnonzero(warp.tc_unordered[0] & lanes)[0])
            raise TmemFenceError(f"{what} by lane {lane} of warp {warp.index} after {warp.tc_unordered[1]}, with no "
                                 "tcgen05.fence::after_thread_sync in between: the TMEM access is not ordered after "
                                 "the tcgen05 work that synchronisation published; add the fence after the wait")
        held = lanes.copy() if warp.tc_unpublished is None else (warp.tc_unpublished[0] | lanes)
        warp.tc_unpublished = (held, info)
        warp.tc_touched = True

    def tc_signal(self, warp: Warp, lanes, what: str) -> bool:
        """Lanes `lanes` of `warp` signal other threads (`what`: an mbarrier arrive, bar.arrive, bar.sync): none may
        hold TMEM accesses not yet fenced with tcgen05.fence::before_thread_sync. True when the signal carries
        tcgen05 work (the warp accessed TMEM): whoever it releases must fence::after_thread_sync before TMEM."""
        if warp.tc_unpublished is not None and (warp.tc_unpublished[0] & lanes).any():
            lane = int(np.flatnonzero(warp.tc_unpublished[0] & lanes)[0])
            raise TmemFenceError(f"{what} by lane {lane} of warp {warp.index} after its {warp.tc_unpublished[1].text} "
                                 "with no tcgen05.fence::before_thread_sync in between: the threads this releases may "
                                 "see the TMEM work unfinished; add the fence before the signal")
        return warp.tc_touched

    def tc_passed(self, warp: Warp, lanes, what: str) -> None:
        """Lanes `lanes` of `warp` passed `what`, a synchronisation carrying tcgen05 work."""
        held = lanes.copy() if warp.tc_unordered is None else (warp.tc_unordered[0] | lanes)
        warp.tc_unordered = (held, what)

    def tc_fence(self, warp: Warp, lanes, before: bool) -> None:
        """tcgen05.fence::before_thread_sync (before) / ::after_thread_sync by lanes `lanes` of `warp`."""
        attr = "tc_unpublished" if before else "tc_unordered"
        state = getattr(warp, attr)
        if state is not None:
            left = state[0] & ~lanes
            setattr(warp, attr, (left, state[1]) if left.any() else None)

    def bar_arrive(self, warp: Warp, barrier: int, threads: int) -> None:
        """bar.arrive id, threads (PTX ISA 9.7.13 "bar, barrier"): count the warp's threads at the barrier and go
        on; the barrier completes (releasing its bar.sync waiters) when `threads` threads arrived."""
        state = self._bar_state(warp, barrier, threads, "bar.arrive")
        state[6] |= self.tc_signal(warp, warp.mask, f"bar.arrive {barrier}")
        state[0] += int(warp.mask.sum())
        state[4] += [b for b in self.mbarriers.values() if b.fenced and b.init_warp == warp.index]
        self._release_bars()

    def check_bars_at_exit(self) -> None:
        """Every named barrier's arrivals must have completed when the CTA's last warp exits: a partial count left
        behind is a hand-off nobody took (an unbalanced bar.arrive / bar.sync protocol, e.g. a ping-pong)."""
        for bid, state in sorted(self.bars.items()):
            if state[0] and state[2] is not None:
                raise BarrierError(f"the CTA exits with named barrier {bid} at {state[0]} of {state[2]} threads "
                                   f"(generation {state[1]}): an arrival no bar.sync took; every bar.arrive / bar.sync "
                                   "hand-off must balance").locate(self.id)

    def bar_sync(self, warp: Warp, barrier: int, threads: int | None, pred=None) -> Wait | None:
        """bar.sync id, threads; with `pred` (a lane mask) bar.red.or.pred: the OR over every arriving thread is
        then `bar_or[(barrier, generation)]` once the barrier completes (generation: state[1] at arrival)."""
        state = self._bar_state(warp, barrier, threads, "bar.sync")
        if pred is not None:
            state[7] = bool(state[7]) or bool((pred & warp.mask).any())
        state[6] |= self.tc_signal(warp, warp.mask, f"bar.sync {barrier}")
        state[0] += int(warp.mask.sum())
        state[3].add(warp.index)
        state[4] += [b for b in self.mbarriers.values() if b.fenced and b.init_warp == warp.index]
        gen = state[1]
        self._release_bars()
        if state[1] != gen:
            return None
        return Wait(lambda: state[1] != gen, f"bar.sync {barrier} ({state[0]} of "
                    f"{threads or 'all live'} threads arrived)")

    def _release_bars(self) -> None:
        # Without a thread count, bar.sync waits for every thread of the CTA; threads that exited no longer count.
        live = WARP * sum(1 for w in self.warps if not w.exited)
        for state in self.bars.values():
            if state[0] and state[0] >= (state[2] or live):
                state[0] = 0
                state[1] += 1
                for bar in state[4]:          # fence.mbarrier_init + this barrier: the init is visible to all of them
                    if bar.visible is not None:   # (None: already visible to every warp)
                        bar.visible |= state[3]
                if state[6]:
                    bid = next(b for b, s in self.bars.items() if s is state)
                    for w in state[3]:
                        self.tc_passed(self.warps[w], self.warps[w].mask, f"bar.sync {bid}, which a thread that "
                                       "accessed TMEM took part in")
                if state[7] is not None:
                    bid = next(b for b, s in self.bars.items() if s is state)
                    self.bar_or[(bid, state[1] - 1)] = state[7]
                state[3], state[4], state[5], state[6], state[7] = set(), [], set(), False, None

    # ---- scheduler --------------------------------------------------------------------------------
    def _async(self, origin: OpInfo, what: str, fire, eligible=None) -> None:
        self.cluster.async_op(self, origin, what, fire, eligible)

    def run(self, warps: list[Warp]) -> None:
        """Run this CTA's warps to completion (its cluster's run loop; a CTA made alone is a cluster of one)."""
        self.cluster.run(warps)

    def _deadlock(self, live: list[Warp]) -> DeadlockError:
        return self.cluster._deadlock(live)


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

    def add(self, cta: CTA) -> int:
        """Place a CTA by its position in the cluster; returns its rank."""
        x, y, z = (cta.id[i] % self.shape[i] for i in range(3))
        rank = x + self.shape[0] * (y + self.shape[1] * z)
        if self.ctas[rank] is not None:
            raise ValueError(f"CTA {cta.id} and CTA {self.ctas[rank].id} both have rank {rank} in cluster {self.id}")
        self.ctas[rank] = cta
        return rank

    def position(self, cta: CTA) -> tuple[int, int, int]:
        """%cluster_ctaid: the CTA's coordinates inside its cluster."""
        return tuple(cta.id[i] % self.shape[i] for i in range(3))

    # ---- scheduler ---------------------------------------------------------------------------------
    def async_op(self, cta: CTA, origin: OpInfo, what: str, fire, eligible=None) -> None:
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
                cta = warp.cta
                cta.live_warps -= 1
                cta.check_warp_exit(warp)
                cta._release_bars()
                if cta.live_warps == 0:
                    cta.check_bars_at_exit()
                    cta.check_bulk_at_exit()
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

    def cta_part(self, cta: CTA, addr: int, what: str) -> int:
        """The CTA-relative (shared::cta) address of a shared::cta or shared::cluster address."""
        if addr < DSMEM_RANK_STRIDE:
            return addr
        rank, local = divmod(addr - DSMEM_BASE, DSMEM_RANK_STRIDE)
        if addr < DSMEM_BASE or rank >= self.size:
            raise OutOfBoundsError(f"{what}: 0x{addr:x} is in no CTA's shared memory window ({self.windows()})")
        return local

    def check_alive(self, cta: CTA, target: CTA, what: str) -> None:
        if target is not cta and target.exited:
            raise OutOfBoundsError(f"{what} reaches CTA {target.id} (rank {target.rank}), which has exited: its shared "
                                   "memory is gone; end the kernel with barrier.cluster arrive/wait so that no CTA "
                                   "exits while the others may still access its shared memory")

    def resolve(self, cta: CTA, addr: int, nbytes: int, what: str) -> tuple[CTA, int]:
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

    def resolve_lanes(self, cta: CTA, addr: np.ndarray, nbytes: int, what: str, cluster_space: bool):
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

    def mapa(self, cta: CTA, addr: int, rank: int) -> int:
        """PTX ISA "Parallel synchronization and communication instructions: mapa" (.shared::cluster): the
        shared::cluster address, in CTA `rank`, of the variable at shared memory address `addr` of this CTA."""
        if not 0 <= rank < self.size:
            raise OutOfBoundsError(f"mapa of smem 0x{addr:x} to CTA rank {rank}: the cluster {self.shape} has CTA "
                                   f"ranks 0..{self.size - 1} (%cluster_nctarank = {self.size})")
        return DSMEM_BASE + rank * DSMEM_RANK_STRIDE + self.cta_part(cta, addr, f"mapa to CTA rank {rank}")

    def remote_mbarrier(self, cta: CTA, addr: int, what: str) -> tuple[CTA, int]:
        """The CTA and the shared::cta address of the mbarrier at shared::cluster address `addr`."""
        target, local = self.resolve(cta, addr, MBARRIER_BYTES, what)
        if local not in target.mbarriers:
            raise MbarrierError(f"{what} on shared::cluster 0x{addr:x}, smem 0x{local:x} (byte {local - target.base} "
                                f"of dynamic smem) of CTA {target.id} (rank {target.rank}): no mbarrier is initialised "
                                "there; init it in that CTA, then fence.mbarrier_init.release.cluster and "
                                "barrier.cluster arrive/wait before other CTAs signal it")
        return target, local

    # ---- barrier.cluster: PTX ISA "Parallel synchronization and communication instructions: barrier.cluster" ----
    # The barrier completes once every non-exited thread of the cluster arrived; it then starts its next phase at
    # once. A thread arrives once per phase, and its wait returns once the phase it arrived in completed. Threads
    # that exit no longer count (a wait held up only by exited threads is released). .release/.acquire/.relaxed
    # order memory, which the emulator does not model: arrive and arrive.relaxed are the same here.
    def barrier_arrive(self, warp: Warp) -> None:
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
        # fence.mbarrier_init.release.cluster, then this barrier: the arriving warp's inits become visible to
        # every thread of the cluster when the phase completes
        self._publish += [b for b in warp.cta.mbarriers.values() if b.fenced and b.init_warp == warp.index]
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

    def barrier_waited(self, warp: Warp) -> None:
        self._pending[warp][warp.mask] = -1

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


def _operand_text(bits: int | None) -> str:
    """A wgmma operand for a trace record: the smem address its descriptor starts at (None: A in registers)."""
    if bits is None:
        return "registers"
    try:
        return f"smem 0x{WgmmaSmemDescriptor.decode(bits).start_address:x}"
    except ValueError:
        return f"descriptor 0x{bits:x}"


_FRAGMENTS: dict = {}


def _fragment(n: int):
    """layout.fragments.wgmma_accumulator(n), computed once per n."""
    if n not in _FRAGMENTS:
        _FRAGMENTS[n] = wgmma_accumulator(n)
    return _FRAGMENTS[n]


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


_A_FRAGMENT = wgmma_a_k16()


def _register_a(a_regs: dict) -> np.ndarray:
    """The 64 x 16 A operand (uint16 bits) a register-A wgmma reads from its warpgroup's registers: warp w's
    (32, 4) b32 registers, element 2i + e of thread t being half e (e = 0 the low 16 bits) of register i,
    placed by layout.fragments.wgmma_a_k16 (PTX ISA 9.7.15.5.1.1 "Matrix Fragments for wgmma.mma_async", A)."""
    rows, cols = _A_FRAGMENT
    regs = np.concatenate([np.asarray(a_regs[w], np.uint64) for w in range(WARPGROUP_WARPS)])    # [128, 4]
    halves = np.stack([regs & 0xFFFF, regs >> 16], axis=-1).reshape(WARP * WARPGROUP_WARPS, 8)   # [128, 8]
    a = np.zeros((int(rows.max()) + 1, int(cols.max()) + 1), np.uint16)
    a[rows, cols] = halves.astype(np.uint16)
    return a


def describe_lanes(values: np.ndarray, mask: np.ndarray) -> str:
    """'lane 0 = 7, lane 1 = 9, ...': the values of the first few active lanes."""
    lanes = np.flatnonzero(mask)
    shown = ", ".join(f"lane {i} = {values[i]}" for i in lanes[:4])
    return shown + (", ..." if lanes.size > 4 else "")
