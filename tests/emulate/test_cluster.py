"""Thread-block clusters in the emulator: hand-written kernels (a gpu.module with an nvvm.kernel llvm.func,
parsed from text) run as clusters, and hand-broken variants of them fire the cluster checks.

- exchange: CTAs of a cluster swap data through distributed shared memory (mapa, ld/st.shared::cluster)
  between barrier.cluster phases, and report their %cluster_* special registers;
- multicast: each CTA of a pair loads half a tile with TMA .multicast::cluster, so the whole tile lands
  in both CTAs and signals both CTAs' mbarriers;
- pipeline: a CUTLASS-style multicast ring feeding wgmma: A is multicast to both CTAs of the cluster,
  each CTA's consumers release a stage with remote mbarrier arrives on every CTA's empty barrier;
- handshake: one CTA writes into its peer's smem and signals the peer's mbarrier with a remote arrive.

Every error message must name the CTA, the warp, the op and the address (or the barrier) at fault.
"""
import numpy as np
import pytest
from mlir import ir

from warploom.emulate import (BarrierError, DeadlockError, EmulatedKernel, MbarrierError, OutOfBoundsError,
                              SmemRaceError, emulate_launch)
from warploom.emulate.compiler import compile_kernel
from warploom.emulate.errors import ScopeError
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.layout import WgmmaSmemDescriptor
from warploom.runtime.artifact import ParamSpec, TensorMapSpec

from .test_tcgen05_pair import acquire_wait

SEEDS = [0, 1, 2]
TMAP = "!llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}"
HEAD = """gpu.module @cl [#nvvm.target<chip = "sm_90a">] {
  llvm.mlir.global external @cl_smem() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
"""
_MODULES = []          # keep the parsed modules (and their contexts) alive as long as their kernels


def build(text: str, name: str, params, grid, block, cluster, smem_bytes, tensor_maps=None) -> EmulatedKernel:
    ctx = ir.Context()
    with ctx:
        module = ir.Module.parse(text)
    _MODULES.append((ctx, module))
    gpu_module = module.body.operations[0]
    return EmulatedKernel(name, compile_kernel(gpu_module, name), [ParamSpec(n, k) for n, k in params],
                          dict(tensor_maps or {}), tuple(("const", g) for g in grid), (block, 1, 1), tuple(cluster),
                          smem_bytes)


def consts(**values) -> str:
    return "".join(f"    %{name} = arith.constant {v} : {'i16' if name.startswith('h') else 'i32'}\n"
                   for name, v in values.items())


def aligned_base(align: int) -> str:
    """%base: the dynamic smem rounded up to `align` bytes at run time (the launch's base is not aligned)."""
    return f"""    %smem = llvm.mlir.addressof @cl_smem : !llvm.ptr<3>
    %sa = llvm.ptrtoint %smem : !llvm.ptr<3> to i32
    %cal = arith.constant {align - 1} : i32
    %cmask = arith.constant {-align} : i32
    %sa1 = arith.addi %sa, %cal : i32
    %sa2 = arith.andi %sa1, %cmask : i32
    %pad = arith.subi %sa2, %sa : i32
    %base = llvm.getelementptr %smem[%pad] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
"""


# ---- exchange through distributed shared memory -------------------------------------------------------

EX_THREADS, EX_SMEM = 64, 512
SREGS = ["cluster.ctarank", "cluster.nctarank"] + [f"{r}.{a}" for r in ("clusterid", "nclusterid", "cluster.ctaid",
                                                                        "cluster.nctaid") for a in "xyz"]


