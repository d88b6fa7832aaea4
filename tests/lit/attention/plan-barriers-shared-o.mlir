// RUN: warploom-opt %s --wl-tile=schedule=persistent --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s

// Persistent at head dim 256: O's staging tile cannot have its own 64 KiB (Q 64 KiB, K and V 2 x 40 KiB each fill
// the 227 KiB), so wl-plan-smem puts it on Q's bytes, and wl-plan-barriers frees Q (q_empty) only after O's TMA
// store, not right after the key loop as when O has its own bytes: the next tile's Q must not land while O is
// still being written there or read by the store.
// CHECK: name = "o", offset = 0 : i64
// CHECK: "wl.named_barrier_sync"() {barrier = "turn", slot = "own", tiles = "last", warpgroup = 0 : i64}
// CHECK-NEXT: "wl.compute"() {kind = "normalize"
// CHECK-NEXT: "wl.store_tile"() {acc = "o_acc", barrier = "epilogue", buffer = "o", operand = "out", tile = [64, 256]}
// CHECK-NEXT: "wl.arrive"() {barrier = "q_empty", issue = "one_thread_per_warpgroup", lag = 0 : i64}
// CHECK-NEXT: "wl.store_tile"() {acc = "lse", operand = "lse", tile = [64]}
func.func @attn(%q: tensor<?x?x?x256xbf16>, %k: tensor<?x?x?x256xbf16>, %v: tensor<?x?x?x256xbf16>) -> tensor<?x?x?x256xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.0625 : f32, layout = "bshd"} : (tensor<?x?x?x256xbf16>, tensor<?x?x?x256xbf16>, tensor<?x?x?x256xbf16>) -> tensor<?x?x?x256xbf16>
  return %o : tensor<?x?x?x256xbf16>
}
