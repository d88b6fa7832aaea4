// RUN: warploom-opt %s --wl-tile --wl-pipeline | FileCheck %s
// RUN: warploom-opt %s --wl-tile --wl-pipeline=stages=3 | FileCheck %s --check-prefix=STAGES3

// Q, loaded once outside the loop, gets one buffer and a one-stage ring. K and V feed different MMAs
// (S = Q K^T, then O += P V), so each gets its own ring of `stages` (2 by default for attention), unlike the
// GEMM, whose A and B feed one MMA and share the ring "ab".
// CHECK: "wl.buffer"() {dims = ["M", "D"], elem = "bf16", name = "q", shape = [128, 64], stages = 1 : i64}
// CHECK-NEXT: "wl.buffer"() {dims = ["N", "D"], elem = "bf16", name = "k", shape = [128, 64], stages = 2 : i64}
// CHECK-NEXT: "wl.buffer"() {dims = ["N", "D"], elem = "bf16", name = "v", shape = [128, 64], stages = 2 : i64}
// O's staging tile for the TMA store: one stage, the output tile, allowed to share Q's bytes (wl-plan-smem decides).
// CHECK-NEXT: "wl.buffer"() {aliases = ["q"], dims = ["M", "D"], elem = "bf16", name = "o", shape = [128, 64], stages = 1 : i64}
// CHECK-NEXT: "wl.ring"() {name = "q", regions = ["q"], stages = 1 : i64}
// CHECK-NEXT: "wl.ring"() {name = "k", regions = ["k"], stages = 2 : i64}
// CHECK-NEXT: "wl.ring"() {name = "v", regions = ["v"], stages = 2 : i64}
// The loads become async copies into their buffers: Q before the loop, K and V in it.
// CHECK: "wl.async_load"() {buffer = "q", operand = "q", tile = [128, 64]}
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.async_load"() {buffer = "k", operand = "k", tile = [128, 64]}
// CHECK: "wl.async_load"() {buffer = "v", operand = "v", tile = [128, 64]}
// CHECK: "wl.store_tile"() {acc = "o_acc", buffer = "o", operand = "out", tile = [128, 64]}
// CHECK: stages = 2 : i64
// STAGES3: "wl.ring"() {name = "q", regions = ["q"], stages = 1 : i64}
// STAGES3-NEXT: "wl.ring"() {name = "k", regions = ["k"], stages = 3 : i64}
// STAGES3-NEXT: "wl.ring"() {name = "v", regions = ["v"], stages = 3 : i64}
func.func @attn(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.125 : f32, layout = "bhsd"} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}
