// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// The matmuls must be q @ k^T and p @ v exactly: other transposes or operand orders are left alone.

// First matmul without transpose_b (k given as [B, H, D, S]).
// CHECK-LABEL: func.func @qk_no_transpose_b
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = false}
// CHECK: "wl.softmax"
// CHECK: "wl.matmul"(%{{.*}}, %arg2) {transpose_a = false, transpose_b = false}
// CHECK-NOT: wl.attention
func.func @qk_no_transpose_b(%q: tensor<1x8x32x64xbf16>, %kt: tensor<1x8x64x32xbf16>, %v: tensor<1x8x32x64xbf16>) -> tensor<1x8x32x64xbf16> {
  %s = "wl.matmul"(%q, %kt) {transpose_a = false, transpose_b = false} : (tensor<1x8x32x64xbf16>, tensor<1x8x64x32xbf16>) -> tensor<1x8x32x32xbf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x8x32x32xbf16>) -> tensor<1x8x32x32xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x32x32xbf16>, tensor<1x8x32x64xbf16>) -> tensor<1x8x32x64xbf16>
  return %o : tensor<1x8x32x64xbf16>
}

// -----

// First matmul with transpose_a as well.
// CHECK-LABEL: func.func @qk_transpose_a
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = true, transpose_b = true}
// CHECK: "wl.softmax"
// CHECK: "wl.matmul"
// CHECK-NOT: wl.attention
func.func @qk_transpose_a(%qt: tensor<1x8x64x32xbf16>, %k: tensor<1x8x32x64xbf16>, %v: tensor<1x8x32x64xbf16>) -> tensor<1x8x32x64xbf16> {
  %s = "wl.matmul"(%qt, %k) {transpose_a = true, transpose_b = true} : (tensor<1x8x64x32xbf16>, tensor<1x8x32x64xbf16>) -> tensor<1x8x32x32xbf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x8x32x32xbf16>) -> tensor<1x8x32x32xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x32x32xbf16>, tensor<1x8x32x64xbf16>) -> tensor<1x8x32x64xbf16>
  return %o : tensor<1x8x32x64xbf16>
}

// -----

// Second matmul with the probabilities as its right operand (v^T @ p).
// CHECK-LABEL: func.func @p_as_rhs
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: %[[P:.*]] = "wl.softmax"
// CHECK: "wl.matmul"(%arg2, %[[P]]) {transpose_a = false, transpose_b = false}
// CHECK-NOT: wl.attention
func.func @p_as_rhs(%q: tensor<1x8x32x64xbf16>, %k: tensor<1x8x32x64xbf16>, %w: tensor<1x8x32x32xbf16>) -> tensor<1x8x32x32xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x32x64xbf16>, tensor<1x8x32x64xbf16>) -> tensor<1x8x32x32xbf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x8x32x32xbf16>) -> tensor<1x8x32x32xbf16>
  %o = "wl.matmul"(%w, %p) {transpose_a = false, transpose_b = false} : (tensor<1x8x32x32xbf16>, tensor<1x8x32x32xbf16>) -> tensor<1x8x32x32xbf16>
  return %o : tensor<1x8x32x32xbf16>
}

// -----

// Second matmul with v transposed ([B, H, D, S]).
// CHECK-LABEL: func.func @pv_transpose_b
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.softmax"
// CHECK: "wl.matmul"(%{{.*}}, %arg2) {transpose_a = false, transpose_b = true}
// CHECK-NOT: wl.attention
func.func @pv_transpose_b(%q: tensor<1x8x32x64xbf16>, %k: tensor<1x8x32x64xbf16>, %vt: tensor<1x8x64x32xbf16>) -> tensor<1x8x32x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x32x64xbf16>, tensor<1x8x32x64xbf16>) -> tensor<1x8x32x32xbf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x8x32x32xbf16>) -> tensor<1x8x32x32xbf16>
  %o = "wl.matmul"(%p, %vt) {transpose_a = false, transpose_b = true} : (tensor<1x8x32x32xbf16>, tensor<1x8x64x32xbf16>) -> tensor<1x8x32x64xbf16>
  return %o : tensor<1x8x32x64xbf16>
}
