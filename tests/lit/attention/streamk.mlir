// RUN: warploom-opt %s --wl-tile=schedule=streamk --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s
// RUN: sed 's/causal = false/causal = true/' %s | not warploom-opt --wl-tile=schedule=streamk 2>&1 | FileCheck %s --check-prefix=CAUSAL

// The stream-K attention (non-causal): one CTA per SM; CTA c first takes its D / P whole tiles (D: all waves of
// tiles but the last two, dealt as the persistent walk deals them), then its run [lo, hi) of the (T - D) kt
// (tile, key block) iterations after them, piece by piece (rules.attention_streamk_run / attention_streamk_piece).
// CHECK: "wl.launch"{{.*}}grid = [["attention_streamk", "Sq", 128, "Sk", 128, "Hq", "B", "SMS"], ["const", 1], ["const", 1]], kernel = "wl_attn_bf16_d64_128x128_s2_ov_streamk_q2"
// The parameters end with the batch, the tile order and the fix-up's workspace and counters.
// CHECK: llvm.func @wl_attn_bf16_d64_128x128_s2_ov_streamk_q2({{.*}}%arg10: i32, %[[ORDER:arg11]]: i32, %[[WS:arg12]]: !llvm.ptr<1>, %[[CNT:arg13]]: !llvm.ptr<1>)
// The producer: T tiles, kt key blocks, D, the run's bounds and its pieces.
// CHECK: nvvm.setmaxregister  decrease
// CHECK: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK-NEXT: %[[P:.*]] = nvvm.read.ptx.sreg.nctaid.x : i32
// CHECK-NEXT: arith.addi %arg5, %c127_i32 : i32
// CHECK-NEXT: %[[BLOCKS:.*]] = arith.divui %{{.*}}, %c128_i32 : i32
// CHECK-NEXT: %[[PAIRS:.*]] = arith.muli %arg7, %arg10 : i32
// CHECK-NEXT: %[[T:.*]] = arith.muli %[[BLOCKS]], %[[PAIRS]] : i32
// CHECK-NEXT: arith.addi %arg6, %c127_i32 : i32
// CHECK-NEXT: %[[KT:.*]] = arith.divui %{{.*}}, %c128_i32 : i32
// CHECK-NEXT: %[[WAVES:.*]] = arith.divui %[[T]], %[[P]] : i32
// CHECK-NEXT: %[[W1:.*]] = arith.maxsi %[[WAVES]], %c1_i32 : i32
// CHECK-NEXT: %[[W0:.*]] = arith.subi %[[W1]], %c1_i32 : i32
// CHECK-NEXT: %[[D:.*]] = arith.muli %[[W0]], %[[P]] : i32
// CHECK-NEXT: %[[SKT:.*]] = arith.subi %[[T]], %[[D]] : i32
// CHECK-NEXT: %[[I:.*]] = arith.muli %[[SKT]], %[[KT]] : i32
// CHECK-NEXT: %[[LO0:.*]] = arith.muli %[[CTA]], %[[I]] : i32
// CHECK-NEXT: %[[LO:.*]] = arith.divui %[[LO0]], %[[P]] : i32
// CHECK-NEXT: %[[C1:.*]] = arith.addi %[[CTA]], %c1_i32 : i32
// CHECK-NEXT: %[[HI0:.*]] = arith.muli %[[C1]], %[[I]] : i32
// CHECK-NEXT: %[[HI:.*]] = arith.divui %[[HI0]], %[[P]] : i32
// CHECK: %[[PIECES:.*]] = arith.select %{{.*}}, %{{.*}}, %c0_i32 : i32
// CHECK-NEXT: %[[ROUNDS:.*]] = arith.divui %[[D]], %[[P]] : i32
// CHECK-NEXT: %[[UNITS:.*]] = arith.addi %[[ROUNDS]], %[[PIECES]] : i32
// One loop over the units, carrying the ring iteration, Q's tile count and the next piece's first iteration x.
// CHECK-NEXT: scf.for %[[U:.*]] = %c0_i32 to %[[UNITS]] step %c1_i32 iter_args(%[[IT:.*]] = %c0_i32, %{{.*}} = %c0_i32, %[[X:.*]] = %[[LO]])
// CHECK-NEXT: %[[DP:.*]] = arith.cmpi ult, %[[U]], %[[ROUNDS]] : i32
// The piece at x: stream-K tile x / kt, key blocks [x - its start, min(hi - its start, kt)).
// CHECK-NEXT: %[[SK:.*]] = arith.divui %[[X]], %[[KT]] : i32
// CHECK-NEXT: %[[T0:.*]] = arith.muli %[[SK]], %[[KT]] : i32
// CHECK-NEXT: %[[FIRST:.*]] = arith.subi %[[X]], %[[T0]] : i32
// CHECK-NEXT: %[[END0:.*]] = arith.subi %[[HI]], %[[T0]] : i32
// CHECK-NEXT: %[[END:.*]] = arith.minui %[[END0]], %[[KT]] : i32
// CHECK: %[[TILE:.*]] = arith.select %[[DP]], %{{.*}}, %{{.*}} : i32
// CHECK: %[[KB0:.*]] = arith.select %[[DP]], %c0_i32, %[[FIRST]] : i32
// CHECK-NEXT: %[[LEN:.*]] = arith.subi %[[END]], %[[FIRST]] : i32
// CHECK-NEXT: %[[TRIPS:.*]] = arith.select %[[DP]], %[[KT]], %[[LEN]] : i32
// The next piece starts where this one ends (a whole tile leaves x alone).
// CHECK: %[[NEXT:.*]] = arith.addi %{{.*}}, %[[END]] : i32
// CHECK-NEXT: %[[NX:.*]] = arith.select %[[DP]], %[[X]], %[[NEXT]] : i32
// K of key block kb0 + j: its rows start at (kb0 + j) * 128.
// CHECK: scf.for %[[J:.*]] = %c0_i32 to %[[TRIPS]] step %c1_i32
// CHECK: %[[KB:.*]] = arith.addi %[[KB0]], %[[J]] : i32
// CHECK-NEXT: %[[ROW:.*]] = arith.muli %[[KB]], %c128_i32 : i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%c0_i32, %[[ROW]],
// CHECK: scf.yield %{{.*}}, %{{.*}}, %[[NX]] : i32, i32, i32

