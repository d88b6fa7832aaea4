// RUN: warploom-opt %s --wl-tile=block-n=64,epilogue=direct --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// The epilogue's fragment-to-element mapping (bf16, B "nk", tile 128x64x64: a 32-register m64n64 f32
// accumulator per thread), followed through the data flow. wgmma's f32 fragment (gpu-facts.md
// section 3): warp w of the warpgroup owns rows 16w..16w+15; lane l has r0 = 16w + l/4 and columns
// 8j + 2(l % 4) + e; register 4j + 2h + e holds (r0 + 8h, 8j + 2(l % 4) + e). The warpgroup's rows
// start at m0 + 64 * (its index in the consumer role).

// CHECK-LABEL: llvm.func @wl_gemm_bf16_nk_128x64x64_s4_direct(
// CHECK-SAME: [[TMA:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[TMB:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[C:%[a-z0-9_]+]]: !llvm.ptr<1>, [[M:%[a-z0-9_]+]]: i32, [[N:%[a-z0-9_]+]]: i32, [[K:%[a-z0-9_]+]]: i32)
// CHECK-DAG: [[C0:%[a-z0-9_]+]] = arith.constant 0 : i32
// CHECK-DAG: [[C1:%[a-z0-9_]+]] = arith.constant 1 : i32
// CHECK-DAG: [[C2:%[a-z0-9_]+]] = arith.constant 2 : i32
// CHECK-DAG: [[C4:%[a-z0-9_]+]] = arith.constant 4 : i32
// CHECK-DAG: [[C8:%[a-z0-9_]+]] = arith.constant 8 : i32
// CHECK-DAG: [[C16:%[a-z0-9_]+]] = arith.constant 16 : i32
// CHECK-DAG: [[C32:%[a-z0-9_]+]] = arith.constant 32 : i32
// CHECK-DAG: [[C64:%[a-z0-9_]+]] = arith.constant 64 : i32
// CHECK-DAG: [[C128:%[a-z0-9_]+]] = arith.constant 128 : i32
// CHECK: [[TID:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: [[CTAX:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK-NEXT: [[N0:%[a-z0-9_]+]] = arith.muli [[CTAX]], [[C64]] : i32
// CHECK-NEXT: [[CTAY:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.ctaid.y : i32
// CHECK-NEXT: [[M0:%[a-z0-9_]+]] = arith.muli [[CTAY]], [[C128]] : i32
// CHECK: nvvm.barrier
// CHECK-NEXT: [[WG:%[a-z0-9_]+]] = arith.divui [[TID]], [[C128]] : i32
// CHECK: nvvm.setmaxregister increase 232
// CHECK-NEXT: [[WGI:%[a-z0-9_]+]] = arith.subi [[WG]], [[C1]] : i32
// CHECK-NEXT: [[TIW:%[a-z0-9_]+]] = arith.remui [[TID]], [[C128]] : i32
// CHECK: [[ACC:%[a-z0-9_]+]] = scf.for
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0

// Row r0 = m0 + 64 wg + 16 warp + lane / 4, column c0 = n0 + 2 (lane % 4).
// CHECK-NEXT: [[WARP:%[a-z0-9_]+]] = arith.divui [[TIW]], [[C32]] : i32
// CHECK-NEXT: [[LANE:%[a-z0-9_]+]] = arith.remui [[TID]], [[C32]] : i32
// CHECK-NEXT: [[WGOFF:%[a-z0-9_]+]] = arith.muli [[WGI]], [[C64]] : i32
// CHECK-NEXT: [[WGROW:%[a-z0-9_]+]] = arith.addi [[M0]], [[WGOFF]] : i32
// CHECK-NEXT: [[WROW:%[a-z0-9_]+]] = arith.muli [[WARP]], [[C16]] : i32
// CHECK-NEXT: [[LROW:%[a-z0-9_]+]] = arith.divui [[LANE]], [[C4]] : i32
// CHECK-NEXT: [[INWG:%[a-z0-9_]+]] = arith.addi [[WROW]], [[LROW]] : i32
// CHECK-NEXT: [[ROW0:%[a-z0-9_]+]] = arith.addi [[WGROW]], [[INWG]] : i32
// CHECK-NEXT: [[LQ:%[a-z0-9_]+]] = arith.remui [[LANE]], [[C4]] : i32
// CHECK-NEXT: [[LCOL:%[a-z0-9_]+]] = arith.muli [[LQ]], [[C2]] : i32
// CHECK-NEXT: [[COL0:%[a-z0-9_]+]] = arith.addi [[N0]], [[LCOL]] : i32
// CHECK-NEXT: [[R0:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}0]
// CHECK-NEXT: [[R1:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}1]
// CHECK-NEXT: [[R2:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}2]
// CHECK-NEXT: [[R3:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}3]
// CHECK-NEXT: [[R4:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}4]
// CHECK-NEXT: [[R5:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}5]
// CHECK-NEXT: [[R6:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}6]
// CHECK-NEXT: [[R7:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}7]
// CHECK: [[R28:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}28]
// CHECK-NEXT: [[R29:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}29]
// CHECK-NEXT: [[R30:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}30]
// CHECK-NEXT: [[R31:%[a-z0-9_]+]] = llvm.extractvalue [[ACC]]{{\[}}31]

