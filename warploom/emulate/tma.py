"""One CTA's Tensor Memory Accelerator: tiled loads into shared memory (multicast too) and tiled stores out of it.

- A TMA load (PTX ISA 9.7.9.25 cp.async.bulk.tensor, tile mode, global -> shared::cluster) reads its box from the
  global numpy array at issue, and lands after a scheduler-chosen delay: the bytes are written at the swizzled
  *absolute* smem addresses, then complete_tx on its mbarrier. With .multicast::cluster the box lands at the same
  offset in every CTA of the mask, complete_tx on each CTA's barrier.
- A TMA store (cp.async.bulk.tensor.global.shared::cta.tile.bulk_group) reads the box at a later step and writes it
  with the elements outside the tensor dropped, in the issuing thread's bulk async-group (9.7.9.27-28:
  commit_group, wait_group and wait_group.read).
The races they can take part in (a copy into bytes an MMA still reads, over unread data, a store of unfenced generic
writes, an exit before a store read its smem) are checked here, against the ownership kept in smem.py.
"""
from __future__ import annotations

import numpy as np

from warploom.layout import swizzle

from .cluster import DSMEM_RANK_STRIDE
from .core import OpInfo, Wait
from .errors import MbarrierError, OutOfBoundsError, SmemRaceError, UnknownOpError

TMA_SMEM_ALIGN = 128                   # PTX ISA 9.7.9.25: the cp.async.bulk.tensor smem address is 128-B aligned


