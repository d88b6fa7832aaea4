"""How fast the CPU emulator (warploom.emulate) runs lowered sm_90a GEMM kernels, on this machine.

    PYTHONPATH=. python benchmarks/emulator_speed.py --out benchmarks/results

(a) one CTA of the standard 128x256x64 kernel (bf16, B [K,N], block-n 256) over K = 256 (4 k-tiles),
    best and median of 5 runs, plus K = 1024 for the cost of a k-tile; target <= 10 s on 2 cores.
(b) every standard sm_90a kernel (warploom.kernels.STANDARD_KERNELS["sm_90a"]) at the ragged sizes
    tests/emulate/test_gemm.py uses (grid 130x136x328, persistent 130x264x200 on 2 SMs), 3 seeds
    (interleavings, delay 8) each on random inputs, every result checked against the float64 reference;
    target <= 5 min in all. Kernel compile time (planning passes, lowering, compile_kernel) is kept apart.
Writes emulator_speed_<date>.json (commit, date, machine, versions, every figure) and a PNG (seconds per
kernel); prints a table.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import commit  # noqa: E402

from warploom.emulate import emulate_gemm, gemm_kernel  # noqa: E402
from warploom.kernels import STANDARD_KERNELS, GemmSpec  # noqa: E402
from warploom.reference.ops import matmul, round_to  # noqa: E402

SIZES = {"grid": (130, 136, 328), "persistent": (130, 264, 200)}     # as tests/emulate/test_gemm.py
SEEDS = (0, 1, 2)
DELAY = 8


def machine() -> dict:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    import ml_dtypes
    return {"cpus": os.cpu_count(), "cpu_model": model, "platform": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__, "ml_dtypes": ml_dtypes.__version__}


def operands(spec, m, n, k, rng):
    a = round_to(rng.standard_normal((m, k)), spec.elem)
    b = round_to(rng.standard_normal((k, n) if spec.b_layout == "kn" else (n, k)), spec.elem)
    return a, b, matmul(a, b, transpose_b=spec.b_layout == "nk")


def compile_seconds(spec) -> float:
    t0 = time.perf_counter()
    gemm_kernel(spec)
    return time.perf_counter() - t0


def one_cta(repeats: int = 5) -> dict:
    spec = GemmSpec("bf16", "kn", 256)
    out = {"kernel": spec.kernel_name, "compile_s": compile_seconds(spec)}
    rng = np.random.default_rng(0)
    for k in (256, 1024):
        a, b, ref = operands(spec, 128, 256, k, rng)
        times, reports = [], []
        for seed in range(repeats):
            c = emulate_gemm(spec, a, b, seed, delay=DELAY, report=reports)
            times.append(reports[-1].seconds)
        out[f"K{k}"] = {"best_s": min(times), "median_s": statistics.median(times), "runs_s": times,
                        "stats": reports[-1].stats, "ctas": reports[-1].ctas,
                        "max_abs_err": float(np.max(np.abs(c.astype(np.float64) - ref)))}
    # the marginal cost of a k-tile: (K 1024 - K 256) / 12 k-tiles
    out["seconds_per_ktile"] = (out["K1024"]["median_s"] - out["K256"]["median_s"]) / 12
    return out


def all_kernels() -> list[dict]:
    rows = []
    for spec in STANDARD_KERNELS["sm_90a"]:
        m, n, k = SIZES[spec.schedule]
        row = {"kernel": spec.kernel_name, "shape": [m, n, k], "compile_s": compile_seconds(spec), "seeds": []}
        for seed in SEEDS:
            a, b, ref = operands(spec, m, n, k, np.random.default_rng(100 + seed))
            reports = []
            t0 = time.perf_counter()
            c = emulate_gemm(spec, a, b, seed, delay=DELAY, report=reports).astype(np.float64)
            wall = time.perf_counter() - t0
            ok = (not np.isnan(c).any() and np.allclose(c, ref, rtol=2 ** -7, atol=1e-3)
                  and np.mean(c == round_to(ref, spec.elem)) > 0.99)
            row["seeds"].append({"seed": seed, "emulate_s": reports[0].seconds, "wall_s": wall, "ok": bool(ok),
                                 "grid": list(reports[0].grid), "stats": reports[0].stats})
        row["emulate_s"] = sum(s["emulate_s"] for s in row["seeds"])
        rows.append(row)
        print(f"  {row['kernel']:<42} {m}x{n}x{k}  compile {row['compile_s']:5.2f} s  3 seeds {row['emulate_s']:5.2f} s  "
              f"{'OK' if all(s['ok'] for s in row['seeds']) else 'MISMATCH'}", flush=True)
    return rows


def plot(rows, meta, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [r["kernel"].replace("wl_gemm_", "").replace("_persistent", "\npersistent") for r in rows]
    x = np.arange(len(rows))
    fig, ax = plt.subplots(figsize=(13, 5))
    ax.bar(x, [r["compile_s"] for r in rows], 0.7, label="compile (plan + lower + compile_kernel)", color="#bbbbbb")
    ax.bar(x, [r["emulate_s"] for r in rows], 0.7, bottom=[r["compile_s"] for r in rows],
           label="emulate, 3 seeds", color="#3a6ea5")
    ax.set_xticks(x, labels, fontsize=7, rotation=60, ha="right")
    ax.set_ylabel("seconds")
    a = meta["one_cta"]
    ax.set_title(f"warploom CPU emulator, every standard sm_90a GEMM at the test sizes (total {meta['total_s']:.1f} s); "
                 f"one CTA 128x256x256: {a['K256']['median_s']:.2f} s\n{meta['machine']['cpus']} x "
                 f"{meta['machine']['cpu_model']}, commit {meta['commit']}, {meta['date']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    print("(a) one CTA of the 128x256x64 kernel")
    a = one_cta()
    print(f"  {a['kernel']}: K 256 {a['K256']['median_s']:.3f} s (best {a['K256']['best_s']:.3f}), K 1024 "
          f"{a['K1024']['median_s']:.3f} s: {a['seconds_per_ktile'] * 1e3:.1f} ms per k-tile; compile "
          f"{a['compile_s']:.2f} s")
    print("(b) every standard sm_90a kernel, 3 seeds")
    import warploom.emulate.front
    warploom.emulate.front._KERNELS.clear()       # (a) compiled one of them: time every compile afresh
    rows = all_kernels()
    date = datetime.date.today().isoformat()
    meta = {"date": date, "commit": commit(), "machine": machine(), "delay": DELAY, "seeds": list(SEEDS),
            "sizes": SIZES, "one_cta": a, "kernels": rows,
            "emulate_s": sum(r["emulate_s"] for r in rows), "compile_s": sum(r["compile_s"] for r in rows),
            "all_ok": all(s["ok"] for r in rows for s in r["seeds"])}
    meta["total_s"] = meta["emulate_s"] + meta["compile_s"]
    meta["script_s"] = time.perf_counter() - t0
    stem = os.path.join(args.out, f"emulator_speed_{date}")
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    plot(rows, meta, stem + ".png")
    print(f"(b) total {meta['total_s']:.1f} s: emulate {meta['emulate_s']:.1f} s + compile {meta['compile_s']:.1f} s; "
          f"all match: {meta['all_ok']}  ->  {stem}.json, {stem}.png")


if __name__ == "__main__":
    main()
