"""warploom-opt: an mlir-opt for the wl dialect, running wl-* and upstream passes on a file.

    warploom-opt input.mlir --wl-fuse
    warploom-opt input.mlir --pass-pipeline='builtin.module(wl-verify,wl-fuse,canonicalize)'
    warploom-opt input.mlir --verify-diagnostics --split-input-file --wl-verify
    cat input.mlir | warploom-opt --mlir-print-ir-after-all --wl-fuse

User errors (bad IR, unknown passes, failing passes) print MLIR diagnostics
with locations and exit 1; they never print a Python traceback.
"""
from __future__ import annotations

import sys

USAGE = """usage: warploom-opt [INPUT|-] [-o OUTPUT] [options] [--wl-PASS ...] [--UPSTREAM-PASS ...]

options:
  --pass-pipeline=PIPELINE     textual pipeline, e.g. 'builtin.module(wl-fuse,canonicalize)'
  --wl-<pass>[=opt=val,...]    append a warploom pass (see --list-passes); order is kept
  --<upstream-pass>            append any upstream MLIR pass by its argument, e.g. --canonicalize
  --split-input-file           process chunks separated by '// -----' independently
  --verify-diagnostics         check '// expected-error @+1 {{...}}' comments instead of printing
  --mlir-print-ir-after-all    print the IR after every pass to stderr
  --no-verify                  skip the wl shape verifier after parsing
  --list-passes                list warploom passes and pipelines
  -o FILE                      write output to FILE (default stdout)
  --version                    print warploom's version and toolchain, and exit
  -h, --help                   print this help, and exit

wl ops are written in MLIR's generic form: %0 = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false}
: (tensor<128x64xbf16>, tensor<64x256xbf16>) -> tensor<128x256xbf16>
"""

SPLIT_MARKER = "// -----"


class UsageError(Exception):
    pass


def _value(it, option: str, what: str) -> str:
    """The argument after `option`; UsageError when there is none (or the next word is another option)."""
    value = next(it, None)
    if value is None or (value.startswith("-") and value != "-"):
        after = "nothing" if value is None else repr(value)
        raise UsageError(f"{option} needs {what} after it, got {after}")
    return value


def parse_args(argv: list[str]) -> dict:
    opts = {"input": "-", "output": "-", "elements": [], "split": False, "verify_diags": False,
            "print_after_all": False, "verify": True, "list": False}
    it = iter(argv)
    for arg in it:
        if arg in ("-h", "--help"):
            opts["help"] = True
        elif arg == "--version":
            opts["version"] = True
        elif arg == "-o":
            opts["output"] = _value(it, "-o", "a file name (or - for stdout)")
        elif arg.startswith("--pass-pipeline="):
            from warploom.passes import parse_pipeline
            opts["elements"].extend(parse_pipeline(arg.split("=", 1)[1]))
        elif arg == "--pass-pipeline":
            from warploom.passes import parse_pipeline
            opts["elements"].extend(parse_pipeline(_value(it, "--pass-pipeline", "a pipeline, e.g. "
                                                          "'builtin.module(wl-fuse,canonicalize)',")))
        elif arg == "--split-input-file":
            opts["split"] = True
        elif arg == "--verify-diagnostics":
            opts["verify_diags"] = True
        elif arg == "--mlir-print-ir-after-all":
            opts["print_after_all"] = True
        elif arg == "--no-verify":
            opts["verify"] = False
        elif arg == "--list-passes":
            opts["list"] = True
        elif arg.startswith("--"):
            # --wl-tile=block-m=128,stages=4  ->  wl-tile{block-m=128 stages=4}
            name, _, values = arg[2:].partition("=")
            opts["elements"].append(f"{name}{{{' '.join(values.split(','))}}}" if values else name)
        elif arg.startswith("-") and arg != "-":
            raise UsageError(f"unknown option {arg!r}")
        else:
            opts["input"] = arg
    return opts


def list_passes() -> str:
    from warploom.passes import PASSES, PIPELINES
    lines = ["warploom passes:"]
    for info in PASSES.values():
        lines.append(f"  --{info.argument:<22} {info.description}")
        for opt, typ in info.options.items():
            lines.append(f"      {opt}={typ.__name__}")
    lines.append("pipelines:")
    for target, names in PIPELINES.items():
        lines.append(f"  {target}: {','.join(names)}")
    return "\n".join(lines)


