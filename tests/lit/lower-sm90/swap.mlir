// RUN: warploom-opt %s --wl-tile=block-m=16,block-n=64,epilogue=direct,swap-ab=true --wl-pipeline=stages=8 --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s --check-prefix=PLAN
// RUN: warploom-opt %s --wl-tile=block-m=16,block-n=64,epilogue=direct,swap-ab=true --wl-pipeline=stages=8 --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s
// RUN: not warploom-opt %s --wl-tile=block-m=16,block-n=64,swap-ab=true 2>&1 | FileCheck %s --check-prefix=TMA
// RUN: not warploom-opt %s --wl-tile=block-m=12,block-n=64,epilogue=direct,swap-ab=true 2>&1 | FileCheck %s --check-prefix=BM12
// RUN: not warploom-opt %s --wl-tile=block-m=16,block-n=96,epilogue=direct,swap-ab=true 2>&1 | FileCheck %s --check-prefix=BN96

// The swap-AB GEMM (bf16, B [K, N], tile 16 x 64 x 64, 8 stages): C^T = B^T A^T. B's [64 K, 64 N] tile is the
// wgmma's A, MN-major (imm-trans-a: layout <col>), its 64 rows along N; A's [16 M, 64 K] tile the wgmma's B,
// K-major, n = 16 along M. The m64n16 f32 accumulator (8 registers a thread) is C^T's tile, stored transposed:
// register 4j + 2h + e of lane l in warp w holds C[m0 + 8j + 2(l % 4) + e, n0 + 64 wg + 16w + l/4 + 8h].

// PLAN: "wl.buffer"() {{{.*}}dims = ["M", "K"], elem = "bf16", name = "a", offset = 0 : i64, shape = [16, 64], stages = 8
// PLAN: "wl.buffer"() {{{.*}}dims = ["K", "N"], elem = "bf16", name = "b", offset = 16384 : i64, shape = [64, 64], stages = 8
// PLAN: "wl.mma"() {a = "b", acc = "acc", b = "a", shape = [64, 16, 64]}
// PLAN: "wl.store_tile"() {acc = "acc", operand = "c", tile = [64, 16]}
// PLAN: swap_ab = true

// CHECK-LABEL: llvm.func @wl_gemm_bf16_kn_16x64x64_s8_swap_direct(
// CHECK-SAME: [[C:%[a-z0-9_]+]]: !llvm.ptr<1>, [[M:%[a-z0-9_]+]]: i32, [[N:%[a-z0-9_]+]]: i32, [[K:%[a-z0-9_]+]]: i32)
// CHECK-SAME: nvvm.minctasm = 1
// CHECK-DAG: [[C64:%[a-z0-9_]+]] = arith.constant 64 : i32
// CHECK-DAG: [[C16:%[a-z0-9_]+]] = arith.constant 16 : i32
// The grid: x walks N by 64, y walks M by 16.
// CHECK: [[CTAX:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK-NEXT: [[N0:%[a-z0-9_]+]] = arith.muli [[CTAX]], [[C64]] : i32
// CHECK-NEXT: [[CTAY:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.ctaid.y : i32
// CHECK-NEXT: [[M0:%[a-z0-9_]+]] = arith.muli [[CTAY]], [[C16]] : i32

// The MMA: the wgmma's A descriptor is stage s of region b (16384 + 8192 s), its B stage s of region a (2048 s).
// MN-major A steps 16 K rows (2048 B, 128 in 16-byte units) per k16; K-major B steps 32 B (2 units).
// CHECK: [[ACC:%[a-z0-9_]+]] = scf.for
// CHECK: [[SA:%[a-z0-9_]+]] = arith.muli [[STAGE:%[a-z0-9_]+]], %c8192_i32 : i32
// CHECK-NEXT: arith.addi %c16384_i32, [[SA]] : i32
// CHECK: [[DA:%[a-z0-9_]+]] = arith.ori {{%[a-z0-9_]+}}, %c{{[0-9]+}}_i64 : i64
// CHECK-NEXT: [[SB:%[a-z0-9_]+]] = arith.muli [[STAGE]], %c2048_i32 : i32
// CHECK: [[DB:%[a-z0-9_]+]] = arith.ori {{%[a-z0-9_]+}}, %c{{[0-9]+}}_i64 : i64
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// CHECK-NEXT: nvvm.wgmma.mma_async [[DA]], [[DB]], {{%[a-z0-9_]+}}, <m = 64, n = 16, k = 16>, D[<f32>, <one>, <wrapped>], A[<bf16>, <one>, <col>], B[<bf16>, <one>, <col>]
// CHECK-NEXT: [[DA1:%[a-z0-9_]+]] = arith.addi [[DA]], %c128_i64 : i64
// CHECK-NEXT: [[DB1:%[a-z0-9_]+]] = arith.addi [[DB]], %c2_i64 : i64
// CHECK-NEXT: nvvm.wgmma.mma_async [[DA1]], [[DB1]], {{.*}}A[<bf16>, <one>, <col>], B[<bf16>, <one>, <col>]
// CHECK-NEXT: arith.addi [[DA]], %c256_i64 : i64
// CHECK-NEXT: arith.addi [[DB]], %c4_i64 : i64
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0

