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
- Warps are generators that yield at blocking points (`Wait`) or to let others run (None); the
  scheduler picks among runnable warps and landable async operations with a seeded RNG.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from warploom.layout import WgmmaSmemDescriptor, canonical_element_address, swizzle
from warploom.layout.fragments import wgmma_accumulator

from .errors import (AsyncLeakError, DeadlockError, DivergenceError, EmulationError, MbarrierError,
                     OutOfBoundsError, SmemRaceError, UnknownOpError)

WARP = 32
WARPGROUP_WARPS = 4
SMEM_BASE = 0x210                      # 16-B aligned, deliberately not 1024-B aligned
MBARRIER_BYTES = 8
MBARRIER_MAX_COUNT = (1 << 20) - 1     # PTX ISA 9.7.13.15 "mbarrier": counts and tx-count are 20-bit
TMA_SMEM_ALIGN = 128                   # PTX ISA 9.7.9.25: the cp.async.bulk.tensor smem address is 128-B aligned
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
    """What a blocked warp waits for: `ready()` says when it may run again; `what` says why it waits."""
    __slots__ = ("ready", "what")

    def __init__(self, ready, what: str):
        self.ready, self.what = ready, what


class Pending:
    """One warp's accumulator registers written by a wgmma: valid once the group completed (`value`) and
    readable once the warp's own wgmma.wait_group retired it (`retired`), PTX ISA 9.7.15.6."""
    __slots__ = ("value", "retired")

    def __init__(self):
        self.value, self.retired = None, False


@dataclass
class Mbarrier:
    """PTX ISA 9.7.13.15 "mbarrier" contents: expected count, pending arrivals, tx-count, current phase."""
    addr: int
    count: int
    pending: int
    tx: int = 0
    phase: int = 0

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
    __slots__ = ("cta", "index", "env", "mask", "tid", "wait", "gen", "exited", "last_op")

    def __init__(self, cta: CTA, index: int, nslots: int, threads: int):
        self.cta, self.index = cta, index
        self.env = [None] * nslots
        self.tid = np.arange(WARP * index, WARP * index + WARP, dtype=np.uint64)
        self.mask = self.tid < threads
        self.wait: Wait | None = None
        self.gen = None
        self.exited = False
        self.last_op: OpInfo | None = None


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

    def store(self, addr: np.ndarray, data: np.ndarray, mask: np.ndarray, align: int) -> None:
        """Write data[lane] (uint8 rows) at addr[lane] for the active lanes."""
        nbytes = data.shape[1]
        lanes = np.flatnonzero(mask)
        bad = lanes[addr[lanes] % max(align, 1) != 0]
        if bad.size:
            raise OutOfBoundsError(f"global store of {nbytes} B at 0x{int(addr[bad[0]]):x} (lane {bad[0]}) is not "
                                   f"{align}-byte aligned as the store's alignment promises; fix the address "
                                   "arithmetic or the alignment attribute")
        left = lanes
        for name, base, buf in self.regions:
            inside = (addr[left] >= base) & (addr[left] + nbytes <= base + buf.size)
            hit = left[inside]
            if hit.size:
                offs = (addr[hit] - base).astype(np.int64)[:, None] + np.arange(nbytes)
                buf[offs] = data[hit]
            left = left[~inside]
        if left.size:
            a = int(addr[left[0]])
            near = min(self.regions, key=lambda r: abs(a - r[1]))
            raise OutOfBoundsError(f"global store of {nbytes} B at 0x{a:x} (lane {left[0]}) is outside every array; "
                                   f"nearest is {near[0]!r} at 0x{near[1]:x}..0x{near[1] + near[2].size:x} "
                                   f"(offset {a - near[1]}): check the row/column bounds of the store")


