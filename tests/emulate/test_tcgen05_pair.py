"""The CTA pair (tcgen05 .cta_group::2, sm_100a) in the emulator: a tiny hand-written 2-CTA tcgen05 GEMM (no back
end emits one yet) that must give the exact result, and one hand-broken variant per check, whose error names the
CTA, the op and what is wrong.

The kernel, C [256 x 128] = A [256 x 64] @ B, bf16 in, f32 accumulate, on a cluster of 2 CTAs of 128 threads
(PTX ISA 9.7.16: the pair is the two CTAs whose %cluster_ctarank differ in bit 0):
- thread 0 of each CTA initialises `full`, `peer_full` and `done`, fence.mbarrier_init; warp 0 of each CTA
  allocates 128 TMEM columns with tcgen05.alloc.cta_group::2 and relinquishes the permit; a cluster barrier;
- thread 0 of each CTA loads its 128 rows of A and its half of B (64 rows of B [N, K] when K-major, 64 columns of
  B [K, N] when MN-major) by TMA into its own smem, and waits on its own `full`;
- the peer's thread 0 (the odd CTA's unless issuer=1) tells the issuer its operands landed: a remote
  mbarrier.arrive on the issuer's `peer_full` (mapa);
- the issuer's thread 0 waits on `peer_full`, issues four K = 16 tcgen05.mma.cta_group::2 (M = 256, N = 128:
  A rows 0..127 and B rows 0..63 from the even CTA's smem, the rest from the odd CTA's; D rows 0..127 in the even
  CTA's TMEM, 128..255 in the odd CTA's) and one tcgen05.commit.cta_group::2 multicast to `done` of both CTAs
  (ctaMask 0x3);
- every warp of both CTAs waits on its own `done`, loads its lane quadrant (tcgen05.ld.32x32b.x128) and stores its
  rows of C (CTA rank r holds rows 128 r ..); a cluster barrier, warp 0 of each CTA frees its TMEM, a final
  cluster barrier.
"""
import numpy as np
import pytest
from mlir import ir

from warploom.emulate import (DeadlockError, EmulatedKernel, EmulationError, OutOfBoundsError, ScopeError, SmemRaceError,
                              TmemError, TmemFenceError, compile_kernel, emulate_launch)
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.layout import Sm100InstrDescriptor
from warploom.runtime.artifact import ParamSpec, TensorMapSpec

M, N, K = 256, 128, 64              # the pair's MMA: M = 256, N = 128 (Table 39, cta_group::2)
ROWS, HALF_N = M // 2, N // 2       # per CTA: 128 rows of A and of D, 64 rows (K-major) or columns of B
SMEM = {"a": 0, "b": 16384, "full": 24576, "peer_full": 24584, "done": 24592, "slot": 24600, "freed": 24608}
SMEM_BYTES = 24616 + 1024           # + the run-time round-up of the base to 1024
CTA2 = "#nvvm.cta_group<cta_2>"


def acquire_wait(bar: str, parity: str, scope: str) -> str:
    """A wait on mbarrier `bar`: the NVVM op (acquire at CTA scope), or for scope "cluster" the inline PTX loop the
    lowering emits for barriers another CTA releases at cluster scope (emit.sync.WAIT_ACQUIRE_CLUSTER)."""
    if scope == "cta":
        return f"nvvm.mbarrier.try_wait.parity {bar}, {parity}, %c0 : !llvm.ptr<3>, i32, i32"
    name = bar.lstrip("%")
    return (f"%{name}_i = llvm.ptrtoint {bar} : !llvm.ptr<3> to i32\n        llvm.inline_asm has_side_effects "
            f'"{WAIT_ACQUIRE_CLUSTER_MLIR}", "r,r,r" %{name}_i, {parity}, %c0 : (i32, i32, i32) -> ()')


# the lowering's cluster-scope wait, as MLIR's string syntax writes it (newlines as \0A)
WAIT_ACQUIRE_CLUSTER_MLIR = ("{\\0A.reg .pred done;\\0AWL_WAIT:\\0Ambarrier.try_wait.parity.acquire.cluster.shared::cta.b64 "
                             "done, [$0], $1, $2;\\0A@!done bra WL_WAIT;\\0A}")


