// RUN: warploom-opt %s --split-input-file --verify-diagnostics

// Operand and result counts are checked by the IRDL definition while parsing.

func.func @add_one_operand(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{expects exactly 2 operands, but got 1}}
  %0 = "wl.add"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @matmul_three_operands(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{expects exactly 2 operands, but got 3}}
  %0 = "wl.matmul"(%a, %b, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @relu_two_operands(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{expects exactly 1 operands, but got 2}}
  %0 = "wl.relu"(%a, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @attention_two_operands(%q: tensor<1x8x16x64xf16>, %k: tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16> {
  // expected-error @+1 {{expects exactly 3 operands, but got 2}}
  %0 = "wl.attention"(%q, %k) {causal = false, scale = 1.0 : f32, layout = "bhsd"} : (tensor<1x8x16x64xf16>, tensor<1x8x16x64xf16>) -> tensor<1x8x16x64xf16>
  return %0 : tensor<1x8x16x64xf16>
}

// -----

func.func @relu_two_results(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{expects exactly 1 results, but got 2}}
  %0:2 = "wl.relu"(%a) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @exp_no_result(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{expects exactly 1 results, but got 0}}
  "wl.exp"(%a) : (tensor<4x8xf32>) -> ()
  return
}
