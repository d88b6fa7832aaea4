// RUN: warploom-opt %s --wl-tile=schedule=persistent,block-m=192 --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s
// RUN: not warploom-opt %s --wl-tile=schedule=persistent,block-m=192 --wl-pipeline --wl-specialize=consumer-regs=168 2>&1 | FileCheck %s --check-prefix=BUDGET

// The tall tile (head dim 64, non-causal, Sq >= 4096 in ops.attention): 192 query rows, three consumer
// warpgroups of 64 rows. Q's stages (two: the next tile's Q prefetched, as on every persistent standard tile) and
// O's staging tile are 192 x 64 (24 KiB each), K and V 2 x 128 x 64.
// CHECK: name = "q", offset = 0 : i64, shape = [192, 64], stages = 2
// CHECK: name = "o", offset = 114688 : i64, shape = [192, 64], stages = 1
// Q's and each stage's empty barrier waits for one arrival per consumer warpgroup: 3.
// CHECK: "wl.mbarrier"() {arrivals = 3 : i64, count = 2 : i64, name = "q_empty"
// CHECK: "wl.mbarrier"() {arrivals = 3 : i64, count = 2 : i64, name = "k_empty"
// CHECK: "wl.mbarrier"() {arrivals = 3 : i64, count = 2 : i64, name = "v_empty"
// The turns go round three warpgroups: one instance each (ids 1..3), each joined by two warpgroups (256 threads:
// the one whose turn it is syncs, the one before it arrives); the epilogue barriers follow (ids 4..6).
// CHECK: "wl.named_barrier"() {count = 3 : i64, id = 1 : i64, name = "turn", threads = 256 : i64}
// CHECK-NEXT: "wl.named_barrier"() {count = 3 : i64, id = 4 : i64, name = "epilogue", threads = 128 : i64}
// The producer loads Q as one 192-row box. The last warpgroup (2) hands warpgroup 0 the first turn; after the key
// loop warpgroup 0 takes the last hand-over.
// CHECK: "wl.async_load"() {barrier = "q_full", buffer = "q", operand = "q", tile = [192, 64]}
// CHECK: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next", tiles = "first", warpgroup = 2 : i64}
// CHECK: "wl.named_barrier_sync"() {barrier = "turn", slot = "own", tiles = "last", warpgroup = 0 : i64}
// Each consumer stores its own 64 rows of O. The consumers get 160 registers: (65536 / 128 - 24) / 3 = 162.7,
// rounded down to setmaxnreg's step of 8.
// CHECK: "wl.store_tile"() {acc = "o_acc", barrier = "epilogue", buffer = "o", operand = "out", tile = [64, 64]}
// CHECK: {issue = "warpgroup", name = "consumer", regs = 160 : i64, warpgroups = [1, 2, 3]}
// The persistent grid counts tiles of 192 rows; 512 threads.
// CHECK: grid = {{\[}}["attention_persistent", "Sq", 192, "Hq", "B", "SMS"]
// CHECK-SAME: smem_bytes = 140384 : i64
// CHECK-SAME: threads = 512 : i64, tile = [192, 128, 64]
// The 240 registers two consumer warpgroups get do not fit three: the error gives the budget that does.
// BUDGET: register budget 24 + 3 x 168 per thread needs 67584 registers; the register file holds 65536: lower consumer-regs to 160
func.func @d64(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.125 : f32, layout = "bshd"} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}
