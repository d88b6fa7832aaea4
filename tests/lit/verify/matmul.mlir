// RUN: warploom-opt %s --split-input-file --verify-diagnostics

// wl.matmul shape rules (checked by the wl verifier after parsing). The messages name
// lhs/rhs, their shapes and which operand is transposed.

func.func @k_mismatch(%a: tensor<128x64xbf16>, %b: tensor<32x256xbf16>) -> tensor<128x256xbf16> {
  // expected-error @+1 {{'wl.matmul' op contracting dims differ: lhs 128x64 has K = 64, rhs 32x256 has K = 32}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<128x64xbf16>, tensor<32x256xbf16>) -> tensor<128x256xbf16>
  return %0 : tensor<128x256xbf16>
}

// -----

// With transpose_b, K is rhs's last dim: a shape that is fine untransposed is now wrong.
func.func @k_mismatch_transpose_b(%a: tensor<128x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<128x64xbf16> {
  // expected-error @+1 {{contracting dims differ: lhs 128x64 has K = 64, rhs 64x256 (transposed) has K = 256}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<128x64xbf16>, tensor<64x256xbf16>) -> tensor<128x64xbf16>
  return %0 : tensor<128x64xbf16>
}

// -----

func.func @k_mismatch_transpose_a(%a: tensor<128x64xf16>, %b: tensor<64x256xf16>) -> tensor<64x256xf16> {
  // expected-error @+1 {{contracting dims differ: lhs 128x64 (transposed) has K = 128, rhs 64x256 has K = 64}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = true, transpose_b = false} : (tensor<128x64xf16>, tensor<64x256xf16>) -> tensor<64x256xf16>
  return %0 : tensor<64x256xf16>
}

// -----

func.func @k_mismatch_both(%a: tensor<4x8xf32>, %b: tensor<4x9xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{contracting dims differ: lhs 4x8 (transposed) has K = 4, rhs 4x9 (transposed) has K = 9}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = true, transpose_b = true} : (tensor<4x8xf32>, tensor<4x9xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

func.func @rank_mismatch(%a: tensor<2x4x8xf32>, %b: tensor<8x9xf32>) -> tensor<2x4x9xf32> {
  // expected-error @+1 {{'wl.matmul' op lhs and rhs ranks differ: tensor<2x4x8xf32> vs tensor<8x9xf32>}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<2x4x8xf32>, tensor<8x9xf32>) -> tensor<2x4x9xf32>
  return %0 : tensor<2x4x9xf32>
}

// -----

func.func @rank_one(%a: tensor<8xf32>, %b: tensor<8x9xf32>) -> tensor<9xf32> {
  // expected-error @+1 {{'wl.matmul' op lhs must have rank >= 2, got tensor<8xf32>}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<8xf32>, tensor<8x9xf32>) -> tensor<9xf32>
  return %0 : tensor<9xf32>
}

// -----

func.func @batch_mismatch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x9xf32>) -> tensor<2x4x9xf32> {
  // expected-error @+1 {{'wl.matmul' op batch dim 0 differs: 2 vs 3}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<2x4x8xf32>, tensor<3x8x9xf32>) -> tensor<2x4x9xf32>
  return %0 : tensor<2x4x9xf32>
}

// -----

func.func @inner_batch_mismatch(%a: tensor<?x8x4x8xf32>, %b: tensor<2x4x8x9xf32>) -> tensor<2x8x4x9xf32> {
  // expected-error @+1 {{'wl.matmul' op batch dim 1 differs: 8 vs 4}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x8x4x8xf32>, tensor<2x4x8x9xf32>) -> tensor<2x8x4x9xf32>
  return %0 : tensor<2x8x4x9xf32>
}

// -----

func.func @element_mismatch(%a: tensor<4x8xbf16>, %b: tensor<8x9xf16>) -> tensor<4x9xf32> {
  // expected-error @+1 {{'wl.matmul' op element types differ: lhs is bf16, rhs is f16}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xbf16>, tensor<8x9xf16>) -> tensor<4x9xf32>
  return %0 : tensor<4x9xf32>
}

// -----

func.func @wrong_result(%a: tensor<4x8xf32>, %b: tensor<8x9xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'wl.matmul' op result type tensor<4x8xf32> does not match the inferred tensor<4x9xf32>}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<8x9xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Every bad op of a function is reported, not just the first.
func.func @two_errors(%a: tensor<4x8xf32>, %b: tensor<4x9xf32>) {
  // expected-error @+1 {{has K = 8, rhs 4x9 has K = 4}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<4x9xf32>) -> tensor<4x9xf32>
  // expected-error @+1 {{has K = 8, rhs 4x9 (transposed) has K = 9}}
  %1 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<4x8xf32>, tensor<4x9xf32>) -> tensor<4x4xf32>
  return
}
