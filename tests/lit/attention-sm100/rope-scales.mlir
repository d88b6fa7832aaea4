// RUN: warploom-opt %s --wl-tile="target=sm_100a rope-depth=64 scale-dtype=f32" --wl-pipeline --wl-specialize --wl-plan-tmem --wl-plan-smem | FileCheck %s
// RUN: not warploom-opt %s --wl-tile="target=sm_100a rope-depth=64 scale-dtype=f32" --wl-pipeline --wl-specialize --wl-plan-tmem --wl-plan-smem --wl-plan-barriers --wl-lower-sm100 2>&1 | FileCheck %s --check-prefix=LOWER
// RUN: not warploom-opt %s --wl-tile="target=sm_100a rope-depth=40" 2>&1 | FileCheck %s --check-prefix=DEPTH

// The seed's rope columns (MLA) and per-token scales (FP8) have room in the plan's vocabulary: with rope-depth and
// scale-dtype the planners reserve their smem in the seed's order (q_rope after the Q tiles, k_rope after the K/V
// stages, q_scale and k_scale after the correction rows); nothing loads them yet, and the lowering says so.
// f16, head dim 64, causal; rope depth 64, f32 scales.

// CHECK: name = "q0", offset = 0 : i64,
// CHECK: name = "q1", offset = 16384 : i64,
// CHECK: bytes = 32768 : i64, dims = ["M", "R"], elem = "f16", name = "q_rope", offset = 32768 : i64, shape = [256, 64]
// CHECK: name = "k", offset = 65536 : i64, shape = [128, 64], stages = 2 : i64
// CHECK: name = "v", offset = 98304 : i64, shape = [128, 64], stages = 2 : i64
// CHECK: bytes = 32768 : i64, dims = ["N", "R"], elem = "f16", name = "k_rope", offset = 131072 : i64, shape = [128, 64], stages = 2 : i64
// CHECK: bytes = 2048 : i64, elem = "f32", name = "correction", offset = 163840 : i64
// CHECK: bytes = 1024 : i64, elem = "f32", name = "q_scale", offset = 165888 : i64, shape = [256]
// CHECK: bytes = 1024 : i64, elem = "f32", name = "k_scale", offset = 166912 : i64, shape = [2, 128]
// CHECK: name = "tmem_addr", offset = 167936 : i64
// CHECK: rope_depth = 64 : i64, {{.*}}scale_dtype = "f32"

// LOWER: error: wl-lower-sm100: sm_100a lowering of kernel '{{.*}}': rope_depth = 64, scale_dtype = 'f32': the seed's rope columns (MLA) and per-token scales (FP8) are planned (their smem is reserved) but not lowered yet; plan without rope-depth and scale-dtype

// DEPTH: error: wl-tile: rope-depth = 40, scale-dtype = '': the seed's rope columns (a multiple of 16, 0 for none) and per-token scale type ('f32', or '' for none)

func.func @attn(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32, layout = "bhsd"} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
  return %o : tensor<?x?x?x64xf16>
}
