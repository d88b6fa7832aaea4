"""One attention case for Nsight Compute: warploom's kernel and cuDNN's SDPA kernel on the same inputs, each run a few
times (the profiler takes the last launch of each, see the command below). Not a benchmark: it says where the
time goes (tensor-pipe utilisation, warp stalls per SASS line), for benchmarks/NOTES.md.

    ncu --set full --import-source no --launch-skip 2 --launch-count 1 -k regex:wl_attn \
        python3 benchmarks/profile_attention.py 128 8192 full
    ncu ... -k regex:cudnn python3 benchmarks/profile_attention.py 128 8192 full cudnn

Arguments: head dim, sequence length, causal|full, and which kernel (warploom, the default: what ops.attention
picks; warploom-q1, the persistent 128-row kernel with one Q stage, `AttentionSpec(q_stages=1)`; warploom-pK, the
persistent 128-row kernel with K of each 8 exp2 by the FMA polynomial, `AttentionSpec(exp2_poly=K/8)`, p0 for none;
warploom-sk, the stream-K kernel, `AttentionSpec(schedule="streamk")`, non-causal only; warploom-oN, the default
kernel with persistent tile order N forced (`ops_attention.TILE_ORDER`); or cudnn). The batch and head count are those of benchmarks/attention.py (16k tokens, hidden 2048).
"""
import os
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from warploom import ops  # noqa: E402
from warploom.kernels import AttentionSpec  # noqa: E402

usage = "usage: profile_attention.py D S causal|full [warploom|warploom-q1|warploom-pK|warploom-sk|warploom-oN|cudnn]"
if len(sys.argv) not in (4, 5) or sys.argv[3] not in ("causal", "full"):
    sys.exit(usage)
d, s, causal = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "causal"
which = sys.argv[4] if len(sys.argv) == 5 else "warploom"
poly = re.fullmatch(r"warploom-p(\d)", which)
order = re.fullmatch(r"warploom-o(\d+)", which)
if which not in ("warploom", "warploom-q1", "warploom-sk", "cudnn") and not (poly or order):
    sys.exit(usage)
if order:
    from warploom import ops_attention
    ops_attention.TILE_ORDER = int(order.group(1))
h = 2048 // d
b = max(1, 16384 // s)
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(3):
    if which == "warploom" or order:
        ops.attention(q, k, v, causal=causal, layout="bhsd")
    elif which == "warploom-q1":
        ops.attention(q, k, v, causal=causal, layout="bhsd", spec=AttentionSpec("bf16", d, causal, q_stages=1))
    elif which == "warploom-sk":
        ops.attention(q, k, v, causal=causal, layout="bhsd", spec=AttentionSpec("bf16", d, causal, schedule="streamk"))
    elif poly:
        ops.attention(q, k, v, causal=causal, layout="bhsd",
                      spec=AttentionSpec("bf16", d, causal, exp2_poly=int(poly.group(1)) / 8))
    else:
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
torch.cuda.synchronize()
print(f"profile_attention: {which} D{d} S{s} B{b} H{h} {'causal' if causal else 'full'}")
