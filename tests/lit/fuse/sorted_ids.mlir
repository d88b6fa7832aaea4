// RUN: warploom-opt %s --wl-fuse --wl-verify | FileCheck %s

// A document mask over ids from a graph input declared non-decreasing (wl.nondecreasing, g.input(...,
// nondecreasing=True)): the attention's modifiers list the ids as sorted (mod_sorted), so its block bounds read
// their ends. Without the argument attribute the same chain fuses without mod_sorted (tests/unit/test_fuse_mods.py).
// CHECK-LABEL: func.func @documents
// CHECK-NOT: "wl.gather"
// CHECK: "wl.attention"(%arg0, %arg1, %arg2) {causal = true, layout = "bhsd", mask_mod = "(eq (load doc i32 q_idx) (load doc i32 kv_idx))", mod_sorted = "doc", mod_tensors = "doc:i32:1", scale = 2.500000e-01 : f32}
// CHECK-NEXT: return
func.func @documents(%q: tensor<1x2x?x64xbf16>, %k: tensor<1x2x?x64xbf16>, %v: tensor<1x2x?x64xbf16>, %doc: tensor<?xi32> {wl.name = "doc", wl.nondecreasing}) -> tensor<1x2x?x64xbf16> {
  %s = "wl.matmul"(%q, %k) {transpose_a = false, transpose_b = true} : (tensor<1x2x?x64xbf16>, tensor<1x2x?x64xbf16>) -> tensor<1x2x?x?xbf16>
  %t = "wl.scale"(%s) {factor = 0.25 : f32} : (tensor<1x2x?x?xbf16>) -> tensor<1x2x?x?xbf16>
  %qi = "wl.index"(%t) {dim = "q_idx"} : (tensor<1x2x?x?xbf16>) -> tensor<1x2x?x?xi32>
  %ki = "wl.index"(%t) {dim = "kv_idx"} : (tensor<1x2x?x?xbf16>) -> tensor<1x2x?x?xi32>
  %dq = "wl.gather"(%doc, %qi) : (tensor<?xi32>, tensor<1x2x?x?xi32>) -> tensor<1x2x?x?xi32>
  %dk = "wl.gather"(%doc, %ki) : (tensor<?xi32>, tensor<1x2x?x?xi32>) -> tensor<1x2x?x?xi32>
  %same = "wl.compare"(%dq, %dk) {predicate = "eq"} : (tensor<1x2x?x?xi32>, tensor<1x2x?x?xi32>) -> tensor<1x2x?x?xi1>
  %ninf = "wl.constant"() {value = 0xFFF0000000000000 : f64} : () -> tensor<f32>
  %m = "wl.where"(%same, %t, %ninf) : (tensor<1x2x?x?xi1>, tensor<1x2x?x?xbf16>, tensor<f32>) -> tensor<1x2x?x?xbf16>
  %c = "wl.causal_mask"(%m) : (tensor<1x2x?x?xbf16>) -> tensor<1x2x?x?xbf16>
  %p = "wl.softmax"(%c) {axis = -1} : (tensor<1x2x?x?xbf16>) -> tensor<1x2x?x?xbf16>
  %o = "wl.matmul"(%p, %v) {transpose_a = false, transpose_b = false} : (tensor<1x2x?x?xbf16>, tensor<1x2x?x64xbf16>) -> tensor<1x2x?x64xbf16>
  return %o : tensor<1x2x?x64xbf16>
}
