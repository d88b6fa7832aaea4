#!/usr/bin/env bash
# One device call on the H200 for attention: the GPU tests, compute-sanitizer (memcheck, racecheck) on a causal and
# a non-causal launch, and (with BENCH=1) the attention benchmark beside cuDNN, FlashAttention-2 and JAX Mosaic GPU.
# Everything runs from the AOT cache built on the CPU host (the GPU machine has no MLIR).
#
#   warploom precompile --target sm_90a --cache .wlcache          # CPU host; .wlcache is in .git/info/exclude
#   python3 -m tests.gpu.extra_kernels --cache .wlcache           # the grid kernels the tests and --compare-grid use
#   device run (carry .wlcache):  WARPLOOM_COMMIT=<sha> [ALL=1] [CALIBRATE=1] [BENCH=1] bash tests/gpu/run_attention.sh
# ALL=1 runs every GPU test (tests/gpu, GEMM too) instead of the attention file; CALIBRATE=1 records the standard
# attention kernels' outputs for the emulator (attention-calibration.npz); BENCH=1 adds the benchmark, with the
# grid-schedule kernels beside the standard ones (--compare-grid).
#
# Files in $OUT (few, as few come back): attention-run.log (everything, in order), pytest_attention.log,
# sanitize_attention.log (the four sanitizer runs, whole), and with BENCH=1 attention-<date>.{json,png}.
set -uo pipefail
export PYTHONPATH=. WARPLOOM_CACHE_DIR=${WARPLOOM_CACHE_DIR:-.wlcache} WARPLOOM_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/warploom-out}
mkdir -p "$OUT"
log="$OUT/attention-run.log"
san="$OUT/sanitize_attention.log"
: > "$san"
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
{
  step "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, cuda.bindings; print('torch', torch.__version__, 'cuda-bindings', cuda.bindings.__version__)"
  echo "commit ${WARPLOOM_COMMIT:-?}"

  tests=tests/gpu/test_attention.py; [ "${ALL:-0}" = 1 ] && tests=tests/gpu
  step "pytest -m gpu $tests"
  python3 -m pytest -m gpu $tests -q -p no:cacheprovider > "$OUT/pytest_attention.log" 2>&1
  echo "exit $?"; tail -n 5 "$OUT/pytest_attention.log"

  for mode in causal full; do
    for tool in memcheck racecheck; do
      step "compute-sanitizer $tool ($mode)"
      extra=""; [ "$tool" = memcheck ] && extra="--report-api-errors no"
      { echo "=== $tool $mode"; compute-sanitizer --tool $tool $extra python3 tests/gpu/sanitize_attention.py $mode 2>&1;
        echo "exit $?"; } >> "$san"
      tail -n 4 "$san"
    done
  done

  if [ "${CALIBRATE:-0}" = 1 ]; then
    step "tests/gpu/calibrate_attention.py"
    python3 tests/gpu/calibrate_attention.py "$OUT/attention-calibration.npz" 2>&1
  fi

  if [ "${BENCH:-0}" = 1 ]; then
    step "benchmarks/attention.py --compare-grid"
    python3 benchmarks/attention.py --out "$OUT" --compare-grid --rounds 3 --iters 30 2>&1
  fi
} 2>&1 | tee "$log"
