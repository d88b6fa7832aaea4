"""Four attention launches for compute-sanitizer (memcheck, racecheck): ragged sizes, so the last query block, the
last key block and (causal) the blocks that cross the diagonal are all exercised; GQA; one Sq > Sk case whose
first rows see no key.

    compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_attention.py causal|full [q1|streamk]

The kernels ops.attention picks (the persistent ones with two Q stages: the next tile's Q loads during this one);
q1: the same with one Q stage where they have two (AttentionSpec(q_stages=1)); streamk (full only): the stream-K
kernels (schedule "streamk": the last waves' tiles split over their key blocks, merged through the workspace).
"""
import dataclasses
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from warploom import ops  # noqa: E402
from warploom.kernels import AttentionSpec  # noqa: E402

mode = sys.argv[1] if len(sys.argv) > 1 else "causal"
if mode not in ("causal", "full"):
    sys.exit(f"usage: sanitize_attention.py causal|full (got {mode!r})")
causal = mode == "causal"
q1, streamk = sys.argv[2:] == ["q1"], sys.argv[2:] == ["streamk"]
if streamk and causal:
    sys.exit("sanitize_attention.py: streamk is built for the non-causal attention: use full")
print(f"attention, {mode}{', one Q stage' if q1 else ''}{', stream-K' if streamk else ''}")
# the third: 216 tiles on 132 SMs, so the persistent kernels' CTAs each walk one or two tiles (rings, Q's phase and
# the turns carried across tiles; with Sq > Sk, tiles with no key block)
# the fourth (non-causal): Sq >= 4096 at head dim 64 takes the tall 192-row tile (three consumer warpgroups)
for b, sq, sk, hq, hkv, d, layout in ((2, 300, 1000, 8, 2, 128, "bshd"), (1, 333, 129, 4, 4, 64, "bhsd"),
                                      (3, 700, 650, 12, 4, 64, "bshd"), (1, 4100, 700, 4, 2, 64, "bshd")):
    shape = (lambda s, h: (b, s, h, d)) if layout == "bshd" else (lambda s, h: (b, h, s, d))
    q = torch.randn(shape(sq, hq), device="cuda", dtype=torch.bfloat16)
    k = torch.randn(shape(sk, hkv), device="cuda", dtype=torch.bfloat16)
    v = torch.randn(shape(sk, hkv), device="cuda", dtype=torch.bfloat16)
    spec = ops.attention_plan(q, k, v, causal=causal, layout=layout).spec
    spec = dataclasses.replace(spec, q_stages=1) if q1 else spec
    spec = AttentionSpec("bf16", d, False, schedule="streamk") if streamk else spec
    out, lse = ops.attention(q, k, v, causal=causal, return_lse=True, layout=layout, spec=spec)
    print(spec.kernel_name)
    torch.cuda.synchronize()
    # float32 reference in bhsd
    qf, kf, vf = ((t.transpose(1, 2) if layout == "bshd" else t).float() for t in (q, k, v))
    kf, vf = kf.repeat_interleave(hq // hkv, 1), vf.repeat_interleave(hq // hkv, 1)
    s = qf @ kf.transpose(-1, -2) / math.sqrt(d)
    if causal:
        i, j = torch.arange(sq, device="cuda")[:, None], torch.arange(sk, device="cuda")[None, :]
        s = s.masked_fill(j > i + sk - sq, float("-inf"))
    ref_lse = torch.logsumexp(s, -1)
    ref = torch.exp(s - torch.where(torch.isinf(ref_lse), 0.0, ref_lse)[..., None]) @ vf
    if layout == "bshd":
        ref = ref.transpose(1, 2)
    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    finite = torch.isfinite(ref_lse)
    lse_err = (lse[finite] - ref_lse[finite]).abs().max().item()
    print(f"{layout} B{b} Sq{sq} Sk{sk} Hq{hq} Hkv{hkv} D{d}: max|out-ref|/max|ref| {err:.2e}, max|lse-ref| {lse_err:.2e}")
    assert err < 2e-2 and lse_err < 2e-3 and torch.equal(torch.isneginf(lse), ~finite)
print("sanitize_attention OK")