// Row pointers into C (row-major [M, N]): P0 = c + r0 * N + c0 and P8 = c + (r0 + 8) * N + c0.
// CHECK-NEXT: [[N64:%[a-z0-9_]+]] = arith.extsi [[N]] : i32 to i64
// CHECK-NEXT: [[ROW8:%[a-z0-9_]+]] = arith.addi [[ROW0]], [[C8]] : i32
// CHECK-NEXT: [[COL64:%[a-z0-9_]+]] = arith.extsi [[COL0]] : i32 to i64
// CHECK-NEXT: [[X:%[a-z0-9_]+]] = arith.extsi [[ROW0]] : i32 to i64
// CHECK-NEXT: [[X2:%[a-z0-9_]+]] = arith.muli [[X]], [[N64]] : i64
// CHECK-NEXT: [[X3:%[a-z0-9_]+]] = arith.addi [[X2]], [[COL64]] : i64
// CHECK-NEXT: [[P0:%[a-z0-9_]+]] = llvm.getelementptr [[C]]{{\[}}[[X3]]{{\]}} : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: [[X:%[a-z0-9_]+]] = arith.extsi [[ROW8]] : i32 to i64
// CHECK-NEXT: [[X2:%[a-z0-9_]+]] = arith.muli [[X]], [[N64]] : i64
// CHECK-NEXT: [[X3:%[a-z0-9_]+]] = arith.addi [[X2]], [[COL64]] : i64
// CHECK-NEXT: [[P8:%[a-z0-9_]+]] = llvm.getelementptr [[C]]{{\[}}[[X3]]{{\]}} : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, bf16

