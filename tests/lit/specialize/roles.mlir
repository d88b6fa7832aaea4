// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize | FileCheck %s
// RUN: not warploom-opt %s --wl-tile --wl-pipeline --wl-specialize=consumer-regs=256 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not warploom-opt %s --wl-tile --wl-specialize 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: warploom-opt %s --wl-tile --wl-pipeline --wl-specialize=mma-in-flight=0 | FileCheck %s --check-prefix=SERIAL
// RUN: not warploom-opt %s --wl-tile --wl-pipeline=stages=2 --wl-specialize=mma-in-flight=2 2>&1 | FileCheck %s --check-prefix=FLIGHT
// RUN: warploom-opt %s --wl-tile=block-m=64,block-n=128 --wl-pipeline --wl-specialize | FileCheck %s --check-prefix=SMALLM
// RUN: not warploom-opt %s --wl-tile=block-m=96 2>&1 | FileCheck %s --check-prefix=BLOCKM

// A producer warpgroup issues the copies; two consumer warpgroups each own 64 rows of the MMA and the store.
// The consumers' staged store of C syncs each warpgroup on its own instance of `epilogue` (id 1).
// CHECK: "wl.named_barrier"() {count = 2 : i64, id = 1 : i64, name = "epilogue", threads = 128 : i64}
// CHECK: "wl.role"() ({
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.async_load"() {buffer = "a"
// CHECK-NEXT: "wl.async_load"() {buffer = "b"
// CHECK-NOT: wl.mma
// CHECK: }) {issue = "one_thread", name = "producer", regs = 40 : i64, warpgroups = [0]}
// CHECK-NEXT: "wl.role"() ({
// CHECK-NEXT: "wl.k_loop"() ({
// CHECK-NEXT: "wl.mma"() {a = "a", acc = "acc", b = "b", shape = [64, 256, 64]}
// CHECK-NEXT: "wl.mma_wait"() {pending = 1 : i64}
// CHECK: "wl.mma_wait"() {pending = 0 : i64}
// Each warpgroup stores its rows through C's staging chunks.
// CHECK-NEXT: "wl.store_tile"() {acc = "acc", barrier = "epilogue", buffer = "c", operand = "c", tile = [64, 256]}
// CHECK: }) {issue = "warpgroup", name = "consumer", regs = 232 : i64, warpgroups = [1, 2]}
// CHECK: threads = 384 : i64
// Small M (block-m 64): one consumer warpgroup, 256 threads, the same budgets (both below the 255 registers a
// thread starts with; the lowering adds .minnctapersm 1 so ptxas honours them), one instance of the store's barrier.
// SMALLM: "wl.named_barrier"() {count = 1 : i64, id = 1 : i64, name = "epilogue", threads = 128 : i64}
// SMALLM: }) {issue = "one_thread", name = "producer", regs = 40 : i64, warpgroups = [0]}
// SMALLM: "wl.mma"() {a = "a", acc = "acc", b = "b", shape = [64, 128, 64]}
// SMALLM: }) {issue = "warpgroup", name = "consumer", regs = 232 : i64, warpgroups = [1]}
// SMALLM: threads = 256 : i64
// BLOCKM: error: block-m = 96: the sm_90a GEMM gives each consumer warpgroup m64 rows, with 1 or 2 of them; use block-m=64 or 128
// BUDGET: error: register budget 40 + 2 x 256 per thread needs 70656 registers; the register file holds 65536: lower consumer-regs to 232
// ORDER: error: wl-specialize needs wl-pipeline to run first (this kernel has been through wl-tile): run wl-pipeline before wl-specialize
// With nothing in flight the consumer waits for its MMAs every iteration, and needs no drain.
// SERIAL: "wl.mma_wait"() {pending = 0 : i64}
// SERIAL-NOT: wl.mma_wait
// SERIAL: "wl.store_tile"
// FLIGHT: error: mma-in-flight = 2: must be 0..1 (stages - 1)
func.func @gemm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
