"""Reproducers: when a pass or the assembler fails, the input of the failing step and the command that replays it.

    where = write_reproducer("wl-plan-smem", ir_text, "input.mlir", f"warploom-opt input.mlir --pass-pipeline=...")

A reproducer is a folder under $WARPLOOM_REPRO_DIR (default: the system temp folder, `warploom-repro/`), named after
the step and a hash of its input, holding the input and `replay.sh` (the command, run from that folder). The same
failure writes the same folder again, so repeated runs do not pile up copies.
"""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import tempfile
from pathlib import Path

ENV = "WARPLOOM_REPRO_DIR"


def root() -> Path:
    return Path(os.environ.get(ENV) or Path(tempfile.gettempdir()) / "warploom-repro")


def write_reproducer(step: str, text: str, filename: str, command: list[str]) -> Path:
    """Write `text` as `filename` and `replay.sh` running `command` in a fresh folder for `step`; its path."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    name = re.sub(r"[^\w.-]+", "_", step).strip("_")
    folder = root() / f"{name}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / filename).write_text(text)
    script = folder / "replay.sh"
    script.write_text("#!/bin/sh\n# replays the failing step from this folder\ncd \"$(dirname \"$0\")\"\n"
                      + " ".join(shlex.quote(c) for c in command) + "\n")
    script.chmod(0o755)
    return folder


def pass_reproducer(element: str, ir_text: str) -> Path:
    """The IR a failing pipeline element got, and the warploom-opt call that runs that element on it."""
    return write_reproducer(element, ir_text, "input.mlir",
                            ["warploom-opt", "input.mlir", f"--pass-pipeline=builtin.module({element})"])


def assembler_reproducer(tool: str, ptx: str, arch: str) -> Path:
    """The PTX a failing assembler got, and the ptxas call that assembles it (nvJitLink failures replay as ptxas)."""
    return write_reproducer(f"{tool}-{arch}", ptx, "kernel.ptx",
                            ["ptxas", "-v", f"-arch={arch}", "-O3", "kernel.ptx", "-o", "kernel.cubin"])
