// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s --check-prefixes=CHECK,KN
// RUN: sed -e 's/transpose_b = false/transpose_b = true/' %s | warploom-opt --wl-tile=block-n=128 --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s --check-prefixes=CHECK,NK

// Where the operands come from and how the MMAs read them, followed through the data flow
// (bf16, 4 stages, BK = 64: one K tile row is 64 x 2 B = 128 B, the swizzle width):
//   KN = B row-major [K, N], tile 128x256x64: A stages of 16384 B at 0, B stages of 32768 B at 65536
//   NK = B given as [N, K], tile 128x128x64: A stages of 16384 B at 0, B stages of 16384 B at 65536
// The producer's TMA boxes: coordinates innermost (contiguous) dim first, K origin = kt * 64.
// The consumers' wgmma smem descriptors: (base + offset) >> 4 in the address field, or-ed with the
// static bits, advanced per k16 step.

// CHECK-LABEL: llvm.func @wl_gemm_bf16_{{kn|nk}}_128x{{256|128}}x64_s4(
// CHECK-SAME: [[TMA:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[TMB:%[a-z0-9_]+]]: !llvm.ptr {{.*}}, [[TMC:%[a-z0-9_]+]]: !llvm.ptr {{.*}}
// CHECK-DAG: [[C1:%[a-z0-9_]+]] = arith.constant 1 : i32
// CHECK-DAG: [[C4:%[a-z0-9_]+]] = arith.constant 4 : i32
// CHECK-DAG: [[C64:%[a-z0-9_]+]] = arith.constant 64 : i32
// CHECK-DAG: [[C128:%[a-z0-9_]+]] = arith.constant 128 : i32
// CHECK-DAG: [[C8192:%[a-z0-9_]+]] = arith.constant 8192 : i32
// CHECK-DAG: [[C16384:%[a-z0-9_]+]] = arith.constant 16384 : i32
// CHECK-DAG: [[C65536:%[a-z0-9_]+]] = arith.constant 65536 : i32
// CHECK-DAG: [[MASK18:%[a-z0-9_]+]] = arith.constant 262143 : i64
// CHECK-DAG: [[C4_64:%[a-z0-9_]+]] = arith.constant 4 : i64
// CHECK-DAG: [[C2_64:%[a-z0-9_]+]] = arith.constant 2 : i64
// CHECK-DAG: [[C6_64:%[a-z0-9_]+]] = arith.constant 6 : i64
// The static descriptor bits (gpu-facts.md section 3): [16,30) LBO >> 4, [32,46) SBO >> 4,
// [49,52) base offset (0: every tile starts on a 1024 B swizzle repeat), [62,64) swizzle (1 = 128B).
// K-major (A, and B in NK): LBO unused, 16 B by convention -> 1 << 16 = 0x10000;
//   SBO = 8 rows x 128 B = 1024 B -> 64 << 32 = 0x40_0000_0000; swizzle 1 << 62 = 0x4000_0000_0000_0000;
//   0x4000_0040_0001_0000 = 4611686293305360384
// CHECK-DAG: [[KMAJOR:%[a-z0-9_]+]] = arith.constant 4611686293305360384 : i64
// MN-major (B in KN): LBO = distance between 64-wide N chunks = one TMA box of 64 K rows x 128 B
//   = 8192 B -> 512 << 16 = 0x200_0000; SBO = 8 K rows x 128 B = 1024 B -> 0x40_0000_0000; swizzle as above;
//   0x4000_0040_0200_0000 = 4611686293338849280
// KN-DAG: [[MNMAJOR:%[a-z0-9_]+]] = arith.constant 4611686293338849280 : i64
// k16 steps, in 16-byte units of the address field: K-major moves 16 elements x 2 B = 32 B -> 2, 4, 6;
// MN-major moves 16 K rows x 128 B = 2048 B -> 128, 256, 384.
// KN-DAG: [[C128_64:%[a-z0-9_]+]] = arith.constant 128 : i64
// KN-DAG: [[C256_64:%[a-z0-9_]+]] = arith.constant 256 : i64
// KN-DAG: [[C384_64:%[a-z0-9_]+]] = arith.constant 384 : i64
// KN-DAG: [[C256:%[a-z0-9_]+]] = arith.constant 256 : i32
// KN-DAG: [[C192:%[a-z0-9_]+]] = arith.constant 192 : i32
// KN-DAG: [[C24576:%[a-z0-9_]+]] = arith.constant 24576 : i32
// KN-DAG: [[C32768:%[a-z0-9_]+]] = arith.constant 32768 : i32

