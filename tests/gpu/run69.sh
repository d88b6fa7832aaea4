#!/usr/bin/env bash
# Run 69 (one device call): what run 68 could not show. The torch-op, packed-sequence and modifier tests (run 68's
# collection error stopped all three), the sorted document ids and the varlen fast path; compute-sanitizer on the
# packed-sequence and mask-modifier launches with the whole report kept (run 68 saw 34 memcheck errors in each and one
# racecheck hazard in the packed ones, with only the summary kept); the variants that changed beside causal; the
# block tables (built with torch: test_attention_mods, the sanitizer, the benchmark's blocksparse-causal row).
set -uo pipefail
export PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/warploom-out}
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "commit ${WARPLOOM_COMMIT:-?}"
  echo "=== pytest torch ops, varlen, mods ($(date -u +%T))"
  python3 -m pytest -m gpu tests/gpu/test_torch_ops.py tests/gpu/test_attention_varlen.py tests/gpu/test_attention_mods.py \
    -q -p no:cacheprovider > "$OUT/pytest_new.log" 2>&1
  echo "exit $?"; tail -n 2 "$OUT/pytest_new.log"; grep -E "^FAILED|^ERROR" "$OUT/pytest_new.log" | head -30
  for script in sanitize_attention_varlen sanitize_attention_mods; do
    for tool in memcheck racecheck; do
      echo "=== compute-sanitizer $tool $script ($(date -u +%T))"
      compute-sanitizer --tool $tool --print-limit 40 python3 tests/gpu/$script.py > "$OUT/$tool-$script.log" 2>&1
      echo "exit $?"; tail -n 2 "$OUT/$tool-$script.log"
      grep -m 3 -E "^========= (Invalid|Program hit|Error|Race|Warning)" "$OUT/$tool-$script.log"
    done
  done
  echo "=== variants ($(date -u +%T))"
  python3 benchmarks/attention_variants.py --out "$OUT" --tag run69 \
    --variants causal document1k-causal docid1k-causal window1k-causal blocksparse-causal > "$OUT/variants.log" 2>&1
  echo "exit $?"; tail -n 9 "$OUT/variants.log" | cut -c1-700
  echo "=== done ($(date -u +%T))"
} 2>&1 | tee "$OUT/run69.log"
