// RUN: warploom-opt %s --wl-tile="target=sm_100a schedule=persistent block-n=128" --wl-pipeline --wl-specialize --wl-plan-tmem --wl-plan-smem --wl-plan-barriers --wl-lower-sm100 | FileCheck %s
// RUN: warploom-opt %s --wl-tile="target=sm_100a schedule=persistent block-n=128" --wl-pipeline --wl-specialize --wl-plan-tmem --wl-plan-smem --wl-plan-barriers --wl-lower-sm100 | FileCheck %s --check-prefix=DRAIN

// The sm_100a GEMM (bf16, B [K, N], tile 128x128x64, 4 stages, persistent): the tcgen05 ops in order, with their
// operands' sources. Plan (from the passes before): a at smem 0, b at 65536 (4 x 16 KiB each), the C staging
// chunks at 131072 (2 x 16 KiB), the TMEM address slot at 163840, mbarriers ab_full 163848, ab_empty 163880,
// acc_full 163912, acc_empty 163928 (2 each: two TMEM accumulator stages of 128 columns, 256 allocated).

// CHECK-LABEL: llvm.func @wl_gemm_bf16_kn_128x128x64_s4_persistent_sm100a(
// CHECK-SAME: nvvm.maxntid = array<i32: 192, 1, 1>
// The epilogue frees an accumulator stage with one arrival per thread (4 warps): acc_empty counts 128.
// CHECK: [[AE0:%[0-9]+]] = llvm.getelementptr [[BASE:%[0-9]+]][%c163928_i32]
// CHECK-NEXT: nvvm.mbarrier.init [[AE0]], %c128_i32

// Prologue: warp 1 (the MMA warp) allocates 256 columns, the address lands in the smem slot; every thread reads
// it after the CTA barrier, between the fences the ISA asks for.
// CHECK: [[WARP:%[0-9]+]] = arith.divui [[TID:%[0-9]+]], %c32_i32
// CHECK-NEXT: [[SLOT:%[0-9]+]] = llvm.getelementptr [[BASE]][%c163840_i32]
// CHECK-NEXT: [[IS1:%[0-9]+]] = arith.cmpi eq, [[WARP]], %c1_i32
// CHECK-NEXT: scf.if [[IS1]] {
// CHECK-NEXT: nvvm.tcgen05.alloc [[SLOT]], %c256_i32 : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.tcgen05.relinquish_alloc_permit
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.barrier
// CHECK: nvvm.tcgen05.fence <after>
// CHECK-NEXT: [[TADDR:%[0-9]+]] = llvm.load [[SLOT]] : !llvm.ptr<3> -> i32

