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

from warploom import targets

from .options import OPS, Kernel, notes, op_name, refusal, track_given
from .report import print_records, version


def cmd_passes(args) -> int:
    from .opt import list_passes
    print(list_passes())
    return 0


def cmd_compile(args) -> int:
    from mlir import ir

    from warploom.dialect import make_context
    from warploom.passes import PassError, run_passes

    from .diagnostics import DiagnosticCollector, parse_failure, to_diags

    why = refusal(SUBPARSERS["compile"], args, Kernel("compile", args.op, args.target)) or _output_conflict(args)
    for path, option, folder in ((args.output, "-o", False), (args.dump_ir, "--dump-dir", True)):
        why = why or (unwritable(path, option, folder) if path else None)
    if why is not None:
        print(f"warploom compile: {why}", file=sys.stderr)
        return 2
    read = _read_input("compile", args)
    if read is None:
        return 1
    text, passes, args.input = read
    # stdout holds one thing a script can pipe: the product asked for (--print-ir, --print-ir-after-all, --emit
    # without -o), or else the table of passes and the plan's summary, the summary last
    product_on_stdout = args.print_ir or args.print_ir_after_all or (args.emit is not None and not args.output)
    report = sys.stderr if product_on_stdout else sys.stdout
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
            from warploom.passes.fuse import explain as unfused
            for line in unfused(module) if "module" in locals() else []:     # an attention wl-fuse left
                print(f"note: {line}", file=sys.stderr)
            if getattr(e, "reproducer", None) is not None:
                print(f"reproducer: {e.reproducer}/replay.sh (the failing step's input and the warploom-opt call that "
                      "replays it)", file=sys.stderr)
            return 1
        except PassError as e:
            print(f"warploom compile: {e}", file=sys.stderr)
            return 1
    print_records(records, out=report)
    if args.dump_ir:
        print(f"IR after each pass written to {args.dump_ir}/", file=sys.stderr)
    final = records[-1].ir
    ir_out = args.emit == "mlir" or (args.emit is None and args.output)       # the IR as the product (-o or stdout)
    wants_ir = args.print_ir or ir_out
    kernels = [op for op in module.body.operations if op.operation.name == "gpu.module"]
    if not kernels:
        left = set()

        def visit(op):
            if op.name.startswith("wl."):
                left.add(op.name)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        left = sorted(left)
        if args.print_ir:
            _write(final, None)
        if ir_out:
            _write(final, args.output)
        print(f"warploom compile: no kernel was built for {args.target}: the pipeline lowered no wl op of "
              f"{args.input} to a gpu.module{' (left: ' + ', '.join(left) + ')' if left else ''}; warploom builds "
              "kernels from wl.matmul (2-D) and wl.attention (sm_90a), or from the graph wl-fuse makes them of"
              + ("" if wants_ir or args.print_ir_after_all else " (--print-ir prints the IR the pipeline left)"),
              file=sys.stderr)
        from warploom.passes.fuse import explain as unfused
        for line in unfused(module):
            print(f"  {line}", file=sys.stderr)
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
    if args.dump_ir:
        _dump_products(args.dump_ir, len(records), ptx, asm, program)
    if args.print_ir:
        _write(final, None)
    if ir_out:
        _write(final, args.output)
    elif args.emit == "ptx":
        _write(ptx, args.output)
    elif args.emit == "cubin":
        _write(bytes(asm.cubin), args.output)
    elif args.emit == "sass":
        from warploom.lowering.assemble import disassemble
        _write(disassemble(asm.cubin), args.output)
    if program is not None:
        print(_summary(program, asm), file=report)
    if report is sys.stdout and not (args.dump_ir or args.output):
        print("(the IR after the last pass: --print-ir; every pass's IR, the PTX, SASS and cubin: --dump-dir DIR)",
              file=sys.stderr)
    return 0


def _output_conflict(args) -> str | None:
    """Two options that would both write stdout (or one product two ways): refused, naming the one to keep."""
    if args.emit == "cubin" and not args.output:
        return "--emit cubin writes a binary: give -o FILE"
    if args.print_ir and args.print_ir_after_all:
        return "--print-ir-after-all already prints the last pass's IR: give one of --print-ir, --print-ir-after-all"
    if args.print_ir and args.emit is not None and not args.output:
        return (f"--print-ir prints the IR on stdout, where --emit {args.emit} would write too: give --emit "
                f"{args.emit} an -o FILE, or drop one of them")
    if args.print_ir_after_all and args.emit is not None and not args.output:
        return (f"--print-ir-after-all prints every pass's IR on stdout, where --emit {args.emit} would write too: "
                f"give --emit {args.emit} an -o FILE")
    return None


