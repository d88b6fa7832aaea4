// RUN: warploom-opt %s --wl-tile="block-n=128 schedule=persistent" --wl-pipeline=q-stages=2 --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s
// RUN: warploom-opt %s --wl-tile="block-n=128 schedule=persistent" --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s
// RUN: warploom-opt %s --wl-tile="block-n=128 schedule=persistent" --wl-pipeline=q-stages=1 --wl-specialize --wl-plan-smem | FileCheck %s --check-prefix=ONE
// RUN: warploom-opt %s --wl-tile="block-n=64 schedule=persistent" --wl-pipeline --wl-specialize --wl-plan-smem | FileCheck %s --check-prefix=ONE
// RUN: warploom-opt %s --wl-tile="block-n=128 schedule=persistent" --wl-pipeline=stages=3 --wl-specialize --wl-plan-smem | FileCheck %s --check-prefix=ONE
// RUN: not warploom-opt %s --wl-tile="block-n=128 schedule=grid" --wl-pipeline=q-stages=2 2>&1 | FileCheck %s --check-prefix=GRID
// RUN: not warploom-opt %s --wl-tile="block-n=128 schedule=persistent" --wl-pipeline=q-stages=3 2>&1 | FileCheck %s --check-prefix=THREE

// wl-pipeline{q-stages=2} on the persistent head-dim-128 attention: Q's ring takes two stages (64 KiB) that advance
// once per tile (counts = "tile": the next tile's Q loads during this one), O keeps its own 32 KiB after V, and Q
// gets one q_full and one q_empty per stage, the K/V barriers after them: 230496 B of the 232448 B limit. Unset,
// q-stages is 2 on this tile (the standard one: block-n 128, 2 stages; warploom.kernels.ATTENTION_Q_STAGES), the
// same plan; q-stages=1, or another key block or stage count unasked, keeps one Q stage (ONE).
// ONE: name = "q", offset = 0 : i64, shape = [128, 128], stages = 1
// CHECK: "wl.buffer"() {align = 1024 : i64, bytes = 65536 : i64, dims = ["M", "D"], elem = "bf16", name = "q", offset = 0 : i64, shape = [128, 128], stages = 2 : i64, swizzle = 128 : i64}
// CHECK-NEXT: name = "k", offset = 65536 : i64, shape = [128, 128], stages = 2
// CHECK-NEXT: name = "v", offset = 131072 : i64, shape = [128, 128], stages = 2
// CHECK-NEXT: "wl.buffer"() {align = 1024 : i64, bytes = 32768 : i64, dims = ["M", "D"], elem = "bf16", name = "o", offset = 196608 : i64, shape = [128, 128], stages = 1 : i64, swizzle = 128 : i64}
// CHECK-NEXT: name = "mbarriers", offset = 229376 : i64, shape = [12]
// CHECK: "wl.ring"() {consumers = ["consumer"], counts = "tile", empty = "q_empty", full = "q_full", name = "q", producer = "producer", regions = ["q"], stages = 2 : i64}
// CHECK: "wl.mbarrier"() {arrivals = 1 : i64, count = 2 : i64, name = "q_full", offset = 229376 : i64, ring = "q", tx_bytes = 32768 : i64}
// CHECK-NEXT: "wl.mbarrier"() {arrivals = 2 : i64, count = 2 : i64, name = "q_empty", offset = 229392 : i64, ring = "q", tx_bytes = 0 : i64}
// CHECK-NEXT: "wl.mbarrier"() {arrivals = 1 : i64, count = 2 : i64, name = "k_full", offset = 229408 : i64, ring = "k", tx_bytes = 32768 : i64}
// The protocol's ops are one stage's: the producer waits for q_empty and announces Q before each tile's K/V loop,
// the consumers wait for q_full before it and free Q after it (the lowering picks tile t's stage t % 2 and phase
// (t / 2) & 1).
// CHECK: "wl.wait"() {barrier = "q_empty", parity = "producer"}
// CHECK-NEXT: "wl.arrive_expect_tx"() {barrier = "q_full", bytes = 32768 : i64}
// CHECK-NEXT: "wl.async_load"() {barrier = "q_full", buffer = "q", operand = "q", tile = [128, 128]}
// CHECK: "wl.wait"() {barrier = "q_full", parity = "consumer"}
// CHECK: "wl.named_barrier_sync"() {barrier = "turn", slot = "own", tiles = "last", warpgroup = 0 : i64}
// CHECK-NEXT: "wl.arrive"() {barrier = "q_empty", issue = "one_thread_per_warpgroup", lag = 0 : i64}
// CHECK: smem_bytes = 230496 : i64

// GRID: wl-pipeline: q-stages = 2: a second Q stage serves the persistent sm_90a attention
// THREE: wl-pipeline: q-stages = 3; use 1 or 2
func.func @attn(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.088388 : f32, layout = "bshd"} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}