// The MMA warp: one elected lane per tile waits for a free accumulator stage (acc_empty, producer parity) ...
// CHECK: } else {
// CHECK-NEXT: [[ISMMA:%[0-9]+]] = arith.cmpi eq, [[WARP]], %c1_i32
// CHECK-NEXT: scf.if [[ISMMA]] {
// CHECK-NEXT: [[ELECT:%[0-9]+]] = nvvm.elect.sync -> i1
// CHECK: scf.for [[TILE:%arg[0-9]+]] =
// CHECK: [[STAGE:%[0-9]+]] = arith.remui [[J:%[0-9]+]], %c2_i32
// CHECK: [[AFOFF:%[0-9]+]] = arith.addi %c163912_i32
// CHECK-NEXT: [[AF:%[0-9]+]] = llvm.getelementptr [[BASE]][[[AFOFF]]]
// CHECK: [[AEOFF:%[0-9]+]] = arith.addi %c163928_i32
// CHECK-NEXT: [[AE:%[0-9]+]] = llvm.getelementptr [[BASE]][[[AEOFF]]]
// CHECK: scf.if [[ELECT]] {
// CHECK: nvvm.mbarrier.try_wait.parity [[AE]]
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// ... then per K tile waits for the operands (ab_full, consumer parity) ...
// CHECK-NEXT: scf.for [[KT:%arg[0-9]+]] = %c0_i32
// CHECK: [[FOFF:%[0-9]+]] = arith.addi %c163848_i32
// CHECK-NEXT: [[FULL:%[0-9]+]] = llvm.getelementptr [[BASE]][[[FOFF]]]
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity [[FULL]]
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// ... and issues four K = 16 MMAs into this tile's stage (TMEM base + 128 x stage), A and B from smem descriptors
// (static bits: A K-major LBO 16 SBO 1024 128B swizzle, version 1 = 0x4000404000010000; B MN-major LBO 8192 =
// 0x4000404002000000), the instruction descriptor bf16 x bf16 -> f32, M 128, N 128, B MN-major (136381584), the
// first MMA of the tile's first K tile without accumulate ...
// CHECK-NEXT: [[COL:%[0-9]+]] = arith.muli [[STAGE]], %c128_i32
// CHECK-NEXT: [[COL0:%[0-9]+]] = arith.addi %c0_i32, [[COL]]
// CHECK-NEXT: [[D:%[0-9]+]] = arith.addi [[TADDR]], [[COL0]]
// CHECK: [[DA:%[0-9]+]] = arith.ori {{%[0-9]+}}, %c4611756662049538048_i64
// CHECK: [[DB:%[0-9]+]] = arith.ori {{%[0-9]+}}, %c4611756662083026944_i64
// CHECK-NEXT: [[NOTFIRST:%[0-9]+]] = arith.cmpi ne, [[KT]], %c0_i32
// CHECK-NEXT: [[ON:%[0-9]+]] = arith.cmpi eq, %c0_i32, %c0_i32
// CHECK-NEXT: [[DP:%[0-9]+]] = llvm.inttoptr [[D]] : i32 to !llvm.ptr<6>
// CHECK-NEXT: nvvm.tcgen05.mma [[DP]], [[DA]], [[DB]], %c136381584_i32, [[NOTFIRST]] {ctaGroup = #nvvm.cta_group<cta_1>, kind = #nvvm.tcgen05_mma_kind<f16>}
// CHECK-NEXT: [[DA1:%[0-9]+]] = arith.addi [[DA]], %c2_i64
// CHECK-NEXT: [[DB1:%[0-9]+]] = arith.addi [[DB]], %c128_i64
// CHECK-NEXT: [[DP1:%[0-9]+]] = llvm.inttoptr [[D]]
// CHECK-NEXT: nvvm.tcgen05.mma [[DP1]], [[DA1]], [[DB1]], %c136381584_i32, [[ON]]
// CHECK-COUNT-2: nvvm.tcgen05.mma {{.*}}, %c136381584_i32, [[ON]]
// ... then commits them to this stage's ab_empty (the TMA warp may refill it once they completed) ...
// CHECK: [[EOFF:%[0-9]+]] = arith.addi %c163880_i32
// CHECK-NEXT: [[EMPTY:%[0-9]+]] = llvm.getelementptr [[BASE]][[[EOFF]]]
// CHECK-NEXT: nvvm.tcgen05.commit [[EMPTY]] : !llvm.ptr<3>
// CHECK-NEXT: }
// ... and after the K loop commits the tile to acc_full; at the CTA's last tile the whole warp meets the epilogue
// on named barrier 1 (160 threads) and frees TMEM.
// CHECK-NEXT: nvvm.tcgen05.commit [[AF]] : !llvm.ptr<3>
// CHECK-NEXT: }
// CHECK-NEXT: scf.if [[LAST:%[0-9]+]] {
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// CHECK-NEXT: nvvm.barrier id = %c1_i32 number_of_threads = %c160_i32
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK: nvvm.tcgen05.fence <after>
// CHECK-NEXT: [[TP:%[0-9]+]] = llvm.inttoptr [[TADDR]] : i32 to !llvm.ptr<6>
// CHECK-NEXT: nvvm.tcgen05.dealloc [[TP]], %c256_i32