// CTA tile origins: n0 = ctaid.x * BN, m0 = ctaid.y * 128.
// CHECK: [[TID:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: [[CTAX:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.ctaid.x : i32
// KN-NEXT: [[N0:%[a-z0-9_]+]] = arith.muli [[CTAX]], [[C256]] : i32
// NK-NEXT: [[N0:%[a-z0-9_]+]] = arith.muli [[CTAX]], [[C128]] : i32
// CHECK-NEXT: [[CTAY:%[a-z0-9_]+]] = nvvm.read.ptx.sreg.ctaid.y : i32
// CHECK-NEXT: [[M0:%[a-z0-9_]+]] = arith.muli [[CTAY]], [[C128]] : i32
// The descriptors' address field of the 1024-aligned smem base: (addr & 0x3FFFF) >> 4.
// CHECK: [[BASE:%[a-z0-9_]+]] = llvm.getelementptr %{{[a-z0-9_]+}}[%{{[a-z0-9_]+}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK-NEXT: [[BASE64:%[a-z0-9_]+]] = llvm.ptrtoint [[BASE]] : !llvm.ptr<3> to i64
// CHECK-NEXT: [[MASKED:%[a-z0-9_]+]] = arith.andi [[BASE64]], [[MASK18]] : i64
// CHECK-NEXT: [[BASE_ENC:%[a-z0-9_]+]] = arith.shrui [[MASKED]], [[C4_64]] : i64
// CHECK: nvvm.barrier
// CHECK-NEXT: [[WG:%[a-z0-9_]+]] = arith.divui [[TID]], [[C128]] : i32

