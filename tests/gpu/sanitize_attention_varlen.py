"""Packed variable-length attention launches for compute-sanitizer (memcheck, racecheck): ops.attention_varlen on
causal GQA sequences of ragged lengths (one of a single query, one with no key), q read in place from a packed qkv
tensor; the packed tensors are exact-size allocations, so a ragged tensor map reaching past the first or last packed
row would show as an out-of-bounds access. Each output is checked against tests/gpu/test_attention_varlen.py's
float32 reference.

    compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_attention_varlen.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.gpu.test_attention_varlen import check, reference, starts  # noqa: E402
from warploom import ops  # noqa: E402

for d, lq, lk, hq, hkv in ((128, [1000, 1, 300, 17], [1000, 40, 0, 17], 8, 2), (64, [129, 700], [129, 900], 4, 1)):
    qkv = torch.randn(sum(lq), hq + 2 * hkv, d, device="cuda", dtype=torch.bfloat16)
    q = qkv[:, :hq]
    k = torch.randn(sum(lk), hkv, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(sum(lk), hkv, d, device="cuda", dtype=torch.bfloat16)
    cu_q, cu_k = starts(lq), starts(lk)
    out, lse = ops.attention_varlen(q, k, v, cu_q, cu_k, causal=True, return_lse=True)
    torch.cuda.synchronize()
    check(out, lse, *reference(q, k, v, cu_q, cu_k, True))
    print(f"D{d} Sq{lq} Sk{lk} Hq{hq} Hkv{hkv}: ok")
print("ok")
