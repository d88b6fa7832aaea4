"""An experiment for the decode-size GEMMs (1x4096x4096, 16x8192x8192; issue 12's targets at 0.86–0.92 of cuBLAS):
which of the small-M kernels the compiler can already build streams B fastest? Times, in one process, cuBLAS and
the named GEMM kernels of `VARIANTS` (the table's 64 x 128 8-stage grid kernel first), each `--rounds` rounds of
triton's do_bench (median of the rounds); every result is checked against float32 torch. Also names the kernel
cuBLAS runs (torch.profiler), so the peer's choice is on record.

    warploom precompile ... && python3 benchmarks/decode_probe.py --build          # CPU host: the variants into the cache
    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 benchmarks/decode_probe.py --out $OUT [--layout nk]
"""
import argparse
import dataclasses
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warploom.kernels import GemmSpec, get_kernel  # noqa: E402

SHAPES = [(1, 4096, 4096), (16, 8192, 8192)]


def _spec(bm: int, bn: int, stages: int, epilogue: str = "tma", swap: bool = False, layout: str = "kn") -> GemmSpec:
    return GemmSpec("bf16", layout, bn, stages, "sm_90a", "grid", bm, epilogue="direct" if swap else epilogue,
                    swap_ab=swap)


# name -> the kernel; the table's 64 x 128 8-stage grid kernel first. Run 47: the swap-AB kernels (C^T = B^T A^T,
# the wgmma's 64 rows along N, M the wgmma's n), as cuBLAS runs these shapes (run 44: nvjet ..._64x8 / _64x16)
VARIANTS = {"64x128s8": _spec(64, 128, 8), "swap 8x64s8": _spec(8, 64, 8, swap=True),
            "swap 16x64s4": _spec(16, 64, 4, swap=True), "swap 16x64s8": _spec(16, 64, 8, swap=True),
            "swap 16x128s8": _spec(16, 128, 8, swap=True), "swap 32x64s8": _spec(32, 64, 8, swap=True)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", action="store_true", help="CPU host: compile the variants into $WARPLOOM_CACHE_DIR")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--layout", choices=("kn", "nk"), default="kn",
                   help="B as [K, N] (issue 12's shapes) or as w.t() of a [N, K] weight (F.linear's decode)")
    args = p.parse_args()
    variants = {name: dataclasses.replace(spec, b_layout=args.layout) for name, spec in VARIANTS.items()}
    if args.build:
        for spec in variants.values():
            print(get_kernel(spec).name)
        return
    import torch
    import triton.testing as tt
    from torch.profiler import ProfilerActivity, profile
    from common import commit
    from warploom import ops
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = (torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t() if args.layout == "nk"
             else torch.randn(k, n, device="cuda", dtype=torch.bfloat16))
        ref = a.float() @ b.float()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.matmul(a, b)
            torch.cuda.synchronize()
        peer = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
        calls, errs = {"cublas": lambda: torch.matmul(a, b)}, {}
        for name, spec in variants.items():
            art = get_kernel(spec)
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            ops.run_gemm(art, a, b, out=out)
            torch.cuda.synchronize()
            errs[name] = ((out.float() - ref).norm() / ref.norm()).item()
            if not errs[name] < 1e-2:
                print(f"{m}x{n}x{k} {name}: relative error {errs[name]:.1e}, dropped", flush=True)
                continue
            calls[name] = (lambda art=art, out=out: ops.run_gemm(art, a, b, out=out))
        per = {name: [] for name in calls}
        for _ in range(args.rounds):
            for name, fn in calls.items():
                per[name].append(tt.do_bench(fn, warmup=100, rep=300, return_mode="median"))
        ms = {name: statistics.median(t) for name, t in per.items()}
        print(f"{m}x{n}x{k}: cuBLAS runs {peer}")
        for name, t in ms.items():
            print(f"{m}x{n}x{k} {name:<20} {t * 1e3:8.2f} us  {ms['cublas'] / t:.3f}x cuBLAS  "
                  f"rounds {' '.join(f'{x * 1e3:.2f}' for x in per[name])}", flush=True)
        rows.append({"M": m, "N": n, "K": k, "b_layout": args.layout, "cublas_kernels": peer, "ms": ms, "ms_rounds": per, "rel_err": errs,
                     "vs_cublas": {name: ms["cublas"] / t for name, t in ms.items()}})
    date = datetime.date.today().isoformat()
    path = os.path.join(args.out, f"decode-probe-{date}{'' if args.layout == 'kn' else '-nk'}.json")
    with open(path, "w") as f:
        json.dump({"date": date, "commit": commit(), "gpu": torch.cuda.get_device_name(), "rounds": args.rounds,
                   "variants": {k: v.kernel_name for k, v in variants.items()},
                   "timing": "triton do_bench median per round (100 ms warm-up, 300 ms)", "rows": rows}, f, indent=1)
    print("->", path)


if __name__ == "__main__":
    main()
