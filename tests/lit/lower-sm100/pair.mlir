// RUN: warploom-opt %s --wl-tile="target=sm_100a schedule=persistent block-m=256 block-n=256" --wl-pipeline --wl-specialize --wl-plan-tmem --wl-plan-smem --wl-plan-barriers | FileCheck %s --check-prefix=PLAN
// RUN: warploom-opt %s --wl-tile="target=sm_100a schedule=persistent block-m=256 block-n=256" --wl-pipeline --wl-specialize --wl-plan-tmem --wl-plan-smem --wl-plan-barriers --wl-lower-sm100 | FileCheck %s
// RUN: not warploom-opt %s --wl-tile="target=sm_100a block-m=256 block-n=256" 2>&1 | FileCheck %s --check-prefix=GRID

// The sm_100a CTA pair (cta_group::2): a cluster of 2 computes a 256 x 256 tile; each CTA loads its 128 rows of A
// and half of B (64 x 128) and keeps its 128 accumulator rows in its own TMEM (2 stages x 256 columns = 512).

// PLAN: "wl.buffer"() {columns = 512 : i64, dims = ["M", "N"], elem = "f32", name = "acc", offset = 0 : i64, shape = [128, 256], space = "tmem", stages = 2 : i64}
// PLAN: "wl.buffer"() {{.*}}dims = ["K", "N"], elem = "bf16", name = "b", {{.*}}shape = [64, 128], stages = 4 : i64
// The other CTA's stage landed: its relay warp arrives on the leader's ab_peer; the leader frees a stage in both CTAs
// (commit multicast) and the accumulator is freed by both CTAs' epilogues on the leader's acc_empty (2 x 128).
// PLAN: "wl.ring"() {consumers = ["mma"], empty = "ab_empty", full = "ab_full", name = "ab", peer = "ab_peer", producer = "producer", regions = ["a", "b"], relay = "relay", stages = 4 : i64}
// PLAN: "wl.mbarrier"() {arrivals = 1 : i64, count = 4 : i64, name = "ab_peer", offset = {{[0-9]+}} : i64, ring = "ab", scope = "cluster", tx_bytes = 0 : i64}
// PLAN: "wl.mbarrier"() {arrivals = 256 : i64, count = 2 : i64, name = "acc_empty", {{.*}}scope = "cluster"
// PLAN: "wl.wait"() {barrier = "ab_full", parity = "consumer"}
// PLAN-NEXT: "wl.wait"() {barrier = "ab_peer", parity = "consumer"}
// PLAN-NEXT: "wl.mma"() {a = "a", acc = "acc", acc_source = "tmem", b = "b", shape = [256, 256, 64]}
// PLAN-NEXT: "wl.arrive"() {barrier = "ab_empty", cta = "pair", issue = "mma_commit", lag = 0 : i64}
// PLAN: "wl.arrive"() {barrier = "acc_full", cta = "pair", issue = "mma_commit", lag = 0 : i64}
// PLAN: }) {issue = "one_thread", name = "mma", rank = 0 : i64, warps = [1, 1]}
// PLAN: "wl.arrive"() {barrier = "acc_empty", cta = "leader", issue = "each_thread", lag = 0 : i64}
// PLAN: "wl.wait"() {barrier = "ab_full", parity = "consumer"}
// PLAN-NEXT: "wl.arrive"() {barrier = "ab_peer", cta = "leader", issue = "one_thread", lag = 0 : i64}
// PLAN: }) {issue = "one_thread", name = "relay", rank = 1 : i64, warps = [1, 1]}
// PLAN: cluster = [2, 1, 1], cta_group = 2 : i64, grid = {{\[\["persistent_pairs", "M", 256, "N", 256, "SMS"\]}}

