// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s --check-prefixes=CHECK,TMA
// RUN: warploom-opt %s --wl-tile=epilogue=direct --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s --check-prefixes=CHECK,DIRECT

// f16 in and out (B "nk", 128x256x64): wgmma takes <f16> operands, the epilogue rounds to f16.
// With `epilogue=direct` the pairs go straight to global memory, and the ragged edge element by element.

// CHECK: "wl.launch"(%arg0, %arg1) {{.*}}kernel = "wl_gemm_f16_nk_128x256x64_s4{{(_direct)?}}"{{.*}} : (tensor<?x?xf16>, tensor<?x?xf16>) -> tensor<?x?xf16>
// CHECK: gpu.module @wl_gemm_f16_nk_128x256x64_s4{{(_direct)?}}_mod
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c49152_i32
// CHECK: nvvm.setmaxregister increase 232
// CHECK-COUNT-4: nvvm.wgmma.mma_async {{.*}}, <m = 64, n = 256, k = 16>, D[<f32>, <one>, <wrapped>], A[<f16>, <one>, <row>], B[<f16>, <one>, <col>]
// The staged epilogue packs f16 pairs into the smem chunk, and C's tensor map stores them.
// TMA: [[PAIR:%[0-9]+]] = llvm.fptrunc %{{.*}} : vector<2xf32> to vector<2xf16>
// TMA-NEXT: [[BITS:%[0-9]+]] = llvm.bitcast [[PAIR]] : vector<2xf16> to i32
// TMA: llvm.store [[BITS]], %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// TMA: nvvm.cp.async.bulk.tensor.global.shared.cta %arg2,
// DIRECT: llvm.fptrunc %{{.*}} : vector<2xf32> to vector<2xf16>
// DIRECT: llvm.store %{{.*}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<1>
// DIRECT: arith.truncf %{{.*}} : f32 to f16
// DIRECT: llvm.store %{{.*}} {alignment = 2 : i64} : f16, !llvm.ptr<1>
// CHECK-NOT: bf16
func.func @gemm(%a: tensor<?x?xf16>, %b: tensor<?x?xf16>) -> tensor<?x?xf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<?x?xf16>, tensor<?x?xf16>) -> tensor<?x?xf16>
  return %c : tensor<?x?xf16>
}