def exchange_kernel(peer="arith.xori %rank, %c1 : i32", remote_offset=256, first_arrive=True, own="%rank") -> str:
    """Thread t of the CTA with linear id L writes L*1000 + t into its smem (through the shared::cta address that
    mapa to its own rank and a cast back give); after a cluster barrier it reads the
    same slot of its peer (rank ^ 1) with ld.shared::cluster and writes L*1000 + t + 100000 into the peer's second
    buffer with st.shared::cluster; after a second cluster barrier it reads what its peer wrote there."""
    sregs = "".join(f"""      %s{j} = nvvm.read.ptx.sreg.{r} : i32
      %i{j} = arith.addi %ib, %c{j} : i32
      %q{j} = llvm.getelementptr %info[%i{j}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
      llvm.store %s{j}, %q{j} : i32, !llvm.ptr<1>
""" for j, r in enumerate(SREGS))
    arrive = "    nvvm.fence.sc.cluster\n    nvvm.cluster.arrive.relaxed {aligned}\n" if first_arrive else ""
    return HEAD + f"""  llvm.func @exchange(%out: !llvm.ptr<1>, %info: !llvm.ptr<1>) attributes {{nvvm.kernel}} {{
{consts(**{f"c{j}": j for j in range(len(SREGS))}, c16=16, c64=64, c128=128, c1000=1000, c100000=100000,
        cremote=remote_offset)}
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %bx = nvvm.read.ptx.sreg.ctaid.x : i32
    %by = nvvm.read.ptx.sreg.ctaid.y : i32
    %nx = nvvm.read.ptx.sreg.nctaid.x : i32
    %row = arith.muli %by, %nx : i32
    %cta = arith.addi %bx, %row : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %peer = {peer}
    %smem = llvm.mlir.addressof @cl_smem : !llvm.ptr<3>
    %off = arith.muli %tid, %c4 : i32
    %mine = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %v0 = arith.muli %cta, %c1000 : i32
    %v = arith.addi %v0, %tid : i32
    %self7 = nvvm.mapa %mine, {own} : !llvm.ptr<3> -> !llvm.ptr<7>
    %self3 = llvm.addrspacecast %self7 : !llvm.ptr<7> to !llvm.ptr<3>
    llvm.store %v, %self3 : i32, !llvm.ptr<3>
{arrive}    nvvm.cluster.wait {{aligned}}
    %theirs = nvvm.mapa %mine, %peer : !llvm.ptr<3> -> !llvm.ptr<7>
    %got = llvm.load %theirs : !llvm.ptr<7> -> i32
    %off2 = arith.addi %off, %cremote : i32
    %mine2 = llvm.getelementptr %smem[%off2] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %theirs2 = nvvm.mapa %mine2, %peer : !llvm.ptr<3> -> !llvm.ptr<7>
    %w = arith.addi %v, %c100000 : i32
    llvm.store %w, %theirs2 : i32, !llvm.ptr<7>
    nvvm.cluster.arrive {{aligned}}
    nvvm.cluster.wait {{aligned}}
    %got2 = llvm.load %mine2 : !llvm.ptr<3> -> i32
    %o0 = arith.muli %cta, %c128 : i32
    %o1 = arith.addi %o0, %tid : i32
    %p1 = llvm.getelementptr %out[%o1] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
    llvm.store %got, %p1 : i32, !llvm.ptr<1>
    %o2 = arith.addi %o1, %c64 : i32
    %p2 = llvm.getelementptr %out[%o2] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
    llvm.store %got2, %p2 : i32, !llvm.ptr<1>
    %first = arith.cmpi eq, %tid, %c0 : i32
    %ib = arith.muli %cta, %c16 : i32
    scf.if %first {{
{sregs}    }}
    llvm.return
  }}
}}
"""


def run_exchange(text, grid=(4, 2, 1), cluster=(2, 1, 1), seed=0, delay=4, ctas=None):
    k = build(text, "exchange", [("out", "ptr"), ("info", "ptr")], grid, EX_THREADS, cluster, EX_SMEM)
    n = grid[0] * grid[1] * grid[2]
    out = np.full((n, 2, EX_THREADS), -1, np.int32)
    info = np.full((n, 16), -1, np.int32)
    report = emulate_launch(k, {"out": out, "info": info}, {}, seed=seed, delay=delay, ctas=ctas)
    return out, info, report


def expected_exchange(grid, cluster):
    n = grid[0] * grid[1]
    out = np.zeros((n, 2, EX_THREADS), np.int64)
    info = np.full((n, 16), -1, np.int64)
    t = np.arange(EX_THREADS)
    for y in range(grid[1]):
        for x in range(grid[0]):
            cx, cy = x % cluster[0], y % cluster[1]
            rank = cx + cluster[0] * cy
            peer = rank ^ 1
            px, py = peer % cluster[0], peer // cluster[0]
            peer_id = (x - cx + px) + grid[0] * (y - cy + py)
            me = x + grid[0] * y
            out[me, 0] = peer_id * 1000 + t
            out[me, 1] = peer_id * 1000 + t + 100000
            shape = (cluster[0], cluster[1], 1)
            info[me, :14] = [rank, cluster[0] * cluster[1],
                             x // shape[0], y // shape[1], 0, grid[0] // shape[0], grid[1] // shape[1], 1,
                             cx, cy, 0, shape[0], shape[1], shape[2]]
    return out, info


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("grid,cluster", [((4, 2, 1), (2, 1, 1)), ((4, 2, 1), (2, 2, 1)), ((2, 4, 1), (1, 2, 1))],
                         ids=["2x1", "2x2", "1x2"])
