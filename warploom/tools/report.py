"""What the command-line tools print alike: the version line (`warploom --version`, `warploom-opt --version`) and the
table of the passes run (`warploom compile --dump-ir`, `warploom demo`). A module of its own so that `warploom`
(cli.py), `warploom-opt` (opt.py) and the demo import it without importing each other."""
from __future__ import annotations

import sys


def version() -> str:
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


def print_records(records, out=sys.stdout) -> None:
    """A table of the passes run: index, name (with options), milliseconds, lines of IR after it."""
    width = max([28] + [len(r.name) for r in records])
    print(f"{'#':>3}  {'pass':<{width}} {'ms':>8}  {'IR lines':>8}", file=out)
    for r in records:
        print(f"{r.index:>3}  {r.name:<{width}} {r.seconds * 1e3:8.2f}  {r.ir.count(chr(10)):>8}", file=out)
