// RUN: warploom-opt %s --wl-tile=target=sm_100a --wl-pipeline --wl-specialize --wl-plan-tmem --wl-plan-smem --wl-plan-barriers | FileCheck %s --check-prefix=PLAN
// RUN: warploom-opt %s --wl-tile=target=sm_100a --wl-pipeline --wl-specialize --wl-plan-tmem --wl-plan-smem --wl-plan-barriers --wl-lower-sm100 | FileCheck %s

// The sm_100a attention (FA4-style, docs/attention-sm100.md), f16, head dim 64, causal: the TMEM hand-offs that
// wl-plan-barriers adds, and the tcgen05 code wl-lower-sm100 makes of them. No Blackwell GPU exists here: this,
// ptxas, the SASS and the emulator are how the kernel is checked.

// One mbarrier per Q tile for each TMEM hand-off: S_i done (a commit), P_i written (the 128 softmax threads), P_i V
// done (a commit), O_i rescaled (the 128 correction threads).
// PLAN: {arrivals = 1 : i64, count = 1 : i64, name = "s0_full", offset = 100440 : i64, tx_bytes = 0 : i64}
// PLAN: {arrivals = 128 : i64, count = 1 : i64, name = "p0_full", offset = 100448 : i64, tx_bytes = 0 : i64}
// PLAN: {arrivals = 1 : i64, count = 1 : i64, name = "o0_full", offset = 100456 : i64, tx_bytes = 0 : i64}
// PLAN: {arrivals = 128 : i64, count = 1 : i64, name = "o0_ready", offset = 100464 : i64, tx_bytes = 0 : i64}
// PLAN: name = "o1_ready", offset = 100496
// softmax0: per key block wait S0, the softmax, arrive P0 (every thread)
// PLAN: "wl.wait"() {barrier = "s0_full", parity = "consumer"}
// PLAN-NEXT: "wl.compute"() {kind = "online_softmax"
// PLAN-NEXT: "wl.arrive"() {barrier = "p0_full", issue = "each_thread", lag = 0 : i64}
// correction: per key block and Q tile, the factor (p_full), then the P V it rescales done (o_full of the block
// before: the producer's parity), rescale, arrive o_ready; after the loop, the last block's o_full before O is
// normalized and written over Q
// PLAN: name = "softmax1"
// PLAN: "wl.wait"() {barrier = "p0_full", parity = "consumer"}
// PLAN-NEXT: "wl.wait"() {barrier = "o0_full", parity = "producer"}
// PLAN-NEXT: "wl.compute"() {kind = "rescale", reads = ["corr0", "o0"], writes = ["o0"]}
// PLAN-NEXT: "wl.arrive"() {barrier = "o0_ready", issue = "each_thread", lag = 0 : i64}
// PLAN: "wl.loop_last"() ({
// PLAN-NEXT: "wl.wait"() {barrier = "o0_full", parity = "producer"}
// PLAN-NEXT: "wl.wait"() {barrier = "o1_full", parity = "producer"}
// PLAN: name = "correction"
// the MMA thread: S_i after P_i V of the block before (o_full, producer parity), commit s_full; P_i V after P_i and
// the rescaled O_i, commit o_full; the K and V stages freed by commits after their last MMA
// PLAN: "wl.wait"() {barrier = "k_full", parity = "consumer"}
// PLAN-NEXT: "wl.wait"() {barrier = "o0_full", parity = "producer"}
// PLAN-NEXT: "wl.mma"() {a = "q0", {{.*}}acc = "s0"
// PLAN-NEXT: "wl.arrive"() {barrier = "s0_full", issue = "mma_commit"
// PLAN-NEXT: "wl.wait"() {barrier = "o1_full", parity = "producer"}
// PLAN-NEXT: "wl.mma"() {a = "q1", {{.*}}acc = "s1"
// PLAN-NEXT: "wl.arrive"() {barrier = "s1_full", issue = "mma_commit"
// PLAN-NEXT: "wl.arrive"() {barrier = "k_empty", issue = "mma_commit"
// PLAN-NEXT: "wl.wait"() {barrier = "v_full", parity = "consumer"}
// PLAN-NEXT: "wl.wait"() {barrier = "p0_full", parity = "consumer"}
// PLAN-NEXT: "wl.wait"() {barrier = "o0_ready", parity = "consumer"}
// PLAN-NEXT: "wl.mma"() {a = "p0", a_major = "K", a_source = "tmem", acc = "o0"
// PLAN-NEXT: "wl.arrive"() {barrier = "o0_full", issue = "mma_commit"
// PLAN: "wl.arrive"() {barrier = "v_empty", issue = "mma_commit"

