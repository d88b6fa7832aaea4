// RUN: warploom-opt %s --wl-tile=schedule=persistent --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// A persistent kernel: every role walks the tiles ctaid.x, ctaid.x + nctaid.x, ... (n fastest), and the ring
// iteration (stage, phase) counts on across tiles: it = (tiles done by this CTA) * K tiles + kt.
// CHECK: "wl.launch"{{.*}}grid = [["persistent", "M", 128, "N", 256, "SMS"], ["const", 1], ["const", 1]], kernel = "wl_gemm_bf16_kn_128x256x64_s4_persistent"
// CHECK: llvm.func @wl_gemm_bf16_kn_128x256x64_s4_persistent
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: %[[FIRST:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK: %[[STEP:.*]] = nvvm.read.ptx.sreg.nctaid.x : i32
// CHECK: scf.for %[[TILE:.*]] = %[[FIRST]] to %{{.*}} step %[[STEP]] : i32 {
// CHECK: arith.subi %[[TILE]], %[[FIRST]]
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: nvvm.setmaxregister increase 232
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} : i32 {
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: llvm.store
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
