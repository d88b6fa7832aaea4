// RUN: warploom-opt %s --split-input-file --wl-fuse | FileCheck %s

// Positive cases without one or both of scale and mask: the missing scale becomes 1.0,
// a missing mask causal = false. The chain's ops are all erased.

// CHECK-LABEL: func.func @no_scale_no_mask
// CHECK-NEXT: %[[O:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bhsd", scale = 1.000000e+00 : f32} : (tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16>
// CHECK-NEXT: return %[[O]]
// CHECK-NOT: wl.matmul
// CHECK-NOT: wl.softmax
func.func @no_scale_no_mask(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x8x?x64xbf16>, %v: tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x?xbf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<?x8x?x?xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16>
  return %o : tensor<?x8x?x64xbf16>
}

// -----

// softmax axis = 3 (the last axis spelled positively) counts as the key axis too.
// CHECK-LABEL: func.func @scale_only
// CHECK-NEXT: %[[O:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bhsd", scale = 1.250000e-01 : f32}
// CHECK-NOT: wl.scale
// CHECK-NEXT: return %[[O]]
func.func @scale_only(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x8x?x64xbf16>, %v: tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %p = "wl.softmax"(%t) {axis = 3} : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<?x8x?x?xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16>
  return %o : tensor<?x8x?x64xbf16>
}

// -----

// CHECK-LABEL: func.func @mask_only
// CHECK-NEXT: %[[O:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", scale = 1.000000e+00 : f32}
// CHECK-NOT: wl.causal_mask
// CHECK-NEXT: return %[[O]]
func.func @mask_only(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x8x?x64xbf16>, %v: tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x?xbf16>
  %u = "wl.causal_mask"(%s) : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<?x8x?x?xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16>
  return %o : tensor<?x8x?x64xbf16>
}
