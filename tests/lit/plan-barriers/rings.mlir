// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s
// RUN: not warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-barriers 2>&1 | FileCheck %s --check-prefix=ORDER

// full[4]: one arrival (expect_tx) plus the 48 KiB of one stage; empty[4]: one arrival per consumer warpgroup.
// The ring wl-pipeline declared names its two barriers; each barrier names its ring.
// CHECK: "wl.ring"() {consumers = ["consumer"], empty = "empty", full = "full", name = "ab", producer = "producer", regions = ["a", "b"], stages = 4 : i64}
// CHECK: "wl.mbarrier"() {arrivals = 1 : i64, count = 4 : i64, name = "full", offset = 229376 : i64, ring = "ab", tx_bytes = 49152 : i64}
// CHECK-NEXT: "wl.mbarrier"() {arrivals = 2 : i64, count = 4 : i64, name = "empty", offset = 229408 : i64, ring = "ab", tx_bytes = 0 : i64}
// The producer waits for a free stage, announces the bytes, then issues copies that complete on full.
// CHECK: "wl.wait"() {barrier = "empty", parity = "producer"}
// CHECK-NEXT: "wl.arrive_expect_tx"() {barrier = "full", bytes = 49152 : i64}
// CHECK-NEXT: "wl.async_load"() {barrier = "full", buffer = "a"
// CHECK-NEXT: "wl.async_load"() {barrier = "full", buffer = "b"
// Consumers wait for the data and issue their MMAs; with one MMA group left in flight, the stage they
// can free is the previous iteration's (lag 1).
// CHECK: "wl.wait"() {barrier = "full", parity = "consumer"}
// CHECK-NEXT: "wl.mma"()
// CHECK-NEXT: "wl.mma_wait"() {pending = 1 : i64}
// CHECK-NEXT: "wl.arrive"() {barrier = "empty", issue = "one_thread_per_warpgroup", lag = 1 : i64}
// ORDER: error: wl-plan-barriers needs wl-plan-smem to run first (this kernel has been through wl-tile, wl-pipeline, wl-specialize): run wl-plan-smem before wl-plan-barriers
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
