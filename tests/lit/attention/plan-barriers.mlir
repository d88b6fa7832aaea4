// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s

// Each ring gets its barriers, named after it, in the rings' order: q_full (Q is loaded once: one barrier, no
// empty one), then full/empty per stage of K and V. A full barrier completes on the producer's one
// expect_tx arrival plus the bytes of one tile; an empty one on one arrival per consumer warpgroup.
// CHECK: "wl.ring"() {consumers = ["consumer"], full = "q_full", name = "q", producer = "producer", regions = ["q"], stages = 1 : i64}
// CHECK-NEXT: "wl.ring"() {consumers = ["consumer"], empty = "k_empty", full = "k_full", name = "k", producer = "producer", regions = ["k"], stages = 2 : i64}
// CHECK-NEXT: "wl.ring"() {consumers = ["consumer"], empty = "v_empty", full = "v_full", name = "v", producer = "producer", regions = ["v"], stages = 2 : i64}
// CHECK-NEXT: "wl.mbarrier"() {arrivals = 1 : i64, count = 1 : i64, name = "q_full", offset = 163840 : i64, ring = "q", tx_bytes = 32768 : i64}
// CHECK-NEXT: "wl.mbarrier"() {arrivals = 1 : i64, count = 2 : i64, name = "k_full", offset = 163848 : i64, ring = "k", tx_bytes = 32768 : i64}
// CHECK-NEXT: "wl.mbarrier"() {arrivals = 2 : i64, count = 2 : i64, name = "k_empty", offset = 163864 : i64, ring = "k", tx_bytes = 0 : i64}
// CHECK-NEXT: "wl.mbarrier"() {arrivals = 1 : i64, count = 2 : i64, name = "v_full", offset = 163880 : i64, ring = "v", tx_bytes = 32768 : i64}
// CHECK-NEXT: "wl.mbarrier"() {arrivals = 2 : i64, count = 2 : i64, name = "v_empty", offset = 163896 : i64, ring = "v", tx_bytes = 0 : i64}
// The producer announces Q's bytes once, before the loop; per key block it waits for a free K slot (the
// phase before: its first lap passes), announces and copies K, then the same for V.
// CHECK: "wl.role"() ({
// CHECK-NEXT: "wl.arrive_expect_tx"() {barrier = "q_full", bytes = 32768 : i64}
// CHECK-NEXT: "wl.async_load"() {barrier = "q_full", buffer = "q", operand = "q", tile = [128, 128]}
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.wait"() {barrier = "k_empty", parity = "producer"}
// CHECK-NEXT: "wl.arrive_expect_tx"() {barrier = "k_full", bytes = 32768 : i64}
// CHECK-NEXT: "wl.async_load"() {barrier = "k_full", buffer = "k", operand = "k", tile = [128, 128]}
// CHECK-NEXT: "wl.wait"() {barrier = "v_empty", parity = "producer"}
// CHECK-NEXT: "wl.arrive_expect_tx"() {barrier = "v_full", bytes = 32768 : i64}
// CHECK-NEXT: "wl.async_load"() {barrier = "v_full", buffer = "v", operand = "v", tile = [128, 128]}
// CHECK: }) {issue = "one_thread", name = "producer"
// The consumers wait for Q once, at the top, before any turn hand-off; per key block they wait for K before
// taking their turn (a turn is never held while data is in flight), free the K slot as soon as S retired
// (one thread per warpgroup: 2 arrivals), and wait for V just before O += P V, freeing it after.
// CHECK-NEXT: "wl.role"() ({
// CHECK-NEXT: "wl.wait"() {barrier = "q_full", parity = "consumer"}
// CHECK-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next", warpgroup = 1 : i64}
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.wait"() {barrier = "k_full", parity = "consumer"}
// CHECK-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own"}
// CHECK-NEXT: "wl.mma"() {a = "q"
// CHECK-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next"}
// CHECK-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// CHECK-NEXT: "wl.arrive"() {barrier = "k_empty", issue = "one_thread_per_warpgroup", lag = 0 : i64}
// CHECK-NEXT: "wl.compute"() {kind = "online_softmax"
// CHECK-NEXT: "wl.wait"() {barrier = "v_full", parity = "consumer"}
// CHECK-NEXT: "wl.mma"() {a = "p"
// CHECK-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// CHECK-NEXT: "wl.arrive"() {barrier = "v_empty", issue = "one_thread_per_warpgroup", lag = 0 : i64}
// CHECK: }) {carries = ["o_acc", "row_max", "row_sum"], name = "kv", trip = ["causal_blocks", "Sq", "Sk", "m", 128, 128]}
// CHECK-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own", warpgroup = 0 : i64}
func.func @attn(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.088388 : f32, layout = "bshd"} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}