def unwritable(path: str, option: str, folder: bool = False) -> str | None:
    """Why `path` (a file, or with folder=True a folder made if missing) cannot be written, with the fix; None if it
    can. Checked before compiling, so a typo costs no compile time."""
    import os
    from pathlib import Path
    p = Path(path)
    if folder:
        if p.exists() and not p.is_dir():
            return f"{option} {path}: a file of that name exists, and {option} needs a folder: give another name"
        existing = next(a for a in (p, *p.parents) if a.exists())
        if not existing.is_dir():
            return f"{option} {path}: {existing} is a file, not a folder: give a folder outside it"
        if not os.access(existing, os.W_OK | os.X_OK):
            return f"{option} {path}: cannot write in {existing} (permission denied): give a folder you can write"
        return None
    if p.is_dir():
        return f"{option} {path}: that is a folder: give a file name in it, e.g. {p / ('out' + (p.suffix or '.txt'))}"
    parent = p.parent
    if not parent.exists():
        return (f"{option} {path}: the folder {parent} does not exist: create it (mkdir -p {parent}) or give a path in "
                "a folder that exists")
    if not parent.is_dir():
        return f"{option} {path}: {parent} is a file, not a folder: give a path in a folder"
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        return f"{option} {path}: cannot write {'it' if p.exists() else 'in ' + str(parent)} (permission denied): " \
               "give a path you can write"
    return None


class ScriptError(Exception):
    """A Python file given to `warploom compile` raised: its exception type, message and line, without warploom's
    own frames."""

    @classmethod
    def of(cls, path: str, e: BaseException) -> "ScriptError":
        import os
        import traceback
        if isinstance(e, SyntaxError) and e.filename and os.path.abspath(e.filename) == os.path.abspath(path):
            return cls(f"{path}:{e.lineno}: {type(e).__name__}: {e.msg}"
                       + (f": {e.text.strip()}" if e.text and e.text.strip() else ""))
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if os.path.abspath(f.filename) == os.path.abspath(path)]
        where = f"{path}:{frames[-1].lineno}" if frames else path
        line = f" (at `{frames[-1].line.strip()}`)" if frames and frames[-1].line else ""
        return cls(f"{where}: {type(e).__name__}: {e}{line}; the script raised it while building its graph")


def _read_text(path: str) -> str:
    """A .mlir file as text; not UTF-8 is refused as warploom-opt refuses it."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"cannot read {path}: not UTF-8 text (byte offset {e.start}); MLIR files are UTF-8: "
                         f"convert it (iconv -t UTF-8)") from None


def _read_input(command: str, args):
    """_compile_input's (text, passes, name), or None after printing why the input cannot be read."""
    try:
        return _compile_input(args)
    except OSError as e:
        print(f"warploom {command}: cannot read {e.filename or args.input}: {e.strerror or e}", file=sys.stderr)
    except (ValueError, SyntaxError, ScriptError) as e:
        print(f"warploom {command}: {e}", file=sys.stderr)
    return None


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
        try:
            found = runpy.run_path(args.input)
        except (Exception, SystemExit) as e:     # noqa: BLE001 - the user's script: any exception is theirs
            if isinstance(e, OSError) and getattr(e, "filename", None) == args.input:
                raise
            raise ScriptError.of(args.input, e) from None
        graphs = {k: v for k, v in found.items() if isinstance(v, Graph)}
        graph = graphs.get("graph") or (next(iter(graphs.values())) if len(graphs) == 1 else None)
        if graph is None:
            raise ValueError(f"{args.input} builds {len(graphs)} warploom.Graph objects "
                             f"({', '.join(graphs) or 'none'}): name the one to compile `graph`")
        # with its locations: a diagnostic or a wl-fuse note names the script's line, not the printed IR's
        return graph.module.operation.get_asm(enable_debug_info=True), pipeline_for(args.target), args.input
    return _read_text(args.input), pipeline_for(args.target), args.input


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