// CHECK: "wl.launch"{{.*}}cluster = [2, 1, 1]
// CHECK-LABEL: llvm.func @wl_gemm_bf16_kn_256x256x64_s4_persistent_sm100a(
// CHECK: [[RANK:%[0-9]+]] = nvvm.read.ptx.sreg.cluster.ctarank : i32
// Warp 1 of each CTA allocates for the pair; both CTAs' barriers are initialised before either CTA uses them.
// CHECK: nvvm.tcgen05.alloc {{%[0-9]+}}, %c512_i32 {group = #nvvm.cta_group<cta_2>}
// CHECK-NEXT: nvvm.tcgen05.relinquish_alloc_permit {group = #nvvm.cta_group<cta_2>}
// CHECK: nvvm.barrier
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// The producer of each CTA: B's columns start at n0 + 128 * rank (its half).
// CHECK: nvvm.read.ptx.sreg.clusterid.x
// CHECK: [[BHALF:%[0-9]+]] = arith.muli [[RANK]], %c128_i32
// CHECK: nvvm.mbarrier.arrive.expect_tx {{%[0-9]+}}, %c32768_i32
// The MMA warp runs in the leader (rank 0) only: it waits for its own stage and the peer's, issues cta_group::2 MMAs
// (M 256, N 256: 272696464) and commits to both CTAs' ab_empty and acc_full (mask 0b11).
// CHECK: [[W1:%[0-9]+]] = arith.cmpi eq, {{%[0-9]+}}, %c1_i32
// CHECK-NEXT: [[LEAD:%[0-9]+]] = arith.cmpi eq, [[RANK]], %c0_i32
// CHECK-NEXT: [[ISMMA:%[0-9]+]] = arith.andi [[W1]], [[LEAD]]
// CHECK-NEXT: scf.if [[ISMMA]] {
// Its waits on the barriers the other CTA releases at cluster scope (acc_empty: the peer's epilogue; ab_peer: the
// relay) acquire at cluster scope (inline PTX: MLIR 22's op has none); its own ab_full at CTA scope.
// CHECK: llvm.inline_asm has_side_effects "{{.*}}mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [$0], $1, $2;{{.*}}", "r,r,r"
// CHECK: nvvm.mbarrier.try_wait.parity [[FULL:%[0-9]+]]
// CHECK: llvm.inline_asm has_side_effects "{{.*}}mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64
// CHECK: nvvm.tcgen05.mma {{.*}}, %c272696464_i32, {{%[0-9]+}} {ctaGroup = #nvvm.cta_group<cta_2>, kind = #nvvm.tcgen05_mma_kind<f16>}
// CHECK-COUNT-3: nvvm.tcgen05.mma {{.*}}ctaGroup = #nvvm.cta_group<cta_2>
// CHECK: nvvm.tcgen05.commit {{%[0-9]+}}, multicast_mask = %c3_i16 {group = #nvvm.cta_group<cta_2>}
// CHECK: nvvm.tcgen05.commit {{%[0-9]+}}, multicast_mask = %c3_i16 {group = #nvvm.cta_group<cta_2>}
// CHECK-NOT: nvvm.tcgen05.dealloc
// The relay (warp 1 of rank 1): waits for its own stage, then arrives on the leader's ab_peer through mapa.
// CHECK: [[R1:%[0-9]+]] = arith.cmpi eq, [[RANK]], %c1_i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK: [[REMOTE:%[0-9]+]] = nvvm.mapa {{%[0-9]+}}, %c0_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NEXT: nvvm.mbarrier.arrive [[REMOTE]] {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>
// CHECK-NOT: nvvm.tcgen05.dealloc
// The epilogue: each CTA stores its own rows (m0 + 128 * rank), then frees the stage on the leader's acc_empty.
// CHECK: [[MROWS:%[0-9]+]] = arith.muli [[RANK]], %c128_i32
// CHECK: [[EMPTY:%[0-9]+]] = nvvm.mapa {{%[0-9]+}}, %c0_i32 : !llvm.ptr<3> -> !llvm.ptr<7>
// CHECK-NEXT: nvvm.mbarrier.arrive [[EMPTY]] {scope = #nvvm.mem_scope<cluster>} : !llvm.ptr<7>
// Neither CTA exits while the other may still use its barriers or smem; only after that cluster barrier (both
// CTAs' epilogues done with the pair's Tensor Memory) does each CTA's warp 1 free it, as the PTX ISA's
// cta_group::2 example and CUTLASS order it.
// CHECK-NOT: nvvm.tcgen05.dealloc
// CHECK: nvvm.cluster.arrive {aligned}
// CHECK-NEXT: nvvm.cluster.wait {aligned}
// CHECK-NEXT: [[WARP1:%[0-9]+]] = arith.cmpi eq, {{%[0-9]+}}, %c1_i32
// CHECK-NEXT: scf.if [[WARP1]] {
// CHECK-NEXT: nvvm.tcgen05.fence <after>
// CHECK: nvvm.tcgen05.dealloc {{%[0-9]+}}, %c512_i32 {group = #nvvm.cta_group<cta_2>}
// CHECK: llvm.return

// GRID: error: schedule = 'grid': the sm_100a CTA-pair GEMM (block-m 256) is built persistent only; use schedule=persistent

func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
