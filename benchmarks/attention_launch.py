"""Where the time of a short attention call goes: the host path of warploom.ops.attention against the kernel alone.

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python benchmarks/attention_launch.py

For each case: the median CUDA-event time of one ops.attention call (as benchmarks/attention.py times it), of
one launch of the prepared kernel alone (the `PreparedLaunch` ops.attention keeps, no argument checks), the host
time to enqueue one ops.attention call (perf_counter over 200 calls without synchronizing), and cuDNN SDPA's
event time. A call is host-bound when its host time exceeds the kernel's.
"""
from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])
import warploom.ops_attention as oa  # noqa: E402
from attention import time_cuda  # noqa: E402
from warploom import ops  # noqa: E402

CASES = [(16, 32, 1024, 64, True), (16, 32, 1024, 64, False), (16, 16, 1024, 128, True), (16, 16, 1024, 128, False),
         (4, 16, 4096, 128, False), (2, 8, 1000, 64, True)]


def events(fn) -> float:
    return time_cuda(fn, warmup=10, iters=50)


def main() -> None:
    print(f"{'B':>3} {'H':>3} {'S':>5} {'D':>4} {'causal':<6} {'ops.attention':>14} {'kernel alone':>13} "
          f"{'host/call':>10} {'cuDNN':>8}   (ms)")
    for b, h, s, d, causal in CASES:
        q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = torch.empty_like(q)
        call = lambda: ops.attention(q, k, v, causal=causal, out=out)   # noqa: E731
        t_ops = events(call)
        prepared = next(reversed(oa._PREPARED.values()))
        stream = torch.cuda.current_stream().cuda_stream
        t_kernel = events(lambda: prepared.launch(stream))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            call()
        t_host = (time.perf_counter() - t0) / 200 * 1e3
        torch.cuda.synchronize()
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            t_cudnn = events(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal))
        print(f"{b:>3} {h:>3} {s:>5} {d:>4} {str(causal):<6} {t_ops:14.4f} {t_kernel:13.4f} {t_host:10.4f} "
              f"{t_cudnn:8.4f}", flush=True)


if __name__ == "__main__":
    main()