// The epilogue warps: wait for the stage (acc_full, consumer parity), read their lane quadrant (warp % 4) x 32 at
// lane << 16, 32 columns per load, a 64-column chunk per tcgen05.wait::ld; each thread writes its row of the chunk
// (16-byte stores at the 128B-swizzled address: byte ^ ((byte & 896) >> 3), computed before the granule's four packed
// pairs) into the staging buffer (c at 131072, two 16 KiB chunks), fence.proxy.async, the warps sync on named barrier
// 2 (128 threads), and the role's first thread TMA-stores the chunk at (n0 + 64 j, m0) and commits it; before the
// second buffer is reused it waits until one store is left (wait_group.read 1). Then every thread frees the stage
// (acc_empty) and, at the last tile, tells the MMA warp on named barrier 1; after its last tile the storing thread
// waits for its stores to read smem.
// CHECK: scf.for
// CHECK: [[ESTAGE:%[0-9]+]] = arith.remui {{%[0-9]+}}, %c2_i32
// CHECK: [[EPH:%[0-9]+]] = arith.andi {{%[0-9]+}}, %c1_i32
// CHECK: [[EAFOFF:%[0-9]+]] = arith.addi %c163912_i32
// CHECK-NEXT: [[EAF:%[0-9]+]] = llvm.getelementptr [[BASE]][[[EAFOFF]]]
// CHECK: [[EAEOFF:%[0-9]+]] = arith.addi %c163928_i32
// CHECK-NEXT: [[EAE:%[0-9]+]] = llvm.getelementptr [[BASE]][[[EAEOFF]]]
// CHECK: [[M0:%[0-9]+]] = arith.muli {{%[0-9]+}}, %c128_i32
// CHECK-NEXT: arith.remui
// CHECK-NEXT: [[N0:%[0-9]+]] = arith.muli {{%[0-9]+}}, %c128_i32
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity [[EAF]], [[EPH]]
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK-NEXT: [[ECOL:%[0-9]+]] = arith.muli [[ESTAGE]], %c128_i32
// CHECK-NEXT: [[ECOL0:%[0-9]+]] = arith.addi %c0_i32, [[ECOL]]
// CHECK-NEXT: [[ED:%[0-9]+]] = arith.addi [[TADDR]], [[ECOL0]]
// CHECK-NEXT: [[Q:%[0-9]+]] = arith.remui [[WARP]], %c4_i32
// CHECK-NEXT: [[LANE0:%[0-9]+]] = arith.muli [[Q]], %c32_i32
// CHECK-NEXT: [[LANEF:%[0-9]+]] = arith.muli [[LANE0]], %c65536_i32
// CHECK-NEXT: [[ROWADDR:%[0-9]+]] = arith.addi [[ED]], [[LANEF]]
// CHECK-NEXT: [[ROW:%[0-9]+]] = arith.addi [[LANE0]], [[LANE:%[0-9]+]]
// CHECK-NEXT: [[ROWAT:%[0-9]+]] = arith.muli [[ROW]], %c128_i32
// CHECK-NEXT: scf.if [[STORER:%[0-9]+]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 1 {read}
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// CHECK-NEXT: nvvm.barrier id = %c2_i32 number_of_threads = %c128_i32
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK-NEXT: [[A0:%[0-9]+]] = arith.addi [[ROWADDR]], %c0_i32
// CHECK-NEXT: [[P0:%[0-9]+]] = llvm.inttoptr [[A0]]
// CHECK-NEXT: nvvm.tcgen05.ld [[P0]] {shape = #nvvm.tcgen05_ldst_shape<shape_32x32b>} : vector<32xi32>
// CHECK-NEXT: [[A1:%[0-9]+]] = arith.addi [[ROWADDR]], %c32_i32
// CHECK-NEXT: [[P1:%[0-9]+]] = llvm.inttoptr [[A1]]
// CHECK-NEXT: nvvm.tcgen05.ld [[P1]]
// CHECK-NEXT: nvvm.tcgen05.wait <load>
// CHECK: [[G0:%[0-9]+]] = arith.addi [[ROWAT]], %c0_i32
// CHECK-NEXT: [[SW0:%[0-9]+]] = arith.andi [[G0]], %c896_i32
// CHECK-NEXT: [[SW1:%[0-9]+]] = arith.shrui [[SW0]], %c3_i32
// CHECK-NEXT: [[SW:%[0-9]+]] = arith.xori [[G0]], [[SW1]]
// CHECK-NEXT: llvm.mlir.undef : vector<4xi32>
// CHECK: [[AT:%[0-9]+]] = arith.addi [[SW]], %c131072_i32
// CHECK-NEXT: [[ST:%[0-9]+]] = llvm.getelementptr [[BASE]][[[AT]]]
// CHECK-NEXT: llvm.store {{%[0-9]+}}, [[ST]] {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK-COUNT-7: llvm.store {{.*}} {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr<3>
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// CHECK-NEXT: nvvm.barrier id = %c2_i32 number_of_threads = %c128_i32
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK-NEXT: scf.if [[STORER]] {
// CHECK-NEXT: [[SRC:%[0-9]+]] = llvm.getelementptr [[BASE]][%c131072_i32]
// CHECK-NEXT: [[X0:%[0-9]+]] = arith.addi [[N0]], %c0_i32
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.global.shared.cta {{%arg[0-9]+}}, [[SRC]], box[[[X0]], [[M0]]]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// The second chunk: columns 64.., the second buffer (131072 + 16384).
// CHECK: nvvm.cp.async.bulk.wait_group 1 {read}
// CHECK: [[A2:%[0-9]+]] = arith.addi [[ROWADDR]], %c64_i32
// CHECK: arith.addi {{%[0-9]+}}, %c147456_i32
// CHECK: scf.if [[STORER]] {
// CHECK-NEXT: [[SRC1:%[0-9]+]] = llvm.getelementptr [[BASE]][%c147456_i32]
// CHECK-NEXT: [[X1:%[0-9]+]] = arith.addi [[N0]], %c64_i32
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.global.shared.cta {{%arg[0-9]+}}, [[SRC1]], box[[[X1]], [[M0]]]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// CHECK-NEXT: nvvm.mbarrier.arrive [[EAE]]
// CHECK-NEXT: scf.if
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// CHECK-NEXT: nvvm.barrier.arrive id = %c1_i32 number_of_threads = %c160_i32
// CHECK: scf.if [[STORER]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}

func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}

