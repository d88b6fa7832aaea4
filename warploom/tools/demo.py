"""`warploom demo`: what warploom does today, end to end on the machine it runs on.

With the compiler installed (MLIR):
- builds an attention written the long way (matmul, scale, causal mask, softmax,
  matmul); wl-fuse turns the five ops into one `wl.attention` (checked in float64
  on the CPU), and the sm_90a pipeline plans it into the FA3-style kernel, printing
  every pass with its time; the lowered kernel runs in the CPU emulator against the
  reference; its smem, barrier and role plans and PTX/SASS summary are printed;
- builds a GEMM, runs the sm_90a pipeline printing every pass with its time and
  the resource-assigned IR, lowers it and runs the lowered kernel in the CPU
  emulator against the reference, then compiles it to PTX and a cubin and prints the smem and
  barrier plans and the PTX/SASS summaries.
Without MLIR (a GPU box running from an AOT cache) it prints the same plans from
the cached kernels. On a machine with a GPU and torch it also launches the GEMM
and the attention and compares them with torch. sm_100a code is never run here
(no Blackwell GPU).
"""
from __future__ import annotations

import re

import numpy as np

from warploom import targets
from warploom.kernels import AttentionSpec, GemmSpec, get_kernel, mlir_available

# the long-way attention below: bf16, 8 heads, head dim 64, causal (its kernel is a standard one)
DEMO_ATTENTION = AttentionSpec("bf16", 64, True)


def build_unfused_attention():
    import warploom as wl
    g = wl.Graph("attention_unfused")
    q = g.input("q", ("B", 8, "S", 64), "bf16")
    k = g.input("k", ("B", 8, "S", 64), "bf16")
    v = g.input("v", ("B", 8, "S", 64), "bf16")
    s = g.scale(g.matmul(q, k, transpose_b=True), 64 ** -0.5)
    p = g.softmax(g.causal_mask(s))
    g.output(g.matmul(p, v))
    return g


def section(title: str) -> None:
    print(f"\n== {title} ==")


def demo_attention(dump_dir) -> bool:
    """The long-way attention: fused (checked in float64), planned through the sm_90a pipeline, emulated."""
    from warploom.build import planned_attention
    from warploom.emulate import emulate_attention
    from warploom.emulate.judge import judge_attention
    from warploom.passes import run_pipeline
    from warploom.reference.interpret import evaluate
    from warploom.reference.ops import round_to

    from .report import print_records

    attention = build_unfused_attention()
    section("attention as built in Python (matmul, scale, causal_mask, softmax, matmul)")
    print(attention)
    fused, _ = run_pipeline(attention, ["wl-verify", "wl-fuse"])
    rng = np.random.default_rng(0)
    inputs = {n: round_to(rng.standard_normal((2, 8, 37, 64)), "bf16") for n in ("q", "k", "v")}
    before, after = evaluate(attention.module, inputs)[0], evaluate(fused, inputs)[0]
    err = np.linalg.norm(after - before) / np.linalg.norm(before)
    program, records = planned_attention(attention, DEMO_ATTENTION)
    if dump_dir:                # the IR after every pass, the lowering's too (the plan above stops before it)
        dump_pipeline(attention, DEMO_ATTENTION, f"{dump_dir}/attention")
    section(f"attention through the sm_90a pipeline ({DEMO_ATTENTION.describe()})")
    print_records(records)
    print(f"CPU check (numpy float64): wl-fuse's one wl.attention vs the five ops, B=2 H=8 S=37 D=64: "
          f"relative error {err:.1e}")
    q, k, v = (round_to(rng.standard_normal((1, 4, s, 64)), "bf16") for s in (200, 200, 200))
    reports, ok = [], err < 1e-12
    for seed in range(2):
        out, lse = emulate_attention(q, k, v, causal=True, seed=seed, layout="bhsd", program=program, report=reports)
        verdict = judge_attention(out, lse, q, k, v, "bf16", True, "bhsd")
        ok &= verdict.ok
    section("CPU check: the emulator runs the lowered attention kernel, every thread of every CTA")
    print(f"B=1 H=4 S=200 D=64 causal, 2 interleavings: no deadlock, no race; max |out - ref| "
          f"{verdict.max_error:.1e}, LSE {verdict.lse_error:.1e}: {'within' if verdict.ok else 'BEYOND'} the bound of "
          "warploom.emulate.judge")
    print(f"  {reports[-1]}")
    return ok


