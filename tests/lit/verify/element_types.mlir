// RUN: warploom-opt %s --split-input-file --verify-diagnostics

// Only f32, f16, bf16, f8E4M3FN, f8E5M2 and f4E2M1FN tensors; the message names the operand
// and lists the supported types. Non-tensor and unranked operands fail IRDL's base check.

func.func @relu_i32(%a: tensor<4x8xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{'wl.relu' op input has element type i32; supported: f32, f16, bf16, f8E4M3FN, f8E5M2, f4E2M1FN}}
  %0 = "wl.relu"(%a) : (tensor<4x8xi32>) -> tensor<4x8xi32>
  return %0 : tensor<4x8xi32>
}

// -----

func.func @matmul_f64(%a: tensor<4x8xf64>, %b: tensor<8x4xf64>) -> tensor<4x4xf64> {
  // expected-error @+1 {{'wl.matmul' op lhs has element type f64; supported:}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xf64>, tensor<8x4xf64>) -> tensor<4x4xf64>
  return %0 : tensor<4x4xf64>
}

// -----

func.func @add_rhs_i8(%a: tensor<4x8xf16>, %b: tensor<4x8xi8>) -> tensor<4x8xf16> {
  // expected-error @+1 {{'wl.add' op rhs has element type i8}}
  %0 = "wl.add"(%a, %b) : (tensor<4x8xf16>, tensor<4x8xi8>) -> tensor<4x8xf16>
  return %0 : tensor<4x8xf16>
}

// -----

func.func @attention_v_f64(%q: tensor<1x8x16x64xf32>, %v: tensor<1x8x16x64xf64>) -> tensor<1x8x16x64xf32> {
  // expected-error @+1 {{'wl.attention' op v has element type f64}}
  %0 = "wl.attention"(%q, %q, %v) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xf32>, tensor<1x8x16x64xf32>, tensor<1x8x16x64xf64>) -> tensor<1x8x16x64xf32>
  return %0 : tensor<1x8x16x64xf32>
}

// -----

// f8E4M3FNUZ (the AMD flavour) is an MLIR type but not a warploom one.
func.func @exp_fnuz(%a: tensor<16xf8E4M3FNUZ>) -> tensor<16xf8E4M3FNUZ> {
  // expected-error @+1 {{'wl.exp' op input has element type f8E4M3FNUZ}}
  %0 = "wl.exp"(%a) : (tensor<16xf8E4M3FNUZ>) -> tensor<16xf8E4M3FNUZ>
  return %0 : tensor<16xf8E4M3FNUZ>
}

// -----

func.func @cast_to_f64(%a: tensor<4xbf16>) -> tensor<4xf64> {
  // expected-error @+1 {{'wl.cast' op result has element type f64; supported:}}
  %0 = "wl.cast"(%a) : (tensor<4xbf16>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}

// -----

// An i32 (an index) casts to a float; nothing casts to i32.
func.func @cast_to_i32(%a: tensor<4xf32>) -> tensor<4xi32> {
  // expected-error @+1 {{'wl.cast' op result has element type i32}}
  %0 = "wl.cast"(%a) : (tensor<4xf32>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @scalar_operand(%a: f32) -> f32 {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  %0 = "wl.relu"(%a) : (f32) -> f32
  return %0 : f32
}

// -----

func.func @unranked_operand(%a: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "wl.silu"(%a) : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
