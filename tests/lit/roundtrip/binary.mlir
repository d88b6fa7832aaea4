// RUN: warploom-opt %s | FileCheck %s

// The elementwise binary ops: same shapes (a dynamic dim matches a static one), same element type.

// CHECK-LABEL: func.func @binary
// CHECK: %[[ADD:.*]] = "wl.add"(%arg0, %arg1) : (tensor<4x128xbf16>, tensor<4x128xbf16>) -> tensor<4x128xbf16>
// CHECK: %[[MUL:.*]] = "wl.mul"(%[[ADD]], %arg1) : (tensor<4x128xbf16>, tensor<4x128xbf16>) -> tensor<4x128xbf16>
// CHECK: %[[MAX:.*]] = "wl.max"(%[[MUL]], %arg0) : (tensor<4x128xbf16>, tensor<4x128xbf16>) -> tensor<4x128xbf16>
// CHECK: return %[[MAX]]
func.func @binary(%a: tensor<4x128xbf16>, %b: tensor<4x128xbf16>) -> tensor<4x128xbf16> {
  %0 = "wl.add"(%a, %b) : (tensor<4x128xbf16>, tensor<4x128xbf16>) -> tensor<4x128xbf16>
  %1 = "wl.mul"(%0, %b) : (tensor<4x128xbf16>, tensor<4x128xbf16>) -> tensor<4x128xbf16>
  %2 = "wl.max"(%1, %a) : (tensor<4x128xbf16>, tensor<4x128xbf16>) -> tensor<4x128xbf16>
  return %2 : tensor<4x128xbf16>
}

// CHECK-LABEL: func.func @dynamic
// CHECK: "wl.add"(%arg0, %arg1) : (tensor<?x64xf32>, tensor<8x?xf32>) -> tensor<8x64xf32>
// CHECK: "wl.mul"(%arg0, %arg0) : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
// CHECK: "wl.max"(%arg1, %arg1) : (tensor<8x?xf32>, tensor<8x?xf32>) -> tensor<8x?xf32>
func.func @dynamic(%a: tensor<?x64xf32>, %b: tensor<8x?xf32>) -> tensor<8x64xf32> {
  %0 = "wl.add"(%a, %b) : (tensor<?x64xf32>, tensor<8x?xf32>) -> tensor<8x64xf32>
  %1 = "wl.mul"(%a, %a) : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
  %2 = "wl.max"(%b, %b) : (tensor<8x?xf32>, tensor<8x?xf32>) -> tensor<8x?xf32>
  return %0 : tensor<8x64xf32>
}

// The low-precision element types are accepted by elementwise ops too.
// CHECK-LABEL: func.func @low_precision
// CHECK: "wl.add"(%arg0, %arg0) : (tensor<16xf8E4M3FN>, tensor<16xf8E4M3FN>) -> tensor<16xf8E4M3FN>
// CHECK: "wl.mul"(%arg1, %arg1) : (tensor<16xf8E5M2>, tensor<16xf8E5M2>) -> tensor<16xf8E5M2>
// CHECK: "wl.max"(%arg2, %arg2) : (tensor<16xf4E2M1FN>, tensor<16xf4E2M1FN>) -> tensor<16xf4E2M1FN>
func.func @low_precision(%a: tensor<16xf8E4M3FN>, %b: tensor<16xf8E5M2>, %c: tensor<16xf4E2M1FN>) {
  %0 = "wl.add"(%a, %a) : (tensor<16xf8E4M3FN>, tensor<16xf8E4M3FN>) -> tensor<16xf8E4M3FN>
  %1 = "wl.mul"(%b, %b) : (tensor<16xf8E5M2>, tensor<16xf8E5M2>) -> tensor<16xf8E5M2>
  %2 = "wl.max"(%c, %c) : (tensor<16xf4E2M1FN>, tensor<16xf4E2M1FN>) -> tensor<16xf4E2M1FN>
  return
}
