// RUN: warploom-opt %s --wl-tile=exp2-poly=0.25 | FileCheck %s --check-prefix=TILE
// RUN: warploom-opt %s --wl-tile | FileCheck %s --check-prefix=NONE
// RUN: warploom-opt %s --wl-tile=exp2-poly=0.25 --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers --wl-lower-sm90 | FileCheck %s
// RUN: not warploom-opt %s --wl-tile=exp2-poly=0.3 2>&1 | FileCheck %s --check-prefix=ERR

// The sm_90a softmax with a share of its exp2 on the FMA units (warploom.lowering.emit.exp2, FA4's polynomial):
// exp2-poly = 0.25 puts the last 2 of each 8 scores a thread holds of a row on the polynomial. wl-tile records the
// share on the kernel (none by default at head dim 64); the kernel's name carries it (_p2: 2 of 8).
// TILE: "wl.kernel"
// TILE: exp2_poly = 2.500000e-01 : f32
// NONE-NOT: exp2_poly
// ERR: error: wl-tile: exp2-poly = 0.3: the share of exp2 by the FMA polynomial is the last k of each 8 columns a thread holds, a multiple of 1/8 in 0 .. 1; 0 by default (sm_90a, head dim 64)

// Lowered: the polynomial's constants (clamp -127, the rounding constant 1.5 * 2^23, c0 = 1), then in the softmax
// the thread's scores 0..11 of the S fragment (k = 0..5 of each row) by ex2.approx, score 12 (row 0, k = 6) by the
// polynomial: clamp, round to nearest by the constant, f = x - n, five FMAs (Horner, ending on c0 = 1), and n
// shifted into the exponent field (the rounded value's bits << 23) added to the polynomial's bits.
// CHECK: llvm.func @wl_attn_bf16_d64_128x128_s2_causal_ov_p2(
// CHECK: %[[LOW:.*]] = arith.constant -1.270000e+02 : f32
// CHECK-NEXT: %[[RND:.*]] = arith.constant 0x4B400000 : f32
// CHECK-COUNT-5: arith.constant {{.*}} : f32
// CHECK-NEXT: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: %[[X11:.*]] = llvm.intr.fma(%{{.*}}#11, %arg9, %{{.*}})
// CHECK-NEXT: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"(%[[X11]])
// CHECK-NEXT: %[[X:.*]] = llvm.intr.fma(%{{.*}}#12, %arg9, %{{.*}})
// CHECK-NEXT: %[[XC:.*]] = arith.maxnumf %[[X]], %[[LOW]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.addf %[[XC]], %[[RND]] : f32
// CHECK-NEXT: %[[N:.*]] = arith.subf %[[R]], %[[RND]] : f32
// CHECK-NEXT: %[[F:.*]] = arith.subf %[[XC]], %[[N]] : f32
// CHECK-NEXT: llvm.intr.fma(%{{.*}}, %[[F]], %{{.*}})
// CHECK-NEXT: llvm.intr.fma(%{{.*}}, %[[F]], %{{.*}})
// CHECK-NEXT: llvm.intr.fma(%{{.*}}, %[[F]], %{{.*}})
// CHECK-NEXT: llvm.intr.fma(%{{.*}}, %[[F]], %{{.*}})
// CHECK-NEXT: %[[P:.*]] = llvm.intr.fma(%{{.*}}, %[[F]], %[[ONE]])
// CHECK-NEXT: %[[PB:.*]] = llvm.bitcast %[[P]] : f32 to i32
// CHECK-NEXT: %[[RB:.*]] = llvm.bitcast %[[R]] : f32 to i32
// CHECK-NEXT: %[[E:.*]] = arith.shli %[[RB]], %c23_i32 : i32
// CHECK-NEXT: arith.addi %[[PB]], %[[E]] : i32
// CHECK-NEXT: llvm.bitcast
// row 1's k = 6 (register 14) by the polynomial too, then k = 7 of both rows (13, 15), then ex2.approx again
// CHECK-NEXT: llvm.intr.fma(%{{.*}}#14, %arg9, %{{.*}})
// CHECK-NEXT: arith.maxnumf
// CHECK: llvm.intr.fma(%{{.*}}#13, %arg9, %{{.*}})
// CHECK-NEXT: arith.maxnumf
// CHECK: llvm.intr.fma(%{{.*}}#15, %arg9, %{{.*}})
// CHECK-NEXT: arith.maxnumf
// CHECK: llvm.intr.fma(%{{.*}}#16, %arg9, %{{.*}})
// CHECK-NEXT: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f"
func.func @attn(%q: tensor<?x?x?x64xbf16>, %k: tensor<?x?x?x64xbf16>, %v: tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16> {
  %o = "wl.attention"(%q, %k, %v) {causal = true, scale = 0.125 : f32, layout = "bshd"} : (tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>, tensor<?x?x?x64xbf16>) -> tensor<?x?x?x64xbf16>
  return %o : tensor<?x?x?x64xbf16>
}
