"""wl-lower-sm100: replace each planned sm_100a `wl.kernel` by a `wl.launch` of a `gpu.module` holding its code.

The same replacement as wl-lower-sm90 (a `wl.launch` naming the kernel, its grid, block and smem; the gpu.module
moved into the top module), with the code from `warploom.lowering.sm100.lower_kernel`: the tcgen05 GEMM (a TMA
warp, an MMA warp issuing tcgen05.mma into Tensor Memory, four epilogue warps reading it with tcgen05.ld), or from
`warploom.lowering.sm100_attention` (the FA4-style attention, docs/attention-sm100.md). No
Blackwell GPU exists here: the result is checked by ptxas, SASS and the emulator, never run on hardware.
"""
from __future__ import annotations

from warploom.lowering import sm100_attention
from warploom.lowering.sm100 import kernel_name, lower_kernel

from .lower_sm90 import lower_all
from .registry import register


def lower_sm100(program, context):
    """(entry name, LoweredKernel) of an sm_100a program: a GEMM, or the FA4-style attention."""
    if program.target != "sm_100a":
        raise ValueError(f"the kernel is planned for {program.target}: lower it with wl-lower-sm90")
    if program.kind == "attention":
        name = sm100_attention.kernel_name(program)
        return name, sm100_attention.lower_attention(program, name, context)
    if program.kind != "gemm":
        raise ValueError(f"kernel kind {program.kind!r} has no sm_100a lowering (only 'gemm' and 'attention')")
    name = kernel_name(program)
    return name, lower_kernel(program, name, context)


@register("wl-lower-sm100", "Lower each planned sm_100a wl.kernel to a gpu.module (NVVM: TMA, mbarrier, tcgen05 "
          "MMA into Tensor Memory, tcgen05.ld epilogue) and a wl.launch of it")
def run(module):
    lower_all(module, lower_sm100, "wl-lower-sm100")
