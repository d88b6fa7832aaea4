// RUN: warploom-opt %s --wl-tile=block-n=64 --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// The staged epilogue (C through smem and TMA) followed through the data flow, at block-n 64 (one chunk):
// warp w of a consumer warpgroup owns fragment rows 16w .. 16w + 15; lane l holds rows r0 = 16w + l/4 and
// r0 + 8 and columns 8j + 2(l % 4) + {0, 1}; register 4j + 2h + e holds (r0 + 8h, 8j + 2(l % 4) + e)
// (gpu-facts.md section 3). The pair is written at byte (wg * 64 + row) * 128 + 2 * column of the chunk (one
// 128-byte swizzle span a row), XOR-swizzled (bits [7,10) into [4,7)), at the staging region's offset 98304.
// The warpgroup's first thread then stores its 64 rows with one TMA box at (n0, m0 + 64 wg).

// CHECK-LABEL: llvm.func @wl_gemm_bf16_kn_128x64x64_s4(
// CHECK: [[TID:%[0-9]+]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK: [[CTAX:%[0-9]+]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK-NEXT: [[N0:%[0-9]+]] = arith.muli [[CTAX]], %c64_i32 : i32
// CHECK: [[CTAY:%[0-9]+]] = nvvm.read.ptx.sreg.ctaid.y : i32
// CHECK-NEXT: [[M0:%[0-9]+]] = arith.muli [[CTAY]], %c128_i32 : i32
// CHECK: nvvm.setmaxregister increase 232
// CHECK-NEXT: [[WG:%[0-9]+]] = arith.subi %{{[0-9]+}}, %c1_i32 : i32
// CHECK-NEXT: [[TIW:%[0-9]+]] = arith.remui [[TID]], %c128_i32 : i32
// CHECK-NEXT: [[LEADER:%[0-9]+]] = arith.cmpi eq, [[TIW]], %c0_i32 : i32
// CHECK: [[ACC:%[0-9]+]] = scf.for
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK-NEXT: [[V0:%[0-9]+]] = llvm.extractvalue [[ACC]][0]
// CHECK-NEXT: [[V1:%[0-9]+]] = llvm.extractvalue [[ACC]][1]
// CHECK-NEXT: [[V2:%[0-9]+]] = llvm.extractvalue [[ACC]][2]
// CHECK-NEXT: [[V3:%[0-9]+]] = llvm.extractvalue [[ACC]][3]

// The thread's row and column, then the byte offsets of its first pair in rows r0 and r0 + 8:
// CHECK: [[LANE:%[0-9]+]] = arith.remui [[TID]], %c32_i32 : i32
// CHECK-NEXT: [[WARP:%[0-9]+]] = arith.divui [[TIW]], %c32_i32 : i32
// CHECK-NEXT: [[WGROW:%[0-9]+]] = arith.muli [[WG]], %c64_i32 : i32
// CHECK-NEXT: [[Q:%[0-9]+]] = arith.remui [[LANE]], %c4_i32 : i32
// CHECK-NEXT: [[COL:%[0-9]+]] = arith.muli [[Q]], %c2_i32 : i32
// CHECK-NEXT: [[COLB:%[0-9]+]] = arith.muli [[COL]], %c2_i32 : i32
// CHECK-NEXT: [[W16:%[0-9]+]] = arith.muli [[WARP]], %c16_i32 : i32
// CHECK-NEXT: [[L4:%[0-9]+]] = arith.divui [[LANE]], %c4_i32 : i32
// CHECK-NEXT: [[R:%[0-9]+]] = arith.addi [[W16]], [[L4]] : i32
// CHECK-NEXT: [[R0:%[0-9]+]] = arith.addi [[R]], %c0_i32 : i32
// CHECK-NEXT: [[ROW0:%[0-9]+]] = arith.addi [[WGROW]], [[R0]] : i32
// CHECK-NEXT: [[RB0:%[0-9]+]] = arith.muli [[ROW0]], %c128_i32 : i32
// CHECK-NEXT: [[AT0:%[0-9]+]] = arith.addi [[RB0]], [[COLB]] : i32
// CHECK-NEXT: [[W16B:%[0-9]+]] = arith.muli [[WARP]], %c16_i32 : i32
// CHECK-NEXT: [[L4B:%[0-9]+]] = arith.divui [[LANE]], %c4_i32 : i32
// CHECK-NEXT: [[RB:%[0-9]+]] = arith.addi [[W16B]], [[L4B]] : i32
// CHECK-NEXT: [[R8:%[0-9]+]] = arith.addi [[RB]], %c8_i32 : i32
// CHECK-NEXT: [[ROW8:%[0-9]+]] = arith.addi [[WGROW]], [[R8]] : i32
// CHECK-NEXT: [[RB8:%[0-9]+]] = arith.muli [[ROW8]], %c128_i32 : i32
// CHECK-NEXT: [[AT8:%[0-9]+]] = arith.addi [[RB8]], [[COLB]] : i32
// CHECK-NEXT: [[BAR:%[0-9]+]] = arith.addi %c1_i32, [[WG]] : i32
// CHECK-NEXT: [[SRC:%[0-9]+]] = arith.muli [[WGROW]], %c128_i32 : i32