def dump_pipeline(graph, spec, folder: str):
    """`graph` through the planning passes of `spec` and its target's lowering, the IR after each pass written to
    `folder` (NN-pass.mlir, as warploom compile --dump-dir names them); (module, records)."""
    from warploom.build import planning_passes
    from warploom.passes import pipeline_for, run_pipeline
    planning = planning_passes(spec)
    lowering = [p for p in pipeline_for(spec.target) if p.startswith("wl-lower")]
    return run_pipeline(graph, planning + [p for p in lowering if p not in planning], dump_dir=folder)


def demo_gemm_pipeline(spec: GemmSpec, dump_dir) -> None:
    from warploom.build import gemm_graph, planning_passes
    from warploom.passes import pipeline_for, run_pipeline

    from .report import print_records

    passes = planning_passes(spec) + pipeline_for(spec.target)[len(planning_passes(spec)):]
    module, records = run_pipeline(gemm_graph(spec), passes, dump_dir=dump_dir and f"{dump_dir}/gemm")
    section(f"GEMM through the {spec.target} pipeline ({spec.describe()})")
    print_records(records)
    section("IR after wl-plan-barriers: every region, barrier and role has its place")
    print(next(r.ir for r in records if r.name == "wl-plan-barriers"))


def demo_emulator(spec: GemmSpec) -> bool:
    """Run the lowered kernel (its gpu.module, thread by thread) in the CPU emulator against the float64 reference."""
    from warploom.emulate import emulate_gemm
    from warploom.reference.ops import round_to

    rng = np.random.default_rng(0)
    m, n, k = 300, 500, 456
    a = round_to(rng.standard_normal((m, k)), spec.elem)
    b = round_to(rng.standard_normal((k, n)), spec.elem)
    ref = a @ b
    worst, reports = 0.0, []
    for seed in range(2):
        c = emulate_gemm(spec, a, b, seed=seed, report=reports).astype(np.float64)
        worst = max(worst, float(np.linalg.norm(c - ref) / np.linalg.norm(ref)))
    section("CPU check: the emulator runs the lowered kernel, every thread of every CTA")
    mma = targets.get(spec.target).mma_instruction
    print(f"{spec.describe()}: {m}x{n}x{k}, 2 interleavings of the warps, TMA landings and {mma} completions: no "
          f"deadlock, no race; relative error vs float64 {worst:.1e} (the {spec.elem} rounding of C)")
    print(f"  {reports[-1]}")
    return worst < 1e-2


def demo_kernel(spec) -> None:
    from warploom.build import sass_summary
    artifact = get_kernel(spec)
    meta = artifact.meta
    section(f"kernel {artifact.name}")
    print(f"grid rule {artifact.grid}, block {artifact.block}, cluster {artifact.cluster}, "
          f"dynamic smem {artifact.smem_bytes} B")
    print("params: " + ", ".join(f"{p.name}:{p.kind}" for p in artifact.params))
    print(meta["smem_plan"])
    if meta.get("tmem_plan"):
        print(meta["tmem_plan"])
    print(meta["barrier_plan"])
    print(meta["roles"])
    ptx = artifact.ptx
    mix = {k: len(re.findall(p, ptx)) for k, p in (("wgmma.mma_async", r"wgmma\.mma_async"),
                                                   ("tcgen05.mma", r"tcgen05\.mma"), ("tcgen05.ld", r"tcgen05\.ld"),
                                                   ("tcgen05.commit", r"tcgen05\.commit"),
                                                   ("cp.async.bulk.tensor", r"cp\.async\.bulk\.tensor"),
                                                   ("mbarrier", r"mbarrier\."), ("bar.sync/arrive", r"\bbar\.(?:sync|arrive)"),
                                                   ("setmaxnreg", r"setmaxnreg"))}
    print(f"PTX: {ptx.count(chr(10))} lines; " + ", ".join(f"{k} x{v}" for k, v in mix.items() if v))
    p = meta["ptxas"]
    print(f"ptxas: {p['registers']} registers, {p['spill_bytes']} B spills, {p['stack_bytes']} B stack; "
          "SASS: " + ", ".join(f"{k} x{v}" for k, v in sass_summary(artifact).items() if v or k in ("LDL", "STL")))
    print("compile steps: " + ", ".join(f"{s['name']} {s['ms']:.1f} ms" for s in meta["passes"]))


