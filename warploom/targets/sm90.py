"""sm_90a (Hopper: H100/H200): wgmma by warpgroups, accumulators in registers, TMA, no Tensor Memory.

Sources: PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate Instructions" (wgmma shapes,
9.7.15), "setmaxnreg", "Tensors" (swizzle modes); CUDA Programming Guide (232448 B of dynamic smem
per CTA on compute capability 9.0, 64K registers per SM).
"""
from types import MappingProxyType

from warploom.targets.record import MmaShapes, Target

SM90 = Target(
    name="sm_90a",
    chip="Hopper (H100/H200)",
    compute_capability=(9, 0),
    ptx_features="+ptx80",
    mma_instruction="wgmma.mma_async",
    smem_limit=232448,
    register_file=65536,
    warp_size=32,
    warpgroup_threads=128,
    max_threads_per_block=1024,
    setmaxnreg=(24, 256, 8),
    mbarrier_bytes=8,
    smem_base_align=1024,
    cluster_max_portable=8,
    swizzles=("none", "32B", "64B", "128B"),
    mma_k=MappingProxyType({"bf16": 16, "f16": 16, "tf32": 8, "f8E4M3FN": 32, "f8E5M2": 32, "i8": 32, "u8": 32}),
    mma_kind=MappingProxyType({"bf16": "f16", "f16": "f16", "tf32": "tf32", "f8E4M3FN": "f8", "f8E5M2": "f8",
                               "i8": "i8", "u8": "i8"}),
    mma_shapes=(MmaShapes(cta_group=1, m=(64,), n_min=8, n_max=256, n_step=8,
                          note="int8 inputs take N 8, 16, 24, 32 then steps of 16 (unverified)"),),
    # PTX ISA wgmma: imm-trans-a/b exist only for .f16/.bf16 operands read from smem
    mma_mn_major=frozenset({"bf16", "f16"}),
    # wgmma: A from smem (descriptor) or registers (fragment), B from smem, D in registers
    mma_sources=MappingProxyType({"a": ("smem", "regs"), "b": ("smem",), "acc": ("regs",)}),
    tmem=None,
    sm_count=132,              # H100 SXM and H200 (an H100 PCIe has 114)
    l2_bytes=50 * 2**20,       # H100 (torch reports 50 MB; the H200 60 MB: device/KINDS.md)
    hardware_here=True,        # the device tool lends H100 and H200 GPUs
)