def precompile_specs(target: str, op: str | None = None, tuning: bool = False, variants: list | None = None) -> list:
    """The kernels `warploom precompile` builds: the target's standard set (only one family with --op), plus with
    --tuning every candidate `warploom tune` may time, plus with --variant the attention kernels of each named
    variant (warploom.variants: its modifiers traced with their parameters' defaults as the scalars' example
    values) for both dtypes, the target's attention head dims and the variant's causal flags, each as
    ops.attention and as ops.attention_varlen (packed sequences) run it."""
    from warploom.kernels import ATTENTION_HEAD_DIMS, AttentionSpec, precompile_set
    specs = precompile_set(target)
    if tuning:                          # every candidate `warploom tune` may time, once
        from warploom.tuning import all_candidates
        specs += [s for s in all_candidates(target) if s not in specs]
    if op is not None:
        specs = [s for s in specs if isinstance(s, AttentionSpec) == (op == "attention")]
    for variant in variants or ():
        from warploom.kernel.contract import FA4_HEAD_DIMS
        from warploom.ops_attention import modified_spec
        from warploom.ops_varlen import varlen_spec
        from warploom.score import trace_mods
        mods, _ = trace_mods(variant.score_mod, variant.mask_mod, variant.scalars())
        dims = FA4_HEAD_DIMS if targets.get(target).accumulator == "tmem" else ATTENTION_HEAD_DIMS
        for elem in ("bf16", "f16"):
            for d in dims:
                for causal in variant.causal:
                    for spec in (modified_spec(elem, d, causal, target, mods),      # and packed sequences':
                                 varlen_spec(elem, d, causal, target, mods)):       # ops.attention_varlen
                        if spec not in specs:
                            specs.append(spec)
    return specs


def cmd_precompile(args) -> int:
    import time

    from warploom.kernels import STANDARD_ATTENTION_KERNELS, STANDARD_KERNELS, get_kernel
    from warploom.runtime.cache import KernelCache

    if args.tuning and args.op == "attention":
        print("warploom precompile: --tuning builds the GEMM kernels `warploom tune` times; --op attention builds "
              "none of them: drop one of the two", file=sys.stderr)
        return 2
    variants = []
    if args.variant and args.op == "matmul":
        print("warploom precompile: --variant builds attention kernels; --op matmul builds none of them: drop one "
              "of the two", file=sys.stderr)
        return 2
    for text in args.variant or ():
        from warploom.score import ModError
        from warploom.variants import resolve
        try:
            found = resolve(text)
            for v in found:
                v.scalars()
        except (ValueError, ModError) as e:
            print(f"warploom precompile: {e}", file=sys.stderr)
            return 2
        variants += found
    try:
        specs = precompile_specs(args.target, args.op, args.tuning, variants)
    except ValueError as e:               # a modifier that does not trace (ModError names the operation)
        print(f"warploom precompile: {e}", file=sys.stderr)
        return 2
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
    register_gemm = targets.get(args.target).accumulator == "regs"   # picked by the tuning table or tile model
    if entry is not None and register_gemm:
        why = (f"the tuning table's entry for bucket {'x'.join(map(str, tuning.bucket(m, n, k)))} (measured on "
               f"{entry.get('gpu', 'the GPU')} at {'x'.join(map(str, entry['shape']))}: {entry['ratio_vs_cublas']:.3f}x "
               f"cuBLAS by warploom tune)")
    elif register_gemm:
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
    from .options import given
    stages = _given(args.stages, FA4_SHARED_KV_SLOTS if args.shared_kv else ATTENTION_STAGES)
    block_m = args.block_m if "block_m" in given(args) else None        # None: the target's (128 rows on sm_90a)
    spec = AttentionSpec(args.dtype, args.head_dim, args.causal, args.block_n, stages, args.target,
                         block_m=block_m, schedule=args.schedule, shared_kv=args.shared_kv, q_stages=args.q_stages,
                         exp2_poly=args.exp2_poly, varlen=args.varlen)
    variant = _variant(args)
    if variant is not None:
        from dataclasses import replace

        from warploom.score import trace_mods
        spec = replace(spec, mods=trace_mods(variant.score_mod, variant.mask_mod, variant.scalars())[0])
    return spec


