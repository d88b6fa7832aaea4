// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem | FileCheck %s
// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline=stages=3 --wl-specialize --wl-plan-smem | FileCheck %s --check-prefix=SMALL
// RUN: not warploom-opt %s --wl-tile --wl-pipeline=stages=5 --wl-specialize --wl-plan-smem 2>&1 | FileCheck %s --check-prefix=OVER

// 4 stages of a 128x64 and a 64x256 bf16 tile, 1024-aligned for the 128B swizzle, then 8 mbarriers.
// CHECK: "wl.buffer"() {align = 1024 : i64, bytes = 65536 : i64, {{.*}} name = "a", offset = 0 : i64, {{.*}} swizzle = 128 : i64}
// CHECK-NEXT: "wl.buffer"() {align = 1024 : i64, bytes = 131072 : i64, {{.*}} name = "b", offset = 65536 : i64, {{.*}} swizzle = 128 : i64}
// CHECK-NEXT: "wl.buffer"() {align = 8 : i64, bytes = 64 : i64, elem = "i64", name = "mbarriers", offset = 196608 : i64
// CHECK: smem_bytes = 197696 : i64
// SMALL: name = "b", offset = 49152 : i64
// SMALL: name = "mbarriers", offset = 98304 : i64
// SMALL: smem_bytes = 99376 : i64
// OVER: error: smem plan needs 246864 B (a 81920 B, b 163840 B, mbarriers 80 B, + 1024 B alignment slack) for 5 stages; the limit is 232448 B: use 4 stages (wl-pipeline{stages=4}) or a smaller block-n
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
