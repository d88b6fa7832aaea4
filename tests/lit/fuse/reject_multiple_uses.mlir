// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// An intermediate with a second use must stay computed, so the chain is left alone.

// Scores used twice (also returned).
// CHECK-LABEL: func.func @scores_twice
// CHECK: %[[S:.*]] = "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.softmax"(%[[S]]) {axis = -1 : i64, wl.unfused = "the result of wl.matmul (line 13) is also used outside the attention (by func.return)"}
// CHECK: "wl.matmul"(%{{.*}}, %arg2) {transpose_a = false, transpose_b = false}
// CHECK: return %{{.*}}, %[[S]]
// CHECK-NOT: wl.attention
func.func @scores_twice(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> (tensor<1x8x?x64xbf16>, tensor<1x8x?x?xbf16>) {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o, %s : tensor<1x8x?x64xbf16>, tensor<1x8x?x?xbf16>
}

// -----

// Probabilities used twice (also reduced).
// CHECK-LABEL: func.func @probabilities_twice
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.causal_mask"
// CHECK: %[[P:.*]] = "wl.softmax"{{.*}}wl.unfused = "the probabilities do not feed one matmul as its left operand (softmax(s) @ v)"
// CHECK: "wl.matmul"(%[[P]], %arg2) {transpose_a = false, transpose_b = false}
// CHECK: "wl.reduce_sum"(%[[P]])
// CHECK-NOT: wl.attention
func.func @probabilities_twice(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> (tensor<1x8x?x64xbf16>, tensor<1x8x?xbf16>) {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %u = "wl.causal_mask"(%s) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  %r = "wl.reduce_sum"(%p) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?xbf16>
  return %o, %r : tensor<1x8x?x64xbf16>, tensor<1x8x?xbf16>
}

// -----

// The scaled scores used twice.
// CHECK-LABEL: func.func @scaled_twice
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: %[[T:.*]] = "wl.scale"
// CHECK: "wl.softmax"(%[[T]]) {axis = -1 : i64, wl.unfused = "the result of wl.scale (line 50) is also used outside the attention (by func.return)"}
// CHECK: "wl.matmul"
// CHECK: return %{{.*}}, %[[T]]
// CHECK-NOT: wl.attention
func.func @scaled_twice(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> (tensor<1x8x?x64xbf16>, tensor<1x8x?x?xbf16>) {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%t) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o, %t : tensor<1x8x?x64xbf16>, tensor<1x8x?x?xbf16>
}
