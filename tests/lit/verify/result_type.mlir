// RUN: warploom-opt %s --split-input-file --verify-diagnostics

// A declared result type that contradicts the inferred one is an error; a dynamic dim on
// either side is compatible with a static one.

func.func @softmax_shape(%a: tensor<4x8xf32>) -> tensor<4x16xf32> {
  // expected-error @+1 {{'wl.softmax' op result type tensor<4x16xf32> does not match the inferred tensor<4x8xf32>}}
  %0 = "wl.softmax"(%a) {axis = -1} : (tensor<4x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

func.func @causal_mask_rank(%a: tensor<1x8x16x16xf16>) -> tensor<8x16x16xf16> {
  // expected-error @+1 {{'wl.causal_mask' op result type tensor<8x16x16xf16> does not match the inferred tensor<1x8x16x16xf16>}}
  %0 = "wl.causal_mask"(%a) : (tensor<1x8x16x16xf16>) -> tensor<8x16x16xf16>
  return %0 : tensor<8x16x16xf16>
}

// -----

func.func @causal_mask_rank_one(%a: tensor<16xf16>) -> tensor<16xf16> {
  // expected-error @+1 {{'wl.causal_mask' op input must have rank >= 2 (queries x keys), got tensor<16xf16>}}
  %0 = "wl.causal_mask"(%a) : (tensor<16xf16>) -> tensor<16xf16>
  return %0 : tensor<16xf16>
}

// -----

func.func @cast_shape(%a: tensor<4x8xbf16>) -> tensor<4x9xf32> {
  // expected-error @+1 {{'wl.cast' op result type tensor<4x9xf32> does not match the inferred tensor<4x8xf32>}}
  %0 = "wl.cast"(%a) : (tensor<4x8xbf16>) -> tensor<4x9xf32>
  return %0 : tensor<4x9xf32>
}

// -----

// Static operand, declared result refined or relaxed with `?`: both fine, and the chunk has
// no expected-error, so --verify-diagnostics passes it only if nothing is reported.
func.func @compatible(%a: tensor<?x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<?x?xf32>) {
  %0 = "wl.exp"(%a) : (tensor<?x8xf32>) -> tensor<4x8xf32>
  %1 = "wl.exp"(%b) : (tensor<4x8xf32>) -> tensor<?x?xf32>
  return %0, %1 : tensor<4x8xf32>, tensor<?x?xf32>
}
