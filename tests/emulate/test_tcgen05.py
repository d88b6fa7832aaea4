"""Tensor Memory and tcgen05 (sm_100a, cta_group::1) in the emulator: a tiny hand-written tcgen05 GEMM
(no Blackwell back end exists yet) that must give the exact result, and one hand-broken variant per check,
whose error names the warp, the op and the TMEM address or columns.

The kernel (4 warps): thread 0 initialises two mbarriers; warp 0 allocates TMEM (tcgen05.alloc writes the
address to smem) and relinquishes the permit; after a barrier every thread reads the address; thread 0
loads A [128 x 64] and B (K-major [64 x 64] or MN-major [64 x 64]) by TMA (128B swizzle), issues four
K = 16 tcgen05.mma into D [128 x 64] f32 (the first without accumulate) and commits them to `done`;
every warp waits on `done`, loads its 32 lanes of D (tcgen05.ld.32x32b.x64), waits, and stores its rows
of C; warp 0 frees TMEM.
"""
import numpy as np
import pytest
from mlir import ir

from warploom.emulate import (AccumulatorReadError, DeadlockError, EmulatedKernel, EmulationError, SmemRaceError,
                              TmemError, TmemFenceError, TmemRaceError, compile_kernel, emulate_launch)
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.layout import Sm100InstrDescriptor
from warploom.runtime.artifact import ParamSpec, TensorMapSpec

M, N, K = 128, 64, 64
SMEM = {"a": 0, "b": 16384, "full": 24576, "done": 24584, "slot": 24592, "done2": 24600}
SMEM_BYTES = 24608 + 1024           # + the run-time round-up of the base to 1024


