"""Synchronisation helpers: warp roles (setmaxnreg), mbarrier rings, CTA and named barriers, fences, elect.

    role_registers(regs, launch_regs)            # setmaxnreg inc/dec to the role's budget
    ring = MbarrierRing(b, smem_base, offset=196608, count=4, stride=8, ticks=0x989680)
    ring.init(arrivals=1)                        # every barrier of the ring (one thread)
    ring.wait(stage, parity); ring.arrive_expect_tx(stage, 49152); ring.arrive(stage)
    bar = ring.at(stage)                         # one barrier, for several ops on the same stage

All are MLIR 22 NVVM ops (gpu-facts §1, §3, §7); the hardware numbers (mbarrier
size, wait hint, register budgets) come from the caller.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import llvm, nvvm

from .builder import Builder
from .inline import inline_ptx

# mbarrier.try_wait.parity.acquire.cluster (PTX ISA 8.0, sm_90; 9.7.13.15 "mbarrier.test_wait/mbarrier.try_wait") in a
# loop until the phase completed: $0 the barrier's shared::cta address, $1 the parity, $2 the suspend-time hint. The
# label is scoped to the braces, so every copy of the loop may use it.
WAIT_ACQUIRE_CLUSTER = ("{\n.reg .pred done;\nWL_WAIT:\n"
                        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [$0], $1, $2;\n"
                        "@!done bra WL_WAIT;\n}")


def role_registers(regs: int, launch_regs: int) -> None:
    """The role's setmaxnreg: give registers back (below the launch share) or take them (above).
    Warpgroup-collective; nothing when the role keeps the launch share."""
    if regs < launch_regs:
        nvvm.SetMaxRegisterOp(regs, nvvm.SetMaxRegisterAction.decrease)
    elif regs > launch_regs:
        nvvm.SetMaxRegisterOp(regs, nvvm.SetMaxRegisterAction.increase)


def elect_sync(b: Builder) -> ir.Value:
    """nvvm.elect.sync: i1, true in one lane of the (full) warp."""
    return nvvm.ElectSyncOp(b.i1, loc=b.loc("elected")).result


def cta_barrier() -> None:
    """bar.sync 0 with every thread of the CTA."""
    nvvm.BarrierOp(None)


def named_barrier_sync(b: Builder, barrier_id: int | ir.Value, threads: int) -> None:
    """bar.sync id, threads: wait until `threads` threads (a multiple of 32) reached barrier `id` (1..15; an
    i32 value when it is picked at run time, e.g. per warpgroup)."""
    bid = b.const(barrier_id) if isinstance(barrier_id, int) else barrier_id
    nvvm.BarrierOp(None, barrierId=bid, numberOfThreads=b.const(threads))


def named_barrier_arrive(b: Builder, barrier_id: int | ir.Value, threads: int) -> None:
    """bar.arrive id, threads: count this thread at barrier `id` without waiting."""
    bid = b.const(barrier_id) if isinstance(barrier_id, int) else barrier_id
    nvvm.BarrierArriveOp(b.const(threads), barrierId=bid)


def named_barrier_any(b: Builder, barrier_id: int | ir.Value, threads: int, pred: ir.Value) -> ir.Value:
    """bar.red.or.pred d, id, threads, pred: bar.sync that also ORs the threads' `pred` (i1); d, in every thread, is
    true when any thread's was (how one thread's decision reaches its warpgroup without smem). MLIR 22's nvvm.barrier
    takes a reduction only on barrier 0, so this calls the LLVM intrinsic."""
    bid = b.const(barrier_id) if isinstance(barrier_id, int) else barrier_id
    return b.intrinsic("llvm.nvvm.barrier.cta.red.or.aligned.count", [bid, b.const(threads), pred], b.i1)


def fence_gpu() -> None:
    """fence.acq_rel.gpu: this thread's memory accesses before it are ordered before those after it, for every thread
    of the GPU (the release half of a hand-off through global memory before an atomic, the acquire half after)."""
    llvm.FenceOp(llvm.AtomicOrdering.acq_rel, syncscope="device")


def atomic_add_gpu(b: Builder, p: ir.Value, value: ir.Value) -> ir.Value:
    """atom.relaxed.gpu.global.add.u32: add `value` to the i32 at global `p` (one thread); the old value."""
    return llvm.AtomicRMWOp(llvm.AtomicBinOp.add, p, value, llvm.AtomicOrdering.monotonic, syncscope="device",
                            alignment=4, loc=b.loc("old")).res


def shfl_bfly(b: Builder, value: ir.Value, lane_xor: int) -> ir.Value:
    """shfl.sync.bfly.b32 value, lane_xor, 0x1f, 0xffffffff: the value of lane (laneid ^ lane_xor), full warp."""
    return nvvm.ShflOp(value.type, b.const(-1), value, b.const(lane_xor), b.const(0x1F), nvvm.ShflKind.bfly,
                       loc=b.loc()).result


def warp_any(b: Builder, pred: ir.Value) -> ir.Value:
    """i1, the same in every lane of the (full, converged) warp: whether `pred` (i1) holds in any lane. As
    redux.sync.or.b32 of pred (0 or 1), full member mask, so a branch on it is warp-uniform."""
    word = b.select(pred, b.const(1), b.const(0))
    red = nvvm.ReduxOp(b.i32, word, nvvm.ReduxKind.OR, b.const(-1), loc=b.loc()).result
    return b.cmp("ne", red, b.const(0))


def cluster_barrier() -> None:
    """barrier.cluster.arrive.aligned + barrier.cluster.wait.aligned: every thread of every CTA of the cluster."""
    nvvm.ClusterArriveOp(aligned=True)
    nvvm.ClusterWaitOp(aligned=True)


def cluster_rank(b: Builder) -> ir.Value:
    """%cluster_ctarank (i32): this CTA's rank in its cluster."""
    return nvvm.read_ptx_sreg_cluster_ctarank(b.i32, loc=b.loc("rank"))


