// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// A softmax over any axis but the last (key) one is not attention: left alone.

// CHECK-LABEL: func.func @axis_2
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.scale"
// CHECK: "wl.softmax"(%{{.*}}) {axis = 2 : i64, wl.unfused = "the softmax runs over axis 2, not the keys (-1)"}
// CHECK: "wl.matmul"(%{{.*}}, %arg2) {transpose_a = false, transpose_b = false}
// CHECK-NOT: wl.attention
func.func @axis_2(%q: tensor<1x8x64x64xbf16>, %k: tensor<1x8x64x64xbf16>, %v: tensor<1x8x64x64xbf16>) -> tensor<1x8x64x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x64x64xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x8x64x64xbf16>) -> tensor<1x8x64x64xbf16>
  %p = "wl.softmax"(%t) {axis = 2} : (tensor<1x8x64x64xbf16>) -> tensor<1x8x64x64xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x64x64xbf16>
  return %o : tensor<1x8x64x64xbf16>
}

// -----

// CHECK-LABEL: func.func @axis_minus_2
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.softmax"(%{{.*}}) {axis = -2 : i64, wl.unfused = "the softmax runs over axis -2, not the keys (-1)"}
// CHECK: "wl.matmul"
// CHECK-NOT: wl.attention
func.func @axis_minus_2(%q: tensor<1x8x64x64xbf16>, %k: tensor<1x8x64x64xbf16>, %v: tensor<1x8x64x64xbf16>) -> tensor<1x8x64x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x64x64xbf16>
  %p = "wl.softmax"(%s) {axis = -2} : (tensor<1x8x64x64xbf16>) -> tensor<1x8x64x64xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x64x64xbf16>, tensor<1x8x64x64xbf16>) -> tensor<1x8x64x64xbf16>
  return %o : tensor<1x8x64x64xbf16>
}
