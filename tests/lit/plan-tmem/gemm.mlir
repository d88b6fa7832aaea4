// RUN: warploom-opt %s --split-input-file --wl-tile="target=sm_100a schedule=persistent block-n=256" --wl-pipeline --wl-specialize --wl-plan-tmem | FileCheck %s
// RUN: warploom-opt %s --split-input-file --wl-tile="target=sm_100a block-n=128" --wl-pipeline --wl-specialize --wl-plan-tmem | FileCheck %s --check-prefix=GRID
// RUN: warploom-opt %s --split-input-file --wl-tile="target=sm_100a schedule=persistent block-n=64" --wl-pipeline --wl-specialize --wl-plan-tmem | FileCheck %s --check-prefix=SMALL

// The sm_100a GEMM's accumulator: 128 lanes x block-n f32 columns per stage. Persistent: two stages side by side
// (the epilogue of tile i reads one while the MMAs of tile i + 1 write the other), tcgen05.alloc of the power of two
// that holds them. Grid: one stage.

// CHECK-LABEL: func.func @gemm
// CHECK: "wl.buffer"() {columns = 512 : i64, dims = ["M", "N"], elem = "f32", name = "acc", offset = 0 : i64, shape = [128, 256], space = "tmem", stages = 2 : i64}
// CHECK: "wl.ring"() {consumers = ["epilogue"], counts = "tile", name = "acc", producer = "mma", regions = ["acc"], stages = 2 : i64}
// CHECK: tmem_columns = 512 : i64

// GRID: "wl.buffer"() {columns = 128 : i64, dims = ["M", "N"], elem = "f32", name = "acc", offset = 0 : i64, shape = [128, 128], space = "tmem", stages = 1 : i64}
// GRID: tmem_columns = 128 : i64

// 2 x 64 columns: the allocation is the next power of two at least 32, 128.
// SMALL: "wl.buffer"() {columns = 128 : i64, dims = ["M", "N"], elem = "f32", name = "acc", offset = 0 : i64, shape = [128, 64], space = "tmem", stages = 2 : i64}
// SMALL: tmem_columns = 128 : i64
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
