// RUN: warploom-opt %s --wl-fuse | FileCheck %s

// Ops around the chain are kept: q comes from a cast, the output feeds an add. The fused
// op is placed where the second matmul was, after everything it reads.

// CHECK-LABEL: func.func @in_context
// CHECK-NEXT: %[[Q:.*]] = "wl.cast"(%arg0) : (tensor<1x8x?x64xf32>) -> tensor<1x8x?x64xbf16>
// CHECK-NEXT: %[[V:.*]] = "wl.relu"(%arg2)
// CHECK-NEXT: %[[O:.*]] = "wl.attention"(%[[Q]], %arg1, %[[V]]) {causal = true, layout = "bhsd", scale = 1.250000e-01 : f32}
// CHECK-NEXT: %[[R:.*]] = "wl.add"(%[[O]], %[[Q]])
// CHECK-NEXT: return %[[R]]
func.func @in_context(%x: tensor<1x8x?x64xf32>, %k: tensor<1x8x?x64xbf16>, %w: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %q = "wl.cast"(%x) : (tensor<1x8x?x64xf32>) -> tensor<1x8x?x64xbf16>
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %u = "wl.causal_mask"(%t) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %v = "wl.relu"(%w) : (tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  %r = "wl.add"(%o, %q) : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %r : tensor<1x8x?x64xbf16>
}
