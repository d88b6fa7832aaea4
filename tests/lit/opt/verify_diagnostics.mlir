// RUN: warploom-opt %s --split-input-file --verify-diagnostics
// RUN: not warploom-opt %s --verify-diagnostics 2>&1 | FileCheck %s --check-prefix=NOSPLIT

// expected-error comments with every offset form; the chunks below pass as written.
// Without --split-input-file the first IRDL error stops parsing, so the later
// expectations are reported as not produced.

// NOSPLIT: verify_diagnostics.mlir:[[# @LINE + 11]]: error: expected error "contracting dims differ" on line [[# @LINE + 12]] was not produced

func.func @plus_one(%a: tensor<4xf32>) {
  // expected-error @+1 {{expects exactly 2 operands}}
  %0 = "wl.add"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @offsets(%a: tensor<4x8xf32>, %b: tensor<9x4xf32>) {
  // expected-error @+1 {{contracting dims differ}}
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<9x4xf32>) -> tensor<4x4xf32>
  %1 = "wl.relu"(%a) : (tensor<4x8xf32>) -> tensor<8x4xf32> // expected-error {{does not match the inferred tensor<4x8xf32>}}
  %2 = "wl.softmax"(%a) {axis = 5} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // expected-error @-1 {{axis 5 is out of range}}
  // expected-error @below {{axis -3 is out of range}}
  %3 = "wl.reduce_max"(%a) {axis = -3} : (tensor<4x8xf32>) -> tensor<4xf32>
  %4 = "wl.exp"(%b) : (tensor<9x4xf32>) -> tensor<4x9xf32>
  // expected-error @above {{result type tensor<4x9xf32> does not match}}
  return
}

// -----

// A chunk without expectations and without errors passes.
func.func @clean(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "wl.relu"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
