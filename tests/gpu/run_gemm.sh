#!/usr/bin/env bash
# One device call on the H200 for the GEMM: its GPU tests, the GEMM benchmark beside cuBLAS (--compare: both
# schedules and both epilogues of the 128-row kernels, by name), compute-sanitizer (memcheck, racecheck) on both
# schedules and on every tuning candidate, optionally a tuning run (TUNE), and a calibration recording of every
# standard sm_90a GEMM for the emulator (CALIBRATE=1: standard and stream-K, then the 2x1-cluster cases;
# CALIBRATE=cluster: those alone).
# Everything runs from the AOT cache built on the CPU host (the GPU machine has no MLIR).
#
#   warploom precompile --target sm_90a --cache .wlcache          # CPU host; .wlcache is in .git/info/exclude
#   python3 -m tests.gpu.extra_kernels --cache .wlcache           # the direct-epilogue twins the benchmark compares
#   device run (carry .wlcache):  WARPLOOM_COMMIT=<sha> [BENCH_ARGS="--only 8192x8192x8192"] [TUNE=MxNxK,...|standard] \
#                                 bash tests/gpu/run_gemm.sh
# (with TUNE the cache must hold the tuning candidates: `warploom precompile --tuning`)
#
# Files in $OUT: gemm-run.log (everything, in order), pytest_gemm.log, sanitize_gemm.log (the six sanitizer runs,
# whole), gemm-calibration.npz, gemm-calibration-cluster.npz, gemm-<schedule>-<date>.{json,png} (SCHEDULE, default persistent: the schedule warploom.ops uses).
set -uo pipefail
export PYTHONPATH=. WARPLOOM_CACHE_DIR=${WARPLOOM_CACHE_DIR:-.wlcache} WARPLOOM_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/warploom-out}
mkdir -p "$OUT"
log="$OUT/gemm-run.log"
san="$OUT/sanitize_gemm.log"
: > "$san"
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
{
  step "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, cuda.bindings; print('torch', torch.__version__, 'cuda-bindings', cuda.bindings.__version__)"
  echo "commit ${WARPLOOM_COMMIT:-?}"
  python3 -c "from warploom.kernels import CLUSTER_KERNELS, get_kernel
from warploom.runtime.launch import default_launcher
for s in CLUSTER_KERNELS['sm_90a'][:2]: print(s.kernel_name, 'cluster_slots', default_launcher().cluster_slots(get_kernel(s), 0))"

  step "pytest -m gpu (GEMM, runtime, torch ops)"
  python3 -m pytest -m gpu tests/gpu/test_matmul.py tests/gpu/test_runtime_gpu.py tests/gpu/test_torch_ops.py \
      tests/gpu/test_fresh_process.py -q \
      -p no:cacheprovider > "$OUT/pytest_gemm.log" 2>&1
  echo "exit $?"; tail -n 5 "$OUT/pytest_gemm.log"

  if [ -n "${TUNE:-}" ]; then
    # TUNE="MxNxK,..." tunes bf16 [K,N] over those shapes, then fp16 and w.t() at 8192^3, into the package's table
    # (copied to $OUT); the benchmark after it runs warploom.ops with that table. TUNE=standard: the benchmark's
    # 12 bf16 shapes (the PEERS.md grid and issue 12's), as the shipped table was tuned (run 32).
    [ "$TUNE" = standard ] && TUNE=$(python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from gemm import GRID, ISSUE
print(','.join('x'.join(map(str, s)) for s in GRID + ISSUE))")
    step "warploom tune ($TUNE)"
    python3 -m warploom.tools.cli tune --shapes "$TUNE" --out warploom/tuning/sm_90a.json 2>&1 | tr '\r' '\n' | grep -v "%$"
    python3 -m warploom.tools.cli tune --shapes 8192x8192x8192 --dtype f16 --out warploom/tuning/sm_90a.json 2>&1 \
        | tr '\r' '\n' | grep -v "%$"
    python3 -m warploom.tools.cli tune --shapes 8192x8192x8192 --b-layout nk --out warploom/tuning/sm_90a.json 2>&1 \
        | tr '\r' '\n' | grep -v "%$"
    cp warploom/tuning/sm_90a.json "$OUT/tuning-sm_90a.json"
  fi

  step "benchmarks/gemm.py --compare"
  python3 benchmarks/gemm.py --out "$OUT" --schedule ${SCHEDULE:-persistent} --compare --rounds 3 ${BENCH_ARGS:-} 2>&1

  for schedule in grid persistent streamk candidates; do
    for tool in memcheck racecheck; do
      step "compute-sanitizer $tool ($schedule)"
      extra=""; [ "$tool" = memcheck ] && extra="--report-api-errors no"
      { echo "=== $tool $schedule"; compute-sanitizer --tool $tool $extra python3 tests/gpu/sanitize_gemm.py $schedule 2>&1;
        echo "exit $?"; } >> "$san"
      tail -n 4 "$san"
    done
  done

  if [ "${CALIBRATE:-0}" = 1 ]; then
    step "tests/gpu/calibrate.py --standard"
    python3 tests/gpu/calibrate.py "$OUT/gemm-calibration.npz" --standard 2>&1 | tail -n 6
  fi
  if [ "${CALIBRATE:-0}" = 1 ] || [ "${CALIBRATE:-0}" = cluster ]; then
    step "tests/gpu/calibrate.py --cluster"
    python3 tests/gpu/calibrate.py "$OUT/gemm-calibration-cluster.npz" --cluster 2>&1 | tail -n 4
  fi
} 2>&1 | tee "$log"
