// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s
// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize=overlap=false --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s --check-prefix=SERIAL
// RUN: warploom-opt %s --wl-tile=schedule=persistent --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s --check-prefix=PERSIST

// The sm_90a attention kernel (head dim 64, causal, the standard 128 x 128 tile, 2 stages, the overlapped
// schedule) as NVVM. Checked: the launch; the mbarriers in plan order (q_full 1, k_full 1 1, k_empty 2 2, v_full
// 1 1, v_empty 2 2 arrivals); the producer's 4-D TMA boxes (64, row, head, batch); the consumers' ping-pong on
// named barriers of 256 threads; S = Q K^T as smem x smem wgmmas (A row = K-major, B col = K-major; the first
// k16 overwrites S); O += P V as register-A wgmmas (m64n64k16, trans-b 1: V MN-major) issued in the same turn;
// wait_group 1 before the softmax (S done, P V still in flight), its quad reductions and ex2, then wait_group 0;
// O stored through smem by TMA.
// CHECK: "wl.launch"(%arg0, %arg1, %arg2) {block = [384, 1, 1], cluster = [1, 1, 1], grid = {{\[\["cdiv", "Sq", 128\], \["cdiv", "Hq", 1\], \["cdiv", "B", 1\]\]}}, kernel = "wl_attn_bf16_d64_128x128_s2_causal_ov", smem_bytes = 83016 : i64}
// CHECK: llvm.func @wl_attn_bf16_d64_128x128_s2_causal_ov(
// CHECK-SAME: %arg3: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %arg4: !llvm.ptr<1>, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: f32)
// CHECK: %[[B0:.*]] = llvm.getelementptr %{{.*}}[%c81920_i32]
// CHECK-NEXT: nvvm.mbarrier.init %[[B0]], %c1_i32
// CHECK-NEXT: %[[B1:.*]] = llvm.getelementptr %{{.*}}[%c81928_i32]
// CHECK-NEXT: nvvm.mbarrier.init %[[B1]], %c1_i32
// CHECK-NEXT: %[[B2:.*]] = llvm.getelementptr %{{.*}}[%c81936_i32]
// CHECK-NEXT: nvvm.mbarrier.init %[[B2]], %c1_i32
// CHECK-NEXT: %[[B3:.*]] = llvm.getelementptr %{{.*}}[%c81944_i32]
// CHECK-NEXT: nvvm.mbarrier.init %[[B3]], %c2_i32
// CHECK-NEXT: %[[B4:.*]] = llvm.getelementptr %{{.*}}[%c81952_i32]
// CHECK-NEXT: nvvm.mbarrier.init %[[B4]], %c2_i32
// CHECK-NEXT: %[[B5:.*]] = llvm.getelementptr %{{.*}}[%c81960_i32]
// CHECK-NEXT: nvvm.mbarrier.init %[[B5]], %c1_i32
// CHECK-NEXT: %[[B6:.*]] = llvm.getelementptr %{{.*}}[%c81968_i32]
// CHECK-NEXT: nvvm.mbarrier.init %[[B6]], %c1_i32
// CHECK-NEXT: %[[B7:.*]] = llvm.getelementptr %{{.*}}[%c81976_i32]
// CHECK-NEXT: nvvm.mbarrier.init %[[B7]], %c2_i32
// CHECK-NEXT: %[[B8:.*]] = llvm.getelementptr %{{.*}}[%c81984_i32]
// CHECK-NEXT: nvvm.mbarrier.init %[[B8]], %c2_i32
// CHECK-NEXT: nvvm.fence.mbarrier.init
// Producer: Q once (16384 B), then per key block K and V (16384 B each) behind their empty barriers.
// CHECK: nvvm.setmaxregister  decrease 24
// CHECK: nvvm.mbarrier.arrive.expect_tx %{{.*}}, %c16384_i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg0, %{{.*}}, box[%c0_i32, %{{.*}}, %{{.*}}, %{{.*}}]
// CHECK: scf.for
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg1, %{{.*}}, box[%c0_i32, %[[ROW:.*]], %[[KVH:.*]], %[[B:.*]]]
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %arg2, %{{.*}}, box[%c0_i32, %[[ROW]], %[[KVH]], %[[B]]]
// Consumers: Q landed; warpgroup 1 hands warpgroup 0 the first turn (named barrier 1).
// CHECK: nvvm.setmaxregister  increase 240
// CHECK: nvvm.mbarrier.try_wait.parity %{{.*}}, %c0_i32
// CHECK: nvvm.barrier.arrive id = %c1_i32 number_of_threads = %c256_i32
// The peeled first key block: the turn, S = Q K_0^T, the hand-over, wait_group 0.
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <zero>, <wrapped>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>, D[<f32>, <one>, <wrapped>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// The loop over key blocks 1 .. n-1: k_full (offset 81928), the turn, S_j, then (V_{j-1} landed) O += P_{j-1} V_{j-1}
// with P in registers, both in this turn; then the hand-over and wait_group 1: S_j done, P V in flight.
// CHECK: scf.for %{{.*}} = %c1_i32 to
// CHECK: arith.addi %c81928_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// CHECK: nvvm.wgmma.mma_async {{.*}} D[<f32>, <zero>, <wrapped>]
// CHECK-COUNT-3: nvvm.wgmma.mma_async {{.*}} D[<f32>, <one>, <wrapped>]
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK: nvvm.wgmma.fence.aligned
// CHECK-COUNT-8: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $69, 0;\0Awgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, $68, p, 1, 1, 1;
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// CHECK: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// The softmax of block j: the two rows' maxima over the quad side by side (shfl.bfly 1 for each row, both maxnumf,
// then shfl.bfly 2 for each), exp2 of one FMA, the warp's vote on whether any row moved its max (redux.sync.or),
// then the anchor load (its address depends on the row sums and on the vote: + 8 when no row moved) that keeps all
// of it before wait_group 0, which ends the P V; only then is O rescaled, inside an scf.if on the vote.
// CHECK: nvvm.shfl.sync  bfly %c-1_i32, %[[M0:[0-9]+]], %c1_i32, %c31_i32
// CHECK-NEXT: nvvm.shfl.sync  bfly %c-1_i32, %[[M1:[0-9]+]], %c1_i32, %c31_i32
// CHECK-NEXT: arith.maxnumf %[[M0]],
// CHECK-NEXT: arith.maxnumf %[[M1]],
// CHECK-NEXT: nvvm.shfl.sync  bfly %c-1_i32, %{{.*}}, %c2_i32, %c31_i32
// CHECK-NEXT: nvvm.shfl.sync  bfly %c-1_i32, %{{.*}}, %c2_i32, %c31_i32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// CHECK: %[[VOTE:[0-9]+]] = nvvm.redux.sync  or %{{.*}}, %c-1_i32
// CHECK-NEXT: %[[MOVED:[0-9]+]] = arith.cmpi ne, %[[VOTE]], %c0_i32
// CHECK: arith.select %[[MOVED]], %c0_i32, %c8_i32
// CHECK: llvm.load volatile
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: scf.if %[[MOVED]] -> (!llvm.struct
// CHECK-NEXT: llvm.extractvalue
// CHECK-NEXT: arith.mulf
// After the loop: the last P V, warpgroup 0 takes the last hand-over, normalize (log2 of the row sum for the LSE).
// CHECK: llvm.inline_asm {{.*}}m64n64k16
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: nvvm.barrier id = %c1_i32 number_of_threads = %c256_i32
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// The epilogue: the warpgroup syncs on its own epilogue barrier (id 3 + w, 128 threads), each thread writes its
// 16 column pairs (8 per row, 2 rows) of O into the staging tile (Q's bytes: offset 0) as 4-byte st.shared,
// fences them for the async proxy, syncs again; the warpgroup's first thread stores its 64 rows with one TMA
// box (head dim 64) through out's tensor map (%arg3) at (0, row0 + 64 w, head, batch), commits, and waits until
// the smem has been read. Then the LSE goes to global memory directly.
// CHECK: %[[EPI:.*]] = arith.addi %c3_i32,
// CHECK-NEXT: nvvm.barrier id = %[[EPI]] number_of_threads = %c128_i32
// CHECK-COUNT-16: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.barrier id = %[[EPI]] number_of_threads = %c128_i32
// CHECK: nvvm.cp.async.bulk.tensor.global.shared.cta %arg3, %{{.*}}, box[%c0_i32, %{{.*}}, %{{.*}}, %{{.*}}]
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>

// The serial schedule: one turn per S only; wait_group 0 before the softmax; P V after it.
// SERIAL: kernel = "wl_attn_bf16_d64_128x128_s2_causal"
// SERIAL: scf.for
// SERIAL: nvvm.barrier id = %{{.*}} number_of_threads = %c256_i32
// SERIAL-COUNT-4: nvvm.wgmma.mma_async {{.*}} <m = 64, n = 128, k = 16>
// SERIAL: nvvm.barrier.arrive id = %{{.*}} number_of_threads = %c256_i32
// SERIAL-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
// SERIAL: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
// SERIAL-COUNT-8: llvm.inline_asm {{.*}}m64n64k16
// SERIAL-NEXT: nvvm.wgmma.commit.group.sync.aligned
// SERIAL-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
func.func @attn(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32, layout = "bshd"} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}

// The causal persistent walk (each role's): CTA c runs entries tiles[c] .. tiles[c + 1] - 1 of the host's table
// (%arg11, after B: rules.causal_tile_table), the loop carrying the tile (order 0's numbering: the query block and
// pair split by a division) and reading the next entry while this tile runs, yielded for the next round.
// PERSIST: llvm.func @wl_attn_bf16_d64_128x128_s2_causal_ov_persistent_q2({{.*}}%arg9: f32, %arg10: i32, %arg11: !llvm.ptr<1>)
// PERSIST: %[[CTA:.*]] = nvvm.read.ptx.sreg.ctaid.x : i32
// PERSIST: %[[P0:.*]] = llvm.getelementptr %arg11[%[[CTA]]]
// PERSIST-NEXT: %[[FIRST:.*]] = llvm.load %[[P0]]
// PERSIST-NEXT: %[[CTA1:.*]] = arith.addi %[[CTA]], %c1_i32
// PERSIST-NEXT: %[[P1:.*]] = llvm.getelementptr %arg11[%[[CTA1]]]
// PERSIST-NEXT: %[[END:.*]] = llvm.load %[[P1]]
// PERSIST-NEXT: %[[MINE:.*]] = arith.subi %[[END]], %[[FIRST]]
// PERSIST-NEXT: %[[P2:.*]] = llvm.getelementptr %arg11[%[[FIRST]]]
// PERSIST-NEXT: %[[TILE0:.*]] = llvm.load %[[P2]]
// PERSIST-NEXT: scf.for %[[R:.*]] = %c0_i32 to %[[MINE]] step %c1_i32 iter_args(%{{.*}} = %c0_i32, %{{.*}} = %c0_i32, %[[TILE:.*]] = %[[TILE0]])
// PERSIST-NEXT: %[[AT:.*]] = arith.addi %[[FIRST]], %[[R]]
// PERSIST-NEXT: %[[AFTER:.*]] = arith.addi %[[AT]], %c1_i32
// PERSIST-NEXT: %[[P3:.*]] = llvm.getelementptr %arg11[%[[AFTER]]]
// PERSIST-NEXT: %[[NEXT:.*]] = llvm.load %[[P3]]
// PERSIST: arith.divui %[[TILE]], %{{.*}}
// PERSIST: scf.yield %{{.*}}, %{{.*}}, %[[NEXT]] : i32, i32, i32

// The persistent schedule: O's staging tile has its own bytes, so the store's wait moves a tile later. The
// warpgroup's first thread waits for the previous tile's store to read the staging rows just before the epilogue
// barrier; after the commit nothing waits (the warpgroup goes on to the LSE and the next tile); once the tile loop
// ends, the first thread waits for the last store before the CTA exits.
// PERSIST: %[[EPI:.*]] = arith.addi %c3_i32,
// PERSIST-NEXT: scf.if %[[LEAD:.*]] {
// PERSIST-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// PERSIST-NEXT: {{^ *}$}}
// PERSIST-NEXT: nvvm.barrier id = %[[EPI]] number_of_threads = %c128_i32
// PERSIST: nvvm.cp.async.bulk.tensor.global.shared.cta %arg3
// PERSIST-NEXT: nvvm.cp.async.bulk.commit.group
// PERSIST-NEXT: {{^ *}$}}
// PERSIST-NOT: nvvm.cp.async.bulk.wait_group
// PERSIST: scf.yield
// PERSIST-NEXT: {{^ *}$}}
// PERSIST-NEXT: scf.if %[[LEAD]] {
// PERSIST-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
