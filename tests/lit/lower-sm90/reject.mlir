// RUN: warploom-opt %s --split-input-file --verify-diagnostics --wl-lower-sm90
// RUN: not warploom-opt %s --split-input-file --wl-lower-sm90 2>&1 | FileCheck %s

// What wl-lower-sm90 refuses, with a diagnostic at the wl.kernel (never a traceback).
// CHECK: reject.mlir:{{[0-9]+}}:{{[0-9]+}}: error: wl-lower-sm90: sm_90a lowering of kernel 'wl_gemm_bf16_nk_128x128x64_s4': cannot lower wl.load_tile in role 'consumer'
// CHECK-NOT: Traceback

// An op kind the sm_90a lowering does not handle: a synchronous tile load in the consumer role.
func.func @load_tile(%arg0: tensor<?x?xbf16>, %arg1: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  // expected-error @+1 {{wl-lower-sm90: sm_90a lowering of kernel 'wl_gemm_bf16_nk_128x128x64_s4': cannot lower wl.load_tile in role 'consumer'; the sm_90a lowering handles wl.k_loop, wl.wait, wl.arrive_expect_tx, wl.async_load, wl.mma, wl.mma_wait, wl.arrive, wl.store_tile}}
  %0 = "wl.kernel"(%arg0, %arg1) ({
    "wl.buffer"() {align = 1024 : i64, bytes = 65536 : i64, dims = ["M", "K"], elem = "bf16", name = "a", offset = 0 : i64, shape = [128, 64], stages = 4 : i64, swizzle = 128 : i64} : () -> ()
    "wl.buffer"() {align = 1024 : i64, bytes = 65536 : i64, dims = ["N", "K"], elem = "bf16", name = "b", offset = 65536 : i64, shape = [128, 64], stages = 4 : i64, swizzle = 128 : i64} : () -> ()
    "wl.buffer"() {align = 8 : i64, bytes = 64 : i64, elem = "i64", name = "mbarriers", offset = 131072 : i64, shape = [8], stages = 1 : i64, swizzle = 0 : i64} : () -> ()
    "wl.mbarrier"() {arrivals = 1 : i64, count = 4 : i64, name = "full", offset = 131072 : i64, tx_bytes = 32768 : i64} : () -> ()
    "wl.mbarrier"() {arrivals = 2 : i64, count = 4 : i64, name = "empty", offset = 131104 : i64, tx_bytes = 0 : i64} : () -> ()
    "wl.role"() ({
      "wl.k_loop"() ({
        "wl.wait"() {barrier = "empty", parity = "producer"} : () -> ()
        "wl.arrive_expect_tx"() {barrier = "full", bytes = 32768 : i64} : () -> ()
        "wl.async_load"() {barrier = "full", buffer = "a", operand = "a", tile = [128, 64]} : () -> ()
        "wl.async_load"() {barrier = "full", buffer = "b", operand = "b", tile = [128, 64]} : () -> ()
        gpu.yield
      }) {trip = ["cdiv", "K", 64]} : () -> ()
      gpu.yield
    }) {issue = "one_thread", name = "producer", regs = 40 : i64, warpgroups = [0]} : () -> ()
    "wl.role"() ({
      "wl.k_loop"() ({
        "wl.wait"() {barrier = "full", parity = "consumer"} : () -> ()
        "wl.load_tile"() {operand = "a", tile = [128, 64]} : () -> ()
        "wl.mma"() {a = "a", a_rows = "per_warpgroup", acc = "acc", b = "b", shape = [64, 128, 64]} : () -> ()
        "wl.mma_wait"() {pending = 0 : i64} : () -> ()
        "wl.arrive"() {barrier = "empty", issue = "one_thread_per_warpgroup"} : () -> ()
        gpu.yield
      }) {trip = ["cdiv", "K", 64]} : () -> ()
      "wl.store_tile"() {acc = "acc", operand = "c", rows = "per_warpgroup", tile = [64, 128]} : () -> ()
      gpu.yield
    }) {issue = "warpgroup", name = "consumer", regs = 232 : i64, warpgroups = [1, 2]} : () -> ()
    gpu.yield
  }) {acc_elem = "f32", cluster = [1, 1, 1], grid = [["cdiv", "N", 128], ["cdiv", "M", 128], ["const", 1]], input_names = ["a", "b"], kind = "gemm", smem_bytes = 132160 : i64, stages = 4 : i64, threads = 384 : i64, tile = [128, 128, 64]} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %0 : tensor<?x?xbf16>
}

