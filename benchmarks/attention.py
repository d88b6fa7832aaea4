"""Attention forward benchmark on the GPU: warploom.ops.attention beside cuDNN and FlashAttention-2 (torch SDPA, same
process, same inputs) and JAX Mosaic GPU (fp16, a subprocess of the same job).

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python benchmarks/attention.py --out benchmarks/results

The grid of ../shared/PEERS.md: head dims 64 and 128, seqlen 1024 .. 16384 at 16k tokens a batch (batch =
16384 / seqlen), 2048 hidden (heads = 2048 / head dim), causal and not, Sq = Sk. Peers:
  cudnn_bf16   torch.nn.functional.scaled_dot_product_attention under sdpa_kernel([SDPBackend.CUDNN_ATTENTION]),
               layout (B, H, S, D), bf16
  fa2_bf16     the same under sdpa_kernel([SDPBackend.FLASH_ATTENTION])
  jax_mgpu_f16 jax.experimental.pallas.ops.gpu.attention_mgpu.attention, TuningConfig(block_q=64, block_kv=128,
               max_concurrent_steps=2), layout (B, S, H, D), float16 (bf16 fails in jax 0.11.2); run in a child
               process with XLA_PYTHON_CLIENT_PREALLOCATE=false so that JAX and torch do not fight over memory
  warploom_bf16, warploom_f16: warploom.ops.attention, layout (B, S, H, D) (--layout bhsd for (B, H, S, D)),
               out= preallocated
  warploom_grid_bf16 (with --compare-grid): warploom bf16 with the grid-schedule kernels (a CTA per tile) in
               place of ops_attention.SCHEDULE's, to measure the persistent schedule against it in the same run
  (--schedule streamk runs every warploom peer, the burst's too, with the stream-K kernels where not causal)
Timing: median of CUDA-event timings (one event pair per call) after warm-up, random inputs; JAX through its
Mosaic GPU profiler when present (else wall clock around block_until_ready, marked in the JSON).
The two clocks differ, and so do the GPU's regimes: the torch-side peers run in interleaved rounds, seconds of
back-to-back work, while the child times Mosaic case by case between compiles. So the child also times Mosaic and
warploom fp16 side by side with one clock (`--burst`, on by default): the wall clock around `--iters` back-to-back
calls after `--warmup` ones, one synchronization at the end, the two in turn, the order reversed every other round
(`--rounds`), the median of the rounds: jax_mgpu_f16_burst and warploom_f16_burst, and their ratio warploom_f16_vs_jax_burst (the like-for-like
comparison with Mosaic; warploom_f16_vs_jax stays the cross-clock one).
FLOPs = 4 * B * H * Sq * Sk * D, halved when causal (the FlashAttention papers' convention).
Writes attention[-TAG]-<date>.json (commit, date, machine, every time and TFLOP/s) and a PNG of TFLOP/s per case
(when matplotlib is installed); prints a table and the ratios warploom / cuDNN (bf16) and warploom / JAX (fp16).
A peer that fails (a missing kernel, an unsupported config) is recorded with its error; the others still run.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import commit  # noqa: E402

HEAD_DIMS = (64, 128)
SEQLENS = (1024, 4096, 8192, 16384)
TOKENS = 16384
HIDDEN = 2048
PEERS = ("warploom_bf16", "cudnn_bf16", "fa2_bf16", "warploom_f16", "jax_mgpu_f16", "warploom_grid_bf16")
TORCH_PEERS = ("warploom_bf16", "cudnn_bf16", "fa2_bf16", "warploom_f16", "warploom_grid_bf16")
LABELS = {"warploom_bf16": "warploom bf16", "cudnn_bf16": "cuDNN SDPA bf16", "fa2_bf16": "FlashAttention-2 SDPA bf16",
          "warploom_f16": "warploom fp16", "jax_mgpu_f16": "JAX Mosaic GPU fp16",
          "warploom_grid_bf16": "warploom bf16, grid schedule", "jax_mgpu_f16_burst": "JAX Mosaic GPU fp16 (burst)",
          "warploom_f16_burst": "warploom fp16 (burst, beside Mosaic)"}
RATIOS = {"warploom_vs_cudnn": ("warploom_bf16", "cudnn_bf16"), "warploom_vs_fa2": ("warploom_bf16", "fa2_bf16"),
          "warploom_f16_vs_jax": ("warploom_f16", "jax_mgpu_f16"),
          "warploom_vs_grid": ("warploom_bf16", "warploom_grid_bf16"),
          "warploom_f16_vs_jax_burst": ("warploom_f16_burst", "jax_mgpu_f16_burst")}
BURST_PEERS = ("jax_mgpu_f16", "warploom_f16")    # timed side by side in the JAX child, one clock for both


# ---- what is measured (no GPU needed) --------------------------------------------------------

def attention_flops(b: int, h: int, sq: int, sk: int, d: int, causal: bool) -> float:
    """4 * B * H * Sq * Sk * D (two matmuls of 2 * Sq * Sk * D each per head), halved when causal."""
    return 4.0 * b * h * sq * sk * d / (2 if causal else 1)


def grid(head_dims=HEAD_DIMS, seqlens=SEQLENS, tokens=TOKENS, hidden=HIDDEN) -> list[dict]:
    """The cases: batch = tokens / seqlen (at least 1), heads = hidden / head dim, causal and not."""
    cases = []
    for d in head_dims:
        for s in seqlens:
            b, h = max(1, tokens // s), max(1, hidden // d)
            for causal in (False, True):
                cases.append({"D": d, "S": s, "B": b, "H": h, "causal": causal,
                              "flops": attention_flops(b, h, s, s, d, causal)})
    return cases


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"),
                   help="folder for the JSON and the PNG")
    p.add_argument("--tag", default="", help="added to the file names: attention-TAG-<date>.json")
    p.add_argument("--head-dims", type=int, nargs="+", default=list(HEAD_DIMS), metavar="D")
    p.add_argument("--seqlens", type=int, nargs="+", default=list(SEQLENS), metavar="S")
    p.add_argument("--tokens", type=int, default=TOKENS, help="tokens a batch (batch = tokens / seqlen)")
    p.add_argument("--hidden", type=int, default=HIDDEN, help="heads x head dim")
    p.add_argument("--layout", choices=("bshd", "bhsd"), default="bshd", help="the layout warploom reads")
    p.add_argument("--warmup", type=int, default=10, help="calls before timing")
    p.add_argument("--iters", type=int, default=50, help="timed calls (the median is kept)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of timing every torch-side peer in turn (the "
                   "median of the rounds' medians is kept)")
    p.add_argument("--schedule", choices=("persistent", "streamk"), default=None,
                   help="warploom's schedule (ops_attention.SCHEDULE; streamk: non-causal cases only); default: the "
                   "standard kernels'")
    p.add_argument("--compare-grid", action="store_true",
                   help="also time warploom bf16 with the grid-schedule kernels (warploom_grid_bf16)")
    p.add_argument("--jax", choices=("subprocess", "in-process", "off"), default="subprocess",
                   help="how to run the JAX Mosaic GPU peer (default: a child process of this job)")
    p.add_argument("--burst", action=argparse.BooleanOptionalAction, default=True,
                   help="in the JAX child, also time Mosaic and warploom fp16 with one clock, in alternating rounds "
                   "(jax_mgpu_f16_burst, warploom_f16_burst; default on)")
    p.add_argument("--jax-worker", metavar="JSON", help=argparse.SUPPRESS)   # the child: write JAX rows to JSON
    args = p.parse_args(argv)
    for name in ("head_dims", "seqlens"):
        bad = [x for x in getattr(args, name) if x < 1]
        if bad:
            p.error(f"--{name.replace('_', '-')}: {bad} must be positive")
    if args.tokens < 1 or args.hidden < 1 or args.warmup < 0 or args.iters < 1 or args.rounds < 1:
        p.error("--tokens, --hidden, --iters and --rounds must be >= 1, --warmup >= 0")
    return args


def case_key(case: dict) -> tuple:
    return (case["D"], case["S"], case["causal"])


def fill_rates(row: dict) -> dict:
    """TFLOP/s of every timed peer and the ratios of RATIOS (None where a side is missing)."""
    row["tflops"] = {peer: (row["flops"] / ms / 1e9 if ms else None) for peer, ms in row["ms"].items()}
    for name, (num, den) in RATIOS.items():
        a, b = row["tflops"].get(num), row["tflops"].get(den)
        row[name] = a / b if a and b else None
    return row


def geomean(values) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(rows: list[dict]) -> dict:
    """Geomean of each ratio over the cases where both sides ran, and how many cases that was."""
    return {name: {"geomean": geomean(r[name] for r in rows), "cases": sum(1 for r in rows if r[name])}
            for name in RATIOS}


def merge(rows: list[dict], peer: str, results: list[dict]) -> None:
    """Put a child's timings ({"D", "S", "causal", "ms" | "error"}) into the rows of the same case."""
    by_key = {case_key(r): r for r in rows}
    for res in results:
        row = by_key.get(case_key(res))
        if row is None:
            continue
        row["ms"][peer] = res.get("ms")
        if res.get("error"):
            row["errors"][peer] = res["error"]
        if res.get("timing"):
            row.setdefault("timing", {})[peer] = res["timing"]
        for p in BURST_PEERS:          # the child's side-by-side timings, one clock for both (--burst)
            if res.get("burst") or res.get("burst_error"):
                row["ms"][f"{p}_burst"] = (res.get("burst") or {}).get(p)
                row.setdefault("timing", {})[f"{p}_burst"] = "wall clock around back-to-back calls, beside the other"
            if res.get("burst_error"):
                row["errors"][f"{p}_burst"] = res["burst_error"]
            if res.get("burst_rounds"):
                row.setdefault("ms_rounds", {})[f"{p}_burst"] = res["burst_rounds"][p]


