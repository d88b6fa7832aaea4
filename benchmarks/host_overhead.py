"""Host time per call: warploom.ops and the warploom.torch custom ops beside torch.matmul and SDPA, on the H200.

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python benchmarks/host_overhead.py --out DIR

Each case is a small problem (the kernel takes a few microseconds), so a loop of calls is bound by the host: the
host time of one call is the perf_counter time of N calls in a row (nothing synchronizes inside the loop) divided by
N, the median of 7 such loops after a warm-up (kernels loaded, launches prepared, tensor maps encoded). Calls repeat
on the same tensors, as a training or serving loop does; the output is allocated per call unless the case says out=.
Writes host_overhead-<date>.json (µs per call, the ratio to the peer's call) and a PNG; issue 11's target is
matmul at most 1.3x torch.matmul.
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time

sys.path.insert(0, __file__.rsplit("/benchmarks/", 1)[0])
sys.path.insert(0, __file__.rsplit("/", 1)[0])
from common import commit  # noqa: E402

N, LOOPS, WARMUP = 2000, 7, 200


def host_us(fn) -> float:
    import torch
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(LOOPS):
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        times.append((t1 - t0) / N * 1e6)
    return statistics.median(times)


def cases():
    import torch
    import torch.nn.functional as F

    import warploom.torch  # noqa: F401  (registers torch.ops.warploom.*)
    from warploom import ops

    # for comparison: the same op through the @custom_op decorator (what warploom.torch used before run 16)
    @torch.library.custom_op("warploom_bench::matmul", mutates_args=(), schema="(Tensor a, Tensor b) -> Tensor")
    def decorated(a, b):
        return ops.matmul(a, b)

    out = []
    for m in (64, 128):
        a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, m, device="cuda", dtype=torch.bfloat16)
        peer = f"torch.matmul {m}^3"
        out += [(peer, peer, lambda a=a, b=b: torch.matmul(a, b)),
                (f"warploom.ops.matmul {m}^3", peer, lambda a=a, b=b: ops.matmul(a, b)),
                (f"warploom.ops.matmul {m}^3 out=", peer, lambda a=a, b=b, c=c: ops.matmul(a, b, out=c)),
                (f"torch.ops.warploom.matmul {m}^3", peer, lambda a=a, b=b: torch.ops.warploom.matmul(a, b)),
                (f"@custom_op matmul {m}^3 (comparison)", peer, lambda a=a, b=b: decorated(a, b))]
    q, k, v = (torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    peer = "SDPA B1 H2 S128 D64"
    out += [(peer, peer, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
            ("warploom.ops.attention B1 H2 S128 D64", peer,
             lambda: ops.attention(q, k, v, causal=True, layout="bhsd")),
            ("warploom.ops.attention out=", peer, lambda: ops.attention(q, k, v, causal=True, layout="bhsd", out=o)),
            ("torch.ops.warploom.attention", peer,
             lambda: torch.ops.warploom.attention(q, k, v, True, None, "bhsd"))]
    return out


def plot(doc: dict, path: str) -> None:
    """The PNG of a run's JSON (also on the CPU host: python benchmarks/host_overhead.py --plot FILE.json)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = doc["rows"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    colors = ["#888888" if r["case"] == r["peer"] else "#1f77b4" for r in rows]
    ax.barh([r["case"] for r in rows][::-1], [r["host_us"] for r in rows][::-1], color=colors[::-1])
    for i, r in enumerate(rows[::-1]):
        ax.text(r["host_us"], i, f" {r['host_us']:.1f}" + (f" ({r['ratio']:.2f}x)" if r["ratio"] and r["case"] != r["peer"]
                                                              else ""), va="center", fontsize=8)
    ax.set_xlabel(f"host time per call (µs): median of {doc['loops']} loops of {doc['calls_per_loop']} calls")
    ax.set_title(f"host overhead, {doc['gpu']}, {doc['date']}, {doc['commit']} (grey: the peer)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--plot", metavar="JSON", help="only draw the PNG of an earlier run's JSON, beside it")
    args = ap.parse_args()
    if args.plot:
        with open(args.plot) as f:
            plot(json.load(f), args.plot.removesuffix(".json") + ".png")
        return 0
    rows, base = [], {}
    for name, peer, fn in cases():
        us = host_us(fn)
        if name == peer:
            base[peer] = us
        rows.append({"case": name, "peer": peer, "host_us": round(us, 2),
                     "ratio": round(us / base[peer], 3) if peer in base else None})
        ratio = rows[-1]["ratio"]
        print(f"{name:42s} {us:7.2f} us  {'' if ratio is None else f'{ratio:.2f}x'}", flush=True)
    import torch
    date = datetime.date.today().isoformat()
    doc = {"benchmark": "host_overhead", "date": date, "commit": commit(), "gpu": torch.cuda.get_device_name(),
           "torch": torch.__version__, "calls_per_loop": N, "loops": LOOPS, "rows": rows}
    path = f"{args.out}/host_overhead-{date}"
    with open(path + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    try:
        plot(doc, path + ".png")
    except ImportError:
        print("matplotlib missing here: draw the PNG with --plot on the host")
    print(f"wrote {path}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
