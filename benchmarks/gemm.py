"""GEMM benchmark on the GPU: warploom.ops.matmul beside torch.matmul (cuBLAS), same process, same inputs.

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python benchmarks/gemm.py --out benchmarks/results

Shapes: the bf16 grid of ../shared/PEERS.md (row-major A[M,K] @ B[K,N]), plus fp16
and the transposed-weight case at 8192^3. Timing: triton.testing.do_bench, median
of CUDA-event timings after warm-up, random inputs. Writes gemm-<date>.json and a
PNG of TFLOP/s per shape, with the commit, date and GPU; prints a table and the
geomean ratio warploom / cuBLAS.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys

import torch
import triton.testing as tt

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from warploom import ops  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import commit  # noqa: E402

GRID = [(8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 2048), (16384, 8192, 1024), (2048, 2048, 2048),
        (512, 8192, 8192)]


def bench(fn) -> float:
    return tt.do_bench(fn, warmup=100, rep=400, return_mode="median")


def run_case(m, n, k, dtype, transposed_b):
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(n, k, device="cuda", dtype=dtype).t() if transposed_b else torch.randn(k, n, device="cuda", dtype=dtype)
    out = torch.empty(m, n, device="cuda", dtype=dtype)
    ref = a.float() @ b.float()
    err = (torch.linalg.norm(ops.matmul(a, b, out=out).float() - ref) / torch.linalg.norm(ref)).item()
    ms_wl = bench(lambda: ops.matmul(a, b, out=out))
    ms_torch = bench(lambda: torch.matmul(a, b, out=out))
    flops = 2 * m * n * k
    return {"M": m, "N": n, "K": k, "dtype": str(dtype).split(".")[-1], "b": "w.t()" if transposed_b else "[K,N]",
            "warploom_ms": ms_wl, "torch_ms": ms_torch, "warploom_tflops": flops / ms_wl / 1e9,
            "torch_tflops": flops / ms_torch / 1e9, "ratio": ms_torch / ms_wl, "rel_err": err}


def host_overhead_us(calls: int = 2000) -> dict:
    """Host time per call for a tiny GEMM (the GPU work is negligible): the launch path's cost."""
    import time
    a = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(128, 128, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(128, 128, device="cuda", dtype=torch.bfloat16)
    res = {}
    for name, fn in (("warploom", lambda: ops.matmul(a, b, out=out)), ("torch", lambda: torch.matmul(a, b, out=out))):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        res[name] = (time.perf_counter() - t0) / calls * 1e6
    return res


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['M']}x{r['N']}x{r['K']}\n{r['dtype']} {r['b']}" for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(rows)), 4.5))
    ax.bar([i - 0.2 for i in x], [r["torch_tflops"] for r in rows], 0.4, label="cuBLAS (torch.matmul)")
    ax.bar([i + 0.2 for i in x], [r["warploom_tflops"] for r in rows], 0.4, label="warploom")
    for i, r in enumerate(rows):
        ax.text(i + 0.2, r["warploom_tflops"], f"{r['ratio']:.2f}x", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(x), labels, fontsize=7)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    p.add_argument("--schedule", default=ops.SCHEDULE, choices=list(ops.SCHEDULES),
                   help="which GEMM kernels warploom.ops.matmul uses")
    args = p.parse_args()
    ops.SCHEDULE = args.schedule
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    cases = [(m, n, k, torch.bfloat16, False) for m, n, k in GRID]
    cases += [(8192, 8192, 8192, torch.float16, False), (8192, 8192, 8192, torch.bfloat16, True)]
    rows = []
    for case in cases:
        r = run_case(*case)
        rows.append(r)
        print(f"{r['M']:>6} {r['N']:>6} {r['K']:>6} {r['dtype']:>9} {r['b']:>6}  warploom {r['warploom_tflops']:6.0f}  "
              f"cuBLAS {r['torch_tflops']:6.0f} TFLOP/s  ratio {r['ratio']:.3f}  err {r['rel_err']:.1e}", flush=True)
    grid_rows = rows[:len(GRID)]
    geomean = math.exp(sum(math.log(r["ratio"]) for r in grid_rows) / len(grid_rows))
    overhead = host_overhead_us()
    print(f"host time per 128^3 call: warploom {overhead['warploom']:.1f} us, torch.matmul {overhead['torch']:.1f} us")
    date = datetime.date.today().isoformat()
    meta = {"schedule": args.schedule, "host_us_per_call_128cube": overhead,"date": date, "commit": commit(), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "sms": torch.cuda.get_device_properties(0).multi_processor_count,
            "geomean_ratio_vs_cublas_peers_grid": geomean, "rows": rows}
    stem = os.path.join(args.out, f"gemm-{args.schedule}-{date}")
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    plot(rows, stem + ".png", f"warploom ({args.schedule}) vs cuBLAS, {meta['gpu']}, commit {meta['commit']}, {date}; "
                              f"geomean ratio (PEERS grid) {geomean:.3f}")
    print(f"geomean warploom/cuBLAS over the PEERS.md bf16 grid: {geomean:.3f}  ->  {stem}.json, {stem}.png")


if __name__ == "__main__":
    main()
