"""One CTA's shared memory: its bytes, who owns each byte now, and the generic-proxy ld/st.shared that reach it.

Shared memory is one uint8 array of the launch's dynamic smem size at window address `base` (by default 16-aligned
but not 1024-aligned, so the kernel's run-time round-up is exercised), filled with 0xFF first (NaN as bf16/f16).
Beside the bytes, per byte: the in-flight TMA copies writing it, whether anything wrote it, the unretired MMAs
(wgmma groups, unreleased tcgen05.mma) reading it, whether a copy wrote it that nobody read yet (and which copy, in
which fill of its stage), the TMA stores still to read it, and the warp whose generic st.shared wrote it with no
fence.proxy.async since. The async units (tma.py, wgmma.py, tcgen05.py) set and check these; the checks of the
generic proxy (ld/st.shared::{cta,cluster}, PTX ISA "ld", "st") are here.
"""
from __future__ import annotations

import numpy as np

from warploom.layout import canonical_element_address

from .core import WARP
from .errors import OutOfBoundsError, SmemRaceError, UnknownOpError

SMEM_BASE = 0x210                      # 16-B aligned, deliberately not 1024-B aligned


class SharedMemory:
    """The bytes of one CTA's dynamic shared memory and their ownership (see the module docstring)."""

    def __init__(self, cta, base: int, size: int):
        self.cta, self.base, self.size = cta, base, size
        self.bytes = np.full(size, 0xFF, np.uint8)
        self.tma_pending = np.zeros(size, np.int16)     # in-flight TMA copies writing each byte
        self.written = np.zeros(size, bool)              # bytes some TMA copy has landed in
        self.mma_reading = np.zeros(size, np.int16)     # unretired wgmma / unreleased tcgen05.mma operand bytes
        self.unread = np.zeros(size, bool)               # bytes a TMA copy wrote (or will) that no MMA read yet
        # TMA stores (9.7.9.25 cp.async.bulk.tensor.global.shared::cta): bytes they still have to read; bytes the
        # generic proxy (st.shared) wrote with no fence.proxy.async by the writing warp since (-1: fenced or never),
        # so that an async-proxy read of them is caught
        self.bulk_reading = np.zeros(size, np.int16)
        self.unfenced = np.full(size, -1, np.int16)
        self.writer = np.full(size, -1, np.int32)        # which copy (index into copy_names) wrote each byte
        self.writer_fill = np.full(size, -1, np.int64)   # the phase of that copy's mbarrier when it was issued
        self.copy_names: list[str] = []
        self.copies: list[tuple[int, int, str]] = []     # in-flight TMA loads: smem offsets [lo, hi), what

    def offset(self, addr: int, nbytes: int, what: str) -> int:
        off = addr - self.base
        if off < 0 or off + nbytes > self.size:
            raise OutOfBoundsError(f"{what} touches smem 0x{addr:x}..0x{addr + nbytes - 1:x}; the launch's dynamic "
                                   f"smem is 0x{self.base:x}..0x{self.base + self.size - 1:x} ({self.size} B): "
                                   "the plan's offsets exceed smem_bytes, or the base was not rounded up")
        return off

    # ---- generic-proxy ld/st.shared::{cta,cluster} (PTX ISA "Data movement and conversion instructions: ld, st") --
    def store(self, addr: np.ndarray, data: np.ndarray, mask: np.ndarray, align: int, cluster_space: bool,
              what: str, warp: int | None = None) -> None:
        """Write data[lane] (uint8 rows) at addr[lane] (shared::cta, or shared::cluster when cluster_space) for the
        active lanes. Bytes an in-flight TMA copy writes, an unretired wgmma reads, or a TMA store has still to
        read are a race. The bytes stay unfenced for the async proxy until `warp` runs fence.proxy.async."""
        cta = self.cta
        nbytes = data.shape[1]
        act = np.flatnonzero(mask)
        a = addr[act].astype(np.int64)
        self._check_align(a, act, align, what)
        for t, idx, offs in cta.cluster.resolve_lanes(cta, a, nbytes, what, cluster_space):
            cells = offs[:, None] + np.arange(nbytes)
            sm = t.shared
            sm.check_generic_access(cta, cells, what, write=True)
            sm.bytes[cells] = data[act[idx]]
            sm.written[cells] = True
            sm.unfenced[cells] = -2 if warp is None else warp

    def load(self, addr: np.ndarray, mask: np.ndarray, nbytes: int, align: int, cluster_space: bool,
             what: str) -> np.ndarray:
        """The bytes (32, nbytes) at addr[lane] for the active lanes (zeros elsewhere). Reading bytes an in-flight TMA
        copy still writes, or that nothing has written, is an error."""
        cta = self.cta
        out = np.zeros((WARP, nbytes), np.uint8)
        act = np.flatnonzero(mask)
        a = addr[act].astype(np.int64)
        self._check_align(a, act, align, what)
        for t, idx, offs in cta.cluster.resolve_lanes(cta, a, nbytes, what, cluster_space):
            cells = offs[:, None] + np.arange(nbytes)
            sm = t.shared
            sm.check_generic_access(cta, cells, what, write=False)
            out[act[idx]] = sm.bytes[cells]
            sm.unread[cells] = False               # loaded data consumed by ld.shared (not only by MMAs)
        return out

    @staticmethod
    def _check_align(a: np.ndarray, act: np.ndarray, align: int, what: str) -> None:
        bad = np.flatnonzero(a % max(align, 1))
        if bad.size:
            raise OutOfBoundsError(f"{what} at 0x{int(a[bad[0]]):x} (lane {act[bad[0]]}) is not {align}-byte aligned: "
                                   "shared memory accesses are aligned to their size")

    def check_generic_access(self, by, cells: np.ndarray, what: str, write: bool) -> None:
        """A generic ld/st.shared by CTA `by` of these cells (of this CTA's smem): not under an in-flight TMA copy;
        a write not under an MMA's or a TMA store's read; a read only of bytes something wrote."""
        t = self.cta
        where = "" if t is by else f" of CTA {t.id} (rank {t.rank})"
        pending = self.tma_pending[cells]
        if pending.any():
            off = int(cells.reshape(-1)[np.argmax(pending.reshape(-1))])
            raise SmemRaceError(f"{what} {'writes' if write else 'reads'} smem 0x{self.base + off:x}{where}, which an "
                                f"in-flight TMA copy still writes ({self.writer_of(off)}): wait on the copy's mbarrier "
                                "first")
        if write:
            reading = self.mma_reading[cells]
            if reading.any():
                off = int(cells.reshape(-1)[np.argmax(reading.reshape(-1))])
                raise SmemRaceError(f"{what} writes smem 0x{self.base + off:x}{where} while an unretired wgmma group "
                                    f"still reads it ({self.reader_of(off)}): wgmma.wait_group first")
            storing = self.bulk_reading[cells]
            if storing.any():
                off = int(cells.reshape(-1)[np.argmax(storing.reshape(-1))])
                raise SmemRaceError(f"{what} writes smem 0x{self.base + off:x}{where} while a TMA store still reads it: "
                                    "the thread that issued the store must cp.async.bulk.wait_group.read (and a "
                                    "barrier tell the writers) before the buffer is written again")
        else:
            unwritten = ~self.written[cells]
            if unwritten.any():
                off = int(cells.reshape(-1)[np.argmax(unwritten.reshape(-1))])
                raise SmemRaceError(f"{what} reads smem 0x{self.base + off:x}{where} (byte {off} of dynamic smem), which "
                                    "nothing has written yet: a missing barrier (bar.sync, barrier.cluster or an "
                                    "mbarrier wait) between the write and this read")

    def fence_proxy_async(self, warp: int) -> None:
        """fence.proxy.async(.shared::cta) by `warp`: its generic-proxy smem writes so far are ordered before later
        async-proxy accesses (PTX ISA "membar/fence", proxy fences)."""
        self.unfenced[self.unfenced == warp] = -1

    # ---- who holds a byte (for messages) ------------------------------------------------------------------
    def reader_of(self, offset: int) -> str:
        return self.cta.wgmma.reader_of(offset)

    def writer_of(self, offset: int) -> str:
        for lo, hi, what in self.copies:
            if lo <= offset < hi:
                return what
        return "a TMA copy"

    # ---- MMA operands through smem descriptors ---------------------------------------------------------------
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
