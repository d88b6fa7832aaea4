// RUN: warploom-opt %s | FileCheck %s

// wl.matmul parses, passes the shape verifier and prints back in generic form,
// with both transpose flags, for plain, transposed, batched and dynamic shapes.

// CHECK-LABEL: func.func @plain
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = false} : (tensor<128x64xbf16>, tensor<64x256xbf16>) -> tensor<128x256xbf16>
func.func @plain(%a: tensor<128x64xbf16>, %b: tensor<64x256xbf16>) -> tensor<128x256xbf16> {
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<128x64xbf16>, tensor<64x256xbf16>) -> tensor<128x256xbf16>
  return %0 : tensor<128x256xbf16>
}

// A is stored K x M.
// CHECK-LABEL: func.func @transpose_a
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = true, transpose_b = false} : (tensor<64x128xf16>, tensor<64x256xf16>) -> tensor<128x256xf16>
func.func @transpose_a(%a: tensor<64x128xf16>, %b: tensor<64x256xf16>) -> tensor<128x256xf16> {
  %0 = "wl.matmul"(%a, %b) {transpose_a = true, transpose_b = false} : (tensor<64x128xf16>, tensor<64x256xf16>) -> tensor<128x256xf16>
  return %0 : tensor<128x256xf16>
}

// B is stored N x K.
// CHECK-LABEL: func.func @transpose_b
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true} : (tensor<128x64xf32>, tensor<256x64xf32>) -> tensor<128x256xf32>
func.func @transpose_b(%a: tensor<128x64xf32>, %b: tensor<256x64xf32>) -> tensor<128x256xf32> {
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<128x64xf32>, tensor<256x64xf32>) -> tensor<128x256xf32>
  return %0 : tensor<128x256xf32>
}

// CHECK-LABEL: func.func @transpose_both
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = true, transpose_b = true} : (tensor<64x128xbf16>, tensor<256x64xbf16>) -> tensor<128x256xbf16>
func.func @transpose_both(%a: tensor<64x128xbf16>, %b: tensor<256x64xbf16>) -> tensor<128x256xbf16> {
  %0 = "wl.matmul"(%a, %b) {transpose_a = true, transpose_b = true} : (tensor<64x128xbf16>, tensor<256x64xbf16>) -> tensor<128x256xbf16>
  return %0 : tensor<128x256xbf16>
}

// Leading dims are batch dims and must agree; a dynamic dim agrees with anything.
// CHECK-LABEL: func.func @batched
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = false} : (tensor<4x8x128x64xbf16>, tensor<4x8x64x32xbf16>) -> tensor<4x8x128x32xbf16>
// CHECK: "wl.matmul"(%arg2, %arg1) {transpose_a = false, transpose_b = false} : (tensor<?x8x?x64xbf16>, tensor<4x8x64x32xbf16>) -> tensor<?x8x?x32xbf16>
func.func @batched(%a: tensor<4x8x128x64xbf16>, %b: tensor<4x8x64x32xbf16>, %c: tensor<?x8x?x64xbf16>) -> (tensor<4x8x128x32xbf16>, tensor<?x8x?x32xbf16>) {
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<4x8x128x64xbf16>, tensor<4x8x64x32xbf16>) -> tensor<4x8x128x32xbf16>
  %1 = "wl.matmul"(%c, %b) {transpose_a = false, transpose_b = false} : (tensor<?x8x?x64xbf16>, tensor<4x8x64x32xbf16>) -> tensor<?x8x?x32xbf16>
  return %0, %1 : tensor<4x8x128x32xbf16>, tensor<?x8x?x32xbf16>
}

// Fully dynamic 2-D operands, and an f32 result from bf16 inputs (matmul may accumulate wider).
// CHECK-LABEL: func.func @dynamic_wide_result
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xf32>
func.func @dynamic_wide_result(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xf32> {
  %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}
