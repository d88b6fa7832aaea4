// RUN: warploom-opt - < %s | FileCheck %s
// RUN: not warploom-opt < %S/Inputs/bad_relu.mlir 2>&1 | FileCheck %s --check-prefix=BAD

// With `-` (or no input file) warploom-opt reads stdin; its diagnostics name <stdin>.

// CHECK: module {
// CHECK-NEXT: func.func @from_stdin
// CHECK-NEXT: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// BAD: <stdin>:5:8: error: 'wl.relu' op result type tensor<4xf32> does not match the inferred tensor<8xf32>
// BAD-NOT: Traceback
func.func @from_stdin(%q: tensor<1x2x16x16xf16>, %k: tensor<1x2x16x16xf16>, %v: tensor<1x2x16x16xf16>) -> tensor<1x2x16x16xf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x2x16x16xf16>, tensor<1x2x16x16xf16>) -> tensor<1x2x16x16xf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x2x16x16xf16>) -> tensor<1x2x16x16xf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x2x16x16xf16>, tensor<1x2x16x16xf16>) -> tensor<1x2x16x16xf16>
  return %o : tensor<1x2x16x16xf16>
}