// A consumer warpgroup after the key loop of a piece that is not a whole tile: its O fragment (32 f32, 8 vectors)
// and its rows' (max, max, sum, sum) as the 9th vector into its slot (CTA * 2 + slot, then the warpgroup: 4608 =
// 128 threads x 36 f32), vector j of thread t at (j * 128 + t) * 4 f32; then the hand-off: named barrier, fence,
// count, and the last piece resets the counter and fences again; bar.red.or tells the warpgroup.
// CHECK: nvvm.setmaxregister  increase 240
// CHECK: %[[SLOT:.*]] = arith.select %{{.*}}, %c0_i32, %c1_i32 : i32
// CHECK: arith.muli %{{.*}}, %c4608_i32 : i32
// CHECK: %[[MINE:.*]] = llvm.getelementptr %[[WS]][%{{.*}}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32
// CHECK: llvm.getelementptr %[[MINE]][3584] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f32
// CHECK: %[[STATS:.*]] = llvm.insertelement %{{.*}}#4, %{{.*}}[%c3_i32 : i32] : vector<4xf32>
// CHECK-NEXT: %[[AT:.*]] = llvm.getelementptr %[[MINE]][4096] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f32
// CHECK-NEXT: llvm.store %[[STATS]], %[[AT]] {alignment = 16 : i64} : vector<4xf32>, !llvm.ptr<1>
// CHECK: nvvm.barrier id = %[[BAR:.*]] number_of_threads = %c128_i32
// CHECK: llvm.fence syncscope("device") acq_rel
// CHECK-NEXT: %[[CTR:.*]] = llvm.getelementptr %[[CNT]][%{{.*}}] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
// CHECK-NEXT: %[[OLD:.*]] = llvm.atomicrmw add %[[CTR]], %c1_i32 syncscope("device") monotonic
// CHECK: llvm.store %c0_i32, %[[CTR]] {alignment = 4 : i64} : i32, !llvm.ptr<1>
// CHECK-NEXT: llvm.fence syncscope("device") acq_rel
// CHECK: %[[LAST:.*]] = llvm.call_intrinsic "llvm.nvvm.barrier.cta.red.or.aligned.count"(%[[BAR]], %c128_i32, %{{.*}})
// The last merges the pieces in key order: first the rows' maxima M, then O and the sums weighted by
// 2^((m_i - M) scale_log2) (scale_log2 is %arg9).
// CHECK-NEXT: scf.if %[[LAST]]
// CHECK: %[[MAX:.*]]:2 = scf.for
// CHECK: arith.maxnumf
// CHECK: arith.maxnumf
// CHECK: scf.for
// CHECK: %[[DIFF:.*]] = arith.subf %{{.*}}, %[[MAX]]#0 : f32
// CHECK-NEXT: %[[SCALED:.*]] = arith.mulf %[[DIFF]], %arg9 : f32
// CHECK-NEXT: %[[W:.*]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[SCALED]])
// CHECK: llvm.intr.fma(%{{.*}}, %[[W]], %{{.*}}) : (f32, f32, f32) -> f32
// Only the piece that merged stores O and the LSE: the others' O box starts at row Sq (%arg5), past the end, so TMA
// drops all of it (no branch around the store: ptxas would then move the key loop's ring arithmetic off the
// uniform datapath), and their LSE stores are predicated off.
// CHECK: %[[ROW0:.*]] = arith.select %[[STORE:.*]]#5, %{{.*}}, %arg5 : i32
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[ROW0]], %{{.*}} : i32
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg3, %{{.*}}, box[%c0_i32, %[[ROW]], %{{.*}}, %{{.*}}]
// CHECK: %[[INSIDE:.*]] = arith.cmpi slt, %{{.*}}, %arg5 : i32
// CHECK-NEXT: %[[LANE0:.*]] = arith.andi %{{.*}}, %[[INSIDE]] : i1
// CHECK-NEXT: arith.andi %[[LANE0]], %[[STORE]]#5 : i1
// CAUSAL: error: wl-tile: schedule = streamk splits the last waves' tiles evenly over their key blocks, which needs tiles of one length: a causal attention's differ; use schedule=persistent (it deals causal tiles heaviest first)
func.func @attn(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = false, scale = 0.125 : f32, layout = "bshd"} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}
