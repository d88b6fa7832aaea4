"""Two builds of the standard attention kernels timed side by side with cuDNN, in one process: an A/B test of a
compiler change (benchmarks/NOTES.md says which). Each build is a kernel cache made on the CPU host by its own tree
(e.g. `git worktree add /tmp/a <commit>` and `warploom precompile` there); the kernels are read from both caches
as they are (each cache's compiler hash is its own tree's, so neither matches the other: the index check is
skipped here, on purpose) and launched through `warploom.ops.attention`, each on its own tensors.

    python3 benchmarks/attention_ab.py --build A=exp/cacheA --build B=.wlcache --out $OUT [--rounds 3]
    python3 benchmarks/attention_ab.py --build bn160=.wlcache --build bn128=.wlcache@128 --cases 128x1024,128x4096

A build `NAME=DIR@BN` (or `@BNsST`, or `@D:BMxBNsST` for head dim D and BM query rows, a `q1`/`q2` suffix for one/two Q
stages, then `pK` for K of each 8 exp2 by the FMA polynomial, then `k` for the stream-K schedule, non-causal only: the
causal cases keep the standard kernel) runs the head-dim-128 (D) kernels with block_n BN (and ST stages, BM rows) instead of the standard tile (the same compiler, another tile: `--build-tiles [D:]BN[sST],...` puts
them in the cache on the CPU host). `--cases` picks head dim x
sequence length pairs (each causal and not); the default is head dim 128 at 4096, 8192, 16384 and 64 at 8192.

Per case: cuDNN (bf16 SDPA) and every build, timed in turn with triton's do_bench (warm-up 100 ms, 300 ms of
calls, median), `--rounds` rounds, the median of the rounds; the outputs of every build are compared with cuDNN's.
Prints each build's TFLOP/s and ratio against cuDNN, and against the first build; writes attention-ab-<date>.json
and its PNG (`--plot JSON` redraws it).
"""
import argparse
import dataclasses
import datetime
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from common import commit  # noqa: E402
from warploom import kernels, ops, ops_attention  # noqa: E402
from warploom.runtime.cache import KernelCache  # noqa: E402

CASES = [(128, s, c) for s in (4096, 8192, 16384) for c in (False, True)] + [(64, 8192, False), (64, 8192, True)]


def parse_tile(text: str) -> dict:
    """'128' -> {block_n: 128}; '128s3' -> {block_n: 128, stages: 3}; '64:192s2' -> the same for head dim 64
    ({head_dim: 64, block_n: 192, stages: 2}); '64:192x128' -> query rows too ({head_dim: 64, block_m: 192,
    block_n: 128}); a 'q1' or 'q2' suffix ('64:128q1', '128s2q2') -> Q's stages too ({..., q_stages: 1}; 2: the next
    tile's Q loads during this one; without it the kernel's default); then a 'pK' suffix ('64:128p2', '64:128q2p1') ->
    K of each 8 exp2 by the FMA polynomial ({..., exp2_poly: K / 8}); then a 'k' suffix ('128k') -> the stream-K
    schedule ({..., schedule: "streamk"}); then an 'oN' suffix ('128o1', or 'o1' alone: the standard tiles) -> the
    persistent tile order N forced (`ops_attention.TILE_ORDER`; {..., tile_order: N}); '' -> {} (the standard
    tile). Without 'D:' the head dim is 128."""
    if not text:
        return {}
    extra = re.search(r"(?:q(\d))?(?:p(\d))?(k)?(?:o(\d+))?$", text)
    q, poly, streamk, order = extra.groups()
    order = {"tile_order": int(order)} if order else {}
    if extra.start() == 0 and order and not (q or poly or streamk):
        return order                       # the standard tiles, another tile order
    d, _, rest = text[:extra.start()].rpartition(":")
    tile, _, st = rest.partition("s")
    bm, _, bn = tile.rpartition("x")
    return {"head_dim": int(d or 128), **({"block_m": int(bm)} if bm else {}), "block_n": int(bn),
            **({"stages": int(st)} if st else {}), **({"q_stages": int(q)} if q else {}),
            **({"exp2_poly": int(poly) / kernels.EXP2_POLY_GROUP} if poly else {}),
            **({"schedule": "streamk"} if streamk else {}), **order}