def kernel_text(b_major="K", *, issuer=0, relay=True, commit_mask=3, commit_remote=False, odd_cols=None,
                mma_group="cta_2", odd_fence_after=True, reload_b=False, dealloc_after="cluster",
                acquire="cluster") -> str:
    """The MLIR of the pair GEMM; issuer picks which CTA of the pair (0 even, 1 odd) issues the MMAs, every other
    keyword breaks (or varies) one thing: relay=False: the issuer does not wait for the peer's operands;
    commit_mask: the commit's ctaMask (None: no multicast, the issuer's own `done` only); commit_remote: a second
    commit to the peer's `done` through its shared::cluster address instead of multicast; odd_cols: the odd CTA
    allocates this many columns; mma_group: the MMAs' .cta_group; odd_fence_after=False: the odd CTA's epilogue
    reads TMEM with no tcgen05.fence::after_thread_sync after its `done` wait; reload_b: the peer reloads its half of
    B right after its relay, while the pair MMA may still read it; dealloc_after: what orders the epilogues' TMEM
    loads before warp 0's tcgen05.dealloc.cta_group::2: "cluster" (a cluster barrier, the PTX ISA's way), "handoff"
    (each CTA's bar.sync, then warp 0 of each CTA arrives on the other's `freed` barrier and waits on its own, as
    CUTLASS's tmem_deallocation_result_barrier does), "own" (only its own CTA's bar.sync: the peer's loads are not
    ordered before the dealloc, the bug of issue 33 item 8); acquire: the scope of the waits on the barriers the
    peer releases at cluster scope (`peer_full`, `freed`): "cluster" (morally strong with the releases), "cta" (not:
    the emulator's ScopeError)."""
    idesc = Sm100InstrDescriptor("bf16", "bf16", "f32", M, N, b_major=b_major).encode()
    b_step = 32 if b_major == "K" else 2048          # bytes per K = 16 step: 16 elements, or 16 rows of 128 B
    b_box = "%c0, %brow" if b_major == "K" else "%brow, %c0"
    ncols = ("%ncols = arith.constant 128 : i32" if odd_cols is None else
             f"%oc = arith.constant {odd_cols} : i32\n    %ncols = arith.select %odd, %oc, %c128 : i32")
    if commit_remote:
        commit = f"""nvvm.tcgen05.commit %done {{group = {CTA2}}} : !llvm.ptr<3>
          %pd = nvvm.mapa %done, %peer : !llvm.ptr<3> -> !llvm.ptr<7>
          nvvm.tcgen05.commit %pd {{group = {CTA2}}} : !llvm.ptr<7>"""
    elif commit_mask is None:
        commit = f"nvvm.tcgen05.commit %done {{group = {CTA2}}} : !llvm.ptr<3>"
    else:
        commit = f"""%mask = arith.constant {commit_mask} : i16
          nvvm.tcgen05.commit %done, multicast_mask = %mask {{group = {CTA2}}} : !llvm.ptr<3>, i16"""
    reload = """
          %tx2 = arith.constant 8192 : i32
          %tok2 = nvvm.mbarrier.arrive.expect_tx %full, %tx2 : !llvm.ptr<3>, i32 -> i64
          nvvm.cp.async.bulk.tensor.shared.cluster.global %sB7, %b, %full, box[BOX] : !llvm.ptr<7>, !llvm.ptr
          nvvm.mbarrier.try_wait.parity %full, %c1, %c0 : !llvm.ptr<3>, i32, i32""".replace("BOX", b_box) \
        if reload_b else ""
    before_dealloc = ("nvvm.cluster.arrive {aligned}\n    nvvm.cluster.wait {aligned}" if dealloc_after == "cluster"
                      else "nvvm.barrier") + "\n    nvvm.tcgen05.fence <after>"
    handoff = """
      scf.if %is0 {
        %pfreed = nvvm.mapa %freed, %peer : !llvm.ptr<3> -> !llvm.ptr<7>
        nvvm.mbarrier.arrive %pfreed {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>
      }
      WAIT_FREED
      nvvm.tcgen05.fence <after>""".replace("WAIT_FREED", acquire_wait("%freed", "%c0", acquire)) \
        if dealloc_after == "handoff" else ""
    fence_after = ("nvvm.tcgen05.fence <after>" if odd_fence_after else
                   "scf.if %even {\n      nvvm.tcgen05.fence <after>\n    }")
    return f"""
gpu.module @tc2 [#nvvm.target<chip = "sm_100a">] {{
  llvm.mlir.global external @smem() {{addr_space = 3 : i32, alignment = 1024 : i64}} : !llvm.array<0 x i8>
  llvm.func @tc_pair(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr<1>) attributes {{nvvm.kernel}} {{
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %c64 = arith.constant 64 : i32
    %c128 = arith.constant 128 : i32
    %c1023 = arith.constant 1023 : i32
    %cm1024 = arith.constant -1024 : i32
    %c2097152 = arith.constant 2097152 : i32
    %c128_i64 = arith.constant 128 : i64
    %cissuer = arith.constant {issuer} : i32
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %rank = nvvm.read.ptx.sreg.cluster.ctarank : i32
    %bit = arith.andi %rank, %c1 : i32
    %odd = arith.cmpi ne, %bit, %c0 : i32
    %even = arith.cmpi eq, %bit, %c0 : i32
    %peer = arith.xori %rank, %c1 : i32
    %issues = arith.cmpi eq, %bit, %cissuer : i32
    %raw = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %rawi = llvm.ptrtoint %raw : !llvm.ptr<3> to i32
    %up = arith.addi %rawi, %c1023 : i32
    %al = arith.andi %up, %cm1024 : i32
    %pad = arith.subi %al, %rawi : i32
    %sA = llvm.getelementptr %raw[%pad] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %sB = llvm.getelementptr %sA[{SMEM['b']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %full = llvm.getelementptr %sA[{SMEM['full']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %peer_full = llvm.getelementptr %sA[{SMEM['peer_full']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %done = llvm.getelementptr %sA[{SMEM['done']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %slot = llvm.getelementptr %sA[{SMEM['slot']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %freed = llvm.getelementptr %sA[{SMEM['freed']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    {ncols}
    scf.if %is0 {{
      nvvm.mbarrier.init %full, %c1 : !llvm.ptr<3>, i32
      nvvm.mbarrier.init %peer_full, %c1 : !llvm.ptr<3>, i32
      nvvm.mbarrier.init %done, %c1 : !llvm.ptr<3>, i32
      nvvm.mbarrier.init %freed, %c1 : !llvm.ptr<3>, i32
      nvvm.fence.mbarrier.init
    }}
    scf.if %w0 {{
      nvvm.tcgen05.alloc %slot, %ncols {{group = {CTA2}}} : !llvm.ptr<3>, i32
      nvvm.tcgen05.relinquish_alloc_permit {{group = {CTA2}}}
      nvvm.tcgen05.fence <before>
    }}
    nvvm.cluster.arrive {{aligned}}
    nvvm.cluster.wait {{aligned}}
    nvvm.tcgen05.fence <after>
    %taddr = llvm.load %slot : !llvm.ptr<3> -> i32
    %tacc = llvm.inttoptr %taddr : i32 to !llvm.ptr<6>
    %sA7 = llvm.addrspacecast %sA : !llvm.ptr<3> to !llvm.ptr<7>
    %sB7 = llvm.addrspacecast %sB : !llvm.ptr<3> to !llvm.ptr<7>
    scf.if %is0 {{
      %tx = arith.constant 24576 : i32
      %tok = nvvm.mbarrier.arrive.expect_tx %full, %tx : !llvm.ptr<3>, i32 -> i64
      %arow = arith.muli %rank, %c128 : i32
      nvvm.cp.async.bulk.tensor.shared.cluster.global %sA7, %a, %full, box[%c0, %arow] : !llvm.ptr<7>, !llvm.ptr
      %brow = arith.muli %rank, %c64 : i32
      nvvm.cp.async.bulk.tensor.shared.cluster.global %sB7, %b, %full, box[{b_box}] : !llvm.ptr<7>, !llvm.ptr
      nvvm.mbarrier.try_wait.parity %full, %c0, %c0 : !llvm.ptr<3>, i32, i32
      scf.if %issues {{
        {acquire_wait("%peer_full", "%c0", acquire) if relay else ""}
        nvvm.tcgen05.fence <after>
        %aaddr = llvm.ptrtoint %sA : !llvm.ptr<3> to i32
        %baddr = llvm.ptrtoint %sB : !llvm.ptr<3> to i32
        %lbo = arith.constant 1 : i32
        %sbo = arith.constant 64 : i32
        %base0 = arith.constant 0 : i8
        %abs = arith.constant false
        %sw128 = arith.constant 2 : i8
        %idesc = arith.constant {idesc} : i32
        %astep = arith.constant 32 : i32
        %bstep = arith.constant {b_step} : i32
        scf.for %k = %c0 to %c4 step %c1 : i32 {{
          %ka = arith.muli %k, %astep : i32
          %aa = arith.addi %aaddr, %ka : i32
          %ae = arith.shrui %aa, %c4 : i32
          %kb = arith.muli %k, %bstep : i32
          %ba = arith.addi %baddr, %kb : i32
          %be = arith.shrui %ba, %c4 : i32
          %da = nvvm.tcgen05.mma_smem_desc(%ae, %lbo, %sbo, %base0, %abs, %sw128) : (i32, i32, i32, i8, i1, i8) -> i64
          %db = nvvm.tcgen05.mma_smem_desc(%be, %lbo, %sbo, %base0, %abs, %sw128) : (i32, i32, i32, i8, i1, i8) -> i64
          %acc = arith.cmpi ne, %k, %c0 : i32
          nvvm.tcgen05.mma %tacc, %da, %db, %idesc, %acc {{kind = #nvvm.tcgen05_mma_kind<f16>, ctaGroup = #nvvm.cta_group<{mma_group}>}} : (!llvm.ptr<6>, i64, i64, i32, i1)
        }}
        {commit}
      }} else {{
        %pf = nvvm.mapa %peer_full, %peer : !llvm.ptr<3> -> !llvm.ptr<7>
        nvvm.mbarrier.arrive %pf {{scope = #nvvm.mem_scope<cluster>}} : !llvm.ptr<7>{reload}
      }}
    }}
    nvvm.mbarrier.try_wait.parity %done, %c0, %c0 : !llvm.ptr<3>, i32, i32
    {fence_after}
    %loff = arith.muli %warp, %c2097152 : i32
    %tw = arith.addi %taddr, %loff : i32
    %tp = llvm.inttoptr %tw : i32 to !llvm.ptr<6>
    %v = nvvm.tcgen05.ld %tp {{shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>}} : vector<128xi32>
    nvvm.tcgen05.wait <load>
    %row0 = arith.muli %rank, %c128 : i32
    %row1 = arith.addi %row0, %tid : i32
    %row = arith.extui %row1 : i32 to i64
    %off = arith.muli %row, %c128_i64 : i64
    %cp = llvm.getelementptr %c[%off] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
    %vf = llvm.bitcast %v : vector<128xi32> to vector<128xf32>
    llvm.store %vf, %cp {{alignment = 4 : i64}} : vector<128xf32>, !llvm.ptr<1>
    nvvm.tcgen05.fence <before>
    {before_dealloc}
    scf.if %w0 {{{handoff}
      nvvm.tcgen05.dealloc %tacc, %ncols {{group = {CTA2}}} : !llvm.ptr<6>, i32
    }}
    nvvm.cluster.arrive {{aligned}}
    nvvm.cluster.wait {{aligned}}
    llvm.return
  }}
}}
"""