def median_ms(torch, fn) -> float:
    """Median time of `fn` on the GPU in ms: triton's do_bench when triton is there (it comes with
    torch's CUDA wheels), else CUDA events around single calls."""
    try:
        import triton.testing as tt
    except ImportError:
        tt = None
    if tt is not None:
        return tt.do_bench(fn, warmup=25, rep=100, return_mode="median")
    for _ in range(10):
        fn()
    times = []
    for _ in range(50):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def demo_gpu(spec: GemmSpec) -> bool:
    try:
        import torch
    except ImportError:
        print("\n(no torch here: skipping the GPU launch)")
        return True
    if not torch.cuda.is_available():
        print("\n(no CUDA GPU here: skipping the GPU launch; run this on the H200 to see it launch)")
        return True
    from warploom import ops
    section(f"launch on {torch.cuda.get_device_name()}")
    ok = True
    dtype = torch.bfloat16 if spec.elem == "bf16" else torch.float16
    for m, n, k in ((1000, 1000, 1000), (127, 4096, 17), (8192, 8192, 8192)):
        a = torch.randn(m, k, device="cuda", dtype=dtype)
        b = torch.randn(k, n, device="cuda", dtype=dtype)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        ops.matmul(a, b, out=c)
        ref = a.float() @ b.float()
        err = (torch.linalg.norm(c.float() - ref) / torch.linalg.norm(ref)).item()
        ms = median_ms(torch, lambda: ops.matmul(a, b, out=c))
        ms_t = median_ms(torch, lambda: torch.matmul(a, b, out=c))
        ok &= err <= 1e-2 and not torch.isnan(c).any().item()
        print(f"  {m}x{n}x{k}: relative error vs torch fp32 {err:.1e}; warploom {2*m*n*k/ms/1e9:.0f} TFLOP/s, "
              f"torch.matmul {2*m*n*k/ms_t/1e9:.0f} TFLOP/s")
    return ok


def demo_gpu_attention(spec: AttentionSpec) -> bool:
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return True
    if not torch.cuda.is_available():
        return True
    from warploom import ops
    section(f"attention launch on {torch.cuda.get_device_name()}")
    ok = True
    for b, h, s in ((2, 8, 1000), (1, 32, 4096)):
        q, k, v = (torch.randn(b, h, s, spec.head_dim, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        out = torch.full_like(q, float("nan"))
        ops.attention(q, k, v, causal=spec.causal, layout="bhsd", out=out)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=spec.causal)
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        flops = 4 * b * h * s * s * spec.head_dim / (2 if spec.causal else 1)
        ms = median_ms(torch, lambda: ops.attention(q, k, v, causal=spec.causal, layout="bhsd", out=out))
        ms_t = median_ms(torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=spec.causal))
        ok &= err <= 2e-2 and not torch.isnan(out).any().item()
        print(f"  B={b} H={h} S={s} D={spec.head_dim} causal: relative error vs torch fp32 {err:.1e}; warploom "
              f"{flops/ms/1e9:.0f} TFLOP/s, torch SDPA {flops/ms_t/1e9:.0f} TFLOP/s")
    return ok


def run_demo(args) -> int:
    spec = GemmSpec("bf16", "kn", 256)
    ok = True
    if mlir_available():
        ok &= demo_attention(args.dump_ir)
        demo_gemm_pipeline(spec, args.dump_ir)
        ok &= demo_emulator(spec)
    else:
        print("MLIR is not installed here: showing kernels from the AOT cache (compiled elsewhere).")
    demo_kernel(DEMO_ATTENTION)
    ok &= demo_gpu_attention(DEMO_ATTENTION)
    demo_kernel(spec)
    ok &= demo_gpu(spec)
    if mlir_available():      # Blackwell: compiled and emulated here, never run (no sm_100a GPU exists here)
        blackwell = GemmSpec("bf16", "kn", 256, target="sm_100a", schedule="persistent")
        section("Blackwell (sm_100a): tcgen05 GEMM, accumulator in Tensor Memory; assembled, SASS-checked and "
                "emulated here, never run on a Blackwell GPU")
        ok &= demo_emulator(blackwell)
        demo_kernel(blackwell)
        if args.dump_ir:
            from warploom.build import gemm_graph
            dump_pipeline(gemm_graph(blackwell), blackwell, f"{args.dump_ir}/sm100a-gemm")
    if args.dump_ir and mlir_available():
        print(f"\nIR after each pass written to {args.dump_ir}/attention, {args.dump_ir}/gemm and "
              f"{args.dump_ir}/sm100a-gemm")
    print("\ndemo " + ("OK" if ok else "FAILED"))
    return 0 if ok else 1
