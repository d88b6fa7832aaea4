// RUN: warploom-opt %s --split-input-file --wl-fuse --wl-verify | FileCheck %s

// Score and mask modifiers written out between the scores and the softmax become the wl.attention's score_mod and
// mask_mod (warploom.score's canonical text); runtime scalars and captured tensors are listed by name.

// Softcap: cap * tanh(s / cap), cap a runtime scalar; the positive scale on the scores is the attention's scale.
// CHECK-LABEL: func.func @softcap
// CHECK-NOT: "wl.scalar"
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", mod_scalars = "cap:f32", scale = 1.250000e-01 : f32, score_mod = "(mul (scalar cap f32) (tanh (div score (scalar cap f32))))"}
// CHECK-NEXT: return
func.func @softcap(%q: tensor<1x4x?x64xbf16>, %k: tensor<1x4x?x64xbf16>, %v: tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.125 : f32} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %cap = "wl.scalar"() {name = "cap"} : () -> tensor<f32>
  %d = "wl.div"(%t, %cap) : (tensor<1x4x?x?xbf16>, tensor<f32>) -> tensor<1x4x?x?xbf16>
  %h = "wl.tanh"(%d) : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %m = "wl.mul"(%cap, %h) : (tensor<f32>, tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %c = "wl.causal_mask"(%m) : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %p = "wl.softmax"(%c) {axis = -1} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x4x?x?xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16>
  return %o : tensor<1x4x?x64xbf16>
}

// -----

// A sliding window as a mask: where(q_idx - kv_idx <= window, s, -inf), then causal; a scale on top commutes with
// both and joins the attention's scale (0.5 * 0.25).
// CHECK-LABEL: func.func @window
// CHECK-NOT: "wl.index"
// CHECK-NOT: "wl.constant"
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", mask_mod = "(le (sub q_idx kv_idx) (scalar window i32))", mod_scalars = "window:i32", scale = 1.250000e-01 : f32}
func.func @window(%q: tensor<1x4x?x64xbf16>, %k: tensor<1x4x?x64xbf16>, %v: tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.5 : f32} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %qi = "wl.index"(%t) {dim = "q_idx"} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xi32>
  %ki = "wl.index"(%t) {dim = "kv_idx"} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xi32>
  %dist = "wl.sub"(%qi, %ki) : (tensor<1x4x?x?xi32>, tensor<1x4x?x?xi32>) -> tensor<1x4x?x?xi32>
  %w = "wl.scalar"() {name = "window"} : () -> tensor<i32>
  %keep = "wl.compare"(%dist, %w) {predicate = "le"} : (tensor<1x4x?x?xi32>, tensor<i32>) -> tensor<1x4x?x?xi1>
  %ninf = "wl.constant"() {value = 0xFFF0000000000000 : f64} : () -> tensor<f32>
  %m = "wl.where"(%keep, %t, %ninf) : (tensor<1x4x?x?xi1>, tensor<1x4x?x?xbf16>, tensor<f32>) -> tensor<1x4x?x?xbf16>
  %c = "wl.causal_mask"(%m) : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %u = "wl.scale"(%c) {factor = 0.25 : f32} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x4x?x?xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16>
  return %o : tensor<1x4x?x64xbf16>
}

// -----

