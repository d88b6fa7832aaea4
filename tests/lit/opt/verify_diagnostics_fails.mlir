// RUN: not warploom-opt %s --split-input-file --verify-diagnostics 2>&1 | FileCheck %s

// --verify-diagnostics exits non-zero when an expected error is not produced, when a
// produced error was not expected, and when the text or line differs; each problem is
// reported with the line of the comment or of the diagnostic.

// CHECK-DAG: verify_diagnostics_fails.mlir:[[# @LINE + 10]]: error: expected error "contracting dims differ" on line [[# @LINE + 11]] was not produced
// CHECK-DAG: verify_diagnostics_fails.mlir:[[# @LINE + 18]]:8: error: 'wl.exp' op result type tensor<8xf32> does not match the inferred tensor<4xf32>  (unexpected error)
// CHECK-DAG: verify_diagnostics_fails.mlir:[[# @LINE + 25]]: error: expected error "K = 7" on line [[# @LINE + 26]] was not produced
// CHECK-DAG: verify_diagnostics_fails.mlir:[[# @LINE + 25]]:8: error: 'wl.matmul' op contracting dims differ{{.*}}(unexpected error)
// CHECK-DAG: verify_diagnostics_fails.mlir:[[# @LINE + 32]]: error: expected error "element types differ" on line [[# @LINE + 34]] was not produced
// CHECK-DAG: verify_diagnostics_fails.mlir:[[# @LINE + 32]]:8: error: 'wl.add' op element types differ{{.*}}(unexpected error)
// CHECK-NOT: Traceback

// A valid op with an expected error: nothing is produced.
func.func @not_produced(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{contracting dims differ}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// An error nobody expected.
func.func @unexpected(%a: tensor<4xf32>) {
  %0 = "wl.exp"(%a) : (tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

// The expected text is not in the message.
func.func @wrong_text(%a: tensor<4x8xf32>, %b: tensor<9x4xf32>) {
  // expected-error @+1 {{K = 7}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<9x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// The expected line is off by one (@+2 points at `return`).
func.func @wrong_line(%a: tensor<4xbf16>, %b: tensor<4xf16>) {
  // expected-error @+2 {{element types differ}}
  %0 = "wl.add"(%a, %b) : (tensor<4xbf16>, tensor<4xf16>) -> tensor<4xbf16>
  return
}
