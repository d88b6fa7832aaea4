// RUN: warploom-opt %s --split-input-file --verify-diagnostics --wl-tile
// RUN: not warploom-opt %s --split-input-file --wl-tile=block-n=96 2>&1 | FileCheck %s --check-prefix=BN96

func.func @fp32(%a: tensor<?x?xf32>, %b: tensor<?x?xf32>) -> tensor<?x?xf32> {
  // expected-error @+1 {{GEMM kernels take bf16 or f16 in and out, got f32 -> f32}}
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xf32>, tensor<?x?xf32>) -> tensor<?x?xf32>
  return %c : tensor<?x?xf32>
}

// -----

func.func @batched(%a: tensor<2x?x?xbf16>, %b: tensor<2x?x?xbf16>) -> tensor<2x?x?xbf16> {
  // expected-error @+1 {{batched matmul (rank 3) has no GEMM kernel yet}}
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<2x?x?xbf16>, tensor<2x?x?xbf16>) -> tensor<2x?x?xbf16>
  return %c : tensor<2x?x?xbf16>
}

// -----

func.func @transpose_a(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  // expected-error @+1 {{transpose_a is not supported}}
  %c = "wl.matmul"(%a, %b) {transpose_a = true, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}

// BN96: block-n = 96: must be a multiple of 64 up to 256 (wgmma n <= 256, whole 64-column TMA boxes)
