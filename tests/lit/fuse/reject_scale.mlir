// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// A negative (or zero) scale does not commute with the causal mask, so the chain stays.

// CHECK-LABEL: func.func @negative_scale
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.scale"(%{{.*}}) {factor = -1.250000e-01 : f32}
// CHECK: "wl.causal_mask"
// CHECK: "wl.softmax"
// CHECK: "wl.matmul"(%{{.*}}, %arg2) {transpose_a = false, transpose_b = false}
// CHECK-NOT: wl.attention
func.func @negative_scale(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = -0.125 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %u = "wl.causal_mask"(%t) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}

// -----

// CHECK-LABEL: func.func @zero_scale
// CHECK: "wl.scale"(%{{.*}}) {factor = 0.000000e+00 : f32}
// CHECK: "wl.softmax"
// CHECK-NOT: wl.attention
func.func @zero_scale(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.0 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%t) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}
