"""Attention launches with mask modifiers for compute-sanitizer (memcheck, racecheck): the block-sparse key ranges
(docs/attention-variants.md "Block sparsity") of a causal and a symmetric window, a prefix-LM mask, rows that see
no key, document ids declared sorted (their ends loaded at each box: a load past the ids would show here) and a
block pattern walked through its block table (warploom.score.table: a read past a tile's row would show), on ragged
sizes with GQA; each output checked against tests/gpu/test_attention_mods.py's float32 reference.

    compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_attention_mods.py

The kernels are those of tests/gpu/mod_variants.py's GPU cases (python3 -m tests.gpu.extra_kernels builds them).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.gpu.mod_variants import VARIANTS  # noqa: E402
from tests.gpu.test_attention_mods import gpu_scalars, reference  # noqa: E402
from warploom import ops  # noqa: E402

for variant, d, b, sq, sk, hq, hkv in (("window256-causal", 128, 1, 1000, 1000, 8, 2),
                                       ("window256-symmetric", 64, 1, 777, 1000, 8, 2),
                                       ("prefix-lm", 128, 2, 600, 650, 8, 2),
                                       ("empty-rows", 128, 1, 300, 300, 8, 2),
                                       ("document-sorted-causal", 128, 1, 1000, 1000, 8, 2),
                                       ("block-sparse", 128, 1, 1000, 1300, 8, 2)):
    score_mod, mask_mod, _, causal = VARIANTS[variant]
    scalars = gpu_scalars(variant, sq, sk, hq, b)
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, sk, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True, layout="bshd", score_mod=score_mod,
                             mask_mod=mask_mod, scalars=scalars)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, variant, "bshd", scalars)
    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    finite = torch.isfinite(ref_lse)
    lse_err = (lse[finite] - ref_lse[finite]).abs().max().item()
    print(f"{variant} B{b} Sq{sq} Sk{sk} Hq{hq} Hkv{hkv} D{d}: max|out-ref|/max|ref| {err:.2e}, "
          f"max|lse-ref| {lse_err:.2e}")
    assert err < 2e-2 and lse_err < 2e-3 and torch.equal(torch.isneginf(lse), ~finite)
print("ok")
