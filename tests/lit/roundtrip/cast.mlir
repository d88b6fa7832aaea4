// RUN: warploom-opt %s | FileCheck %s

// wl.cast converts to the result's element type: every supported type, the shape is kept.

// CHECK-LABEL: func.func @cast_from_f32
// CHECK: "wl.cast"(%arg0) : (tensor<?x64xf32>) -> tensor<?x64xf32>
// CHECK: "wl.cast"(%arg0) : (tensor<?x64xf32>) -> tensor<?x64xf16>
// CHECK: "wl.cast"(%arg0) : (tensor<?x64xf32>) -> tensor<?x64xbf16>
// CHECK: "wl.cast"(%arg0) : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
// CHECK: "wl.cast"(%arg0) : (tensor<?x64xf32>) -> tensor<?x64xf8E5M2>
// CHECK: "wl.cast"(%arg0) : (tensor<?x64xf32>) -> tensor<?x64xf4E2M1FN>
func.func @cast_from_f32(%x: tensor<?x64xf32>) {
  %0 = "wl.cast"(%x) : (tensor<?x64xf32>) -> tensor<?x64xf32>
  %1 = "wl.cast"(%x) : (tensor<?x64xf32>) -> tensor<?x64xf16>
  %2 = "wl.cast"(%x) : (tensor<?x64xf32>) -> tensor<?x64xbf16>
  %3 = "wl.cast"(%x) : (tensor<?x64xf32>) -> tensor<?x64xf8E4M3FN>
  %4 = "wl.cast"(%x) : (tensor<?x64xf32>) -> tensor<?x64xf8E5M2>
  %5 = "wl.cast"(%x) : (tensor<?x64xf32>) -> tensor<?x64xf4E2M1FN>
  return
}

// And back up from the narrow types.
// CHECK-LABEL: func.func @cast_to_wide
// CHECK: "wl.cast"(%arg0) : (tensor<2x16xf8E4M3FN>) -> tensor<2x16xbf16>
// CHECK: "wl.cast"(%arg1) : (tensor<2x16xf8E5M2>) -> tensor<2x16xf16>
// CHECK: "wl.cast"(%arg2) : (tensor<2x16xf4E2M1FN>) -> tensor<2x16xf32>
// CHECK: "wl.cast"(%arg0) : (tensor<2x16xf8E4M3FN>) -> tensor<2x16xf8E5M2>
func.func @cast_to_wide(%a: tensor<2x16xf8E4M3FN>, %b: tensor<2x16xf8E5M2>, %c: tensor<2x16xf4E2M1FN>) {
  %0 = "wl.cast"(%a) : (tensor<2x16xf8E4M3FN>) -> tensor<2x16xbf16>
  %1 = "wl.cast"(%b) : (tensor<2x16xf8E5M2>) -> tensor<2x16xf16>
  %2 = "wl.cast"(%c) : (tensor<2x16xf4E2M1FN>) -> tensor<2x16xf32>
  %3 = "wl.cast"(%a) : (tensor<2x16xf8E4M3FN>) -> tensor<2x16xf8E5M2>
  return
}