def split_chunks(text: str, split: bool) -> list[tuple[int, str]]:
    """(first line number, chunk text) pairs; chunks keep their original line numbers."""
    if not split:
        return [(1, text)]
    chunks, start, current = [], 1, []
    for i, line in enumerate(text.splitlines(keepends=True), start=1):
        if line.strip() == SPLIT_MARKER:
            chunks.append((start, "".join(current)))
            start, current = i + 1, []
        else:
            current.append(line)
    chunks.append((start, "".join(current)))
    return chunks


def process_chunk(ctx, first_line: int, chunk: str, opts: dict, collector) -> tuple[str | None, list]:
    """Parse, verify and run passes on one chunk. Returns (output IR or None on failure, diagnostics)."""
    from mlir import ir

    from warploom.dialect.verify import verify_module
    from warploom.passes import PassError
    from warploom.passes.manager import make_pass_manager

    from .diagnostics import parse_failure, to_diags

    padded = "\n" * (first_line - 1) + chunk   # so diagnostics report lines of the whole file
    with ctx, ir.Location.unknown():
        try:
            module = ir.Module.parse(padded)
        except ir.MLIRError as e:
            return None, (collector.take() + to_diags(e.error_diagnostics)) or parse_failure(padded)
        if opts["verify"] and verify_module(module):
            return None, collector.take()
        try:
            pm = make_pass_manager(opts["elements"], print_after_all=opts["print_after_all"])
        except PassError as e:
            raise UsageError(str(e)) from None
        try:
            pm.run(module.operation)
        except ir.MLIRError as e:
            return None, collector.take() + to_diags(e.error_diagnostics)
        return str(module), collector.take()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        opts = parse_args(argv)
    except UsageError as e:
        print(f"warploom-opt: {e}\n{USAGE.splitlines()[0]}\n(warploom-opt --help lists the options)", file=sys.stderr)
        return 2
    if opts.get("help"):
        print(USAGE)
        return 0
    if opts.get("version"):
        from .report import version          # one version string for both tools
        print(version())
        return 0
    if opts["list"]:
        print(list_passes())
        return 0

    filename = opts["input"]
    display = "<stdin>" if filename == "-" else filename
    try:
        # Read bytes and decode strictly: invalid UTF-8 is a user error, not a traceback.
        data = sys.stdin.buffer.read() if filename == "-" else open(filename, "rb").read()
        text = data.decode("utf-8")
    except OSError as e:
        print(f"warploom-opt: cannot read {filename}: {e.strerror}", file=sys.stderr)
        return 1
    except UnicodeDecodeError as e:
        print(f"warploom-opt: cannot read {display}: not UTF-8 text (byte offset {e.start})", file=sys.stderr)
        return 1

    from warploom.dialect import make_context

    from .diagnostics import DiagnosticCollector, expected_diagnostics, verify_expected

    ctx = make_context()
    collector = DiagnosticCollector(ctx)
    outputs, failed = [], False
    for first_line, chunk in split_chunks(text, opts["split"]):
        try:
            out, diags = process_chunk(ctx, first_line, chunk, opts, collector)
        except UsageError as e:
            print(f"warploom-opt: {e}", file=sys.stderr)
            return 2
        if opts["verify_diags"]:
            problems = verify_expected(expected_diagnostics(chunk, first_line), diags, display)
            for p in problems:
                print(p, file=sys.stderr)
            failed |= bool(problems)
        else:
            for d in diags:
                print(d.format(display), file=sys.stderr)
            failed |= out is None or any(d.severity == "error" for d in diags)
        if out is not None:
            outputs.append(out)

    if not opts["verify_diags"]:
        result = ("\n" + SPLIT_MARKER + "\n").join(outputs)
        if opts["output"] == "-":
            sys.stdout.write(result)
        else:
            try:
                with open(opts["output"], "w", encoding="utf-8") as f:
                    f.write(result)
            except OSError as e:
                print(f"warploom-opt: cannot write {opts['output']}: {e.strerror}", file=sys.stderr)
                return 1
    return 1 if failed else 0


def entry() -> None:
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader stopped reading (`warploom-opt x.mlir | head`): how a pipe ends, not an error; stdout goes to
        # /dev/null so that the interpreter's last flush does not fail on the closed pipe again
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 0
    sys.exit(status)


if __name__ == "__main__":
    entry()