def build_spec(d: int, causal: bool, tile: dict):
    """The kernel a build runs for (head dim d, causal): the standard one, or `tile` where its head dim is d (Q's
    stages the tile's default unless it names them; a stream-K tile only where not causal)."""
    spec = ops_attention.pick_spec("bf16", d, causal)
    tile = {k: v for k, v in tile.items() if k != "tile_order"}
    if not tile or tile.get("head_dim", 128) != d or (causal and tile.get("schedule") == "streamk"):
        return spec
    return dataclasses.replace(spec, **{"q_stages": None, "exp2_poly": None,
                                        **{k: v for k, v in tile.items() if k != "head_dim"}})


def load_build(name: str, root: str, tile: dict) -> dict:
    """Put each standard attention kernel of the cache at `root` (head dim 128 with `tile` when given) into
    get_kernel's memo under that root, with the build's name added to its key (the launcher keeps one module per
    key); {(head dim, causal): spec}."""
    cache = KernelCache(root)
    out = {}
    for d in (64, 128):
        for causal in (False, True):
            spec = build_spec(d, causal, tile)
            entry = kernels.read_index(cache, spec)
            if entry is None:
                sys.exit(f"attention_ab: {root} holds no {spec.describe()}; build it there first (--build-tiles)")
            art = cache.get(entry["key"])
            kernels._memo[(root, spec)] = dataclasses.replace(art, key=f"{art.key}-{name}")
            out[(d, causal)] = spec
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", action="append", default=[], help="NAME=CACHE_DIR[@[D:][BMx]BN[sST][qN][pK][k]], two or more")
    p.add_argument("--cases", default="", help="comma-separated DxS (head dim x sequence length), each causal and not")
    p.add_argument("--build-tiles", default="", help="CPU host: compile the kernels of these tiles "
                   "(comma-separated [D:][BMx]BN[sST][qN][pK][k], D 128 unless given) into $WARPLOOM_CACHE_DIR and exit")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tag", default="", help="appended to the JSON's name (attention-ab-<date>-<tag>.json)")
    p.add_argument("--plot", default="", help="CPU host: draw the PNG of this A/B JSON and exit")
    args = p.parse_args()
    if args.plot:
        plot(args.plot)
        return
    if args.build_tiles:
        for tile in args.build_tiles.split(","):
            t = parse_tile(tile)
            for causal in (False, True):
                print(kernels.get_kernel(build_spec(t["head_dim"], causal, t)).name)
        return
    if len(args.build) < 2:
        p.error(f"--build: {len(args.build)} given; an A/B needs two or more builds (NAME=CACHE_DIR[@[D:][BMx]BN[sST]])")
    import torch
    import triton.testing as tt
    builds, specs, orders = {}, {}, {}
    for b in args.build:
        name, where = b.split("=", 1)
        root, _, tile = where.partition("@")
        builds[name] = root
        tile = parse_tile(tile)
        specs[name] = load_build(name, root, tile)
        orders[name] = tile.get("tile_order")
    cases = ([(int(d), int(s), c) for d, s in (x.split("x") for x in args.cases.split(",")) for c in (False, True)]
             if args.cases else CASES)
    rows = []
    for d, s, causal in cases:
        h, b = 2048 // d, max(1, 16384 // s)
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        calls, outs = {}, {}
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def cudnn():
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        calls["cudnn"] = cudnn
        for name, root in builds.items():
            qb, kb, vb = q.clone(), k.clone(), v.clone()            # own tensors: own prepared launch
            ob = torch.full_like(q, float("nan"))
            os.environ["WARPLOOM_CACHE_DIR"] = root                  # the first call picks this build's kernel
            spec = specs[name][(d, causal)]

            def call(qb=qb, kb=kb, vb=vb, ob=ob, spec=spec, order=orders[name]):
                ops_attention.TILE_ORDER = order                     # part of the fast path's key: own launch
                return ops.attention(qb, kb, vb, causal=causal, layout="bhsd", out=ob, spec=spec)
            call()
            torch.cuda.synchronize()
            outs[name] = ((ob.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
            calls[name] = call
        per = {n: [] for n in calls}
        for _ in range(args.rounds):
            for n, fn in calls.items():
                per[n].append(tt.do_bench(fn, warmup=100, rep=300, return_mode="median"))
        ms = {n: statistics.median(t) for n, t in per.items()}
        first = next(iter(builds))
        row = {"D": d, "S": s, "B": b, "H": h, "causal": causal, "ms": ms, "ms_rounds": per, "err_vs_cudnn": outs,
               "tflops": {n: flops / t / 1e9 for n, t in ms.items()},
               "vs_cudnn": {n: ms["cudnn"] / ms[n] for n in builds},
               f"vs_{first}": {n: ms[first] / ms[n] for n in builds}}
        rows.append(row)
        print(f"D{d} S{s} {'causal' if causal else 'full  '} cuDNN {row['tflops']['cudnn']:5.0f} TF/s | "
              + "  ".join(f"{n} {row['tflops'][n]:5.0f} ({row['vs_cudnn'][n]:.3f}x cuDNN, {row[f'vs_{first}'][n]:.3f}x"
                          f" {first}, err {outs[n]:.1e})" for n in builds), flush=True)
        assert all(e < 2e-2 for e in outs.values()), outs
    for n in builds:
        g = math.exp(statistics.mean(math.log(r["vs_cudnn"][n]) for r in rows))
        print(f"geomean {n} / cudnn: {g:.3f}")
    date = datetime.date.today().isoformat()
    path = os.path.join(args.out, f"attention-ab-{date}{'-' + args.tag if args.tag else ''}.json")
    with open(path, "w") as f:
        json.dump({"date": date, "commit": commit(), "gpu": torch.cuda.get_device_name(), "builds": args.build,
                   "rounds": args.rounds, "timing": "triton do_bench median per round (100 ms warm-up, 300 ms)",
                   "rows": rows}, f, indent=1)
    print("->", path)
    plot(path)


def plot(path: str) -> str | None:
    """The A/B's PNG beside its JSON: per case, each build's speed as a ratio of cuDNN's (1.0 drawn), titled with the
    commit, date and GPU. None (and a note) when matplotlib is missing. `--plot JSON` redraws one on the CPU host."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG (the JSON has every number)")
        return None
    with open(path) as f:
        data = json.load(f)
    rows = data["rows"]
    builds = list(rows[0]["vs_cudnn"])
    labels = [f"D{r['D']} S{r['S']}\n{'causal' if r['causal'] else 'full'}" for r in rows]
    width = 0.8 / len(builds)
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(rows)), 4.5))
    for i, name in enumerate(builds):
        ax.bar([j + (i - (len(builds) - 1) / 2) * width for j in range(len(rows))],
               [r["vs_cudnn"][name] for r in rows], width, label=name)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("speed / cuDNN (bf16 SDPA)")
    lo = min(r["vs_cudnn"][n] for r in rows for n in builds)
    ax.set_ylim(min(0.8, lo - 0.02), None)
    ax.set_title(f"attention A/B, {data['commit']}, {data['date']}, {data['gpu']}", fontsize=9)
    ax.legend(fontsize=7, ncol=len(builds))
    fig.tight_layout()
    png = os.path.splitext(path)[0] + ".png"
    fig.savefig(png, dpi=110)
    print("->", png)
    return png


if __name__ == "__main__":
    main()
