// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// f16 in and out (B "nk", 128x256x64): wgmma takes <f16> operands, the epilogue rounds to f16.

// CHECK: "wl.launch"(%arg0, %arg1) {{.*}}kernel = "wl_gemm_f16_nk_128x256x64_s4"{{.*}} : (tensor<?x?xf16>, tensor<?x?xf16>) -> tensor<?x?xf16>
// CHECK: gpu.module @wl_gemm_f16_nk_128x256x64_s4_mod
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c49152_i32
// CHECK: nvvm.setmaxregister increase 232
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, D[<f32>, <one>, <wrapped>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// CHECK: llvm.fptrunc %{{.*}} : vector<2xf32> to vector<2xf16>
// CHECK: llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<1>
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: llvm.store %{{.*}} {alignment = 2 : i64} : f16, !llvm.ptr<1>
// CHECK-NOT: bf16
func.func @gemm(%a: tensor<?x?xf16>, %b: tensor<?x?xf16>) -> tensor<?x?xf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<?x?xf16>, tensor<?x?xf16>) -> tensor<?x?xf16>
  return %c : tensor<?x?xf16>
}