def kernel_text(b_major="K", *, alloc=True, relinquish_first=False, dealloc=True, dealloc_cols=None,
                dealloc_early=False, wait_done=True, lane_per_warp=True, extra_lane=0, col_offset=0,
                ld_wait=True, accumulate_first=False, reload_a=False, via_st=False, mma_by_warp=False,
                alloc_twice=0, a_tmem=False, st_wait=True, elem="bf16", d_dtype="f32", negate=False,
                fence_after=True, fence_before=True) -> str:
    """The MLIR of the GEMM kernel; every keyword but b_major breaks (or varies) one thing."""
    ncols = 256 if a_tmem else 128 if via_st else 64
    dealloc_cols = dealloc_cols or ncols
    idesc = Sm100InstrDescriptor(elem, elem, d_dtype, M, N, b_major=b_major, negate_a=negate).encode()
    b_step = 32 if b_major == "K" else 2048          # bytes per K = 16 step: 16 elements, or 16 rows of 128 B
    alloc_ops = [f"nvvm.tcgen05.alloc %slot, %c{ncols} : !llvm.ptr<3>, i32",
                 "nvvm.tcgen05.relinquish_alloc_permit\n      nvvm.tcgen05.fence <before>"]
    if alloc_twice:              # two allocations of alloc_twice columns before the GEMM's own
        alloc_ops[0] = (f"%n2 = arith.constant {alloc_twice} : i32 {chr(10)}"
                        + f"nvvm.tcgen05.alloc %slot, %n2 : !llvm.ptr<3>, i32 {chr(10)}" * 2 + alloc_ops[0])
    if relinquish_first:
        alloc_ops.reverse()
    taddr = "%taddr = llvm.load %slot : !llvm.ptr<3> -> i32" if alloc else "%taddr = arith.constant 0 : i32"
    enable = "%true = arith.constant true" if accumulate_first else "%true = arith.cmpi ne, %k, %c0 : i32"
    dealloc_op = f"scf.if %w0 {{ nvvm.tcgen05.dealloc %tacc, %c{dealloc_cols} : !llvm.ptr<6>, i32 }}"
    lane_off = "%loff = arith.muli %warp, %c2097152 : i32" if lane_per_warp else "%loff = arith.constant 0 : i32"
    reload = """
        nvvm.tcgen05.fence <before>
        %tx2 = arith.constant 16384 : i32
        %tok2 = nvvm.mbarrier.arrive.expect_tx %full, %tx2 : !llvm.ptr<3>, i32 -> i64
        nvvm.cp.async.bulk.tensor.shared.cluster.global %sA7, %a, %full, box[%c0, %c0] : !llvm.ptr<7>, !llvm.ptr""" \
        if reload_a else ""
    roundtrip = """
    %col64 = arith.constant 64 : i32
    %tw2 = arith.addi %tw, %col64 : i32
    %tp2 = llvm.inttoptr %tw2 : i32 to !llvm.ptr<6>
    nvvm.tcgen05.st %tp2, %v0 {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<64xi32>
    """ + ("nvvm.tcgen05.wait <store>" if st_wait else "") + """
    %v = nvvm.tcgen05.ld %tp2 {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<64xi32>
    nvvm.tcgen05.wait <load>""" if via_st else ""
    second = """
    %p = nvvm.tcgen05.ld %tp {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<8xi32>
    nvvm.tcgen05.wait <load>
    %ta = arith.addi %tw, %c64 : i32
    %tap = llvm.inttoptr %ta : i32 to !llvm.ptr<6>
    nvvm.tcgen05.st %tap, %p {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<8xi32>
    nvvm.tcgen05.wait <store>
    nvvm.tcgen05.fence <before>
    nvvm.barrier
    scf.if %is0 {
      nvvm.tcgen05.fence <after>
      %a2 = arith.addi %taddr, %c64 : i32
      %a2p = llvm.inttoptr %a2 : i32 to !llvm.ptr<6>
      %d2 = arith.addi %taddr, %c128 : i32
      %d2p = llvm.inttoptr %d2 : i32 to !llvm.ptr<6>
      %bb = llvm.ptrtoint %sB : !llvm.ptr<3> to i32
      %bbe = arith.shrui %bb, %c4 : i32
      %one = arith.constant 1 : i32
      %s64 = arith.constant 64 : i32
      %b0 = arith.constant 0 : i8
      %no = arith.constant false
      %sw = arith.constant 2 : i8
      %db0 = nvvm.tcgen05.mma_smem_desc(%bbe, %one, %s64, %b0, %no, %sw) : (i32, i32, i32, i8, i1, i8) -> i64
      %id2 = arith.constant IDESC : i32
      nvvm.tcgen05.mma %d2p, %a2p, %db0, %id2, %no {kind = #nvvm.tcgen05_mma_kind<f16>, ctaGroup = #nvvm.cta_group<cta_1>} : (!llvm.ptr<6>, !llvm.ptr<6>, i64, i32, i1)
      nvvm.tcgen05.commit %done2 : !llvm.ptr<3>
    }
    nvvm.mbarrier.try_wait.parity %done2, %c0, %c0 : !llvm.ptr<3>, i32, i32
    nvvm.tcgen05.fence <after>
    %tw2 = arith.addi %tw, %c128 : i32
    %tp2 = llvm.inttoptr %tw2 : i32 to !llvm.ptr<6>
    %v = nvvm.tcgen05.ld %tp2 {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<64xi32>
    nvvm.tcgen05.wait <load>""".replace("IDESC", str(idesc)) if a_tmem else ""
    out = "%v" if via_st or a_tmem else "%v0"
    return f"""
gpu.module @tc [#nvvm.target<chip = "sm_100a">] {{
  llvm.mlir.global external @smem() {{addr_space = 3 : i32, alignment = 1024 : i64}} : !llvm.array<0 x i8>
  llvm.func @tc_gemm(%a: !llvm.ptr, %b: !llvm.ptr, %c: !llvm.ptr<1>) attributes {{nvvm.kernel}} {{
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %c32 = arith.constant 32 : i32
    %c64 = arith.constant 64 : i32
    %c128 = arith.constant 128 : i32
    %c256 = arith.constant 256 : i32
    %c1023 = arith.constant 1023 : i32
    %cm1024 = arith.constant -1024 : i32
    %c2097152 = arith.constant 2097152 : i32
    %c64_i64 = arith.constant 64 : i64
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %warp = arith.divui %tid, %c32 : i32
    %raw = llvm.mlir.addressof @smem : !llvm.ptr<3>
    %rawi = llvm.ptrtoint %raw : !llvm.ptr<3> to i32
    %up = arith.addi %rawi, %c1023 : i32
    %al = arith.andi %up, %cm1024 : i32
    %pad = arith.subi %al, %rawi : i32
    %sA = llvm.getelementptr %raw[%pad] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %sB = llvm.getelementptr %sA[{SMEM['b']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %full = llvm.getelementptr %sA[{SMEM['full']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %done = llvm.getelementptr %sA[{SMEM['done']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %done2 = llvm.getelementptr %sA[{SMEM['done2']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %slot = llvm.getelementptr %sA[{SMEM['slot']}] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %is0 = arith.cmpi eq, %tid, %c0 : i32
    %w0 = arith.cmpi eq, %warp, %c0 : i32
    scf.if %is0 {{
      nvvm.mbarrier.init %full, %c1 : !llvm.ptr<3>, i32
      nvvm.mbarrier.init %done, %c1 : !llvm.ptr<3>, i32
      nvvm.mbarrier.init %done2, %c1 : !llvm.ptr<3>, i32
      nvvm.fence.mbarrier.init
    }}
    {f"scf.if %w0 {{ {alloc_ops[0]} {chr(10)} {alloc_ops[1]} }}" if alloc else ""}
    nvvm.barrier
    nvvm.tcgen05.fence <after>
    {taddr}
    %tacc = llvm.inttoptr %taddr : i32 to !llvm.ptr<6>
    %sA7 = llvm.addrspacecast %sA : !llvm.ptr<3> to !llvm.ptr<7>
    %sB7 = llvm.addrspacecast %sB : !llvm.ptr<3> to !llvm.ptr<7>
    scf.if %is0 {{
      %tx = arith.constant 24576 : i32
      %tok = nvvm.mbarrier.arrive.expect_tx %full, %tx : !llvm.ptr<3>, i32 -> i64
      nvvm.cp.async.bulk.tensor.shared.cluster.global %sA7, %a, %full, box[%c0, %c0] : !llvm.ptr<7>, !llvm.ptr
      nvvm.cp.async.bulk.tensor.shared.cluster.global %sB7, %b, %full, box[%c0, %c0] : !llvm.ptr<7>, !llvm.ptr
    }}
    scf.if {"%w0" if mma_by_warp else "%is0"} {{
      nvvm.mbarrier.try_wait.parity %full, %c0, %c0 : !llvm.ptr<3>, i32, i32
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
        {enable}
        nvvm.tcgen05.mma %tacc, %da, %db, %idesc, %true {{kind = #nvvm.tcgen05_mma_kind<f16>, ctaGroup = #nvvm.cta_group<cta_1>}} : (!llvm.ptr<6>, i64, i64, i32, i1)
      }}
      nvvm.tcgen05.commit %done : !llvm.ptr<3>{reload}
    }}
    {"nvvm.mbarrier.try_wait.parity %done, %c0, %c0 : !llvm.ptr<3>, i32, i32" if wait_done else
     "nvvm.tcgen05.fence <before>" + chr(10) + "nvvm.barrier"}
    {"nvvm.tcgen05.fence <after>" if fence_after else ""}
    {dealloc_op if dealloc and dealloc_early else ""}
    {lane_off}
    %extra = arith.constant {(extra_lane << 16) + col_offset} : i32
    %tw0 = arith.addi %taddr, %loff : i32
    %tw = arith.addi %tw0, %extra : i32
    %tp = llvm.inttoptr %tw : i32 to !llvm.ptr<6>
    %v0 = nvvm.tcgen05.ld %tp {{shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>}} : vector<64xi32>
    {"nvvm.tcgen05.wait <load>" if ld_wait else ""}{roundtrip}{second}
    %row = arith.extui %tid : i32 to i64
    %off = arith.muli %row, %c64_i64 : i64
    %cp = llvm.getelementptr %c[%off] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
    %vf = llvm.bitcast {out} : vector<64xi32> to vector<64xf32>
    llvm.store %vf, %cp {{alignment = 4 : i64}} : vector<64xf32>, !llvm.ptr<1>
    {"nvvm.tcgen05.fence <before>" if fence_before else ""}
    nvvm.barrier
    nvvm.tcgen05.fence <after>
    {dealloc_op if dealloc and not dealloc_early else ""}
    llvm.return
  }}
}}
"""


