// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// The element type and static shapes carry over unchanged into the fused op, whose
// type is the second matmul's result (here v's head dim 32 differs from q's 64).

// CHECK-LABEL: func.func @f16
// CHECK-NEXT: %[[O:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", scale = 1.250000e-01 : f32} : (tensor<?x4x?x64xf16>, tensor<?x4x?x64xf16>, tensor<?x4x?x64xf16>) -> tensor<?x4x?x64xf16>
// CHECK-NEXT: return %[[O]] : tensor<?x4x?x64xf16>
func.func @f16(%q: tensor<?x4x?x64xf16>, %k: tensor<?x4x?x64xf16>, %v: tensor<?x4x?x64xf16>) -> tensor<?x4x?x64xf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<?x4x?x64xf16>, tensor<?x4x?x64xf16>) -> tensor<?x4x?x?xf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<?x4x?x?xf16>) -> tensor<?x4x?x?xf16>
  %u = "wl.causal_mask"(%t) : (tensor<?x4x?x?xf16>) -> tensor<?x4x?x?xf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<?x4x?x?xf16>) -> tensor<?x4x?x?xf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<?x4x?x?xf16>, tensor<?x4x?x64xf16>) -> tensor<?x4x?x64xf16>
  return %o : tensor<?x4x?x64xf16>
}

// -----

// CHECK-LABEL: func.func @static
// CHECK-NEXT: %[[O:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bhsd", scale = 1.250000e-01 : f32} : (tensor<2x8x128x64xbf16>, tensor<2x8x256x64xbf16>, tensor<2x8x256x32xbf16>) -> tensor<2x8x128x32xbf16>
// CHECK-NEXT: return %[[O]] : tensor<2x8x128x32xbf16>
func.func @static(%q: tensor<2x8x128x64xbf16>, %k: tensor<2x8x256x64xbf16>, %v: tensor<2x8x256x32xbf16>) -> tensor<2x8x128x32xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<2x8x128x64xbf16>, tensor<2x8x256x64xbf16>) -> tensor<2x8x128x256xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<2x8x128x256xbf16>) -> tensor<2x8x128x256xbf16>
  %p = "wl.softmax"(%t) {axis = -1} : (tensor<2x8x128x256xbf16>) -> tensor<2x8x128x256xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<2x8x128x256xbf16>, tensor<2x8x256x32xbf16>) -> tensor<2x8x128x32xbf16>
  return %o : tensor<2x8x128x32xbf16>
}

// -----

// f32 end to end.
// CHECK-LABEL: func.func @f32
// CHECK-NEXT: "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", scale = 1.000000e+00 : f32} : (tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32>
func.func @f32(%q: tensor<1x1x16x16xf32>, %k: tensor<1x1x16x16xf32>, %v: tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32>
  %u = "wl.causal_mask"(%s) : (tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x1x16x16xf32>
  return %o : tensor<1x1x16x16xf32>
}
