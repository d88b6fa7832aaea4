// RUN: warploom-opt %s --wl-tile=schedule=persistent --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s

// The persistent schedule's ring iteration (bf16, B "kn", 128x256x64, 4 stages). Each role walks the
// tiles t = ctaid.x, ctaid.x + nctaid.x, ... (n fastest), and its ring iteration counts on across
// them: it = (t - ctaid.x) / nctaid.x * trips + kt, so both roles agree on stage = it % 4 and
// phase = (it / 4) & 1 with the barriers' state after earlier tiles. The TMA K origin stays
// kt * 64 (the K tile of this tile), and the tile origins come from t.

// CHECK-LABEL: llvm.func @wl_gemm_bf16_kn_128x256x64_s4_persistent(
// CHECK-SAME: [[TMA:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[TMB:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[TMC:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[M:%[a-z0-9_]+]]: i32, [[N:%[a-z0-9_]+]]: i32, [[K:%[a-z0-9_]+]]: i32)
// CHECK-DAG: [[C0:%[a-z0-9_]+]] = arith.constant 0 : i32
// CHECK-DAG: [[C1:%[a-z0-9_]+]] = arith.constant 1 : i32
// CHECK-DAG: [[C3:%[a-z0-9_]+]] = arith.constant 3 : i32
// CHECK-DAG: [[C4:%[a-z0-9_]+]] = arith.constant 4 : i32
// CHECK-DAG: [[C63:%[a-z0-9_]+]] = arith.constant 63 : i32
// CHECK-DAG: [[C64:%[a-z0-9_]+]] = arith.constant 64 : i32
// CHECK-DAG: [[C127:%[a-z0-9_]+]] = arith.constant 127 : i32
// CHECK-DAG: [[C128:%[a-z0-9_]+]] = arith.constant 128 : i32
// CHECK-DAG: [[C255:%[a-z0-9_]+]] = arith.constant 255 : i32
// CHECK-DAG: [[C256:%[a-z0-9_]+]] = arith.constant 256 : i32
// CHECK: [[KUP:%[a-z0-9_]+]] = arith.addi [[K]], [[C63]] : i32
// CHECK-NEXT: [[TRIPS:%[a-z0-9_]+]] = arith.divui [[KUP]], [[C64]] : i32

// Producer.
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: nvvm.elect.sync
// CHECK: [[X:%[a-z0-9_]+]] = arith.addi [[N]], [[C255]] : i32
// CHECK-NEXT: [[NTILES:%[a-z0-9_]+]] = arith.divui [[X]], [[C256]] : i32
// CHECK-NEXT: [[X:%[a-z0-9_]+]] = arith.addi [[M]], [[C127]] : i32
// CHECK-NEXT: [[MTILES:%[a-z0-9_]+]] = arith.divui [[X]], [[C128]] : i32
// CHECK-NEXT: [[FIRST:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK-NEXT: [[STEP:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.nctaid.x : i32
// CHECK-NEXT: [[TILES:%[a-z0-9_]+]] = arith.muli [[MTILES]], [[NTILES]] : i32
// CHECK-NEXT: scf.for [[TILE:%[a-z0-9_]+]] = [[FIRST]] to [[TILES]] step [[STEP]] : i32 {
// CHECK-NEXT: [[DONE:%[a-z0-9_]+]] = arith.subi [[TILE]], [[FIRST]] : i32
// CHECK-NEXT: [[NTH:%[a-z0-9_]+]] = arith.divui [[DONE]], [[STEP]] : i32
// CHECK-NEXT: [[IT0:%[a-z0-9_]+]] = arith.muli [[NTH]], [[TRIPS]] : i32
// CHECK-NEXT: [[X:%[a-z0-9_]+]] = arith.divui [[TILE]], [[NTILES]] : i32
// CHECK-NEXT: [[M0:%[a-z0-9_]+]] = arith.muli [[X]], [[C128]] : i32
// CHECK-NEXT: [[X:%[a-z0-9_]+]] = arith.remui [[TILE]], [[NTILES]] : i32
// CHECK-NEXT: [[N0:%[a-z0-9_]+]] = arith.muli [[X]], [[C256]] : i32
// CHECK-NEXT: scf.for [[KT:%[a-z0-9_]+]] = [[C0]] to [[TRIPS]] step [[C1]] : i32 {
// CHECK-NEXT: [[IT:%[a-z0-9_]+]] = arith.addi [[IT0]], [[KT]] : i32
// CHECK-NEXT: [[STAGE:%[a-z0-9_]+]] = arith.remui [[IT]], [[C4]] : i32
// CHECK-NEXT: [[LAP:%[a-z0-9_]+]] = arith.divui [[IT]], [[C4]] : i32
// CHECK-NEXT: [[PHASE:%[a-z0-9_]+]] = arith.andi [[LAP]], [[C1]] : i32
// CHECK-NEXT: [[FLIPPED:%[a-z0-9_]+]] = arith.xori [[PHASE]], [[C1]] : i32
// CHECK: nvvm.mbarrier.try_wait.parity %{{[a-z0-9_]+}}, [[FLIPPED]],
// CHECK: [[K0:%[a-z0-9_]+]] = arith.muli [[KT]], [[C64]] : i32
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{[a-z0-9_]+}}, [[TMA]], %{{[a-z0-9_]+}}, box{{\[}}[[K0]], [[M0]]{{\]}}
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{[a-z0-9_]+}}, [[TMB]], %{{[a-z0-9_]+}}, box{{\[}}[[N0]], [[K0]]{{\]}}

