"""wl-pipeline: give each tile load a shared-memory ring of `stages` buffers, loaded asynchronously.

Each `wl.load_tile` becomes a `wl.async_load` into the current stage of a
`wl.buffer` declared at the top of the kernel; the stage of K tile i is
i % stages, so up to `stages` tiles are in flight ahead of the MMAs. The loads
of one loop advance together: they form one `wl.ring` (its regions share the
stage index and, once wl-plan-barriers runs, one full and one empty barrier).
"""
from __future__ import annotations

from dataclasses import replace

from warploom.dialect.kernel_ir import kernel_ops
from warploom.kernel import Copy, Load, Loop, Program, Region, Ring

from .registry import PassError, edit_program, register


def pipeline(program: Program, stages: int) -> None:
    """Each Load of a loop gets a region of `stages` tiles and becomes a Copy; a loop's loads form one ring."""
    loops = [op for op in program.body if isinstance(op, Loop) and any(isinstance(c, Load) for c in op.body)]
    if not loops:
        raise PassError("wl-pipeline found no wl.load_tile in the kernel: run wl-tile first")
    body = []
    for op in program.body:
        if any(op is loop for loop in loops):
            loads = [c for c in op.body if isinstance(c, Load)]
            for load in loads:
                program.regions[load.source] = Region(load.source, "smem", program.inputs[load.source].elem,
                                                      tuple(load.tile), tuple(load.dims), stages)
            names = tuple(load.source for load in loads)
            program.rings["".join(names)] = Ring("".join(names), stages, names)
            op = replace(op, body=tuple(Copy(c.source, c.source) if isinstance(c, Load) else c for c in op.body))
        body.append(op)
    program.body = tuple(body)
    program.attrs["stages"] = stages


@register("wl-pipeline", "Multi-stage buffering: each tile load becomes an async copy into a ring of buffers",
          options={"stages": int}, after=("wl-tile",))
def run(module, stages: int = 4):
    if not 2 <= stages <= 8:
        raise PassError(f"wl-pipeline: stages = {stages}; use 2..8 (one stage cannot overlap loads with MMAs)")
    for kernel in kernel_ops(module):
        edit_program(kernel, lambda p: pipeline(p, stages))
