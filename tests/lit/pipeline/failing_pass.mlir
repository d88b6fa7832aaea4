// RUN: not warploom-opt %s --no-verify --pass-pipeline='builtin.module(wl-fuse,wl-verify)' 2>&1 | FileCheck %s

// With --no-verify, bad IR gets past parsing; a wl-verify in the pipeline then fails it with a
// located diagnostic and a non-zero exit, and no IR is printed.

// CHECK: failing_pass.mlir:[[# @LINE + 5]]:8: error: 'wl.matmul' op contracting dims differ: lhs 4x8 has K = 8, rhs 9x4 has K = 9
// CHECK-NOT: Traceback
// CHECK-NOT: func.func

func.func @bad(%a: tensor<4x8xf32>, %b: tensor<9x4xf32>) -> tensor<4x4xf32> {
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<9x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
