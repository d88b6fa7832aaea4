// RUN: warploom-opt %s --wl-fuse | FileCheck %s

// Two independent chains in one function (the second reads the first's output as its q)
// both become attention ops, each with its own scale and mask, in program order.

// CHECK-LABEL: func.func @two
// CHECK-NEXT: %[[A:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", scale = 1.250000e-01 : f32}
// CHECK-NEXT: %[[B:.*]] = "wl.attention"(%[[A]], %arg3, %arg4) {causal = false, layout = "bhsd", scale = 5.000000e-01 : f32}
// CHECK-NEXT: return %[[A]], %[[B]]
// CHECK-NOT: wl.softmax
func.func @two(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>, %k2: tensor<1x8x?x64xbf16>, %v2: tensor<1x8x?x64xbf16>) -> (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %u = "wl.causal_mask"(%t) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  %s2 = "wl.matmul"(%o, %k2) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t2 = "wl.scale"(%s2) {factor = 0.5 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p2 = "wl.softmax"(%t2) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o2 = "wl.matmul"(%p2, %v2) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o, %o2 : tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>
}

// Chains in different functions are fused too.
// CHECK-LABEL: func.func @other
// CHECK-NEXT: "wl.attention"(%arg0, %arg0, %arg0) {causal = false, layout = "bhsd", scale = 1.000000e+00 : f32}
// CHECK-NEXT: return
func.func @other(%x: tensor<1x2x16x16xf16>) -> tensor<1x2x16x16xf16> {
  %s = "wl.matmul"(%x, %x) {transpose_a = false, transpose_b = true} : (tensor<1x2x16x16xf16>, tensor<1x2x16x16xf16>) -> tensor<1x2x16x16xf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x2x16x16xf16>) -> tensor<1x2x16x16xf16>
  %o = "wl.matmul"(%p, %x) {transpose_a = false, transpose_b = false} : (tensor<1x2x16x16xf16>, tensor<1x2x16x16xf16>) -> tensor<1x2x16x16xf16>
  return %o : tensor<1x2x16x16xf16>
}
