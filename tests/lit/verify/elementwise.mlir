// RUN: warploom-opt %s --split-input-file --verify-diagnostics

// Elementwise ops: operands of one shape and one element type; the result matches them.

// An f32 value (a table's, a scalar's) meets bf16 or f16 as that type (the scores' type); bf16 with f16 is refused.
func.func @add_element_types(%a: tensor<4x8xbf16>, %b: tensor<4x8xf16>) -> tensor<4x8xbf16> {
  // expected-error @+1 {{'wl.add' op element types differ: lhs is bf16, rhs is f16}}
  %0 = "wl.add"(%a, %b) : (tensor<4x8xbf16>, tensor<4x8xf16>) -> tensor<4x8xbf16>
  return %0 : tensor<4x8xbf16>
}

// -----

func.func @add_f32_to_bf16_result_type(%a: tensor<4x8xbf16>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.add' op result element type f32 differs from the operands' bf16}}
  %0 = "wl.add"(%a, %b) : (tensor<4x8xbf16>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @mul_f8_flavours(%a: tensor<16xf8E4M3FN>, %b: tensor<16xf8E5M2>) -> tensor<16xf8E4M3FN> {
  // expected-error @+1 {{'wl.mul' op element types differ: lhs is f8E4M3FN, rhs is f8E5M2}}
  %0 = "wl.mul"(%a, %b) : (tensor<16xf8E4M3FN>, tensor<16xf8E5M2>) -> tensor<16xf8E4M3FN>
  return %0 : tensor<16xf8E4M3FN>
}

// -----

func.func @max_shapes(%a: tensor<4x8xf32>, %b: tensor<4x9xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.max' op shapes differ: lhs is tensor<4x8xf32>, rhs is tensor<4x9xf32>}}
  %0 = "wl.max"(%a, %b) : (tensor<4x8xf32>, tensor<4x9xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// No broadcasting: a rank-1 operand does not stretch over a rank-2 one.
func.func @add_ranks(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.add' op shapes differ: lhs is tensor<4x8xf32>, rhs is tensor<8xf32>}}
  %0 = "wl.add"(%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @add_result_element(%a: tensor<4x8xbf16>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.add' op result element type f32 differs from the operands' bf16}}
  %0 = "wl.add"(%a, %a) : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @relu_result_shape(%a: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'wl.relu' op result type tensor<8x4xf32> does not match the inferred tensor<4x8xf32>}}
  %0 = "wl.relu"(%a) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @scale_result_element(%a: tensor<4x8xf16>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.scale' op result element type f32 differs from the operands' f16}}
  %0 = "wl.scale"(%a) {factor = 2.0 : f32} : (tensor<4x8xf16>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// wl.gelu's approximate must be "none" or "tanh"; the message quotes the bad value.

func.func @gelu_fast(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.gelu' op approximate = 'fast'; expected "none" or "tanh"}}
  %0 = "wl.gelu"(%a) {approximate = "fast"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Case matters.
func.func @gelu_upper(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{approximate = 'Tanh'; expected "none" or "tanh"}}
  %0 = "wl.gelu"(%a) {approximate = "Tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @gelu_empty(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{approximate = ''; expected "none" or "tanh"}}
  %0 = "wl.gelu"(%a) {approximate = ""} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
