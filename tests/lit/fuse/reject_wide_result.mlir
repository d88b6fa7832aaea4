// RUN: warploom-opt %s --wl-fuse --wl-verify | FileCheck %s

// CHECK-LABEL: func.func @f32_output
// CHECK: "wl.softmax"
// CHECK: "wl.matmul"(%{{.*}}, %arg2) {transpose_a = false, transpose_b = false} : (tensor<2x4x16x16xbf16>, tensor<2x4x16x64xbf16>) -> tensor<2x4x16x64xf32>
// CHECK-NOT: wl.attention
func.func @f32_output(%q: tensor<2x4x16x64xbf16>, %k: tensor<2x4x16x64xbf16>, %v: tensor<2x4x16x64xbf16>) -> tensor<2x4x16x64xf32> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<2x4x16x64xbf16>, tensor<2x4x16x64xbf16>) -> tensor<2x4x16x16xbf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<2x4x16x16xbf16>) -> tensor<2x4x16x16xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<2x4x16x16xbf16>, tensor<2x4x16x64xbf16>) -> tensor<2x4x16x64xf32>
  return %o : tensor<2x4x16x64xf32>
}
