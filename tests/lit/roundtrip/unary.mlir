// RUN: warploom-opt %s | FileCheck %s

// The elementwise unary ops keep the operand type; scale carries its factor as an f32 attribute,
// gelu its approximation as a string.

// CHECK-LABEL: func.func @unary
// CHECK: %[[S:.*]] = "wl.scale"(%arg0) {factor = 1.250000e-01 : f32} : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
// CHECK: %[[E:.*]] = "wl.exp"(%[[S]]) : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
// CHECK: %[[E2:.*]] = "wl.exp2"(%[[E]]) : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
// CHECK: %[[R:.*]] = "wl.relu"(%[[E2]]) : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
// CHECK: %[[SI:.*]] = "wl.silu"(%[[R]]) : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
// CHECK: return %[[SI]]
func.func @unary(%x: tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16> {
  %0 = "wl.scale"(%x) {factor = 0.125 : f32} : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
  %1 = "wl.exp"(%0) : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
  %2 = "wl.exp2"(%1) : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
  %3 = "wl.relu"(%2) : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
  %4 = "wl.silu"(%3) : (tensor<2x?x64xbf16>) -> tensor<2x?x64xbf16>
  return %4 : tensor<2x?x64xbf16>
}

// A negative factor is legal for wl.scale itself.
// CHECK-LABEL: func.func @negative_scale
// CHECK: "wl.scale"(%arg0) {factor = -2.000000e+00 : f32} : (tensor<8xf32>) -> tensor<8xf32>
func.func @negative_scale(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "wl.scale"(%x) {factor = -2.0 : f32} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// A rank-0 tensor is a valid elementwise operand.
// CHECK-LABEL: func.func @scalar
// CHECK: "wl.exp"(%arg0) : (tensor<f16>) -> tensor<f16>
func.func @scalar(%x: tensor<f16>) -> tensor<f16> {
  %0 = "wl.exp"(%x) : (tensor<f16>) -> tensor<f16>
  return %0 : tensor<f16>
}

// wl.gelu takes approximate = "none" (erf) or "tanh".

// CHECK-LABEL: func.func @gelu
// CHECK: %[[N:.*]] = "wl.gelu"(%arg0) {approximate = "none"} : (tensor<4x1024xf16>) -> tensor<4x1024xf16>
// CHECK: %[[T:.*]] = "wl.gelu"(%[[N]]) {approximate = "tanh"} : (tensor<4x1024xf16>) -> tensor<4x1024xf16>
// CHECK: return %[[T]]
func.func @gelu(%x: tensor<4x1024xf16>) -> tensor<4x1024xf16> {
  %0 = "wl.gelu"(%x) {approximate = "none"} : (tensor<4x1024xf16>) -> tensor<4x1024xf16>
  %1 = "wl.gelu"(%0) {approximate = "tanh"} : (tensor<4x1024xf16>) -> tensor<4x1024xf16>
  return %1 : tensor<4x1024xf16>
}