// Consumers: the same tiles, the same ring iteration; the lagged free uses it too.
// CHECK: nvvm.setmaxregister increase 232
// CHECK: [[X:%[a-z0-9_]+]] = arith.addi [[N]], [[C255]] : i32
// CHECK-NEXT: [[NTILES:%[a-z0-9_]+]] = arith.divui [[X]], [[C256]] : i32
// CHECK-NEXT: [[X:%[a-z0-9_]+]] = arith.addi [[M]], [[C127]] : i32
// CHECK-NEXT: [[MTILES:%[a-z0-9_]+]] = arith.divui [[X]], [[C128]] : i32
// CHECK-NEXT: [[FIRST:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.ctaid.x : i32
// CHECK-NEXT: [[STEP:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.nctaid.x : i32
// CHECK-NEXT: [[TILES:%[a-z0-9_]+]] = arith.muli [[MTILES]], [[NTILES]] : i32
// CHECK-NEXT: scf.for [[TILE:%[a-z0-9_]+]] = [[FIRST]] to [[TILES]] step [[STEP]] : i32 {
// CHECK-NEXT: [[DONE:%[a-z0-9_]+]] = arith.subi [[TILE]], [[FIRST]] : i32
// CHECK-NEXT: [[NTH:%[a-z0-9_]+]] = arith.divui [[DONE]], [[STEP]] : i32
// CHECK-NEXT: [[IT0:%[a-z0-9_]+]] = arith.muli [[NTH]], [[TRIPS]] : i32
// CHECK-NEXT: [[X:%[a-z0-9_]+]] = arith.divui [[TILE]], [[NTILES]] : i32
// CHECK-NEXT: [[M0:%[a-z0-9_]+]] = arith.muli [[X]], [[C128]] : i32
// CHECK-NEXT: [[X:%[a-z0-9_]+]] = arith.remui [[TILE]], [[NTILES]] : i32
// CHECK-NEXT: [[N0:%[a-z0-9_]+]] = arith.muli [[X]], [[C256]] : i32
// CHECK: scf.for [[KT:%[a-z0-9_]+]] = [[C0]] to [[TRIPS]] step [[C1]] iter_args
// CHECK-NEXT: [[IT:%[a-z0-9_]+]] = arith.addi [[IT0]], [[KT]] : i32
// CHECK-NEXT: [[STAGE:%[a-z0-9_]+]] = arith.remui [[IT]], [[C4]] : i32
// CHECK-NEXT: [[LAP:%[a-z0-9_]+]] = arith.divui [[IT]], [[C4]] : i32
// CHECK-NEXT: [[PHASE:%[a-z0-9_]+]] = arith.andi [[LAP]], [[C1]] : i32
// CHECK: nvvm.mbarrier.try_wait.parity %{{[a-z0-9_]+}}, [[PHASE]],
// CHECK: nvvm.wgmma.wait.group.sync.aligned 1
// CHECK-NEXT: [[PREV:%[a-z0-9_]+]] = arith.addi [[IT]], [[C3]] : i32
// CHECK-NEXT: arith.remui [[PREV]], [[C4]] : i32
// CHECK: arith.cmpi uge, [[IT]], [[C1]] : i32
// The epilogue stores at this tile's origin.
// CHECK: nvvm.wgmma.wait.group.sync.aligned 0
// CHECK: arith.addi [[M0]], %{{[a-z0-9_]+}} : i32
// CHECK: arith.addi [[N0]], %{{[a-z0-9_]+}} : i32
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
