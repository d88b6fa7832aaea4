// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// bf16 GEMM with B given as [N, K] (transpose_b: "nk", K-major like A), tile 128x128x64, 4 stages.
// Both wgmma operands are K-major (B <col>), and B takes one TMA box per stage.

// CHECK: "wl.launch"(%arg0, %arg1) {block = [384, 1, 1], cluster = [1, 1, 1], grid = [["cdiv", "N", 128], ["cdiv", "M", 128], ["const", 1]], kernel = "wl_gemm_bf16_nk_128x128x64_s4", smem_bytes = 164928 : i64}
// CHECK: gpu.module @wl_gemm_bf16_nk_128x128x64_s4_mod [#nvvm.target<O = 3, chip = "sm_90a", features = "+ptx80">]
// CHECK: llvm.func @wl_gemm_bf16_nk_128x128x64_s4(%arg0: !llvm.ptr {{{.*}}nvvm.grid_constant}, %arg1: !llvm.ptr {{{.*}}nvvm.grid_constant}, %arg2: !llvm.ptr {{{.*}}nvvm.grid_constant}, %arg3: i32, %arg4: i32, %arg5: i32) attributes {nvvm.kernel, nvvm.maxntid = array<i32: 384, 1, 1>}

// Barriers at the planned offsets: full at 163840 + 8s (1 arrival), empty at 163872 + 8s (2 arrivals).
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i32
// CHECK-DAG: %[[FULL0:.*]] = arith.constant 163840 : i32
// CHECK-DAG: %[[EMPTY3:.*]] = arith.constant 163896 : i32
// CHECK: %[[BASE:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK: %[[B0:.*]] = llvm.getelementptr %[[BASE]][%[[FULL0]]]
// CHECK-NEXT: nvvm.mbarrier.init %[[B0]], %[[C1]] : !llvm.ptr<3>, i32
// CHECK: %[[B7:.*]] = llvm.getelementptr %[[BASE]][%[[EMPTY3]]]
// CHECK-NEXT: nvvm.mbarrier.init %[[B7]], %[[C2]] : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.fence.mbarrier.init

// CHECK: nvvm.setmaxregister decrease 40
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c32768_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%[[K0:.*]], %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%[[K0]], %{{.*}}] : !llvm.ptr<7>, !llvm.ptr
// CHECK-NOT: nvvm.cp.async.bulk.tensor

// CHECK: nvvm.setmaxregister increase 232
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 128, k = 16>, D[<f32>, <one>, <wrapped>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NOT: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: nvvm.mbarrier.arrive %{{.*}} : !llvm.ptr<3> -> i64
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