// Fast path when the warpgroup's 64 x 64 slice is inside C and N is even (4-byte aligned pairs).
// CHECK-NEXT: [[END:%[a-z0-9_]+]] = arith.addi [[WGROW]], [[C64]] : i32
// CHECK-NEXT: [[IN_M:%[a-z0-9_]+]] = arith.cmpi sle, [[END]], [[M]] : i32
// CHECK-NEXT: [[END:%[a-z0-9_]+]] = arith.addi [[N0]], [[C64]] : i32
// CHECK-NEXT: [[IN_N:%[a-z0-9_]+]] = arith.cmpi sle, [[END]], [[N]] : i32
// CHECK-NEXT: [[ODD:%[a-z0-9_]+]] = arith.andi [[N]], [[C1]] : i32
// CHECK-NEXT: [[EVEN:%[a-z0-9_]+]] = arith.cmpi eq, [[ODD]], [[C0]] : i32
// CHECK-NEXT: [[IN:%[a-z0-9_]+]] = arith.andi [[IN_M]], [[IN_N]] : i1
// CHECK-NEXT: [[FAST:%[a-z0-9_]+]] = arith.andi [[IN]], [[EVEN]] : i1
// CHECK-NEXT: scf.if [[FAST]] {
// j = 0, h = 0: registers 0, 1 -> (r0, c0 .. c0 + 1)
// CHECK-NEXT: [[U:%[a-z0-9_]+]] = llvm.mlir.undef : vector<2xf32>
// CHECK-NEXT: [[U1:%[a-z0-9_]+]] = llvm.insertelement [[R0]], [[U]]{{\[}}[[C0]] : i32] : vector<2xf32>
// CHECK-NEXT: [[U2:%[a-z0-9_]+]] = llvm.insertelement [[R1]], [[U1]]{{\[}}[[C1]] : i32] : vector<2xf32>
// CHECK-NEXT: [[PAIR:%[a-z0-9_]+]] = llvm.fptrunc [[U2]] : vector<2xf32> to vector<2xbf16>
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P0]][0] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[PAIR]], [[P]] {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
// j = 0, h = 1: registers 2, 3 -> (r0 + 8, c0 .. c0 + 1)
// CHECK-NEXT: [[U:%[a-z0-9_]+]] = llvm.mlir.undef : vector<2xf32>
// CHECK-NEXT: [[U1:%[a-z0-9_]+]] = llvm.insertelement [[R2]], [[U]]{{\[}}[[C0]] : i32] : vector<2xf32>
// CHECK-NEXT: [[U2:%[a-z0-9_]+]] = llvm.insertelement [[R3]], [[U1]]{{\[}}[[C1]] : i32] : vector<2xf32>
// CHECK-NEXT: [[PAIR:%[a-z0-9_]+]] = llvm.fptrunc [[U2]] : vector<2xf32> to vector<2xbf16>
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P8]][0] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[PAIR]], [[P]] {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
// j = 1: registers 4, 5 -> (r0, c0 + 8 ..), 6, 7 -> (r0 + 8, c0 + 8 ..)
// CHECK-NEXT: [[U:%[a-z0-9_]+]] = llvm.mlir.undef : vector<2xf32>
// CHECK-NEXT: [[U1:%[a-z0-9_]+]] = llvm.insertelement [[R4]], [[U]]{{\[}}[[C0]] : i32] : vector<2xf32>
// CHECK-NEXT: [[U2:%[a-z0-9_]+]] = llvm.insertelement [[R5]], [[U1]]{{\[}}[[C1]] : i32] : vector<2xf32>
// CHECK-NEXT: [[PAIR:%[a-z0-9_]+]] = llvm.fptrunc [[U2]] : vector<2xf32> to vector<2xbf16>
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P0]][8] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[PAIR]], [[P]] {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
// CHECK-NEXT: [[U:%[a-z0-9_]+]] = llvm.mlir.undef : vector<2xf32>
// CHECK-NEXT: [[U1:%[a-z0-9_]+]] = llvm.insertelement [[R6]], [[U]]{{\[}}[[C0]] : i32] : vector<2xf32>
// CHECK-NEXT: [[U2:%[a-z0-9_]+]] = llvm.insertelement [[R7]], [[U1]]{{\[}}[[C1]] : i32] : vector<2xf32>
// CHECK-NEXT: [[PAIR:%[a-z0-9_]+]] = llvm.fptrunc [[U2]] : vector<2xf32> to vector<2xbf16>
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P8]][8] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[PAIR]], [[P]] {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
// j = 7 (the last): registers 28, 29 -> (r0, c0 + 56 ..), 30, 31 -> (r0 + 8, c0 + 56 ..)
// CHECK: [[U1:%[a-z0-9_]+]] = llvm.insertelement [[R28]], [[U:%[a-z0-9_]+]]{{\[}}[[C0]] : i32] : vector<2xf32>
// CHECK-NEXT: [[U2:%[a-z0-9_]+]] = llvm.insertelement [[R29]], [[U1]]{{\[}}[[C1]] : i32] : vector<2xf32>
// CHECK-NEXT: [[PAIR:%[a-z0-9_]+]] = llvm.fptrunc [[U2]] : vector<2xf32> to vector<2xbf16>
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P0]][56] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[PAIR]], [[P]] {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>
// CHECK-NEXT: [[U:%[a-z0-9_]+]] = llvm.mlir.undef : vector<2xf32>
// CHECK-NEXT: [[U1:%[a-z0-9_]+]] = llvm.insertelement [[R30]], [[U]]{{\[}}[[C0]] : i32] : vector<2xf32>
// CHECK-NEXT: [[U2:%[a-z0-9_]+]] = llvm.insertelement [[R31]], [[U1]]{{\[}}[[C1]] : i32] : vector<2xf32>
// CHECK-NEXT: [[PAIR:%[a-z0-9_]+]] = llvm.fptrunc [[U2]] : vector<2xf32> to vector<2xbf16>
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P8]][56] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[PAIR]], [[P]] {alignment = 4 : i64} : vector<2xbf16>, !llvm.ptr<1>

