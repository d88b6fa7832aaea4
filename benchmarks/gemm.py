"""GEMM benchmark on the GPU: warploom.ops.matmul beside torch.matmul (cuBLAS), same process, same inputs.

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python benchmarks/gemm.py --out benchmarks/results \
        [--schedule grid|persistent|auto] [--compare] [--rounds 3]

Shapes: the bf16 grid of ../shared/PEERS.md (row-major A[M,K] @ B[K,N]), the further shapes of issue 12
(6144x3072x5120, 3000x5000x1000, 4000x4000x4000, and the small-M 128x8192x8192, 16x8192x8192, 1x4096x4096), fp16
and the transposed-weight B (w.t()) at 8192^3. Timing: triton.testing.do_bench (median of CUDA-event timings after
warm-up), random inputs; every variant of a shape is timed once per round, in turn, for `--rounds` rounds, and its
time is the median of its rounds (a clock drift within a shape reaches every variant alike).

`ops` is warploom.ops.matmul as a user calls it (the kernel it picks, under `--schedule`). With `--compare`, the
128-row kernels of the same block_n are also timed by name under both schedules, the persistent kernel of the other
block_n, the 128 x 256 stream-K kernel, the persistent 2x1-cluster kernels of both block_n (`c2/...`: B shared by
TMA multicast) and the 128 x 256 one walking its tiles in bands (`c2/n256/g4`, `/g8`: rules.tile_origin), so each
change is measured against the kernels before it in the same run; for M <= 128 the 128 x 128, 64 x 128 and 64 x 64
tiles instead, with the standard 4 stages and with deeper rings (6, 8 and 8 stages), and 128 x 64 with 8
(tests/gpu/extra_kernels.py); and the stream-K kernels of those tiles (`streamk/...`: the tuning candidates,
`warploom precompile --tuning`). Writes gemm-<schedule>-<date>.json and a PNG with the commit, date and GPU;
prints a table and the geomeans against cuBLAS (the PEERS.md grid; the issue's shapes).
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
from warploom.kernels import GemmSpec, get_kernel  # noqa: E402
from tests.gpu.extra_kernels import GROUPS  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import commit  # noqa: E402

GRID = [(8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 2048), (16384, 8192, 1024), (2048, 2048, 2048),
        (512, 8192, 8192)]
ISSUE = [(6144, 3072, 5120), (3000, 5000, 1000), (4000, 4000, 4000), (128, 8192, 8192), (16, 8192, 8192),
         (1, 4096, 4096)]
DTYPES = {torch.bfloat16: "bf16", torch.float16: "f16"}


def bench(fn) -> float:
    return tt.do_bench(fn, warmup=100, rep=300, return_mode="median")


SMALL_M = 128     # up to this M the small-M tiles are compared too


def variants(spec: GemmSpec, m: int) -> dict[str, GemmSpec]:
    """The kernels timed by name beside the user path (see the module's docstring); for small M, the grid kernels of
    the 128 x 128, 64 x 128, 64 x 64 and 128 x 64 tiles and the stream-K ones."""
    if m <= SMALL_M:
        out = {f"{bm}x{bn}s{st}": GemmSpec(spec.elem, spec.b_layout, bn, st, spec.target, "grid", bm)
               for bm, bn, st in ((128, 128, 4), (64, 128, 4), (64, 64, 4), (128, 128, 6), (64, 128, 8), (64, 64, 8),
                                  (128, 64, 8))}
        out.update({f"streamk/{bm}x{bn}s{st}": GemmSpec(spec.elem, spec.b_layout, bn, st, spec.target, "streamk", bm)
                    for bm, bn, st in ((64, 64, 8), (128, 128, 4), (128, 128, 6), (128, 256, 4))})
        return out
    if spec.block_m != 128:
        return {}
    out = {f"{sched}/tma": GemmSpec(spec.elem, spec.b_layout, spec.block_n, spec.stages, spec.target, sched)
           for sched in ("grid", "persistent")}
    other = 384 - spec.block_n                 # the other 128-row tile (128 <-> 256), persistent: the tile model's data
    out[f"persistent/tma/n{other}"] = GemmSpec(spec.elem, spec.b_layout, other, spec.stages, spec.target, "persistent")
    out["streamk/n256"] = GemmSpec(spec.elem, spec.b_layout, 256, 4, spec.target, "streamk")
    for bn in (256, 128):                      # 2x1 clusters sharing B by multicast, both 128-row tiles
        out[f"c2/n{bn}"] = GemmSpec(spec.elem, spec.b_layout, bn, 4, spec.target, "persistent", cluster_m=2)
    for g in GROUPS:                           # ... the 128 x 256 one walking the tiles in bands (tile order)
        out[f"c2/n256/g{g}"] = GemmSpec(spec.elem, spec.b_layout, 256, 4, spec.target, "persistent", cluster_m=2,
                                        group_m=g)
    return out


def run_case(m, n, k, dtype, transposed_b, compare: bool, rounds: int):
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    b = torch.randn(n, k, device="cuda", dtype=dtype).t() if transposed_b else torch.randn(k, n, device="cuda", dtype=dtype)
    out = torch.empty(m, n, device="cuda", dtype=dtype)
    ref = a.float() @ b.float()
    elem, layout = DTYPES[dtype], "nk" if transposed_b else "kn"
    spec = ops.pick_spec(elem, layout, m, n, torch.cuda.get_device_properties(0).multi_processor_count, k=k)
    calls = {"cublas": lambda: torch.matmul(a, b, out=out), "ops": lambda: ops.matmul(a, b, out=out)}
    for name, vspec in (variants(spec, m).items() if compare else ()):
        art = get_kernel(vspec)
        calls[name] = (lambda art=art: ops.run_gemm(art, a, b, out=out))
    rel = {}
    for name, fn in calls.items():       # each result checked as it comes (they share `out`), poisoned first
        out.fill_(float("nan"))
        c = fn()
        rel[name] = (torch.linalg.norm(c.float() - ref) / torch.linalg.norm(ref)).item()
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            times[name].append(bench(fn))
    ms = {name: sorted(t)[len(t) // 2] for name, t in times.items()}
    flops = 2 * m * n * k
    return {"M": m, "N": n, "K": k, "dtype": elem, "b": "w.t()" if transposed_b else "[K,N]",
            "kernel": spec.kernel_name, "ms": ms, "ms_rounds": times,
            "tflops": {name: flops / t / 1e9 for name, t in ms.items()},
            "ratio": {name: ms["cublas"] / t for name, t in ms.items() if name != "cublas"}, "rel_err": rel}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def plot(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [n for n in rows[0]["ratio"]]
    for r in rows[1:]:
        names += [n for n in r["ratio"] if n not in names]
    labels = [f"{r['M']}x{r['N']}x{r['K']}\n{r['dtype']} {r['b']}" for r in rows]
    width = 0.8 / len(names)
    fig, ax = plt.subplots(figsize=(max(9, 1.1 * len(rows)), 4.8))
    for j, name in enumerate(names):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(rows))]
        ax.bar(xs, [r["ratio"].get(name, 0) for r in rows], width, label=name)
    for i, r in enumerate(rows):
        ax.text(i, r["ratio"]["ops"] + 0.02, f"{r['ratio']['ops']:.2f}", ha="center", fontsize=7)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(rows)), labels, fontsize=6)
    ax.set_ylabel("speed / cuBLAS (torch.matmul)")
    ax.set_title(title, fontsize=8)
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    p.add_argument("--schedule", default=ops.SCHEDULE, choices=list(ops.SCHEDULES),
                   help="the schedule warploom.ops.matmul uses for its 128-row kernels")
    p.add_argument("--compare", action="store_true", help="also time the 128-row kernels of both schedules, "
                   "stream-K and the 2x1-cluster kernels by name (the small-M ones come from "
                   "tests/gpu/extra_kernels.py)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default="", help="comma-separated MxNxK shapes to run (default: all)")
    p.add_argument("--tag", default="", help="appended to the output file names")
    args = p.parse_args()
    ops.SCHEDULE = args.schedule
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    cases = [(m, n, k, torch.bfloat16, False) for m, n, k in GRID + ISSUE]
    cases += [(8192, 8192, 8192, torch.float16, False), (8192, 8192, 8192, torch.bfloat16, True)]
    if args.only:
        keep = {tuple(int(x) for x in s.split("x")) for s in args.only.split(",")}
        cases = [c for c in cases if c[:3] in keep]
    rows = []
    for case in cases:
        r = run_case(*case, compare=args.compare, rounds=args.rounds)
        rows.append(r)
        others = "  ".join(f"{n} {v:.3f}" for n, v in r["ratio"].items() if n != "ops")
        print(f"{r['M']:>6} {r['N']:>6} {r['K']:>6} {r['dtype']:>4} {r['b']:>6}  {r['kernel']:<40} warploom "
              f"{r['tflops']['ops']:6.0f}  cuBLAS {r['tflops']['cublas']:6.0f} TFLOP/s  ratio {r['ratio']['ops']:.3f}  "
              f"err {r['rel_err']['ops']:.1e}  | {others}", flush=True)
    grid = [r for r in rows if (r["M"], r["N"], r["K"]) in GRID and r["dtype"] == "bf16" and r["b"] == "[K,N]"]
    issue = [r for r in rows if (r["M"], r["N"], r["K"]) in ISSUE]
    summary = {"geomean_ops_vs_cublas_peers_grid": geomean([r["ratio"]["ops"] for r in grid]),
               "min_ops_vs_cublas_peers_grid": min((r["ratio"]["ops"] for r in grid), default=float("nan"))}
    for name in (rows[0]["ratio"] if rows else {}):
        summary[f"geomean_{name}_vs_cublas_peers_grid"] = geomean([r["ratio"][name] for r in grid if name in r["ratio"]])
    date = datetime.date.today().isoformat()
    meta = {"schedule": args.schedule, "compare": args.compare, "rounds": args.rounds, "date": date,
            "commit": commit(), "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "sms": torch.cuda.get_device_properties(0).multi_processor_count,
            "timing": "triton do_bench median per round (warmup 100 ms, rep 300 ms), variants interleaved, "
                      "median of the rounds", **summary, "rows": rows}
    stem = os.path.join(args.out, f"gemm-{args.schedule}-{date}{args.tag}")
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    plot(rows, stem + ".png", f"warploom ({args.schedule}) vs cuBLAS, {meta['gpu']}, commit {meta['commit']}, {date}; "
                              f"geomean ops (PEERS grid) {summary['geomean_ops_vs_cublas_peers_grid']:.3f}")
    for k, v in summary.items():
        print(f"{k}: {v:.3f}")
    if issue:
        print("issue shapes: " + ", ".join(f"{r['M']}x{r['N']}x{r['K']} {r['ratio']['ops']:.3f}" for r in issue))
    print(f"-> {stem}.json, {stem}.png")


if __name__ == "__main__":
    main()
