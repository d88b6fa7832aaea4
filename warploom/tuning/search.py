"""`warploom tune`: time every tuning candidate of each shape on the GPU, beside cuBLAS, and keep the fastest.

Needs a CUDA GPU, torch and a cache holding the candidates (`warploom precompile --tuning`). Each candidate runs
on the same random inputs; in each of `rounds` rounds every candidate (and cuBLAS) is timed in turn: `iters` calls,
each after a write of 256 MiB that flushes the L2 (the operands come from memory, as a weight read once per step
does; the flush also keeps the GPU busy while the host prepares the call) and timed alone between two CUDA events,
their median; its time is the median over the rounds.
Back-to-back calls would keep B hot in the L2 and let the host path dominate small kernels, which misranks the
small-M candidates (run 21, benchmarks/NOTES.md). A candidate whose result differs from float32 torch by more than 1e-2
(relative Frobenius) is dropped, never chosen.

Then a run-off: the candidates within RUNOFF_MARGIN of the fastest (and cuBLAS) are timed again, RUNOFF_ROUNDS rounds
of sustained timing (`_sustained_ms`: do_bench's warm-up of 100 ms of back-to-back calls, then as many flushed, timed
calls as fill 300 ms), and the fastest of that decides (its figures replace the first pass's in the entry): a few
calls after a short warm-up measure another clock regime than sustained work, and without the run-off the tuner and
benchmarks/gemm.py ranked kernels differently (runs 30-32, benchmarks/NOTES.md).

A tools-level module (the `warploom tune` command's): it runs kernels through the launch API (warploom.ops), so
nothing in the compiler or in warploom.ops imports it (tests/unit/test_layers.py).
"""
from __future__ import annotations

import statistics
import sys

from warploom import tuning


FLUSH_BYTES = 256 << 20
RUNOFF_MARGIN = 0.05      # candidates this close to the fastest of the first pass are timed again, sustained
RUNOFF_ROUNDS = 3
WARMUP_MS, REP_MS = 100, 300     # the sustained timing's warm-up and timed span (triton's do_bench defaults)


def _median_ms(torch, fn, iters: int, flush) -> float:
    """The median of `iters` calls, each timed alone after an L2 flush."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, end in events:
        flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def _sustained_ms(torch, fn, iters: int, flush) -> float:
    """do_bench's method: WARMUP_MS of back-to-back calls, then the median of as many calls as fill REP_MS, each
    timed alone after an L2 flush (at least `iters`)."""
    estimate = max(_median_ms(torch, fn, 5, flush), 1e-3)
    for _ in range(int(WARMUP_MS / estimate)):
        fn()
    return _median_ms(torch, fn, max(iters, int(REP_MS / estimate)), flush)


def _timed_rounds(torch, calls: dict, rounds: int, iters: int, flush, label: str, out, timer=_median_ms) -> dict:
    """{name: the median over `rounds` rounds of `timer`}, every call timed in turn each round; a progress bar."""
    per_round = {name: [] for name in calls}
    for r in range(rounds):
        for j, (name, fn) in enumerate(calls.items(), 1):
            per_round[name].append(timer(torch, fn, iters, flush))
            done = (r * len(calls) + j) / (rounds * len(calls))
            print(f"\r{label}  [{'#' * int(20 * done):<20}] {100 * done:3.0f}%", end="", file=out, flush=True)
    return {name: statistics.median(t) for name, t in per_round.items()}


def tune(shapes, elem: str = "bf16", b_layout: str = "kn", iters: int = 20, rounds: int = 5,
         out=sys.stderr) -> dict:
    """{entry key: entry} for each (M, N, K) of `shapes`; progress lines go to `out`."""
    import torch

    from warploom import ops
    from warploom.kernels import get_kernel

    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}[elem]
    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    found = {}
    props = torch.cuda.get_device_properties(0)
    meta = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__}
    for i, (m, n, k) in enumerate(shapes, 1):
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = (torch.randn(n, k, device="cuda", dtype=dtype).t() if b_layout == "nk"
             else torch.randn(k, n, device="cuda", dtype=dtype))
        out_t = torch.empty(m, n, device="cuda", dtype=dtype)
        ref = a.float() @ b.float()
        calls = {"cublas": lambda: torch.matmul(a, b, out=out_t)}
        specs = {}
        for spec in tuning.candidates(elem, b_layout, m):
            art = get_kernel(spec)
            out_t.fill_(float("nan"))
            got = ops.run_gemm(art, a, b, out=out_t)
            err = (torch.linalg.norm(got.float() - ref) / torch.linalg.norm(ref)).item()
            if not err <= 1e-2:          # NaN too
                print(f"  {spec.kernel_name}: relative error {err:.2e}, dropped", file=out)
                continue
            specs[spec.kernel_name] = spec
            calls[spec.kernel_name] = (lambda art=art: ops.run_gemm(art, a, b, out=out_t))
        if not specs:
            raise RuntimeError(f"warploom tune: {m}x{n}x{k} {elem} {b_layout}: every candidate gave a wrong result "
                               "(above); nothing to choose")
        for fn in calls.values():        # warm-up
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        label = f"[{i}/{len(shapes)}] {m}x{n}x{k} {elem} {b_layout}"
        ms = _timed_rounds(torch, calls, rounds, iters, flush, label, out)
        first = min((t for name, t in ms.items() if name != "cublas"))
        close = [name for name, t in ms.items() if name != "cublas" and t <= first * (1 + RUNOFF_MARGIN)]
        if len(close) > 1:               # the run-off
            ms.update(_timed_rounds(torch, {name: calls[name] for name in ["cublas"] + close}, RUNOFF_ROUNDS, iters, flush,
                                    label + " run-off", out, _sustained_ms))
        cublas = ms.pop("cublas")
        best = min(close, key=ms.get)
        key = tuning.entry_key("matmul", elem, b_layout, tuning.bucket(m, n, k))
        found[key] = tuning.entry(specs[best], (m, n, k), ms, cublas, meta)
        print(f"\r[{i}/{len(shapes)}] {m}x{n}x{k} {elem} {b_layout}: {best} {ms[best]:.4f} ms, cuBLAS "
              f"{cublas:.4f} ms ({cublas / ms[best]:.3f}x)" + " " * 10, file=out, flush=True)
    return found