class TmaUnit:
    """The TMA copies one CTA issues, and its threads' bulk async-groups of stores."""

    def __init__(self, cta):
        self.cta = cta
        self.bulk_open: dict = {}          # (warp, lane) -> TMA stores issued since the last commit_group
        self.bulk_groups: dict = {}        # (warp, lane) -> committed groups (lists of stores), oldest first

    # ---- TMA: PTX ISA 9.7.9.25 cp.async.bulk.tensor (tile mode, global -> shared::cluster) -------------
    def load(self, info: OpInfo, dst: int, tmap_addr: int, mbar: int, coords: list[int],
             multicast: int | None = None, warp: int | None = None) -> None:
        """Issue a TMA load. dst is a shared::cluster address (this CTA's own shared::cta addresses included),
        mbar a shared::cta address. multicast is the 16-bit ctaMask of .multicast::cluster, or None; warp is the
        issuing warp (the mbarrier's visibility to it; trace records)."""
        cta = self.cta
        tmap = cta.launch.tensor_map_at(tmap_addr)
        spec, array = tmap.spec, tmap.array
        if multicast is None and dst < DSMEM_RANK_STRIDE:
            bar = cta.mbar.get(mbar, warp)
            if bar.visible is not None and not bar.fenced:
                # the copy's complete_tx is performed by the async proxy, which sees the init only after a
                # fence.mbarrier_init (PTX ISA 9.7.13.15 "mbarrier.init"; 9.7.9.25 cp.async.bulk.tensor)
                raise MbarrierError(f"TMA load of {spec.name!r} signals mbarrier at smem 0x{mbar:x} (byte "
                                    f"{mbar - cta.base} of dynamic smem), initialised by warp {bar.init_warp} with no "
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
                targets = [cta]                    # the common case: this CTA's own smem
                local = dst
            else:
                target, local = cta.cluster.resolve(cta, dst, nbytes, f"TMA load of tensor map {spec.name!r}")
                if target is not cta:
                    raise UnknownOpError(f"TMA load of {spec.name!r} into shared::cluster 0x{dst:x}, the smem of CTA "
                                         f"{target.id} (rank {target.rank}), without multicast: the mbarrier operand "
                                         "is this CTA's, so the copy could not signal it; use a multicast mask "
                                         "(.cta_group forms are not modelled)")
                cta.mbar.get(mbar)
                targets = [cta]
        else:
            # 9.7.9.25 .multicast::cluster: bit r of the 16-bit ctaMask selects the CTA whose %cluster_ctarank is r
            # (MLIR's op documentation says %ctaid); the box lands at dst's CTA-relative offset in each destination
            # CTA, and the complete_tx signal goes to the mbarrier at mbar's CTA-relative offset in each.
            cl = cta.cluster
            if not 0 < multicast < (1 << 16) or multicast >> cl.size:
                raise OutOfBoundsError(f"TMA load of {spec.name!r} with multicast mask 0x{multicast:04x}: the cluster "
                                       f"{cl.shape} has CTA ranks 0..{cl.size - 1}, so the mask must be a non-zero "
                                       f"subset of 0x{(1 << cl.size) - 1:x}")
            local = cl.cta_part(cta, dst, f"TMA multicast destination of {spec.name!r}")
            targets = [cl.ctas[r] for r in range(cl.size) if multicast >> r & 1]
            for t in targets:
                cl.check_alive(cta, t, f"TMA multicast of {spec.name!r} box {coords}")
                if mbar not in t.mbar.table:
                    raise MbarrierError(f"TMA multicast of {spec.name!r} box {coords} signals the mbarrier at smem "
                                        f"0x{mbar:x} (byte {mbar - t.base} of dynamic smem) of CTA {t.id} (rank "
                                        f"{t.rank}), which is not initialised there: every destination CTA inits "
                                        "its barrier, then fence.mbarrier_init.release.cluster and a "
                                        "barrier.cluster arrive/wait before any CTA multicasts")
            cta.stats["tma_multicast"] += 1
        if local % TMA_SMEM_ALIGN:
            raise OutOfBoundsError(f"TMA destination smem 0x{local:x} is not {TMA_SMEM_ALIGN}-byte aligned "
                                   "(cp.async.bulk.tensor requires it); align the region")
        data = None
        for t in targets:
            into = "" if multicast is None else f" multicast into CTA {t.id} (rank {t.rank})"
            off = t.shared.offset(local, nbytes, f"TMA load of tensor map {spec.name!r}{into}")
            busy = np.flatnonzero(t.shared.mma_reading[off:off + nbytes])
            reader = t.tmem.smem_reader(off + int(busy[0])) if busy.size and t.tmem is not None else None
            if reader is not None:     # a tcgen05.mma (tcgen05.py) holds the bytes until a commit arrival releases them
                raise SmemRaceError(f"TMA load of {spec.name!r} box {coords}{into} writes smem 0x{local:x}.."
                                    f"0x{local + nbytes - 1:x} while {reader} still reads byte 0x{local + int(busy[0]):x}: "
                                    "wait on the ring's empty barrier before reusing a stage, and arrive on it with "
                                    "tcgen05.commit (which arrives once the MMAs reading the stage completed)")
            if busy.size:
                raise SmemRaceError(f"TMA load of {spec.name!r} box {coords}{into} writes smem 0x{local:x}.."
                                    f"0x{local + nbytes - 1:x} while an unretired wgmma group still reads byte "
                                    f"0x{local + int(busy[0]):x} ({t.shared.reader_of(off + int(busy[0]))}): wait on the "
                                    "ring's empty barrier before reusing a stage, and arrive on it only after "
                                    "wgmma.wait_group retired the reads" + (
                                        " (with multicast: in every destination CTA, so the empty barrier must "
                                        "count the consumers of all of them)" if into else ""))
            inflight = np.flatnonzero(t.shared.tma_pending[off:off + nbytes])
            if inflight.size:
                raise SmemRaceError(f"TMA load of {spec.name!r} box {coords}{into} writes smem 0x{local:x}.."
                                    f"0x{local + nbytes - 1:x} while another in-flight TMA copy still writes byte "
                                    f"0x{local + int(inflight[0]):x} ({t.shared.writer_of(off + int(inflight[0]))}): "
                                    "the stage was reissued before its previous copy landed and was consumed")
            phys = sw.apply(np.arange(local, local + nbytes, dtype=np.int64)) - t.base
            unread = np.flatnonzero(t.shared.unread[phys]) if cta.launch.check_unread else ()
            if len(unread):
                byte = int(phys[unread[0]])
                raise SmemRaceError(f"TMA load of {spec.name!r} box {coords}{into} overwrites smem 0x{t.base + byte:x}, "
                                    f"which {t.shared.copy_names[t.shared.writer[byte]]} wrote and no MMA has read yet: the stage "
                                    "was handed back to the producer before its consumer used it (check which stage "
                                    "the consumer frees, and when)")
            if data is None:
                data = self._read_box(array, spec, coords).reshape(-1).view(np.uint8)
            self._into(t, info, spec, coords, data, local, off, nbytes, phys, mbar, into, warp)
        cta.stats["tma_loads"] += 1

    def _into(self, t, info: OpInfo, spec, coords, data, local: int, off: int, nbytes: int, phys,
              mbar: int, into: str, warp: int | None) -> None:
        """One destination of a TMA load: bytes pending now (at smem offsets `phys`, swizzled), landing later in
        CTA t, then complete_tx there."""
        t.shared.tma_pending[off:off + nbytes] += 1
        what = f"TMA load of {spec.name!r} box {coords} -> smem 0x{local:x}{into} (mbarrier 0x{mbar:x})"
        t.shared.unread[phys] = True
        t.shared.writer[phys] = len(t.shared.copy_names)
        t.shared.copy_names.append(what)
        # the fill of the stage this copy belongs to: the phase its mbarrier is in now (a multicast from a CTA that
        # is ahead may land while this CTA's release of the previous fill is one arrival short)
        bar = t.mbar.table.get(mbar)
        t.shared.writer_fill[phys] = -1 if bar is None else bar.phase
        record = (off, off + nbytes, what)
        t.shared.copies.append(record)
        if t.trace is not None:
            t.note(warp, "copy", f"{what}, {nbytes} B")

        def land():
            if t.exited:
                raise OutOfBoundsError(f"{what} lands after CTA {t.id} exited: its shared memory is gone; keep the "
                                       "CTA alive until its copies landed (wait on the mbarrier, and barrier.cluster "
                                       "before exit when other CTAs write into it)")
            t.shared.bytes[phys] = data
            t.shared.written[phys] = True
            t.shared.tma_pending[off:off + nbytes] -= 1
            t.shared.copies.remove(record)
            t.mbar.complete_tx(mbar, nbytes)
            if t.trace is not None:
                bar = t.mbar.table[mbar]
                t.note(warp, "landed", f"TMA load of {spec.name!r} box {coords} landed: complete_tx {nbytes} B on "
                                       f"mbarrier 0x{mbar:x} (now phase {bar.phase}, {bar.tx} tx B pending)")

        t._async(info, what, land)

    # ---- TMA stores: PTX ISA 9.7.9.25 cp.async.bulk.tensor.global.shared::cta.tile.bulk_group ---------------
    def store(self, info: OpInfo, src: int, tmap_addr: int, coords: list[int], warp: int, lane: int) -> None:
        """Issue a TMA store of one box from smem `src` (shared::cta) through the tensor map at `tmap_addr`: the async
        proxy reads the box later (before the issuing thread's wait_group.read passes) and writes global memory,
        elements outside the tensor dropped."""
        cta = self.cta
        sm = cta.shared
        tmap = cta.launch.tensor_map_at(tmap_addr)
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
        cta.shared.offset(src, nbytes, what)
        phys = sw.apply(np.arange(src, src + nbytes, dtype=np.int64)) - cta.base
        for bad, why in ((~sm.written[phys], "nothing has written"),
                         (sm.tma_pending[phys] > 0, "an in-flight TMA load still writes"),
                         (sm.unfenced[phys] != -1, "a generic st.shared by warp {w} wrote with no fence.proxy.async "
                                                     "by that warp since (the async proxy may not see the data)")):
            hit = np.flatnonzero(bad)
            if hit.size:
                byte = int(phys[hit[0]])
                raise SmemRaceError(f"{what} reads smem 0x{cta.base + byte:x} (byte {byte} of dynamic smem), which "
                                    f"{why.format(w=int(sm.unfenced[byte]))}: write the tile, fence.proxy.async in "
                                    "every writing thread, then a barrier, then the store")
        sm.bulk_reading[phys] += 1
        record = {"what": what, "read": False, "written": False}
        self.bulk_open.setdefault((warp, lane), []).append(record)
        cta.stats["tma_stores"] += 1
        if cta.trace is not None:
            cta.note(warp, "copy", f"{what}, {nbytes} B")

        def land():
            if cta.exited:
                raise OutOfBoundsError(f"{what} reads smem after CTA {cta.id} exited: wait for the store "
                                       "(cp.async.bulk.wait_group.read 0) before the CTA exits")
            data = sm.bytes[phys].copy().view(array.dtype).reshape(spec.box[::-1])
            sm.bulk_reading[phys] -= 1
            record["read"] = True
            self._write_box(array, spec, coords, data)
            record["written"] = True
        cta._async(info, what, land)

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

    def check_at_exit(self) -> None:
        """A CTA whose TMA stores have still to read its smem may not exit (the smem is released at exit)."""
        stores = [r for rs in self.bulk_open.values() for r in rs]
        stores += [r for gs in self.bulk_groups.values() for g in gs for r in g]
        left = [r["what"] for r in stores if not r["read"]]
        if left:
            raise SmemRaceError(f"CTA {self.cta.id} exits while {left[0]} has not read its smem yet: "
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
