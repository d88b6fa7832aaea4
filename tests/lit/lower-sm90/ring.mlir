// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s --check-prefixes=CHECK,S4
// RUN: warploom-opt %s --wl-tile=block-n=128 --wl-pipeline=stages=3 --wl-specialize=mma-in-flight=2 --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s --check-prefixes=CHECK,S3

// The mbarrier ring protocol of the lowered sm_90a GEMM (bf16, B "nk", 128x128x64), followed through the
// data flow: every SSA value is captured where it is defined and matched where it is used, so a check
// fails when an operand changes, not only when an op goes missing.
//   S4 = 4 stages, one MMA group kept in flight (lag 1)  -> barriers full[s] at 163840 + 8s, empty[s] at 163872 + 8s
//   S3 = 3 stages, two MMA groups in flight (lag 2)      -> barriers full[s] at  131072 + 8s, empty[s] at  131096 + 8s
// Each config has its own ring size and lag so that a stage or lag taken from the wrong constant shows up.
// Constants are hoisted to the function entry: capture them by value there (CHECK-DAG); lines that
// would match the same constant twice (the lag 1 is also the phase mask 1) live under one prefix only.

// CHECK-LABEL: llvm.func @wl_gemm_bf16_nk_128x128x64_s{{[34]}}(
// CHECK-SAME: [[TMA:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[TMB:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[TMC:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[M:%[a-z0-9_]+]]: i32, [[N:%[a-z0-9_]+]]: i32, [[K:%[a-z0-9_]+]]: i32)
// CHECK-DAG: [[C0:%[a-z0-9_]+]] = arith.constant 0 : i32
// CHECK-DAG: [[C1:%[a-z0-9_]+]] = arith.constant 1 : i32
// CHECK-DAG: [[C2:%[a-z0-9_]+]] = arith.constant 2 : i32
// CHECK-DAG: [[C8:%[a-z0-9_]+]] = arith.constant 8 : i32
// CHECK-DAG: [[C63:%[a-z0-9_]+]] = arith.constant 63 : i32
// CHECK-DAG: [[C64:%[a-z0-9_]+]] = arith.constant 64 : i32
// CHECK-DAG: [[C128:%[a-z0-9_]+]] = arith.constant 128 : i32
// tx bytes per stage = the A tile (128 x 64 bf16 = 16384 B) + the B tile (128 x 64 bf16 = 16384 B)
// CHECK-DAG: [[TX:%[a-z0-9_]+]] = arith.constant 32768 : i32
// S4-DAG: [[S:%[a-z0-9_]+]] = arith.constant 4 : i32
// S4-DAG: [[C3:%[a-z0-9_]+]] = arith.constant 3 : i32
// S4-DAG: [[FULL0:%[a-z0-9_]+]] = arith.constant 163840 : i32
// S4-DAG: [[FULL1:%[a-z0-9_]+]] = arith.constant 163848 : i32
// S4-DAG: [[FULL2:%[a-z0-9_]+]] = arith.constant 163856 : i32
// S4-DAG: [[FULL3:%[a-z0-9_]+]] = arith.constant 163864 : i32
// S4-DAG: [[EMPTY0:%[a-z0-9_]+]] = arith.constant 163872 : i32
// S4-DAG: [[EMPTY1:%[a-z0-9_]+]] = arith.constant 163880 : i32
// S4-DAG: [[EMPTY2:%[a-z0-9_]+]] = arith.constant 163888 : i32
// S4-DAG: [[EMPTY3:%[a-z0-9_]+]] = arith.constant 163896 : i32
// S3-DAG: [[S:%[a-z0-9_]+]] = arith.constant 3 : i32
// S3-DAG: [[FULL0:%[a-z0-9_]+]] = arith.constant 131072 : i32
// S3-DAG: [[FULL1:%[a-z0-9_]+]] = arith.constant 131080 : i32
// S3-DAG: [[FULL2:%[a-z0-9_]+]] = arith.constant 131088 : i32
// S3-DAG: [[EMPTY0:%[a-z0-9_]+]] = arith.constant 131096 : i32
// S3-DAG: [[EMPTY1:%[a-z0-9_]+]] = arith.constant 131104 : i32
// S3-DAG: [[EMPTY2:%[a-z0-9_]+]] = arith.constant 131112 : i32