MODULES = []          # the parsed modules stay alive: the compiled kernel refers to their ops for messages


def build(b_major="K", cluster=(2, 1, 1), **variant) -> EmulatedKernel:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(kernel_text(b_major, **variant))
        MODULES.append(module)
        compiled = compile_kernel(module.body.operations[0], "tc_pair")
    b_box, b_dims = ((K, HALF_N), ("K", "N")) if b_major == "K" else ((HALF_N, K), ("N", "K"))
    tmaps = {"a": TensorMapSpec("a", "a", "bf16", (K, ROWS), 128, ("K", "M")),
             "b": TensorMapSpec("b", "b", "bf16", b_box, 128, b_dims)}
    params = [ParamSpec("a", "tensormap"), ParamSpec("b", "tensormap"), ParamSpec("c", "ptr")]
    return EmulatedKernel("tc_pair", compiled, params, tmaps, (("const", 2), ("const", 1), ("const", 1)),
                          (128, 1, 1), cluster, SMEM_BYTES)


def run(kernel: EmulatedKernel, b_major="K", seed=0, delay=4):
    """C (float64) and the exact A @ B, for small-integer A and B."""
    rng = np.random.default_rng(seed)
    elem = NUMPY_ELEMS["bf16"]
    a = rng.integers(-3, 4, (M, K)).astype(elem)
    b_kn = rng.integers(-3, 4, (K, N))
    b = (b_kn.T if b_major == "K" else b_kn).astype(elem)            # K-major: B stored [N, K]; MN-major: [K, N]
    c = np.full((M, N), np.nan, np.float32)
    emulate_launch(kernel, {"a": np.ascontiguousarray(a), "b": np.ascontiguousarray(b), "c": c}, {}, seed=seed,
                   delay=delay)
    return c.astype(np.float64), a.astype(np.float64) @ b_kn.astype(np.float64)