MODULES = []          # the parsed modules stay alive: the compiled kernel refers to their ops for messages


def build(b_major="K", elem="bf16", **variant) -> EmulatedKernel:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(kernel_text(b_major, elem=elem, **variant))
        MODULES.append(module)
        gpu_module = module.body.operations[0]
        compiled = compile_kernel(gpu_module, "tc_gemm")
    b_box, b_dims = ((K, N), ("K", "N")) if b_major == "K" else ((N, K), ("N", "K"))
    tmaps = {"a": TensorMapSpec("a", "a", elem, (K, M), 128, ("K", "M")),
             "b": TensorMapSpec("b", "b", elem, b_box, 128, b_dims)}
    params = [ParamSpec("a", "tensormap"), ParamSpec("b", "tensormap"), ParamSpec("c", "ptr")]
    return EmulatedKernel("tc_gemm", compiled, params, tmaps, (("const", 1),) * 3, (128, 1, 1), (1, 1, 1),
                          SMEM_BYTES)


def run(kernel: EmulatedKernel, b_major="K", seed=0, delay=4, raw=False):
    """C (float64; the raw f32 array with raw=True) and the exact A @ B, for small-integer A and B."""
    rng = np.random.default_rng(seed)
    elem = NUMPY_ELEMS[kernel.tensor_maps["a"].dtype]
    a = rng.integers(-3, 4, (M, K)).astype(elem)
    b_kn = rng.integers(-3, 4, (K, N))
    b = (b_kn.T if b_major == "K" else b_kn).astype(elem)            # K-major: B stored [N, K]; MN-major: [K, N]
    c = np.full((M, N), np.nan, np.float32)
    emulate_launch(kernel, {"a": np.ascontiguousarray(a), "b": np.ascontiguousarray(b), "c": c}, {}, seed=seed,
                   delay=delay)
    return c if raw else c.astype(np.float64), a.astype(np.float64) @ b_kn.astype(np.float64)