def mapa(b: Builder, addr: ir.Value, rank: ir.Value) -> ir.Value:
    """mapa.shared::cluster: the shared::cluster address (!llvm.ptr<7>) of `addr` (this CTA's smem) in CTA `rank`."""
    return nvvm.MapaOp(b.ptr(7), addr, rank, loc=b.loc("remote")).result


def remote_arrive(b: Builder, addr: ir.Value, scope: str = "cta") -> None:
    """mbarrier.arrive on a barrier of a CTA of the cluster (`addr` from `mapa`, .shared::cluster), with release
    semantics at `scope`. "cta" (the PTX default, CUTLASS's consumer release) when the arrival only hands back smem
    the arriving thread has finished reading; "cluster" when the other CTA must see this thread's writes. The
    cluster-scope release is slow: use it only where the writes must be seen (benchmarks/NOTES.md, run 29)."""
    attrs = {"scope": ir.Attribute.parse("#nvvm.mem_scope<cluster>")} if scope == "cluster" else {}
    if scope not in ("cta", "cluster"):
        raise ValueError(f"remote_arrive scope {scope!r}: use 'cta' or 'cluster'")
    nvvm.MBarrierArriveOp(None, addr, loc=b.loc(), **attrs)


def fence_mbarrier_init() -> None:
    """fence.mbarrier_init.release.cluster: publish mbarrier.init to the async proxy (TMA)."""
    nvvm.FenceMbarrierInitOp()


def fence_proxy_async_smem() -> None:
    """fence.proxy.async.shared::cta: order generic-proxy smem writes before async-proxy (TMA) reads."""
    nvvm.FenceProxyOp(nvvm.ProxyKind.async_shared, space=nvvm.SharedSpace.shared_cta)


class Mbarrier:
    """One mbarrier: its shared-memory address and the ops on it."""

    def __init__(self, b: Builder, addr: ir.Value, ticks: int):
        self.b, self.addr, self.ticks = b, addr, ticks

    def init(self, arrivals: int) -> None:
        nvvm.MBarrierInitOp(self.addr, self.b.const(arrivals))

    def wait(self, parity: ir.Value, scope: str = "cta") -> None:
        """Block until the phase with this parity completed (mbarrier.try_wait.parity in a loop), with acquire
        semantics at `scope`: "cta" (the PTX default, the NVVM op) for arrivals of this CTA's threads, TMA
        completions and cta-scope releases; "cluster" where the arrivals are another CTA's cluster-scope releases
        (`remote_arrive(scope="cluster")`), so that the release and the acquire are morally strong (PTX ISA
        "Memory Consistency Model": both scopes include both threads). MLIR 22's NVVM op has no scope: inline PTX."""
        if scope == "cta":
            nvvm.MBarrierTryWaitParityOp(self.addr, parity, self.b.const(self.ticks))
        elif scope == "cluster":
            b = self.b
            inline_ptx(b, WAIT_ACQUIRE_CLUSTER, "r,r,r", [b.ptrtoint(self.addr, b.i32), parity, b.const(self.ticks)])
        else:
            raise ValueError(f"mbarrier wait scope {scope!r}: use 'cta' or 'cluster'")

    def arrive(self) -> ir.Value:
        return nvvm.MBarrierArriveOp(self.b.i64, self.addr, loc=self.b.loc()).result

    def arrive_expect_tx(self, tx_bytes: int) -> ir.Value:
        return nvvm.MBarrierArriveExpectTxOp(self.b.i64, self.addr, self.b.const(tx_bytes),
                                             loc=self.b.loc()).result


class MbarrierRing:
    """`count` mbarriers of `stride` bytes at byte `offset` from the smem `base` pointer (!llvm.ptr<3>)."""

    def __init__(self, b: Builder, base: ir.Value, offset: int, count: int, stride: int, ticks: int):
        self.b, self.base, self.offset, self.count = b, base, offset, count
        self.stride, self.ticks = stride, ticks

    def at(self, stage: int | ir.Value) -> Mbarrier:
        """The barrier of `stage`: a constant offset for a Python int, offset + stage * stride for a value."""
        b = self.b
        if isinstance(stage, int):
            off = b.const(self.offset + self.stride * stage)
        else:
            off = b.add(b.const(self.offset), b.mul(stage, b.const(self.stride)))
        return Mbarrier(b, b.gep(self.base, off), self.ticks)

    def init(self, arrivals: int) -> None:
        for s in range(self.count):
            self.at(s).init(arrivals)

    def wait(self, stage, parity: ir.Value) -> None:
        self.at(stage).wait(parity)

    def arrive(self, stage) -> ir.Value:
        return self.at(stage).arrive()

    def arrive_expect_tx(self, stage, tx_bytes: int) -> ir.Value:
        return self.at(stage).arrive_expect_tx(tx_bytes)