# ---- the working kernel ---------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("b_major", ["K", "MN"])
def test_pair_gemm_is_exact(b_major, seed):
    c, want = run(build(b_major), b_major, seed=seed, delay=8)
    np.testing.assert_array_equal(c, want)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_odd_cta_may_issue_the_pair_mma(seed):
    # the odd CTA's thread 0 issues and commits; A rows 0..127 and B rows 0..63 still come from the even CTA
    c, want = run(build(issuer=1), seed=seed, delay=8)
    np.testing.assert_array_equal(c, want)


@pytest.mark.parametrize("seed", [0, 1])
def test_commit_to_the_peer_through_its_shared_cluster_address(seed):
    # no multicast: one commit to the issuer's own `done`, one to the peer's (mapa, !llvm.ptr<7>)
    c, want = run(build(commit_remote=True), seed=seed, delay=8)
    np.testing.assert_array_equal(c, want)


# ---- hand-broken kernels, one per check -------------------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mma_reads_the_peers_operands_before_they_landed(seed):
    # the issuer does not wait on `peer_full`: the odd CTA's TMA copies are still in flight (or not issued yet)
    # when the pair MMA reads its A and B rows. The emulator checks the smem state when the MMA is issued, not
    # happens-before: in interleavings where the peer's copies happen to land first (seed 0, for one) the race
    # goes unseen, so these seeds are ones that expose it.
    with pytest.raises(SmemRaceError, match=r"CTA \(0, 0, 0\), warp 0, nvvm.tcgen05.mma .*tcgen05.mma.cta_group::2 "
                                            r"reads smem 0x[0-9a-f]+ \(byte \d+ of dynamic smem\) of CTA \(1, 0, 0\) "
                                            r"\(rank 1, the odd CTA of the pair\), its (A rows 128..255|B rows "
                                            r"64..127) of the pair's MMA, which (an in-flight TMA copy has not "
                                            r"written yet \(TMA load of '[ab]'.*\)|no TMA copy has written yet): the "
                                            r"issuer may issue the pair's MMA only once the peer's operands landed"):
        run(build(relay=False), seed=seed, delay=32)


