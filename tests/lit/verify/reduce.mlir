// RUN: warploom-opt %s --split-input-file --verify-diagnostics

// Axes of reductions and softmax must lie in -rank..rank-1; the reduced axis is removed.

func.func @reduce_sum_axis_high(%a: tensor<2x4x8xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'wl.reduce_sum' op axis 3 is out of range for a rank-3 tensor (allowed -3..2)}}
  %0 = "wl.reduce_sum"(%a) {axis = 3} : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @reduce_max_axis_low(%a: tensor<2x4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.reduce_max' op axis -4 is out of range for a rank-3 tensor (allowed -3..2)}}
  %0 = "wl.reduce_max"(%a) {axis = -4} : (tensor<2x4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @softmax_axis(%a: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'wl.softmax' op axis 2 is out of range for a rank-2 tensor (allowed -2..1)}}
  %0 = "wl.softmax"(%a) {axis = 2} : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

// Reducing axis 1 of 2x4x8 leaves 2x8, not 2x4.
func.func @reduce_sum_result(%a: tensor<2x4x8xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'wl.reduce_sum' op result type tensor<2x4xf32> does not match the inferred tensor<2x8xf32>}}
  %0 = "wl.reduce_sum"(%a) {axis = 1} : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// The reduced axis is removed, not kept as size 1.
func.func @reduce_max_keepdims(%a: tensor<2x4x8xf32>) -> tensor<2x4x1xf32> {
  // expected-error @+1 {{'wl.reduce_max' op result type tensor<2x4x1xf32> does not match the inferred tensor<2x4xf32>}}
  %0 = "wl.reduce_max"(%a) {axis = -1} : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
  return %0 : tensor<2x4x1xf32>
}