# ---- the working kernel ---------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("b_major", ["K", "MN"])
def test_tcgen05_gemm_is_exact(b_major, seed):
    c, want = run(build(b_major), b_major, seed=seed, delay=8)
    np.testing.assert_array_equal(c, want)


def test_tcgen05_negate_a_and_f16_inputs():
    c, want = run(build(elem="f16", negate=True))
    np.testing.assert_array_equal(c, -want)


def test_tcgen05_f16_accumulator_sits_in_the_low_half_of_each_cell():
    # D f16 (f16 inputs): each 32-bit cell holds one f16 in its low half, zero above (9.7.16.10.4.1)
    c, want = run(build(elem="f16", d_dtype="f16"), raw=True)
    cells = c.view(np.uint32)
    assert (cells >> 16 == 0).all()
    np.testing.assert_array_equal((cells & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64), want)


@pytest.mark.parametrize("seed", [0, 1])
def test_tcgen05_st_then_ld_round_trip(seed):
    # each warp stores its accumulator rows to columns 64..127 (tcgen05.st, wait::st) and loads them back
    c, want = run(build(via_st=True), seed=seed)
    np.testing.assert_array_equal(c, want)


@pytest.mark.parametrize("seed", [0, 1])
def test_tcgen05_mma_with_a_from_tmem(seed):
    # columns 0..7 of D are stored (tcgen05.st) to columns 64..71 and read back by a second MMA as A in TMEM
    # ([128 x 16] 16-bit elements, two per 32-bit cell): D2 = A2 @ B[0:16] into columns 128..191. Modelled
    # packing (an assumption, see tcgen05.py): element 2j of a row is the low half of column j, 2j+1 the high.
    c, d0 = run(build(a_tmem=True), seed=seed)
    rng = np.random.default_rng(seed)
    rng.integers(-3, 4, (M, K))
    b_kn = rng.integers(-3, 4, (K, N)).astype(np.float64)
    cells = d0[:, :8].astype(np.float32).view(np.uint32)
    a2 = np.stack([cells & 0xFFFF, cells >> 16], axis=-1).reshape(M, 16).astype(np.uint16)
    want = a2.view(NUMPY_ELEMS["bf16"]).astype(np.float64) @ b_kn[:16]
    np.testing.assert_array_equal(c, want)
    assert np.abs(want).max() > 0


