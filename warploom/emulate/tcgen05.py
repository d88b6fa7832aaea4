"""Tensor Memory and the tcgen05 family (sm_100a, .cta_group::1 and the CTA pair's ::2): the CTA's TMEM state and the
op handlers.

Sources are PTX ISA 9.0 sections (numbers as in that release; the anchor names in quotes are stable
across releases, docs.nvidia.com/cuda/parallel-thread-execution/#<anchor>), summarised in
/work/shared/notes/gpu-facts.md section 4:

- TMEM is 128 lanes x 512 columns of 32-bit cells per CTA; an address is lane << 16 | column
  (9.7.16.1 "tensor-memory", 9.7.16.1.1 "tensor-memory-addressing"). The numbers live in
  `warploom.targets` (sm_100a `tmem`), read here as GEOMETRY.
- Allocation (9.7.16.1.2 "tensor-memory-allocation", 9.7.16.7.1 "tcgen05-memory-alloc-manage-instructions"):
  one warp of the CTA allocates and frees, warp-collectively (.sync.aligned); power-of-two column counts
  in 32..512; the count may not grow from one allocation to the next; alloc blocks until enough columns
  are free and writes the base address to shared memory; dealloc names an allocation's base; no alloc
  after relinquish_alloc_permit; everything allocated must be freed before the kernel exits.
- Issue granularity (9.7.16.5 "tcgen05-issue-granularity"): mma and commit are single-thread (every
  active lane issues its own); alloc/dealloc/relinquish are warp ops; ld/st reach one lane quadrant:
  warp (warp index % 4) = q may access lanes 32q..32q+31 only (9.7.16.8.1
  "tcgen05-tensor-memory-ld-st-access-restrictions").
- Ordering (9.7.16.6 "tcgen05-memory-consistency-model"): mma, ld and st are asynchronous. mma ->
  mma on the same accumulator and shape from one thread execute in issue order ("pipelined"); the
  completion of a thread's mmas is observable only through tcgen05.commit, which arrives (count 1) on an
  mbarrier once all of that thread's prior mmas completed (9.7.16.12.1 "tcgen05-commit"); ld and st
  complete at the thread's tcgen05.wait::ld / ::st (9.7.16.8.5 "tcgen05-wait").
- tcgen05.mma kind::f16 (9.7.16.10.9.1 "tcgen05-mma"): D = A x B (+ D when enable-input-d), A [M, K]
  from an smem descriptor or from TMEM, B [N, K] from an smem descriptor, D [M, N] in TMEM; K = 16;
  M = 128 uses all 128 lanes, row i in lane i, column j in column base + j (9.7.16.10.5.4 "Layout D");
  a 16-bit D element sits in the low half of its cell (9.7.16.10.4.1 "tcgen05-packing-formats-mat-d").
  The instruction descriptor (9.7.16.4.2 "tcgen05-instruction-descriptor") and the shared memory
  descriptor (9.7.16.4.1 "tcgen05-shared-memory-descriptor", canonical layouts 9.7.16.3.3) are decoded by
  `warploom.layout.descriptors`; the shapes are Table 39 (9.7.16.2.1 "tcgen05-matrix-shapes").

How the emulator models it (`TensorMemory`, one per CTA, made by the CTA's first tcgen05 op):
- cells: uint32 [128, 512], NaN (0xFFFFFFFF) where nothing wrote; `written` says which cells an mma or a
  tcgen05.st wrote since their allocation. Reading unwritten cells (ld, mma A, accumulate) is an error.
- tcgen05.alloc takes the lowest free run of columns aligned to its size (the hardware's placement is
  unspecified; kernels must use the address it writes to smem); when none is free the warp blocks (a
  `Wait`), which ends in a DeadlockError naming the allocation if nothing frees columns.
- A in TMEM (kind::f16): rows in lanes 0..M-1, the K = 16 16-bit elements of a row packed two per cell
  over 8 columns, element 2j in the low half of column j. This packing is an assumption (the ISA shows
  it only in figures): it matches the little-endian order of a stored bf16 pair (tcgen05.st of
  cvt.rn.bf16x2 results, as FA4 stores P) but is not verified on hardware.
- Every active lane executing tcgen05.mma issues a whole MMA; several lanes issuing into one accumulator
  at once is reported (TmemRaceError) rather than computed.
- An mma computes when the scheduler completes it (after its pipeline predecessor); from issue until a
  tcgen05.commit tracking it has *arrived*, its D cells are "being written" and its smem operand bytes
  are held (SharedMemory.mma_reading, smem.py), so a tcgen05.ld of the accumulator, or a TMA write into the stage,
  before the commit's mbarrier completed is a race error. (The check is of the mbarrier arrival, not of
  happens-before: a warp that reads after the arrival without waiting on the barrier is not caught.)
- tcgen05.ld reads the cells at issue; the registers become readable at the warp's tcgen05.wait::ld
  (reading them earlier is AccumulatorReadError); the cells count as "being read" until then, so an mma
  or st overwriting them is a race. tcgen05.st writes at issue; the cells count as "being written" until
  the warp's tcgen05.wait::st, so an mma or ld of them before is a race.
- tcgen05.fence::before_thread_sync / ::after_thread_sync are ordering points only: the emulator executes
  each warp's ops in order and publishes async results at the points above, so both are no-ops here
  (a missing fence is not detected).

The CTA pair, .cta_group::2 (sources: 9.7.16.7.1 "tcgen05-memory-alloc-manage-instructions", 9.7.16.10.9.1
"tcgen05-mma", 9.7.16.12.1 "tcgen05-commit", Table 39 in 9.7.16.2.1 "tcgen05-matrix-shapes", 9.7.16.5
"tcgen05-issue-granularity"; gpu-facts.md section 4): the pair is two CTAs of one cluster whose %cluster_ctarank
differ only in bit 0, the even one r & ~1 and the odd one r | 1, so the cluster must have an even number of CTAs
(`pair_of`). Every tcgen05 op of a kernel names the same .cta_group (mixing them is a ptxas error): checked when
the kernel is compiled, naming both ops.
- alloc / dealloc / relinquish_alloc_permit.cta_group::2: "one warp from each of the peer CTAs must collectively
  perform the allocation and de-allocation". Modelled per CTA: each CTA's warp allocates in its own TMEM by the
  ::1 rules (and writes the address to its own smem); that the pair agrees is checked where it matters, when a
  pair MMA writes D: the D columns must be allocated in both CTAs' TMEM. Since either CTA's dealloc may free the
  pair's columns, a dealloc.cta_group::2 must happen after every tcgen05.ld / st / mma of both CTAs' TMEM
  (`_check_pair_free`, PairDeallocError): nothing in flight in the peer's columns, and each user warp's last access
  ordered before the dealloc by synchronisation (order.py's happens-before: mbarrier arrive -> wait, tcgen05.commit,
  bar.sync, barrier.cluster), as the ISA's examples and CUTLASS order it (both epilogues, then a cluster barrier or a
  hand-off between the two deallocating warps). relinquish_alloc_permit frees nothing (it only ends the CTA's
  allocations), so it is not part of that check.
- tcgen05.mma.cta_group::2.kind::f16 with M = 256, issued by one thread of either CTA: A [256, K] is rows 0..127
  from the even CTA's smem and rows 128..255 from the odd CTA's, both at the A descriptor's (CTA-relative)
  address, each half a 128 x K operand of that descriptor; B [N, K] is rows 0..N/2-1 from the even CTA's smem
  and N/2..N-1 from the odd CTA's, each an N/2 x K operand of the B descriptor; D [256, N] is rows 0..127 in the
  even CTA's TMEM lanes 0..127 and rows 128..255 in the odd CTA's, at the D address's columns in both. Each CTA's
  share is an `MmaPart`; the ::1 bookkeeping (held smem operand bytes, D cells being written until a commit
  arrives, the accumulate check, the races) applies to both CTAs, and the MMA is in both TensorMemory.mmas
  lists, so a race in either CTA names it. Its pipeline and its commit are the issuing thread's.
- tcgen05.commit (either group) .shared::cluster[.multicast::cluster]: one arrival, once the issuing thread's
  prior MMAs completed, on the mbarrier at bar's CTA-relative offset in every CTA whose rank bit is set in the
  16-bit ctaMask (bits outside the cluster are an error), or without multicast on the one mbarrier bar names (a
  shared::cta address: the issuer's own; shared::cluster: the CTA it points into). The arrival releases the
  tracked MMAs in both CTAs and marks each barrier phase it counts toward as carrying tcgen05 work.
- tcgen05.ld / st / wait / fence act on the executing CTA's own TMEM, whatever the group.

Not modelled (UnknownOpError, never skipped): tcgen05.cp, .shift, .ws, sparse and block-scaled mma, kinds other
than f16, M = 64 (Layout F), M = 128 with cta_group::2 (each CTA holding 64 rows of D), A in TMEM with
cta_group::2, ld/st shapes other than 32x32b, .pack::16b / .unpack::16b, the collector buffer,
disable-output-lane, scale-input-d, the .cta_group forms of TMA (the pair's shared mbarrier). The pair's
alloc is not checked as one collective op (that both warps run it, with the same count, and get the same
columns): only its consequence, the D columns allocated in both CTAs, is.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from warploom.layout.descriptors import ADDRESS_UNIT_SHIFT, Sm100InstrDescriptor, Sm100SmemDescriptor
from warploom.layout.fragments import tcgen05_ldst_registers, tmem_lanes_of_warp
from warploom.layout.tmem import tmem_address, tmem_fields
from warploom.targets import get as get_target

from .compiler import TypeInfo, handles, lanes, per_lane, uniform
from . import order, tmem_fence
from .cluster import DSMEM_RANK_STRIDE
from .errors import (AccumulatorReadError, AsyncLeakError, DivergenceError, EmulationError, MbarrierError,
                     OutOfBoundsError, PairDeallocError, SmemRaceError, TmemError, TmemRaceError, UnknownOpError)
from .core import OpInfo, Wait, WARP, Warp
from .machine import CTA

TARGET = get_target("sm_100a")
GEOMETRY = TARGET.tmem
EMPTY_CELL = np.uint32(0xFFFFFFFF)                           # a NaN as f32: what unwritten cells hold
MMA_K = {"f16": TARGET.mma_k["bf16"]}                        # kind::f16 takes K = 16
ELEMS = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _span(lo: int, n: int) -> str:
    return f"{lo}..{lo + n - 1}" if n > 1 else f"{lo}"


def _where(addr: int, nlanes: int, ncols: int) -> str:
    lane, col = tmem_fields(addr)
    return f"TMEM address 0x{addr:08x} (lanes {_span(lane, nlanes)}, columns {_span(col, ncols)})"


@dataclass
class Allocation:
    """One tcgen05.alloc: columns [start, start + ncols) of all lanes, by `warp`; `freed_by` its dealloc."""
    start: int
    ncols: int
    warp: int
    info: OpInfo
    freed_by: OpInfo | None = None


@dataclass
class MmaPart:
    """One CTA's share of a tcgen05.mma: with .cta_group::1 the issuer's whole MMA; with ::2 the even or the odd CTA
    of the pair (its A rows and B rows, read from its smem; its D rows, in its TMEM lanes 0..127)."""
    tmem: TensorMemory
    a_smem: np.ndarray | None             # absolute (CTA-relative) smem addresses [rows, K] of its A rows; None: TMEM
    b_smem: np.ndarray                    # [N / parts, K]
    reads: np.ndarray                     # smem offsets of every operand byte in this CTA (held until released)


@dataclass
class TmemMma:
    """One tcgen05.mma issued by one thread: what it reads and writes, and where it is in its life."""
    seq: int
    info: OpInfo
    cta: CTA                              # the issuer's CTA
    warp: int
    lane: int
    desc: Sm100InstrDescriptor
    d_addr: int
    accumulate: bool
    a_tmem: int | None                    # TMEM address of A, or None when A comes from smem
    parts: list = None                    # MmaPart per CTA: [issuer] (::1) or [even, odd] (::2)
    done: bool = False                    # computed (the scheduler completed it)
    committed: bool = False               # some tcgen05.commit tracks it
    released: bool = False                # a commit tracking it arrived: D readable, smem and TMEM operands free

    @property
    def rows(self) -> int:
        """Rows of D (= TMEM lanes from 0) in each CTA: M for ::1, M / 2 for the pair."""
        return self.desc.m // len(self.parts)

    def part_in(self, tmem: TensorMemory) -> MmaPart | None:
        return next((p for p in self.parts if p.tmem is tmem), None)

    def __str__(self) -> str:
        if len(self.parts) == 1:
            return f"tcgen05.mma #{self.seq} (issued by warp {self.warp} lane {self.lane}, {self.info.text})"
        return (f"tcgen05.mma.cta_group::2 #{self.seq} (issued by CTA {self.cta.id} warp {self.warp} lane {self.lane}, "
                f"{self.info.text})")


@dataclass
class TmemAccess:
    """An unretired tcgen05.ld or tcgen05.st of one warp: the cells it holds until tcgen05.wait."""
    info: OpInfo
    lanes: slice
    cols: slice
    registers: LoadedRegisters | None = None


class LoadedRegisters:
    """The destination registers of a tcgen05.ld: (32, N) uint32 (or (32,) uint64 for one register),
    readable once the warp executed tcgen05.wait::ld (9.7.16.8.5). Any use before (numpy conversion,
    arithmetic) raises AccumulatorReadError; the wait replaces the SSA value by the array itself."""
    __slots__ = ("value", "ready", "where", "info")

    def __init__(self, value: np.ndarray, where: str, info: OpInfo):
        self.value, self.ready, self.where, self.info = value, False, where, info

    def get(self) -> np.ndarray:
        if not self.ready:
            raise AccumulatorReadError(f"registers loaded by {self.info.text} from {self.where} read before "
                                       "tcgen05.wait::ld: tcgen05.ld is asynchronous, wait for it (tcgen05.wait::ld) "
                                       "before using its destination registers")
        return self.value

    def __array__(self, dtype=None, copy=None):
        v = self.get()
        return v if dtype is None else v.astype(dtype)


def _forward(name: str):
    def op(self, *args):
        return getattr(self.get(), name)(*args)
    return op


for _name in ("add", "sub", "mul", "and", "or", "xor", "floordiv", "mod", "rshift", "lshift", "lt", "le", "eq",
              "ne", "gt", "ge", "radd", "rsub", "rmul", "rand", "ror", "rxor", "getitem", "int", "bool", "index"):
    setattr(LoadedRegisters, f"__{_name}__", _forward(f"__{_name}__"))
LoadedRegisters.__hash__ = None


class TensorMemory:
    """One CTA's Tensor Memory and its tcgen05 bookkeeping (see the module docstring)."""

    def __init__(self, cta: CTA):
        self.cta = cta
        shape = (GEOMETRY.lanes, GEOMETRY.columns)
        self.cells = np.full(shape, EMPTY_CELL, np.uint32)
        self.written = np.zeros(shape, bool)
        self.mma_writing = np.zeros(shape, np.int16)   # D cells of mmas no arrived commit has released yet
        self.mma_reading = np.zeros(shape, np.int16)   # A cells (A in TMEM) of such mmas
        self.ld_pending = np.zeros(shape, np.int16)    # cells of tcgen05.ld not yet retired by tcgen05.wait::ld
        self.st_pending = np.zeros(shape, np.int16)    # cells of tcgen05.st not yet retired by tcgen05.wait::st
        self.owner = np.full(GEOMETRY.columns, -1, np.int32)   # index into self.allocations, -1 = free
        self.allocations: list[Allocation] = []
        self.alloc_warp: int | None = None
        self.last_ncols: int | None = None
        self.relinquished: tuple[int, OpInfo] | None = None
        self.mmas: list[TmemMma] = []                                 # this CTA's, and pair MMAs its peer issued
        self.thread_mmas: dict[tuple[int, int], list[TmemMma]] = {}    # (warp, lane) -> mmas not yet released
        self.pipelines: dict[tuple, TmemMma] = {}                      # (warp, lane, D, M, N) -> last mma
        self.loads: dict[int, list[TmemAccess]] = {}
        self.stores: dict[int, list[TmemAccess]] = {}
        self.users: dict = {}            # warp -> (its TMEM access count at its last ld / st / mma here, that op)

    # ---- addresses, allocation, lane quadrants ----------------------------------------------------------
    def region(self, addr: int, nlanes: int, ncols: int, what: str, note: str = "") -> tuple[slice, slice]:
        """The cells [lanes, columns] an access of nlanes x ncols at `addr` touches, after checking they exist
        (lanes 0..127, columns 0..511) and are allocated (9.7.16.1, 9.7.16.1.2); `note` ends an unallocated-column
        message (the CTA pair's hint)."""
        lane, col = tmem_fields(addr)
        where = _where(addr, nlanes, ncols)
        if lane + nlanes > GEOMETRY.lanes or col + ncols > GEOMETRY.columns:
            raise TmemError(f"{what} touches {where}, outside Tensor Memory (lanes 0..{GEOMETRY.lanes - 1}, columns "
                            f"0..{GEOMETRY.columns - 1}): check the lane (bits 31..16) and column (bits 15..0) of "
                            "the address")
        owners = self.owner[col:col + ncols]
        if (owners < 0).any():
            bad = col + int(np.flatnonzero(owners < 0)[0])
            if not self.allocations:
                raise TmemError(f"{what} uses {where} before any tcgen05.alloc: allocate the columns first (one warp), "
                                "then a barrier, then read the address tcgen05.alloc wrote to shared memory" + note)
            freed = [a for a in self.allocations if a.freed_by is not None and a.start <= bad < a.start + a.ncols]
            live = self._live()
            if freed:
                f = freed[-1]
                raise TmemError(f"{what} uses {where} after tcgen05.dealloc: column {bad} belonged to columns "
                                f"{_span(f.start, f.ncols)}, freed by warp {f.warp} at {f.freed_by.text}; "
                                f"allocated now: {live}. Free TMEM only after its last use (and its tcgen05.wait "
                                "or commit)" + note)
            raise TmemError(f"{what} uses {where}, but column {bad} is outside the allocated columns ({live}): "
                            "allocate enough columns, or check the column offset added to the base address" + note)
        return slice(lane, lane + nlanes), slice(col, col + ncols)

    def _live(self) -> str:
        live = [a for a in self.allocations if a.freed_by is None]
        return ", ".join(f"columns {_span(a.start, a.ncols)}" for a in live) or "none"

    @staticmethod
    def quadrant(warp: Warp, addr: int, nlanes: int, what: str) -> None:
        """9.7.16.8.1: warp (index % 4) = q reaches lanes 32q..32q+31 only (layout.fragments.tmem_lanes_of_warp)."""
        allowed = tmem_lanes_of_warp(warp.index)
        lane, _ = tmem_fields(addr)
        if lane < allowed.start or lane + nlanes > allowed.stop:
            q = allowed.start // GEOMETRY.lanes_per_warp
            raise TmemError(f"{what} of TMEM lanes {_span(lane, nlanes)} (address 0x{addr:08x}) by warp {warp.index}: "
                            f"warp {warp.index} is warp {q} of its warpgroup and may access TMEM lanes "
                            f"{allowed.start}..{allowed.stop - 1} only; set the address lane to "
                            f"32 * (warp index % 4) = {allowed.start}")

    # ---- tcgen05.alloc / dealloc / relinquish_alloc_permit: 9.7.16.7.1 -----------------------------------
    def alloc(self, warp: Warp, info: OpInfo, dst: int, ncols: int) -> Wait | None:
        """Allocate ncols columns and write the base address to smem `dst`; a Wait while no room is free."""
        if self.relinquished is not None:
            w, at = self.relinquished
            raise TmemError(f"tcgen05.alloc of {ncols} columns after warp {w} relinquished the CTA's allocation permit "
                            f"({at.text}): relinquish only after the CTA's last tcgen05.alloc")
        if ncols < GEOMETRY.alloc_min_columns or ncols > GEOMETRY.alloc_max_columns or ncols & (ncols - 1):
            raise TmemError(f"tcgen05.alloc of {ncols} columns: the count must be a power of two in "
                            f"{GEOMETRY.alloc_min_columns}..{GEOMETRY.alloc_max_columns}")
        if self.alloc_warp is not None and self.alloc_warp != warp.index:
            raise TmemError(f"tcgen05.alloc by warp {warp.index}, but warp {self.alloc_warp} allocated before: one "
                            "warp of the CTA performs every allocation and deallocation (with .cta_group::2: one in "
                            "each CTA of the pair)")
        if self.last_ncols is not None and ncols > self.last_ncols:
            raise TmemError(f"tcgen05.alloc of {ncols} columns after an allocation of {self.last_ncols}: the column "
                            "count may not increase from one allocation to the next within a CTA")
        if dst % 4:
            raise OutOfBoundsError(f"tcgen05.alloc writes the TMEM address to smem 0x{dst:x}, which is not 4-byte "
                                   "aligned")
        off = self.cta.shared.offset(dst, 4, "tcgen05.alloc (the TMEM address it writes)")
        # lowest free run, aligned to its size (the hardware's placement is not specified: kernels must use
        # the address written to smem, never assume a column)
        start = next((s for s in range(0, GEOMETRY.columns, ncols) if (self.owner[s:s + ncols] < 0).all()), None)
        if start is None:
            free = int((self.owner < 0).sum())
            return Wait(lambda: any((self.owner[s:s + ncols] < 0).all() for s in range(0, GEOMETRY.columns, ncols)),
                        f"{ncols} free TMEM columns for tcgen05.alloc ({free} of {GEOMETRY.columns} free; allocated: "
                        f"{self._live()}; tcgen05.alloc blocks until another allocation is freed)")
        self.alloc_warp = warp.index
        self.last_ncols = ncols
        self.owner[start:start + ncols] = len(self.allocations)
        self.allocations.append(Allocation(start, ncols, warp.index, info))
        self.cells[:, start:start + ncols] = EMPTY_CELL
        self.written[:, start:start + ncols] = False
        self.cta.shared.bytes[off:off + 4] = np.frombuffer(np.uint32(tmem_address(0, start)).tobytes(), np.uint8)
        self.cta.shared.written[off:off + 4] = True
        self.cta.stats["tmem_allocs"] += 1
        return None

    def dealloc(self, warp: Warp, info: OpInfo, taddr: int, ncols: int, group: int = 1) -> None:
        lane, col = tmem_fields(taddr)
        match = [a for a in self.allocations if a.start == col and lane == 0]
        live = [a for a in match if a.freed_by is None]
        if not live:
            if match:
                a = match[-1]
                raise TmemError(f"tcgen05.dealloc of {_where(taddr, GEOMETRY.lanes, ncols)}: columns "
                                f"{_span(a.start, a.ncols)} were already freed by warp {a.warp} at {a.freed_by.text}")
            raise TmemError(f"tcgen05.dealloc of {_where(taddr, GEOMETRY.lanes, ncols)}: that is not the base address "
                            f"of an allocation (allocated: {self._live()}): pass the address tcgen05.alloc wrote")
        a = live[0]
        if ncols != a.ncols:
            raise TmemError(f"tcgen05.dealloc of {ncols} columns at {_where(taddr, GEOMETRY.lanes, ncols)}, but "
                            f"tcgen05.alloc ({a.info.text}) allocated {a.ncols}: free the whole allocation")
        if warp.index != a.warp:
            raise TmemError(f"tcgen05.dealloc by warp {warp.index} of columns {_span(a.start, a.ncols)} allocated by "
                            f"warp {a.warp}: one warp of the CTA performs every allocation and deallocation")
        cols = slice(a.start, a.start + a.ncols)
        for name, busy, why in (("an unreleased tcgen05.mma writes", self.mma_writing, "its tcgen05.commit's mbarrier"),
                                ("an unreleased tcgen05.mma reads", self.mma_reading, "its tcgen05.commit's mbarrier"),
                                ("a tcgen05.ld not yet waited for reads", self.ld_pending, "tcgen05.wait::ld"),
                                ("a tcgen05.st not yet waited for writes", self.st_pending, "tcgen05.wait::st")):
            if busy[:, cols].any():
                raise TmemRaceError(f"tcgen05.dealloc of columns {_span(a.start, a.ncols)} while {name} them: wait for "
                                    f"it ({why}) before freeing the columns")
        if group == 2:
            self._check_pair_free(warp, a)
        a.freed_by = info
        self.owner[cols] = -1
        self.cells[:, cols] = EMPTY_CELL
        self.written[:, cols] = False

    def _check_pair_free(self, warp: Warp, a: Allocation) -> None:
        """tcgen05.dealloc.cta_group::2: "one warp from each of the peer CTAs must collectively perform the allocation
        and de-allocation" (9.7.16.7.1), so either CTA's dealloc may free the pair's columns in both CTAs. It must
        therefore happen after every use of the pair's TMEM in both CTAs: nothing in flight in the peer's columns
        (the checks above cover this CTA's), and every tcgen05.ld / st / mma of any warp on either CTA's TMEM ordered
        before it by a synchronisation (order.py: mbarrier arrive -> wait, tcgen05.commit, bar.sync,
        barrier.cluster). The PTX ISA's examples and CUTLASS's sm100 kernels (both CTAs' epilogues, then a cluster
        barrier or a peer hand-off between the allocating warps, then the dealloc) satisfy it; a CTA that frees after
        syncing only its own epilogue does not."""
        cols = slice(a.start, a.start + a.ncols)
        me = self.cta
        span = _span(a.start, a.ncols)
        head = f"tcgen05.dealloc.cta_group::2 of columns {span} by warp {warp.index} of {_in_pair(me)}"
        fix = ("with .cta_group::2 one warp of each CTA frees the pair's columns together (PTX ISA 9.7.16.7.1), so "
               "each CTA's dealloc must come after the last TMEM use of both CTAs: both CTAs' epilogues finish their "
               "tcgen05.ld (tcgen05.wait::ld, tcgen05.fence::before_thread_sync), then a cluster barrier "
               "(barrier.cluster.arrive.release / wait.acquire) or an mbarrier hand-off between the two deallocating "
               "warps, then the dealloc")
        for c in pair_of(me, "tcgen05.dealloc.cta_group::2"):
            tm = c.tmem
            if tm is None:
                continue
            whose = "its own" if c is me else f"the peer {_in_pair(c)}'s"
            if c is not me:
                for name, busy in (("an unreleased tcgen05.mma writes", tm.mma_writing),
                                   ("an unreleased tcgen05.mma reads", tm.mma_reading),
                                   ("a tcgen05.ld not yet waited for reads", tm.ld_pending),
                                   ("a tcgen05.st not yet waited for writes", tm.st_pending)):
                    if busy[:, cols].any():
                        me.launch.report(PairDeallocError(f"{head} while {name} {whose} TMEM columns {span}: {fix}"))
                        return
            late = order.unknown(warp.knows, tm.users)
            if late:
                user, (_, last) = late[0]
                who = f"warp {user.index}" + ("" if user.cta is me else f" of CTA {user.cta.id} (rank {user.cta.rank})")
                me.launch.report(PairDeallocError(
                    f"{head} while {whose} TMEM may still be in use: {who}'s {last.text} is not ordered before this "
                    f"dealloc (no synchronisation from that warp after it reaches warp {warp.index}); {fix}"))
                return

    def relinquish(self, warp: Warp, info: OpInfo) -> None:
        if self.relinquished is None:
            self.relinquished = (warp.index, info)

    # ---- tcgen05.ld / st / wait: 9.7.16.8.3-5 -----------------------------------------------------------
    def ld(self, warp: Warp, info: OpInfo, taddr: int, n: int, scalar: bool) -> LoadedRegisters:
        what = f"tcgen05.ld.32x32b.x{n}"
        if tmem_fields(taddr)[0] < GEOMETRY.lanes:
            self.quadrant(warp, taddr, WARP, what)
        ls, cs = self.region(taddr, WARP, n, what)
        where = _where(taddr, WARP, n)
        self._race(ls, cs, what, where, mma_writing=True, st_pending=True)
        unwritten = ~self.written[ls, cs]
        if unwritten.any():
            i, j = (int(x[0]) for x in np.nonzero(unwritten))
            raise TmemError(f"{what} reads {where}, but nothing wrote lane {ls.start + i} column {cs.start + j} since "
                            "its allocation (no tcgen05.mma or tcgen05.st): load only what an MMA or a store produced")
        value = self.cells[ls, cs].copy()
        value = value[:, 0].astype(np.uint64) if scalar else value
        regs = LoadedRegisters(value, where, info)
        self.ld_pending[ls, cs] += 1
        self.loads.setdefault(warp.index, []).append(TmemAccess(info, ls, cs, regs))
        self.users[warp] = (order.access(warp), info)
        self.cta.stats["tcgen05_ld"] += 1
        return regs

    def st(self, warp: Warp, info: OpInfo, taddr: int, values: np.ndarray) -> None:
        n = values.shape[1]
        what = f"tcgen05.st.32x32b.x{n}"
        if tmem_fields(taddr)[0] < GEOMETRY.lanes:
            self.quadrant(warp, taddr, WARP, what)
        ls, cs = self.region(taddr, WARP, n, what)
        self._race(ls, cs, what, _where(taddr, WARP, n), mma_writing=True, mma_reading=True, ld_pending=True)
        self.cells[ls, cs] = values
        self.written[ls, cs] = True
        self.st_pending[ls, cs] += 1
        self.stores.setdefault(warp.index, []).append(TmemAccess(info, ls, cs))
        self.users[warp] = (order.access(warp), info)
        self.cta.stats["tcgen05_st"] += 1

    def wait(self, warp: Warp, kind: str) -> None:
        """tcgen05.wait::ld / ::st: the warp's loads (stores) so far are complete."""
        pending, book = (self.ld_pending, self.loads) if kind == "ld" else (self.st_pending, self.stores)
        for acc in book.pop(warp.index, []):
            pending[acc.lanes, acc.cols] -= 1
            if acc.registers is not None:
                acc.registers.ready = True
                env = warp.env
                for i, v in enumerate(env):
                    if v is acc.registers:
                        env[i] = acc.registers.value

    def _race(self, ls: slice, cs: slice, what: str, where: str, *, mma_writing=False, mma_reading=False,
              ld_pending=False, st_pending=False) -> None:
        checks = [(mma_writing, self.mma_writing, "a tcgen05.mma still writes", self._mma_hint),
                  (mma_reading, self.mma_reading, "a tcgen05.mma still reads", self._mma_hint),
                  (ld_pending, self.ld_pending, "a tcgen05.ld not yet retired by tcgen05.wait::ld reads",
                   lambda i, j: f"{self._access_at(self.loads, i, j)}: execute tcgen05.wait::ld after the load (and "
                                "synchronise) before overwriting its cells"),
                  (st_pending, self.st_pending, "a tcgen05.st not yet retired by tcgen05.wait::st writes",
                   lambda i, j: f"{self._access_at(self.stores, i, j)}: execute tcgen05.wait::st after the store (and "
                                "synchronise) before reading its cells")]
        for on, busy, why, hint in checks:
            if on:
                hit = busy[ls, cs]
                if hit.any():
                    i, j = (int(x[0]) for x in np.nonzero(hit))
                    lane, col = ls.start + i, cs.start + j
                    raise TmemRaceError(f"{what} of {where} touches lane {lane} column {col}, which {why}: "
                                        f"{hint(lane, col)}")

    def _mma_hint(self, lane: int, col: int) -> str:
        def holds(cells: tuple[slice, slice]) -> bool:
            return cells[0].start <= lane < cells[0].stop and cells[1].start <= col < cells[1].stop

        for m in self.mmas:
            if not m.released and (holds(self._d_cells(m)) or m.a_tmem is not None and holds(self._a_cells(m))):
                state = "not yet tracked by any tcgen05.commit" if not m.committed else (
                    "its tcgen05.commit has not arrived yet" if m.done else "not complete")
                return (f"{m}, {state}; wait on the mbarrier its tcgen05.commit arrives on (then "
                        "tcgen05.fence::after_thread_sync) before touching its TMEM")
        return "an in-flight tcgen05.mma"

    @staticmethod
    def _access_at(book: dict, lane: int, col: int) -> str:
        for w, accs in book.items():
            for a in accs:
                if a.lanes.start <= lane < a.lanes.stop and a.cols.start <= col < a.cols.stop:
                    return f"{a.info.text} of warp {w}"
        return "an unretired access"

    # ---- tcgen05.mma kind::f16, cta_group::1 and ::2: 9.7.16.10.9.1 ----------------------------------------
    @staticmethod
    def _d_cells(m: TmemMma) -> tuple[slice, slice]:
        """D's cells in each CTA's TMEM: lanes 0..rows-1 (row i in lane i, 9.7.16.10.5.4 "Layout D"), the D address's
        columns; the same cells in both CTAs of a pair."""
        _, col = tmem_fields(m.d_addr)
        return slice(0, m.rows), slice(col, col + m.desc.n)

    @staticmethod
    def _a_cells(m: TmemMma) -> tuple[slice, slice]:
        _, col = tmem_fields(m.a_tmem)
        return slice(0, m.rows), slice(col, col + MMA_K["f16"] // 2)

    def mma(self, warp: Warp, lane: int, info: OpInfo, desc: Sm100InstrDescriptor, d_addr: int, a_operand,
            a_is_tmem: bool, b_bits: int, accumulate: bool, group: int = 1) -> None:
        """Issue one tcgen05.mma from lane `lane` of `warp` of this CTA: check its operands in every CTA it touches
        (this one; with group 2 the even and the odd CTA of the pair, see the module docstring), hold them (smem
        operand bytes, D cells) until a commit tracking it arrives, and schedule its computation after its pipeline
        predecessor."""
        k = MMA_K["f16"]
        pair = group == 2
        what = "tcgen05.mma.cta_group::2" if pair else "tcgen05.mma"
        ctas = pair_of(self.cta, what) if pair else [self.cta]
        for c in ctas:
            self.cta.cluster.check_alive(self.cta, c, what)
        tmems = [tmem_of(c) for c in ctas]
        rows, b_rows = desc.m // len(ctas), desc.n // len(ctas)     # A and D rows, B rows, per CTA
        if tmem_fields(d_addr)[0]:
            span = (f"with M = {desc.m} (.cta_group::2) each CTA's {rows} rows of the accumulator span" if pair else
                    f"with M = {desc.m} (Layout D) the accumulator spans")
            raise TmemError(f"{what} with D at {_where(d_addr, rows, desc.n)}: {span} all 128 lanes, so the D address "
                            "must have lane 0")
        dwhere = _where(d_addr, rows, desc.n)
        note = (" (.cta_group::2: the pair's MMA writes D at the same columns of both CTAs' Tensor Memory, so the "
                "warp of each CTA must allocate them, with tcgen05.alloc.cta_group::2 of the same column count)"
                if pair else "")
        for i, tm in enumerate(tmems):
            where = f" of {_in_pair(tm.cta)}" if pair else ""
            half = f"D rows {_span(i * rows, rows)} of {desc.m} x {desc.n}, in {_in_pair(tm.cta)}" if pair else \
                f"D, {desc.m} x {desc.n}"
            dl, dc = tm.region(d_addr, rows, desc.n, f"{what} ({half})", note)
            tm._race(dl, dc, f"{what} (D)", dwhere + where, ld_pending=True, st_pending=True)
            if accumulate:
                cold = ~tm.written[dl, dc] & (tm.mma_writing[dl, dc] == 0)
                if cold.any():
                    li, j = (int(x[0]) for x in np.nonzero(cold))
                    raise TmemError(f"{what} accumulates (enable-input-d true) into {dwhere}{where}, but nothing wrote "
                                    f"lane {li} column {dc.start + j} yet: the first MMA into an accumulator must "
                                    "overwrite it (enable-input-d false)")
        a_tmem = None
        if a_is_tmem:                   # (.cta_group::1 only: the handler refuses A in TMEM for the pair)
            if desc.a_major != "K":
                raise EmulationError(f"{what} with A in TMEM and the transpose-A bit set: A in Tensor Memory is "
                                     "row-major (9.7.16.10.2), clear bit 15 of the instruction descriptor")
            if tmem_fields(a_operand)[0]:
                raise TmemError(f"{what} with A at {_where(a_operand, desc.m, k // 2)}: A spans all {desc.m} lanes, "
                                "so its address must have lane 0")
            a_tmem = a_operand
            _, col = tmem_fields(a_operand)
            al, ac = slice(0, rows), slice(col, col + k // 2)
            self.region(a_operand, desc.m, k // 2, f"{what} (A in TMEM, {desc.m} x {k} 16-bit elements)")
            self._race(al, ac, f"{what} (A)", _where(a_operand, desc.m, k // 2), st_pending=True)
            if not self.written[al, ac].all():
                raise TmemError(f"{what} reads A from {_where(a_operand, desc.m, k // 2)}, which nothing wrote: "
                                "store A (tcgen05.st, then tcgen05.wait::st) before the MMA")
        parts = []
        for i, (c, tm) in enumerate(zip(ctas, tmems)):
            a_smem = None if a_is_tmem else smem_operand(c, a_operand, rows, k, 2, desc.a_major, "A")
            b_smem = smem_operand(c, b_bits, b_rows, k, 2, desc.b_major, "B")
            reads = _operand_bytes(c, [x for x in (a_smem, b_smem) if x is not None], 2)
            part = MmaPart(tm, a_smem, b_smem, reads)
            self._check_operands(part, i, rows, b_rows, what, pair)
            parts.append(part)
        # the operands are now held: D cells "being written", smem and TMEM A "being read", until a commit arrives
        m = TmemMma(len(self.mmas), info, self.cta, warp.index, lane, desc, d_addr, accumulate, a_tmem, parts)
        dcells = self._d_cells(m)
        for p in parts:
            c = p.tmem.cta
            c.shared.mma_reading[p.reads] += 1
            c.shared.unread[p.reads] = False
            p.tmem.mma_writing[dcells] += 1
            if p.tmem is not self:      # the peer lists it too, so that its races and TMA checks find it
                p.tmem.mmas.append(m)
        if m.a_tmem is not None:
            self.mma_reading[self._a_cells(m)] += 1
        self.mmas.append(m)
        self.thread_mmas.setdefault((warp.index, lane), []).append(m)
        n = order.access(warp)
        for p in parts:                 # the MMA uses the TMEM of every CTA it writes D in
            p.tmem.users[warp] = (n, info)
        key = (warp.index, lane, d_addr, desc.m, desc.n)
        prev = self.pipelines.get(key)          # 9.7.16.6.2: mma -> mma, same accumulator and shape, in order
        self.pipelines[key] = m
        self.cta.stats["tcgen05_mma"] += 1
        into = f"{dwhere} of both CTAs of the pair" if pair else dwhere
        self.cta._async(info, f"{what} #{m.seq} of warp {warp.index} lane {lane} into {into}",
                        lambda: self._compute(m), eligible=None if prev is None else (lambda: prev.done))

    def _check_operands(self, part: MmaPart, i: int, rows: int, b_rows: int, what: str, pair: bool) -> None:
        """The smem operand bytes of one CTA's share must have been written by a TMA copy that has landed."""
        cta = part.tmem.cta
        for bad, why in ((cta.shared.tma_pending[part.reads] > 0, "which an in-flight TMA copy has not written yet"),
                         (~cta.shared.written[part.reads], "which no TMA copy has written yet")):
            hit = np.flatnonzero(bad)
            if not hit.size:
                continue
            off = int(part.reads[hit[0]])
            writer = f" ({cta.shared.writer_of(off)})" if cta.shared.tma_pending[off] else ""
            if not pair:
                where = f"smem 0x{cta.base + off:x}" + ("" if writer else f" (byte {off} of dynamic smem)")
                raise SmemRaceError(f"{what} reads {where}, {why}{writer}: wait on the stage's full barrier before "
                                    "issuing the MMA")
            a_bytes = () if part.a_smem is None else _operand_bytes(cta, [part.a_smem], 2)
            operand = (f"A rows {_span(i * rows, rows)}" if np.isin(off, a_bytes) else
                       f"B rows {_span(i * b_rows, b_rows)}")
            if cta is self.cta:
                fix = "wait on the stage's full barrier before issuing the MMA"
            else:
                fix = ("the issuer may issue the pair's MMA only once the peer's operands landed too: the peer waits "
                       "on its full barrier and then arrives remotely (mapa, mbarrier.arrive.shared::cluster) on a "
                       "barrier of the issuer's CTA, which the issuer waits on before the MMA")
            raise SmemRaceError(f"{what} reads smem 0x{cta.base + off:x} (byte {off} of dynamic smem) of "
                                f"{_in_pair(cta)}, its {operand} of the pair's MMA, {why}{writer}: {fix}")

    def _compute(self, m: TmemMma) -> None:
        desc = m.desc
        a_rows, b_rows = [], []
        for p in m.parts:               # the issuer's share, or the even then the odd CTA's
            cta = p.tmem.cta
            smem16 = cta.shared.bytes.view(np.uint16)
            if m.a_tmem is not None:
                al, ac = self._a_cells(m)
                cells = p.tmem.cells[al, ac]
                halves = np.stack([cells & 0xFFFF, cells >> 16], axis=-1).reshape(m.rows, -1)   # low half = lower k
                a_rows.append(halves.astype(np.uint16).view(ELEMS[desc.a_dtype]))
            else:
                a_rows.append(smem16[(p.a_smem - cta.base) // 2].view(ELEMS[desc.a_dtype]))
            b_rows.append(smem16[(p.b_smem - cta.base) // 2].view(ELEMS[desc.b_dtype]))
        a = a_rows[0] if len(a_rows) == 1 else np.concatenate(a_rows)        # [M, K]
        b = b_rows[0] if len(b_rows) == 1 else np.concatenate(b_rows)        # [N, K]
        sign = (-1.0 if desc.negate_a else 1.0) * (-1.0 if desc.negate_b else 1.0)
        # Products of 16-bit floats are exact in float64 and a K = 16 sum nearly always is; it is rounded once to
        # the accumulator type (the tensor core's internal order and rounding are not modelled).
        d = (a.astype(np.float64) @ b.astype(np.float64).T) * sign
        dl, dc = self._d_cells(m)
        for i, p in enumerate(m.parts):   # rows i * rows.. of D go to part i's TMEM lanes 0..rows-1
            tm, di = p.tmem, d[i * m.rows:(i + 1) * m.rows]
            if m.accumulate:
                old = tm.cells[dl, dc]
                di = di + (old.view(np.float32) if desc.d_dtype == "f32" else
                           (old & 0xFFFF).astype(np.uint16).view(np.float16)).astype(np.float64)
            if desc.d_dtype == "f32":
                tm.cells[dl, dc] = di.astype(np.float32).view(np.uint32)
            else:                               # 16-bit D: low half of the cell, upper half zero (9.7.16.10.4.1)
                tm.cells[dl, dc] = di.astype(np.float16).view(np.uint16).astype(np.uint32)
            tm.written[dl, dc] = True
        m.done = True

    # ---- tcgen05.commit: 9.7.16.12.1 -----------------------------------------------------------------------
    def commit(self, warp: Warp, lane: int, info: OpInfo, bar: int, multicast: int | None = None,
               group: int = 1) -> None:
        """One arrival (count 1), once every tcgen05.mma this thread issued before has completed, on the mbarrier
        `bar` names (shared::cta: this CTA's; shared::cluster: the CTA it points into), or with .multicast::cluster
        on the mbarrier at bar's CTA-relative offset in each CTA whose %cluster_ctarank bit is set in the 16-bit
        ctaMask `multicast`. The arrival releases the MMAs it tracks (their smem and TMEM holds, in both CTAs of a
        pair) and marks each barrier's phase as carrying tcgen05 work."""
        cta = self.cta
        cl = cta.cluster
        name = "tcgen05.commit.cta_group::2" if group == 2 else "tcgen05.commit"
        if group == 2:
            pair_of(cta, name)
        if multicast is None:
            if bar < DSMEM_RANK_STRIDE:                 # shared::cta, or this CTA's own shared::cluster address
                cta.mbar.get(bar)
                targets = [(cta, bar)]
            else:
                targets = [cl.remote_mbarrier(cta, bar, name)]
        else:
            if not 0 < multicast < (1 << 16) or multicast >> cl.size:
                raise OutOfBoundsError(f"{name}.multicast::cluster with ctaMask 0x{multicast:04x}: bit r selects the "
                                       f"CTA with %cluster_ctarank r, and the cluster {cl.shape} has CTA ranks "
                                       f"0..{cl.size - 1}, so the mask must be a non-zero subset of "
                                       f"0x{(1 << cl.size) - 1:x}")
            local = cl.cta_part(cta, bar, f"{name} mbarrier")
            targets = []
            for r in range(cl.size):
                if multicast >> r & 1:
                    t = cl.ctas[r]
                    cl.check_alive(cta, t, f"{name} multicast to CTA rank {r}")
                    if local not in t.mbar.table:
                        raise MbarrierError(f"{name} multicast (ctaMask 0x{multicast:04x}) arrives on the mbarrier at "
                                            f"smem 0x{local:x} (byte {local - t.base} of dynamic smem) of CTA {t.id} "
                                            f"(rank {t.rank}), which is not initialised there: every CTA of the mask "
                                            "inits its barrier at the same offset, then fence.mbarrier_init.release"
                                            ".cluster and a barrier.cluster arrive/wait before the commit")
                    targets.append((t, local))
        tracked = [m for m in self.thread_mmas.get((warp.index, lane), []) if not m.released]
        knows = dict(warp.knows)        # the arrival hands on what the committing thread knew (its MMAs included)
        self.thread_mmas[(warp.index, lane)] = tracked
        for m in tracked:
            m.committed = True
        if targets == [(cta, bar)]:
            dest = f"mbarrier 0x{bar:x}"
        else:
            dest = (f"mbarrier 0x{targets[0][1]:x} of CTA rank{'s' if len(targets) > 1 else ''} "
                    f"{', '.join(str(t.rank) for t, _ in targets)}")
        what = (f"{name} of warp {warp.index} lane {lane} (tracks "
                f"{', '.join(f'#{m.seq}' for m in tracked) or 'no'} tcgen05.mma) -> {dest}")

        def arrive():
            for m in tracked:
                self._release(m)
            for t, local in targets:
                if t.exited:
                    raise OutOfBoundsError(f"{what} arrives after CTA {t.id} (rank {t.rank}) exited: its shared memory "
                                           "is gone; keep every CTA the commit signals alive until it waited on the "
                                           "barrier")
                b = t.mbar.get(local)
                b.tc_phases.add(b.phase)        # its waiters must fence::after_thread_sync
                t.mbar.arrive(local, 1, knows=knows)

        cta._async(info, what, arrive, eligible=(lambda: all(m.done for m in tracked)) if tracked else None)

    def _release(self, m: TmemMma) -> None:
        if m.released:
            return
        m.released = True
        dcells = self._d_cells(m)
        for p in m.parts:
            p.tmem.cta.shared.mma_reading[p.reads] -= 1
            p.tmem.mma_writing[dcells] -= 1
        if m.a_tmem is not None:
            m.parts[0].tmem.mma_reading[self._a_cells(m)] -= 1

    def smem_reader(self, offset: int) -> str | None:
        """Which unreleased tcgen05.mma (this CTA's, or a pair MMA reading this CTA's share) holds smem byte `offset`
        (for the TMA race message), or None."""
        for m in self.mmas:
            part = m.part_in(self)
            if not m.released and part is not None and np.isin(offset, part.reads):
                state = ("no tcgen05.commit tracks it yet" if not m.committed else
                         "its tcgen05.commit has not arrived yet")
                return f"{m} ({state})"
        return None

    # ---- exit ------------------------------------------------------------------------------------------
    def check_warp_exit(self, warp: Warp) -> None:
        cta = self.cta
        live = [a for a in self.allocations if a.freed_by is None and a.warp == warp.index]
        if live:
            a = live[0]
            raise TmemError(f"warp {warp.index} exits with TMEM columns {_span(a.start, a.ncols)} still allocated (by "
                            f"{a.info.text}): all Tensor Memory must be freed with tcgen05.dealloc by the allocating "
                            "warp before the kernel exits").locate(cta.id, warp.index, a.info.text)
        leaked = [m for key, ms in self.thread_mmas.items() if key[0] == warp.index for m in ms if not m.committed]
        if leaked:
            raise AsyncLeakError(f"warp {warp.index} exits with {', '.join(str(m) for m in leaked)} that no "
                                 "tcgen05.commit tracks: commit them to an mbarrier and wait on it").locate(
                cta.id, warp.index, leaked[0].info.text)
        stores = self.stores.get(warp.index)
        if stores:
            raise AsyncLeakError(f"warp {warp.index} exits with {stores[0].info.text} not retired by tcgen05.wait::st"
                                 ).locate(cta.id, warp.index, stores[0].info.text)


def tmem_of(cta: CTA) -> TensorMemory:
    if cta.tmem is None:
        cta.tmem = TensorMemory(cta)
    return cta.tmem


def pair_of(cta: CTA, what: str) -> list[CTA]:
    """[even, odd]: the CTA pair `cta` belongs to for .cta_group::2, the CTAs of its cluster whose %cluster_ctarank
    differ from its own only in bit 0 (r & ~1 and r | 1; 9.7.16.10.9.1 "tcgen05-mma", "peer CTA"). A cluster with an
    odd number of CTAs leaves a CTA without its peer: an EmulationError (the launch is wrong, not an op the emulator
    lacks, so not UnknownOpError)."""
    cl = cta.cluster
    if cl.size % 2:
        raise EmulationError(f"{what} in CTA {cta.id} (rank {cta.rank}), whose cluster {cl.shape} has {cl.size} "
                             f"CTA{'s' if cl.size > 1 else ''}: .cta_group::2 acts on the CTA pair (%cluster_ctarank "
                             "r & ~1 and r | 1), which needs a cluster of an even number of CTAs; launch with a "
                             "cluster such as (2, 1, 1), or use .cta_group::1")
    even = cta.rank & ~1
    return [cl.ctas[even], cl.ctas[even + 1]]


def _in_pair(cta: CTA) -> str:
    return f"CTA {cta.id} (rank {cta.rank}, the {'odd' if cta.rank & 1 else 'even'} CTA of the pair)"


def smem_operand(cta: CTA, bits: int, mn: int, k: int, eb: int, major: str, which: str) -> np.ndarray:
    """Absolute smem addresses [mn, k] of a tcgen05.mma operand read through the sm_100 shared memory
    descriptor `bits` (9.7.16.4.1; canonical layouts 9.7.16.3.3), cached per launch."""
    key = ("tcgen05", bits, mn, k, eb, major, cta.base)
    cache = cta.launch.address_cache
    if key not in cache:
        try:
            desc = Sm100SmemDescriptor.decode(bits)
        except ValueError as e:
            raise EmulationError(f"tcgen05.mma operand {which} smem descriptor 0x{bits:x}: {e}") from None
        if desc.lbo_mode:
            raise EmulationError(f"tcgen05.mma operand {which} smem descriptor 0x{bits:x} sets bit 52 (absolute LBO "
                                 "address mode), which sm_100a does not have (sm_103a only)")
        addr = cta.shared.operand_addresses(desc, bits, mn, k, eb, major, f"tcgen05.mma operand {which} smem")
        cache[key] = addr
    return cache[key]


def _operand_bytes(cta: CTA, addrs: list, eb: int) -> np.ndarray:
    key = ("tcgen05 bytes",) + tuple(id(a) for a in addrs)
    cache = cta.launch.address_cache
    if key not in cache:
        offs = np.concatenate([a.reshape(-1) for a in addrs]) - cta.base
        cache[key] = (np.unique(np.concatenate([offs + i for i in range(eb)])), addrs)   # keep addrs alive
    return cache[key][0]


# ---- op handlers ------------------------------------------------------------------------------------------

def _enum(attr) -> str:
    """'#nvvm.cta_group<cta_1>' -> 'cta_1'."""
    s = str(attr)
    return s[s.index("<") + 1:s.rindex(">")] if "<" in s else s


def _cta_group(c, op, info: OpInfo) -> int:
    """The op's .cta_group, 1 or 2 (the NVVM ops' `group` / `ctaGroup` attribute; absent means cta_1, the ops'
    default), after checking that every tcgen05 op of the kernel names the same one: "all tcgen05 instructions
    within a kernel must specify the same value of the .cta_group qualifier" (9.7.16.7.1, 9.7.16.10.9.1), which ptxas
    enforces (gpu-facts.md section 4). Checked as the kernel is compiled, so both ops are named whichever runs
    first. The error is a plain EmulationError: the kernel is invalid PTX, not an op form the emulator lacks
    (UnknownOpError), and no TMEM state is misused yet (TmemError)."""
    group = 1
    for name in ("group", "ctaGroup"):
        if name in op.attributes:
            value = _enum(op.attributes[name])
            if value not in ("cta_1", "cta_2"):
                raise UnknownOpError(f"{op.name} with .cta_group {value}: only cta_1 and cta_2 exist")
            group = int(value[-1])
    # the compiler object is made once per kernel: the first tcgen05 op naming a group is remembered on it
    first = getattr(c, "tcgen05_group", None)
    if first is None:
        c.tcgen05_group = (group, info)
    elif first[0] != group:
        raise EmulationError(f"{op.name} with .cta_group::{group}, but {first[1].text} earlier in the kernel has "
                             f".cta_group::{first[0]}: every tcgen05 instruction of a kernel must name the same "
                             ".cta_group (ptxas rejects the mix); use .cta_group::2 throughout for a CTA-pair kernel")
    return group


def _whole_warp(w: Warp, what: str) -> None:
    if not w.mask.all():
        raise DivergenceError(f"{what} is .sync.aligned: every lane of the warp must execute it (lanes "
                              f"{np.flatnonzero(~w.mask).tolist()} are inactive)")


def _shared_pointer(op, value, what: str) -> None:
    space = TypeInfo(value.type).space
    if space not in (3, 7):
        raise UnknownOpError(f"{what} through address space {space}: only shared pointers (3, or 7 for the CTA's own "
                             "shared::cluster window) are modelled, not generic addressing")


@handles("nvvm.tcgen05.alloc")
def _alloc(c, op, info):
    # 9.7.16.7.1 tcgen05.alloc.cta_group::{1,2}.sync.aligned.shared::cta.b32 [dst], nCols. With ::2 "one warp from
    # each of the peer CTAs must collectively perform the allocation": modelled as each CTA's warp allocating in its
    # own TMEM by the ::1 rules (the pair's agreement is checked when a pair MMA writes D, see TensorMemory.mma)
    group = _cta_group(c, op, info)
    v = op.opview
    _shared_pointer(op, v.addr, "tcgen05.alloc")
    dst, n = c.slot(v.addr), c.slot(v.nCols)

    def gen(w):
        _whole_warp(w, "tcgen05.alloc")
        e = w.env
        addr = uniform(e[dst], w.mask, "tcgen05.alloc destination")
        ncols = uniform(e[n], w.mask, "tcgen05.alloc column count")
        if group == 2:
            pair_of(w.cta, "tcgen05.alloc.cta_group::2")
        tm = tmem_of(w.cta)
        w.last_op = info
        tmem_fence.access(w, w.mask, info, "tcgen05.alloc")
        while (wait := tm.alloc(w, info, addr, ncols)) is not None:
            yield wait
        yield None
    return True, gen


@handles("nvvm.tcgen05.dealloc")
def _dealloc(c, op, info):
    # 9.7.16.7.1 tcgen05.dealloc.cta_group::{1,2}.sync.aligned.b32 taddr, nCols (::2: each CTA of the pair frees
    # its own columns, with the ::1 checks, an unreleased pair MMA's D included)
    group = _cta_group(c, op, info)
    v = op.opview
    t, n = c.slot(v.taddr), c.slot(v.nCols)

    def fn(w):
        _whole_warp(w, "tcgen05.dealloc")
        if group == 2:
            pair_of(w.cta, "tcgen05.dealloc.cta_group::2")
        e = w.env
        tmem_fence.access(w, w.mask, info, "tcgen05.dealloc")
        tmem_of(w.cta).dealloc(w, info, uniform(e[t], w.mask, "tcgen05.dealloc address"),
                               uniform(e[n], w.mask, "tcgen05.dealloc column count"), group)
    return False, fn


@handles("nvvm.tcgen05.relinquish_alloc_permit")
def _relinquish(c, op, info):
    # 9.7.16.7.1 tcgen05.relinquish_alloc_permit.cta_group::{1,2}.sync.aligned (per CTA)
    group = _cta_group(c, op, info)

    def fn(w):
        _whole_warp(w, "tcgen05.relinquish_alloc_permit")
        if group == 2:
            pair_of(w.cta, "tcgen05.relinquish_alloc_permit.cta_group::2")
        tmem_of(w.cta).relinquish(w, info)
    return False, fn


@handles("nvvm.tcgen05.fence")
def _fence(c, op, info):
    # 9.7.16.11.1 tcgen05.fence::before_thread_sync / ::after_thread_sync: order async tcgen05 ops against the
    # thread-synchronising ops around them. The emulator runs each warp's ops in order and publishes async results
    # at commit arrivals and tcgen05.wait; what it checks is that the fences are there (tmem_fence.access / signal:
    # TmemFenceError).
    kind = _enum(op.attributes["kind"])
    if kind not in ("before", "after"):
        raise UnknownOpError(f"tcgen05.fence <{kind}>: only before_thread_sync / after_thread_sync exist")

    def fn(w):
        tmem_fence.fence(w, w.mask, kind == "before")
    return False, fn


@handles("nvvm.tcgen05.wait")
def _wait(c, op, info):
    # 9.7.16.8.5 tcgen05.wait::ld / ::st .sync.aligned: the warp's prior loads (stores) are complete
    kind = {"load": "ld", "store": "st"}.get(_enum(op.attributes["kind"]))
    if kind is None:
        raise UnknownOpError(f"tcgen05.wait {op.attributes['kind']}: only <load> and <store> exist")

    def fn(w):
        _whole_warp(w, f"tcgen05.wait::{kind}")
        if w.cta.tmem is not None:
            w.cta.tmem.wait(w, kind)
    return False, fn


def _ldst_shape(op, count: int) -> int:
    shape = _enum(op.attributes["shape"])
    if shape != "shape_32x32b":
        raise UnknownOpError(f"{op.name} shape {shape}: only 32x32b is modelled (16x64b, 16x128b, 16x256b, "
                             "16x32bx2 fragments are not)")
    for flag in ("pack", "unpack"):
        if flag in op.attributes:
            raise UnknownOpError(f"{op.name} with .{flag}::16b: not modelled")
    try:
        tcgen05_ldst_registers("32x32b", count)         # .x<count>: one register per repeat
    except ValueError as e:
        raise EmulationError(f"{op.name} with {count} registers: {e}") from None
    return count


@handles("nvvm.tcgen05.ld")
def _ld(c, op, info):
    # 9.7.16.8.3 tcgen05.ld.sync.aligned.32x32b.xN.b32: thread t of the warp gets lane (taddr.lane + t),
    # columns taddr.col .. +N-1, one 32-bit register each
    v = op.opview
    t = TypeInfo(op.results[0].type)
    if t.kind == "vector" and t.elem == "i32":
        count, scalar = t.count, False
    elif t.kind == "int" and t.width == 32:
        count, scalar = 1, True
    else:
        raise UnknownOpError(f"tcgen05.ld into {op.results[0].type}: only i32 and vector<N x i32> are modelled")
    n = _ldst_shape(op, count)
    a = c.slot(v.tmemAddr)
    r = c.slot(op.results[0])

    def fn(w):
        _whole_warp(w, "tcgen05.ld")
        tmem_fence.access(w, w.mask, info, "tcgen05.ld")
        taddr = uniform(w.env[a], w.mask, "tcgen05.ld address")
        w.env[r] = tmem_of(w.cta).ld(w, info, taddr, n, scalar)
    return False, fn


@handles("nvvm.tcgen05.st")
def _st(c, op, info):
    # 9.7.16.8.4 tcgen05.st.sync.aligned.32x32b.xN.b32: the mirror of tcgen05.ld
    v = op.opview
    t = TypeInfo(v.val.type)
    if t.kind == "vector" and t.elem == "i32":
        count = t.count
    elif t.kind == "int" and t.width == 32:
        count = 1
    else:
        raise UnknownOpError(f"tcgen05.st of {v.val.type}: only i32 and vector<N x i32> are modelled")
    n = _ldst_shape(op, count)
    a, val = c.slot(v.tmemAddr), c.slot(v.val)

    def fn(w):
        _whole_warp(w, "tcgen05.st")
        tmem_fence.access(w, w.mask, info, "tcgen05.st")
        e = w.env
        taddr = uniform(e[a], w.mask, "tcgen05.st address")
        values = np.asarray(lanes(e[val])).astype(np.uint32).reshape(WARP, n)
        tmem_of(w.cta).st(w, info, taddr, values)
    return False, fn


_IDESCS: dict = {}


def _instr_descriptor(bits: int, group: int = 1) -> Sm100InstrDescriptor:
    """The kind::f16 instruction descriptor `bits` (9.7.16.4.2) of a .cta_group::`group` MMA, checked against
    Table 39 (9.7.16.2.1: ::1 takes M 64/128, ::2 M 128/256), cached."""
    key = (bits, group)
    if key not in _IDESCS:
        try:
            d = Sm100InstrDescriptor.decode(bits, "f16")
        except ValueError as e:
            _IDESCS[key] = EmulationError(f"tcgen05.mma instruction descriptor 0x{bits:08x}: {e}")
        else:
            if d.sparse:
                err = UnknownOpError(f"tcgen05.mma instruction descriptor 0x{bits:08x} sets the sparsity bit: sparse "
                                     "MMA (tcgen05.mma.sp) is not modelled")
            elif d.max_shift:
                err = EmulationError(f"tcgen05.mma instruction descriptor 0x{bits:08x} sets a maximum shift (bits "
                                     "30..31), which only tcgen05.mma.ws uses")
            elif d.d_dtype == "f16" and "bf16" in (d.a_dtype, d.b_dtype):
                err = EmulationError(f"tcgen05.mma instruction descriptor 0x{bits:08x}: bf16 inputs accumulate into "
                                     "f32 only (an f16 D takes f16 inputs)")
            elif group == 1 and d.m != 128 or group == 2 and d.m == 128:
                err = UnknownOpError(f"tcgen05.mma instruction descriptor 0x{bits:08x}: M = {d.m}; only M = 128 "
                                     "(Layout D, all 128 lanes) is modelled for cta_group::1" if group == 1 else
                                     f"tcgen05.mma.cta_group::2 instruction descriptor 0x{bits:08x}: M = 128 (each CTA "
                                     "of the pair holding 64 rows of D) is not modelled; only M = 256 (128 rows in "
                                     "each CTA's lanes 0..127) is")
            else:
                err = None
                try:
                    TARGET.check_mma_shape(d.m, d.n, d.a_dtype, group)
                except ValueError as e:
                    err = EmulationError(f"tcgen05.mma instruction descriptor 0x{bits:08x}: {e}")
            _IDESCS[key] = err or d
    d = _IDESCS[key]
    if isinstance(d, EmulationError):
        raise type(d)(d.detail)
    return d


@handles("nvvm.tcgen05.mma")
def _mma(c, op, info):
    # 9.7.16.10.9.1 tcgen05.mma.cta_group::{1,2}.kind::f16 [d-tmem], a-desc|[a-tmem], b-desc, idesc, enable-input-d
    v = op.opview
    group = _cta_group(c, op, info)
    kind = _enum(op.attributes["kind"])
    if kind != "f16":
        raise UnknownOpError(f"tcgen05.mma kind::{kind}: only kind::f16 (f16/bf16 inputs) is modelled")
    if "collectorOp" in op.attributes and _enum(op.attributes["collectorOp"]) != "discard":
        raise UnknownOpError(f"tcgen05.mma collector usage {op.attributes['collectorOp']}: only the default "
                             "(collector::a::discard) is modelled")
    if v.aShift or v.scaleInputD is not None or v.disableOutputLane is not None:
        raise UnknownOpError("tcgen05.mma with .ashift, scale-input-d or disable-output-lane: not modelled")
    a_type = TypeInfo(v.matrixA.type)
    a_is_tmem = a_type.kind == "ptr"
    if a_is_tmem and a_type.space != 6:
        raise UnknownOpError(f"tcgen05.mma with A through address space {a_type.space}: A is an smem descriptor "
                             "(i64) or a Tensor Memory address (!llvm.ptr<6>)")
    if a_is_tmem and group == 2:
        raise UnknownOpError("tcgen05.mma.cta_group::2 with A in Tensor Memory: not modelled (only A and B from "
                             "shared memory descriptors, for the CTA pair)")
    d, a, b, idesc, en = (c.slot(x) for x in (v.matrixD, v.matrixA, v.matrixB, v.idesc, v.enableInputD))

    def fn(w):
        e = w.env
        tm = tmem_of(w.cta)
        issued = per_lane(e[d], w.mask)
        if len(issued) > 1 and len({daddr for _, daddr in issued}) < len(issued):
            lane, daddr = issued[0]
            desc = _instr_descriptor(int(lanes(e[idesc])[lane]), group)
            raise TmemRaceError(f"{len(issued)} lanes of warp {w.index} issue tcgen05.mma into "
                                f"{_where(daddr, desc.m // group, desc.n)} at once: "
                                "tcgen05.mma has single-thread semantics, so every active lane starts a whole MMA and "
                                "their accumulations race; issue it from one elected lane (nvvm.elect.sync)")
        tmem_fence.access(w, w.mask, info, "tcgen05.mma")
        for lane, daddr in issued:                      # single-thread semantics: every active lane issues one
            desc = _instr_descriptor(int(lanes(e[idesc])[lane]), group)
            tm.mma(w, lane, info, desc, daddr, int(lanes(e[a])[lane]), a_is_tmem, int(lanes(e[b])[lane]),
                   bool(lanes(e[en])[lane]), group)
    return False, fn


@handles("nvvm.tcgen05.commit")
def _commit(c, op, info):
    # 9.7.16.12.1 tcgen05.commit.cta_group::{1,2}.mbarrier::arrive::one[.shared::cluster][.multicast::cluster].b64
    # [bar]{, ctaMask}: TensorMemory.commit (the barrier in this CTA, the CTA a shared::cluster address names, or
    # every CTA of the 16-bit mask)
    v = op.opview
    group = _cta_group(c, op, info)
    _shared_pointer(op, v.addr, "tcgen05.commit")
    bar = c.slot(v.addr)
    mask = c.slot(v.multicastMask) if v.multicastMask is not None else None

    def gen(w):
        e = w.env
        tm = tmem_of(w.cta)
        for lane, addr in per_lane(e[bar], w.mask):     # single-thread semantics: every active lane commits
            multicast = None if mask is None else int(lanes(e[mask])[lane]) & 0xFFFF
            tm.commit(w, lane, info, addr, multicast, group)
        w.last_op = info
        yield None
    return True, gen


@handles("nvvm.tcgen05.mma_smem_desc")
def _smem_desc(c, op, info):
    # the NVVM op builds the 9.7.16.4.1 descriptor from fields already >> 4 (address, LBO, SBO), the base offset,
    # the LBO mode and the 3-bit swizzle code (gpu-facts.md section 4; checked against upstream MLIR in
    # tests/unit/test_descriptors.py)
    v = op.opview
    slots = [c.slot(x) for x in (v.startAddr, v.leadingDimOffset, v.strideDimOffset, v.baseOffset,
                                 v.leadingDimMode, v.swizzleMode)]
    r = c.slot(op.results[0])
    from warploom.layout.swizzle import from_sm100_code

    def fn(w):
        e = w.env
        out = np.zeros(WARP, np.uint64)
        values = [lanes(e[s]) for s in slots]
        for lane in np.flatnonzero(w.mask):
            addr, lbo, sbo, base, mode, swz = (int(x[lane]) for x in values)
            for name, val in (("start address", addr), ("LBO", lbo), ("SBO", sbo)):
                if val >= 1 << 14:
                    raise EmulationError(f"tcgen05.mma_smem_desc {name} field {val:#x} does not fit its 14 bits (the "
                                         "op takes the byte value >> 4)")
            try:       # the fields count 16-byte units (descriptors.ADDRESS_UNIT_SHIFT); the descriptor takes bytes
                out[lane] = Sm100SmemDescriptor(addr << ADDRESS_UNIT_SHIFT, lbo << ADDRESS_UNIT_SHIFT,
                                                sbo << ADDRESS_UNIT_SHIFT, from_sm100_code(swz), base, mode).encode()
            except ValueError as err:
                raise EmulationError(f"tcgen05.mma_smem_desc: {err}") from None
        e[r] = out
    return False, fn

