// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline --wl-specialize | FileCheck %s
// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline --wl-specialize=overlap=false | FileCheck %s --check-prefix=SERIAL
// RUN: not warploom-opt %s --wl-tile=block-n=128 --wl-pipeline --wl-specialize=consumer-regs=256 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not warploom-opt %s --wl-tile=block-n=128 --wl-pipeline --wl-specialize=mma-in-flight=1 2>&1 | FileCheck %s --check-prefix=FLIGHT

// The two consumer warpgroups take turns at the tensor cores through named barriers 1 and 2 (one per
// warpgroup, 256 threads each: both consumer warpgroups).
// CHECK: "wl.named_barrier"() {count = 2 : i64, id = 1 : i64, name = "turn", threads = 256 : i64}
// Each consumer warpgroup syncs on its own epilogue barrier (ids 3 and 4, 128 threads) around writing O into the
// staging tile, so that one of its threads may store it by TMA.
// CHECK-NEXT: "wl.named_barrier"() {count = 2 : i64, id = 3 : i64, name = "epilogue", threads = 128 : i64}
// The producer warpgroup (one thread, 24 registers) issues every copy: Q once, then K and V per key block.
// CHECK: "wl.role"() ({
// CHECK-NEXT: "wl.async_load"() {buffer = "q", operand = "q", tile = [128, 128]}
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.async_load"() {buffer = "k", operand = "k", tile = [128, 128]}
// CHECK-NEXT: "wl.async_load"() {buffer = "v", operand = "v", tile = [128, 128]}
// CHECK: }) {name = "kv", trip = ["cdiv", "Sk", 128]}
// CHECK: }) {issue = "one_thread", name = "producer", regs = 24 : i64, warpgroups = [0]}
// The consumers (two warpgroups, 64 query rows each, 240 registers), overlapped (the default: FA3's
// intra-warpgroup overlap): warpgroup 1 hands warpgroup 0 the first turn. The key loop is software pipelined:
// its first section (block 0) takes a turn for S = Q K_0^T, waits for it and runs the softmax (P_0, the row
// statistics and the correction corr); each later block j takes a turn for S_j and P_{j-1} V_{j-1} (lag 1: the V
// ring one block behind), hands the turn on, waits for S_j only (wait_group 1) and runs its softmax beside the
// P V in flight, then waits for that (wait_group 0) and rescales O by corr; the last section issues the last
// block's P V. P is carried from one iteration to the next. After the loop warpgroup 0 takes warpgroup 1's last
// hand-over.
// CHECK-NEXT: "wl.role"() ({
// CHECK-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next", tiles = "first", warpgroup = 1 : i64}
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.loop_first"() ({
// CHECK-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own"}
// CHECK-NEXT: "wl.mma"() {a = "q", a_major = "K", a_source = "smem", acc = "s", accumulate = false, b = "k", b_major = "K", b_source = "smem", k_dim = "D", shape = [64, 128, 128]}
// CHECK-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next"}
// CHECK-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// CHECK-NEXT: "wl.compute"() {kind = "softmax", reads = ["s", "row_max", "row_sum"], writes = ["p", "row_max", "row_sum", "corr"]}
// CHECK-NEXT: gpu.yield
// CHECK-NEXT: })
// CHECK-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own"}
// CHECK-NEXT: "wl.mma"() {a = "q", {{.*}} acc = "s", accumulate = false, {{.*}} shape = [64, 128, 128]}
// CHECK-NEXT: "wl.mma"() {a = "p", a_major = "K", a_source = "regs", acc = "o_acc", b = "v", b_major = "MN", b_source = "smem", k_dim = "N", lag = 1 : i64, shape = [64, 128, 128]}
// CHECK-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next"}
// CHECK-NEXT: "wl.mma_wait"() {pending = 1 : i64}
// CHECK-NEXT: "wl.compute"() {kind = "softmax"
// CHECK-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// CHECK-NEXT: "wl.compute"() {kind = "rescale", reads = ["o_acc", "corr"], writes = ["o_acc"]}
// CHECK-NEXT: "wl.loop_last"() ({
// CHECK-NEXT: "wl.mma"() {a = "p", {{.*}} acc = "o_acc", {{.*}} lag = 1 : i64, shape = [64, 128, 128]}
// CHECK-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// CHECK-NEXT: gpu.yield
// CHECK-NEXT: })
// CHECK-NEXT: gpu.yield
// CHECK-NEXT: }) {carries = ["o_acc", "row_max", "row_sum", "p"], name = "kv", trip = ["cdiv", "Sk", 128]}
// CHECK-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own", tiles = "last", warpgroup = 0 : i64}
// CHECK-NEXT: "wl.compute"() {kind = "normalize"
// CHECK-NEXT: "wl.store_tile"() {acc = "o_acc", barrier = "epilogue", buffer = "o", operand = "out", tile = [64, 128]}
// CHECK-NEXT: "wl.store_tile"() {acc = "lse", operand = "lse", tile = [64]}
// CHECK: }) {issue = "warpgroup", name = "consumer", regs = 240 : i64, warpgroups = [1, 2]}
// The serial schedule (overlap=false): per key block each warpgroup syncs on its own barrier, issues S = Q K^T,
// hands the turn to the other (arrive on the next barrier), then waits for S (nothing stays in flight: the
// softmax reads S, and O is rescaled before the next P V).
// SERIAL: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next", tiles = "first", warpgroup = 1 : i64}
// SERIAL-NEXT: "wl.k_loop"() ({
// SERIAL-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own"}
// SERIAL-NEXT: "wl.mma"() {a = "q", a_major = "K", a_source = "smem", acc = "s", accumulate = false, b = "k", b_major = "K", b_source = "smem", k_dim = "D", shape = [64, 128, 128]}
// SERIAL-NEXT: "wl.named_barrier_arrive"() {barrier = "turn", slot = "next"}
// SERIAL-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// SERIAL-NEXT: "wl.compute"() {kind = "online_softmax"
// SERIAL-NEXT: "wl.mma"() {a = "p", a_major = "K", a_source = "regs", acc = "o_acc", b = "v", b_major = "MN", b_source = "smem", k_dim = "N", shape = [64, 128, 128]}
// SERIAL-NEXT: "wl.mma_wait"() {pending = 0 : i64}
// SERIAL: }) {carries = ["o_acc", "row_max", "row_sum"], name = "kv", trip = ["cdiv", "Sk", 128]}
// SERIAL-NEXT: "wl.named_barrier_sync"() {barrier = "turn", slot = "own", tiles = "last", warpgroup = 0 : i64}
// SERIAL-NEXT: "wl.compute"() {kind = "normalize"
// CHECK: threads = 384 : i64
// BUDGET: error: register budget 24 + 2 x 256 per thread needs 68608 registers; the register file holds 65536: lower consumer-regs to 240
// FLIGHT: error: mma-in-flight = 1: this kernel computes on its MMAs' accumulators in registers between MMAs (the online softmax reads S and rescales O), so every MMA must retire first; use mma-in-flight=0
func.func @attn(%q: tensor<?x?x?x128xf16>, %k: tensor<?x?x?x128xf16>, %v: tensor<?x?x?x128xf16>) -> tensor<?x?x?x128xf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.088388 : f32, layout = "bshd"} : (tensor<?x?x?x128xf16>, tensor<?x?x?x128xf16>, tensor<?x?x?x128xf16>) -> tensor<?x?x?x128xf16>
  return %o : tensor<?x?x?x128xf16>
}