def test_exchange_through_distributed_shared_memory(grid, cluster, seed):
    out, info, report = run_exchange(exchange_kernel(), grid, cluster, seed=seed, delay=4)
    want_out, want_info = expected_exchange(grid, cluster)
    np.testing.assert_array_equal(out, want_out)
    np.testing.assert_array_equal(info, want_info)
    assert report.ctas == grid[0] * grid[1] and report.cluster == cluster


def test_only_the_ctas_own_shared_memory_has_a_shared_cta_address():
    # the peer's shared::cluster address is cast to shared::cta
    with pytest.raises(OutOfBoundsError, match=r"CTA \(\d, \d, 0\), warp [01], llvm.addrspacecast .*: "
                                               r"llvm.addrspacecast of shared::cluster 0x[0-9a-f]+ \(CTA \(\d, \d, 0\), "
                                               r"rank [01]\) to shared::cta \(lane 0\): only the executing CTA's own"):
        run_exchange(exchange_kernel(own="%peer"))


def test_ctas_runs_whole_clusters():
    out, _, report = run_exchange(exchange_kernel(), ctas=[(3, 1, 0)])
    want, _ = expected_exchange((4, 2, 1), (2, 1, 1))
    np.testing.assert_array_equal(out[6:8], want[6:8])
    assert report.ctas == 2 and (out[:6] == -1).all()


def test_mapa_to_a_rank_outside_the_cluster():
    # the peer is rank + 2: ranks 2 and 3 do not exist in a cluster of 2
    with pytest.raises(OutOfBoundsError, match=r"CTA \(\d, \d, 0\), warp [01], nvvm.mapa .*: mapa of smem 0x[0-9a-f]+ "
                                               r"to CTA rank [23]: the cluster \(2, 1, 1\) has CTA ranks 0..1 .*"
                                               r"\(lane 0\)"):
        run_exchange(exchange_kernel(peer="arith.addi %rank, %c2 : i32"))


def test_distributed_shared_memory_store_outside_the_window():
    # the second buffer is placed at the end of the smem instead of at 256: the remote stores run past the
    # peer's window
    with pytest.raises(OutOfBoundsError, match=r"CTA \(\d, \d, 0\), warp [01], llvm.store .*: st.shared::cluster of "
                                               r"4 B touches shared::cluster 0x[0-9a-f]+\.\.0x[0-9a-f]+ = smem "
                                               r"0x[0-9a-f]+\.\.0x[0-9a-f]+ of CTA \(\d, \d, 0\) \(rank [01]\), "
                                               r"outside the CTA's 512 B of dynamic smem"):
        run_exchange(exchange_kernel(remote_offset=EX_SMEM))


def test_cluster_wait_without_arrive():
    with pytest.raises(BarrierError, match=r"CTA \(\d, \d, 0\), warp [01], nvvm.cluster.wait .*barrier.cluster.wait "
                                           r"by lanes 0..31, which did not barrier.cluster.arrive"):
        run_exchange(exchange_kernel(first_arrive=False))


def test_grid_must_be_a_multiple_of_the_cluster():
    with pytest.raises(ValueError, match=r"grid \(3, 2, 1\) is not a multiple of its cluster \(2, 1, 1\) "
                                         r"\(x: 3 % 2 = 1\)"):
        run_exchange(exchange_kernel(), grid=(3, 2, 1))


# ---- handshake: a remote store, then a remote mbarrier arrive -------------------------------------------

SIGNALS = {"arrive": "nvvm.mbarrier.arrive %remote {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>",
           "arrive_count": "nvvm.mbarrier.arrive %remote, %c1 {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>",
           "expect_tx": "nvvm.mbarrier.arrive.expect_tx %remote, %c0 : !llvm.ptr<7>, i32"}


