"""TMA (cp.async.bulk.tensor) helpers: load into shared memory, store from it, bulk groups, descriptor prefetch.

    tma_load(b, dst, tmap, bar.addr, [x, y])   # global -> smem, completes on the mbarrier (complete_tx)
    tma_store(b, tmap, src, [x, y]); bulk_commit_group(); bulk_wait_group(0, read=True)
    prefetch_tensormap(tmap)

`tmap` is the kernel's tensor-map parameter (!llvm.ptr, passed by value as a
grid constant); smem pointers are !llvm.ptr<3>; coordinates are i32, innermost first.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import nvvm

from .builder import Builder


def tma_load(b: Builder, dst: ir.Value, tmap: ir.Value, mbar: ir.Value, coords: list[ir.Value],
             multicast: int | None = None) -> None:
    """One TMA box from global memory to `dst`. The op writes to shared::cluster (address space 7),
    so the CTA-local pointer is cast first (the verifier refuses a ptr<3> destination). `multicast` (a 16-bit
    ctaMask, .multicast::cluster): the box lands at dst's offset in every CTA of the mask, each signalling its
    mbarrier at mbar's offset."""
    mask = None if multicast is None else b.const(multicast, b.i16)
    nvvm.CpAsyncBulkTensorGlobalToSharedClusterOp(b.addrspacecast(dst, 7), tmap, coords, mbar, [],
                                                  multicastMask=mask)


def tma_store(b: Builder, tmap: ir.Value, src: ir.Value, coords: list[ir.Value]) -> None:
    """One TMA box from `src` (!llvm.ptr<3>) to global memory; completes in the thread's bulk group."""
    nvvm.CpAsyncBulkTensorSharedCTAToGlobalOp(tmap, src, coords)


def bulk_commit_group() -> None:
    """cp.async.bulk.commit_group: close the bulk group of the TMA stores issued so far."""
    nvvm.CpAsyncBulkCommitGroupOp()


def bulk_wait_group(pending: int, read: bool = True) -> None:
    """cp.async.bulk.wait_group[.read] pending: with `read`, only until the sources may be reused."""
    nvvm.CpAsyncBulkWaitGroupOp(pending, read=read)


def prefetch_tensormap(tmap: ir.Value) -> None:
    """prefetch.tensormap: bring the descriptor into the cache before the first TMA op uses it."""
    nvvm.PrefetchOp(tmap, tensormap=True)