// CHECK: [[TID:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK: [[BASE:%[a-z0-9_]+]] = llvm.getelementptr %{{[a-z0-9_]+}}[%{{[a-z0-9_]+}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// K tiles: ceil(K / 64)
// CHECK: [[KUP:%[a-z0-9_]+]] = arith.addi [[K]], [[C63]] : i32
// CHECK-NEXT: [[TRIPS:%[a-z0-9_]+]] = arith.divui [[KUP]], [[C64]] : i32

// Thread 0 initialises each barrier at its planned address: full[s] completes on 1 arrival (the
// producer's arrive.expect_tx, plus the tx bytes), empty[s] on 2 (one thread per consumer warpgroup).
// Then the init is fenced for the async proxy before the CTA barrier.
// CHECK-NEXT: [[IS_T0:%[a-z0-9_]+]] = arith.cmpi eq, [[TID]], [[C0]] : i32
// CHECK-NEXT: scf.if [[IS_T0]] {
// CHECK-NEXT: [[B:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[FULL0]]{{\]}}
// CHECK-NEXT: nvvm.mbarrier.init [[B]], [[C1]] : !llvm.ptr<3>, i32
// CHECK-NEXT: [[B:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[FULL1]]{{\]}}
// CHECK-NEXT: nvvm.mbarrier.init [[B]], [[C1]] : !llvm.ptr<3>, i32
// CHECK-NEXT: [[B:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[FULL2]]{{\]}}
// CHECK-NEXT: nvvm.mbarrier.init [[B]], [[C1]] : !llvm.ptr<3>, i32
// S4-NEXT: [[B:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[FULL3]]{{\]}}
// S4-NEXT: nvvm.mbarrier.init [[B]], [[C1]] : !llvm.ptr<3>, i32
// CHECK-NEXT: [[B:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[EMPTY0]]{{\]}}
// CHECK-NEXT: nvvm.mbarrier.init [[B]], [[C2]] : !llvm.ptr<3>, i32
// CHECK-NEXT: [[B:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[EMPTY1]]{{\]}}
// CHECK-NEXT: nvvm.mbarrier.init [[B]], [[C2]] : !llvm.ptr<3>, i32
// CHECK-NEXT: [[B:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[EMPTY2]]{{\]}}
// CHECK-NEXT: nvvm.mbarrier.init [[B]], [[C2]] : !llvm.ptr<3>, i32
// S4-NEXT: [[B:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[EMPTY3]]{{\]}}
// S4-NEXT: nvvm.mbarrier.init [[B]], [[C2]] : !llvm.ptr<3>, i32
// CHECK-NEXT: nvvm.fence.mbarrier.init
// CHECK-NEXT: }
// CHECK-NEXT: nvvm.barrier
// CHECK-NEXT: [[WG:%[a-z0-9_]+]] = arith.divui [[TID]], [[C128]] : i32

// Producer (warpgroup 0, one elected thread). Ring iteration it = kt (grid schedule):
// stage = it % S, phase = (it / S) & 1. It waits for empty[stage] on the *opposite* phase (a fresh
// barrier is in phase 0, so the first lap passes at once), then arms full[stage] with the tx bytes
// and issues the TMA loads that complete it.
// CHECK: nvvm.setmaxregister decrease 40
// CHECK: nvvm.elect.sync
// CHECK: scf.for [[KT:%[a-z0-9_]+]] = [[C0]] to [[TRIPS]] step [[C1]] : i32 {
// CHECK-NEXT: [[STAGE:%[a-z0-9_]+]] = arith.remui [[KT]], [[S]] : i32
// CHECK-NEXT: [[LAP:%[a-z0-9_]+]] = arith.divui [[KT]], [[S]] : i32
// CHECK-NEXT: [[PHASE:%[a-z0-9_]+]] = arith.andi [[LAP]], [[C1]] : i32
// CHECK-NEXT: [[FLIPPED:%[a-z0-9_]+]] = arith.xori [[PHASE]], [[C1]] : i32
// CHECK-NEXT: [[OFF:%[a-z0-9_]+]] = arith.muli [[STAGE]], [[C8]] : i32
// CHECK-NEXT: [[ADDR:%[a-z0-9_]+]] = arith.addi [[EMPTY0]], [[OFF]] : i32
// CHECK-NEXT: [[EMPTY:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[ADDR]]{{\]}}
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity [[EMPTY]], [[FLIPPED]], %{{[a-z0-9_]+}} : !llvm.ptr<3>, i32, i32
// CHECK-NEXT: [[OFF:%[a-z0-9_]+]] = arith.muli [[STAGE]], [[C8]] : i32
// CHECK-NEXT: [[ADDR:%[a-z0-9_]+]] = arith.addi [[FULL0]], [[OFF]] : i32
// CHECK-NEXT: [[FULL:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[ADDR]]{{\]}}
// CHECK-NEXT: nvvm.mbarrier.arrive.expect_tx [[FULL]], [[TX]] : !llvm.ptr<3>, i32 -> i64
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{[a-z0-9_]+}}, [[TMA]], [[FULL]], box
// CHECK: nvvm.cp.async.bulk.tensor.shared.cluster.global %{{[a-z0-9_]+}}, [[TMB]], [[FULL]], box
// CHECK-NEXT: }

