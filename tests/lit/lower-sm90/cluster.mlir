// RUN: warploom-opt %s --wl-tile="schedule=persistent cluster-m=2" --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// A 2x1 cluster (cluster-m=2): the two CTAs walk tiles of 256 rows as one (cluster c takes tiles c, c + clusters,
// ...), each its 128 rows (rank * 128). B's 64x256 tile is the same for both: each CTA loads 2 of its 4 boxes (rank
// * 2, rank * 2 + 1) and multicasts them (ctaMask 0b11) into both CTAs. So a slot is refilled in both CTAs at once:
// each consumer warpgroup frees it in both (mapa rank 0 and 1, remote arrive), and empty[s] counts 2 x 2 arrivals.
// The CTAs meet at a cluster barrier after the mbarrier init (before any multicast lands) and at the end.
// CHECK: "wl.launch"{{.*}}cluster = [2, 1, 1], grid = [["persistent_pairs", "M", 256, "N", 256, "SMS"], ["const", 1], ["const", 1]], kernel = "wl_gemm_bf16_kn_128x256x64_s4_persistent_c2"
// CHECK: %[[RANK:.*]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// full[0..3]: one arrival (expect_tx); empty[0..3]: 2 consumer warpgroups x 2 CTAs
// CHECK: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c4_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c4_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c4_i32
// CHECK: nvvm.mbarrier.init %{{.*}}, %c4_i32
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK: nvvm.barrier
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: %[[FIRST:.*]] = nvvm.read.ptx.sreg.clusterid.x : i32
// CHECK: %[[STEP:.*]] = nvvm.read.ptx.sreg.nclusterid.x : i32
// CHECK: scf.for %[[TILE:.*]] = %[[FIRST]] to %{{.*}} step %[[STEP]] : i32 {
// CHECK: %[[ROWS:.*]] = arith.muli %[[RANK]], %c128_i32 : i32
// CHECK: %[[M0:.*]] = arith.addi %{{.*}}, %[[ROWS]] : i32
// A: this CTA's rows, not multicast
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %[[FULL:.*]], box[%{{.*}}, %[[M0]]] : !llvm.ptr<7>, !llvm.ptr
// B: boxes rank * 2 and rank * 2 + 1 (64 columns, 8192 bytes each), into both CTAs
// CHECK: %[[BOX0:.*]] = arith.muli %[[RANK]], %c2_i32 : i32
// CHECK: arith.muli %[[BOX0]], %c64_i32 : i32
// CHECK: arith.muli %[[BOX0]], %c8192_i32 : i32
// CHECK: %[[BOX1:.*]] = arith.addi %{{.*}}, %c1_i32 : i32
// CHECK: arith.muli %[[BOX1]], %c64_i32 : i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %[[FULL]], box[%{{.*}}, %{{.*}}] multicast_mask = %c3_i16
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %[[FULL]], box[%{{.*}}, %{{.*}}] multicast_mask = %c3_i16
// CHECK-NOT: multicast_mask
// CHECK: nvvm.setmaxregister increase 232
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK: %[[R0:.*]] = nvvm.mapa %[[EMPTY:.*]], %c0_i32
// CHECK-NEXT: nvvm.mbarrier.arrive %[[R0]] : !llvm.ptr<7>
// CHECK-NEXT: %[[R1:.*]] = nvvm.mapa %[[EMPTY]], %c1_i32
// CHECK-NEXT: nvvm.mbarrier.arrive %[[R1]] : !llvm.ptr<7>
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-NEXT: llvm.return

func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
