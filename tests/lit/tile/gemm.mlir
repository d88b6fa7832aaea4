// RUN: warploom-opt %s --split-input-file --wl-tile | FileCheck %s
// RUN: warploom-opt %s --split-input-file --wl-tile=block-n=128 | FileCheck %s --check-prefix=BN128
// RUN: warploom-opt %s --split-input-file --wl-tile=schedule=persistent | FileCheck %s --check-prefix=PERSIST
// RUN: not warploom-opt %s --split-input-file --wl-tile=schedule=zigzag 2>&1 | FileCheck %s --check-prefix=BADSCHED
// RUN: warploom-opt %s --split-input-file --wl-tile="schedule=persistent group-m=4" | FileCheck %s --check-prefix=GROUP
// RUN: not warploom-opt %s --split-input-file --wl-tile="schedule=persistent group-m=3" 2>&1 | FileCheck %s --check-prefix=BADGROUP
// RUN: not warploom-opt %s --split-input-file --wl-tile="group-m=8" 2>&1 | FileCheck %s --check-prefix=GRIDGROUP

// A row-major B ([K, N]) tiles into a kernel with a K loop; sizes stay runtime rules.
// CHECK-LABEL: func.func @gemm_kn
// CHECK: %[[C:.*]] = "wl.kernel"(%arg0, %arg1) ({
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.load_tile"() {dims = ["M", "K"], operand = "a", tile = [128, 64]}
// CHECK-NEXT: "wl.load_tile"() {dims = ["K", "N"], operand = "b", tile = [64, 256]}
// CHECK-NEXT: "wl.mma"() {a = "a", acc = "acc", b = "b", shape = [128, 256, 64]}
// CHECK: }) {trip = ["cdiv", "K", 64]}
// CHECK-NEXT: "wl.store_tile"() {acc = "acc", operand = "c", tile = [128, 256]}
// Each operand's major-ness lives in its tile's dims (above), not in a kernel-wide attribute.
// CHECK-NOT: b_layout
// CHECK: grid = [["cdiv", "N", 256], ["cdiv", "M", 128], ["const", 1]]
// CHECK-SAME: kind = "gemm"
// CHECK-SAME: tile = [128, 256, 64]
// CHECK-NOT: wl.matmul
// CHECK: return %[[C]]
// BN128: grid = [["cdiv", "N", 128], ["cdiv", "M", 128], ["const", 1]]
// A persistent kernel: at most one CTA per SM (SMS, a launch size), each walking tiles.
// PERSIST: grid = [["persistent", "M", 128, "N", 256, "SMS"], ["const", 1], ["const", 1]]
// PERSIST-SAME: schedule = "persistent"
// BADSCHED: error: schedule = 'zigzag': use one of persistent, grid
// group-m: the persistent walk's tile order, a kernel attribute (the grid rule is unchanged)
// GROUP: "wl.kernel"(%arg0, %arg1)
// GROUP: grid = {{\[}}["persistent", "M", 128, "N", 256, "SMS"], ["const", 1], ["const", 1]], group_m = 4 : i64
// BADGROUP: error: group-m = 3: use one of 1, 2, 4, 8, 16
// GRIDGROUP: error: group-m = 8: the tile order of the sm_90a persistent GEMM (target = sm_90a, schedule = grid)
func.func @gemm_kn(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}

// -----

// B given as [N, K] (transpose_b, the nn.Linear weight) keeps K innermost in its tiles.
// CHECK-LABEL: func.func @gemm_nk
// CHECK: "wl.load_tile"() {dims = ["N", "K"], operand = "b", tile = [256, 64]}
// CHECK-NOT: b_layout
func.func @gemm_nk(%a: tensor<?x4096xf16>, %w: tensor<11008x4096xf16>) -> tensor<?x11008xf16> {
  %c = "wl.matmul"(%a, %w) {transpose_a = false, transpose_b = true} : (tensor<?x4096xf16>, tensor<11008x4096xf16>) -> tensor<?x11008xf16>
  return %c : tensor<?x11008xf16>
}
