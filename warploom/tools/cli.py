"""The `warploom` command: compile graphs, show the IR after each pass, list passes, run the demo.

    warploom demo                                  what warploom does, on this machine
    warploom compile graph.mlir --target sm_90a --dump-ir ir/ [--emit ptx|sass|cubin|mlir -o FILE]
    warploom passes
    warploom precompile --target sm_90a --cache DIR [--tuning]
    warploom tune --shapes 8192x8192x8192,16x8192x8192 [--dtype bf16] [--b-layout kn] --out FILE   (on a GPU)
    warploom explain --dtype bf16 --b-layout kn --block-n 256
    warploom emulate --op matmul --target sm_90a --shape 130x136x328 --seeds 3 [--timeline]
"""
from __future__ import annotations

import argparse
import sys


def _version() -> str:
    """warploom's version and the toolchain it compiles with (what a bug report needs)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        own = version("warploom")
    except PackageNotFoundError:
        own = "unknown (not installed)"
    try:
        from warploom.build import toolchain
        tools = ", ".join(f"{k} {v}" for k, v in toolchain().items() if k != "warploom")
    except ImportError:             # a runtime-only install (no MLIR): the runtime packages only
        tools = "no compiler (MLIR not installed)"
    return f"warploom {own} ({tools})"


def cmd_passes(args) -> int:
    from .opt import list_passes
    print(list_passes())
    return 0


def print_records(records, out=sys.stdout) -> None:
    """A table of the passes run: index, name (with options), milliseconds, lines of IR after it."""
    width = max([28] + [len(r.name) for r in records])
    print(f"{'#':>3}  {'pass':<{width}} {'ms':>8}  {'IR lines':>8}", file=out)
    for r in records:
        print(f"{r.index:>3}  {r.name:<{width}} {r.seconds * 1e3:8.2f}  {r.ir.count(chr(10)):>8}", file=out)


def cmd_compile(args) -> int:
    from mlir import ir

    from warploom.dialect import make_context
    from warploom.passes import PassError, pipeline_for, run_passes

    from .diagnostics import DiagnosticCollector, parse_failure, to_diags

    if args.emit == "cubin" and not args.output:
        print("warploom compile: --emit cubin writes a binary: give -o FILE", file=sys.stderr)
        return 1
    try:
        text, passes, args.input = _compile_input(args)
    except OSError as e:
        print(f"warploom compile: cannot read {e.filename or args.input}: {e.strerror or e}", file=sys.stderr)
        return 1
    except (ValueError, SyntaxError) as e:
        print(f"warploom compile: {e}", file=sys.stderr)
        return 1
    ctx = make_context()
    collector = DiagnosticCollector(ctx)

    def on_ir(record):
        if args.print_ir_after_all:
            print(f"// -----// IR after {record.index:02d} {record.name} //----- //\n{record.ir}")

    with ctx, ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
            records = run_passes(module, passes, dump_dir=args.dump_ir, on_ir=on_ir)
            program = _planned(records)         # the plan, for the summary (parsed in this context)
        except ir.MLIRError as e:
            for d in (collector.take() + to_diags(e.error_diagnostics)) or parse_failure(text):
                print(d.format(args.input), file=sys.stderr)
            if getattr(e, "reproducer", None) is not None:
                print(f"reproducer: {e.reproducer}/replay.sh (the failing step's input and the warploom-opt call that "
                      "replays it)", file=sys.stderr)
            return 1
        except PassError as e:
            print(f"warploom compile: {e}", file=sys.stderr)
            return 1
    print_records(records, out=sys.stderr)
    if args.dump_ir:
        print(f"IR after each pass written to {args.dump_ir}/", file=sys.stderr)
    final = records[-1].ir
    kernels = [op for op in module.body.operations if op.operation.name == "gpu.module"]
    if not kernels:
        left = set()

        def visit(op):
            if op.name.startswith("wl."):
                left.add(op.name)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        left = sorted(left)
        if not args.print_ir_after_all and args.emit in (None, "mlir"):
            _write(final, args.output)
        print(f"warploom compile: no kernel was built for {args.target}: the pipeline lowered no wl op of "
              f"{args.input} to a gpu.module{' (left: ' + ', '.join(left) + ')' if left else ''}; warploom builds "
              "kernels from wl.matmul (2-D) and wl.attention (sm_90a), or from the graph wl-fuse makes them of",
              file=sys.stderr)
        return 1
    if len(kernels) != 1 and (args.dump_ir or args.emit not in (None, "mlir")):
        names = ", ".join(str(k.operation.attributes["sym_name"]) for k in kernels)
        print(f"warploom compile: --emit and --dump-dir write one kernel, and the module holds {len(kernels)} "
              f"({names}): compile one graph at a time", file=sys.stderr)
        return 1
    asm = ptx = None
    if args.dump_ir or args.emit in ("ptx", "sass", "cubin"):
        ptx, asm = _assemble(module, args.target)
        if asm is None:
            return 1
    if program is not None:
        print(_summary(program, asm), file=sys.stderr)
    if args.dump_ir:
        _dump_products(args.dump_ir, len(records), ptx, asm, program)
    if args.emit in (None, "mlir"):
        if not args.print_ir_after_all or args.output:
            _write(final, args.output)
    elif args.emit == "ptx":
        _write(ptx, args.output)
    elif args.emit == "cubin":
        _write(bytes(asm.cubin), args.output)
    else:
        from warploom.lowering.assemble import disassemble
        _write(disassemble(asm.cubin), args.output)
    return 0


def _compile_input(args) -> tuple[str, list[str], str]:
    """(the graph's MLIR, the passes to run, what to call it): a built-in op (--op, with the standard kernel's
    options), a Python file that builds a `warploom.Graph` (the one named `graph`, else the only one), or a .mlir
    file of wl ops (the target's pipeline)."""
    from warploom.passes import pipeline_for
    if args.op is not None:
        from warploom import build as wc
        if args.input is not None:
            raise ValueError(f"give a file ({args.input}) or --op {args.op}, not both")
        if args.op == "matmul":
            spec = _gemm_spec(args)
            graph = wc.gemm_graph(spec)
        else:
            spec = _attention_spec(args)
            graph = wc.attention_graph(spec)
        return str(graph.module), wc.planning_passes(spec) + pipeline_for(args.target)[-1:], f"--op {args.op}"
    if args.input is None:
        raise ValueError("give a .mlir file of wl ops, a Python file that builds a warploom.Graph, or --op "
                         "matmul / --op attention")
    if args.input.endswith(".py"):
        import runpy

        from warploom.dialect.builder import Graph
        found = runpy.run_path(args.input)
        graphs = {k: v for k, v in found.items() if isinstance(v, Graph)}
        graph = graphs.get("graph") or (next(iter(graphs.values())) if len(graphs) == 1 else None)
        if graph is None:
            raise ValueError(f"{args.input} builds {len(graphs)} warploom.Graph objects "
                             f"({', '.join(graphs) or 'none'}): name the one to compile `graph`")
        return str(graph.module), pipeline_for(args.target), args.input
    return open(args.input, encoding="utf-8").read(), pipeline_for(args.target), args.input


def _planned(records):
    """The typed kernel program the last planning pass left (None when the pipeline planned no kernel)."""
    from mlir import ir

    from warploom.dialect.kernel_ir import kernel_ops
    from warploom.kernel import read_program
    planned = [r for r in records if r.name.split("{")[0] == "wl-plan-barriers"]
    if not planned:
        return None
    parsed = ir.Module.parse(planned[-1].ir)          # kept alive while its ops are read
    kernels = kernel_ops(parsed)
    return read_program(kernels[0]) if len(kernels) == 1 else None


def _assemble(module, target: str):
    """(PTX, ptxas Assembly) of the module's one kernel; (None, None) after printing why not."""
    from warploom.lowering.assemble import ToolError, assemble
    from warploom.lowering.ptx import gpu_module_to_ptx
    ptx = gpu_module_to_ptx(module)
    try:
        return ptx, assemble(ptx, target, "ptxas")
    except ToolError as e:
        print(f"warploom compile: {e}", file=sys.stderr)
        return None, None


def _summary(program, asm) -> str:
    """One screen: smem of the limit, TMEM columns, the mbarriers, each role's warps and registers, ptxas's report."""
    from warploom import targets
    from warploom.passes.plan_smem import plan_smem
    target = targets.get(program.target)
    smem = plan_smem(program)
    lines = [f"kernel ({program.kind}, {program.target}): {program.threads} threads, smem {smem.requested} of "
             f"{smem.limit} B ({100 * smem.requested // smem.limit}%)"
             + (f", TMEM {program.attrs['tmem_columns']} of {target.tmem.columns} columns"
                if program.attrs.get("tmem_columns") else "")
             + (f", cluster {'x'.join(map(str, program.attrs['cluster']))}"
                if list(program.attrs.get("cluster", [1, 1, 1])) != [1, 1, 1] else "")]
    lines.append("  mbarriers: " + ", ".join(f"{b.name}[{b.count}] x{b.arrivals}" + (f" +{b.tx_bytes} B" if b.tx_bytes
                                                                                     else "")
                                             for b in program.barriers.values()))
    for role in program.roles:
        warps = f"{role.first_warp}-{role.warp_range[-1]}" if role.warps > 1 else str(role.first_warp)
        regs = f"setmaxnreg {role.regs}" if role.regs is not None else "launch registers"
        rank = f", CTA {role.rank} only" if role.rank is not None else ""
        lines.append(f"  role {role.name}: warps {warps} ({role.issue}{rank}), {regs}")
    if asm is not None:
        lines.append(f"  ptxas: {asm.registers} registers a thread, {asm.spill_stores + asm.spill_loads} B spills, "
                     f"{asm.stack_bytes} B stack")
    return "\n".join(lines)


def _dump_products(folder: str, n: int, ptx: str, asm, program) -> None:
    """After the IR files: NN-ptx.ptx, NN-sass.sass, NN-kernel.cubin and resources.json (the plan as data)."""
    import json
    from dataclasses import asdict
    from pathlib import Path

    from warploom.lowering.assemble import disassemble
    path = Path(folder)
    (path / f"{n:02d}-ptx.ptx").write_text(ptx)
    (path / f"{n + 1:02d}-sass.sass").write_text(disassemble(asm.cubin))
    (path / f"{n + 2:02d}-kernel.cubin").write_bytes(bytes(asm.cubin))
    resources = {"ptxas": {"registers": asm.registers, "spill_bytes": asm.spill_stores + asm.spill_loads,
                           "stack_bytes": asm.stack_bytes}}
    if program is not None:
        resources.update({
            "target": program.target, "threads": program.threads, "smem_bytes": program.smem_bytes,
            "tmem_columns": program.attrs.get("tmem_columns"), "attrs": program.attrs,
            "regions": [{k: v for k, v in asdict(r).items()} for r in program.regions.values()],
            "barriers": [asdict(b) for b in program.barriers.values()],
            "named_barriers": [asdict(b) for b in program.named_barriers.values()],
            "roles": [{"name": r.name, "first_warp": r.first_warp, "warps": r.warps, "issue": r.issue,
                       "regs": r.regs, "rank": r.rank} for r in program.roles]})
    (path / "resources.json").write_text(json.dumps(resources, indent=1, default=list))
    if program is not None:
        from .maps import draw_maps
        try:
            draw_maps(program, str(path / "resources.png"))
        except ValueError as e:          # no matplotlib: the JSON is there, the picture is not
            print(f"warploom compile: no resources.png: {e}", file=sys.stderr)


def _write(text: str | bytes, path: str | None) -> None:
    """To `path` (text or bytes), or to stdout."""
    if path is None:
        sys.stdout.write(text if isinstance(text, str) else text.decode())
        if isinstance(text, str) and not text.endswith("\n"):
            sys.stdout.write("\n")
        return
    with open(path, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)
    print(f"wrote {path}", file=sys.stderr)


def cmd_precompile(args) -> int:
    import time

    from warploom.kernels import STANDARD_ATTENTION_KERNELS, STANDARD_KERNELS, get_kernel, precompile_set
    from warploom.runtime.cache import KernelCache

    specs = precompile_set(args.target)
    if args.tuning:                     # every candidate `warploom tune` may time, once
        from warploom.tuning import all_candidates
        specs += [s for s in all_candidates(args.target) if s not in specs]
    if not specs:
        targets = sorted(set(STANDARD_KERNELS) | set(STANDARD_ATTENTION_KERNELS))
        print(f"warploom precompile: no standard kernels for {args.target!r} yet; targets: "
              f"{', '.join(targets)}", file=sys.stderr)
        return 1
    cache = KernelCache(args.cache)
    print(f"precompiling {len(specs)} kernels for {args.target} into {cache.root}")
    failed = []
    for spec in specs:
        t0 = time.perf_counter()
        try:
            artifact = get_kernel(spec, cache)
        except (ValueError, TypeError, LookupError, OSError, RuntimeError, NotImplementedError) as e:
            # one kernel that does not build must not keep the others out of the cache
            failed.append(spec.lookup_id)
            print(f"  {spec.lookup_id:<48} FAILED: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            continue
        report = artifact.meta.get("ptxas", {})
        print(f"  {spec.lookup_id:<48} {time.perf_counter() - t0:6.2f} s  {artifact.smem_bytes:>7} B smem  "
              f"{report.get('registers', '?')} regs  {report.get('spill_bytes', '?')} B spills  key {artifact.key[:12]}")
    if failed:
        print(f"warploom precompile: {len(failed)} of {len(specs)} kernels failed to build: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    print(f"done: use it with WARPLOOM_CACHE_DIR={cache.root} WARPLOOM_OFFLINE=1")
    return 0


def _gemm_choice(args):
    """(spec, why) for `explain --shape MxNxK`: the kernel warploom.ops.matmul picks there, and from where (the
    tuning table's entry, or the tile model); None after printing the refusal."""
    from warploom import ops, tuning
    try:
        m, n, k = (int(v) for v in args.shape.lower().split("x"))
    except ValueError:
        m = n = k = 0
    if min(m, n, k) < 1:
        print(f"warploom explain: --shape {args.shape!r}: give M, N and K as positive integers MxNxK, e.g. "
              "--shape 16x8192x8192", file=sys.stderr)
        return None
    given = [f"--{o.replace('_', '-')}" for o in ("block_n", "stages", "schedule") if getattr(args, o) is not None]
    if given or args.block_m != 128:
        print(f"warploom explain: --shape asks which kernel warploom.ops.matmul picks; {', '.join(given or ['--block-m'])} "
              "would choose it yourself: give one or the other", file=sys.stderr)
        return None
    spec = ops.pick_spec(args.dtype, args.b_layout, m, n, target=args.target, k=k)
    entry = tuning.load(args.target).get(tuning.entry_key("matmul", args.dtype, args.b_layout, tuning.bucket(m, n, k)))
    if entry is not None and args.target == "sm_90a":
        why = (f"the tuning table's entry for bucket {'x'.join(map(str, tuning.bucket(m, n, k)))} (measured on "
               f"{entry.get('gpu', 'the GPU')} at {'x'.join(map(str, entry['shape']))}: {entry['ratio_vs_cublas']:.3f}x "
               f"cuBLAS by warploom tune)")
    elif args.target == "sm_90a":
        why = "the tile model (no tuning table entry for this bucket; docs/tuning.md)"
    else:
        why = "the sm_100a choice (a CTA pair's 256 x 256 tile where the pairs fill the SMs, else 128 rows)"
    return spec, why


def cmd_tune(args) -> int:
    from pathlib import Path

    from warploom import tuning
    shapes = []
    for text in args.shapes.split(","):
        try:
            m, n, k = (int(v) for v in text.lower().split("x"))
        except ValueError:
            m = n = k = 0
        if min(m, n, k) < 1:
            print(f"warploom tune: --shapes {text!r}: give each shape as positive integers MxNxK, e.g. "
                  "--shapes 8192x8192x8192,16x8192x8192", file=sys.stderr)
            return 2
        shapes.append((m, n, k))
    if args.iters < 1 or args.rounds < 1:
        print(f"warploom tune: --iters {args.iters} and --rounds {args.rounds} must be at least 1", file=sys.stderr)
        return 2
    try:
        import torch
        ready = torch.cuda.is_available()
    except ImportError:
        ready = False
    if not ready:
        print("warploom tune: no CUDA GPU with torch here; tune times kernels on the GPU beside torch.matmul. Build "
              "the candidates with `warploom precompile --tuning --cache DIR` on this machine and run tune on the "
              "GPU with WARPLOOM_CACHE_DIR=DIR WARPLOOM_OFFLINE=1", file=sys.stderr)
        return 2
    from warploom.tuning.search import tune
    found = tune(shapes, args.dtype, args.b_layout, args.iters, args.rounds)
    tuning.write(Path(args.out), found, {"target": "sm_90a"})
    print(f"{len(found)} entries -> {args.out}")
    return 0


def _attention_spec(args):
    """The attention kernel the options name (compile --op attention, explain --op attention)."""
    from warploom.kernels import ATTENTION_STAGES, FA4_SHARED_KV_SLOTS, AttentionSpec
    stages = _given(args.stages, FA4_SHARED_KV_SLOTS if args.shared_kv else ATTENTION_STAGES)
    return AttentionSpec(args.dtype, args.head_dim, args.causal, args.block_n, stages, args.target,
                         schedule=args.schedule, shared_kv=args.shared_kv, q_stages=args.q_stages,
                         exp2_poly=args.exp2_poly)


def _gemm_spec(args):
    """The GEMM kernel the options name (compile --op matmul, explain without --shape). --swap-ab: the swap-AB
    kernel (docs/swap-ab.md), C stored from registers, 64 columns and 8 stages unless given."""
    from warploom.kernels import SMALL_M_STAGES, GemmSpec
    swap = args.swap_ab
    schedule = args.schedule or ("persistent" if args.target == "sm_100a" or args.cluster_m > 1 or args.group_m > 1
                                 else "grid")
    return GemmSpec(args.dtype, args.b_layout, _given(args.block_n, 64 if swap else 256),
                    _given(args.stages, SMALL_M_STAGES if swap else 4), args.target, schedule, args.block_m,
                    epilogue="direct" if swap else "tma", cluster_m=args.cluster_m, group_m=args.group_m, swap_ab=swap)


def _given(value, default):
    """An option's value, or its default when it was not given (0 is a value, refused by the spec's checks)."""
    return default if value is None else value


def cmd_explain(args) -> int:
    from warploom.kernels import get_kernel
    if args.op == "attention" and args.shape:
        print("warploom explain: --shape explains the GEMM kernel warploom.ops.matmul picks; an attention kernel is "
              "chosen by --head-dim, --causal and --dtype", file=sys.stderr)
        return 2
    if args.op == "attention":
        try:
            spec = _attention_spec(args)
        except ValueError as e:
            print(f"warploom explain: {e}", file=sys.stderr)
            return 2
    elif args.shape:
        chosen = _gemm_choice(args)
        if chosen is None:
            return 2
        spec, why = chosen
        print(f"warploom.ops.matmul runs this kernel for {args.shape} ({args.dtype}, B {args.b_layout}): {why}")
    else:
        spec = _gemm_spec(args)
    try:
        artifact = get_kernel(spec)
    except Exception as e:   # noqa: BLE001 - the planners' refusals arrive as MLIRError (no mlir import here)
        if type(e).__name__ != "MLIRError":
            raise
        found = "; ".join(d.message for d in getattr(e, "error_diagnostics", ())) or str(e)
        print(f"warploom explain: cannot build the {spec.describe()}: {found}", file=sys.stderr)
        return 2
    meta = artifact.meta
    if args.png:             # the plan, drawn: from the planned program (the artifact keeps its tables only)
        from warploom.build import planned_attention_program, planned_program, planned_sm100_attention
        from .maps import draw_maps
        program = (planned_program(spec) if args.op == "gemm" else
                   planned_sm100_attention(spec.elem, spec.head_dim, spec.causal) if spec.target == "sm_100a" else
                   planned_attention_program(spec.elem, spec.head_dim, spec.causal))
        draw_maps(program, args.png)
    print(f"kernel {artifact.name}  ({spec.describe()})")
    if spec.target == "sm_100a":
        doc = "docs/attention-sm100.md" if args.op == "attention" else "docs/gemm-sm100.md"
        print("verified by ptxas, its SASS and the emulator only: no Blackwell GPU exists here, and this kernel has "
              f"not run on Blackwell hardware ({doc})")
    print(f"grid {artifact.grid}  block {artifact.block}  cluster {artifact.cluster}  "
          f"dynamic smem {artifact.smem_bytes} B")
    print(meta.get("smem_plan", ""))
    if meta.get("tmem_plan"):
        print(meta["tmem_plan"])
    print(meta.get("barrier_plan", ""))
    print(meta.get("roles", ""))
    asm = meta.get("ptxas")
    if asm:
        print(f"ptxas: {asm['registers']} registers a thread, {asm['spill_bytes']} B spills, "
              f"{asm['stack_bytes']} B stack")
    return 0


def cmd_emulate(args) -> int:
    from .emulate import run
    return run(args)


def cmd_demo(args) -> int:
    from .demo import run_demo
    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="warploom", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("passes", help="list the wl-* passes and the pipeline of each target")
    sp.set_defaults(fn=cmd_passes)
    sp = sub.add_parser("compile", help="run a target's pipeline on a .mlir file of wl ops, a Python file that builds "
                        "a warploom.Graph, or a built-in op (--op)")
    sp.add_argument("input", nargs="?", help="graph.mlir or graph.py (or give --op)")
    sp.add_argument("--op", choices=["matmul", "attention"], help="compile the standard kernel of this op")
    sp.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    sp.add_argument("--b-layout", default="kn", choices=["kn", "nk"], help="--op matmul: B as [K,N] or [N,K]")
    sp.add_argument("--head-dim", type=int, default=128, choices=[64, 128, 256], help="--op attention")
    sp.add_argument("--causal", action="store_true", help="--op attention: the bottom-right causal mask")
    sp.add_argument("--shared-kv", action="store_true",
                    help="--op attention --target sm_100a: K and V share one smem ring of --stages slots (default 3)")
    sp.add_argument("--block-m", type=int, default=128, help="--op matmul (256: sm_100a's CTA pair)")
    sp.add_argument("--block-n", type=int, default=None, help="--op: the standard kernel's by default")
    sp.add_argument("--stages", type=int, default=None, help="--op: the standard kernel's by default")
    sp.add_argument("--schedule", choices=("grid", "persistent", "streamk"),
                    help="--op: the standard kernel's by default")
    sp.add_argument("--cluster-m", type=int, default=1, choices=(1, 2),
                    help="--op matmul, sm_90a, persistent: 2 runs 2x1 clusters sharing B by TMA multicast")
    sp.add_argument("--group-m", type=int, default=1, choices=(1, 2, 4, 8, 16),
                    help="--op matmul, sm_90a, persistent: walk the tiles in bands of this many rows of tiles")
    sp.add_argument("--swap-ab", action="store_true",
                    help="--op matmul, sm_90a, grid: C^T = B^T A^T for decode-size M (--block-m 8..256 the wgmma's n, "
                         "--block-n 64 or 128; docs/swap-ab.md)")
    sp.add_argument("--q-stages", type=int, choices=(1, 2),
                    help="--op attention, sm_90a, persistent: 2 gives Q's ring a second stage (the next tile's Q "
                         "loads during this one) (default: 2 for the persistent standard tiles, else 1)")
    sp.add_argument("--exp2-poly", type=float, metavar="SHARE",
                    help="--op attention: the softmax's share of exp2 by the FMA polynomial, a multiple of 1/8 "
                         "(default: 0.25 on sm_100a, the standard kernel's on sm_90a)")
    sp.add_argument("--target", default="sm_90a", help="sm_90a (Hopper) or sm_100a (Blackwell)")
    sp.add_argument("--dump-dir", "--dump-ir", dest="dump_ir", metavar="DIR",
                    help="write the IR after each pass to DIR/NN-pass.mlir, then the kernel's PTX, SASS and cubin, "
                         "resources.json (the smem, TMEM, barrier and role plan, ptxas's report) and resources.png")
    sp.add_argument("--print-ir-after-all", action="store_true", help="print the IR after each pass")
    sp.add_argument("--emit", choices=["mlir", "ptx", "sass", "cubin"],
                    help="what to write: the IR after the last pass (default), the kernel's PTX, its SASS, its cubin")
    sp.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead of stdout (a cubin needs one)")
    sp.set_defaults(fn=cmd_compile)
    sp = sub.add_parser("precompile", help="build the standard kernel set of a target into a cache folder")
    sp.add_argument("--target", default="sm_90a", choices=["sm_90a", "sm_100a"],
                    help="sm_90a (Hopper: H100, H200) or sm_100a (Blackwell: B200) (default: %(default)s)")
    sp.add_argument("--cache", required=True, metavar="DIR",
                    help="the cache folder to fill (created if missing); use it with WARPLOOM_CACHE_DIR=DIR")
    sp.add_argument("--tuning", action="store_true",
                    help="also build every GEMM kernel `warploom tune` times (sm_90a), for a tuning run on a GPU")
    sp.set_defaults(fn=cmd_precompile)
    sp = sub.add_parser("tune", help="on a GPU: time each tuning candidate of the given GEMM shapes beside cuBLAS "
                        "and write the fastest per shape bucket to a tuning table")
    sp.add_argument("--shapes", required=True, metavar="MxNxK[,MxNxK...]", help="the problems to tune")
    sp.add_argument("--dtype", default="bf16", choices=["bf16", "f16"], help="element type (default: %(default)s)")
    sp.add_argument("--b-layout", default="kn", choices=["kn", "nk"], help="B as [K,N] or [N,K] (default: kn)")
    sp.add_argument("--iters", type=int, default=20, help="calls timed back to back per round (default: %(default)s)")
    sp.add_argument("--rounds", type=int, default=5, help="rounds over the candidates, the median kept "
                    "(default: %(default)s)")
    sp.add_argument("--out", required=True, metavar="FILE",
                    help="the table to write (merged into it when it exists); warploom ships "
                         "warploom/tuning/sm_90a.json")
    sp.set_defaults(fn=cmd_tune)
    sp = sub.add_parser("explain", help="show the resource plan (smem, barriers, rings, roles) of a GEMM or "
                        "attention kernel")
    sp.add_argument("--op", default="gemm", choices=["gemm", "attention"], help="the kernel (default: %(default)s)")
    sp.add_argument("--dtype", default="bf16", choices=["bf16", "f16"], help="element type (default: %(default)s)")
    sp.add_argument("--b-layout", default="kn", choices=["kn", "nk"],
                    help="GEMM: B as [K,N] or [N,K] (default: %(default)s)")
    sp.add_argument("--head-dim", type=int, default=128, choices=[64, 128, 256],
                    help="attention (default: %(default)s)")
    sp.add_argument("--causal", action="store_true", help="attention: the bottom-right causal kernel")
    sp.add_argument("--shared-kv", action="store_true",
                    help="attention, sm_100a: K and V share one smem ring of --stages slots (default 3)")
    sp.add_argument("--block-n", type=int, default=None,
                    help="GEMM: 256 by default; attention: keys a block, the standard tile's by default "
                         "(128, 128, 80 at head dim 64, 128, 256)")
    sp.add_argument("--block-m", type=int, default=128,
                    help="GEMM: 128; on sm_100a 256 is the CTA pair's tile (cta_group::2, a cluster of 2) "
                         "(default: %(default)s)")
    sp.add_argument("--stages", type=int, default=None, help="2..8; GEMM: 4 by default; attention: 2")
    sp.add_argument("--target", default="sm_90a", choices=["sm_90a", "sm_100a"],
                    help="sm_90a (Hopper: H100, H200) or sm_100a (Blackwell: B200) (default: %(default)s)")
    sp.add_argument("--schedule", choices=("grid", "persistent", "streamk"),
                    help="a CTA per tile, one per SM walking the tiles, or one per SM taking equal runs of (tile, "
                         "K tile) iterations (docs/streamk.md) (default: the standard kernel's)")
    sp.add_argument("--cluster-m", type=int, default=1, choices=(1, 2),
                    help="GEMM, sm_90a, persistent: 2 runs 2x1 clusters sharing B by TMA multicast "
                         "(docs/clusters.md) (default: %(default)s)")
    sp.add_argument("--group-m", type=int, default=1, choices=(1, 2, 4, 8, 16),
                    help="GEMM, sm_90a, persistent: walk the tiles in bands of this many rows of tiles, column by "
                         "column inside a band (an L2-friendly order) (default: %(default)s)")
    sp.add_argument("--swap-ab", action="store_true",
                    help="GEMM, sm_90a, grid: C^T = B^T A^T for decode-size M (--block-m 8..256 the wgmma's n, "
                         "--block-n 64 or 128, C stored from registers; docs/swap-ab.md)")
    sp.add_argument("--q-stages", type=int, choices=(1, 2),
                    help="attention, sm_90a, persistent: 2 gives Q's ring a second stage (the next tile's Q loads "
                         "during this one) (default: 2 for the persistent standard tiles, else 1)")
    sp.add_argument("--exp2-poly", type=float, metavar="SHARE",
                    help="attention: the softmax's share of exp2 by the FMA polynomial, a multiple of 1/8 (default: "
                         "0.25 on sm_100a, the standard kernel's on sm_90a)")
    sp.add_argument("--png", metavar="FILE", help="also draw the smem and TMEM maps to FILE (needs matplotlib)")
    sp.add_argument("--shape", metavar="MxNxK", help="GEMM: explain the kernel warploom.ops.matmul picks for this "
                    "problem, and why (the tuning table or the tile model)")
    sp.set_defaults(fn=cmd_explain)
    sp = sub.add_parser("emulate", help="run the kernel warploom.ops.matmul or warploom.ops.attention would pick on "
                        "the CPU emulator and check it against the float64 reference (exit 0 match, 1 mismatch, "
                        "2 emulation error or bad input)")
    from .emulate import add_arguments
    add_arguments(sp)
    sp.set_defaults(fn=cmd_emulate)
    sp = sub.add_parser("demo", help="build graphs, run the pipelines, check numerics on this machine")
    sp.add_argument("--dump-ir", metavar="DIR", help="also write the IR after each pass to DIR")
    sp.set_defaults(fn=cmd_demo)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except (ValueError, TypeError, LookupError, OSError, RuntimeError) as e:
        # user-facing failures (bad options, missing kernels, tool errors): one line, no traceback
        print(f"warploom {args.command}: {e}", file=sys.stderr)
        return 1


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
