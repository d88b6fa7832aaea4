"""Tile sweep for the sm_90a attention kernel: each (block_n, stages) variant of a head dim, with the consumers'
intra-warpgroup overlap and without it (the serial schedule), beside cuDNN SDPA (bf16) in the same process, on the
same inputs, to choose the standard tile and schedule from measurements.

    warploom precompile ... ; python benchmarks/attention_tiles.py --build --cache .wlcache    # CPU host: compile
    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python benchmarks/attention_tiles.py --out DIR  # GPU

The variants run through warploom.ops.attention with its kernel choice (ops_attention.pick_spec) swapped for the
variant's AttentionSpec; everything else (tensor maps, launch) is the path users get. Writes
attention-tiles-<date>.json (commit, machine, per variant and case: ms, TFLOP/s, ratio to cuDNN).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attention import attention_flops, grid, machine, time_cuda  # noqa: E402
from common import commit  # noqa: E402

# (head dim, block_n, stages): the standard tile of each head dim first, then the candidates
VARIANTS = [(64, 128, 2), (64, 128, 3), (64, 128, 4), (64, 192, 2), (64, 64, 4),
            (128, 128, 2), (128, 176, 2), (128, 96, 3), (128, 64, 4),
            (256, 64, 2), (256, 80, 2)]
SEQLENS = (4096, 16384)
OVERLAPS = (True, False)        # AttentionSpec.overlap: FA3's intra-warpgroup overlap, then the serial schedule


def specs(elem="bf16"):
    from warploom.kernels import AttentionSpec
    return [AttentionSpec(elem, d, causal, block_n=bn, stages=st, overlap=ov) for d, bn, st in VARIANTS
            for causal in (False, True) for ov in OVERLAPS]


def build(cache_dir: str) -> None:
    """Compile every variant into the cache (a variant the planners refuse is reported and skipped)."""
    from warploom.kernels import get_kernel
    from warploom.runtime.cache import KernelCache
    cache = KernelCache(cache_dir)
    for spec in specs():
        try:
            a = get_kernel(spec, cache)
            print(f"  {spec.kernel_name:<40} ok   {a.smem_bytes} B smem")
        except Exception as e:  # noqa: BLE001 - a refused variant is a result too
            print(f"  {spec.kernel_name:<40} refused: {str(e).splitlines()[0][:150]}")


def run(args) -> None:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import warploom.ops_attention as oa
    from warploom import ops
    rows = []
    for d in sorted({v[0] for v in VARIANTS}):
        cases = [c for c in grid(head_dims=(d,), seqlens=SEQLENS)]
        for case in cases:
            b, h, s, causal = case["B"], case["H"], case["S"], case["causal"]
            g = torch.Generator(device="cuda").manual_seed(s + d)
            q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                cudnn = time_cuda(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                  args.warmup, args.iters)
            qq, kk, vv = (t.transpose(1, 2).contiguous() for t in (q, k, v))
            out = torch.empty_like(qq)
            flops = attention_flops(b, h, s, s, d, causal)
            for dd, bn, st, ov in ((*v, ov) for v in VARIANTS for ov in OVERLAPS):
                if dd != d:
                    continue
                spec = oa.AttentionSpec("bf16", d, causal, block_n=bn, stages=st, overlap=ov)
                oa.pick_spec = lambda elem, head_dim, c, target="sm_90a", seqlen_q=None, _s=spec: _s  # noqa: E731
                row = dict(case, block_n=bn, stages=st, overlap=ov, kernel=spec.kernel_name, cudnn_ms=cudnn)
                try:
                    ops.attention(qq, kk, vv, causal=causal, out=out)
                    err = ((out.transpose(1, 2).float() - ref.float()).abs().max() / ref.float().abs().max()).item()
                    ms = time_cuda(lambda: ops.attention(qq, kk, vv, causal=causal, out=out), args.warmup, args.iters)
                    row.update(ms=ms, tflops=flops / ms / 1e9, cudnn_tflops=flops / cudnn / 1e9,
                               ratio_vs_cudnn=cudnn / ms, max_rel_err_vs_cudnn=err)
                except Exception as e:  # noqa: BLE001
                    row.update(error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                rows.append(row)
                shown = (f"{row['ratio_vs_cudnn']:.3f}x cuDNN  {row['tflops']:.0f} TF/s  err {row['max_rel_err_vs_cudnn']:.1e}"
                         if "ms" in row else row["error"])
                print(f"D={d:<3} S={s:<5} causal={causal!s:<5} bn={bn:<3} st={st} {'ov' if ov else 'serial':<6}  {shown}",
                      flush=True)
            del q, k, v, qq, kk, vv, out, ref
            torch.cuda.empty_cache()
    date = datetime.date.today().isoformat()
    path = os.path.join(args.out, f"attention-tiles-{date}.json")
    with open(path, "w") as f:
        json.dump(dict(machine(), date=date, commit=commit(), warmup=args.warmup, iters=args.iters, rows=rows), f,
                  indent=1)
    for d in sorted({v[0] for v in VARIANTS}):
        for bn, st, ov in sorted({(r["block_n"], r["stages"], r["overlap"]) for r in rows if r["D"] == d}):
            rs = [r["ratio_vs_cudnn"] for r in rows if r["D"] == d
                  and (r["block_n"], r["stages"], r["overlap"]) == (bn, st, ov) and "ratio_vs_cudnn" in r]
            if rs:
                print(f"D={d} bn={bn} stages={st} {'overlap' if ov else 'serial'}: geomean "
                      f"{statistics.geometric_mean(rs):.3f}x cuDNN over {len(rs)}")
    print("->", path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", action="store_true", help="compile the variants into --cache (CPU host)")
    p.add_argument("--cache", default=".wlcache")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    if args.build:
        build(args.cache)
    else:
        os.makedirs(args.out, exist_ok=True)
        run(args)


if __name__ == "__main__":
    main()