def _variant(args):
    """The one variant `--variant` names (explain), or None; ValueError for a bad or a multiple one."""
    text = getattr(args, "variant", None)
    if text is None:
        return None
    from warploom.score import ModError
    from warploom.variants import resolve
    try:
        found = resolve(text)
        if len(found) != 1:
            raise ValueError(f"--variant {text!r} names {len(found)} variants; explain shows one: give MODULE:FUNCTION "
                             f"(the standard ones: {', '.join('warploom.variants:' + v.mask_mod.__name__ if v.mask_mod else 'warploom.variants:' + v.score_mod.__name__ for v in found)})")
        found[0].scalars()
        return found[0]
    except ModError as e:
        raise ValueError(str(e)) from None


def _gemm_spec(args):
    """The GEMM kernel the options name (compile --op matmul, explain without --shape). --swap-ab: the swap-AB
    kernel (docs/swap-ab.md), C stored from registers, 64 columns and 8 stages unless given."""
    from warploom.kernels import SMALL_M_STAGES, GemmSpec
    swap = args.swap_ab
    schedule = args.schedule or ("persistent" if targets.get(args.target).has_tmem or args.cluster_m > 1 or args.group_m > 1
                                 else "grid")
    return GemmSpec(args.dtype, args.b_layout, _given(args.block_n, 64 if swap else 256),
                    _given(args.stages, SMALL_M_STAGES if swap else 4), args.target, schedule, args.block_m,
                    epilogue="direct" if swap else "tma", cluster_m=args.cluster_m, group_m=args.group_m, swap_ab=swap)


def _given(value, default):
    """An option's value, or its default when it was not given (0 is a value, refused by the spec's checks)."""
    return default if value is None else value


def cmd_explain(args) -> int:
    from warploom.kernels import get_kernel
    if args.input is not None:
        return _explain_graph(args)
    why = refusal(SUBPARSERS["explain"], args, Kernel("explain", args.op, args.target))
    if why is None and args.png:
        why = unwritable(args.png, "--png")
    if why is not None:
        print(f"warploom explain: {why}", file=sys.stderr)
        return 2
    if args.op == "attention" and args.seqlen is not None and (args.variant is None or args.seqlen < 1):
        print(f"warploom explain: --seqlen {args.seqlen}: " + ("give a length >= 1" if args.seqlen < 1 else
              "it shows a mask's block sparsity, so give --variant too"), file=sys.stderr)
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
        from warploom.build import attention_graph, planned_attention, planned_program
        from .maps import draw_maps
        program = (planned_program(spec) if args.op == "matmul" else
                   planned_attention(attention_graph(spec), spec)[0])    # the kernel of every option given
        draw_maps(program, args.png)
    print(f"kernel {artifact.name}  ({spec.describe()})")
    if not targets.get(spec.target).hardware_here:
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
    if args.op == "attention" and spec.mods:
        _explain_mods(spec, _variant(args), args.seqlen)
    return 0


def _explain_graph(args) -> int:
    """`warploom explain GRAPH`: what wl-fuse makes of each attention the graph writes out: the wl.attention with
    its modifiers, or why the chain was left alone."""
    import types

    from mlir import ir

    from warploom.dialect import make_context, op_attrs, op_kind
    from warploom.passes import run_passes
    from warploom.passes.fuse import describe_op
    from warploom.passes.fuse import explain as unfused
    from warploom.score import ScoreMods

    from .diagnostics import DiagnosticCollector, parse_failure, to_diags
    from .options import flag, given
    wrong = sorted(given(args) - {"target"})
    if wrong:
        print(f"warploom explain: {flag(SUBPARSERS['explain'], wrong[0])} applies to a built-in kernel (--op), not to "
              f"a graph file, which is explained as written: drop it (a graph file takes --target only)",
              file=sys.stderr)
        return 2
    read = _read_input("explain", types.SimpleNamespace(**{**vars(args), "op": None}))
    if read is None:
        return 1
    text, _, name = read
    ctx = make_context()
    collector = DiagnosticCollector(ctx)
    with ctx, ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
            run_passes(module, ["wl-verify", "wl-fuse"])
        except ir.MLIRError as e:
            for d in (collector.take() + to_diags(e.error_diagnostics)) or parse_failure(text):
                print(d.format(name), file=sys.stderr)
            return 1
        lines = []

        def visit(op):
            if op_kind(op) == "attention":
                a = op_attrs(op)
                mods = ScoreMods.from_attrs(a)
                lines.append(f"{describe_op(op)}: causal {str(a['causal']).lower()}, "
                             f"scale {a['scale']:.6g}, layout {a['layout']}")
                lines.append(f"  modifiers: {mods.text or 'none'}")
                if mods:
                    lines.append(f"  kernel parameters: {', '.join(f'{n} ({t})' for n, t in mods.params())}")
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
        lines += unfused(module)
    print("\n".join(lines) if lines else f"{name}: no attention (no wl.softmax feeding a matmul) to fuse")
    return 0