def fmt(x, spec="6.0f") -> str:
    return format(x, spec) if isinstance(x, (int, float)) else f"{'-':>{int(spec.split('.')[0] or 1)}}"


def table(rows: list[dict]) -> str:
    head = (f"{'D':>4} {'S':>6} {'B':>3} {'H':>3} {'causal':>6}  " + " ".join(f"{p[:13]:>13}" for p in PEERS)
            + f"  {'wl/cuDNN':>8} {'wl16/JAX':>8} {'wl/grid':>8} {'16/JAXb':>8}")
    lines = [head + "   (TFLOP/s; ratios of TFLOP/s)"]
    for r in rows:
        lines.append(f"{r['D']:>4} {r['S']:>6} {r['B']:>3} {r['H']:>3} {str(r['causal']):>6}  "
                     + " ".join(fmt(r["tflops"].get(p), "13.0f") for p in PEERS)
                     + f"  {fmt(r['warploom_vs_cudnn'], '8.3f')} {fmt(r['warploom_f16_vs_jax'], '8.3f')}"
                     f" {fmt(r['warploom_vs_grid'], '8.3f')} {fmt(r.get('warploom_f16_vs_jax_burst'), '8.3f')}")
    return "\n".join(lines)


def plot(rows: list[dict], path: str, title: str) -> str | None:
    """Grouped bars of TFLOP/s per case, one panel per head dim; None (and a note) when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no PNG (the JSON has every number)")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    dims = sorted({r["D"] for r in rows})
    fig, axes = plt.subplots(len(dims), 1, figsize=(max(8, 1.6 * len(rows) / max(1, len(dims))), 4.2 * len(dims)),
                             squeeze=False)
    width = 0.8 / len(PEERS)
    for ax, d in zip(axes[:, 0], dims):
        sub = [r for r in rows if r["D"] == d]
        for i, peer in enumerate(PEERS):
            xs = [j + (i - (len(PEERS) - 1) / 2) * width for j in range(len(sub))]
            ax.bar(xs, [r["tflops"].get(peer) or 0 for r in sub], width, label=LABELS[peer])
        for j, r in enumerate(sub):
            if r["warploom_vs_cudnn"]:
                ax.text(j, max(v or 0 for v in r["tflops"].values()), f"{r['warploom_vs_cudnn']:.2f}x cuDNN",
                        ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(sub)), [f"S={r['S']} B={r['B']}\n{'causal' if r['causal'] else 'full'}" for r in sub],
                      fontsize=7)
        ax.set_ylabel(f"TFLOP/s (head dim {d}, {sub[0]['H']} heads)")
        ax.legend(fontsize=7, ncol=3)
    axes[0, 0].set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_results(rows: list[dict], meta: dict, out_dir: str, tag: str = "") -> dict:
    """attention[-tag]-<date>.json (meta + summary + rows) and the PNG beside it; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"attention{'-' + tag if tag else ''}-{meta['date']}")
    doc = dict(meta, summary=summary(rows), rows=rows)
    with open(stem + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    s = doc["summary"]
    ratio = s["warploom_vs_cudnn"]["geomean"]
    title = (f"attention forward: warploom vs cuDNN, FA2 SDPA, JAX Mosaic GPU; {meta.get('gpu', '?')}, commit "
             f"{meta.get('commit', '?')}, {meta['date']}; geomean warploom/cuDNN "
             f"{'-' if ratio is None else f'{ratio:.3f}'}")
    png = plot(rows, stem + ".png", title)
    return {"json": stem + ".json", "png": png}


# ---- timing (GPU) ------------------------------------------------------------------------------

def time_cuda(fn, warmup: int, iters: int) -> float:
    """Median milliseconds of `iters` calls, each between its own pair of CUDA events, after `warmup` calls."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def time_burst(call, sync, warmup: int, iters: int) -> float:
    """Milliseconds a call: the wall clock around `iters` back-to-back calls, one `sync(last result)` at the end,
    after `warmup` calls. The same clock for a JAX function and a torch one (neither can time the other's stream)."""
    import time
    out = None
    for _ in range(warmup):
        out = call()
    sync(out)
    t0 = time.perf_counter()
    for _ in range(iters):
        out = call()
    sync(out)
    return (time.perf_counter() - t0) * 1e3 / iters


def burst_side_by_side(calls: dict, syncs: dict, warmup: int, iters: int, rounds: int) -> dict:
    """{peer: median over `rounds` of time_burst}, the peers timed in turn in every round, the order reversed every
    other round (A B, B A, ...: a peer's burst heats the GPU for the next one, run 51, so neither always goes
    second); {peer: [ms a round]} under "rounds"."""
    times: dict[str, list[float]] = {peer: [] for peer in calls}
    for r in range(rounds):
        for peer in (list(calls) if r % 2 == 0 else list(calls)[::-1]):
            times[peer].append(time_burst(calls[peer], syncs[peer], warmup, iters))
    return {"ms": {peer: statistics.median(t) for peer, t in times.items()}, "rounds": times}


def warploom_f16_call(shape: tuple, causal: bool):
    """warploom.ops.attention in fp16 on random (B, S, H, D) inputs, out= preallocated; (call, sync)."""
    import torch

    from warploom import ops
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
    out = torch.empty_like(q)
    return (lambda: ops.attention(q, k, v, causal=causal, out=out, layout="bshd"),
            lambda _out: torch.cuda.synchronize())


def first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def run_torch_case(case: dict, args) -> dict:
    """warploom (bf16, fp16) and the torch SDPA backends on one case, the same inputs for all."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import warploom.ops_attention as oa
    from warploom import ops

    b, h, s, d, causal = case["B"], case["H"], case["S"], case["D"], case["causal"]
    row = dict(case, ms={}, errors={})
    g = torch.Generator(device="cuda").manual_seed(s * 3 + d + int(causal))
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    ref, calls = None, {}
    for peer, backend in (("cudnn_bf16", SDPBackend.CUDNN_ATTENTION), ("fa2_bf16", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel([backend]):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            ref = out if ref is None else ref

            def sdpa(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            calls[peer] = sdpa
        except Exception as e:  # noqa: BLE001 - a peer that cannot run is recorded, the others go on
            row["ms"][peer], row["errors"][peer] = None, first_line(e)
    standard = oa.SCHEDULE
    warploom_peers = [("warploom_bf16", torch.bfloat16, standard), ("warploom_f16", torch.float16, standard)]
    if args.compare_grid:
        warploom_peers.append(("warploom_grid_bf16", torch.bfloat16, "grid"))
    for peer, dtype, schedule in warploom_peers:
        try:
            qq, kk, vv = (t.to(dtype) for t in (q, k, v))
            if args.layout == "bshd":
                qq, kk, vv = (t.transpose(1, 2).contiguous() for t in (qq, kk, vv))
            out = torch.empty_like(qq)      # its own out: a repeated call's prepared launch is keyed by its tensors

            def call(qq=qq, kk=kk, vv=vv, out=out, schedule=schedule):
                oa.SCHEDULE = schedule
                try:
                    return ops.attention(qq, kk, vv, causal=causal, out=out, layout=args.layout)
                finally:
                    oa.SCHEDULE = standard
            call()
            if ref is not None:
                got = out.transpose(1, 2) if args.layout == "bshd" else out
                row.setdefault("max_rel_err_vs_sdpa", {})[peer] = (
                    (got.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
            calls[peer] = call
        except Exception as e:  # noqa: BLE001
            row["ms"][peer], row["errors"][peer] = None, first_line(e)
    # rounds: every peer timed once per round, in turn, so that a drift of the GPU's clocks during the case
    # reaches all of them alike; a peer's time is the median of its rounds' medians
    rounds: dict[str, list[float]] = {peer: [] for peer in calls}
    for _ in range(args.rounds):
        for peer, fn in calls.items():
            try:
                rounds[peer].append(time_cuda(fn, args.warmup, args.iters))
            except Exception as e:  # noqa: BLE001
                row["errors"][peer] = first_line(e)
    for peer, times in rounds.items():
        row["ms"][peer] = statistics.median(times) if times and peer not in row["errors"] else None
        row.setdefault("ms_rounds", {})[peer] = times
    del q, k, v, ref
    torch.cuda.empty_cache()
    return row


def run_jax_cases(cases: list[dict], args) -> list[dict]:
    """The JAX Mosaic GPU peer on every case: [{"D", "S", "causal", "ms", "timing" | "error"}]."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    results = []
    try:
        import functools

        import jax
        import jax.numpy as jnp
        from jax.experimental.pallas.ops.gpu import attention_mgpu as am
    except Exception as e:  # noqa: BLE001
        return [dict(D=c["D"], S=c["S"], causal=c["causal"], ms=None, error=first_line(e)) for c in cases]
    try:
        from jax.experimental.mosaic.gpu import profiler
    except Exception:  # noqa: BLE001
        profiler = None
    for c in cases:
        res = dict(D=c["D"], S=c["S"], causal=c["causal"], ms=None)
        try:
            kq, kk, kv = jax.random.split(jax.random.key(c["S"] + c["D"]), 3)
            shape = (c["B"], c["S"], c["H"], c["D"])
            q, k, v = (jax.random.normal(key, shape, jnp.float16) for key in (kq, kk, kv))
            cfg = am.TuningConfig(block_q=64, block_kv=128, max_concurrent_steps=2, causal=c["causal"])
            f = jax.jit(functools.partial(am.attention, config=cfg))
            f(q, k, v).block_until_ready()
            ms = None
            if profiler is not None:
                try:
                    for _ in range(max(1, args.warmup // 5)):
                        profiler.measure(f, iterations=5)(q, k, v)
                    _, runtimes = profiler.measure(f, iterations=args.iters)(q, k, v)
                    ms, res["timing"] = statistics.median(runtimes), "mosaic profiler (CUPTI), median"
                except Exception:  # noqa: BLE001 - older/newer profiler API: wall clock below
                    ms = None
            if ms is None:
                import time
                for _ in range(args.warmup):
                    f(q, k, v).block_until_ready()
                ts = []
                for _ in range(args.iters):
                    t0 = time.perf_counter()
                    f(q, k, v).block_until_ready()
                    ts.append((time.perf_counter() - t0) * 1e3)
                ms, res["timing"] = statistics.median(ts), "wall clock around block_until_ready, median"
            res["ms"] = ms
            if args.burst:
                try:
                    wl, wl_sync = warploom_f16_call(shape, c["causal"])
                    b = burst_side_by_side({"jax_mgpu_f16": lambda: f(q, k, v), "warploom_f16": wl},
                                           {"jax_mgpu_f16": jax.block_until_ready, "warploom_f16": wl_sync},
                                           args.warmup, args.iters, args.rounds)
                    res["burst"], res["burst_rounds"] = b["ms"], b["rounds"]
                    del wl
                except Exception as e:  # noqa: BLE001 - the CUPTI figure above still counts
                    res["burst_error"] = first_line(e)
        except Exception as e:  # noqa: BLE001
            res["error"] = first_line(e)
        results.append(res)
        took = f"error {res['error']}" if res.get("error") else f"{res['ms']:.3f} ms"
        if res.get("burst"):
            took += "; burst " + ", ".join(f"{p} {ms:.3f} ms" for p, ms in res["burst"].items())
        elif res.get("burst_error"):
            took += f"; burst error {res['burst_error']}"
        print(f"  jax mgpu D={c['D']} S={c['S']} causal={c['causal']}: {took}", flush=True)
    return results


def jax_in_subprocess(cases: list[dict], args) -> list[dict]:
    """Run this script as the JAX worker (a child process with XLA_PYTHON_CLIENT_PREALLOCATE=false)."""
    fd, path = tempfile.mkstemp(suffix=".json", prefix="wl-jax-")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), "--jax-worker", path, "--head-dims", *map(str, args.head_dims),
           "--seqlens", *map(str, args.seqlens), "--tokens", str(args.tokens), "--hidden", str(args.hidden),
           "--warmup", str(args.warmup), "--iters", str(args.iters), "--rounds", str(args.rounds),
           "--burst" if args.burst else "--no-burst", *(["--schedule", args.schedule] if args.schedule else [])]
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    rc = "?"
    try:
        rc = subprocess.run(cmd, env=env, timeout=1800).returncode
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        return [dict(D=c["D"], S=c["S"], causal=c["causal"], ms=None,
                     error=f"JAX worker failed (exit {rc}): {first_line(e)}") for c in cases]
    finally:
        os.unlink(path)


def machine() -> dict:
    import torch
    props = torch.cuda.get_device_properties(0)
    info = {"gpu": torch.cuda.get_device_name(), "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "host": platform.node(), "python": platform.python_version()}
    try:
        info["cudnn"] = torch.backends.cudnn.version()
        info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        pass
    return info


def main(argv=None) -> int:
    args = parse_args(argv)
    cases = grid(args.head_dims, args.seqlens, args.tokens, args.hidden)
    if args.schedule:
        import warploom.ops_attention as oa
        oa.SCHEDULE = args.schedule
    if args.jax_worker:                       # the child: JAX only, rows to the JSON file
        results = run_jax_cases(cases, args)
        with open(args.jax_worker, "w") as f:
            json.dump(results, f)
        return 0
    rows = []
    for case in cases:
        row = run_torch_case(case, args)
        rows.append(row)
        ms = row["ms"]
        print(f"D={row['D']:>3} S={row['S']:>5} causal={row['causal']!s:<5} "
              + "  ".join(f"{p} {fmt(ms.get(p), '.3f')} ms" for p in TORCH_PEERS)
              + ("  errors: " + "; ".join(f"{p}: {e}" for p, e in row["errors"].items()) if row["errors"] else ""),
              flush=True)
    if args.jax != "off":
        jax_rows = jax_in_subprocess(cases, args) if args.jax == "subprocess" else run_jax_cases(cases, args)
        merge(rows, "jax_mgpu_f16", jax_rows)
    for row in rows:
        fill_rates(row)
    date = datetime.date.today().isoformat()
    meta = dict(machine(), date=date, commit=commit(), layout=args.layout, tokens=args.tokens, hidden=args.hidden,
                warmup=args.warmup, iters=args.iters, schedule=args.schedule or "standard", timing="median of CUDA-event timings after warm-up; torch-side peers in interleaved rounds, median of the rounds",
                rounds=args.rounds,
                flops="4*B*H*S^2*D, halved when causal")
    print(table(rows))
    paths = write_results(rows, meta, args.out, args.tag)
    s = summary(rows)
    for name, (num, den) in RATIOS.items():
        g = s[name]["geomean"]
        print(f"geomean {num} / {den}: {'-' if g is None else f'{g:.3f}'} over {s[name]['cases']} cases")
    print(f"-> {paths['json']}" + (f", {paths['png']}" if paths["png"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