@pytest.mark.parametrize("mask", [1, None], ids=["mask_0x1", "no_multicast"])
def test_commit_that_signals_only_the_issuer_leaves_the_peer_waiting(mask):
    # the commit arrives on the even CTA's `done` only: the odd CTA's warps wait on theirs forever
    with pytest.raises(DeadlockError, match=r"deadlock in cluster \(0, 0, 0\) .*CTA \(1, 0, 0\) warp 0: "
                                            r"nvvm.mbarrier.try_wait.parity .*waits for mbarrier 0x[0-9a-f]+ \(byte "
                                            r"\d+ of dynamic smem\) parity 0: phase 0, 1 arrivals"):
        run(build(commit_mask=mask))


def test_peer_allocated_fewer_columns_than_the_accumulator_needs():
    # the odd CTA allocates 32 columns; the pair's D (N = 128 columns) must be allocated in both CTAs
    with pytest.raises(TmemError, match=r"CTA \(0, 0, 0\), warp 0, nvvm.tcgen05.mma .*tcgen05.mma.cta_group::2 \(D "
                                        r"rows 128..255 of 256 x 128, in CTA \(1, 0, 0\) \(rank 1, the odd CTA of the "
                                        r"pair\)\) uses TMEM address 0x00000000 \(lanes 0..127, columns 0..127\), but "
                                        r"column 32 is outside the allocated columns \(columns 0..31\).*the warp of "
                                        r"each CTA must allocate them"):
        run(build(odd_cols=32))


