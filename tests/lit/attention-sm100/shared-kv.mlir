// RUN: warploom-opt %s --wl-tile="target=sm_100a shared-kv=true" --wl-pipeline=stages=3 --wl-specialize --wl-plan-tmem --wl-plan-smem --wl-plan-barriers | FileCheck %s --check-prefix=PLAN
// RUN: warploom-opt %s --wl-tile="target=sm_100a shared-kv=true" --wl-pipeline=stages=3 --wl-specialize --wl-plan-tmem --wl-plan-smem --wl-plan-barriers --wl-lower-sm100 | FileCheck %s
// RUN: not warploom-opt %s --wl-tile="shared-kv=true" 2>&1 | FileCheck %s --check-prefix=REFUSED

// The sm_100a attention with use_shared_kv (the seed's option): K and V tiles pass through one ring of 3 slots,
// K of key block j in slot 2j % 3 and V in (2j + 1) % 3, so the load thread can fill K of block j + 1 while V of
// block j is still read. f16, head dim 64, causal.

// One region of 3 slots right after the Q tiles (the seed's kv_byte_offset), one ring taking 2 slots a block,
// one full and one empty barrier per slot.
// PLAN: "wl.buffer"() {align = 1024 : i64, bytes = 49152 : i64, dims = ["N", "D"], elem = "f16", name = "kv", offset = 32768 : i64, shape = [128, 64], stages = 3 : i64
// PLAN: "wl.ring"() {consumers = ["mma"], empty = "kv_empty", full = "kv_full", name = "kv", producer = "load", regions = ["kv"], stages = 3 : i64, uses = 2 : i64}
// PLAN: "wl.mbarrier"() {arrivals = 1 : i64, count = 3 : i64, name = "kv_full", offset = 83992 : i64, ring = "kv", tx_bytes = 16384 : i64}
// PLAN-NEXT: "wl.mbarrier"() {arrivals = 1 : i64, count = 3 : i64, name = "kv_empty", offset = 84016 : i64, ring = "kv", tx_bytes = 0 : i64}
// The MMA thread: K's slot (use 0) before S, freed by a commit after S1; V's slot (use 1) before P V, freed after P1 V.
// PLAN: "wl.wait"() {barrier = "kv_full", parity = "consumer"}
// PLAN: "wl.mma"() {a = "q1", {{.*}}b = "kv", b_major = "K"
// PLAN: "wl.arrive"() {barrier = "kv_empty", issue = "mma_commit", lag = 0 : i64}
// PLAN-NEXT: "wl.wait"() {barrier = "kv_full", parity = "consumer", use = 1 : i64}
// PLAN: "wl.mma"() {a = "p1", {{.*}}b = "kv", b_major = "MN", b_source = "smem", b_use = 1 : i64
// PLAN: "wl.arrive"() {barrier = "kv_empty", issue = "mma_commit", lag = 0 : i64, use = 1 : i64}
// The load thread: per block, a free slot for K, then one for V, each announced on its slot's full barrier.
// PLAN: "wl.wait"() {barrier = "kv_empty", parity = "producer"}
// PLAN-NEXT: "wl.arrive_expect_tx"() {barrier = "kv_full", bytes = 16384 : i64}
// PLAN-NEXT: "wl.async_load"() {barrier = "kv_full", buffer = "kv", operand = "k", tile = [128, 64]}
// PLAN-NEXT: "wl.wait"() {barrier = "kv_empty", parity = "producer", use = 1 : i64}
// PLAN-NEXT: "wl.arrive_expect_tx"() {barrier = "kv_full", bytes = 16384 : i64, use = 1 : i64}
// PLAN-NEXT: "wl.async_load"() {barrier = "kv_full", buffer = "kv", operand = "v", tile = [128, 64], use = 1 : i64}

// Lowered, the load thread (after Q0 and Q1, from tensor map %arg0), block j: K at ring position 2j + 0, V at 2j + 1; slot = position % 3, phase =
// (position / 3) & 1; the empty wait on the phase before; the copy into kv's slot (32768 + slot * 16384).
// CHECK: llvm.func @wl_fa4_f16_d64_256x128_s3_causal_skv(
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0,
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0,
// CHECK-NEXT: scf.for %[[J:.*]] = %c0_i32 to
// CHECK: %[[T0:.*]] = arith.muli %[[J]], %c2_i32
// CHECK-NEXT: %[[P0:.*]] = arith.addi %[[T0]], %c0_i32
// CHECK-NEXT: %[[S0:.*]] = arith.remui %[[P0]], %c3_i32
// CHECK-NEXT: %[[R0:.*]] = arith.divui %[[P0]], %c3_i32
// CHECK-NEXT: %[[PH0:.*]] = arith.andi %[[R0]], %c1_i32
// CHECK-NEXT: arith.xori %[[PH0]], %c1_i32
// CHECK-NEXT: %[[E0:.*]] = arith.muli %[[S0]], %c8_i32
// CHECK-NEXT: arith.addi %c84016_i32, %[[E0]]
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16384_i32
// CHECK: %[[K0:.*]] = arith.muli %[[S0]], %c16384_i32
// CHECK-NEXT: arith.addi %c32768_i32, %[[K0]]
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1,
// CHECK: %[[T1:.*]] = arith.muli %[[J]], %c2_i32
// CHECK-NEXT: %[[P1:.*]] = arith.addi %[[T1]], %c1_i32
// CHECK-NEXT: %[[S1:.*]] = arith.remui %[[P1]], %c3_i32
// CHECK: %[[V0:.*]] = arith.muli %[[S1]], %c16384_i32
// CHECK-NEXT: arith.addi %c32768_i32, %[[V0]]
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2,

// REFUSED: error: wl-tile: shared-kv = true shares one smem ring between an attention's K and V tiles; only the sm_100a attention takes it

func.func @attn(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32, layout = "bhsd"} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
  return %o : tensor<?x?x?x64xf16>
}
