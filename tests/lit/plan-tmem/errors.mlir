// RUN: not warploom-opt %s --split-input-file --wl-plan-tmem 2>&1 | FileCheck %s

// Kernels written at the resource level (after wl-specialize) whose TMEM regions do not fit the 512 columns of a CTA:
// the error names every region with its columns, the limit, and the change that fits.

// Three 256-column accumulator stages (768): one stage fits.
// CHECK: error: wl-plan-tmem: the TMEM plan needs 768 columns (acc 768); a CTA has 512: use one stage of acc (no overlap of one tile's epilogue with the next tile's MMAs)
func.func @three_stages(%arg0: tensor<?x?xbf16>, %arg1: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %0 = "wl.kernel"(%arg0, %arg1) ({
    "wl.buffer"() {dims = ["M", "N"], elem = "f32", name = "acc", shape = [128, 256], space = "tmem", stages = 3 : i64} : () -> ()
    "wl.ring"() {consumers = [], counts = "tile", name = "acc", regions = ["acc"], stages = 3 : i64} : () -> ()
    gpu.yield
  }) {acc_elem = "f32", cluster = [1, 1, 1], grid = [["const", 1], ["const", 1], ["const", 1]], input_names = ["a", "b"], kind = "gemm", planned = ["wl-tile", "wl-pipeline", "wl-specialize"], schedule = "persistent", stages = 4 : i64, target = "sm_100a", threads = 192 : i64, tile = [128, 256, 64]} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %0 : tensor<?x?xbf16>
}

// -----

// Two staged accumulators and a single one: 512 + 256 + 64 columns; one stage each of the staged ones would need
// 256 + 128 + 64 = 448, which fits.
// CHECK: error: wl-plan-tmem: the TMEM plan needs 832 columns (s 512, o 256, stats 64); a CTA has 512: use one stage of s, o
func.func @several(%arg0: tensor<?x?xbf16>, %arg1: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %0 = "wl.kernel"(%arg0, %arg1) ({
    "wl.buffer"() {dims = ["M", "N"], elem = "f32", name = "s", shape = [128, 256], space = "tmem", stages = 2 : i64} : () -> ()
    "wl.buffer"() {dims = ["M", "D"], elem = "f32", name = "o", shape = [128, 128], space = "tmem", stages = 2 : i64} : () -> ()
    "wl.buffer"() {dims = ["M", "N"], elem = "f32", name = "stats", shape = [128, 64], space = "tmem", stages = 1 : i64} : () -> ()
    gpu.yield
  }) {acc_elem = "f32", cluster = [1, 1, 1], grid = [["const", 1], ["const", 1], ["const", 1]], input_names = ["a", "b"], kind = "gemm", planned = ["wl-tile", "wl-pipeline", "wl-specialize"], schedule = "persistent", stages = 4 : i64, target = "sm_100a", threads = 192 : i64, tile = [128, 256, 64]} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %0 : tensor<?x?xbf16>
}

// -----

// A TMEM region on a target without Tensor Memory.
// CHECK: error: wl-plan-tmem: sm_90a has no Tensor Memory, but the kernel declares TMEM regions acc: target sm_100a, or keep them in registers
func.func @hopper(%arg0: tensor<?x?xbf16>, %arg1: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %0 = "wl.kernel"(%arg0, %arg1) ({
    "wl.buffer"() {dims = ["M", "N"], elem = "f32", name = "acc", shape = [128, 256], space = "tmem", stages = 1 : i64} : () -> ()
    gpu.yield
  }) {acc_elem = "f32", cluster = [1, 1, 1], grid = [["const", 1], ["const", 1], ["const", 1]], input_names = ["a", "b"], kind = "gemm", planned = ["wl-tile", "wl-pipeline", "wl-specialize"], stages = 4 : i64, threads = 384 : i64, tile = [128, 256, 64]} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %0 : tensor<?x?xbf16>
}
