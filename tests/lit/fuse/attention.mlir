// RUN: warploom-opt %s --wl-fuse | FileCheck %s

// The full chain, scale then mask, becomes one causal attention with the scale carried over.
// CHECK-LABEL: func.func @scaled_causal
// CHECK-NEXT: %[[O:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", scale = 1.250000e-01 : f32}
// CHECK-NOT: wl.softmax
// CHECK-NEXT: return %[[O]]
func.func @scaled_causal(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x8x?x64xbf16>, %v: tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %u = "wl.causal_mask"(%t) : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<?x8x?x?xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16>
  return %o : tensor<?x8x?x64xbf16>
}