# ---- hand-broken kernels, one per check -------------------------------------------------------------------

def test_tmem_used_before_alloc():
    # no tcgen05.alloc: the kernel uses TMEM address 0 it never allocated
    with pytest.raises(TmemError, match=r"CTA \(0, 0, 0\), warp 0, nvvm.tcgen05.mma .*uses TMEM address 0x00000000 "
                                        r"\(lanes 0..127, columns 0..63\) before any tcgen05.alloc"):
        run(build(alloc=False, dealloc=False))


def test_tmem_used_after_dealloc():
    # warp 0 frees the accumulator before the epilogue loads it
    with pytest.raises(TmemError, match=r"warp 0, nvvm.tcgen05.ld .*tcgen05.ld.32x32b.x64 uses TMEM address "
                                        r"0x00000000 \(lanes 0..31, columns 0..63\) after tcgen05.dealloc: column 0 "
                                        r"belonged to columns 0..63, freed by warp 0 at nvvm.tcgen05.dealloc"):
        run(build(dealloc_early=True))


def test_tmem_columns_outside_the_allocation():
    # the epilogue loads 64 columns from column 32 of a 64-column allocation
    with pytest.raises(TmemError, match=r"warp \d, nvvm.tcgen05.ld .*uses TMEM address 0x00[0-6]00020 \(lanes \d+..\d+, "
                                        r"columns 32..95\), but column 64 is outside the allocated columns "
                                        r"\(columns 0..63\)"):
        run(build(col_offset=32))


def test_tmem_lanes_beyond_127():
    with pytest.raises(TmemError, match=r"warp \d, nvvm.tcgen05.ld .*touches TMEM address 0x0[0-9a-f]{7} \(lanes "
                                        r"1[2-9]\d..\d+, columns 0..63\), outside Tensor Memory \(lanes 0..127"):
        run(build(extra_lane=128))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tcgen05_ld_before_the_mma_completed(seed):
    # the epilogue skips the wait on the commit's mbarrier (a CTA barrier orders it after the issue only)
    with pytest.raises(TmemRaceError, match=r"warp \d, nvvm.tcgen05.ld .*tcgen05.ld.32x32b.x64 of TMEM address "
                                            r"0x00[0-6]00000 \(lanes \d+..\d+, columns 0..63\) touches lane \d+ column "
                                            r"0, which a tcgen05.mma still writes: tcgen05.mma #\d \(issued by warp 0 "
                                            r"lane 0, .*\), (not complete|its tcgen05.commit has not arrived yet)"):
        run(build(wait_done=False), seed=seed, delay=32)


def test_lane_quadrant_violation():
    # every warp loads lanes 0..31: warps 1..3 may not
    with pytest.raises(TmemError, match=r"warp [123], nvvm.tcgen05.ld .*tcgen05.ld.32x32b.x64 of TMEM lanes 0..31 "
                                        r"\(address 0x00000000\) by warp ([123]): warp \1 is warp \1 of its warpgroup "
                                        r"and may access TMEM lanes (32|64|96)..(63|95|127) only"):
        run(build(lane_per_warp=False))


def test_alloc_after_relinquish():
    with pytest.raises(TmemError, match=r"warp 0, nvvm.tcgen05.alloc .*tcgen05.alloc of 64 columns after warp 0 "
                                        r"relinquished the CTA's allocation permit \(nvvm.tcgen05.relinquish_alloc_permit"):
        run(build(relinquish_first=True))


def test_warp_exits_with_tmem_allocated():
    with pytest.raises(TmemError, match=r"CTA \(0, 0, 0\), warp 0, nvvm.tcgen05.alloc .*warp 0 exits with TMEM columns "
                                        r"0..63 still allocated"):
        run(build(dealloc=False))


def test_dealloc_of_the_wrong_size():
    with pytest.raises(TmemError, match=r"warp 0, nvvm.tcgen05.dealloc .*tcgen05.dealloc of 32 columns at TMEM address "
                                        r"0x00000000 .*tcgen05.alloc \(.*\) allocated 64"):
        run(build(dealloc_cols=32))


