// RUN: warploom-opt %s --wl-tile="schedule=persistent cluster-m=2 block-n=128" --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// B as [N, K] (a weight): its 128x64 tile is one TMA box of 128 rows (N) of 128 bytes, so the 2x1 cluster splits the
// rows: rank r loads rows r * 64 .. r * 64 + 63 (at byte r * 64 * 128 of the stage), multicast into both CTAs; the
// tensor map's box is 64 rows.
// CHECK: kernel = "wl_gemm_bf16_nk_128x128x64_s4_persistent_c2"
// CHECK: %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}} : !llvm.ptr<7>, !llvm.ptr
// CHECK: %[[STAGE:.*]] = arith.addi %c65536_i32, %{{.*}} : i32
// CHECK-NEXT: %[[ROW:.*]] = arith.muli %[[RANK]], %c64_i32 : i32
// CHECK-NEXT: %[[AT:.*]] = arith.muli %[[ROW]], %c128_i32 : i32
// CHECK-NEXT: %[[N0:.*]] = arith.addi %{{.*}}, %[[ROW]] : i32
// CHECK-NEXT: %[[DST:.*]] = arith.addi %[[STAGE]], %[[AT]] : i32
// CHECK-NEXT: %[[PTR:.*]] = llvm.getelementptr %{{.*}}[%[[DST]]]
// CHECK-NEXT: %[[CLU:.*]] = llvm.addrspacecast %[[PTR]]
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global %[[CLU]], %arg1, %{{.*}}, box[%{{.*}}, %[[N0]]] multicast_mask = %c3_i16
// CHECK-NOT: multicast_mask
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