// Slow path: each element on its own, stored only when its row < M and column < N.
// CHECK-NEXT: } else {
// CHECK-NEXT: [[ROK0:%[a-z0-9_]+]] = arith.cmpi slt, [[ROW0]], [[M]] : i32
// CHECK-NEXT: [[ROK8:%[a-z0-9_]+]] = arith.cmpi slt, [[ROW8]], [[M]] : i32
// j = 0, e = 0: registers 0 (row r0) and 2 (row r0 + 8) at column c0
// CHECK-NEXT: [[COL:%[a-z0-9_]+]] = arith.addi [[COL0]], [[C0]] : i32
// CHECK-NEXT: [[COK:%[a-z0-9_]+]] = arith.cmpi slt, [[COL]], [[N]] : i32
// CHECK-NEXT: [[OK:%[a-z0-9_]+]] = arith.andi [[ROK0]], [[COK]] : i1
// CHECK-NEXT: scf.if [[OK]] {
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = arith.truncf [[R0]] : f32 to bf16
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P0]][0] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[V]], [[P]] {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK-NEXT: }
// CHECK-NEXT: [[OK:%[a-z0-9_]+]] = arith.andi [[ROK8]], [[COK]] : i1
// CHECK-NEXT: scf.if [[OK]] {
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = arith.truncf [[R2]] : f32 to bf16
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P8]][0] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[V]], [[P]] {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK-NEXT: }
// j = 0, e = 1: registers 1 and 3 at column c0 + 1
// CHECK-NEXT: [[COL:%[a-z0-9_]+]] = arith.addi [[COL0]], [[C1]] : i32
// CHECK-NEXT: [[COK:%[a-z0-9_]+]] = arith.cmpi slt, [[COL]], [[N]] : i32
// CHECK-NEXT: [[OK:%[a-z0-9_]+]] = arith.andi [[ROK0]], [[COK]] : i1
// CHECK-NEXT: scf.if [[OK]] {
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = arith.truncf [[R1]] : f32 to bf16
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P0]][1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[V]], [[P]] {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK-NEXT: }
// CHECK-NEXT: [[OK:%[a-z0-9_]+]] = arith.andi [[ROK8]], [[COK]] : i1
// CHECK-NEXT: scf.if [[OK]] {
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = arith.truncf [[R3]] : f32 to bf16
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P8]][1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[V]], [[P]] {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK-NEXT: }
// j = 1, e = 0: registers 4 and 6 at column c0 + 8
// CHECK-NEXT: [[COL:%[a-z0-9_]+]] = arith.addi [[COL0]], [[C8]] : i32
// CHECK-NEXT: [[COK:%[a-z0-9_]+]] = arith.cmpi slt, [[COL]], [[N]] : i32
// CHECK-NEXT: [[OK:%[a-z0-9_]+]] = arith.andi [[ROK0]], [[COK]] : i1
// CHECK-NEXT: scf.if [[OK]] {
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = arith.truncf [[R4]] : f32 to bf16
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P0]][8] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[V]], [[P]] {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK-NEXT: }
// CHECK-NEXT: [[OK:%[a-z0-9_]+]] = arith.andi [[ROK8]], [[COK]] : i1
// CHECK-NEXT: scf.if [[OK]] {
// CHECK-NEXT: [[V:%[a-z0-9_]+]] = arith.truncf [[R6]] : f32 to bf16
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[P8]][8] : (!llvm.ptr<1>) -> !llvm.ptr<1>, bf16
// CHECK-NEXT: llvm.store [[V]], [[P]] {alignment = 2 : i64} : bf16, !llvm.ptr<1>
// CHECK-NEXT: }
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
