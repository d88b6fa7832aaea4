// RUN: warploom-opt %s --split-input-file --wl-fuse --wl-verify | FileCheck %s

// Grouped-query attention written out: k and v of 2 heads repeated to q's 8 (wl.repeat on the heads, torch's
// repeat_interleave) become one wl.attention that reads the 2-head k and v; the repeats go with the chain.
// CHECK-LABEL: func.func @gqa
// CHECK-NOT: "wl.repeat"
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", scale = 1.250000e-01 : f32} : (tensor<1x8x?x64xbf16>, tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16>) -> tensor<1x8x?x64xbf16>
// CHECK-NEXT: return
func.func @gqa(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x2x?x64xbf16>, %v: tensor<1x2x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %kr = "wl.repeat"(%k) {axis = 1, times = 4} : (tensor<1x2x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  %vr = "wl.repeat"(%v) {axis = 1, times = 4} : (tensor<1x2x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  %s = "wl.matmul"(%q, %kr) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %c = "wl.causal_mask"(%t) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%c) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %vr) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}

// -----

// k repeated over its keys (axis 2), not its heads: not grouped-query attention, left alone, saying why.
// CHECK-LABEL: func.func @keys_repeated
// CHECK: "wl.softmax"
// CHECK-SAME: wl.unfused = "wl.repeat {{.*}}repeats axis 2, not the heads (axis 1 of [B, H, S, D]): only k and v's heads repeat in grouped-query attention"
func.func @keys_repeated(%q: tensor<1x2x16x64xbf16>, %k: tensor<1x2x8x64xbf16>, %v: tensor<1x2x8x64xbf16>) -> tensor<1x2x16x64xbf16> {
  %kr = "wl.repeat"(%k) {axis = 2, times = 2} : (tensor<1x2x8x64xbf16>) -> tensor<1x2x16x64xbf16>
  %vr = "wl.repeat"(%v) {axis = 2, times = 2} : (tensor<1x2x8x64xbf16>) -> tensor<1x2x16x64xbf16>
  %s = "wl.matmul"(%q, %kr) {transpose_a = false, transpose_b = true} : (tensor<1x2x16x64xbf16>, tensor<1x2x16x64xbf16>) -> tensor<1x2x16x16xbf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x2x16x16xbf16>) -> tensor<1x2x16x16xbf16>
  %o = "wl.matmul"(%p, %vr) {transpose_a = false, transpose_b = false} : (tensor<1x2x16x16xbf16>, tensor<1x2x16x64xbf16>) -> tensor<1x2x16x64xbf16>
  return %o : tensor<1x2x16x64xbf16>
}