// ALiBi from a captured slopes tensor (slopes[h] * (kv_idx - q_idx), an i32 distance cast to f32), and a document
// mask from a captured doc_id written as where(drop, -inf, s): the mask is the negated condition; two masks are
// and-ed in the order written.
// CHECK-LABEL: func.func @alibi_documents
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bhsd", mask_mod = "(and (ge kv_idx (const 0 i32)) (not (ne (load doc f32 q_idx) (load doc f32 kv_idx))))", mod_tensors = "doc:f32:1 slopes:f32:1", scale = 1.000000e+00 : f32, score_mod = "(add score (mul (load slopes f32 h) (f32 (sub kv_idx q_idx))))"}
func.func @alibi_documents(%q: tensor<1x4x?x64xbf16>, %k: tensor<1x4x?x64xbf16>, %v: tensor<1x4x?x64xbf16>, %slopes: tensor<4xf32> {wl.name = "slopes"}, %doc: tensor<?xf32> {wl.name = "doc"}) -> tensor<1x4x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x?xbf16>
  %hi = "wl.index"(%s) {dim = "h"} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xi32>
  %qi = "wl.index"(%s) {dim = "q_idx"} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xi32>
  %ki = "wl.index"(%s) {dim = "kv_idx"} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xi32>
  %slope = "wl.gather"(%slopes, %hi) : (tensor<4xf32>, tensor<1x4x?x?xi32>) -> tensor<1x4x?x?xf32>
  %rel = "wl.sub"(%ki, %qi) : (tensor<1x4x?x?xi32>, tensor<1x4x?x?xi32>) -> tensor<1x4x?x?xi32>
  %relf = "wl.cast"(%rel) : (tensor<1x4x?x?xi32>) -> tensor<1x4x?x?xf32>
  %bias = "wl.mul"(%slope, %relf) : (tensor<1x4x?x?xf32>, tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xf32>
  %b = "wl.add"(%s, %bias) : (tensor<1x4x?x?xbf16>, tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xbf16>
  %dq = "wl.gather"(%doc, %qi) : (tensor<?xf32>, tensor<1x4x?x?xi32>) -> tensor<1x4x?x?xf32>
  %dk = "wl.gather"(%doc, %ki) : (tensor<?xf32>, tensor<1x4x?x?xi32>) -> tensor<1x4x?x?xf32>
  %other = "wl.compare"(%dq, %dk) {predicate = "ne"} : (tensor<1x4x?x?xf32>, tensor<1x4x?x?xf32>) -> tensor<1x4x?x?xi1>
  %zero = "wl.constant"() {value = 0.0 : f64} : () -> tensor<i32>
  %valid = "wl.compare"(%ki, %zero) {predicate = "ge"} : (tensor<1x4x?x?xi32>, tensor<i32>) -> tensor<1x4x?x?xi1>
  %ninf = "wl.constant"() {value = 0xFFF0000000000000 : f64} : () -> tensor<f32>
  %m1 = "wl.where"(%valid, %b, %ninf) : (tensor<1x4x?x?xi1>, tensor<1x4x?x?xbf16>, tensor<f32>) -> tensor<1x4x?x?xbf16>
  %m2 = "wl.where"(%other, %ninf, %m1) : (tensor<1x4x?x?xi1>, tensor<f32>, tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %p = "wl.softmax"(%m2) {axis = -1} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x4x?x?xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16>
  return %o : tensor<1x4x?x64xbf16>
}

// -----

// A where whose condition reads the score is score arithmetic, not a mask; exp and a second scale are score ops
// (the scale on top of a non-mask multiplies the modifier's result).
// CHECK-LABEL: func.func @score_threshold
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bhsd", scale = 5.000000e-01 : f32, score_mod = "(mul (const 0.25 f32) (where (gt score (const -4.0 f32)) (exp score) (const -inf f32)))"}
func.func @score_threshold(%q: tensor<1x4x?x64xbf16>, %k: tensor<1x4x?x64xbf16>, %v: tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.5 : f32} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %lo = "wl.constant"() {value = -4.0 : f64} : () -> tensor<f32>
  %big = "wl.compare"(%t, %lo) {predicate = "gt"} : (tensor<1x4x?x?xbf16>, tensor<f32>) -> tensor<1x4x?x?xi1>
  %e = "wl.exp"(%t) : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %ninf = "wl.constant"() {value = 0xFFF0000000000000 : f64} : () -> tensor<f32>
  %w = "wl.where"(%big, %e, %ninf) : (tensor<1x4x?x?xi1>, tensor<1x4x?x?xbf16>, tensor<f32>) -> tensor<1x4x?x?xbf16>
  %u = "wl.scale"(%w) {factor = 0.25 : f32} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %p = "wl.softmax"(%u) {axis = -1} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x4x?x?xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16>
  return %o : tensor<1x4x?x64xbf16>
}

// -----

// Two attentions share one runtime scalar: both fuse, and the scalar goes once the second no longer needs it. A
// non-positive scale is score arithmetic (the causal mask after it masks the modified score).
// CHECK-LABEL: func.func @shared_scalar
// CHECK-NOT: "wl.scalar"
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = false, layout = "bhsd", mod_scalars = "cap:f32", scale = 1.000000e+00 : f32, score_mod = "(minimum score (scalar cap f32))"}
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", mod_scalars = "cap:f32", scale = 1.000000e+00 : f32, score_mod = "(maximum (mul score (const -0.125 f32)) (scalar cap f32))"}
func.func @shared_scalar(%q: tensor<1x4x?x64xbf16>, %k: tensor<1x4x?x64xbf16>, %v: tensor<1x4x?x64xbf16>) -> (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>) {
  %cap = "wl.scalar"() {name = "cap"} : () -> tensor<f32>
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x?xbf16>
  %a = "wl.min"(%s, %cap) : (tensor<1x4x?x?xbf16>, tensor<f32>) -> tensor<1x4x?x?xbf16>
  %p = "wl.softmax"(%a) {axis = -1} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x4x?x?xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16>
  %s2 = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x?xbf16>
  %n = "wl.scale"(%s2) {factor = -0.125 : f32} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %a2 = "wl.max"(%n, %cap) : (tensor<1x4x?x?xbf16>, tensor<f32>) -> tensor<1x4x?x?xbf16>
  %c2 = "wl.causal_mask"(%a2) : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %p2 = "wl.softmax"(%c2) {axis = -1} : (tensor<1x4x?x?xbf16>) -> tensor<1x4x?x?xbf16>
  %o2 = "wl.matmul"(%p2, %v) {transpose_a = false, transpose_b = false} : (tensor<1x4x?x?xbf16>, tensor<1x4x?x64xbf16>) -> tensor<1x4x?x64xbf16>
  return %o, %o2 : tensor<1x4x?x64xbf16>, tensor<1x4x?x64xbf16>
}
