// RUN: warploom-opt %s --split-input-file --verify-diagnostics

// Every listed attribute is required, and must be of its kind (IRDL base constraints).

func.func @scale_without_factor(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.scale' op attribute "factor" is expected but not provided}}
  %0 = "wl.scale"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @matmul_without_transpose_b(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'wl.matmul' op attribute "transpose_b" is expected but not provided}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @attention_without_layout(%q: tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{'wl.attention' op attribute "layout" is expected but not provided}}
  %0 = "wl.attention"(%q, %q, %q) {causal = false, scale = 1.0 : f32} : (tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

func.func @gelu_without_approximate(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.gelu' op attribute "approximate" is expected but not provided}}
  %0 = "wl.gelu"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @softmax_without_axis(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.softmax' op attribute "axis" is expected but not provided}}
  %0 = "wl.softmax"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Wrong kinds. IRDL's message names the expected and actual attribute bases (not the
// attribute itself; see attribute_kind_names_attribute.mlir).

func.func @factor_is_integer(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{expected base attribute 'builtin.float' but got 'builtin.integer'}}
  %0 = "wl.scale"(%a) {factor = 2 : i32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @causal_is_string(%q: tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.string'}}
  %0 = "wl.attention"(%q, %q, %q) {causal = "yes", scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

func.func @layout_is_integer(%q: tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{expected base attribute 'builtin.string' but got 'builtin.integer'}}
  %0 = "wl.attention"(%q, %q, %q) {causal = false, scale = 1.0 : f32, layout = 0 : i64} : (tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

func.func @axis_is_float(%a: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.float'}}
  %0 = "wl.reduce_sum"(%a) {axis = 1.0 : f32} : (tensor<4x8xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @transpose_is_unit(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{expected base attribute 'builtin.integer' but got 'builtin.unit'}}
  %0 = "wl.matmul"(%a, %b) {transpose_a, transpose_b = false} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
