"""Blackwell (sm_100a) tcgen05 helpers: Tensor Memory allocation, the single-thread MMA, commit, loads, fences.

    alloc(b, slot, 512); relinquish()                  # one warp, warp-collectively; the address lands in smem
    mma(b, d_tmem, desc_a, desc_b, idesc, accumulate)  # one thread issues the whole tile's MMA (kind::f16)
    commit(barrier)                                    # arrive on an mbarrier once this thread's MMAs completed
    v = ld_32x32b(b, taddr, 32); wait_ld()             # a warp's 32 lanes x 32 columns, one row per thread
    st_32x32b(b, taddr, v); wait_st()                  # the reverse
    mma_tmem_a(b, d_tmem, a_tmem, desc_b, idesc, acc)  # A from Tensor Memory (FA4's P V)
    fence_before(); ...bar/arrive...; fence_after()    # order tcgen05 work around thread synchronisation

All are the MLIR NVVM dialect's own ops (`nvvm.tcgen05.*`), cta_group::1. Sources: PTX ISA 9.7.16
("tcgen05-memory-alloc-manage-instructions", "tcgen05-mma", "tcgen05-commit", "tcgen05-instructions-tcgen05-ld",
"tcgen05-wait", "tcgen05-special-sync-operations-fence"); gpu-facts.md section 4.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import llvm, nvvm

from .builder import Builder

def _attr(text: str) -> ir.Attribute:
    return ir.Attribute.parse(text)


def _group(group: int) -> ir.Attribute:
    """.cta_group::1 (one CTA) or ::2 (a CTA pair); every tcgen05 op of a kernel names the same one."""
    if group not in (1, 2):
        raise ValueError(f"cta_group {group}: tcgen05 takes 1 or 2")
    return _attr(f"#nvvm.cta_group<cta_{group}>")


def alloc(b: Builder, slot: ir.Value, columns: int, group: int = 1) -> None:
    """tcgen05.alloc of `columns` (a power of two, 32..512) by the whole warp (with group 2: a warp of each CTA of
    the pair, together); the base address goes to `slot` (an smem pointer)."""
    nvvm.Tcgen05AllocOp(slot, b.const(columns), group=_group(group))


def relinquish(group: int = 1) -> None:
    """tcgen05.relinquish_alloc_permit: this CTA allocates no more (lets other CTAs' allocations proceed)."""
    nvvm.Tcgen05RelinquishAllocPermitOp(group=_group(group))


def dealloc(b: Builder, taddr: ir.Value, columns: int, group: int = 1) -> None:
    """tcgen05.dealloc of the allocation at TMEM address `taddr` (i32), by the whole warp."""
    nvvm.Tcgen05DeallocOp(tmem_ptr(b, taddr), b.const(columns), group=_group(group))


def tmem_ptr(b: Builder, taddr: ir.Value) -> ir.Value:
    """A TMEM address (i32: lane << 16 | column) as the !llvm.ptr<6> the tcgen05 ops take."""
    return llvm.IntToPtrOp(b.ptr(6), taddr, loc=b.loc("tp")).result


def fence_before() -> None:
    """tcgen05.fence::before_thread_sync: this thread's tcgen05 ops so far precede its next barrier or arrive."""
    nvvm.Tcgen05FenceOp(_attr("#nvvm.tcgen05_fence<before>"))


def fence_after() -> None:
    """tcgen05.fence::after_thread_sync: tcgen05 ops after this follow the barrier or wait just passed."""
    nvvm.Tcgen05FenceOp(_attr("#nvvm.tcgen05_fence<after>"))


def wait_ld() -> None:
    """tcgen05.wait::ld: every tcgen05.ld this thread issued has completed (its registers may be read)."""
    nvvm.Tcgen05WaitOp(_attr("#nvvm.tcgen05_wait<load>"))


def mma(b: Builder, d_taddr: ir.Value, desc_a: ir.Value, desc_b: ir.Value, idesc: int,
        accumulate: ir.Value, group: int = 1) -> None:
    """tcgen05.mma.cta_group::{group}.kind::f16 [d], a-desc, b-desc, idesc, enable-input-d: D (+)= A x B for the
    shape and types `idesc` (an Sm100InstrDescriptor's 32 bits) encodes; A and B from smem descriptors (with group
    2, half of A's rows and of B's columns in each CTA of the pair, D's rows split between their TMEMs)."""
    nvvm.Tcgen05MMAOp(_attr("#nvvm.tcgen05_mma_kind<f16>"), _group(group), tmem_ptr(b, d_taddr), desc_a,
                      desc_b, b.const(idesc), accumulate)


def mma_tmem_a(b: Builder, d_taddr: ir.Value, a_taddr: ir.Value, desc_b: ir.Value, idesc: int,
               accumulate: ir.Value) -> None:
    """tcgen05.mma.cta_group::1.kind::f16 [d], [a], b-desc, idesc, enable-input-d with A in Tensor Memory: rows
    in lanes 0..M-1, the K = 16 16-bit elements of a row two per cell over 8 columns from `a_taddr` (i32); B from
    an smem descriptor (FA4's O += P V, P written into TMEM by the softmax)."""
    nvvm.Tcgen05MMAOp(_attr("#nvvm.tcgen05_mma_kind<f16>"), _group(1), tmem_ptr(b, d_taddr), tmem_ptr(b, a_taddr),
                      desc_b, b.const(idesc), accumulate)


def commit(b: Builder, barrier: ir.Value, group: int = 1, multicast: int | None = None) -> None:
    """tcgen05.commit.cta_group::{group}.mbarrier::arrive::one: one arrival on `barrier` (an smem pointer) once
    every tcgen05.mma this thread issued before has completed; with `multicast` (a 16-bit CTA mask,
    .multicast::cluster) on the barrier at the same offset in each CTA of the mask."""
    mask = None if multicast is None else b.const(multicast, b.i16)
    nvvm.Tcgen05CommitOp(barrier, multicastMask=mask, group=_group(group))


def ld_32x32b(b: Builder, taddr: ir.Value, columns: int) -> ir.Value:
    """tcgen05.ld.sync.aligned.32x32b.x{columns}.b32: thread i of the warp gets lane (taddr's lane + i), columns
    taddr's column .. + columns - 1, as vector<columns x i32> (the cells' bits)."""
    ty = ir.VectorType.get([columns], b.i32)
    return nvvm.Tcgen05LdOp(ty, _attr("#nvvm.tcgen05_ldst_shape<shape_32x32b>"), tmem_ptr(b, taddr)).result


def st_32x32b(b: Builder, taddr: ir.Value, values: ir.Value) -> None:
    """tcgen05.st.sync.aligned.32x32b.x{N}.b32: thread i of the warp writes `values` (vector<N x i32>) to lane
    (taddr's lane + i), columns taddr's column .. + N - 1; complete at tcgen05.wait::st."""
    nvvm.Tcgen05StOp(_attr("#nvvm.tcgen05_ldst_shape<shape_32x32b>"), tmem_ptr(b, taddr), values)


def wait_st() -> None:
    """tcgen05.wait::st: every tcgen05.st this thread issued has completed (its cells may be read by an MMA)."""
    nvvm.Tcgen05WaitOp(_attr("#nvvm.tcgen05_wait<store>"))
