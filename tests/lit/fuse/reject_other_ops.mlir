// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// Ops that no score modifier holds, and scores that do not come from q kᵀ, leave the chain alone; the softmax's
// wl.unfused attribute says why (fuse/modifiers.mlir: the ops it does hold).

// A relu between the scores and the softmax.
// CHECK-LABEL: func.func @relu_in_chain
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.relu"
// CHECK: "wl.softmax"(%{{.*}}) {axis = -1 : i64, wl.unfused = "wl.relu (line 16) between the scores and the softmax is not a score operation"}
// CHECK: "wl.matmul"(%{{.*}}, %arg2) {transpose_a = false, transpose_b = false}
// CHECK-NOT: wl.attention
func.func @relu_in_chain(%q: tensor<1x8x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %e = "wl.relu"(%t) : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %p = "wl.softmax"(%e) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}

// -----

// Scores from a block argument, not a matmul.
// CHECK-LABEL: func.func @no_first_matmul
// CHECK: "wl.softmax"(%arg0) {axis = -1 : i64, wl.unfused = "the scores do not come from one matmul"}
// CHECK: "wl.matmul"
// CHECK-NOT: wl.attention
func.func @no_first_matmul(%s: tensor<1x8x?x?xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16> {
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x8x?x?xbf16>) -> tensor<1x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x?x?xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x8x?x64xbf16>
  return %o : tensor<1x8x?x64xbf16>
}

// -----

// A bias added from a graph input (not read through wl.gather), a table computed in the graph, and scores rounded
// to bf16 by a cast in the middle.
// CHECK-LABEL: func.func @input_bias
// CHECK: "wl.softmax"(%{{.*}}) {axis = -1 : i64, wl.unfused = "%arg3, a graph input, enters the scores other than as a wl.gather's table"}
func.func @input_bias(%q: tensor<1x8x16x64xbf16>, %k: tensor<1x8x16x64xbf16>, %v: tensor<1x8x16x64xbf16>, %b: tensor<1x8x16x16xbf16>) -> tensor<1x8x16x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>) -> tensor<1x8x16x16xbf16>
  %t = "wl.add"(%s, %b) : (tensor<1x8x16x16xbf16>, tensor<1x8x16x16xbf16>) -> tensor<1x8x16x16xbf16>
  %p = "wl.softmax"(%t) {axis = -1} : (tensor<1x8x16x16xbf16>) -> tensor<1x8x16x16xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x16x16xbf16>, tensor<1x8x16x64xbf16>) -> tensor<1x8x16x64xbf16>
  return %o : tensor<1x8x16x64xbf16>
}

// -----

// CHECK-LABEL: func.func @computed_table
// CHECK: "wl.softmax"(%{{.*}}) {axis = -1 : i64, wl.unfused = "wl.gather (line 57) reads a computed table; a captured tensor is a graph input"}
func.func @computed_table(%q: tensor<1x8x16x64xbf16>, %k: tensor<1x8x16x64xbf16>, %v: tensor<1x8x16x64xbf16>, %t: tensor<8xf32> {wl.name = "t"}) -> tensor<1x8x16x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>) -> tensor<1x8x16x16xbf16>
  %h = "wl.index"(%s) {dim = "h"} : (tensor<1x8x16x16xbf16>) -> tensor<1x8x16x16xi32>
  %t2 = "wl.tanh"(%t) : (tensor<8xf32>) -> tensor<8xf32>
  %g = "wl.gather"(%t2, %h) : (tensor<8xf32>, tensor<1x8x16x16xi32>) -> tensor<1x8x16x16xf32>
  %a = "wl.add"(%s, %g) : (tensor<1x8x16x16xbf16>, tensor<1x8x16x16xf32>) -> tensor<1x8x16x16xbf16>
  %p = "wl.softmax"(%a) {axis = -1} : (tensor<1x8x16x16xbf16>) -> tensor<1x8x16x16xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x16x16xbf16>, tensor<1x8x16x64xbf16>) -> tensor<1x8x16x64xbf16>
  return %o : tensor<1x8x16x64xbf16>
}

// -----

// CHECK-LABEL: func.func @rounding_cast
// CHECK: "wl.softmax"(%{{.*}}) {axis = -1 : i64, wl.unfused = "wl.cast (line 72) rounds the scores to bf16; the kernel computes its modifiers in f32 (drop the cast, or cast to f32)"}
func.func @rounding_cast(%q: tensor<1x8x16x64xbf16>, %k: tensor<1x8x16x64xbf16>, %v: tensor<1x8x16x64xbf16>) -> tensor<1x8x16x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x16x64xbf16>, tensor<1x8x16x64xbf16>) -> tensor<1x8x16x16xbf16>
  %c = "wl.constant"() {value = 3.0 : f64} : () -> tensor<f32>
  %d = "wl.div"(%s, %c) : (tensor<1x8x16x16xbf16>, tensor<f32>) -> tensor<1x8x16x16xbf16>
  %r = "wl.cast"(%d) : (tensor<1x8x16x16xbf16>) -> tensor<1x8x16x16xbf16>
  %p = "wl.softmax"(%r) {axis = -1} : (tensor<1x8x16x16xbf16>) -> tensor<1x8x16x16xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x16x16xbf16>, tensor<1x8x16x64xbf16>) -> tensor<1x8x16x64xbf16>
  return %o : tensor<1x8x16x64xbf16>
}