def handshake_kernel(signal_offset=0, wait_before_cluster_barrier=False, signal="arrive", acquire="cluster") -> str:
    """Rank 0 writes 7000 + t into rank 1's smem slot t (st.shared::cluster), then one thread arrives remotely on
    rank 1's mbarrier (mbarrier.arrive.release.cluster.shared::cluster, after the writing warps passed a bar.sync);
    rank 1 waits on its mbarrier (acquiring at `acquire` scope: "cluster" pairs with the release) and copies its slots
    out."""
    wait = """    scf.if %is1 {
      WAIT
      %got = llvm.load %mine : !llvm.ptr<3> -> i32
      %p = llvm.getelementptr %out[%tid] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
      llvm.store %got, %p : i32, !llvm.ptr<1>
    }
""".replace("WAIT", acquire_wait("%bar", "%c0", acquire))
    return HEAD + f"""  llvm.func @handshake(%out: !llvm.ptr<1>) attributes {{nvvm.kernel}} {{
{consts(c0=0, c1=1, c4=4, c7000=7000, c256=256, csig=256 + signal_offset, ticks=10000000)}
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %smem = llvm.mlir.addressof @cl_smem : !llvm.ptr<3>
    %bar = llvm.getelementptr %smem[%c256] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %first = arith.cmpi eq, %tid, %c0 : i32
    scf.if %first {{
      nvvm.mbarrier.init %bar, %c1 : !llvm.ptr<3>, i32
      nvvm.fence.mbarrier.init
    }}
    nvvm.barrier
    %off = arith.muli %tid, %c4 : i32
    %mine = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %is0 = arith.cmpi eq, %rank, %c0 : i32
    %is1 = arith.cmpi eq, %rank, %c1 : i32
{wait if wait_before_cluster_barrier else ""}    nvvm.cluster.arrive.relaxed {{aligned}}
    nvvm.cluster.wait {{aligned}}
    scf.if %is0 {{
      %theirs = nvvm.mapa %mine, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
      %v = arith.addi %tid, %c7000 : i32
      llvm.store %v, %theirs : i32, !llvm.ptr<7>
      nvvm.barrier
      scf.if %first {{
        %sig = llvm.getelementptr %smem[%csig] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %remote = nvvm.mapa %sig, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
        {SIGNALS[signal]}
      }}
    }}
{"" if wait_before_cluster_barrier else wait}    nvvm.cluster.arrive {{aligned}}
    nvvm.cluster.wait {{aligned}}
    llvm.return
  }}
}}
"""


def run_handshake(text, seed=0):
    k = build(text, "handshake", [("out", "ptr")], (2, 1, 1), 64, (2, 1, 1), 512)
    out = np.full(64, -1, np.int32)
    emulate_launch(k, {"out": out}, {}, seed=seed, delay=4)
    return out


@pytest.mark.parametrize("signal", list(SIGNALS))
@pytest.mark.parametrize("seed", SEEDS)
def test_handshake_with_a_remote_mbarrier_arrive(seed, signal):
    np.testing.assert_array_equal(run_handshake(handshake_kernel(signal=signal), seed), 7000 + np.arange(64))


def test_a_cluster_release_acquired_at_cta_scope_is_reported():
    # rank 1 reads what rank 0 stored after a wait that acquires at CTA scope only: not morally strong with rank 0's
    # .release.cluster arrival, so the stores are not ordered before the reads
    with pytest.raises(ScopeError, match=r"CTA \(1, 0, 0\), warp 0, nvvm.mbarrier.try_wait.parity .*a wait at CTA scope "
                                         r".*passed phase 0 of mbarrier 0x[0-9a-f]+ .*released at cluster scope"):
        run_handshake(handshake_kernel(acquire="cta"))


def test_remote_arrive_on_an_uninitialised_mbarrier():
    # rank 0 signals the word after the peer's mbarrier
    with pytest.raises(MbarrierError, match=r"CTA \(0, 0, 0\), warp 0, nvvm.mbarrier.arrive .*mbarrier.arrive on "
                                            r"shared::cluster 0x[0-9a-f]+, smem 0x[0-9a-f]+ \(byte 264 of dynamic "
                                            r"smem\) of CTA \(1, 0, 0\) \(rank 1\): no mbarrier is initialised there"):
        run_handshake(handshake_kernel(signal_offset=8))


