"""An experiment for the decode-size GEMMs (1x4096x4096, 16x8192x8192; issue 12's targets at 0.86–0.91 of cuBLAS):
does splitting K pay? The stream-K kernels split the (tile, K tile) iterations of the last waves into equal runs over
P CTAs (SMS, normally the SM count) and sum the pieces in f32. With P = s x the tile count they become split-K by s
(every tile cut into s equal K runs, nothing data-parallel). This times them at P = 132 and P = s x tiles for
s = 2, 4, beside the 64 x 128 8-stage grid kernel the table picks and cuBLAS, in one process (triton's do_bench,
3 rounds, median). P larger than the SM count just queues CTAs (a piece is summed by whoever finishes its tile
last: no CTA waits for another), so every P is a valid launch; the result is checked against float32 torch.

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 benchmarks/splitk_probe.py
"""
import os
import statistics
import sys

import torch
import triton.testing as tt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from warploom import ops  # noqa: E402
from warploom.kernels import GemmSpec, get_kernel  # noqa: E402
from warploom.runtime.launch import default_launcher  # noqa: E402

SHAPES = [(1, 4096, 4096), (16, 8192, 8192)]
STREAMK = [(64, 64, 8), (128, 128, 4)]           # (block_m, block_n, stages) of the stream-K kernels in the cache


def main() -> None:
    launcher = default_launcher()
    real = launcher.cluster_slots
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        ref = a.float() @ b.float()
        calls = {"cublas": lambda: torch.matmul(a, b)}
        grid = get_kernel(GemmSpec("bf16", "kn", 128, 8, "sm_90a", "grid", 64))
        calls["64x128s8 grid"] = lambda: ops.run_gemm(grid, a, b)
        for bm, bn, st in STREAMK:
            art = get_kernel(GemmSpec("bf16", "kn", bn, st, "sm_90a", "streamk", bm))
            tiles = -(-m // bm) * -(-n // bn)
            for p in sorted({132, 2 * tiles, 4 * tiles}):
                out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
                launcher.cluster_slots = lambda artifact, device, p=p: p          # the run's CTA count
                ops.run_gemm(art, a, b, out=out)                                 # prepares (and keeps) this launch
                launcher.cluster_slots = real
                torch.cuda.synchronize()
                err = ((out.float() - ref).norm() / ref.norm()).item()
                label = f"streamk {bm}x{bn}s{st} P={p} ({p / tiles:g} x tiles)"
                if not err < 1e-2:
                    print(f"{m}x{n}x{k} {label}: relative error {err:.1e}, dropped", flush=True)
                    continue
                calls[label] = (lambda art=art, out=out: ops.run_gemm(art, a, b, out=out))
        per = {name: [] for name in calls}
        for _ in range(3):
            for name, fn in calls.items():
                per[name].append(tt.do_bench(fn, warmup=100, rep=300, return_mode="median"))
        ms = {name: statistics.median(t) for name, t in per.items()}
        for name, t in ms.items():
            print(f"{m}x{n}x{k} {name:<40} {t * 1e3:8.2f} us  {ms['cublas'] / t:.3f}x cuBLAS", flush=True)


if __name__ == "__main__":
    main()
