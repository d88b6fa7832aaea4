// RUN: warploom-opt %s --wl-tile="schedule=persistent group-m=8" --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// The persistent walk in bands of 8 rows of tiles (group-m=8, rules.tile_origin): tile t is in band
// t / (8 * n_tiles), whose first row is band * 8 and which has min(m_tiles - first, 8) rows (fewer in the last
// band); inside the band the walk goes column by column: row first + local % rows, column local / rows. The grid
// rule is the plain persistent one (one CTA per SM): only the order changes, so the name says _g8.
// CHECK: "wl.launch"{{.*}}cluster = [1, 1, 1], grid = [["persistent", "M", 128, "N", 256, "SMS"], ["const", 1], ["const", 1]], kernel = "wl_gemm_bf16_kn_128x256x64_s4_persistent_g8"
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: %[[NT:.*]] = arith.divui %{{.*}}, %c256_i32 : i32
// CHECK: %[[MT:.*]] = arith.divui %{{.*}}, %c128_i32 : i32
// CHECK: scf.for %[[TILE:.*]] = %{{.*}} to %{{.*}} step %{{.*}} : i32 {
// CHECK: %[[PER:.*]] = arith.muli %c8_i32, %[[NT]] : i32
// CHECK-NEXT: %[[BAND:.*]] = arith.divui %[[TILE]], %[[PER]] : i32
// CHECK-NEXT: %[[FIRST:.*]] = arith.muli %[[BAND]], %c8_i32 : i32
// CHECK-NEXT: %[[LEFT:.*]] = arith.subi %[[MT]], %[[FIRST]] : i32
// CHECK-NEXT: %[[ROWS:.*]] = arith.minui %[[LEFT]], %c8_i32 : i32
// CHECK-NEXT: %[[DONE:.*]] = arith.muli %[[BAND]], %[[PER]] : i32
// CHECK-NEXT: %[[LOCAL:.*]] = arith.subi %[[TILE]], %[[DONE]] : i32
// CHECK-NEXT: %[[R:.*]] = arith.remui %[[LOCAL]], %[[ROWS]] : i32
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[FIRST]], %[[R]] : i32
// CHECK-NEXT: %[[COL:.*]] = arith.divui %[[LOCAL]], %[[ROWS]] : i32
// CHECK-NEXT: %[[M0:.*]] = arith.muli %[[ROW]], %c128_i32 : i32
// CHECK-NEXT: %[[N0:.*]] = arith.muli %[[COL]], %c256_i32 : i32
// the producer's loads start at that tile's origin: A at row M0, B at column N0
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%{{.*}}, %[[M0]]]
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%[[N0]], %{{.*}}]
// the consumers walk the same order
// CHECK: nvvm.setmaxregister increase 232
// CHECK: arith.minui %{{.*}}, %c8_i32 : i32


func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