// Producer: A box [K origin, m0] into A's stage; B boxes into B's stage.
// CHECK: scf.for [[KT:%[a-z0-9_]+]] = {{.*}} : i32 {
// CHECK-NEXT: [[STAGE:%[a-z0-9_]+]] = arith.remui [[KT]], [[C4]] : i32
// CHECK: nvvm.mbarrier.arrive.expect_tx [[FULL:%[a-z0-9_]+]], %{{[a-z0-9_]+}}
// CHECK-NEXT: [[AOFF:%[a-z0-9_]+]] = arith.muli [[STAGE]], [[C16384]] : i32
// CHECK-NEXT: [[K0:%[a-z0-9_]+]] = arith.muli [[KT]], [[C64]] : i32
// CHECK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[AOFF]]{{\]}}
// CHECK-NEXT: [[D:%[a-z0-9_]+]] = llvm.addrspacecast [[P]] : !llvm.ptr<3> to !llvm.ptr<7>
// CHECK-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global [[D]], [[TMA]], [[FULL]], box{{\[}}[[K0]], [[M0]]{{\]}} : !llvm.ptr<7>, !llvm.ptr
// NK loads one B box [K origin, n0] of 128 N rows x 64 K.
// NK-NEXT: [[BST:%[a-z0-9_]+]] = arith.muli [[STAGE]], [[C16384]] : i32
// NK-NEXT: [[BOFF:%[a-z0-9_]+]] = arith.addi [[C65536]], [[BST]] : i32
// NK-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[BOFF]]{{\]}}
// NK-NEXT: [[D:%[a-z0-9_]+]] = llvm.addrspacecast [[P]] : !llvm.ptr<3> to !llvm.ptr<7>
// NK-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global [[D]], [[TMB]], [[FULL]], box{{\[}}[[K0]], [[N0]]{{\]}} : !llvm.ptr<7>, !llvm.ptr
// KN loads four B boxes of 64 N (128 B) x 64 K rows: box j at [n0 + 64 j, K origin], stored 64 x 128 B = 8192 B apart.
// KN-NEXT: [[BST:%[a-z0-9_]+]] = arith.muli [[STAGE]], [[C32768]] : i32
// KN-NEXT: [[BOFF:%[a-z0-9_]+]] = arith.addi [[C65536]], [[BST]] : i32
// KN-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[BOFF]]{{\]}}
// KN-NEXT: [[D:%[a-z0-9_]+]] = llvm.addrspacecast [[P]] : !llvm.ptr<3> to !llvm.ptr<7>
// KN-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global [[D]], [[TMB]], [[FULL]], box{{\[}}[[N0]], [[K0]]{{\]}} : !llvm.ptr<7>, !llvm.ptr
// KN-NEXT: [[NJ:%[a-z0-9_]+]] = arith.addi [[N0]], [[C64]] : i32
// KN-NEXT: [[OFF:%[a-z0-9_]+]] = arith.addi [[BOFF]], [[C8192]] : i32
// KN-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[OFF]]{{\]}}
// KN-NEXT: [[D:%[a-z0-9_]+]] = llvm.addrspacecast [[P]] : !llvm.ptr<3> to !llvm.ptr<7>
// KN-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global [[D]], [[TMB]], [[FULL]], box{{\[}}[[NJ]], [[K0]]{{\]}} : !llvm.ptr<7>, !llvm.ptr
// KN-NEXT: [[NJ:%[a-z0-9_]+]] = arith.addi [[N0]], [[C128]] : i32
// KN-NEXT: [[OFF:%[a-z0-9_]+]] = arith.addi [[BOFF]], [[C16384]] : i32
// KN-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[OFF]]{{\]}}
// KN-NEXT: [[D:%[a-z0-9_]+]] = llvm.addrspacecast [[P]] : !llvm.ptr<3> to !llvm.ptr<7>
// KN-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global [[D]], [[TMB]], [[FULL]], box{{\[}}[[NJ]], [[K0]]{{\]}} : !llvm.ptr<7>, !llvm.ptr
// KN-NEXT: [[NJ:%[a-z0-9_]+]] = arith.addi [[N0]], [[C192]] : i32
// KN-NEXT: [[OFF:%[a-z0-9_]+]] = arith.addi [[BOFF]], [[C24576]] : i32
// KN-NEXT: [[P:%[a-z0-9_]+]] = llvm.getelementptr [[BASE]]{{\[}}[[OFF]]{{\]}}
// KN-NEXT: [[D:%[a-z0-9_]+]] = llvm.addrspacecast [[P]] : !llvm.ptr<3> to !llvm.ptr<7>
// KN-NEXT: nvvm.cp.async.bulk.tensor.shared.cluster.global [[D]], [[TMB]], [[FULL]], box{{\[}}[[NJ]], [[K0]]{{\]}} : !llvm.ptr<7>, !llvm.ptr
// CHECK-NEXT: }

