#!/usr/bin/env bash
# Run 68 (one device call, on what was left of the session's device time): the most wanted first, so that a call cut
# short still brings back its logs: the packed-sequence, modifier and torch-op GPU tests; compute-sanitizer on the
# packed-sequence launches; the variants that changed (prefix-LM's deal, the packed-documents row) beside causal;
# then the rest of the GPU suite and the mask-modifier sanitizers.
set -uo pipefail
export PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/warploom-out}
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit ${WARPLOOM_COMMIT:-?}"
  echo "=== pytest varlen, mods, torch ops ($(date -u +%T))"
  python3 -m pytest -m gpu tests/gpu/test_attention_varlen.py tests/gpu/test_attention_mods.py tests/gpu/test_torch_ops.py \
    -q -p no:cacheprovider > "$OUT/pytest_new.log" 2>&1
  echo "exit $?"; tail -n 2 "$OUT/pytest_new.log"; grep -E "^FAILED|^ERROR" "$OUT/pytest_new.log" | head -20
  for tool in memcheck racecheck; do
    echo "=== compute-sanitizer $tool sanitize_attention_varlen ($(date -u +%T))"
    compute-sanitizer --tool $tool python3 tests/gpu/sanitize_attention_varlen.py 2>&1 | tail -n 3
  done
  echo "=== variants ($(date -u +%T))"
  python3 benchmarks/attention_variants.py --out "$OUT" --tag run68 --variants causal prefix-lm document1k-causal \
    > "$OUT/variants.log" 2>&1
  echo "exit $?"; tail -n 7 "$OUT/variants.log" | cut -c1-900
  echo "=== pytest the rest of tests/gpu ($(date -u +%T))"
  python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider --ignore tests/gpu/test_attention_varlen.py \
    --ignore tests/gpu/test_attention_mods.py --ignore tests/gpu/test_torch_ops.py > "$OUT/pytest_rest.log" 2>&1
  echo "exit $?"; tail -n 2 "$OUT/pytest_rest.log"; grep -E "^FAILED|^ERROR" "$OUT/pytest_rest.log" | head -20
  for tool in memcheck racecheck; do
    echo "=== compute-sanitizer $tool sanitize_attention_mods ($(date -u +%T))"
    compute-sanitizer --tool $tool python3 tests/gpu/sanitize_attention_mods.py 2>&1 | tail -n 3
  done
  echo "=== done ($(date -u +%T))"
} 2>&1 | tee "$OUT/run68.log"