// The kernel: one CTA fills an SM (.minnctapersm 1: ptxas then honours setmaxnreg); the MMA warp allocates all 512
// TMEM columns before the CTA barrier.
// CHECK: llvm.func @wl_fa4_f16_d64_256x128_s2_causal(
// CHECK-SAME: nvvm.minctasm = 1
// CHECK: nvvm.tcgen05.alloc %{{.*}}, %c512_i32
// CHECK-NEXT: nvvm.tcgen05.relinquish_alloc_permit
// CHECK-NEXT: nvvm.tcgen05.fence <before>
// softmax0 (168 registers): S read 32 columns at a time after the wait on s0_full, P stored, wait::st, then the
// fence before its arrival on p0_full
// CHECK: nvvm.setmaxregister  increase 168
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK: nvvm.tcgen05.ld {{.*}}shape_32x32b{{.*}} : vector<32xi32>
// CHECK-NEXT: nvvm.tcgen05.wait <load>
// CHECK: nvvm.tcgen05.st {{.*}}shape_32x32b{{.*}} : vector<16xi32>
// CHECK: nvvm.tcgen05.wait <store>
// CHECK: nvvm.tcgen05.fence <before>
// CHECK-NEXT: nvvm.mbarrier.arrive
// the correction warpgroup (88): a warp rescales O only when one of its rows has a factor != 1
// CHECK: nvvm.setmaxregister  decrease 88
// CHECK: nvvm.redux.sync  or
// the MMA thread: Q0 and Q1 landed (q0_full at 100360, q1_full at 100368, phase 0), then per key block
// CHECK: nvvm.elect.sync
// CHECK: arith.addi %c100360_i32,
// CHECK-NEXT: llvm.getelementptr
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity %{{.*}}, %c0_i32,
// CHECK: arith.addi %c100368_i32,
// CHECK-NEXT: llvm.getelementptr
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity %{{.*}}, %c0_i32,
// CHECK: scf.for %[[KB:.*]] = %c0_i32 to
// S0 waits on o0_full (100456) at the block before's parity: (kb & 1) ^ 1
// CHECK: %[[B:.*]] = arith.andi %[[KB]], %c1_i32
// CHECK-NEXT: %[[P:.*]] = arith.xori %[[B]], %c1_i32
// CHECK-NEXT: llvm.getelementptr %{{.*}}[%c100456_i32]
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity %{{.*}}, %[[P]],
// S0 = Q0 K^T: 4 MMAs (K = 64 / 16) from smem descriptors, the first overwriting (enable-input-d false); the
// instruction descriptor 0x8200010 = f16 x f16 -> f32, M 128, N 128, K-major A and B (PTX ISA 9.7.16.4.2)
// CHECK: %[[OFF:.*]] = arith.cmpi ne, %c0_i32, %c0_i32
// CHECK-NEXT: llvm.inttoptr
// CHECK-NEXT: nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %c136314896_i32, %[[OFF]] {{.*}}: (!llvm.ptr<6>, i64, i64, i32, i1)
// CHECK-COUNT-3: nvvm.tcgen05.mma {{.*}}%c136314896_i32
// CHECK-NEXT: llvm.getelementptr %{{.*}}[%c100440_i32]
// CHECK: nvvm.tcgen05.commit
// S1 after P1 V of the block before (o1_full at 100488), commit to s1_full (100472), then K's stage freed
// CHECK: llvm.getelementptr %{{.*}}[%c100488_i32]
// CHECK-COUNT-4: nvvm.tcgen05.mma {{.*}}%c136314896_i32
// CHECK-NEXT: llvm.getelementptr %{{.*}}[%c100472_i32]
// CHECK: nvvm.tcgen05.commit
// CHECK: nvvm.tcgen05.commit
// P0 V: after v_full, p0_full (100448) and o0_ready (100464); 8 MMAs (128 keys / 16) with A in TMEM (P0, two 16-bit
// keys a column: 8 columns per MMA) and B = V MN-major: idesc 0x8110010 (N = 64, transpose B); the first key block
// overwrites O0 (enable-input-d = kb != 0)
// CHECK: llvm.getelementptr %{{.*}}[%c100448_i32]
// CHECK: llvm.getelementptr %{{.*}}[%c100464_i32]
// CHECK: %[[ACC:.*]] = arith.cmpi ne, %[[KB]], %c0_i32
// CHECK: nvvm.tcgen05.mma %{{.*}}, %{{.*}}, %{{.*}}, %c135331856_i32, %[[ACC]] {{.*}}: (!llvm.ptr<6>, !llvm.ptr<6>, i64, i32, i1)
// CHECK: arith.addi %{{.*}}, %c8_i32
// CHECK-COUNT-7: nvvm.tcgen05.mma {{.*}}%c135331856_i32
// CHECK-NEXT: nvvm.tcgen05.commit
// the same for P1 V, then V's stage freed
// CHECK-COUNT-8: nvvm.tcgen05.mma {{.*}}%c135331856_i32
// CHECK-NEXT: nvvm.tcgen05.commit
// CHECK: nvvm.tcgen05.commit
// after the loop the whole warp waits for the correction warpgroup on tmem_free (id 1, 160 threads) and frees TMEM
// CHECK: nvvm.barrier id = %c1_i32 number_of_threads = %c160_i32
// CHECK: nvvm.tcgen05.dealloc %{{.*}}, %c512_i32
// the load thread, after its last key block, waits once more for each slot of k_empty (100392) and v_empty (100424),
// slot (trips + i) % 2 at the producer's parity, so the MMA thread's last commits land before the CTA exits
// CHECK: %[[KU:.*]] = arith.muli %[[TRIPS:.*]], %c1_i32
// CHECK-NEXT: %[[K0:.*]] = arith.addi %[[KU]], %c0_i32
// CHECK-NEXT: %[[KS0:.*]] = arith.remui %[[K0]], %c2_i32
// CHECK-NEXT: %[[KQ0:.*]] = arith.divui %[[K0]], %c2_i32
// CHECK-NEXT: %[[KP0:.*]] = arith.andi %[[KQ0]], %c1_i32
// CHECK-NEXT: %[[KO0:.*]] = arith.muli %[[KS0]], %c8_i32
// CHECK-NEXT: %[[KA0:.*]] = arith.addi %c100392_i32, %[[KO0]]
// CHECK-NEXT: %[[KB0:.*]] = llvm.getelementptr %{{.*}}[%[[KA0]]]
// CHECK-NEXT: %[[KX0:.*]] = arith.xori %[[KP0]], %c1_i32
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity %[[KB0]], %[[KX0]],
// CHECK-NEXT: arith.addi %[[KU]], %c1_i32
// CHECK: arith.addi %c100392_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: %[[VU:.*]] = arith.muli %[[TRIPS]], %c1_i32
// CHECK-NEXT: arith.addi %[[VU]], %c0_i32
// CHECK: arith.addi %c100424_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: arith.addi %[[VU]], %c1_i32
// CHECK: arith.addi %c100424_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: }
// CHECK-NEXT: } else {

func.func @attn(%q: tensor<?x?x?x64xf16>, %k: tensor<?x?x?x64xf16>, %v: tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32, layout = "bhsd"} : (tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>, tensor<?x?x?x64xf16>) -> tensor<?x?x?x64xf16>
  return %o : tensor<?x?x?x64xf16>
}
