// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s
// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline --wl-specialize=overlap=false --wl-plan-smem --wl-plan-barriers | FileCheck %s --check-prefix=SERIAL
// RUN: warploom-opt %s --wl-tile="block-n=128 schedule=persistent" --wl-pipeline=q-stages=1 --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s --check-prefix=PERSIST

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
// The consumers wait for Q once, at the top, before any turn hand-off. In every section of the (overlapped)
// key loop they wait for K before taking their turn (a turn is never held while data is in flight) and free
// the K slot once S retired (one thread per warpgroup: 2 arrivals); the V ring runs one block behind: the
// P_{j-1} V_{j-1} of block j waits for V of iteration j - 1 (lag 1) just before it and frees that slot after the
// wait_group 0 that retires it (lag 1); the last section does the same for the last block. The kernel
// verifier checks that every block's stage gets its arrivals once (first = the body's lag-0 ones, last = the
// body's lagged ones) and that a lagged MMA waits with the same lag.
// CHECK-NEXT: "wl.role"() ({
// CHECK-NEXT: "wl.wait"() {barrier = "q_full", parity = "consumer"}
// CHECK-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next", tiles = "first", warpgroup = 1 : i64}
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.loop_first"() ({
// CHECK-NEXT: "wl.wait"() {barrier = "k_full", parity = "consumer"}
// CHECK-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own"}
// CHECK-NEXT: "wl.mma"() {a = "q"
// CHECK-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next"}
// CHECK-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// CHECK-NEXT: "wl.arrive"() {barrier = "k_empty", issue = "one_thread_per_warpgroup", lag = 0 : i64}
// CHECK-NEXT: "wl.compute"() {kind = "softmax"
// CHECK-NEXT: gpu.yield
// CHECK-NEXT: })
// CHECK-NEXT: "wl.wait"() {barrier = "k_full", parity = "consumer"}
// CHECK-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own"}
// CHECK-NEXT: "wl.mma"() {a = "q"
// CHECK-NEXT: "wl.wait"() {barrier = "v_full", lag = 1 : i64, parity = "consumer"}
// CHECK-NEXT: "wl.mma"() {a = "p", {{.*}} lag = 1 : i64
// CHECK-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next"}
// CHECK-NEXT: "wl.mma_wait"() {pending = 1 : i64}
// CHECK-NEXT: "wl.arrive"() {barrier = "k_empty", issue = "one_thread_per_warpgroup", lag = 0 : i64}
// CHECK-NEXT: "wl.compute"() {kind = "softmax"
// CHECK-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// CHECK-NEXT: "wl.arrive"() {barrier = "v_empty", issue = "one_thread_per_warpgroup", lag = 1 : i64}
// CHECK-NEXT: "wl.compute"() {kind = "rescale"
// CHECK-NEXT: "wl.loop_last"() ({
// CHECK-NEXT: "wl.wait"() {barrier = "v_full", lag = 1 : i64, parity = "consumer"}
// CHECK-NEXT: "wl.mma"() {a = "p", {{.*}} lag = 1 : i64
// CHECK-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// CHECK-NEXT: "wl.arrive"() {barrier = "v_empty", issue = "one_thread_per_warpgroup", lag = 1 : i64}
// CHECK-NEXT: gpu.yield
// CHECK-NEXT: })
// CHECK-NEXT: gpu.yield
// CHECK-NEXT: }) {carries = ["o_acc", "row_max", "row_sum", "p"], name = "kv", trip = ["causal_blocks", "Sq", "Sk", "m", 128, 128]}
// CHECK-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own", tiles = "last", warpgroup = 0 : i64}
// The serial schedule (overlap=false): per key block K is waited for before the turn and freed as soon as S
// retired, V waited for just before O += P V and freed after it.
// SERIAL: "wl.wait"() {barrier = "q_full", parity = "consumer"}
// SERIAL-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next", tiles = "first", warpgroup = 1 : i64}
// SERIAL-NEXT: "wl.k_loop"() ({
// SERIAL-NEXT: "wl.wait"() {barrier = "k_full", parity = "consumer"}
// SERIAL-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own"}
// SERIAL-NEXT: "wl.mma"() {a = "q"
// SERIAL-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next"}
// SERIAL-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// SERIAL-NEXT: "wl.arrive"() {barrier = "k_empty", issue = "one_thread_per_warpgroup", lag = 0 : i64}
// SERIAL-NEXT: "wl.compute"() {kind = "online_softmax"
// SERIAL-NEXT: "wl.wait"() {barrier = "v_full", parity = "consumer"}
// SERIAL-NEXT: "wl.mma"() {a = "p"
// SERIAL-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// SERIAL-NEXT: "wl.arrive"() {barrier = "v_empty", issue = "one_thread_per_warpgroup", lag = 0 : i64}
// SERIAL: }) {carries = ["o_acc", "row_max", "row_sum"], name = "kv", trip = ["causal_blocks", "Sq", "Sk", "m", 128, 128]}
// SERIAL-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own", tiles = "last", warpgroup = 0 : i64}
// The persistent schedule with one Q stage (q-stages=1; two, the default on this tile, in q-stages.mlir): Q is
// loaded once per tile, so its ring gets an empty barrier (one arrival per consumer
// warpgroup) right after q_full, and every later barrier moves up by one. The producer waits for it (the phase
// before: the first tile passes) before announcing Q; the consumers arrive on it after the key loop and the
// closing hand-over, before the epilogue; the first and last hand-overs of the turns are once per CTA.
// PERSIST: "wl.ring"() {consumers = ["consumer"], empty = "q_empty", full = "q_full", name = "q", producer = "producer", regions = ["q"], stages = 1 : i64}
// (O's staging tile has its own 32 KiB here, so the barriers start at 196608.)
// PERSIST: "wl.mbarrier"() {arrivals = 1 : i64, count = 1 : i64, name = "q_full", offset = 196608 : i64, ring = "q", tx_bytes = 32768 : i64}
// PERSIST-NEXT: "wl.mbarrier"() {arrivals = 2 : i64, count = 1 : i64, name = "q_empty", offset = 196616 : i64, ring = "q", tx_bytes = 0 : i64}
// PERSIST-NEXT: "wl.mbarrier"() {arrivals = 1 : i64, count = 2 : i64, name = "k_full", offset = 196624 : i64, ring = "k", tx_bytes = 32768 : i64}
// PERSIST: "wl.role"() ({
// PERSIST-NEXT: "wl.wait"() {barrier = "q_empty", parity = "producer"}
// PERSIST-NEXT: "wl.arrive_expect_tx"() {barrier = "q_full", bytes = 32768 : i64}
// PERSIST-NEXT: "wl.async_load"() {barrier = "q_full", buffer = "q", operand = "q", tile = [128, 128]}
// PERSIST: "wl.role"() ({
// PERSIST-NEXT: "wl.wait"() {barrier = "q_full", parity = "consumer"}
// PERSIST-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next", tiles = "first", warpgroup = 1 : i64}
// PERSIST: }) {carries = ["o_acc", "row_max", "row_sum", "p"], name = "kv", trip = ["causal_blocks", "Sq", "Sk", "m", 128, 128]}
// PERSIST-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own", tiles = "last", warpgroup = 0 : i64}
// PERSIST-NEXT: "wl.arrive"() {barrier = "q_empty", issue = "one_thread_per_warpgroup", lag = 0 : i64}
// PERSIST-NEXT: "wl.compute"() {kind = "normalize"
// PERSIST: grid = {{\[}}["attention_persistent", "Sq", 128, "Hq", "B", "SMS"], ["const", 1], ["const", 1]]
// PERSIST-SAME: schedule = "persistent"
func.func @attn(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.088388 : f32, layout = "bshd"} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}
