// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// The kernel masks after the score modifier: a causal mask under score arithmetic (here a negative scale, which
// turns -inf into +inf) is not the kernel's computation, so the chain stays and the softmax says why. (A negative
// scale after the causal mask, or a zero one, is a score modifier: fuse/modifiers.mlir.)

// CHECK-LABEL: func.func @causal_then_negative_scale
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.causal_mask"
// CHECK: "wl.scale"(%{{.*}}) {factor = -1.250000e-01 : f32}
// CHECK: "wl.softmax"(%{{.*}}) {axis = -1 : i64, wl.unfused = "wl.causal_mask (line 15) sits under score arithmetic; the kernel masks after the score modifier: apply the causal mask last, just before the softmax"}
// CHECK-NOT: wl.attention
func.func @causal_then_negative_scale(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %u = "wl.causal_mask"(%s) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%u) {factor = -0.125 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%t) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}

// -----

// tanh of the masked scores (tanh(-inf) = -1: the key would be seen).
// CHECK-LABEL: func.func @tanh_of_masked
// CHECK: "wl.softmax"(%{{.*}}) {axis = -1 : i64, wl.unfused = "wl.causal_mask (line 30) sits under score arithmetic{{.*}}"}
// CHECK-NOT: wl.attention
func.func @tanh_of_masked(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %u = "wl.causal_mask"(%s) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.tanh"(%u) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%t) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}
