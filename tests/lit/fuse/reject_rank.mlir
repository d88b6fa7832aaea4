// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// Only rank-4 [B, H, S, D] chains become attention; rank-3 (and rank-2) chains stay.

// CHECK-LABEL: func.func @rank3
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true} : (tensor<8x?x64xbf16>, tensor<8x?x64xbf16>) -> tensor<8x?x?xbf16>
// CHECK: "wl.scale"
// CHECK: "wl.causal_mask"
// CHECK: "wl.softmax"(%{{.*}}) {axis = -1 : i64, wl.unfused = "the softmax is over a rank-3 tensor; attention's scores are [B, H, Sq, Sk]"} : (tensor<8x?x?xbf16>) -> tensor<8x?x?xbf16>
// CHECK: "wl.matmul"(%{{.*}}, %arg2) {transpose_a = false, transpose_b = false}
// CHECK-NOT: wl.attention
func.func @rank3(%q: tensor<8x?x64xbf16>, %k: tensor<8x?x64xbf16>, %v: tensor<8x?x64xbf16>) -> tensor<8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<8x?x64xbf16>, tensor<8x?x64xbf16>) -> tensor<8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<8x?x?xbf16>) -> tensor<8x?x?xbf16>
  %u = "wl.causal_mask"(%t) : (tensor<8x?x?xbf16>) -> tensor<8x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<8x?x?xbf16>) -> tensor<8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<8x?x?xbf16>, tensor<8x?x64xbf16>) -> tensor<8x?x64xbf16>
  return %o : tensor<8x?x64xbf16>
}

// -----

// CHECK-LABEL: func.func @rank2
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.softmax"
// CHECK: "wl.matmul"
// CHECK-NOT: wl.attention
func.func @rank2(%q: tensor<128x64xf16>, %k: tensor<128x64xf16>, %v: tensor<128x64xf16>) -> tensor<128x64xf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<128x64xf16>, tensor<128x64xf16>) -> tensor<128x128xf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<128x128xf16>) -> tensor<128x128xf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<128x128xf16>, tensor<128x64xf16>) -> tensor<128x64xf16>
  return %o : tensor<128x64xf16>
}