// The buffer is free (its last store read it), the warpgroup syncs on its own `epilogue` instance (id 1 + wg):
// CHECK-NEXT: scf.if [[LEADER]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.barrier id = [[BAR]] number_of_threads = %c128_i32

// Columns 0-7 (j = 0): registers 0, 1 to row r0 and 2, 3 to row r0 + 8, swizzled, at the staging offset.
// CHECK-NEXT: [[A0:%[0-9]+]] = arith.addi [[AT0]], %c0_i32 : i32
// CHECK-NEXT: [[M0A:%[0-9]+]] = arith.andi [[A0]], %c896_i32 : i32
// CHECK-NEXT: [[M0S:%[0-9]+]] = arith.shrui [[M0A]], %c3_i32 : i32
// CHECK-NEXT: [[S0:%[0-9]+]] = arith.xori [[A0]], [[M0S]] : i32
// CHECK-NEXT: [[U0:%[0-9]+]] = llvm.mlir.undef : vector<2xf32>
// CHECK-NEXT: [[P0A:%[0-9]+]] = llvm.insertelement [[V0]], [[U0]][%c0_i32 : i32] : vector<2xf32>
// CHECK-NEXT: [[P0B:%[0-9]+]] = llvm.insertelement [[V1]], [[P0A]][%c1_i32 : i32] : vector<2xf32>
// CHECK-NEXT: [[H0:%[0-9]+]] = llvm.fptrunc [[P0B]] : vector<2xf32> to vector<2xbf16>
// CHECK-NEXT: [[B0:%[0-9]+]] = llvm.bitcast [[H0]] : vector<2xbf16> to i32
// CHECK-NEXT: [[O0:%[0-9]+]] = arith.addi [[S0]], %c98304_i32 : i32
// CHECK-NEXT: [[G0:%[0-9]+]] = llvm.getelementptr %{{[0-9]+}}[[[O0]]] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK-NEXT: llvm.store [[B0]], [[G0]] {alignment = 4 : i64} : i32, !llvm.ptr<3>
// CHECK-NEXT: [[A8:%[0-9]+]] = arith.addi [[AT8]], %c0_i32 : i32
// CHECK: llvm.insertelement [[V2]], %{{[0-9]+}}[%c0_i32 : i32] : vector<2xf32>
// CHECK-NEXT: llvm.insertelement [[V3]], %{{[0-9]+}}[%c1_i32 : i32] : vector<2xf32>
// Columns 8-15 (j = 1) start 16 bytes on:
// CHECK: arith.addi [[AT0]], %c16_i32 : i32
// CHECK: arith.addi [[AT8]], %c16_i32 : i32

// 16 pairs a thread, then the fence, the second sync, and the TMA store of the warpgroup's rows by its first thread.
// CHECK: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK-NEXT: nvvm.barrier id = [[BAR]] number_of_threads = %c128_i32
// CHECK-NEXT: scf.if [[LEADER]] {
// CHECK-NEXT: [[SO:%[0-9]+]] = arith.addi [[SRC]], %c98304_i32 : i32
// CHECK-NEXT: [[SP:%[0-9]+]] = llvm.getelementptr %{{[0-9]+}}[[[SO]]]
// CHECK-NEXT: [[CN:%[0-9]+]] = arith.addi [[N0]], %c0_i32 : i32
// CHECK-NEXT: [[CM:%[0-9]+]] = arith.addi [[M0]], [[WGROW]] : i32
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.global.shared.cta %arg2, [[SP]], box[[[CN]], [[CM]]] : !llvm.ptr, <3>
// CHECK-NEXT: nvvm.cp.async.bulk.commit.group
// CHECK-NEXT: }
// CHECK-NEXT: scf.if [[LEADER]] {
// CHECK-NEXT: nvvm.cp.async.bulk.wait_group 0 {read}
// CHECK-NEXT: }
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