def test_cluster_deadlock_when_a_cta_never_arrives():
    # rank 1 waits for rank 0's signal before the cluster barrier, which rank 0 only sends after it
    with pytest.raises(DeadlockError, match=r"deadlock in cluster \(0, 0, 0\) \(CTAs \(0, 0, 0\), \(1, 0, 0\)\).*"
                                            r"CTA \(0, 0, 0\) warp 0: nvvm.cluster.wait .*waits for barrier.cluster "
                                            r"phase 0: 64 of 128 non-exited threads of the cluster arrived; not "
                                            r"arrived: CTA \(1, 0, 0\) warp 0, CTA \(1, 0, 0\) warp 1.*"
                                            r"CTA \(1, 0, 0\) warp 0: llvm.inline_asm .*waits for "
                                            r"mbarrier 0x[0-9a-f]+ .*parity 0"):
        run_handshake(handshake_kernel(wait_before_cluster_barrier=True))


def test_access_to_the_smem_of_an_exited_cta():
    # rank 1 exits at once; rank 0's barrier.cluster completes when rank 1's threads exited (exited threads no
    # longer count), and its store then reaches smem that no longer exists
    text = HEAD + f"""  llvm.func @early_exit(%out: !llvm.ptr<1>) attributes {{nvvm.kernel}} {{
{consts(c0=0, c1=1, c4=4)}
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %smem = llvm.mlir.addressof @cl_smem : !llvm.ptr<3>
    %off = arith.muli %tid, %c4 : i32
    %mine = llvm.getelementptr %smem[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %is0 = arith.cmpi eq, %rank, %c0 : i32
    scf.if %is0 {{
      nvvm.cluster.arrive {{aligned}}
      nvvm.cluster.wait {{aligned}}
      %theirs = nvvm.mapa %mine, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
      llvm.store %tid, %theirs : i32, !llvm.ptr<7>
    }}
    llvm.return
  }}
}}
"""
    k = build(text, "early_exit", [("out", "ptr")], (2, 1, 1), 64, (2, 1, 1), 512)
    with pytest.raises(OutOfBoundsError, match=r"CTA \(0, 0, 0\), warp [01], llvm.store .*st.shared::cluster of 4 B "
                                               r"at shared::cluster 0x[0-9a-f]+ reaches CTA \(1, 0, 0\) \(rank 1\), "
                                               r"which has exited"):
        emulate_launch(k, {"out": np.zeros(1, np.int32)}, {}, seed=0)


# ---- TMA multicast of a tile into both CTAs of a cluster ------------------------------------------------

MC_ROWS, MC_COLS = 16, 32           # X: f32 [16, 32]; each cluster copies 8 rows; each CTA multicasts 4 of them


def multicast_kernel() -> str:
    loads = "".join(f"""    %e{j}a = arith.muli %tid, %c4 : i32
    %e{j} = arith.addi %e{j}a, %c{j} : i32
    %b{j} = arith.muli %e{j}, %c4 : i32
    %a{j} = llvm.getelementptr %base[%b{j}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %v{j} = llvm.load %a{j} : !llvm.ptr<3> -> f32
    %g{j} = arith.addi %ob, %e{j} : i32
    %p{j} = llvm.getelementptr %out[%g{j}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
    llvm.store %v{j}, %p{j} : f32, !llvm.ptr<1>
""" for j in range(4))
    return HEAD + f"""  llvm.func @multicast(%x: {TMAP}, %out: !llvm.ptr<1>) attributes {{nvvm.kernel}} {{
{consts(c0=0, c1=1, c2=2, c3=3, c4=4, c8=8, c256=256, c512=512, c1024=1024, ticks=10000000, hmask=3)}
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %cta = nvvm.read.ptx.sreg.ctaid.x : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %cid = nvvm.read.ptx.sreg.clusterid.x : i32
{aligned_base(128)}    %bar = llvm.getelementptr %base[%c1024] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %first = arith.cmpi eq, %tid, %c0 : i32
    scf.if %first {{
      nvvm.mbarrier.init %bar, %c1 : !llvm.ptr<3>, i32
      nvvm.fence.mbarrier.init
    }}
    nvvm.cluster.arrive.relaxed {{aligned}}
    nvvm.cluster.wait {{aligned}}
    scf.if %first {{
      %tok = nvvm.mbarrier.arrive.expect_tx %bar, %c1024 : !llvm.ptr<3>, i32 -> i64
      %half = arith.muli %rank, %c512 : i32
      %dst = llvm.getelementptr %base[%half] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      %dst7 = llvm.addrspacecast %dst : !llvm.ptr<3> to !llvm.ptr<7>
      %r0 = arith.muli %cid, %c8 : i32
      %r1 = arith.muli %rank, %c4 : i32
      %r = arith.addi %r0, %r1 : i32
      nvvm.cp.async.bulk.tensor.shared.cluster.global %dst7, %x, %bar, box[%c0, %r] multicast_mask = %hmask : !llvm.ptr<7>, !llvm.ptr
    }}
    nvvm.mbarrier.try_wait.parity %bar, %c0, %ticks : !llvm.ptr<3>, i32, i32
    %ob = arith.muli %cta, %c256 : i32
{loads}    nvvm.cluster.arrive {{aligned}}
    nvvm.cluster.wait {{aligned}}
    llvm.return
  }}
}}
"""


