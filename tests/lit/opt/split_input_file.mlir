// RUN: not warploom-opt %s --split-input-file -o %t 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=OUT < %t

// Each `// -----` chunk is parsed, verified and printed on its own; a bad chunk does not
// stop the others, its diagnostics keep the line numbers of the whole file, and the exit
// status is non-zero. Good chunks are printed, joined by `// -----`.

// CHECK-DAG: split_input_file.mlir:[[# @LINE + 18]]:8: error: 'wl.matmul' op contracting dims differ
// CHECK-DAG: split_input_file.mlir:[[# @LINE + 31]]:8: error: 'wl.add' op element types differ: lhs is bf16, rhs is f16
// CHECK-DAG: split_input_file.mlir:[[# @LINE + 36]]:1: error: custom op 'garbage' is unknown
// CHECK-NOT: Traceback

// OUT: func.func @first
// OUT: // -----
// OUT: func.func @third
// OUT-NOT: func.func @second
// OUT-NOT: func.func @fourth
func.func @first(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "wl.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @second(%a: tensor<4x8xf32>, %b: tensor<9x4xf32>) -> tensor<4x4xf32> {
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8xf32>, tensor<9x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @third(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "wl.exp2"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @fourth(%a: tensor<4xbf16>, %b: tensor<4xf16>) -> tensor<4xbf16> {
  %0 = "wl.add"(%a, %b) : (tensor<4xbf16>, tensor<4xf16>) -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

garbage