class CTA:
    """One CTA of a launch: its smem, mbarriers, async units and warps, run to completion by `run`."""

    def __init__(self, launch, cta_id: tuple[int, int, int], rng: random.Random, delay: int, order: str):
        self.launch, self.id, self.rng, self.delay, self.order = launch, cta_id, rng, delay, order
        self.base = launch.smem_base
        self.size = launch.smem_bytes
        self.smem = np.full(self.size, 0xFF, np.uint8)
        self.tma_pending = np.zeros(self.size, np.int16)     # in-flight TMA copies writing each byte
        self.written = np.zeros(self.size, bool)              # bytes some TMA copy has landed in
        self.mma_reading = np.zeros(self.size, np.int16)     # unretired wgmma / unreleased tcgen05.mma operand bytes
        self.unread = np.zeros(self.size, bool)               # bytes a TMA copy wrote (or will) that no MMA read yet
        self.writer = np.full(self.size, -1, np.int32)        # which copy (index into copy_names) wrote each byte
        self.copy_names: list[str] = []
        self.tmem = None                                      # tcgen05.TensorMemory, made by the CTA's first tcgen05 op
        self.mbarriers: dict[int, Mbarrier] = {}
        self.events: list[AsyncOp] = []
        self.copies: list[tuple[int, int, str]] = []          # in-flight TMA loads: smem offsets [lo, hi), what
        self.warpgroups: dict[int, Warpgroup] = {}
        self.bars: dict[int, list] = {}                       # bar.sync id -> [arrived threads, generation]
        self.step = 0
        self.warps: list[Warp] = []
        self.stats = launch.stats
        self.trace: list | None = None        # when a list: (step, warp, kind, text) records (warploom emulate --timeline)

    def note(self, warp: int, kind: str, text: str) -> int:
        """Append a trace record (callers check `trace is not None` first); returns its index for `note_passed`."""
        self.trace.append((self.step, warp, kind, text))
        return len(self.trace) - 1

    def note_passed(self, i: int) -> None:
        """A traced wait (record i) has passed: say at which scheduler step."""
        step, warp, kind, text = self.trace[i]
        self.trace[i] = (step, warp, kind, f"{text}  passed " + ("at once" if step == self.step else f"at step {self.step}"))

    # ---- shared memory -----------------------------------------------------------------------
    def smem_offset(self, addr: int, nbytes: int, what: str) -> int:
        off = addr - self.base
        if off < 0 or off + nbytes > self.size:
            raise OutOfBoundsError(f"{what} touches smem 0x{addr:x}..0x{addr + nbytes - 1:x}; the launch's dynamic "
                                   f"smem is 0x{self.base:x}..0x{self.base + self.size - 1:x} ({self.size} B): "
                                   "the plan's offsets exceed smem_bytes, or the base was not rounded up")
        return off

    # ---- mbarriers: PTX ISA 9.7.13.15 ------------------------------------------------------------
    def mbarrier(self, addr: int) -> Mbarrier:
        bar = self.mbarriers.get(addr)
        if bar is None:
            raise MbarrierError(f"mbarrier at smem 0x{addr:x} (byte {addr - self.base} of dynamic smem) is used before "
                                "mbarrier.init: initialise it (one thread, then fence.mbarrier_init and a barrier)")
        return bar

    def mbarrier_init(self, addr: int, count: int) -> None:
        # 9.7.13.15 "mbarrier.init": 8-byte aligned object in shared memory; count in 1..2^20-1;
        # phase 0, pending arrivals = count, tx-count 0
        if addr % MBARRIER_BYTES:
            raise OutOfBoundsError(f"mbarrier.init at 0x{addr:x}: an mbarrier is {MBARRIER_BYTES}-byte aligned")
        self.smem_offset(addr, MBARRIER_BYTES, "mbarrier.init")
        if not 1 <= count <= MBARRIER_MAX_COUNT:
            raise MbarrierError(f"mbarrier.init at 0x{addr:x} with count {count}: must be 1..{MBARRIER_MAX_COUNT}")
        self.mbarriers[addr] = Mbarrier(addr, count, count)

    def mbarrier_arrive(self, addr: int, count: int = 1, tx: int = 0) -> int:
        # 9.7.13.15 "mbarrier.expect_tx" (tx-count += tx) then "mbarrier.arrive" (pending -= count);
        # returns the state token (the phase the arrival counted towards)
        bar = self.mbarrier(addr)
        state = bar.phase
        bar.tx += tx
        bar.pending -= count
        if bar.pending < 0:
            raise MbarrierError(f"mbarrier at 0x{addr:x} (byte {addr - self.base} of dynamic smem) got more arrivals than its count "
                                f"{bar.count} in phase {bar.phase}: the init count or the number of arriving "
                                "threads is wrong")
        bar.maybe_complete()
        return state

    def complete_tx(self, addr: int, nbytes: int) -> None:
        # 9.7.13.15 "mbarrier.complete_tx", as performed by a TMA copy landing: tx-count -= bytes
        bar = self.mbarrier(addr)
        bar.tx -= nbytes
        bar.maybe_complete()

    # ---- TMA: PTX ISA 9.7.9.25 cp.async.bulk.tensor (tile mode, global -> shared::cluster) -------------
    def tma_load(self, info: OpInfo, dst: int, tmap_addr: int, mbar: int, coords: list[int], warp: int | None = None) -> None:
        tmap = self.launch.tensor_map_at(tmap_addr)
        spec, array = tmap.spec, tmap.array
        self.mbarrier(mbar)
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
        if dst % TMA_SMEM_ALIGN:
            raise OutOfBoundsError(f"TMA destination smem 0x{dst:x} is not {TMA_SMEM_ALIGN}-byte aligned "
                                   "(cp.async.bulk.tensor requires it); align the region")
        nbytes = int(np.prod(spec.box)) * eb
        off = self.smem_offset(dst, nbytes, f"TMA load of tensor map {spec.name!r}")
        busy = np.flatnonzero(self.mma_reading[off:off + nbytes])
        if busy.size:
            reader = self.tmem.smem_reader(off + int(busy[0])) if self.tmem is not None else None
            if reader is not None:     # a tcgen05.mma (tcgen05.py) holds the bytes until a commit arrival releases them
                raise SmemRaceError(f"TMA load of {spec.name!r} box {coords} writes smem 0x{dst:x}..0x{dst + nbytes - 1:x} "
                                    f"while {reader} still reads byte 0x{dst + int(busy[0]):x}: wait on the ring's "
                                    "empty barrier before reusing a stage, and arrive on it with tcgen05.commit "
                                    "(which arrives once the MMAs reading the stage completed)")
            raise SmemRaceError(f"TMA load of {spec.name!r} box {coords} writes smem 0x{dst:x}..0x{dst + nbytes - 1:x} "
                                f"while an unretired wgmma group still reads byte 0x{dst + int(busy[0]):x} "
                                f"({self._reader_of(off + int(busy[0]))}): wait on the ring's empty barrier before "
                                "reusing a stage, and arrive on it only after wgmma.wait_group retired the reads")
        data = self._read_box(array, spec, coords).reshape(-1).view(np.uint8)
        phys = sw.apply(np.arange(dst, dst + nbytes, dtype=np.int64)) - self.base
        unread = np.flatnonzero(self.unread[phys])
        if unread.size:
            byte = int(phys[unread[0]])
            raise SmemRaceError(f"TMA load of {spec.name!r} box {coords} overwrites smem 0x{self.base + byte:x}, which "
                                f"{self.copy_names[self.writer[byte]]} wrote and no MMA has read yet: the stage was "
                                "handed back to the producer before its consumer used it (check which stage the "
                                "consumer frees, and when)")
        self.tma_pending[off:off + nbytes] += 1
        self.stats["tma_loads"] += 1
        what = f"TMA load of {spec.name!r} box {coords} -> smem 0x{dst:x} (mbarrier 0x{mbar:x})"
        self.unread[phys] = True
        self.writer[phys] = len(self.copy_names)
        self.copy_names.append(what)
        record = (off, off + nbytes, what)
        self.copies.append(record)
        if self.trace is not None:
            self.note(warp, "copy", f"{what}, {nbytes} B")

        def land():
            self.smem[phys] = data
            self.written[phys] = True
            self.tma_pending[off:off + nbytes] -= 1
            self.copies.remove(record)
            self.complete_tx(mbar, nbytes)
            if self.trace is not None:
                bar = self.mbarriers[mbar]
                self.note(warp, "landed", f"TMA load of {spec.name!r} box {coords} landed: complete_tx {nbytes} B on "
                                          f"mbarrier 0x{mbar:x} (now phase {bar.phase}, {bar.tx} tx B pending)")

        self._async(info, what, land)

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

    def wgmma_issue(self, warp: Warp, info: OpInfo, attrs: dict, desc_a: int, desc_b: int, acc_in) -> Pending:
        """9.7.15.5.2 wgmma.mma_async: warp `warp`'s part of the warpgroup's next MMA."""
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
        slot.a_addr = self._operand_addresses(desc_a, a["m"], a["k"], eb, a["major_a"], "A")
        slot.b_addr = self._operand_addresses(desc_b, a["n"], a["k"], eb, a["major_b"], "B")
        key = ("reads", desc_a, desc_b, a["m"], a["n"], a["k"], eb, a["major_a"], a["major_b"], self.base)
        cache = self.launch.address_cache
        if key not in cache:
            reads = np.concatenate([slot.a_addr.reshape(-1), slot.b_addr.reshape(-1)]) - self.base
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
        """Absolute smem addresses [mn, k] of an operand's elements, cached per descriptor."""
        key = (bits, mn, k, eb, major, self.base)
        cache = self.launch.address_cache
        if key not in cache:
            try:
                desc = WgmmaSmemDescriptor.decode(bits)
                i, j = np.meshgrid(np.arange(mn), np.arange(k), indexing="ij")
                addr = canonical_element_address(desc, i, j, eb, major)
            except ValueError as e:
                raise UnknownOpError(f"wgmma operand {which} descriptor 0x{bits:x}: {e}") from None
            lo, hi = int(addr.min()), int(addr.max()) + eb
            if lo < self.base or hi > self.base + self.size:
                raise OutOfBoundsError(f"wgmma operand {which} (descriptor 0x{bits:x}, start 0x{desc.start_address:x}) "
                                       f"reads smem 0x{lo:x}..0x{hi - 1:x}; dynamic smem is 0x{self.base:x}.."
                                       f"0x{self.base + self.size - 1:x}: check the descriptor's address, LBO and SBO")
            if lo % eb:
                raise OutOfBoundsError(f"wgmma operand {which} descriptor 0x{bits:x} reads misaligned elements")
            cache[key] = addr
        return cache[key]

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
            av = smem16[(slot.a_addr - self.base) // 2].view(elem).astype(np.float64) * a["scale_a"]   # [m, k]
            bv = smem16[(slot.b_addr - self.base) // 2].view(elem).astype(np.float64) * a["scale_b"]   # [n, k]
            # Products of 16-bit floats are exact in float64, and a k16 block's sum nearly always is; it is rounded
            # to f32 once, added to the accumulator (the calibration question: the tensor core's order and rounding).
            d = av @ bv.T
            rows, cols = _fragment(a["n"])
            for w, (_, _, acc_in, result) in slot.parts.items():
                r, c = rows[WARP * w:WARP * (w + 1)], cols[WARP * w:WARP * (w + 1)]
                if a["scale_d"]:
                    acc = acc_in.value if isinstance(acc_in, Pending) else acc_in
                    result.value = (acc.astype(np.float64) + d[r, c]).astype(np.float32)
                else:
                    result.value = d[r, c].astype(np.float32)
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
        i = wg.slots.index(slot)
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
            raise AsyncLeakError(f"warp {warp.index} exits with wgmmas #{wg.committed_to[w]}..{wg.issued[w] - 1} "
                                 f"uncommitted and groups {unwaited} not waited for: end with commit_group and "
                                 "wait_group 0")

    # ---- bar.sync: PTX ISA 9.7.13 "bar, barrier" ----------------------------------------------------
    def bar_sync(self, warp: Warp, barrier: int, threads: int | None) -> Wait | None:
        state = self.bars.setdefault(barrier, [0, 0, threads])
        if state[2] != threads:
            raise DivergenceError(f"bar.sync {barrier} with {threads} threads; an earlier arrival said {state[2]}")
        state[0] += int(warp.mask.sum())
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

    # ---- scheduler --------------------------------------------------------------------------------
    def _async(self, origin: OpInfo, what: str, fire, eligible=None) -> None:
        delay = self.rng.randint(0, self.delay) if self.delay else 0
        self.events.append(AsyncOp(self.step + delay, origin, what, fire, eligible))

    def run(self, warps: list[Warp]) -> None:
        self.warps = warps
        live = [w for w in warps]
        turn = 0
        while live or self.events:
            self.step += 1
            runnable = [w for w in live if w.wait is None or w.wait.ready()]
            ready = [e for e in self.events if e.ready_step <= self.step and e.can_fire()]
            if not runnable and not ready:
                later = [e for e in self.events if e.can_fire()]
                if later:
                    self.step = min(e.ready_step for e in later)
                    continue
                raise self._deadlock(live)
            n = len(runnable) + len(ready)
            if self.order == "random":
                pick = self.rng.randrange(n)
            else:
                pick = turn % n
                turn += 1
            if pick >= len(runnable):
                ev = ready[pick - len(runnable)]
                self.events.remove(ev)
                try:
                    ev.fire()
                except EmulationError as e:
                    raise e.locate(self.id, None, f"{ev.origin.text} ({ev.what})")
                continue
            warp = runnable[pick]
            warp.wait = None
            try:
                warp.wait = next(warp.gen)
            except StopIteration:
                warp.exited = True
                live.remove(warp)
                self.check_warp_exit(warp)
                self._release_bars()
        self.stats["steps"] += self.step

    def _deadlock(self, live: list[Warp]) -> DeadlockError:
        lines = [f"warp {w.index}: {w.last_op.text if w.last_op else '?'} waits for {w.wait.what}" for w in live]
        stuck = [f"{e.what} (waits for an earlier group)" for e in self.events]
        detail = "; ".join(lines + stuck)
        return DeadlockError(f"deadlock: every live warp is blocked and nothing is in flight. {detail}").locate(self.id)


def _operand_text(bits: int) -> str:
    """A wgmma operand for a trace record: the smem address its descriptor starts at."""
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


def describe_lanes(values: np.ndarray, mask: np.ndarray) -> str:
    """'lane 0 = 7, lane 1 = 9, ...': the values of the first few active lanes."""
    lanes = np.flatnonzero(mask)
    shown = ", ".join(f"lane {i} = {values[i]}" for i in lanes[:4])
    return shown + (", ..." if lanes.size > 4 else "")
