// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// Only scale and causal_mask may sit between the first matmul and the softmax.

// An exp in the middle of the chain.
// CHECK-LABEL: func.func @exp_in_chain
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.scale"
// CHECK: "wl.exp"
// CHECK: "wl.causal_mask"
// CHECK: "wl.softmax"
// CHECK: "wl.matmul"(%{{.*}}, %arg2) {transpose_a = false, transpose_b = false}
// CHECK-NOT: wl.attention
func.func @exp_in_chain(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %e = "wl.exp"(%t) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %u = "wl.causal_mask"(%e) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}

// -----

// Two scales: the matcher takes at most one of each, so this is left alone.
// CHECK-LABEL: func.func @two_scales
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.scale"
// CHECK: "wl.scale"
// CHECK: "wl.softmax"
// CHECK-NOT: wl.attention
func.func @two_scales(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.5 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %t2 = "wl.scale"(%t) {factor = 0.25 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%t2) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}

// -----

// Scores from a block argument, not a matmul.
// CHECK-LABEL: func.func @no_first_matmul
// CHECK: "wl.softmax"(%arg0)
// CHECK: "wl.matmul"
// CHECK-NOT: wl.attention
func.func @no_first_matmul(%s: tensor<1x8x?x?xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}
