"""Stream-K against the persistent walk where the persistent deal leaves SMs idle: non-causal attention shapes whose
tile count T = ceil(Sq / 128) * H * B is a poor multiple of the SM count (few tiles and long keys: a small batch's
prefill over a long context; a fractional last wave), timed side by side in one process with cuDNN beside.

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 benchmarks/attention_split.py --out DIR

Per shape: the persistent kernel (`AttentionSpec(schedule="persistent")`), the stream-K one (`schedule="streamk"`)
and cuDNN SDPA (bf16), each timed with triton's do_bench (median), in rounds whose order alternates, the median of
the rounds. Prints and writes attention-split-<date>[-TAG].json (`--plot JSON` draws its PNG on the CPU host), with the
persistent deal's idle share 1 - (T / P) / ceil(T / P) for each shape and the schedule ops.attention picks there.
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from common import commit  # noqa: E402

# (B, H, Sq, Sk, D): T tiles of 128 rows on 132 SMs
SHAPES = [(1, 8, 1024, 16384, 128),     # T = 64: half the SMs idle under the persistent deal
          (1, 16, 1024, 16384, 128),    # T = 128: one wave, 4 SMs idle
          (1, 8, 3200, 8192, 128),      # T = 200: 1.5 waves
          (1, 16, 4096, 4096, 128),     # T = 512: 3.9 waves
          (1, 32, 1024, 32768, 64),     # T = 256: 1.9 waves, head dim 64
          (1, 10, 2048, 8192, 128),     # T = 160: 1.2 waves
          (2, 5, 3840, 8192, 64),       # T = 300: 2.3 waves, head dim 64
          (2, 16, 8192, 8192, 128)]     # T = 2048: 15.5 waves (the grid's)


def idle_share(tiles: int, sms: int) -> float:
    waves = math.ceil(tiles / sms)
    return 1.0 - tiles / sms / waves


def plot(path: str) -> str:
    """Bars of TFLOP/s per shape (persistent, stream-K, cuDNN), the idle share in the labels; the PNG's path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = json.load(open(path))
    rows, names = d["rows"], ("persistent", "streamk", "cudnn")
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for i, n in enumerate(names):
        ax.bar([j + 0.27 * (i - 1) for j in range(len(rows))], [r["tflops"][n] for r in rows], 0.27, label=n)
    ax.set_xticks(range(len(rows)), [f"B{r['B']} H{r['H']} D{r['D']}\nSq {r['Sq']} Sk {r['Sk']}\nT {r['tiles']}, "
                                     f"idle {r['idle']:.0%}" for r in rows], fontsize=8)
    ax.set_ylabel("TFLOP/s (bf16, non-causal)")
    ax.set_title(f"stream-K against the persistent walk: {d['gpu']}, {d['commit']}, {d['date']}")
    ax.legend()
    fig.tight_layout()
    out = path[:-5] + ".png"
    fig.savefig(out, dpi=110)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--tag", default="")
    p.add_argument("--plot", default="", help="CPU host: draw the PNG of this JSON and exit")
    args = p.parse_args()
    if args.plot:
        print("->", plot(args.plot))
        return
    import torch
    import triton.testing as tt

    from warploom import ops
    from warploom.kernels import AttentionSpec
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for b, h, sq, sk, d in SHAPES:
        q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(b, h, sk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        out = {n: torch.empty_like(q) for n in ("persistent", "streamk")}
        calls = {n: (lambda n=n: ops.attention(q, k, v, layout="bhsd", out=out[n],
                                               spec=AttentionSpec("bf16", d, False, schedule=n)))
                 for n in ("persistent", "streamk")}

        def cudnn():
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        calls["cudnn"] = cudnn
        ref = cudnn()
        for n in ("persistent", "streamk"):
            calls[n]()
        torch.cuda.synchronize()
        err = {n: ((out[n].float() - ref.float()).abs().max() / ref.float().abs().max()).item()
               for n in ("persistent", "streamk")}
        times = {n: [] for n in calls}
        for r in range(args.rounds):
            for n in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
                times[n].append(tt.do_bench(calls[n], warmup=50, rep=200))
        ms = {n: statistics.median(t) for n, t in times.items()}
        tiles = math.ceil(sq / 128) * h * b
        flops = 4 * b * h * sq * sk * d
        picks = ops.attention_plan(q, k, v, layout="bhsd").spec.schedule       # what ops.attention runs here
        row = dict(B=b, H=h, Sq=sq, Sk=sk, D=d, tiles=tiles, idle=idle_share(tiles, sms), ops_picks=picks,
                   ms=ms, rounds=times,
                   tflops={n: flops / t / 1e9 for n, t in ms.items()}, max_rel_err_vs_cudnn=err,
                   streamk_vs_persistent=ms["persistent"] / ms["streamk"])
        rows.append(row)
        print(f"B{b} H{h} Sq{sq} Sk{sk} D{d}: T={tiles} idle {row['idle']:.0%} | " +
              "  ".join(f"{n} {ms[n]:.3f} ms ({row['tflops'][n]:.0f} TF/s)" for n in ms) +
              f" | stream-K / persistent {row['streamk_vs_persistent']:.3f}x, err {err['streamk']:.1e}; ops picks "
              f"{picks}", flush=True)
    date = datetime.date.today().isoformat()
    name = f"attention-split-{date}{'-' + args.tag if args.tag else ''}"
    meta = dict(date=date, commit=commit(), gpu=torch.cuda.get_device_name(), sms=sms, torch=torch.__version__,
                timing="triton do_bench median, rounds alternating order, median of rounds", rounds=args.rounds)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, name + ".json")
    with open(path, "w") as f:
        json.dump(dict(meta, rows=rows), f, indent=1)
    print("->", path)


if __name__ == "__main__":
    main()
