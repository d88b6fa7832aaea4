"""Decode-size GEMMs (issue 36, target 4): M = 1, 2, 4, 8, 16 with N, K in {4096, 8192, 14336}, bf16, beside cuBLAS.

For each of the 45 shapes, with B as [K, N] ("kn": the PEERS.md layout, the issue's) and as the w.t() view of an [N, K]
weight ("nk": F.linear's decode), times in one process on the same inputs: cuBLAS (torch.matmul), `ops`
(warploom.ops.matmul as a user calls it: the tuning table's kernel or the tile model's) and the candidates of
`variants()` (what the compiler can build today: swap-AB kernels of other tiles, 32 x 64 at M = 16 and 128 columns
where 64-column CTAs make more than a wave; for a wave of CTAs or less, a split-K probe; at four reference shapes the
64-row grid kernel and stream-K as split-K; no deeper ring: wl-pipeline builds 8 stages at most). Every result is
checked against float32 torch with its output poisoned first (NaN), and dropped above 1e-2 relative error. Timing:
triton's do_bench (L2 flushed before every call, median), every variant of a shape once per round in turn, the median
of `--rounds` rounds. The ratio of a variant is cuBLAS time / its time (> 1: faster than cuBLAS).

The split-K probe ("splitK<s>", not a kernel ops can launch): K cut into s slices with no new kernel, by viewing the
operands so that one launch of a swap-AB kernel computes every slice pair. nk: A [M, K] as [M s, K/s] and the weight
[N, K] as [N s, K/s] (both free views); kn: B [K, N] as [K/s, s N] (a free view: rows of B interleaved) and A copied
to [M s, K/s] (A[i, r s + j] at row i s + j). The product [M s, N s] holds every slice's partial product (bf16) on its
diagonal blocks, which one torch reduction sums (in f32) into C. It costs s x the useful MMAs (cheap: the tensor
cores wait on B's bytes), a bf16 rounding of each partial and one (kn: two) extra launches, so it bounds from below
what a split-K swap-AB kernel (an f32 fix-up in the kernel) would give: it tells whether that mechanism pays.

    # CPU host, the compiler installed, from the tree the GPU gets (the standard set, then 2 kernels more: ~50 KB)
    warploom precompile --target sm_90a --cache .wlcache && python3 benchmarks/decode.py --build --cache .wlcache
    python3 benchmarks/decode.py --dry --cache .wlcache        # the plan, each kernel in the cache, the split-K views
    # the GPU (about 4.5 minutes, --budget 270 s; partial results written after every shape)
    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 benchmarks/decode.py --out $OUT
    python3 benchmarks/decode.py --plot $OUT/decode-DATE.json   # the PNG again, any host

Writes decode-<date>[-TAG].json (commit, date, card, torch, SMs, every variant's times per round, errors, ratios, the
kernels cuBLAS ran, the best shippable kernel per shape and the table entries it would make) and a PNG of the ratios.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import commit  # noqa: E402
from warploom import ops, tuning  # noqa: E402
from warploom.kernels import GemmSpec  # noqa: E402

MS = (1, 2, 4, 8, 16)
NKS = (4096, 8192, 14336)
SHAPES = [(m, n, k) for m in MS for n in NKS for k in NKS]
LAYOUTS = ("kn", "nk")          # kn first: the (PEERS.md) layout
NUM_SMS = 132                   # an H100 SXM's and an H200's; the GPU run takes the card's own count
SWAP_M = (8, 16, 32)            # the swap-AB kernels' block_m (the wgmma's n) built in kernels.SWAP_KERNELS
SPLITS = (2, 4)                 # split-K probe slice counts (M s <= 32: one swap tile along M s)
TOL = 1e-2                      # relative Frobenius error against float32 torch


def swap(bm: int, bn: int, stages: int, layout: str) -> GemmSpec:
    return GemmSpec("bf16", layout, bn, stages, "sm_90a", "grid", bm, epilogue="direct", swap_ab=True)


def least_swap_m(rows: int) -> int | None:
    """The least swap-AB block_m covering `rows` rows (one tile along M), or None above 32."""
    return next((b for b in SWAP_M if b >= rows), None)


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    kind: str                   # "ops" | "kernel" (a named kernel, run_gemm) | "splitk" (probe) | "streamk" (P forced)
    spec: GemmSpec | None
    tier: int                   # 0: cuBLAS and ops; 1: the candidates; 2: the references (dropped first)
    split: int = 1              # splitk: the slice count
    ctas: int = 0               # streamk: the CTA count P forced on the launch

    @property
    def shippable(self) -> bool:
        """A kernel warploom.ops could launch as it is (through the tuning table): not a probe."""
        return self.kind in ("ops", "kernel")


def pick(layout: str, m: int, n: int, k: int, sms: int = NUM_SMS) -> tuple[GemmSpec, bool]:
    """(the kernel ops.matmul runs for this problem, whether the tuning table chose it)."""
    spec = ops.pick_spec("bf16", layout, m, n, sms, k=k)
    return spec, tuning.lookup("bf16", layout, m, n, k) is not None


def variants(layout: str, m: int, n: int, k: int, sms: int = NUM_SMS) -> list[Variant]:
    """What is timed at one shape, beside cuBLAS (see the module's docstring; benchmarks/NOTES.md runs 41, 44, 47, 48
    for what was measured before)."""
    chosen, _ = pick(layout, m, n, k, sms)
    bm = least_swap_m(m)
    ctas = -(-n // 64)                                   # swap-AB 64-column CTAs (one tile along M)
    out = [Variant("ops", "ops", chosen, 0)]
    # Not here: deeper rings (16 stages of 9 KB would fit beside the 75 KB of 8x64 s8, twice the bytes in flight
    # per SM where the grid is one wave or less): wl-pipeline builds 2..8 stages only (passes/pipeline.py).
    if m > 8:        # M = 16: the 32-column MMA (run 47: 1.007 at 16x8192x8192, the 16-column one 0.996)
        out.append(Variant("swap 32x64 s8", "kernel", swap(32, 64, 8, layout), 1))
    if ctas > sms:   # N = 14336: 224 CTAs of 64 columns are 1.7 waves; 112 of 128 columns (two consumer warpgroups)
        #              are one
        out.append(Variant(f"swap {bm}x128 s8", "kernel", swap(bm, 128, 8, layout), 1))
    else:            # one wave or less: split K to bring more SMs to stream B (cuBLAS splits K at 1x4096x4096)
        for s in SPLITS:
            sb = least_swap_m(m * s)
            if sb is not None and k % (8 * s) == 0:      # K/s: whole 16-byte rows for TMA
                out.append(Variant(f"splitK{s} swap {sb}x64 s8", "splitk", swap(sb, 64, 8, layout), 1, split=s))
    if layout == "kn" and n == k and m in (1, 16) and n <= 8192:
        # the references (runs 41, 47: 0.81-0.90 at 1x4096x4096 and 16x8192x8192): the 64-row grid kernel the table
        # had before the swap kernels, and the stream-K 64 x 64 kernel launched on 2 x its tile count (split-K by 2)
        out.append(Variant("64x128 s8 grid", "kernel", GemmSpec("bf16", layout, 128, 8, "sm_90a", "grid", 64), 2))
        tiles = -(-m // 64) * -(-n // 64)
        out.append(Variant("streamK 64x64 s8 P=2T", "streamk",
                           GemmSpec("bf16", layout, 64, 8, "sm_90a", "streamk", 64), 2, ctas=2 * tiles))
    seen, kept = set(), []
    for v in out:    # a named kernel that is ops' own pick is timed once, as ops
        key = (v.kind if v.kind != "ops" else "kernel", v.spec, v.split, v.ctas)
        if key not in seen:
            seen.add(key)
            kept.append(v)
    return kept


def all_specs(layouts=LAYOUTS) -> list[GemmSpec]:
    out = {}
    for layout in layouts:
        for m, n, k in SHAPES:
            for v in variants(layout, m, n, k):
                out.setdefault(v.spec, None)
    return list(out)


# ---- the split-K probe's views (numpy or torch: reshape, swapaxes, diagonal and .T mean the same in both) ----------

def splitk_views(a, b, layout: str, s: int):
    """(a_src, needs_copy, b2, diag) for the split-K probe of C = a @ b cut into s slices of K. a_src: A's operand
    [M s, K/s] (needs_copy: a [M, s, K/s] strided view the caller copies to a contiguous buffer first); b2: B's operand
    as a view of b ([K/s, N s] as the w.t() view of the weight's [N s, K/s] (nk), or [K/s, s N] row-major (kn));
    diag(c2): the [M, N, s] view of the partial products on c2 = a2 @ b2's diagonal blocks, to sum over its last dim."""
    m, k = a.shape
    n = b.shape[1]
    if layout == "nk":
        a_src = a.reshape(m * s, k // s)                     # row i s + j: A[i, j K/s : (j + 1) K/s]
        b2 = b.T.reshape(n * s, k // s).T                    # weight row n s + j': W[n, j' K/s : (j' + 1) K/s]
        return a_src, False, b2, lambda c2: c2.reshape(m, s, n, s).diagonal(0, 1, 3)
    b2 = b.reshape(k // s, s * n)                            # B2[r, j' N + n] = B[r s + j', n]
    a_src = a.reshape(m, k // s, s).swapaxes(1, 2)           # A2[i s + j, r] = A[i, r s + j]
    return a_src, True, b2, lambda c2: c2.reshape(m, s, s, n).diagonal(0, 1, 2)


def check_splitk_views() -> list[str]:
    """numpy: the probe's views are views (no copy of B) and the diagonal sum gives a @ b; the problems found."""
    import numpy as np
    rng = np.random.default_rng(0)
    bad = []
    for layout in LAYOUTS:
        for m, n, k, s in ((1, 128, 256, 2), (2, 64, 512, 4), (8, 192, 128, 4), (16, 64, 256, 2), (3, 72, 96, 8)):
            a = rng.standard_normal((m, k))
            w = rng.standard_normal((n, k))
            b = w.T if layout == "nk" else np.ascontiguousarray(w.T)
            a_src, copy, b2, diag = splitk_views(a, b, layout, s)
            a2 = np.ascontiguousarray(a_src).reshape(m * s, k // s) if copy else a_src
            ok_views = np.shares_memory(b2, b) and (copy or np.shares_memory(a2, a))
            strides_ok = (b2.strides[0] == 8 and b2.strides[1] == 8 * (k // s)) if layout == "nk" else \
                b2.flags["C_CONTIGUOUS"]
            got = diag(a2 @ b2).sum(-1)
            err = np.abs(got - a @ b).max()
            if not (ok_views and strides_ok and err < 1e-9 and got.shape == (m, n)):
                bad.append(f"{layout} {m}x{n}x{k} s={s}: views {ok_views}, B2 strides {strides_ok}, max error {err}")
    return bad


# ---- the GPU run ----------------------------------------------------------------------------------------------------

def make_call(torch, v, layout, a, b, c, out_of, launcher, real_slots):
    """The call that times variant v, its result in c."""
    from warploom.kernels import get_kernel
    (m, k), n = a.shape, b.shape[1]
    if v.kind == "ops":
        return lambda: ops.matmul(a, b, out=c)
    art = get_kernel(v.spec)
    if v.kind == "kernel":
        return lambda: ops.run_gemm(art, a, b, out=c)
    if v.kind == "streamk":
        def call():            # the launch is prepared (and kept) with P CTAs; P forced on every call all the same
            launcher.cluster_slots = lambda artifact, device: v.ctas
            try:
                return ops.run_gemm(art, a, b, out=c)
            finally:
                launcher.cluster_slots = real_slots
        return call
    s = v.split                # the split-K probe
    a_src, copy, b2, diag = splitk_views(a, b, layout, s)
    a2 = torch.empty(m, s, k // s, device=a.device, dtype=a.dtype).view(m * s, k // s) if copy else a_src
    c2 = out_of(v.name + " partials", (m * s, n * s))
    d = diag(c2)

    def call():
        if copy:
            a2.view(m, s, k // s).copy_(a_src)
        ops.run_gemm(art, a2, b2, out=c2)
        return torch.sum(d, dim=-1, out=c)
    return call


def run_shape(torch, tt, layout, m, n, k, vs, rounds, warmup, rep, profile_cublas, stats):
    from warploom.runtime.launch import default_launcher
    dt = torch.bfloat16
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(n, k, device="cuda", dtype=dt).t() if layout == "nk" else torch.randn(k, n, device="cuda", dtype=dt)
    ref = a.float() @ b.float()
    ref_norm = torch.linalg.norm(ref).item()
    outs = {}

    def out_of(name, shape=(m, n)):
        outs[name] = torch.empty(*shape, device="cuda", dtype=dt)
        return outs[name]

    peer = None
    if profile_cublas:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.matmul(a, b)
            torch.cuda.synchronize()
        peer = sorted({e.name[:120] for e in prof.events() if e.device_type.name == "CUDA"})
    c_cublas = out_of("cublas")
    calls = {"cublas": (lambda: torch.matmul(a, b, out=c_cublas), c_cublas)}
    launcher = default_launcher()
    real_slots = launcher.cluster_slots
    errs, timed = {}, {}
    for v in vs:
        c = out_of(v.name)
        try:
            calls[v.name] = (make_call(torch, v, layout, a, b, c, out_of, launcher, real_slots), c)
        except Exception as e:                   # a kernel missing from the cache: recorded, the rest runs
            errs[v.name] = float("nan")
            print(f"  {layout} {m}x{n}x{k} {v.name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
    for name, (fn, c) in calls.items():          # each result checked, its outputs poisoned first
        for t in outs.values():
            t.fill_(float("nan"))
        try:
            fn()
            torch.cuda.synchronize()
            errs[name] = (torch.linalg.norm(c.float() - ref).item() / ref_norm)
        except Exception as e:                   # a kernel missing from the cache, a launch refused: recorded
            errs[name] = float("nan")
            print(f"  {layout} {m}x{n}x{k} {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
        if name == "cublas" or errs[name] <= TOL:
            timed[name] = fn
        else:
            print(f"  {layout} {m}x{n}x{k} {name}: relative error {errs[name]:.1e}, dropped", flush=True)
    per = {name: [] for name in timed}
    for _ in range(rounds):
        for name, fn in timed.items():
            t0 = time.perf_counter()
            per[name].append(tt.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
            stats["bench_s"] += time.perf_counter() - t0
            stats["bench_n"] += 1
    ms = {name: statistics.median(t) for name, t in per.items()}
    return {"layout": layout, "b": "w.t()" if layout == "nk" else "[K,N]", "M": m, "N": n, "K": k,
            "kernel": vs[0].spec.kernel_name, "cublas_kernels": peer, "ms": ms, "ms_rounds": per, "rel_err": errs,
            "ratio": {name: ms["cublas"] / t for name, t in ms.items() if name != "cublas"}}


# ---- the summary (any host) -----------------------------------------------------------------------------------------

def geomean(xs):
    xs = [x for x in xs if not math.isnan(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def best_of(row, kinds: dict, shippable: bool):
    """(name, ratio) of the fastest variant of the row that is (not) shippable, or (None, nan)."""
    names = [n for n in row["ratio"] if kinds.get(n, {}).get("shippable") == shippable]
    if not names:
        return None, float("nan")
    name = max(names, key=lambda x: row["ratio"][x])
    return name, row["ratio"][name]


def annotate(rows, kinds):
    for r in rows:
        r["best_shippable"], r["best_shippable_ratio"] = best_of(r, kinds[r["layout"]], True)
        r["best_probe"], r["best_probe_ratio"] = best_of(r, kinds[r["layout"]], False)


def summarize(rows, kinds) -> dict:
    annotate(rows, kinds)
    out = {}
    for layout in LAYOUTS:
        lr = [r for r in rows if r["layout"] == layout and "ops" in r["ratio"]]
        if not lr:
            continue
        ops_r = [r["ratio"]["ops"] for r in lr]
        best = [r["best_shippable_ratio"] for r in lr]
        both = [max(r["best_shippable_ratio"], 0 if math.isnan(r["best_probe_ratio"]) else r["best_probe_ratio"])
                for r in lr]
        out[layout] = {"shapes": len(lr), "geomean_ops": geomean(ops_r), "min_ops": min(ops_r),
                       "below_0.95_ops": sum(x < 0.95 for x in ops_r),
                       "geomean_best_shippable": geomean(best), "min_best_shippable": min(best),
                       "below_0.95_best_shippable": sum(x < 0.95 for x in best),
                       "geomean_best_with_probes": geomean(both), "min_best_with_probes": min(both),
                       "target_met_ops": geomean(ops_r) >= 1.0 and min(ops_r) >= 0.95 and len(lr) == len(SHAPES)}
    return out


def suggested_entries(rows, kinds, meta) -> tuple[dict, list]:
    """Tuning-table entries for the shapes whose best shippable kernel is not ops' pick: (entries the table accepts
    as they are, [(shape, kernel) whose kernel is not a tuning candidate yet: kernels.SWAP_KERNELS lacks it])."""
    entries, missing = {}, []
    for r in rows:
        name = r.get("best_shippable")
        if name in (None, "ops"):
            continue
        k = kinds[r["layout"]][name]
        spec = GemmSpec(**k["spec"])
        cands = {c for mm in tuning.PROBE_M for c in tuning.candidates("bf16", r["layout"], mm)}
        if spec not in cands:
            missing.append((f"{r['layout']} {r['M']}x{r['N']}x{r['K']}", spec.kernel_name, round(r["ratio"][name], 3)))
            continue
        timings = {(r["kernel"] if n == "ops" else kinds[r["layout"]][n]["kernel"]): t for n, t in r["ms"].items()
                   if n in r["ratio"] and kinds[r["layout"]].get(n, {}).get("shippable")}
        key = tuning.entry_key("matmul", "bf16", r["layout"], tuning.bucket(r["M"], r["N"], r["K"]))
        entries[key] = tuning.entry(spec, (r["M"], r["N"], r["K"]), timings, r["ms"]["cublas"], meta)
    return entries, missing


def print_table(rows, kinds, summary) -> None:
    annotate(rows, kinds)
    for layout in LAYOUTS:
        lr = [r for r in rows if r["layout"] == layout]
        if not lr:
            continue
        print(f"\nB {'[K,N]' if layout == 'kn' else 'w.t()'}: cuBLAS time / warploom time (> 1: warploom faster)")
        print(f"{'M':>3} {'N':>6} {'K':>6} {'cuBLAS us':>9} {'ops':>6}  {'ops kernel':<40} best shippable"
              f"{'':<22} best probe")
        for r in lr:
            ops_r = r["ratio"].get("ops", float("nan"))
            flag = "  <0.95" if ops_r < 0.95 else ""
            print(f"{r['M']:>3} {r['N']:>6} {r['K']:>6} {r['ms']['cublas'] * 1e3:9.2f} {ops_r:6.3f}  "
                  f"{r['kernel']:<40} {str(r['best_shippable']):<26} {r['best_shippable_ratio']:6.3f}   "
                  f"{str(r['best_probe']):<24} {r['best_probe_ratio']:6.3f}{flag}")
            others = "  ".join(f"{n} {x:.3f}" for n, x in r["ratio"].items() if n != "ops")
            print(f"{'':>28}{others}")
        s = summary.get(layout)
        if s:
            print(f"{layout}: {s['shapes']} shapes; ops geomean {s['geomean_ops']:.3f}, min {s['min_ops']:.3f}, "
                  f"{s['below_0.95_ops']} below 0.95 (target: geomean >= 1.0, none below 0.95: "
                  f"{'MET' if s['target_met_ops'] else 'not met'}); best shippable per shape: geomean "
                  f"{s['geomean_best_shippable']:.3f}, min {s['min_best_shippable']:.3f}, "
                  f"{s['below_0.95_best_shippable']} below 0.95; with the split-K probes: geomean "
                  f"{s['geomean_best_with_probes']:.3f}, min {s['min_best_with_probes']:.3f}")


def plot(path: str) -> str:
    """Per layout, each shape's ratio: ops, the best shippable kernel, the best probe; lines at 1.0 and 0.95."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(path) as f:
        d = json.load(f)
    layouts = [lay for lay in LAYOUTS if any(r["layout"] == lay for r in d["rows"])]
    fig, axes = plt.subplots(len(layouts), 1, figsize=(16, 4.2 * len(layouts)), squeeze=False)
    for ax, layout in zip(axes[:, 0], layouts):
        rows = [r for r in d["rows"] if r["layout"] == layout]
        xs = range(len(rows))
        ax.plot(xs, [r["ratio"].get("ops", float("nan")) for r in rows], "o", label="ops.matmul")
        ax.plot(xs, [r.get("best_shippable_ratio", float("nan")) for r in rows], "^", mfc="none",
                label="best shippable kernel")
        ax.plot(xs, [r.get("best_probe_ratio", float("nan")) for r in rows], "x", label="best split-K / stream-K probe")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(0.95, color="r", lw=0.8, ls="--")
        ax.set_xticks(list(xs), [f"{r['M']}x{r['N']}x{r['K']}" for r in rows], rotation=90, fontsize=6)
        s = d.get("summary", {}).get(layout, {})
        ax.set_title(f"B {'[K,N]' if layout == 'kn' else 'w.t()'}: ops geomean {s.get('geomean_ops', float('nan')):.3f}"
                     f" min {s.get('min_ops', float('nan')):.3f}; best shippable geomean "
                     f"{s.get('geomean_best_shippable', float('nan')):.3f}", fontsize=8)
        ax.set_ylabel("cuBLAS time / warploom time")
        ax.legend(fontsize=7)
    fig.suptitle(f"decode GEMMs, bf16: {d['gpu']}, commit {d['commit']}, {d['date']}", fontsize=9)
    fig.tight_layout()
    out = path[:-5] + ".png"
    fig.savefig(out, dpi=100)
    return out


def kinds_of(layouts, sms) -> dict:
    """{layout: {variant name: its description}} (names are unique per layout and shape class)."""
    out = {}
    for layout in layouts:
        d = out.setdefault(layout, {"cublas": {"kind": "cublas", "shippable": None}})
        for m, n, k in SHAPES:
            for v in variants(layout, m, n, k, sms):
                if v.name == "ops":
                    continue
                d.setdefault(v.name, {"kind": v.kind, "shippable": v.shippable, "kernel": v.spec.kernel_name,
                                      "spec": dataclasses.asdict(v.spec), "split": v.split, "ctas": v.ctas})
        d["ops"] = {"kind": "ops", "shippable": True, "kernel": "ops.pick_spec's"}
    return out


# ---- plan, build, dry -----------------------------------------------------------------------------------------------

def plan(layouts, only) -> list:
    cases = [(layout, m, n, k) for layout in layouts for m, n, k in SHAPES]
    if only:
        keep = {tuple(int(x) for x in s.split("x")) for s in only.split(",")}
        cases = [c for c in cases if c[1:] in keep]
    return cases


def keep_tier(vs, level: int):
    """Level 0: everything; 1: no references; 2: no references and a round less (main)."""
    return [v for v in vs if v.tier <= (2 if level == 0 else 1)]


def rounds_at(rounds: int, level: int) -> int:
    return rounds if level < 2 else max(rounds - 1, 1)


def build(layouts) -> None:
    from warploom.kernels import default_cache, get_kernel, precompile_set, read_index
    cache = default_cache()
    t0 = time.time()
    specs = all_specs(layouts)
    for spec in specs:
        art = get_kernel(spec)
        print(f"  {art.name}")
    standard = set(precompile_set("sm_90a"))
    extra = [s for s in specs if s not in standard]
    size = 0
    for s in extra:
        entry = read_index(cache, s)
        folder = cache.root / entry["key"]
        size += sum(f.stat().st_size for f in folder.iterdir()) + (cache.root / "index" / f"{s.lookup_id}.json").stat().st_size
    total = sum(f.stat().st_size for f in cache.root.rglob("*") if f.is_file())
    print(f"{len(specs)} kernels in {cache.root} ({time.time() - t0:.0f} s); {len(extra)} beyond `warploom precompile`'s "
          f"set: {size / 1024:.0f} KB ({', '.join(s.kernel_name for s in extra)}); the cache holds {total / 2**20:.1f} MB")


def dry(layouts, only, rounds, per_call_s) -> int:
    """The plan without a GPU: ops' pick and the variants per shape, each kernel in the cache or not, the time it
    takes, and the split-K views checked in numpy."""
    from warploom.kernels import compiler_hash, default_cache, read_index
    cache, h = default_cache(), compiler_hash()
    status = {}
    for spec in all_specs(layouts):
        e = read_index(cache, spec)
        status[spec] = ("ok" if e and e.get("compiler") == h and (cache.root / e["key"]).is_dir()
                        else "stale" if e else "missing")
    cases = plan(layouts, only)
    timings = 0
    print(f"cache {cache.root}: {sum(v == 'ok' for v in status.values())} of {len(status)} kernels ready"
          + "".join(f"\n  {st}: {s.kernel_name}" for s, st in status.items() if st != "ok"))
    picks = {}
    for layout, m, n, k in cases:
        spec, tabled = pick(layout, m, n, k)
        vs = variants(layout, m, n, k)
        timings += len(vs) + 1
        picks.setdefault((layout, spec.kernel_name, tabled), []).append(f"{m}x{n}x{k}")
        print(f"{layout} {m:>2}x{n}x{k}: ops -> {spec.kernel_name} ({'table' if tabled else 'tile model'}); "
              + ", ".join(f"{v.name}{'' if status.get(v.spec) == 'ok' else ' [' + str(status.get(v.spec)) + ']'}"
                          f"{' (ref)' if v.tier == 2 else ''}" for v in vs[1:]))
    print("\nops picks:")
    for (layout, name, tabled), shapes in picks.items():
        print(f"  {layout} {name} ({'tuning table' if tabled else 'tile model: ops._pick_swap'}): {len(shapes)} shapes"
              + (f" ({', '.join(shapes)})" if len(shapes) < 10 else ""))
    est = timings * rounds * per_call_s
    print(f"\n{len(cases)} shapes, {timings} timed variants (cuBLAS included) x {rounds} rounds: ~{est:.0f} s of "
          f"do_bench at ~{per_call_s} s a call, plus ~{0.5 * len(cases) + 25:.0f} s of start, checks and profiling")
    bad = check_splitk_views()
    print("split-K probe views (numpy):", "ok" if not bad else "WRONG\n  " + "\n  ".join(bad))
    return 1 if bad else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    p.add_argument("--cache", default=None, help="the kernel cache folder (sets WARPLOOM_CACHE_DIR)")
    p.add_argument("--build", action="store_true", help="CPU host: compile every variant's kernel into the cache")
    p.add_argument("--dry", action="store_true", help="no GPU: print the plan, check the cache and the probe's views")
    p.add_argument("--plot", default="", help="draw the PNG of this JSON and exit (any host)")
    p.add_argument("--layouts", default="kn,nk", help="kn (B [K,N], the issue's), nk (w.t()), or both in that order")
    p.add_argument("--only", default="", help="comma-separated MxNxK shapes (default: the 45)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--warmup", type=int, default=25, help="do_bench warm-up, ms")
    p.add_argument("--rep", type=int, default=100, help="do_bench timed span, ms")
    p.add_argument("--budget", type=float, default=270.0,
                   help="seconds for the whole run: where the projection passes it, the references, then a round "
                        "(and the nk profiles) are dropped; past it the remaining shapes are skipped (recorded)")
    p.add_argument("--no-profile", action="store_true", help="skip naming cuBLAS's kernels (torch.profiler)")
    p.add_argument("--tag", default="")
    args = p.parse_args()
    if args.cache:
        os.environ["WARPLOOM_CACHE_DIR"] = args.cache
    layouts = [x for x in LAYOUTS if x in args.layouts.split(",")]
    if args.plot:
        print("->", plot(args.plot))
        return 0
    if args.build:
        build(layouts)
        return 0
    per_call_s = (args.warmup + args.rep) / 1e3 + 0.015
    if args.dry:
        return dry(layouts, args.only, args.rounds, per_call_s)

    t_start = time.time()
    import torch
    import triton.testing as tt
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)
    date = datetime.date.today().isoformat()
    stem = os.path.join(args.out, f"decode-{date}{args.tag}")
    cases = plan(layouts, args.only)
    planned = {c: variants(*c, sms) for c in cases}
    kinds = kinds_of(layouts, sms)
    meta = {"date": date, "commit": commit(), "gpu": props.name, "torch": torch.__version__, "sms": sms,
            "rounds": args.rounds, "timing": f"triton do_bench median (warm-up {args.warmup} ms, {args.rep} ms, L2 "
            "flushed before each call), every variant of a shape once per round in turn, the median of the rounds",
            "ratio": "cuBLAS time / variant time", "tolerance": TOL, "variants": kinds}
    from warploom.kernels import get_kernel
    absent = {}
    for spec in {v.spec for vs in planned.values() for v in vs}:     # every kernel loads before any time is spent
        try:
            get_kernel(spec)
        except Exception as e:
            absent[spec.kernel_name] = f"{type(e).__name__}: {str(e)[:160]}"
    for name, why in absent.items():
        print(f"MISSING {name}: {why}", flush=True)
    if any(vs[0].spec.kernel_name in absent for vs in planned.values()):
        print("ops' own kernels are missing from the cache: build it from this tree (module docstring) and run again")
        return 2
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(300):        # about half a second of cuBLAS at full load: the clocks up before the first shape
        torch.matmul(big, big)
    torch.cuda.synchronize()
    small = big[:64, :64].contiguous()
    tt.do_bench(lambda: torch.matmul(small, small), warmup=1, rep=5)     # triton's driver set up, not timed
    if not args.no_profile:             # the profiler's first start (CUPTI) before the first shape
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]):
            torch.matmul(small, small)
            torch.cuda.synchronize()
    del big
    rows, skipped, levels = [], [], []
    stats = {"bench_s": 0.0, "bench_n": 0}
    shape_overhead = 0.5
    for i, (layout, m, n, k) in enumerate(cases):
        elapsed = time.time() - t_start
        left = args.budget - elapsed
        if left <= 0:
            skipped.append(f"{layout} {m}x{n}x{k}")
            continue
        per_call = stats["bench_s"] / stats["bench_n"] if stats["bench_n"] else per_call_s
        rest = cases[i:]
        need = {lv: sum((len(keep_tier(planned[c], lv)) + 1) * rounds_at(args.rounds, lv) * per_call + shape_overhead
                        for c in rest) for lv in (0, 1, 2)}
        level = next((lv for lv in (0, 1, 2) if need[lv] <= left), 2)
        levels.append(level)
        rounds = rounds_at(args.rounds, level)
        vs = keep_tier(planned[(layout, m, n, k)], level)
        t0, b0 = time.time(), stats["bench_s"]
        row = run_shape(torch, tt, layout, m, n, k, vs, rounds, args.warmup, args.rep,
                        not args.no_profile and (layout == "kn" or level == 0), stats)
        row["level"], row["rounds"] = level, rounds
        rows.append(row)
        done = i + 1 - len(skipped)
        shape_overhead = ((shape_overhead * (done - 1)) + (time.time() - t0) - (stats["bench_s"] - b0)) / done
        others = "  ".join(f"{nm} {x:.3f}" for nm, x in row["ratio"].items() if nm != "ops")
        print(f"[{i + 1}/{len(cases)} {time.time() - t_start:5.0f} s] {layout} {m:>2}x{n}x{k}  cuBLAS "
              f"{row['ms']['cublas'] * 1e3:7.2f} us  ops {row['ratio'].get('ops', float('nan')):.3f} "
              f"({row['kernel']})  | {others}" + (f"  [level {level}]" if level else ""), flush=True)
        summary = summarize(rows, kinds)
        with open(stem + ".json", "w") as f:      # partial results after every shape
            json.dump({**meta, "summary": summary, "skipped": skipped, "rows": rows,
                       "elapsed_s": time.time() - t_start}, f, indent=1)
    summary = summarize(rows, kinds)
    entries, missing = suggested_entries(rows, kinds, {"gpu": props.name, "sms": sms, "torch": torch.__version__})
    doc = {**meta, "summary": summary, "skipped": skipped, "levels": sorted(set(levels)), "rows": rows,
           "suggested_entries": entries, "best_not_a_tuning_candidate": missing,
           "elapsed_s": time.time() - t_start}
    with open(stem + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    print_table(rows, kinds, summary)
    if skipped:
        print(f"skipped (budget {args.budget:.0f} s): {', '.join(skipped)}")
    if missing:
        print("best kernels the tuning table cannot name yet (add them to kernels.SWAP_KERNELS / tuning.candidates):\n  "
              + "\n  ".join(f"{s}: {name} {r}" for s, name, r in missing))
    print(f"{len(entries)} suggested tuning entries in the JSON ('suggested_entries'; tuning.write merges them)")
    try:
        print("->", stem + ".json,", plot(stem + ".json"))
    except Exception as e:                         # the JSON is what matters; `--plot` redraws it anywhere
        print(f"-> {stem}.json (no PNG: {type(e).__name__}: {e})")
    print(f"elapsed {time.time() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
