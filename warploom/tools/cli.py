"""The `warploom` command: compile graphs, show the IR after each pass, list passes, run the demo.

    warploom demo                                  what warploom does, on this machine
    warploom compile graph.mlir --target sm_90a --dump-ir ir/ [--emit ptx|sass|cubin|mlir -o FILE]
    warploom passes
    warploom precompile --target sm_90a --cache DIR
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
        from warploom.compile import toolchain
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

    from .diagnostics import DiagnosticCollector, to_diags

    if args.emit == "cubin" and not args.output:
        print("warploom compile: --emit cubin writes a binary: give -o FILE", file=sys.stderr)
        return 1
    try:
        text = open(args.input, encoding="utf-8").read()
        passes = pipeline_for(args.target)
    except (OSError, ValueError) as e:
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
        except ir.MLIRError as e:
            for d in collector.take() + to_diags(e.error_diagnostics):
                print(d.format(args.input), file=sys.stderr)
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
    if args.emit in (None, "mlir"):
        if not args.print_ir_after_all or args.output:
            _write(final, args.output)
        return 0
    return _emit_code(module, kernels, args)


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


def _emit_code(module, kernels, args) -> int:
    """--emit ptx | sass | cubin: the kernel of the compiled module through the upstream PTX passes (and ptxas)."""
    from warploom.lowering.assemble import ToolError, assemble, disassemble
    from warploom.lowering.ptx import gpu_module_to_ptx
    if len(kernels) != 1:
        names = ", ".join(str(k.operation.attributes["sym_name"]) for k in kernels)
        print(f"warploom compile: --emit {args.emit} writes one kernel, and the module holds {len(kernels)} "
              f"({names}): compile one graph at a time", file=sys.stderr)
        return 1
    ptx = gpu_module_to_ptx(module)
    if args.emit == "ptx":
        _write(ptx, args.output)
        return 0
    try:
        asm = assemble(ptx, args.target, "ptxas")
    except ToolError as e:
        print(f"warploom compile: {e}", file=sys.stderr)
        return 1
    print(f"ptxas: {asm.registers} registers, {asm.spill_stores + asm.spill_loads} B spills, {asm.stack_bytes} B "
          "stack", file=sys.stderr)
    if args.emit == "cubin":
        _write(bytes(asm.cubin), args.output)
        return 0
    _write(disassemble(asm.cubin), args.output)
    return 0


def cmd_precompile(args) -> int:
    import time

    from warploom.kernels import STANDARD_ATTENTION_KERNELS, STANDARD_KERNELS, get_kernel, precompile_set
    from warploom.runtime.cache import KernelCache

    specs = precompile_set(args.target)
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


def cmd_explain(args) -> int:
    from warploom.kernels import ATTENTION_STAGES, AttentionSpec, GemmSpec, get_kernel
    if args.op == "attention":
        spec = AttentionSpec(args.dtype, args.head_dim, args.causal, args.block_n, args.stages or ATTENTION_STAGES,
                             args.target, schedule=args.schedule)
    else:
        spec = GemmSpec(args.dtype, args.b_layout, args.block_n or 256, args.stages or 4, args.target,
                        args.schedule or ("persistent" if args.target == "sm_100a" else "grid"), args.block_m)
    try:
        artifact = get_kernel(spec)
    except Exception as e:   # noqa: BLE001 - the planners' refusals arrive as MLIRError (no mlir import here)
        if type(e).__name__ != "MLIRError":
            raise
        found = "; ".join(d.message for d in getattr(e, "error_diagnostics", ())) or str(e)
        print(f"warploom explain: cannot build the {spec.describe()}: {found}", file=sys.stderr)
        return 2
    meta = artifact.meta
    print(f"kernel {artifact.name}  ({spec.describe()})")
    print(f"grid {artifact.grid}  block {artifact.block}  cluster {artifact.cluster}  dynamic smem {artifact.smem_bytes} B")
    print(meta.get("smem_plan", ""))
    if meta.get("tmem_plan"):
        print(meta["tmem_plan"])
    print(meta.get("barrier_plan", ""))
    print(meta.get("roles", ""))
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
    sp = sub.add_parser("compile", help="run a target's pipeline on a .mlir file of wl ops")
    sp.add_argument("input")
    sp.add_argument("--target", default="sm_90a", help="sm_90a (Hopper) or sm_100a (Blackwell)")
    sp.add_argument("--dump-ir", metavar="DIR", help="write the IR after each pass to DIR/NN-pass.mlir")
    sp.add_argument("--print-ir-after-all", action="store_true", help="print the IR after each pass")
    sp.add_argument("--emit", choices=["mlir", "ptx", "sass", "cubin"],
                    help="what to write: the IR after the last pass (default), the kernel's PTX, its SASS, its cubin")
    sp.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead of stdout (a cubin needs one)")
    sp.set_defaults(fn=cmd_compile)
    sp = sub.add_parser("precompile", help="build the standard kernel set of a target into a cache folder")
    sp.add_argument("--target", default="sm_90a")
    sp.add_argument("--cache", required=True, metavar="DIR")
    sp.set_defaults(fn=cmd_precompile)
    sp = sub.add_parser("explain", help="show the resource plan (smem, barriers, rings, roles) of a GEMM or "
                        "attention kernel")
    sp.add_argument("--op", default="gemm", choices=["gemm", "attention"])
    sp.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    sp.add_argument("--b-layout", default="kn", choices=["kn", "nk"], help="GEMM: B as [K,N] or [N,K]")
    sp.add_argument("--head-dim", type=int, default=128, choices=[64, 128, 256], help="attention")
    sp.add_argument("--causal", action="store_true", help="attention: the bottom-right causal kernel")
    sp.add_argument("--block-n", type=int, default=None,
                    help="GEMM: 256 by default; attention: keys a block, the standard tile's by default "
                         "(128, 176, 80 at head dim 64, 128, 256)")
    sp.add_argument("--block-m", type=int, default=128,
                    help="GEMM: 128; on sm_100a 256 is the CTA pair's tile (cta_group::2, a cluster of 2)")
    sp.add_argument("--stages", type=int, default=None, help="GEMM: 4 by default; attention: 2")
    sp.add_argument("--target", default="sm_90a", choices=["sm_90a", "sm_100a"])
    sp.add_argument("--schedule", choices=("grid", "persistent"),
                    help="a CTA per tile, or one per SM walking the tiles (default: the standard kernel's)")
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
