// RUN: warploom-opt %s --wl-tile --wl-pipeline | FileCheck %s
// RUN: warploom-opt %s --wl-tile --wl-pipeline=stages=3 | FileCheck %s --check-prefix=S3
// RUN: not warploom-opt %s --wl-tile --wl-pipeline=stages=1 2>&1 | FileCheck %s --check-prefix=S1

// Each tile load gets a ring of buffers declared at the top of the kernel and becomes an async copy;
// the buffers keep the logical dims of their tiles (the last is contiguous) and advance as one ring.
// CHECK: "wl.kernel"
// CHECK-NEXT: "wl.buffer"() {dims = ["M", "K"], elem = "bf16", name = "a", shape = [128, 64], stages = 4 : i64}
// CHECK-NEXT: "wl.buffer"() {dims = ["K", "N"], elem = "bf16", name = "b", shape = [64, 256], stages = 4 : i64}
// C leaves through a staging region of two 64-column chunks (not a ring: the stores pace it).
// CHECK-NEXT: "wl.buffer"() {dims = ["M", "N"], elem = "bf16", name = "c", shape = [128, 64], stages = 2 : i64}
// CHECK-NEXT: "wl.ring"() {name = "ab", regions = ["a", "b"], stages = 4 : i64}
// CHECK: "wl.async_load"() {buffer = "a", operand = "a", tile = [128, 64]}
// CHECK-NEXT: "wl.async_load"() {buffer = "b", operand = "b", tile = [64, 256]}
// CHECK-NOT: wl.load_tile
// CHECK: "wl.store_tile"() {acc = "acc", buffer = "c", operand = "c", tile = [128, 256]}
// CHECK: stages = 4 : i64
// S3: "wl.buffer"() {dims = ["M", "K"], elem = "bf16", name = "a", shape = [128, 64], stages = 3 : i64}
// S1: error: wl-pipeline: stages = 1; use 2..8
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
