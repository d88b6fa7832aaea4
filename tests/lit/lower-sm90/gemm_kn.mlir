// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// bf16 GEMM with B row-major [K, N] ("kn"), the default 128x256x64 tile and 4 stages: the wl.kernel
// becomes a wl.launch of a gpu.module whose code follows the plan (barrier counts, register budgets,
// smem offsets).

// CHECK: module attributes {gpu.container_module}
// CHECK: "wl.launch"(%arg0, %arg1) {block = [384, 1, 1], cluster = [1, 1, 1], grid = [["cdiv", "N", 256], ["cdiv", "M", 128], ["const", 1]], kernel = "wl_gemm_bf16_kn_128x256x64_s4", smem_bytes = 230464 : i64} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
// CHECK-NOT: wl.kernel
// CHECK: gpu.module @wl_gemm_bf16_kn_128x256x64_s4_mod [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// CHECK: llvm.mlir.global external @[[SMEM:wl_gemm_bf16_kn_128x256x64_s4_smem]]() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<0 x i8>
// CHECK: llvm.func @wl_gemm_bf16_kn_128x256x64_s4(%arg0: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %arg1: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %arg2: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %arg3: i32, %arg4: i32, %arg5: i32) attributes {nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>}

// The four full barriers (one arrival: the producer's expect_tx) and four empty barriers (two
// arrivals: one per consumer warpgroup), at the planned offsets 229376 + 8s and 229408 + 8s (after A's
// 4 x 16 KiB, B's 4 x 32 KiB and C's staging, 2 x 16 KiB).
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i32
// CHECK: llvm.mlir.addressof @[[SMEM]]
// CHECK: scf.if
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %[[C1]] : !llvm.ptr<3>, i32
// CHECK-COUNT-4: nvvm.mbarrier.init %{{.*}}, %[[C2]] : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK: nvvm.barrier

// Producer warpgroup: give registers back, one elected thread waits on empty[s] and issues
// A (1 box) + B (256 / 64 = 4 boxes of [64 N, 64 K]) per stage.
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: nvvm.elect.sync
// CHECK: nvvm.prefetch tensormap, %arg0
// CHECK: nvvm.prefetch tensormap, %arg1
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c49152_i32
// CHECK-COUNT-1: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0,
// CHECK-COUNT-4: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1,

// Consumer warpgroups: take registers, wait on full[s], 4 x wgmma m64n256k16 with B MN-major
// (<row>: transposed B), retire the group, one thread per warpgroup arrives on empty[s].
// CHECK: } else {
// CHECK: nvvm.setmaxregister increase 232
// CHECK: scf.for {{.*}} iter_args
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, D[<f32>, <one>, <wrapped>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// One MMA group stays in flight; the stage of the previous iteration is freed once its group retired.
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: arith.cmpi uge
// CHECK: scf.if
// CHECK-NEXT: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64
// CHECK: scf.yield
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// Epilogue: C through smem and TMA in four 64-column chunks, alternating the two staging buffers at
// 196608 and 196608 + 16384. Per chunk: the warpgroup's first thread waits until the buffer was read
// (wait_group.read 0 at the first chunk, 1 after), the warpgroup syncs on its named barrier, each thread
// writes 16 bf16 pairs (8 column groups x 2 rows) to smem, fences them for the async proxy, syncs again,
// and the first thread TMA-stores the 64 x 64 box through C's tensor map (%arg2) and commits it.
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: nvvm.barrier id = [[EPI:%[0-9]+]] number_of_threads = %c128_i32
// CHECK-COUNT-16: llvm.store %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.barrier id = [[EPI]] number_of_threads = %c128_i32
// CHECK: arith.addi %{{.*}}, %c196608_i32
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg2, %{{.*}}, box[%{{.*}}, %{{.*}}]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK: nvvm.cp.async.bulk.wait_group 1 {read}
// CHECK: nvvm.barrier id = [[EPI]] number_of_threads = %c128_i32
// CHECK-COUNT-16: llvm.store %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK: arith.addi %{{.*}}, %c212992_i32
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg2,
// CHECK: nvvm.cp.async.bulk.wait_group 1 {read}
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg2,
// CHECK: nvvm.cp.async.bulk.wait_group 1 {read}
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg2,
// CHECK-NOT: nvvm.cp.async.bulk.tensor.global.shared.cta
// No global store from registers; the last stores have read the smem before the CTA exits.
// CHECK-NOT: !llvm.ptr<1>
// CHECK: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: llvm.return
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
