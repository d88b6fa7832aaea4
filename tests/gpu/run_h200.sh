#!/usr/bin/env bash
# One device call on the H200: GPU tests, compute-sanitizer (memcheck, racecheck), the demo, and the GEMM
# benchmark beside cuBLAS, all from the AOT cache built on the CPU host (the GPU machine has no MLIR).
#
#   warploom precompile --target sm_90a --cache .wlcache          # CPU host; .wlcache is in .git/info/exclude
#   device run (carry .wlcache):  WARPLOOM_COMMIT=<sha> bash tests/gpu/run_h200.sh
#
# Logs and benchmark files land in $OUT (at most 8 files come back): run.log (everything, in order),
# pytest_gpu.log, and gemm-<schedule>-<date>.{json,png} per benchmarked schedule. RESULTS.md records each run.
set -uo pipefail
export PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/warploom-out}
mkdir -p "$OUT"
log="$OUT/run.log"
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
{
  step "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, cuda.bindings; print('torch', torch.__version__, 'cuda-bindings', cuda.bindings.__version__)"
  echo "commit ${WARPLOOM_COMMIT:-?}"

  step "pytest -m gpu tests/gpu"
  python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider > "$OUT/pytest_gpu.log" 2>&1
  echo "exit $?"; tail -n 3 "$OUT/pytest_gpu.log"

  for schedule in grid persistent; do
    step "compute-sanitizer memcheck ($schedule)"
    compute-sanitizer --tool memcheck --report-api-errors no python3 tests/gpu/sanitize_gemm.py $schedule 2>&1 | tail -n 4
    step "compute-sanitizer racecheck ($schedule)"
    compute-sanitizer --tool racecheck python3 tests/gpu/sanitize_gemm.py $schedule 2>&1 | tail -n 4
  done

  step "warploom demo (from the cache)"
  python3 -m warploom.tools.cli demo 2>&1 | tail -n 25

  for schedule in grid auto; do
    step "benchmarks/gemm.py --schedule $schedule"
    python3 benchmarks/gemm.py --out "$OUT" --schedule $schedule 2>&1
  done
} 2>&1 | tee "$log"
