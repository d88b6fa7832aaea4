// RUN: warploom-opt %s | FileCheck %s

// wl.attention in both layouts, causal or not, and grouped-query (more q heads than kv heads).
// Attributes print in alphabetical order: causal, layout, scale.

// CHECK-LABEL: func.func @bhsd
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bhsd", scale = 1.250000e-01 : f32} : (tensor<2x8x128x64xbf16>, tensor<2x8x256x64xbf16>, tensor<2x8x256x64xbf16>) -> tensor<2x8x128x64xbf16>
func.func @bhsd(%q: tensor<2x8x128x64xbf16>, %k: tensor<2x8x256x64xbf16>, %v: tensor<2x8x256x64xbf16>) -> tensor<2x8x128x64xbf16> {
  %0 = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.125 : f32, layout = "bhsd"} : (tensor<2x8x128x64xbf16>, tensor<2x8x256x64xbf16>, tensor<2x8x256x64xbf16>) -> tensor<2x8x128x64xbf16>
  return %0 : tensor<2x8x128x64xbf16>
}

// [B, S, H, D]: the result keeps q's sequence and head axes and takes v's head dim.
// CHECK-LABEL: func.func @bshd_causal
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bshd", scale = 2.500000e-01 : f32} : (tensor<?x?x16x128xf16>, tensor<?x?x16x128xf16>, tensor<?x?x16x64xf16>) -> tensor<?x?x16x64xf16>
func.func @bshd_causal(%q: tensor<?x?x16x128xf16>, %k: tensor<?x?x16x128xf16>, %v: tensor<?x?x16x64xf16>) -> tensor<?x?x16x64xf16> {
  %0 = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.25 : f32, layout = "bshd"} : (tensor<?x?x16x128xf16>, tensor<?x?x16x128xf16>, tensor<?x?x16x64xf16>) -> tensor<?x?x16x64xf16>
  return %0 : tensor<?x?x16x64xf16>
}

// GQA: 32 q heads share 8 kv heads.
// CHECK-LABEL: func.func @gqa_bhsd
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", scale = 1.250000e-01 : f32} : (tensor<1x32x?x64xbf16>, tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x32x?x64xbf16>
func.func @gqa_bhsd(%q: tensor<1x32x?x64xbf16>, %k: tensor<1x8x?x64xbf16>, %v: tensor<1x8x?x64xbf16>) -> tensor<1x32x?x64xbf16> {
  %0 = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32, layout = "bhsd"} : (tensor<1x32x?x64xbf16>, tensor<1x8x?x64xbf16>, tensor<1x8x?x64xbf16>) -> tensor<1x32x?x64xbf16>
  return %0 : tensor<1x32x?x64xbf16>
}

// CHECK-LABEL: func.func @gqa_bshd
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bshd", scale = 1.000000e+00 : f32} : (tensor<2x512x12x64xf8E4M3FN>, tensor<2x1024x4x64xf8E4M3FN>, tensor<2x1024x4x64xf8E4M3FN>) -> tensor<2x512x12x64xf8E4M3FN>
func.func @gqa_bshd(%q: tensor<2x512x12x64xf8E4M3FN>, %k: tensor<2x1024x4x64xf8E4M3FN>, %v: tensor<2x1024x4x64xf8E4M3FN>) -> tensor<2x512x12x64xf8E4M3FN> {
  %0 = "wl.attention"(%q, %k, %v) {causal = false, scale = 1.0 : f32, layout = "bshd"} : (tensor<2x512x12x64xf8E4M3FN>, tensor<2x1024x4x64xf8E4M3FN>, tensor<2x1024x4x64xf8E4M3FN>) -> tensor<2x512x12x64xf8E4M3FN>
  return %0 : tensor<2x512x12x64xf8E4M3FN>
}