@pytest.mark.parametrize("seed", SEEDS)
def test_tma_multicast_lands_in_both_ctas(seed):
    spec = TensorMapSpec("x", "x", "f32", (MC_COLS, 4), 0, ("C", "R"))
    k = build(multicast_kernel(), "multicast", [("x", "tensormap"), ("out", "ptr")], (4, 1, 1), 64, (2, 1, 1),
              1024 + 8 + 128, {"x": spec})
    x = np.random.default_rng(seed).standard_normal((MC_ROWS, MC_COLS)).astype(np.float32)
    out = np.full((4, 8, MC_COLS), np.nan, np.float32)
    report = emulate_launch(k, {"x": x, "out": out}, {}, seed=seed, delay=8)
    for cta in range(4):
        np.testing.assert_array_equal(out[cta], x[8 * (cta // 2):8 * (cta // 2) + 8])
    assert report.stats["tma_multicast"] == 4 and report.stats["tma_loads"] == 4


# ---- a multicast ring feeding wgmma ---------------------------------------------------------------------

PL_KT, PL_STAGE = 6, 2560                 # k-tiles of 16; bytes per stage: A 64x16 bf16 (2 x 1024) + B 8x16 (256)
DESC = WgmmaSmemDescriptor(0, 16, 256, "32B")       # K-major, 32-byte swizzle, 8-row groups 256 B apart


def _i64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def pipeline_kernel(stages=2, remote_release=True) -> str:
    """C[64, 16] = A[64, K] @ B[16, K]^T on a cluster of 2: CTA r computes columns 8r..8r+7. A is shared: CTA r's
    producer loads its rows 32r..32r+31 and multicasts them to both CTAs; each loads its own B rows. Each CTA's
    consumers (one warpgroup) release a stage by arriving on the empty barrier of every CTA of the cluster
    (remote_release: at CTA scope, as the lowering's sync.remote_arrive does for a slot whose reads are done, so the
    producers' CTA-scope waits pair with it), which the producers wait on before reusing it; broken: only on their own
    CTA's."""
    full, empty = stages * PL_STAGE, stages * PL_STAGE + 64
    if remote_release:
        release = """          %e0 = nvvm.mapa %empty, %c0 : !llvm.ptr<3> -> !llvm.ptr<7>
          nvvm.mbarrier.arrive %e0 : !llvm.ptr<7>
          %e1 = nvvm.mapa %empty, %c1 : !llvm.ptr<3> -> !llvm.ptr<7>
          nvvm.mbarrier.arrive %e1 : !llvm.ptr<7>
"""
    else:
        release = "          %tk = nvvm.mbarrier.arrive %empty : !llvm.ptr<3> -> i64\n"
    inits = "".join(f"""      %fb{s} = llvm.getelementptr %base[%cf{s}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      nvvm.mbarrier.init %fb{s}, %c1 : !llvm.ptr<3>, i32
      %eb{s} = llvm.getelementptr %base[%ce{s}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
      nvvm.mbarrier.init %eb{s}, %cempty : !llvm.ptr<3>, i32
""" for s in range(stages))
    stage_consts = {**{f"cf{s}": full + 8 * s for s in range(stages)}, **{f"ce{s}": empty + 8 * s for s in range(stages)}}
    stores = "".join(f"""      %d{j} = llvm.extractvalue %res[{j}] : !llvm.struct<(f32, f32, f32, f32)>
      %row{j} = arith.addi %r0, %c{8 * (j // 2)} : i32
      %col{j} = arith.addi %col, %c{j % 2} : i32
      %ix{j}a = arith.muli %row{j}, %c16 : i32
      %ix{j} = arith.addi %ix{j}a, %col{j} : i32
      %cp{j} = llvm.getelementptr %c[%ix{j}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
      llvm.store %d{j}, %cp{j} : f32, !llvm.ptr<1>
""" for j in range(4))
    acc = "!llvm.struct<(f32, f32, f32, f32)>"
    return HEAD + f"""  llvm.func @pipeline(%a: {TMAP}, %b: {TMAP}, %c: !llvm.ptr<1>) attributes {{nvvm.kernel}} {{
{consts(c0=0, c1=1, c2=2, c4=4, c8=8, c16=16, c32=32, c128=128, c1024=1024, c2048=2048, cstage=PL_STAGE,
        cbytes=2 * 1024 + 256, cfull=full, cempty_off=empty, cempty=2 if remote_release else 1, ckt=PL_KT,
        cstages=stages, ticks=10000000, hmask=3, **stage_consts)}
    %mask18 = arith.constant 262143 : i64
    %c4_64 = arith.constant 4 : i64
    %desc = arith.constant {_i64(DESC.static_bits())} : i64
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
{aligned_base(1024)}    %first = arith.cmpi eq, %tid, %c0 : i32
    scf.if %first {{
{inits}      nvvm.fence.mbarrier.init
    }}
    nvvm.cluster.arrive.relaxed {{aligned}}
    nvvm.cluster.wait {{aligned}}
    %producer = arith.cmpi uge, %tid, %c128 : i32
    scf.if %producer {{
      %lead = arith.cmpi eq, %tid, %c128 : i32
      scf.if %lead {{
        scf.for %i = %c0 to %ckt step %c1 : i32 {{
          %s = arith.remui %i, %cstages : i32
          %lap = arith.divui %i, %cstages : i32
          %ph = arith.andi %lap, %c1 : i32
          %ph1 = arith.xori %ph, %c1 : i32
          %s8 = arith.muli %s, %c8 : i32
          %eo = arith.addi %cempty_off, %s8 : i32
          %empty = llvm.getelementptr %base[%eo] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
          %fo = arith.addi %cfull, %s8 : i32
          %full = llvm.getelementptr %base[%fo] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
          nvvm.mbarrier.try_wait.parity %empty, %ph1, %ticks : !llvm.ptr<3>, i32, i32
          %tok = nvvm.mbarrier.arrive.expect_tx %full, %cbytes : !llvm.ptr<3>, i32 -> i64
          %so = arith.muli %s, %cstage : i32
          %ah = arith.muli %rank, %c1024 : i32
          %ao = arith.addi %so, %ah : i32
          %adst = llvm.getelementptr %base[%ao] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
          %adst7 = llvm.addrspacecast %adst : !llvm.ptr<3> to !llvm.ptr<7>
          %k = arith.muli %i, %c16 : i32
          %arow = arith.muli %rank, %c32 : i32
          nvvm.cp.async.bulk.tensor.shared.cluster.global %adst7, %a, %full, box[%k, %arow] multicast_mask = %hmask : !llvm.ptr<7>, !llvm.ptr
          %bo = arith.addi %so, %c2048 : i32
          %bdst = llvm.getelementptr %base[%bo] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
          %bdst7 = llvm.addrspacecast %bdst : !llvm.ptr<3> to !llvm.ptr<7>
          %brow = arith.muli %rank, %c8 : i32
          nvvm.cp.async.bulk.tensor.shared.cluster.global %bdst7, %b, %full, box[%k, %brow] : !llvm.ptr<7>, !llvm.ptr
        }}
      }}
    }} else {{
      %acc0 = llvm.mlir.zero : {acc}
      %res = scf.for %i = %c0 to %ckt step %c1 iter_args(%acc = %acc0) -> ({acc}) : i32 {{
        %s = arith.remui %i, %cstages : i32
        %lap = arith.divui %i, %cstages : i32
        %ph = arith.andi %lap, %c1 : i32
        %s8 = arith.muli %s, %c8 : i32
        %fo = arith.addi %cfull, %s8 : i32
        %full = llvm.getelementptr %base[%fo] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %eo = arith.addi %cempty_off, %s8 : i32
        %empty = llvm.getelementptr %base[%eo] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        nvvm.mbarrier.try_wait.parity %full, %ph, %ticks : !llvm.ptr<3>, i32, i32
        %so = arith.muli %s, %cstage : i32
        %ap = llvm.getelementptr %base[%so] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %aa = llvm.ptrtoint %ap : !llvm.ptr<3> to i64
        %am = arith.andi %aa, %mask18 : i64
        %as = arith.shrui %am, %c4_64 : i64
        %da = arith.ori %as, %desc : i64
        %bo = arith.addi %so, %c2048 : i32
        %bp = llvm.getelementptr %base[%bo] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
        %ba = llvm.ptrtoint %bp : !llvm.ptr<3> to i64
        %bm = arith.andi %ba, %mask18 : i64
        %bs = arith.shrui %bm, %c4_64 : i64
        %db = arith.ori %bs, %desc : i64
        nvvm.wgmma.fence.aligned
        %acc2 = nvvm.wgmma.mma_async %da, %db, %acc, <m = 64, n = 8, k = 16>, D[<f32>, <one>, <wrapped>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>] : {acc} -> {acc}
        nvvm.wgmma.commit.group.sync.aligned
        nvvm.wgmma.wait.group.sync.aligned 0
        scf.if %first {{
{release}        }}
        scf.yield %acc2 : {acc}
      }}
      %warp = arith.divui %tid, %c32 : i32
      %lane = arith.remui %tid, %c32 : i32
      %wr = arith.muli %warp, %c16 : i32
      %lr = arith.divui %lane, %c4 : i32
      %r0 = arith.addi %wr, %lr : i32
      %lc = arith.remui %lane, %c4 : i32
      %lc2 = arith.muli %lc, %c2 : i32
      %rc = arith.muli %rank, %c8 : i32
      %col = arith.addi %rc, %lc2 : i32
{stores}    }}
    nvvm.cluster.arrive {{aligned}}
    nvvm.cluster.wait {{aligned}}
    llvm.return
  }}
}}
"""


def run_pipeline(text, seed, delay=8, k_tiles=PL_KT, stages=2):
    a_spec = TensorMapSpec("a", "a", "bf16", (16, 32), 32, ("K", "M"))
    b_spec = TensorMapSpec("b", "b", "bf16", (16, 8), 32, ("K", "N"))
    k = build(text, "pipeline", [("a", "tensormap"), ("b", "tensormap"), ("c", "ptr")], (2, 1, 1), 160, (2, 1, 1),
              1024 + stages * PL_STAGE + 128, {"a": a_spec, "b": b_spec})
    rng = np.random.default_rng(100 + seed)
    elem = NUMPY_ELEMS["bf16"]
    a = rng.integers(-2, 3, (64, 16 * k_tiles)).astype(elem)
    b = rng.integers(-2, 3, (16, 16 * k_tiles)).astype(elem)
    c = np.full((64, 16), np.nan, np.float32)
    emulate_launch(k, {"a": a, "b": b, "c": c}, {}, seed=seed, delay=delay)
    return c, a.astype(np.float64) @ b.astype(np.float64).T


@pytest.mark.parametrize("stages", [1, 2])
@pytest.mark.parametrize("seed", SEEDS)
def test_multicast_ring_feeding_wgmma(seed, stages):
    c, ref = run_pipeline(pipeline_kernel(stages), seed, stages=stages)
    np.testing.assert_array_equal(c, ref)


@pytest.mark.parametrize("seed", SEEDS)
def test_multicast_into_a_cta_whose_stage_is_still_read(seed):
    # each CTA's consumers release a stage only in their own CTA: CTA 0's producer multicasts the next k-tile into
    # CTA 1's stage while CTA 1's wgmma still reads it (or before it has read it)
    with pytest.raises(SmemRaceError, match=r"CTA \((0|1), 0, 0\), (warp \d+, )?nvvm\.(cp.async.bulk.tensor.shared.cluster."
                                            r"global|wgmma.mma_async) .*(multicast into CTA \((0|1), 0, 0\) \(rank "
                                            r"[01]\) (writes smem 0x[0-9a-f]+\.\.0x[0-9a-f]+ while|overwrites smem 0x[0-9a-f]+, which .* no "
                                                r"MMA has read yet)|reads smem 0x)"):
        run_pipeline(pipeline_kernel(1, remote_release=False), seed, delay=16)
