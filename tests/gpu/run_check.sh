#!/usr/bin/env bash
# One device call that checks a tree after a refactor of the compiler or the host code (issue 33): every GPU test,
# compute-sanitizer on a GEMM and a causal attention, then (with BENCH=1, a second call) the GEMM and attention
# grids beside their peers. Everything runs from the AOT cache built on the CPU host (the GPU machine has no MLIR):
#
#   warploom precompile --target sm_90a --cache .wlcache && python3 -m tests.gpu.extra_kernels --cache .wlcache
#   device run (carry .wlcache):  WARPLOOM_COMMIT=<sha> bash tests/gpu/run_check.sh            # tests, sanitizers
#   device run (carry .wlcache):  WARPLOOM_COMMIT=<sha> BENCH=1 TAG=run64 bash tests/gpu/run_check.sh   # grids
#
# Logs land in $OUT: check.log (in order), pytest_gpu.log; with BENCH=1 bench.log and the grids' JSON + PNG.
set -uo pipefail
export PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/warploom-out}
mkdir -p "$OUT"
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
machine() {
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, cuda.bindings; print('torch', torch.__version__, 'cuda-bindings', cuda.bindings.__version__)"
  echo "commit ${WARPLOOM_COMMIT:-?}"
}
if [ "${BENCH:-0}" = 1 ]; then
  {
    step "machine"; machine
    step "benchmarks/gemm.py (the default schedule, beside cuBLAS)"
    python3 benchmarks/gemm.py --out "$OUT" --tag "${TAG:-check}" 2>&1 | tail -n 30
    step "benchmarks/attention.py (the grid, beside cuDNN, FA2 and Mosaic)"
    python3 benchmarks/attention.py --out "$OUT" --tag "${TAG:-check}" 2>&1 | tail -n 40
    step "done"
  } 2>&1 | tee "$OUT/bench.log"
  exit 0
fi
{
  step "machine"; machine
  step "pytest -m gpu tests/gpu"
  python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider > "$OUT/pytest_gpu.log" 2>&1
  echo "exit $?"; tail -n 3 "$OUT/pytest_gpu.log"
  step "compute-sanitizer memcheck (persistent GEMM)"
  compute-sanitizer --tool memcheck --report-api-errors no python3 tests/gpu/sanitize_gemm.py persistent 2>&1 | tail -n 3
  step "compute-sanitizer racecheck (persistent GEMM)"
  compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm.py persistent 2>&1 | tail -n 3
  step "compute-sanitizer memcheck (causal attention)"
  compute-sanitizer --tool memcheck --report-api-errors no python3 tests/gpu/sanitize_attention.py causal 2>&1 | tail -n 3
  step "compute-sanitizer racecheck (causal attention)"
  compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_attention.py causal 2>&1 | tail -n 3
  step "compute-sanitizer memcheck (attention with mask modifiers: block-sparse key ranges)"
  compute-sanitizer --tool memcheck --report-api-errors no python3 tests/gpu/sanitize_attention_mods.py 2>&1 | tail -n 6
  step "compute-sanitizer racecheck (attention with mask modifiers)"
  compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_attention_mods.py 2>&1 | tail -n 3
  step "compute-sanitizer memcheck (packed variable-length attention: ragged tensor maps)"
  compute-sanitizer --tool memcheck --report-api-errors no python3 tests/gpu/sanitize_attention_varlen.py 2>&1 | tail -n 4
  step "compute-sanitizer racecheck (packed variable-length attention)"
  compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_attention_varlen.py 2>&1 | tail -n 3
  step "done"
} 2>&1 | tee "$OUT/check.log"