def _explain_mods(spec, variant, seqlen: int | None) -> None:
    """The kernel's score/mask modifiers (their canonical text, the kernel parameters of their scalars) and, with
    `seqlen`, the key blocks its mask lets each tile walk (warploom.score.bounds.block_table, one batch and head)."""
    mods = spec.mods
    print(f"modifiers: {mods.text}")
    print(f"scalar parameters: {', '.join(f'{n} ({t})' for n, t in mods.params()) or 'none'}")
    if mods.tabled:
        from warploom.score.table import positional_loads
        print(f"block sparsity: a block table (docs/attention-variants.md \"Block tables\"), built from the values of "
              f"{', '.join(positional_loads(mods.mask, mods.sorted))} at the call, once per problem size and tensor "
              "version; its density depends on them")
        return
    if seqlen is None or mods.mask is None:
        return
    from warploom.score.bounds import block_table
    values = {n: variant.scalars()[n] for n in mods.mask.scalars()}
    t = block_table(mods.mask, values, seqlen, seqlen, spec.block_m, spec.block_n, 1, 1, spec.causal)
    print(f"block sparsity at Sq = Sk = {seqlen} ({', '.join(f'{n} = {v}' for n, v in values.items()) or 'no scalars'}): "
          f"{t['blocks']} of {t['dense']} key blocks walked ({t['density']:.1%}), {t['partial']} of them partial "
          "(the mask applied); each tile finds its range itself (docs/attention-variants.md \"Block sparsity\")")


def cmd_emulate(args) -> int:
    from .emulate import run
    why = refusal(SUBPARSERS["emulate"], args, Kernel("emulate", args.op, args.target, args.timeline))
    if why is not None:
        print(f"warploom emulate: {why}", file=sys.stderr)
        return 2
    return run(args)


