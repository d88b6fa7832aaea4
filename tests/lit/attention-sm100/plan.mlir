// RUN: warploom-opt %s --wl-tile=target=sm_100a | FileCheck %s --check-prefix=TILE
// RUN: warploom-opt %s --wl-tile=target=sm_100a --wl-pipeline --wl-specialize --wl-plan-tmem --wl-plan-smem | FileCheck %s
// RUN: not warploom-opt %s --wl-tile="target=sm_100a schedule=persistent" 2>&1 | FileCheck %s --check-prefix=SCHED
// RUN: warploom-opt %s --wl-tile=target=sm_100a | FileCheck %s --check-prefix=DEFAULTS
// RUN: warploom-opt %s --wl-tile="target=sm_100a rescale-threshold=0 exp2-poly=0.5" | FileCheck %s --check-prefix=OPTS
// RUN: not warploom-opt %s --wl-tile="target=sm_100a exp2-poly=0.3" 2>&1 | FileCheck %s --check-prefix=POLY
// RUN: not warploom-opt %s --wl-tile="rescale-threshold=4" 2>&1 | FileCheck %s --check-prefix=SM90

// The sm_100a attention (FA4-style, docs/attention-sm100.md), planned so far: two Q tiles of 128 rows per CTA, each
// with S, P and O in Tensor Memory; head dim 128, 128 keys a block.

// TILE: "wl.buffer"() {aliases = ["s0"], dims = ["M", "N"], elem = "bf16", name = "p0", shape = [128, 128], space = "tmem", stages = 1 : i64}
// TILE: "wl.load_tile"() {buffer = "q0", dims = ["M", "D"], operand = "q", tile = [128, 128]}
// TILE-NEXT: "wl.load_tile"() {buffer = "q1", dims = ["M", "D"], operand = "q", tile = [128, 128]}
// S_i = Q_i K^T into TMEM; O_i += P_i V with P_i read from TMEM.
// TILE: "wl.mma"() {a = "q0", {{.*}}acc = "s0", acc_source = "tmem", accumulate = false, {{.*}}k_dim = "D", shape = [128, 128, 128]}
// TILE: "wl.mma"() {a = "p0", a_major = "K", a_source = "tmem", acc = "o0", acc_source = "tmem", b = "v", b_major = "MN", b_source = "smem", k_dim = "N", shape = [128, 128, 128]}
// TILE: q_tiles = 2 : i64{{.*}}target = "sm_100a", tile = [256, 128, 128]

// TMEM: S0 [0, 128), S1 [128, 256), P_i (16-bit, 64 columns) on S_i's columns, O0 [256, 384), O1 [384, 512).
// CHECK: "wl.buffer"() {columns = 128 : i64, {{.*}}name = "s0", offset = 0 : i64,
// CHECK: "wl.buffer"() {columns = 128 : i64, {{.*}}name = "s1", offset = 128 : i64,
// CHECK: "wl.buffer"() {aliases = ["s0"], columns = 64 : i64, {{.*}}name = "p0", offset = 0 : i64,
// CHECK: "wl.buffer"() {aliases = ["s1"], columns = 64 : i64, {{.*}}name = "p1", offset = 128 : i64,
// CHECK: "wl.buffer"() {columns = 128 : i64, {{.*}}name = "o0", offset = 256 : i64,
// CHECK: "wl.buffer"() {columns = 128 : i64, {{.*}}name = "o1", offset = 384 : i64,
// smem in the seed's order: the Q tiles, K and V stages, O written back over the Q tiles, the correction rows.
// CHECK: name = "q0", offset = 0 : i64, shape = [128, 128], stages = 1 : i64, swizzle = 128 : i64}
// CHECK: name = "q1", offset = 32768 : i64,
// CHECK: bytes = 65536 : i64, {{.*}}name = "k", offset = 65536 : i64, shape = [128, 128], stages = 2 : i64
// CHECK: bytes = 65536 : i64, {{.*}}name = "v", offset = 131072 : i64, shape = [128, 128], stages = 2 : i64
// CHECK: aliases = ["q0"], {{.*}}name = "o0_out", offset = 0 : i64,
// CHECK: aliases = ["q1"], {{.*}}name = "o1_out", offset = 32768 : i64,
// CHECK: bytes = 2048 : i64, elem = "f32", name = "correction", offset = 196608 : i64, shape = [2, 2, 128]
// CHECK: name = "tmem_addr", offset = 198656 : i64
// Roles: a softmax warpgroup per Q tile (then its rows' LSE), the correction warpgroup (rescale, then normalize and
// store O through Q's smem on the epilogue named barrier), one MMA thread, one load thread; budgets 168 / 168 / 88 / 88.
// CHECK: "wl.compute"() {kind = "online_softmax", reads = ["s0", "row_max0", "row_sum0"], writes = ["p0", "row_max0", "row_sum0", "corr0"]}
// CHECK: "wl.compute"() {kind = "lse", reads = ["row_max0", "row_sum0"], writes = ["lse0"]}
// CHECK-NEXT: "wl.store_tile"() {acc = "lse0", operand = "lse", tile = [128]}
// CHECK: }) {issue = "warpgroup", name = "softmax0", regs = 168 : i64, warpgroups = [0]}
// CHECK: }) {issue = "warpgroup", name = "softmax1", regs = 168 : i64, warpgroups = [1]}
// CHECK: "wl.compute"() {kind = "rescale", reads = ["corr0", "o0"], writes = ["o0"]}
// CHECK: "wl.compute"() {kind = "normalize", reads = ["o0", "row_sum0"], writes = ["o0"]}
// CHECK-NEXT: "wl.store_tile"() {acc = "o0", barrier = "epilogue", buffer = "o0_out", operand = "out", tile = [128, 128]}
// CHECK: }) {issue = "warpgroup", name = "correction", regs = 88 : i64, warpgroups = [2]}
// CHECK: }) {issue = "one_thread", name = "mma", regs = 88 : i64, warps = [12, 1]}
// CHECK: }) {issue = "one_thread", name = "load", regs = 88 : i64, warps = [13, 1]}
// CHECK: smem_bytes = {{[0-9]+}} : i64, {{.*}}threads = 512 : i64, {{.*}}tmem_columns = 512 : i64

// The softmax's configuration: the conditional rescaling's threshold (8 by default) and the polynomial's share of
// exp2 (1/4 by default), kernel attributes the lowering reads.
// DEFAULTS: exp2_poly = 2.500000e-01 : f32{{.*}}rescale_threshold = 8.000000e+00 : f32
// OPTS: exp2_poly = 5.000000e-01 : f32{{.*}}rescale_threshold = 0.000000e+00 : f32
// POLY: error: wl-tile: exp2-poly = 0.3: the share of exp2 by the FMA polynomial is the last k of each 8 columns a thread holds, a multiple of 1/8 in 0 .. 1; 0.25 by default (sm_100a, head dim 128)
// SM90: error: wl-tile: rescale-threshold: options of the sm_100a (FA4-style) attention's softmax; use them with target=sm_100a on an attention

// SCHED: error: wl-tile: schedule = 'persistent': the sm_100a attention is built with the grid schedule only so far; use schedule=grid

func.func @attn(%q: tensor<?x?x?x128xbf16>, %k: tensor<?x?x?x128xbf16>, %v: tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.08838834764831845 : f32, layout = "bhsd"} : (tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>, tensor<?x?x?x128xbf16>) -> tensor<?x?x?x128xbf16>
  return %o : tensor<?x?x?x128xbf16>
}
