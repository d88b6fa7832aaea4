// RUN: warploom-opt %s --split-input-file --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem | FileCheck %s
// RUN: not warploom-opt %s --split-input-file --wl-tile --wl-pipeline=stages=3 --wl-specialize --wl-plan-smem 2>&1 | FileCheck %s --check-prefix=OVER
// RUN: warploom-opt %s --split-input-file --wl-tile=schedule=persistent --wl-pipeline --wl-specialize --wl-plan-smem | FileCheck %s --check-prefix=PERSIST

// Q (one stage), then the K and V rings, each tile 128B-swizzled and 1024-aligned, then O's staging tile for the
// TMA store on Q's bytes (grid schedule: Q is dead after the key loop), then the 9 mbarriers (q_full, and
// full/empty per stage of K and V); the launch asks for 1024 B more (base alignment).
// Head dim 128, 176-key blocks (the standard tile): Q 32 KiB, K and V 2 x 44 KiB each.
// CHECK-LABEL: func.func @d128
// CHECK: "wl.buffer"() {align = 1024 : i64, bytes = 32768 : i64, dims = ["M", "D"], elem = "bf16", name = "q", offset = 0 : i64, shape = [128, 128], stages = 1 : i64, swizzle = 128 : i64}
// CHECK-NEXT: "wl.buffer"() {align = 1024 : i64, bytes = 90112 : i64, dims = ["N", "D"], elem = "bf16", name = "k", offset = 32768 : i64, shape = [176, 128], stages = 2 : i64, swizzle = 128 : i64}
// CHECK-NEXT: "wl.buffer"() {align = 1024 : i64, bytes = 90112 : i64, dims = ["N", "D"], elem = "bf16", name = "v", offset = 122880 : i64, shape = [176, 128], stages = 2 : i64, swizzle = 128 : i64}
// CHECK-NEXT: "wl.buffer"() {aliases = ["q"], align = 1024 : i64, bytes = 32768 : i64, dims = ["M", "D"], elem = "bf16", name = "o", offset = 0 : i64, shape = [128, 128], stages = 1 : i64, swizzle = 128 : i64}
// CHECK-NEXT: "wl.buffer"() {align = 8 : i64, bytes = 72 : i64, elem = "i64", name = "mbarriers", offset = 212992 : i64, shape = [9], stages = 1 : i64, swizzle = 0 : i64}
// Persistent: block_n 128 (K and V 2 x 32 KiB each) and two Q stages (the next tile's Q loads during this one);
// O gets its own 32 KiB after V (the next tile's Q loads while O is stored); 12 mbarriers (q_full and q_empty per Q
// stage): 230496 B.
// PERSIST-LABEL: func.func @d128
// PERSIST: name = "q", offset = 0 : i64, shape = [128, 128], stages = 2
// PERSIST: name = "v", offset = 131072 : i64, shape = [128, 128], stages = 2
// PERSIST-NEXT: "wl.buffer"() {align = 1024 : i64, bytes = 32768 : i64, dims = ["M", "D"], elem = "bf16", name = "o", offset = 196608 : i64, shape = [128, 128], stages = 1 : i64, swizzle = 128 : i64}
// PERSIST-NEXT: name = "mbarriers", offset = 229376 : i64, shape = [12]
// PERSIST: smem_bytes = 230496 : i64
// CHECK: smem_bytes = 214088 : i64
func.func @d128(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.088388 : f32, layout = "bshd"} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}

// -----

// Head dim 256, 80-key blocks: Q 64 KiB, K and V 2 x 40 KiB each (230472 B of the 232448 B limit). Three
// stages would not fit; the error counts what one more stage costs (K and V, not Q).
// CHECK-LABEL: func.func @d256
// CHECK: name = "q", offset = 0 : i64, shape = [128, 256]
// CHECK: name = "k", offset = 65536 : i64, shape = [80, 256], stages = 2
// CHECK: name = "v", offset = 147456 : i64, shape = [80, 256], stages = 2
// CHECK: aliases = ["q"], {{.*}} name = "o", offset = 0 : i64, shape = [128, 256]
// CHECK: name = "mbarriers", offset = 229376 : i64, shape = [9]
// Persistent at head dim 256: O's own 64 KiB would not fit, so it shares Q's bytes here too (and the consumers
// free Q only after O's store: plan-barriers).
// PERSIST-LABEL: func.func @d256
// PERSIST: aliases = ["q"], {{.*}} name = "o", offset = 0 : i64, shape = [128, 256]
// PERSIST: name = "mbarriers", offset = 229376 : i64, shape = [10]
// CHECK: smem_bytes = 230472 : i64
// OVER: error: smem plan needs 312424 B (q 65536 B, k 122880 B, v 122880 B, o 65536 B (on q's bytes), mbarriers 104 B, + 1024 B alignment slack) for 3 stages; the limit is 232448 B: use 2 stages (wl-pipeline{stages=2}) or a smaller block-n
func.func @d256(%q: tensor<?x?x?x256xf16>, %k: tensor<?x?x?x256xf16>, %v: tensor<?x?x?x256xf16>) -> tensor<?x?x?x256xf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.0625 : f32, layout = "bshd"} : (tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>, tensor<?x?x?x256xf16>) -> tensor<?x?x?x256xf16>
  return %o : tensor<?x?x?x256xf16>
}
