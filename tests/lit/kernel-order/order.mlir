// Kernel passes run in order, once each: out of order they name the pass that must run first (no traceback).
// RUN: not warploom-opt %s --wl-tile --wl-plan-smem 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not warploom-opt %s --wl-tile --wl-pipeline --wl-plan-smem 2>&1 | FileCheck %s --check-prefix=SMEM2
// RUN: not warploom-opt %s --wl-tile --wl-pipeline --wl-pipeline 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-barriers 2>&1 | FileCheck %s --check-prefix=BARRIERS
// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize --wl-plan-smem --wl-plan-barriers | FileCheck %s --check-prefix=DONE

// SMEM: error: wl-plan-smem needs wl-pipeline, wl-specialize to run first (this kernel has been through wl-tile): run wl-pipeline before wl-plan-smem
// SMEM-NOT: Traceback
// SMEM2: error: wl-plan-smem needs wl-specialize to run first (this kernel has been through wl-tile, wl-pipeline): run wl-specialize before wl-plan-smem
// SMEM2-NOT: Traceback
// TWICE: error: wl-pipeline already ran on this kernel (planned: wl-tile, wl-pipeline); run each kernel pass once
// BARRIERS: error: wl-plan-barriers needs wl-plan-smem to run first
// The kernel records the passes it has been through.
// DONE: planned = ["wl-tile", "wl-pipeline", "wl-specialize", "wl-plan-smem", "wl-plan-barriers"]
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