// -----

// A cluster is lowered only for the persistent GEMM that multicasts B (cluster-m=2); this grid kernel has no
// multicast copy.
func.func @cluster(%arg0: tensor<?x?xbf16>, %arg1: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  // expected-error @+1 {{cluster [2, 1, 1] (without a multicast copy, schedule 'grid'): the sm_90a GEMM lowers clusters of [2, 1, 1] that multicast B, persistent only; or no cluster}}
  %0 = "wl.kernel"(%arg0, %arg1) ({
    "wl.buffer"() {align = 1024 : i64, bytes = 65536 : i64, dims = ["M", "K"], elem = "bf16", name = "a", offset = 0 : i64, shape = [128, 64], stages = 4 : i64, swizzle = 128 : i64} : () -> ()
    "wl.buffer"() {align = 1024 : i64, bytes = 65536 : i64, dims = ["N", "K"], elem = "bf16", name = "b", offset = 65536 : i64, shape = [128, 64], stages = 4 : i64, swizzle = 128 : i64} : () -> ()
    "wl.buffer"() {align = 8 : i64, bytes = 64 : i64, elem = "i64", name = "mbarriers", offset = 131072 : i64, shape = [8], stages = 1 : i64, swizzle = 0 : i64} : () -> ()
    "wl.mbarrier"() {arrivals = 1 : i64, count = 4 : i64, name = "full", offset = 131072 : i64, tx_bytes = 32768 : i64} : () -> ()
    "wl.mbarrier"() {arrivals = 2 : i64, count = 4 : i64, name = "empty", offset = 131104 : i64, tx_bytes = 0 : i64} : () -> ()
    "wl.role"() ({
      "wl.k_loop"() ({
        "wl.wait"() {barrier = "empty", parity = "producer"} : () -> ()
        "wl.arrive_expect_tx"() {barrier = "full", bytes = 32768 : i64} : () -> ()
        "wl.async_load"() {barrier = "full", buffer = "a", operand = "a", tile = [128, 64]} : () -> ()
        "wl.async_load"() {barrier = "full", buffer = "b", operand = "b", tile = [128, 64]} : () -> ()
        gpu.yield
      }) {trip = ["cdiv", "K", 64]} : () -> ()
      gpu.yield
    }) {issue = "one_thread", name = "producer", regs = 40 : i64, warpgroups = [0]} : () -> ()
    "wl.role"() ({
      "wl.k_loop"() ({
        "wl.wait"() {barrier = "full", parity = "consumer"} : () -> ()
        "wl.mma"() {a = "a", a_rows = "per_warpgroup", acc = "acc", b = "b", shape = [64, 128, 64]} : () -> ()
        "wl.mma_wait"() {pending = 0 : i64} : () -> ()
        "wl.arrive"() {barrier = "empty", issue = "one_thread_per_warpgroup"} : () -> ()
        gpu.yield
      }) {trip = ["cdiv", "K", 64]} : () -> ()
      "wl.store_tile"() {acc = "acc", operand = "c", rows = "per_warpgroup", tile = [64, 128]} : () -> ()
      gpu.yield
    }) {issue = "warpgroup", name = "consumer", regs = 232 : i64, warpgroups = [1, 2]} : () -> ()
    gpu.yield
  }) {acc_elem = "f32", cluster = [2, 1, 1], grid = [["cdiv", "N", 128], ["cdiv", "M", 128], ["const", 1]], input_names = ["a", "b"], kind = "gemm", smem_bytes = 132160 : i64, stages = 4 : i64, threads = 384 : i64, tile = [128, 128, 64]} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %0 : tensor<?x?xbf16>
}

// -----

