// RUN: warploom-opt %s --pass-pipeline='builtin.module(wl-verify,wl-fuse,canonicalize)' | FileCheck %s

// A textual pipeline mixing wl passes with an upstream one:
// the chain is fused and the unrelated ops survive canonicalize (wl ops are not
// known to be pure, so even the unused relu stays).

// CHECK-LABEL: func.func @attn
// CHECK-NEXT: %[[O:.*]] = "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", scale = 1.250000e-01 : f32}
// CHECK-NEXT: "wl.relu"(%[[O]])
// CHECK-NEXT: return %[[O]]
func.func @attn(%q: tensor<?x8x?x64xbf16>, %k: tensor<?x8x?x64xbf16>, %v: tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<?x8x?x64xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %u = "wl.causal_mask"(%t) : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<?x8x?x?xbf16>) -> tensor<?x8x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<?x8x?x?xbf16>, tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16>
  %unused = "wl.relu"(%o) : (tensor<?x8x?x64xbf16>) -> tensor<?x8x?x64xbf16>
  return %o : tensor<?x8x?x64xbf16>
}
