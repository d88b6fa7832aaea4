// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem | FileCheck %s
// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline=stages=3 --wl-specialize --wl-plan-smem | FileCheck %s --check-prefix=SMALL
// RUN: not warploom-opt %s --wl-tile --wl-pipeline=stages=5 --wl-specialize --wl-plan-smem 2>&1 | FileCheck %s --check-prefix=OVER

// 4 stages of a 128x64 and a 64x256 bf16 tile, 1024-aligned for the 128B swizzle, C's staging (2 chunks of
// 128 rows x 64 columns, whatever the stage count), then 8 mbarriers.
// CHECK: "wl.buffer"() {align = 1024 : i64, bytes = 65536 : i64, {{.*}} name = "a", offset = 0 : i64, {{.*}} swizzle = 128 : i64}
// CHECK-NEXT: "wl.buffer"() {align = 1024 : i64, bytes = 131072 : i64, {{.*}} name = "b", offset = 65536 : i64, {{.*}} swizzle = 128 : i64}
// CHECK-NEXT: "wl.buffer"() {align = 1024 : i64, bytes = 32768 : i64, {{.*}} name = "c", offset = 196608 : i64, {{.*}} swizzle = 128 : i64}
// CHECK-NEXT: "wl.buffer"() {align = 8 : i64, bytes = 64 : i64, elem = "i64", name = "mbarriers", offset = 229376 : i64
// CHECK: smem_bytes = 230464 : i64
// SMALL: name = "b", offset = 49152 : i64
// SMALL: name = "c", offset = 98304 : i64
// SMALL: name = "mbarriers", offset = 131072 : i64
// SMALL: smem_bytes = 132144 : i64
// The way out counts only the ring's regions per stage: 4 stages fit (230464 B), not 3.
// OVER: error: smem plan needs 279632 B (a 81920 B, b 163840 B, c 32768 B, mbarriers 80 B, + 1024 B alignment slack) for 5 stages; the limit is 232448 B: use 4 stages (wl-pipeline{stages=4}) or a smaller block-n
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