// The producer (warp 0) counts the K iterations of its CTA's tiles (tiles first, first + step, ... below total:
// ceil((total - min(first, total)) / step) of them, times the K tiles) and after its tile loop waits once more on
// each ab_empty stage (163880 + 8 stage) at the producer's parity for iterations its + 0..3: the MMA thread's last
// tcgen05.commit releases have landed before the CTA exits
// DRAIN: [[MIN:%[0-9]+]] = arith.minui [[FIRST:%[0-9]+]], [[TOTAL:%[0-9]+]]
// DRAIN-NEXT: [[LEFT:%[0-9]+]] = arith.subi [[TOTAL]], [[MIN]]
// DRAIN-NEXT: [[STEP1:%[0-9]+]] = arith.subi [[STEP:%[0-9]+]], %c1_i32
// DRAIN-NEXT: [[UP:%[0-9]+]] = arith.addi [[LEFT]], [[STEP1]]
// DRAIN-NEXT: [[MINE:%[0-9]+]] = arith.divui [[UP]], [[STEP]]
// DRAIN-NEXT: [[ITS:%[0-9]+]] = arith.muli [[MINE]], [[TRIPS:%[0-9]+]]
// DRAIN-NEXT: scf.for {{%arg[0-9]+}} = [[FIRST]] to [[TOTAL]] step [[STEP]]
// DRAIN: [[I0:%[0-9]+]] = arith.addi [[ITS]], %c0_i32
// DRAIN-NEXT: [[S0:%[0-9]+]] = arith.remui [[I0]], %c4_i32
// DRAIN-NEXT: [[Q0:%[0-9]+]] = arith.divui [[I0]], %c4_i32
// DRAIN-NEXT: [[P0:%[0-9]+]] = arith.andi [[Q0]], %c1_i32
// DRAIN-NEXT: [[O0:%[0-9]+]] = arith.muli [[S0]], %c8_i32
// DRAIN-NEXT: [[A0:%[0-9]+]] = arith.addi %c163880_i32, [[O0]]
// DRAIN-NEXT: [[B0:%[0-9]+]] = llvm.getelementptr {{%[0-9]+}}[[[A0]]]
// DRAIN-NEXT: [[X0:%[0-9]+]] = arith.xori [[P0]], %c1_i32
// DRAIN-NEXT: nvvm.mbarrier.try_wait.parity [[B0]], [[X0]],
// DRAIN-NEXT: arith.addi [[ITS]], %c1_i32
// DRAIN: arith.addi %c163880_i32
// DRAIN: nvvm.mbarrier.try_wait.parity
// DRAIN-NEXT: arith.addi [[ITS]], %c2_i32
// DRAIN: nvvm.mbarrier.try_wait.parity
// DRAIN-NEXT: [[I3:%[0-9]+]] = arith.addi [[ITS]], %c3_i32
// DRAIN: arith.addi %c163880_i32
// DRAIN: nvvm.mbarrier.try_wait.parity
// DRAIN-NEXT: }
// DRAIN-NEXT: } else {
