// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s
// RUN: warploom-opt %s --wl-tile | FileCheck %s --check-prefix=TILE
// RUN: not warploom-opt %s --wl-tile=schedule=persistent 2>&1 | FileCheck %s --check-prefix=ERR

// Packed variable-length sequences (varlen = true: warploom.ops.attention_varlen). The kernel keeps the grid
// schedule (a CTA per query block of the longest sequence, head, sequence) and takes three more parameters after
// scale_log2: cu_seqlens_q, cu_seqlens_k (global i32 pointers) and Tq. Each CTA reads its sequence's starts at
// ctaid.z and ctaid.z + 1; the lengths are their differences. Every TMA box goes through the ragged maps (D, R, H, T):
// valid = clamp(length - row, 0, rows), R = rows - valid, T = start + row + valid (Q: 128 rows, O: 64 per warpgroup).
func.func @varlen(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32, layout = "bshd", varlen = true} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}

// TILE: schedule = "grid"
// TILE-SAME: varlen = true

// CHECK: "wl.launch"(%arg0, %arg1, %arg2) {block = [384, 1, 1], cluster = [1, 1, 1], grid = {{\[\["cdiv", "Sq", 128\], \["cdiv", "Hq", 1\], \["cdiv", "B", 1\]\]}}, kernel = "wl_attn_bf16_d64_128x128_s2_causal_ov_varlen"
// CHECK: llvm.func @wl_attn_bf16_d64_128x128_s2_causal_ov_varlen({{.*}}%arg9: f32, %[[CUQ:arg10]]: !llvm.ptr<1>, %[[CUK:arg11]]: !llvm.ptr<1>, %arg12: i32)
// CHECK: %[[SEQ:.*]] = nvvm.read.ptx.sreg.ctaid.z : i32
// CHECK: %[[NEXT:.*]] = arith.addi %[[SEQ]], %c1_i32 : i32
// CHECK: %[[P0:.*]] = llvm.getelementptr %[[CUQ]][%[[SEQ]]]
// CHECK: %[[Q0:.*]] = llvm.load %[[P0]]
// CHECK: %[[P1:.*]] = llvm.getelementptr %[[CUK]][%[[SEQ]]]
// CHECK: %[[K0:.*]] = llvm.load %[[P1]]
// CHECK: %[[P2:.*]] = llvm.getelementptr %[[CUQ]][%[[NEXT]]]
// CHECK: %[[Q1:.*]] = llvm.load %[[P2]]
// CHECK: %[[SQ:.*]] = arith.subi %[[Q1]], %[[Q0]] : i32
// CHECK: %[[P3:.*]] = llvm.getelementptr %[[CUK]][%[[NEXT]]]
// CHECK: %[[K1:.*]] = llvm.load %[[P3]]
// CHECK: arith.subi %[[K1]], %[[K0]] : i32
// the Q box: 128 rows from row0
// CHECK: %[[LEFT:.*]] = arith.subi %[[SQ]], %[[ROW0:.*]] : i32
// CHECK: %[[POS:.*]] = arith.maxsi %[[LEFT]], %c0_i32 : i32
// CHECK: %[[VALID:.*]] = arith.minsi %[[POS]], %c128_i32 : i32
// CHECK: %[[R:.*]] = arith.subi %c128_i32, %[[VALID]] : i32
// CHECK: %[[AT:.*]] = arith.addi %[[Q0]], %[[ROW0]] : i32
// CHECK: %[[T:.*]] = arith.addi %[[AT]], %[[VALID]] : i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%c0_i32, %[[R]], %{{.*}}, %[[T]]]
// O: each warpgroup's 64 rows, dropped past the sequence's end
// CHECK: arith.minsi %{{.*}}, %c64_i32 : i32
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg3, %{{.*}}, box[%c0_i32, %{{.*}}, %{{.*}}, %{{.*}}]

// ERR: wl-tile: a packed variable-length attention (varlen) with schedule = persistent: it is built with schedule=grid only
