#!/usr/bin/env bash
# Run 68 (one device call): the GPU tests, compute-sanitizer on the packed-sequence and mask-modifier launches (the
# kernels that changed since run 67), then the variants grid with the packed-documents row.
set -uo pipefail
export PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/warploom-out}
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit ${WARPLOOM_COMMIT:-?}"
  python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider > "$OUT/pytest_gpu.log" 2>&1
  echo "pytest exit $?"; tail -n 3 "$OUT/pytest_gpu.log"; grep -E "^FAILED|^ERROR" "$OUT/pytest_gpu.log" | head -20
  for tool in memcheck racecheck; do
    for script in sanitize_attention_varlen sanitize_attention_mods; do
      echo "=== compute-sanitizer $tool $script"
      compute-sanitizer --tool $tool python3 tests/gpu/$script.py 2>&1 | tail -n 3
    done
  done
  python3 benchmarks/attention_variants.py --out "$OUT" --tag run68 > "$OUT/variants.log" 2>&1
  echo "variants exit $?"; tail -n 14 "$OUT/variants.log" | cut -c1-700
} 2>&1 | tee "$OUT/run68.log"
