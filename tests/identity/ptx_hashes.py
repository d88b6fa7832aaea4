"""The PTX of every kernel warploom ships or the GPU tests launch, as sha256 per kernel: recorded at one commit and
compared at another, so a refactor of the compiler (issue 33: one lowering for every target) shows it changed no
instruction, or lists the kernels whose PTX moved.

    python -m tests.identity.ptx_hashes record tests/identity/ptx-560b967.json     # at the starting commit
    python -m tests.identity.ptx_hashes compare tests/identity/ptx-560b967.json    # at any later one

The kernels: `warploom precompile`'s sets for sm_90a and sm_100a, and tests/gpu/extra_kernels.py's. Each is
compiled afresh (no cache); `--jobs` processes share the list. A kernel that no longer compiles is a difference.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def specs() -> list:
    from warploom.kernels import precompile_set
    from tests.gpu.extra_kernels import extra_gemm_specs, extra_specs
    out = precompile_set("sm_90a") + precompile_set("sm_100a") + extra_specs() + extra_gemm_specs()
    return list(dict.fromkeys(out))


def _hash(spec) -> tuple[str, str]:
    from warploom.kernels import compile_spec
    try:
        ptx = compile_spec(spec).ptx
    except Exception as e:  # noqa: BLE001 - a kernel that stopped compiling is recorded as such
        return spec.lookup_id, f"error: {type(e).__name__}: {e}"[:400]
    return spec.lookup_id, hashlib.sha256(ptx.encode()).hexdigest()


def hashes(jobs: int, only: str | None = None) -> dict[str, str]:
    chosen = [s for s in specs() if only is None or any(w in s.lookup_id for w in only.split(","))]
    with ProcessPoolExecutor(jobs) as pool:
        return dict(sorted(pool.map(_hash, chosen)))


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=("record", "compare"))
    p.add_argument("file", type=Path)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", help="compare only kernels whose lookup id contains one of these comma-separated words")
    args = p.parse_args(argv)
    if args.only and args.action == "record":
        p.error("--only: a record holds every kernel; use it with compare")
    now = hashes(args.jobs, args.only)
    if args.action == "record":
        args.file.write_text(json.dumps({"commit": commit(), "kernels": now}, indent=1) + "\n")
        print(f"{len(now)} kernels recorded at {commit()} in {args.file}")
        return 0
    then = json.loads(args.file.read_text())
    old = then["kernels"]
    if args.only:
        old = {k: v for k, v in old.items() if any(w in k for w in args.only.split(","))}
    differ = sorted(k for k in old.keys() | now.keys() if old.get(k) != now.get(k))
    for k in differ:
        print(f"  {k}: {old.get(k, 'absent')[:16]} -> {now.get(k, 'absent')[:16]}")
    print(f"{len(now)} kernels at {commit()} against {then['commit']}: "
          + ("byte-identical PTX" if not differ else f"{len(differ)} differ"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
