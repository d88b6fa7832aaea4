// RUN: warploom-opt %s --pass-pipeline='builtin.module(wl-verify,wl-fuse,canonicalize)' --mlir-print-ir-after-all -o %t 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=OUT < %t

// --mlir-print-ir-after-all prints, to stderr, a header in MLIR's format and the whole module
// after every pass (wl passes by their CamelCase name, upstream ones by theirs); the final IR
// still goes to the output file.

// CHECK: // -----// IR Dump After WlVerify (wl-verify) //----- //
// CHECK-NEXT: module {
// CHECK: "wl.matmul"(%arg0, %arg1) {transpose_a = false, transpose_b = true}
// CHECK: "wl.softmax"
// CHECK-NOT: wl.attention
// CHECK: // -----// IR Dump After WlFuse (wl-fuse) //----- //
// CHECK-NEXT: module {
// CHECK-NEXT: func.func @attn
// CHECK-NEXT: "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bhsd", scale = 1.250000e-01 : f32}
// CHECK: // -----// IR Dump After Canonicalizer (canonicalize) //----- //
// CHECK-NEXT: module {
// CHECK-NEXT: func.func @attn
// CHECK-NEXT: "wl.attention"
// CHECK-NOT: IR Dump After

// OUT: func.func @attn
// OUT-NEXT: "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bhsd", scale = 1.250000e-01 : f32}
// OUT-NOT: IR Dump
func.func @attn(%q: tensor<1x8x128x64xbf16>, %k: tensor<1x8x128x64xbf16>, %v: tensor<1x8x128x64xbf16>) -> tensor<1x8x128x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x128x64xbf16>, tensor<1x8x128x64xbf16>) -> tensor<1x8x128x128xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x8x128x128xbf16>) -> tensor<1x8x128x128xbf16>
  %p = "wl.softmax"(%t) {axis = -1} : (tensor<1x8x128x128xbf16>) -> tensor<1x8x128x128xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x128x128xbf16>, tensor<1x8x128x64xbf16>) -> tensor<1x8x128x64xbf16>
  return %o : tensor<1x8x128x64xbf16>
}