def cmd_demo(args) -> int:
    from .demo import run_demo
    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="warploom", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=version())
    sub = p.add_subparsers(dest="command", required=True)
    sp = _subparser(sub, "passes", "list the wl-* passes and the pipeline of each target")
    sp.set_defaults(fn=cmd_passes)
    sp = _subparser(sub, "compile", "run a target's pipeline on a .mlir file of wl ops, a Python file that builds "
                    "a warploom.Graph, or a built-in op (--op); print the passes and the plan, or with --print-ir or "
                    "--emit only the product asked for")
    sp.add_argument("input", nargs="?", help="graph.mlir or graph.py (or give --op)")
    sp.add_argument("--op", type=op_name, choices=OPS, help="compile the standard kernel of this op (gemm, the "
                    "old name of matmul, is accepted)")
    sp.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    sp.add_argument("--b-layout", default="kn", choices=["kn", "nk"], help="--op matmul: B as [K,N] or [N,K]")
    sp.add_argument("--head-dim", type=int, default=128, choices=[64, 128, 256], help="--op attention")
    sp.add_argument("--causal", action="store_true", help="--op attention: the bottom-right causal mask")
    sp.add_argument("--shared-kv", action="store_true",
                    help="--op attention --target sm_100a: K and V share one smem ring of --stages slots (default 3)")
    sp.add_argument("--block-m", type=int, default=128, help="--op matmul (256: sm_100a's CTA pair); --op attention "
                    "--target sm_90a: 128 or 192 query rows a CTA (192: three consumer warpgroups, head dim 64)")
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
    sp.add_argument("--varlen", action="store_true",
                    help="--op attention: the packed-sequence kernel of warploom.ops.attention_varlen (cu_seqlens; the "
                         "grid schedule)")
    sp.add_argument("--target", default=targets.DEFAULT, choices=list(targets.TARGETS),
                    help="sm_90a (Hopper: H100, H200) or sm_100a (Blackwell: B200) (default: %(default)s)")
    sp.add_argument("--dump-dir", "--dump-ir", dest="dump_ir", metavar="DIR",
                    help="write the IR after each pass to DIR/NN-pass.mlir, then the kernel's PTX, SASS and cubin, "
                         "resources.json (the smem, TMEM, barrier and role plan, ptxas's report) and resources.png")
    sp.add_argument("--print-ir", action="store_true",
                    help="print the IR after the last pass on stdout, and nothing else there (the pass table and the "
                         "plan's summary go to stderr): what to pipe into another tool")
    sp.add_argument("--print-ir-after-all", action="store_true",
                    help="print the IR after each pass on stdout (the table and summary go to stderr)")
    sp.add_argument("--emit", choices=["mlir", "ptx", "sass", "cubin"],
                    help="write one product: the IR after the last pass, the kernel's PTX, its SASS or its cubin, to "
                         "-o FILE or else alone on stdout (without --emit, --print-ir or -o, stdout gets the table of "
                         "passes and the plan's summary, last)")
    sp.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead of stdout (a cubin needs one); "
                    "without --emit, the IR after the last pass")
    sp.set_defaults(fn=cmd_compile)
    sp = _subparser(sub, "precompile", "build the standard kernel set of a target into a cache folder")
    sp.add_argument("--target", default=targets.DEFAULT, choices=list(targets.TARGETS),
                    help="sm_90a (Hopper: H100, H200) or sm_100a (Blackwell: B200) (default: %(default)s)")
    sp.add_argument("--cache", required=True, metavar="DIR",
                    help="the cache folder to fill (created if missing); use it with WARPLOOM_CACHE_DIR=DIR")
    sp.add_argument("--tuning", action="store_true",
                    help="also build every GEMM kernel `warploom tune` times (sm_90a), for a tuning run on a GPU")
    sp.add_argument("--op", type=op_name, choices=OPS,
                    help="build only this family's kernels (default: both, matmul and attention)")
    sp.add_argument("--variant", action="append", metavar="standard|MODULE:FUNCTION[+FUNCTION]",
                    help="also build the attention kernels of these score/mask modifiers (repeatable): 'standard' "
                    "(softcap, ALiBi, sliding and symmetric windows, prefix-LM: warploom.variants) or a module's "
                    "function(s); each scalar parameter needs a default (its example value)")
    sp.set_defaults(fn=cmd_precompile)
    sp = _subparser(sub, "tune", "on a GPU: time each tuning candidate of the given GEMM shapes beside cuBLAS "
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
    sp = _subparser(sub, "explain", "show the resource plan (smem, barriers, rings, roles) of a GEMM or attention "
                    "kernel, or what wl-fuse makes of the attentions a graph file writes out")
    sp.add_argument("input", nargs="?", metavar="GRAPH",
                    help="a graph.mlir or graph.py: print each attention wl-fuse builds (its score and mask "
                    "modifiers, their kernel parameters) and why it leaves any other softmax chain alone")
    sp.add_argument("--op", default="matmul", type=op_name, choices=OPS,
                    help="the kernel family; gemm, its old name, is accepted (default: %(default)s)")
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
                    help="GEMM: on sm_100a 256 is the CTA pair's tile (cta_group::2, a cluster of 2) (default: "
                         "%(default)s); sm_90a attention: 128 (the default) or 192 (three consumer warpgroups, head "
                         "dim 64)")
    sp.add_argument("--stages", type=int, default=None, help="2..8; GEMM: 4 by default; attention: 2")
    sp.add_argument("--target", default=targets.DEFAULT, choices=list(targets.TARGETS),
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
    sp.add_argument("--varlen", action="store_true",
                    help="--op attention: the packed-sequence kernel of warploom.ops.attention_varlen (cu_seqlens; the "
                         "grid schedule)")
    sp.add_argument("--png", metavar="FILE", help="also draw the smem and TMEM maps to FILE (needs matplotlib)")
    sp.add_argument("--variant", metavar="MODULE:FUNCTION[+FUNCTION]",
                    help="attention: the kernel with these score/mask modifiers (warploom.variants' standard ones, e.g. "
                    "warploom.variants:sliding_window, or a module's); prints the modifiers and their scalar parameters")
    sp.add_argument("--seqlen", type=int, metavar="S",
                    help="with --variant: the key blocks its mask lets the kernel walk at Sq = Sk = S (block sparsity)")
    sp.add_argument("--shape", metavar="MxNxK", help="GEMM: explain the kernel warploom.ops.matmul picks for this "
                    "problem, and why (the tuning table or the tile model)")
    sp.set_defaults(fn=cmd_explain)
    sp = _subparser(sub, "emulate", "run the kernel warploom.ops.matmul or warploom.ops.attention would pick on "
                    "the CPU emulator and check it against the float64 reference (exit 0 match, 1 mismatch, "
                    "2 emulation error or bad input)")
    from .emulate import add_arguments
    add_arguments(sp)
    sp.set_defaults(fn=cmd_emulate)
    sp = _subparser(sub, "demo", "build graphs, run the pipelines, check numerics on this machine")
    sp.add_argument("--dump-ir", metavar="DIR", help="also write the IR after each pass to DIR: one folder per kernel "
                    "(attention, gemm, sm100a-gemm)")
    sp.set_defaults(fn=cmd_demo)
    for name in ("explain", "compile", "emulate"):
        track_given(SUBPARSERS[name])
    return p


SUBPARSERS: dict[str, argparse.ArgumentParser] = {}


def _subparser(sub, name: str, text: str) -> argparse.ArgumentParser:
    """A subcommand whose --help starts with what it does (its description is its help line)."""
    sp = sub.add_parser(name, help=text, description=text[:1].upper() + text[1:] + ".")
    SUBPARSERS[name] = sp
    return sp


def main(argv=None) -> int:
    parser = build_parser()
    argv = _attach_dash_values(list(sys.argv[1:] if argv is None else argv))
    notes.clear()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unrecognized(args.command, extra)          # exits 2 with the subcommand's usage
    for note in notes:
        print(f"warploom {args.command}: {note}", file=sys.stderr)
    try:
        status = args.fn(args)
        sys.stdout.flush()          # here, so that a reader that went away is seen while it can still be handled
        return status
    except BrokenPipeError:
        # the reader stopped reading (`warploom demo | head -2`): that is how a pipe ends, not an error
        _stdout_to_devnull()
        return 0
    except (ValueError, TypeError, LookupError, OSError, RuntimeError) as e:
        # user-facing failures (bad options, missing kernels, tool errors): one line, no traceback
        print(f"warploom {args.command}: {e}", file=sys.stderr)
        return 1


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again on the closed pipe."""
    import os
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):      # not a real file (captured in a test): nothing to flush
        pass


def _attach_dash_values(argv: list[str]) -> list[str]:
    """`--shape -200x304x136` as `--shape=-200x304x136`: argparse takes a value that starts with '-' for an option,
    and would answer 'expected one argument' instead of the option's own check of the value."""
    command = next((a for a in argv if a in SUBPARSERS), None)
    if command is None:
        return argv
    takes_value = {s for a in SUBPARSERS[command]._actions if a.option_strings and a.nargs is None
                   and not isinstance(a, (argparse._StoreTrueAction, argparse._StoreFalseAction))
                   for s in a.option_strings}
    known = {s for a in SUBPARSERS[command]._actions for s in a.option_strings}
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in takes_value and i + 1 < len(argv) and argv[i + 1].startswith("-") and argv[i + 1] != "-" \
                and argv[i + 1].split("=")[0] not in known:
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _unrecognized(command: str, extra: list[str]) -> None:
    """Refuse options the subcommand does not have, with its usage and the closest options it does have."""
    import difflib
    sp = SUBPARSERS[command]
    known = sorted({s for a in sp._actions for s in a.option_strings if s.startswith("--")})
    hints = []
    for word in extra:
        close = difflib.get_close_matches(word.split("=")[0], known, n=2)
        if close:
            hints.append(f"{word}: did you mean {' or '.join(close)}?")
    sp.error(f"unrecognized arguments: {' '.join(extra)}" + ("; " + "; ".join(hints) if hints else "")
             + f" (warploom {command} --help lists its options)")


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
