// RUN: warploom-opt %s | warploom-opt | FileCheck %s

// The printed form is valid input: a second warploom-opt parses and verifies it
// and prints the same ops (a whole MLP block plus attention).

// CHECK-LABEL: func.func @block
// CHECK-NEXT: %[[A:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bshd", scale = 1.250000e-01 : f32} : (tensor<1x?x8x64xbf16>, tensor<1x?x2x64xbf16>, tensor<1x?x2x64xbf16>) -> tensor<1x?x8x64xbf16>
// CHECK-NEXT: %[[X:.*]] = "wl.add"(%[[A]], %arg0)
// CHECK-NEXT: %[[H:.*]] = "wl.matmul"(%[[X]], %arg3) {transpose_a = false, transpose_b = false} : (tensor<1x?x8x64xbf16>, tensor<1x?x64x256xbf16>) -> tensor<1x?x8x256xf32>
// CHECK-NEXT: %[[G:.*]] = "wl.gelu"(%[[H]]) {approximate = "tanh"}
// CHECK-NEXT: %[[C:.*]] = "wl.cast"(%[[G]]) : (tensor<1x?x8x256xf32>) -> tensor<1x?x8x256xf8E4M3FN>
// CHECK-NEXT: %[[M:.*]] = "wl.reduce_max"(%[[G]]) {axis = -1 : i64} : (tensor<1x?x8x256xf32>) -> tensor<1x?x8xf32>
// CHECK-NEXT: return %[[C]], %[[M]]
func.func @block(%q: tensor<1x?x8x64xbf16>, %k: tensor<1x?x2x64xbf16>, %v: tensor<1x?x2x64xbf16>, %w: tensor<1x?x64x256xbf16>) -> (tensor<1x?x8x256xf8E4M3FN>, tensor<1x?x8xf32>) {
  %a = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32, layout = "bshd"} : (tensor<1x?x8x64xbf16>, tensor<1x?x2x64xbf16>, tensor<1x?x2x64xbf16>) -> tensor<1x?x8x64xbf16>
  %x = "wl.add"(%a, %q) : (tensor<1x?x8x64xbf16>, tensor<1x?x8x64xbf16>) -> tensor<1x?x8x64xbf16>
  %h = "wl.matmul"(%x, %w) {transpose_a = false, transpose_b = false} : (tensor<1x?x8x64xbf16>, tensor<1x?x64x256xbf16>) -> tensor<1x?x8x256xf32>
  %g = "wl.gelu"(%h) {approximate = "tanh"} : (tensor<1x?x8x256xf32>) -> tensor<1x?x8x256xf32>
  %c = "wl.cast"(%g) : (tensor<1x?x8x256xf32>) -> tensor<1x?x8x256xf8E4M3FN>
  %m = "wl.reduce_max"(%g) {axis = -1} : (tensor<1x?x8x256xf32>) -> tensor<1x?x8xf32>
  return %c, %m : tensor<1x?x8x256xf8E4M3FN>, tensor<1x?x8xf32>
}
