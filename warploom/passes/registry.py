"""The registry of `wl-*` passes and the pass pipelines of each target.

A pass is a plain function `run(module_op, **options)` registered with its
command-line argument and a one-line description. It reports a user-facing
error by raising `PassError` with the op it is about; the registry turns that
into an MLIR diagnostic at the op's location and fails the pass.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable


class PassError(Exception):
    """A pass cannot proceed; `op` (optional) locates the diagnostic."""

    def __init__(self, message: str, op=None):
        super().__init__(message)
        self.op = op


def edit_program(kernel, plan) -> None:
    """The typed kernel program of `kernel`, changed in place by `plan(program)` and written back: how the
    kernel passes work. A ValueError from planning or writing becomes a PassError at the kernel."""
    from warploom.kernel import read_program
    from warploom.kernel.write import write_program
    try:
        program = read_program(kernel)
        plan(program)
        write_program(kernel, program)
    except PassError as e:
        raise PassError(str(e), e.op if e.op is not None else kernel) from None
    except ValueError as e:
        raise PassError(str(e), kernel) from None


class PassFailed(Exception):
    """A pass failed and has already emitted its diagnostics."""


@dataclass(frozen=True)
class PassInfo:
    argument: str                 # "wl-fuse": the name in pipelines and the warploom-opt flag
    description: str
    run: Callable                 # run(module_op, **options)
    options: dict[str, type] = field(default_factory=dict)   # option name -> type, for `wl-tile{block-m=128}`
    # Kernel passes: the passes each wl.kernel must have been through first (recorded in its `planned`
    # attribute); the kernel program is verified after the pass (warploom.kernel.verify).
    after: tuple[str, ...] | None = None

    @property
    def kernel_pass(self) -> bool:
        return self.after is not None

    @property
    def name(self) -> str:        # "WlFuse": the name MLIR prints in IR dumps
        return "".join(part.capitalize() for part in self.argument.split("-"))


PASSES: dict[str, PassInfo] = {}


def register(argument: str, description: str, options: dict[str, type] | None = None,
             after: tuple[str, ...] | None = None):
    """Decorator: register `run(module_op, **options)` as the pass `argument`.

    `after` makes it a kernel pass: it refuses a wl.kernel that has not been through those passes (or has
    been through this one), and the kernel program is verified once it ran."""
    if not argument.startswith("wl-"):
        raise ValueError(f"warploom pass names start with 'wl-', got {argument!r}")

    def wrap(fn):
        if argument in PASSES:
            raise ValueError(f"pass {argument!r} is registered twice")
        PASSES[argument] = PassInfo(argument, description, fn, dict(options or {}),
                                    None if after is None else tuple(after))
        return fn

    return wrap


# Pipelines are lists of pass names; later issues append the planning and lowering passes.
PIPELINES: dict[str, list[str]] = {
    "sm_90a": ["wl-verify", "wl-fuse", "wl-verify", "wl-tile", "wl-pipeline", "wl-specialize", "wl-plan-smem",
               "wl-plan-barriers", "wl-lower-sm90"],
    "sm_100a": ["wl-verify", "wl-fuse", "wl-verify", "wl-tile{target=sm_100a}", "wl-pipeline", "wl-specialize",
                "wl-plan-tmem", "wl-plan-smem", "wl-plan-barriers", "wl-lower-sm100"],
}


def pipeline_for(target: str) -> list[str]:
    if target not in PIPELINES:
        raise ValueError(f"unknown target {target!r}; warploom targets: {', '.join(PIPELINES)}")
    return list(PIPELINES[target])