def test_registers_read_before_wait_ld():
    with pytest.raises(AccumulatorReadError, match=r"warp \d, llvm.bitcast .*registers loaded by nvvm.tcgen05.ld .* from "
                                                   r"TMEM address 0x00[0-6]00000 \(lanes \d+..\d+, columns 0..63\) read "
                                                   r"before tcgen05.wait::ld"):
        run(build(ld_wait=False))


def test_tmem_read_after_the_commit_wait_without_fence_after():
    """The epilogue waits for the MMA's commit and reads D with no tcgen05.fence::after_thread_sync in between."""
    with pytest.raises(TmemFenceError, match=r"warp \d, nvvm.tcgen05.ld .*: tcgen05.ld by lane 0 of warp \d "
                                             r"after its wait on mbarrier 0x[0-9a-f]+ \(phase 0, completed by a "
                                             r"tcgen05.commit .*\), with no tcgen05.fence::after_thread_sync in "
                                             r"between"):
        run(build(fence_after=False))


def test_barrier_after_tmem_loads_without_fence_before():
    """Each warp loads its quadrant, then meets the others at bar.sync (before warp 0 frees TMEM) unfenced."""
    with pytest.raises(TmemFenceError, match=r"nvvm.barrier .*: bar.sync 0 by lane 0 of warp \d after its "
                                             r"nvvm.tcgen05.ld .* with no tcgen05.fence::before_thread_sync"):
        run(build(fence_before=False))


def test_first_mma_accumulates_into_unwritten_tmem():
    with pytest.raises(TmemError, match=r"warp 0, nvvm.tcgen05.mma .*accumulates \(enable-input-d true\) into TMEM "
                                        r"address 0x00000000 \(lanes 0..127, columns 0..63\), but nothing wrote"):
        run(build(accumulate_first=True))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tma_overwrites_a_stage_an_uncommitted_mma_reads(seed):
    # thread 0 reloads A right after the commit, without waiting for the MMAs to finish reading it
    with pytest.raises(SmemRaceError, match=r"warp 0, nvvm.cp.async.bulk.tensor.shared.cluster.global .*TMA load of 'a' "
                                            r".*while tcgen05.mma #\d \(issued by warp 0 lane 0, .*\) \(its tcgen05.commit "
                                            r"has not arrived yet\) still reads byte 0x"):
        run(build(reload_a=True), seed=seed, delay=32)


def test_mma_issued_by_every_lane_of_a_warp():
    # the MMA block runs on all 32 lanes of warp 0 instead of one elected thread
    with pytest.raises(TmemRaceError, match=r"warp 0, nvvm.tcgen05.mma .*32 lanes of warp 0 issue tcgen05.mma into "
                                            r"TMEM address 0x00000000 \(lanes 0..127, columns 0..63\) at once"):
        run(build(mma_by_warp=True))


def test_alloc_blocks_until_columns_are_free():
    # warp 0 allocates 512 columns, then asks for 512 more: tcgen05.alloc blocks, and nothing can free them
    with pytest.raises(DeadlockError, match=r"warp 0: nvvm.tcgen05.alloc .*waits for 512 free TMEM columns for "
                                            r"tcgen05.alloc \(0 of 512 free; allocated: columns 0..511"):
        run(build(alloc_twice=512))


def test_tcgen05_ld_of_a_store_not_yet_waited_for():
    # the round trip loads the columns it stored without tcgen05.wait::st in between
    with pytest.raises(TmemRaceError, match=r"warp \d, nvvm.tcgen05.ld .*tcgen05.ld.32x32b.x64 of TMEM address "
                                            r"0x00[0-6]00040 \(lanes \d+..\d+, columns 64..127\) touches lane \d+ column "
                                            r"64, which a tcgen05.st not yet retired by tcgen05.wait::st writes: "
                                            r"nvvm.tcgen05.st .* of warp \d"):
        run(build(via_st=True, st_wait=False))


def test_bf16_inputs_with_an_f16_accumulator_are_refused():
    with pytest.raises(EmulationError, match=r"warp 0, nvvm.tcgen05.mma .*instruction descriptor 0x[0-9a-f]{8}: bf16 "
                                             r"inputs accumulate into f32 only"):
        run(build(d_dtype="f16"))