// C's column of fragment row r0: n0 + 64 wg + 16 warp + lane / 4; C's row of fragment column q0: m0 + 2 (lane % 4).
// CHECK-NEXT: [[WARP:%[a-z0-9_]+]] = arith.divui {{%[a-z0-9_]+}}, %c32_i32 : i32
// CHECK-NEXT: [[LANE:%[a-z0-9_]+]] = arith.remui {{%[a-z0-9_]+}}, %c32_i32 : i32
// CHECK-NEXT: [[WGOFF:%[a-z0-9_]+]] = arith.muli {{%[a-z0-9_]+}}, [[C64]] : i32
// CHECK-NEXT: [[WGCOL:%[a-z0-9_]+]] = arith.addi [[N0]], [[WGOFF]] : i32
// CHECK-NEXT: [[WCOL:%[a-z0-9_]+]] = arith.muli [[WARP]], [[C16]] : i32
// CHECK-NEXT: [[LCOL:%[a-z0-9_]+]] = arith.divui [[LANE]], %c4_i32 : i32
// CHECK-NEXT: [[INWG:%[a-z0-9_]+]] = arith.addi [[WCOL]], [[LCOL]] : i32
// CHECK-NEXT: [[COL0:%[a-z0-9_]+]] = arith.addi [[WGCOL]], [[INWG]] : i32
// CHECK-NEXT: [[LQ:%[a-z0-9_]+]] = arith.remui [[LANE]], %c4_i32 : i32
// CHECK-NEXT: [[LROW:%[a-z0-9_]+]] = arith.muli [[LQ]], %c2_i32 : i32
// CHECK-NEXT: [[ROW0:%[a-z0-9_]+]] = arith.addi [[M0]], [[LROW]] : i32
// CHECK-NEXT: [[R0:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]][0]
// CHECK-NEXT: [[R1:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]][1]
// CHECK-NEXT: [[R2:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]][2]
// CHECK: [[R7:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]][7]
// Register 0 (j 0, h 0, e 0): C[row0, col0], guarded by row0 < M and col0 < N; register 2 (h 1): column col0 + 8.
// CHECK-NEXT: [[N64:%[a-z0-9_]+]] = arith.extsi [[N]] : i32 to i64
// CHECK-NEXT: [[COL8:%[a-z0-9_]+]] = arith.addi [[COL0]], %c8_i32 : i32
// CHECK-NEXT: [[COK:%[a-z0-9_]+]] = arith.cmpi slt, [[COL0]], [[N]] : i32
// CHECK-NEXT: [[COK8:%[a-z0-9_]+]] = arith.cmpi slt, [[COL8]], [[N]] : i32
// CHECK-NEXT: [[ROW:%[a-z0-9_]+]] = arith.addi [[ROW0]], %c0_i32 : i32
// CHECK-NEXT: [[ROW64:%[a-z0-9_]+]] = arith.extsi [[ROW]] : i32 to i64
// CHECK-NEXT: [[ROFF:%[a-z0-9_]+]] = arith.muli [[ROW64]], [[N64]] : i64
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[C]][[[ROFF]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: [[ROK:%[a-z0-9_]+]] = arith.cmpi slt, [[ROW]], [[M]] : i32
// CHECK-NEXT: [[OK:%[a-z0-9_]+]] = arith.andi [[ROK]], [[COK]] : i1
// CHECK-NEXT: scf.if [[OK]] {
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = arith.truncf [[R0]] : f32 to bf16
// CHECK-NEXT: [[CI:%[a-z0-9_]+]] = arith.extsi [[COL0]] : i32 to i64
// CHECK-NEXT: [[Q:%[a-z0-9_]+]] = llvm.getelementptr [[P]][[[CI]]] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[V]], [[Q]] {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK-NEXT: }
// CHECK-NEXT: [[OK8:%[a-z0-9_]+]] = arith.andi [[ROK]], [[COK8]] : i1
// CHECK-NEXT: scf.if [[OK8]] {
// CHECK-NEXT: [[V2:%[a-z0-9_]+]] = arith.truncf [[R2]] : f32 to bf16
// CHECK-NEXT: [[CI8:%[a-z0-9_]+]] = arith.extsi [[COL8]] : i32 to i64
// CHECK-NEXT: llvm.getelementptr [[P]][[[CI8]]]
// Register 1 (e 1): the next row of C, row0 + 1.
// CHECK: [[ROWE:%[a-z0-9_]+]] = arith.addi [[ROW0]], %c1_i32 : i32
// CHECK: arith.truncf [[R1]] : f32 to bf16

// TMA: {{.*}}swap-ab = true: built for the sm_90a GEMM with schedule=grid and epilogue=direct
// BM12: block-m = 12: the swap-AB GEMM's rows of C are the wgmma's n
// BN96: block-n = 96: the swap-AB GEMM gives each consumer warpgroup m64 columns of C
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
