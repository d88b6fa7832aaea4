"""Lowering of resource-assigned wl kernels to NVVM, PTX and cubins, one lowering for every target.

    name = kernel_name(program)                    # the PTX entry a planned program gets
    lowered = lower_program(program, name)         # a LoweredKernel: the gpu.module and the launch contract

`core` is the target-neutral lowering (roles, rings, waits, arrivals, copies, descriptors, stream-K hand-off);
`gemm` and `attention` (with `attention_regs`, `attention_tmem`) are the kernel families on it; `atoms/` holds what
each target's tensor cores differ in, picked from the `Target` record's capabilities; `emit/` the small helpers over
the MLIR builders; `ptx` and `assemble` turn a gpu.module into PTX and a cubin.
"""
from __future__ import annotations


def kernel_name(program) -> str:
    """The entry name of a planned program: a GEMM's or an attention's (by its kind)."""
    if program.kind == "attention":
        from warploom.lowering.attention import attention_name
        return attention_name(program)
    from warploom.lowering.gemm import kernel_name as gemm_name
    return gemm_name(program)


def lower_program(program, name: str, context=None):
    """Lower a planned program (a GEMM or an attention, on its own target) to a `core.LoweredKernel`; ValueError
    names what cannot be lowered and why."""
    if program.kind == "attention":
        from warploom.lowering.attention import lower_attention
        return lower_attention(program, name, context)
    from warploom.lowering.gemm import lower_gemm
    return lower_gemm(program, name, context)
