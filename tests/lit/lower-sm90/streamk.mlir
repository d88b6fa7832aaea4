// RUN: warploom-opt %s --wl-tile=schedule=streamk,block-n=128 --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// Stream-K: the first D = max(T / P - 1, 0) P tiles are data-parallel (CTA c takes c, c + P, ... whole, ring
// iterations counting from 0); then CTA c of P takes the stream-K iterations [c I / P, (c + 1) I / P) of
// I = (T - D) kt, walking stream-K tiles u = start / kt .. (end - 1) / kt (tile D + u) with the K tiles
// [max(start, u kt) - u kt, min(end, u kt + kt) - u kt) of each, at ring iteration D / P kt + u kt - start + kt_index.
// A partial piece goes to the workspace slot (CTA * 2 + slot) of its warpgroup, the warpgroup syncs, its first
// thread fences (release) and counts the piece; the last piece resets the counter, fences (acquire), tells the
// warpgroup by bar.red.or, and it sums the pieces' slots in K order.
// CHECK: "wl.launch"{{.*}}grid = [["streamk", "M", 128, "N", 128, "K", 64, "SMS"], ["const", 1], ["const", 1]], kernel = "wl_gemm_bf16_kn_128x128x64_s4_streamk"
// CHECK: llvm.func @wl_gemm_bf16_kn_128x128x64_s4_streamk({{.*}}%[[WS:arg[0-9]+]]: !llvm.ptr<1>, %[[CNT:arg[0-9]+]]: !llvm.ptr<1>, %[[M:arg[0-9]+]]: i32, %[[N:arg[0-9]+]]: i32, %[[K:arg[0-9]+]]: i32)
// The producer's walk: the data-parallel tiles, then this CTA's stream-K run, tile by tile, K tile by K tile.
// CHECK: nvvm.setmaxregister decrease
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK: %[[P:.*]] = nvvm.read.ptx.sreg.nctaid.x : i32
// CHECK: %[[T:.*]] = arith.muli %{{.*}}, %{{.*}} : i32
// CHECK: %[[KT:.*]] = arith.divui %{{.*}}, %c64_i32 : i32
// CHECK-NEXT: %[[WAVES:.*]] = arith.divui %[[T]], %[[P]] : i32
// CHECK-NEXT: %[[W1:.*]] = arith.maxsi %[[WAVES]], %c1_i32 : i32
// CHECK-NEXT: %[[W0:.*]] = arith.subi %[[W1]], %c1_i32 : i32
// CHECK-NEXT: %[[D:.*]] = arith.muli %[[W0]], %[[P]] : i32
// CHECK-NEXT: scf.for %[[DT:.*]] = %[[CTA]] to %[[D]] step %[[P]]  : i32 {
// CHECK: scf.for %{{.*}} = %c0_i32 to %{{.*}} step %c1_i32  : i32 {
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// CHECK: %[[DPW:.*]] = arith.divui %[[D]], %[[P]] : i32
// CHECK-NEXT: %[[DPIT:.*]] = arith.muli %[[DPW]], %{{.*}} : i32
// CHECK-NEXT: %[[SKT:.*]] = arith.subi %[[T]], %[[D]] : i32
// CHECK-NEXT: %[[ITERS:.*]] = arith.muli %[[SKT]], %{{.*}} : i32
// CHECK-NEXT: %[[S0:.*]] = arith.muli %[[CTA]], %[[ITERS]] : i32
// CHECK-NEXT: %[[START:.*]] = arith.divui %[[S0]], %[[P]] : i32
// CHECK-NEXT: %[[C1:.*]] = arith.addi %[[CTA]], %c1_i32 : i32
// CHECK-NEXT: %[[E0:.*]] = arith.muli %[[C1]], %[[ITERS]] : i32
// CHECK-NEXT: %[[END:.*]] = arith.divui %[[E0]], %[[P]] : i32
// CHECK-NEXT: %[[FIRST:.*]] = arith.divui %[[START]], %[[KTT:.*]] : i32
// CHECK: scf.for %[[U:.*]] = %[[FIRST]] to %{{.*}} step %c1_i32  : i32 {
// CHECK-NEXT: %[[T0:.*]] = arith.muli %[[U]], %[[KTT]] : i32
// CHECK-NEXT: %[[LO0:.*]] = arith.maxsi %[[START]], %[[T0]] : i32
// CHECK-NEXT: %[[LO:.*]] = arith.subi %[[LO0]], %[[T0]] : i32
// CHECK: %[[HI0:.*]] = arith.minsi %[[END]], %{{.*}} : i32
// CHECK-NEXT: %[[HI:.*]] = arith.subi %[[HI0]], %[[T0]] : i32
// CHECK-NEXT: %[[TILE:.*]] = arith.addi %[[D]], %[[U]] : i32
// CHECK-NEXT: %[[REL:.*]] = arith.subi %[[T0]], %[[START]] : i32
// CHECK-NEXT: %[[BASE:.*]] = arith.addi %[[DPIT]], %[[REL]] : i32
// CHECK: scf.for %[[KI:.*]] = %[[LO]] to %[[HI]] step %c1_i32  : i32 {
// CHECK-NEXT: arith.addi %[[BASE]], %[[KI]] : i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global
// The consumers: a whole tile (lo = 0, hi = kt) is stored as it is; a partial piece is written to its slot.
// CHECK: nvvm.setmaxregister increase
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}}  : i32 {
// CHECK: nvvm.wgmma.mma_async
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta
// CHECK: nvvm.wgmma.mma_async
// CHECK: %[[LO0C:.*]] = arith.cmpi eq, %[[CLO:.*]], %c0_i32 : i32
// CHECK-NEXT: %[[HIKT:.*]] = arith.cmpi eq, %[[CHI:.*]], %{{.*}} : i32
// CHECK-NEXT: %[[WHOLE:.*]] = arith.andi %[[LO0C]], %[[HIKT]] : i1
// CHECK: scf.if %[[WHOLE]] -> (!llvm.struct<{{.*}}>, i1) {
// CHECK: } else {
// CHECK: arith.cmpi ule, %{{.*}}, %{{.*}} : i32
// CHECK: %[[SLOT:.*]] = arith.select %{{.*}}, %c0_i32, %c1_i32 : i32
// CHECK: %[[TWICE:.*]] = arith.muli %[[CTA2:.*]], %c2_i32 : i32
// CHECK: arith.addi %[[TWICE]], %[[SLOT]] : i32
// CHECK: %[[MINE:.*]] = llvm.getelementptr %[[WS]][%{{.*}}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// CHECK: nvvm.barrier id = %[[BAR:.*]] number_of_threads = %c128_i32
// CHECK: scf.if %{{.*}} -> (i1) {
// CHECK-NEXT: llvm.fence syncscope("device") acq_rel
// CHECK: %[[COUNTER:.*]] = llvm.getelementptr %[[CNT]][%{{.*}}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
// CHECK-NEXT: %[[OLD:.*]] = llvm.atomicrmw add %[[COUNTER]], %c1_i32 syncscope("device") monotonic
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %[[OLD]], %{{.*}} : i32
// CHECK-NEXT: scf.if %[[LAST]] {
// CHECK-NEXT: llvm.store %c0_i32, %[[COUNTER]] {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK-NEXT: llvm.fence syncscope("device") acq_rel
// CHECK: %[[ANY:.*]] = llvm.call_intrinsic "llvm.nvvm.barrier.cta.red.or.aligned.count"(%[[BAR]], %c128_i32, %{{.*}}) : (i32, i32, i1) -> i1
// CHECK: scf.if %[[ANY]] -> (!llvm.struct<{{.*}}>) {
// CHECK: %[[ZERO:.*]] = llvm.mlir.zero : !llvm.struct<{{.*}}>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c1_i32 iter_args(%{{.*}} = %[[ZERO]])
// CHECK: llvm.load %{{.*}} {alignment = 16 : i64} : !llvm.ptr<1> -> vector<4xf32>
// CHECK: arith.addf
// The store of C (through smem and TMA) runs only where the whole tile is in this warpgroup's registers.
// CHECK: scf.if %{{.*}}#1 {
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