// expect_tx bytes must match the planned tx bytes of the barrier ring.
func.func @tx_bytes(%arg0: tensor<?x?xbf16>, %arg1: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  // expected-error @+1 {{wl.arrive_expect_tx expects 16384 bytes but ring 'full' is planned for 32768}}
  %0 = "wl.kernel"(%arg0, %arg1) ({
    "wl.buffer"() {align = 1024 : i64, bytes = 65536 : i64, dims = ["M", "K"], elem = "bf16", name = "a", offset = 0 : i64, shape = [128, 64], stages = 4 : i64, swizzle = 128 : i64} : () -> ()
    "wl.buffer"() {align = 1024 : i64, bytes = 65536 : i64, dims = ["N", "K"], elem = "bf16", name = "b", offset = 65536 : i64, shape = [128, 64], stages = 4 : i64, swizzle = 128 : i64} : () -> ()
    "wl.buffer"() {align = 8 : i64, bytes = 64 : i64, elem = "i64", name = "mbarriers", offset = 131072 : i64, shape = [8], stages = 1 : i64, swizzle = 0 : i64} : () -> ()
    "wl.mbarrier"() {arrivals = 1 : i64, count = 4 : i64, name = "full", offset = 131072 : i64, tx_bytes = 32768 : i64} : () -> ()
    "wl.mbarrier"() {arrivals = 2 : i64, count = 4 : i64, name = "empty", offset = 131104 : i64, tx_bytes = 0 : i64} : () -> ()
    "wl.role"() ({
      "wl.k_loop"() ({
        "wl.wait"() {barrier = "empty", parity = "producer"} : () -> ()
        "wl.arrive_expect_tx"() {barrier = "full", bytes = 16384 : i64} : () -> ()
        "wl.async_load"() {barrier = "full", buffer = "a", operand = "a", tile = [128, 64]} : () -> ()
        "wl.async_load"() {barrier = "full", buffer = "b", operand = "b", tile = [128, 64]} : () -> ()
        gpu.yield
      }) {trip = ["cdiv", "K", 64]} : () -> ()
      gpu.yield
    }) {issue = "one_thread", name = "producer", regs = 40 : i64, warpgroups = [0]} : () -> ()
    "wl.role"() ({
      "wl.k_loop"() ({
        "wl.wait"() {barrier = "full", parity = "consumer"} : () -> ()
        "wl.mma"() {a = "a", a_rows = "per_warpgroup", acc = "acc", b = "b", shape = [64, 128, 64]} : () -> ()
        "wl.mma_wait"() {pending = 0 : i64} : () -> ()
        "wl.arrive"() {barrier = "empty", issue = "one_thread_per_warpgroup"} : () -> ()
        gpu.yield
      }) {trip = ["cdiv", "K", 64]} : () -> ()
      "wl.store_tile"() {acc = "acc", operand = "c", rows = "per_warpgroup", tile = [64, 128]} : () -> ()
      gpu.yield
    }) {issue = "warpgroup", name = "consumer", regs = 232 : i64, warpgroups = [1, 2]} : () -> ()
    gpu.yield
  }) {acc_elem = "f32", cluster = [1, 1, 1], grid = [["cdiv", "N", 128], ["cdiv", "M", 128], ["const", 1]], input_names = ["a", "b"], kind = "gemm", smem_bytes = 132160 : i64, stages = 4 : i64, threads = 384 : i64, tile = [128, 128, 64]} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %0 : tensor<?x?xbf16>
}

// -----

// A kernel that was not specialized and planned.
func.func @unplanned(%arg0: tensor<?x?xbf16>, %arg1: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  // expected-error @+1 {{the kernel has no 'threads' attribute: run wl-specialize (and the passes after it) first}}
  %0 = "wl.kernel"(%arg0, %arg1) ({
    "wl.buffer"() {elem = "bf16", name = "a", shape = [128, 64], stages = 4 : i64} : () -> ()
    "wl.buffer"() {elem = "bf16", name = "b", shape = [128, 64], stages = 4 : i64} : () -> ()
    "wl.k_loop"() ({
      "wl.async_load"() {buffer = "a", operand = "a", tile = [128, 64]} : () -> ()
      "wl.async_load"() {buffer = "b", operand = "b", tile = [128, 64]} : () -> ()
      "wl.mma"() {a = "a", acc = "acc", b = "b", shape = [128, 128, 64]} : () -> ()
      gpu.yield
    }) {trip = ["cdiv", "K", 64]} : () -> ()
    "wl.store_tile"() {acc = "acc", operand = "c", tile = [128, 128]} : () -> ()
    gpu.yield
  }) {acc_elem = "f32", cluster = [1, 1, 1], grid = [["cdiv", "N", 128], ["cdiv", "M", 128], ["const", 1]], input_names = ["a", "b"], kind = "gemm", stages = 4 : i64, tile = [128, 128, 64]} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %0 : tensor<?x?xbf16>
}