// Consumers: warpgroup i (0 or 1 inside the role) reads A from its own 64 rows: 64 x 128 B = 8192 B in.
// CHECK: nvvm.setmaxregister increase 232
// CHECK-NEXT: [[WGI:%[a-z0-9_]+]] = arith.subi [[WG]], [[C1]] : i32
// CHECK: scf.for [[KT:%[a-z0-9_]+]] = {{.*}} iter_args([[ACC0:%[a-z0-9_]+]] = %{{[a-z0-9_]+}})
// CHECK-NEXT: [[STAGE:%[a-z0-9_]+]] = arith.remui [[KT]], [[C4]] : i32
// CHECK: nvvm.mbarrier.try_wait.parity
// CHECK-NEXT: [[AROWS:%[a-z0-9_]+]] = arith.muli [[WGI]], [[C8192]] : i32
// CHECK-NEXT: [[AST:%[a-z0-9_]+]] = arith.muli [[STAGE]], [[C16384]] : i32
// CHECK-NEXT: [[AOFF:%[a-z0-9_]+]] = arith.addi [[AST]], [[AROWS]] : i32
// CHECK-NEXT: [[AENC:%[a-z0-9_]+]] = arith.shrui [[AOFF]], [[C4]] : i32
// CHECK-NEXT: [[AENC64:%[a-z0-9_]+]] = arith.extui [[AENC]] : i32 to i64
// CHECK-NEXT: [[ALO:%[a-z0-9_]+]] = arith.addi [[BASE_ENC]], [[AENC64]] : i64
// CHECK-NEXT: [[DA:%[a-z0-9_]+]] = arith.ori [[ALO]], [[KMAJOR]] : i64
// KN-NEXT: [[BST:%[a-z0-9_]+]] = arith.muli [[STAGE]], [[C32768]] : i32
// NK-NEXT: [[BST:%[a-z0-9_]+]] = arith.muli [[STAGE]], [[C16384]] : i32
// CHECK-NEXT: [[BOFF:%[a-z0-9_]+]] = arith.addi [[C65536]], [[BST]] : i32
// CHECK-NEXT: [[BENC:%[a-z0-9_]+]] = arith.shrui [[BOFF]], [[C4]] : i32
// CHECK-NEXT: [[BENC64:%[a-z0-9_]+]] = arith.extui [[BENC]] : i32 to i64
// CHECK-NEXT: [[BLO:%[a-z0-9_]+]] = arith.addi [[BASE_ENC]], [[BENC64]] : i64
// KN-NEXT: [[DB:%[a-z0-9_]+]] = arith.ori [[BLO]], [[MNMAJOR]] : i64
// NK-NEXT: [[DB:%[a-z0-9_]+]] = arith.ori [[BLO]], [[KMAJOR]] : i64
// CHECK-NEXT: nvvm.wgmma.fence.aligned
// Four k16 wgmmas chain the accumulator; B is <row> (MN-major, transposed) in KN, <col> (K-major) in NK.
// KN-NEXT: [[ACC1:%[a-z0-9_]+]] = nvvm.wgmma.mma_async [[DA]], [[DB]], [[ACC0]], <m = 64, n = 256, k = 16>, D[<f32>, <one>, <wrapped>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <row>]
// NK-NEXT: [[ACC1:%[a-z0-9_]+]] = nvvm.wgmma.mma_async [[DA]], [[DB]], [[ACC0]], <m = 64, n = 128, k = 16>, D[<f32>, <one>, <wrapped>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]
// CHECK-NEXT: [[DAK:%[a-z0-9_]+]] = arith.addi [[DA]], [[C2_64]] : i64
// KN-NEXT: [[DBK:%[a-z0-9_]+]] = arith.addi [[DB]], [[C128_64]] : i64
// NK-NEXT: [[DBK:%[a-z0-9_]+]] = arith.addi [[DB]], [[C2_64]] : i64
// CHECK-NEXT: [[ACC2:%[a-z0-9_]+]] = nvvm.wgmma.mma_async [[DAK]], [[DBK]], [[ACC1]],
// CHECK-NEXT: [[DAK:%[a-z0-9_]+]] = arith.addi [[DA]], [[C4_64]] : i64
// KN-NEXT: [[DBK:%[a-z0-9_]+]] = arith.addi [[DB]], [[C256_64]] : i64
// NK-NEXT: [[DBK:%[a-z0-9_]+]] = arith.addi [[DB]], [[C4_64]] : i64
// CHECK-NEXT: [[ACC3:%[a-z0-9_]+]] = nvvm.wgmma.mma_async [[DAK]], [[DBK]], [[ACC2]],
// CHECK-NEXT: [[DAK:%[a-z0-9_]+]] = arith.addi [[DA]], [[C6_64]] : i64
// KN-NEXT: [[DBK:%[a-z0-9_]+]] = arith.addi [[DB]], [[C384_64]] : i64
// NK-NEXT: [[DBK:%[a-z0-9_]+]] = arith.addi [[DB]], [[C6_64]] : i64
// CHECK-NEXT: [[ACC4:%[a-z0-9_]+]] = nvvm.wgmma.mma_async [[DAK]], [[DBK]], [[ACC3]],
// CHECK-NEXT: nvvm.wgmma.commit.group.sync.aligned
// The loop carries the last wgmma's accumulator.
// CHECK: scf.yield [[ACC4]] :
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
