// RUN: warploom-opt %s --wl-fuse | FileCheck %s

// Mask first, then a positive scale: scaling -inf by a positive factor keeps -inf, so the
// order does not matter and the chain is still one causal attention with the scale.

// CHECK-LABEL: func.func @mask_then_scale
// CHECK-NEXT: %[[O:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", scale = 6.250000e-02 : f32} : (tensor<2x16x?x128xbf16>, tensor<2x16x?x128xbf16>, tensor<2x16x?x128xbf16>) -> tensor<2x16x?x128xbf16>
// CHECK-NOT: wl.causal_mask
// CHECK-NOT: wl.scale
// CHECK-NEXT: return %[[O]]
func.func @mask_then_scale(%q: tensor<2x16x?x128xbf16>, %k: tensor<2x16x?x128xbf16>, %v: tensor<2x16x?x128xbf16>) -> tensor<2x16x?x128xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<2x16x?x128xbf16>, tensor<2x16x?x128xbf16>) -> tensor<2x16x?x?xbf16>
  %u = "wl.causal_mask"(%s) : (tensor<2x16x?x?xbf16>) -> tensor<2x16x?x?xbf16>
  %t = "wl.scale"(%u) {factor = 0.0625 : f32} : (tensor<2x16x?x?xbf16>) -> tensor<2x16x?x?xbf16>
  %p = "wl.softmax"(%t) {axis = -1} : (tensor<2x16x?x?xbf16>) -> tensor<2x16x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<2x16x?x?xbf16>, tensor<2x16x?x128xbf16>) -> tensor<2x16x?x128xbf16>
  return %o : tensor<2x16x?x128xbf16>
}