def test_cta_group_1_mma_in_a_cta_group_2_kernel():
    # caught when the kernel is compiled (ptxas rejects it), naming both ops
    with pytest.raises(EmulationError, match=r"^nvvm.tcgen05.mma .*: nvvm.tcgen05.mma with .cta_group::1, but "
                                             r"nvvm.tcgen05.alloc .* earlier in the kernel has .cta_group::2: every "
                                             r"tcgen05 instruction of a kernel must name the same .cta_group"):
        build(mma_group="cta_1")


def test_cta_group_2_without_a_peer_cta():
    # launched with clusters of one CTA: the pair does not exist
    with pytest.raises(EmulationError, match=r"CTA \(0, 0, 0\), warp 0, nvvm.tcgen05.alloc .*"
                                             r"tcgen05.alloc.cta_group::2 in CTA \(0, 0, 0\) \(rank 0\), whose cluster "
                                             r"\(1, 1, 1\) has 1 CTA: .cta_group::2 acts on the CTA pair"):
        run(build(cluster=(1, 1, 1)))


def test_commit_multicast_mask_beyond_the_cluster():
    with pytest.raises(OutOfBoundsError, match=r"CTA \(0, 0, 0\), warp 0, nvvm.tcgen05.commit .*"
                                               r"tcgen05.commit.cta_group::2.multicast::cluster with ctaMask 0x0007: .*"
                                               r"the cluster \(2, 1, 1\) has CTA ranks 0..1, so the mask must be a "
                                               r"non-zero subset of 0x3"):
        run(build(commit_mask=7))


def test_peer_reads_tmem_after_the_commit_without_fence_after():
    # the multicast commit's arrival on the odd CTA's `done` carries tcgen05 work just like a local one
    with pytest.raises(TmemFenceError, match=r"CTA \(1, 0, 0\), warp \d, nvvm.tcgen05.ld .*: tcgen05.ld by lane 0 of "
                                             r"warp \d after its wait on mbarrier 0x[0-9a-f]+ \(phase 0, completed by "
                                             r"a tcgen05.commit .*\), with no tcgen05.fence::after_thread_sync"):
        run(build(odd_fence_after=False))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tma_refills_the_peers_stage_the_pair_mma_still_reads(seed):
    # the odd CTA reloads its half of B right after telling the issuer its operands landed, without waiting for the
    # pair MMA (its commit) to release them: the TMA check in the odd CTA finds the pair MMA the even CTA issued. (In
    # interleavings where the reload comes before the MMA is issued, e.g. seed 0, the TMA's unread-stage check fires
    # instead: also an SmemRaceError, but not this path.)
    with pytest.raises(SmemRaceError, match=r"CTA \(1, 0, 0\), warp 0, nvvm.cp.async.bulk.tensor.shared.cluster.global "
                                            r".*TMA load of 'b' .*while tcgen05.mma.cta_group::2 #\d \(issued by CTA "
                                            r"\(0, 0, 0\) warp 0 lane 0, .*\) \((no tcgen05.commit tracks it yet|its "
                                            r"tcgen05.commit has not arrived yet)\) still reads byte 0x"):
        run(build(reload_b=True), seed=seed, delay=32)


@pytest.mark.parametrize("dealloc_after", ["cluster", "handoff"])
def test_a_cluster_release_acquired_at_cta_scope_is_reported(dealloc_after):
    # the peer's relay (and the handoff's `freed`) arrive with .release.cluster; the waits on them at CTA scope (the
    # NVVM op's default) do not make a morally strong pair: what the peer ordered before its arrival (its operands
    # landing, its TMEM loads) is not ordered before the issuer's MMAs (or the dealloc)
    with pytest.raises(ScopeError, match=r"a wait at CTA scope \(nvvm.mbarrier.try_wait.parity\) passed phase 0 of "
                                         r"mbarrier 0x[0-9a-f]+ .*released at cluster scope.*acquire.cluster"):
        run(build(dealloc_after=dealloc_after, acquire="cta"), seed=0, delay=8)
