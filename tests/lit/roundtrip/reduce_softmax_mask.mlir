// RUN: warploom-opt %s | FileCheck %s

// Reductions remove their axis (negative axes count from the end); the axis prints as i64.

// CHECK-LABEL: func.func @reductions
// CHECK: "wl.reduce_max"(%arg0) {axis = -1 : i64} : (tensor<2x8x?xf32>) -> tensor<2x8xf32>
// CHECK: "wl.reduce_sum"(%arg0) {axis = 0 : i64} : (tensor<2x8x?xf32>) -> tensor<8x?xf32>
// CHECK: "wl.reduce_max"(%arg0) {axis = 1 : i64} : (tensor<2x8x?xf32>) -> tensor<2x?xf32>
// CHECK: "wl.reduce_sum"(%arg1) {axis = 0 : i64} : (tensor<128xbf16>) -> tensor<bf16>
func.func @reductions(%x: tensor<2x8x?xf32>, %y: tensor<128xbf16>) {
  %0 = "wl.reduce_max"(%x) {axis = -1} : (tensor<2x8x?xf32>) -> tensor<2x8xf32>
  %1 = "wl.reduce_sum"(%x) {axis = 0} : (tensor<2x8x?xf32>) -> tensor<8x?xf32>
  %2 = "wl.reduce_max"(%x) {axis = 1 : i64} : (tensor<2x8x?xf32>) -> tensor<2x?xf32>
  %3 = "wl.reduce_sum"(%y) {axis = 0} : (tensor<128xbf16>) -> tensor<bf16>
  return
}

// wl.softmax keeps its operand type and takes any in-range axis; wl.causal_mask needs rank >= 2.

// CHECK-LABEL: func.func @softmax
// CHECK: "wl.softmax"(%arg0) {axis = -1 : i64} : (tensor<2x8x?x?xbf16>) -> tensor<2x8x?x?xbf16>
// CHECK: "wl.softmax"(%arg0) {axis = 2 : i64} : (tensor<2x8x?x?xbf16>) -> tensor<2x8x?x?xbf16>
// CHECK: "wl.softmax"(%arg1) {axis = 0 : i64} : (tensor<32xf32>) -> tensor<32xf32>
func.func @softmax(%x: tensor<2x8x?x?xbf16>, %y: tensor<32xf32>) {
  %0 = "wl.softmax"(%x) {axis = -1} : (tensor<2x8x?x?xbf16>) -> tensor<2x8x?x?xbf16>
  %1 = "wl.softmax"(%x) {axis = 2} : (tensor<2x8x?x?xbf16>) -> tensor<2x8x?x?xbf16>
  %2 = "wl.softmax"(%y) {axis = 0} : (tensor<32xf32>) -> tensor<32xf32>
  return
}

// CHECK-LABEL: func.func @causal_mask
// CHECK: "wl.causal_mask"(%arg0) : (tensor<128x128xf32>) -> tensor<128x128xf32>
// CHECK: "wl.causal_mask"(%arg1) : (tensor<?x8x?x?xf16>) -> tensor<?x8x?x?xf16>
func.func @causal_mask(%x: tensor<128x128xf32>, %y: tensor<?x8x?x?xf16>) {
  %0 = "wl.causal_mask"(%x) : (tensor<128x128xf32>) -> tensor<128x128xf32>
  %1 = "wl.causal_mask"(%y) : (tensor<?x8x?x?xf16>) -> tensor<?x8x?x?xf16>
  return
}