// Consumers (warpgroups 1 and 2): the same stage and phase; they wait for full[stage] on the phase
// itself (no flip).
// CHECK: } else {
// CHECK-NEXT: nvvm.setmaxregister increase 232
// CHECK-NEXT: [[WGI:%[a-z0-9_]+]] = arith.subi [[WG]], [[C1]] : i32
// CHECK-NEXT: [[TIW:%[a-z0-9_]+]] = arith.remui [[TID]], [[C128]] : i32
// CHECK-NEXT: [[LEADER:%[a-z0-9_]+]] = arith.cmpi eq, [[TIW]], [[C0]] : i32
// CHECK: scf.for [[KT:%[a-z0-9_]+]] = [[C0]] to [[TRIPS]] step [[C1]] iter_args
// CHECK-NEXT: [[STAGE:%[a-z0-9_]+]] = arith.remui [[KT]], [[S]] : i32
// CHECK-NEXT: [[LAP:%[a-z0-9_]+]] = arith.divui [[KT]], [[S]] : i32
// CHECK-NEXT: [[PHASE:%[a-z0-9_]+]] = arith.andi [[LAP]], [[C1]] : i32
// CHECK-NEXT: [[OFF:%[a-z0-9_]+]] = arith.muli [[STAGE]], [[C8]] : i32
// CHECK-NEXT: [[ADDR:%[a-z0-9_]+]] = arith.addi [[FULL0]], [[OFF]] : i32
// CHECK-NEXT: [[FULL:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[ADDR]]{{\]}}
// CHECK-NEXT: nvvm.mbarrier.try_wait.parity [[FULL]], [[PHASE]], %{{[a-z0-9_]+}} : !llvm.ptr<3>, i32, i32

// After the MMAs of iteration it, `lag` groups stay in flight (wait_group lag), so the stage that may
// be refilled is the one of iteration it - lag: (it + S - lag) % S, freed by one thread per
// warpgroup, and only from it >= lag on (earlier iterations have no such stage).
//   S4 has lag 1 -> (it + 3) % 4, it >= 1;  S3 has lag 2 -> (it + 1) % 3, it >= 2
// CHECK: nvvm.wgmma.commit.group.sync.aligned
// S4-NEXT: nvvm.wgmma.wait.group.sync.aligned 1
// S4-NEXT: [[PREV:%[a-z0-9_]+]] = arith.addi [[KT]], [[C3]] : i32
// S3-NEXT: nvvm.wgmma.wait.group.sync.aligned 2
// S3-NEXT: [[PREV:%[a-z0-9_]+]] = arith.addi [[KT]], [[C1]] : i32
// CHECK-NEXT: [[PSTAGE:%[a-z0-9_]+]] = arith.remui [[PREV]], [[S]] : i32
// CHECK-NEXT: [[OFF:%[a-z0-9_]+]] = arith.muli [[PSTAGE]], [[C8]] : i32
// CHECK-NEXT: [[ADDR:%[a-z0-9_]+]] = arith.addi [[EMPTY0]], [[OFF]] : i32
// CHECK-NEXT: [[EMPTY:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[ADDR]]{{\]}}
// S4-NEXT: [[LAGGED:%[a-z0-9_]+]] = arith.cmpi uge, [[KT]], [[C1]] : i32
// S3-NEXT: [[LAGGED:%[a-z0-9_]+]] = arith.cmpi uge, [[KT]], [[C2]] : i32
// CHECK-NEXT: [[FREE:%[a-z0-9_]+]] = arith.andi [[LEADER]], [[LAGGED]] : i1
// CHECK-NEXT: scf.if [[FREE]] {
// CHECK-NEXT: nvvm.mbarrier.arrive [[EMPTY]] : !llvm.ptr<3> -> i64
// CHECK-NEXT: }
// CHECK-NEXT: scf.yield
// CHECK-NEXT: }
// The accumulators are final only once every group retired.
// CHECK-NEXT: nvvm.wgmma.wait.group.sync.aligned 0
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = true} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
