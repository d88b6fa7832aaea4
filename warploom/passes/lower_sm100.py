"""wl-lower-sm100: replace each planned sm_100a `wl.kernel` by a `wl.launch` of a `gpu.module` holding its code.

The same replacement as wl-lower-sm90 (a `wl.launch` naming the kernel, its grid, block and smem; the gpu.module
moved into the top module), with the code from `warploom.lowering.lower_program` on the sm_100a atoms: the GEMM with
its accumulator in Tensor Memory (a TMA warp, an MMA warp issuing tcgen05.mma, four epilogue warps reading it with
tcgen05.ld), or the FA4-style attention (docs/attention-sm100.md). No Blackwell GPU exists here: the result is
checked by ptxas, SASS and the emulator, never run on hardware.
"""
from __future__ import annotations

from .lower_sm90 import lower_all, lowering_pass
from .registry import register

lower_sm100 = lowering_pass("sm_100a")


@register("wl-lower-sm100", "Lower each planned sm_100a wl.kernel to a gpu.module (NVVM: TMA, mbarrier, tcgen05 "
          "MMA into Tensor Memory, tcgen05.ld epilogue) and a wl.launch of it")
def run(module):
    lower_all(module, lower_sm100, "wl-lower-sm100")
