// RUN: warploom-opt %s --split-input-file --wl-tile | FileCheck %s
// RUN: warploom-opt %s --split-input-file --wl-tile=block-n=64 | FileCheck %s --check-prefix=BN64

// A causal attention becomes a kernel of 128 query rows per CTA (grid: query blocks x heads x batches) with
// two results, O and the f32 LSE. Q is loaded once; the loop runs over the key blocks query block m sees under
// the bottom-right causal mask; S = Q K^T (both from smem, K-major, contracting the head dim D, S overwritten),
// the online softmax, then O += P V (P from registers, V MN-major: the sum runs over the keys N).
// CHECK-LABEL: func.func @causal
// CHECK: %[[K:.*]]:2 = "wl.kernel"(%arg0, %arg1, %arg2) ({
// CHECK-NEXT: "wl.register"() {name = "p", shape = [128, 176]}
// CHECK-NEXT: "wl.register"() {name = "row_max", shape = [128]}
// CHECK-NEXT: "wl.register"() {name = "row_sum", shape = [128]}
// CHECK-NEXT: "wl.register"() {name = "lse", shape = [128]}
// CHECK-NEXT: "wl.load_tile"() {dims = ["M", "D"], operand = "q", tile = [128, 128]}
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.load_tile"() {dims = ["N", "D"], operand = "k", tile = [176, 128]}
// CHECK-NEXT: "wl.mma"() {a = "q", a_major = "K", a_source = "smem", acc = "s", accumulate = false, b = "k", b_major = "K", b_source = "smem", k_dim = "D", shape = [128, 176, 128]}
// CHECK-NEXT: "wl.compute"() {kind = "online_softmax", reads = ["s", "row_max", "row_sum", "o_acc"], writes = ["p", "row_max", "row_sum", "o_acc"]}
// CHECK-NEXT: "wl.load_tile"() {dims = ["N", "D"], operand = "v", tile = [176, 128]}
// CHECK-NEXT: "wl.mma"() {a = "p", a_major = "K", a_source = "regs", acc = "o_acc", b = "v", b_major = "MN", b_source = "smem", k_dim = "N", shape = [128, 128, 176]}
// CHECK: }) {carries = ["o_acc", "row_max", "row_sum"], name = "kv", trip = ["causal_blocks", "Sq", "Sk", "m", 128, 176]}
// CHECK-NEXT: "wl.compute"() {kind = "normalize", reads = ["o_acc", "row_max", "row_sum"], writes = ["o_acc", "lse"]}
// CHECK-NEXT: "wl.store_tile"() {acc = "o_acc", operand = "out", tile = [128, 128]}
// CHECK-NEXT: "wl.store_tile"() {acc = "lse", operand = "lse", tile = [128]}
// CHECK: }) {acc_elem = "f32", causal = true, cluster = [1, 1, 1], grid = [["cdiv", "Sq", 128], ["cdiv", "Hq", 1], ["cdiv", "B", 1]], input_names = ["q", "k", "v"], kind = "attention", layout = "bshd", output_names = ["out", "lse"], planned = ["wl-tile"], scale = 8.838800e-02 : f32, schedule = "grid", tile = [128, 176, 128]}
// CHECK-SAME: -> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)
// CHECK-NOT: wl.attention
// CHECK: return %[[K]]#0
// BN64: trip = ["causal_blocks", "Sq", "Sk", "m", 128, 64]
// BN64: tile = [128, 64, 128]
func.func @causal(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.088388 : f32, layout = "bshd"} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}

// -----

// Head dim 256 takes 64-key blocks by default; without the mask every key block is visited. B, S and the
// head counts (GQA: 16 query heads over 4 kv heads) are runtime sizes: the kernel takes `?` dims, through
// tensor.cast, and its O is cast back to the graph's type.
// CHECK-LABEL: func.func @gqa_d256
// CHECK: %[[Q:.*]] = tensor.cast %arg0 : tensor<2x?x16x256xf16> to tensor<?x?x?x256xf16>
// CHECK: %[[O:.*]]:2 = "wl.kernel"(%[[Q]], %{{.*}}, %{{.*}}) ({
// CHECK: "wl.mma"() {a = "q"{{.*}}, k_dim = "D", shape = [128, 80, 256]}
// CHECK: "wl.mma"() {a = "p"{{.*}}, k_dim = "N", shape = [128, 256, 80]}
// CHECK: }) {carries = ["o_acc", "row_max", "row_sum"], name = "kv", trip = ["cdiv", "Sk", 80]}
// CHECK: causal = false
// CHECK-SAME: tile = [128, 80, 256]
// CHECK-SAME: -> (tensor<?x?x?x256xf16>, tensor<?x?x?xf32>)
// CHECK-NEXT: %[[R:.*]] = tensor.cast %[[O]]#0 : tensor<?x?x?x256xf16> to tensor<2x?x16x256xf16>
// CHECK-NEXT: return %[[R]]
// BN64-LABEL: func.func @gqa_d256
// BN64: trip = ["cdiv", "Sk", 64]
func.func @gqa_d256(%q: tensor<2x?x16x256xf16>, %k: tensor<2x?x4x256xf16>, %v: tensor<2x?x4x256xf16>) -> tensor<2x?x16x256xf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.0625 : f32, layout = "bshd"} : (tensor<2x?x16x256xf16>, tensor<2x?x4x256xf16>, tensor<2x?x4x256xf16>) -> tensor<2x?x16x256xf16>
  return %o : tensor<2x?x16x256xf16>
}
