// RUN: warploom-opt %s --wl-verify --wl-fuse --canonicalize --mlir-print-ir-after-all -o %t 2>&1 | FileCheck %s --check-prefix=VFC
// RUN: warploom-opt %s --canonicalize --wl-fuse --wl-verify --mlir-print-ir-after-all -o %t 2>&1 | FileCheck %s --check-prefix=CFV

// Individual pass flags run in the order given on the command line.

// VFC: IR Dump After WlVerify (wl-verify)
// VFC: "wl.softmax"
// VFC: IR Dump After WlFuse (wl-fuse)
// VFC-NOT: wl.softmax
// VFC: IR Dump After Canonicalizer (canonicalize)
// VFC-NOT: IR Dump After

// CFV: IR Dump After Canonicalizer (canonicalize)
// CFV: "wl.softmax"
// CFV: IR Dump After WlFuse (wl-fuse)
// CFV-NOT: wl.softmax
// CFV: IR Dump After WlVerify (wl-verify)
// CFV-NOT: IR Dump After
func.func @attn(%q: tensor<1x8x128x64xbf16>, %k: tensor<1x8x128x64xbf16>, %v: tensor<1x8x128x64xbf16>) -> tensor<1x8x128x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x8x128x64xbf16>, tensor<1x8x128x64xbf16>) -> tensor<1x8x128x128xbf16>
  %p = "wl.softmax"(%s) {axis = -1} : (tensor<1x8x128x128xbf16>) -> tensor<1x8x128x128xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x8x128x128xbf16>, tensor<1x8x128x64xbf16>) -> tensor<1x8x128x64xbf16>
  return %o : tensor<1x8x128x64xbf16>
}
