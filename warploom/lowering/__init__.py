"""Lowering of resource-assigned wl kernels to NVVM, PTX and cubins, one lowering for every target.

    name = kernel_name(program)                    # the PTX entry a planned program gets
    lowered = lower_program(program, name)         # a LoweredKernel: the gpu.module and the launch contract

`core` is the target-neutral lowering (roles, rings, waits, arrivals, copies, descriptors, stream-K hand-off);
`gemm` and `attention` (with `attention_regs`, `attention_tmem`) are the kernel families on it; `atoms/` holds what
each target's tensor cores differ in, picked from the `Target` record's capabilities (where its MMA keeps the
accumulator: `atoms.accumulator`), which also picks a family's form here; `emit/` the small helpers over the MLIR
builders; `ptx` and `assemble` turn a gpu.module into PTX and a cubin.
"""
from __future__ import annotations


def placement(program) -> str:
    """Where the MMA accumulators of `program`'s target live ("regs" or "tmem"): its atoms say."""
    from warploom import targets
    from warploom.lowering.atoms import atoms_for
    return atoms_for(targets.get(program.target)).accumulator


def kernel_name(program) -> str:
    """The entry name of a planned program: a GEMM's, or an attention's of its accumulator placement."""
    if program.kind == "attention":
        from warploom.lowering import attention
        return attention.fa4_name(program) if placement(program) == "tmem" else attention.kernel_name(program)
    from warploom.lowering.gemm import kernel_name as gemm_name
    return gemm_name(program)


def lower_program(program, name: str, context=None):
    """Lower a planned program (a GEMM or an attention, on its own target) to a `core.LoweredKernel`; ValueError
    names what cannot be lowered and why."""
    if program.kind != "attention":
        from warploom.lowering.gemm import lower_gemm
        return lower_gemm(program, name, context)
    from warploom.dialect import make_context
    from warploom.lowering.attention_regs import RegisterAttention
    from warploom.lowering.attention_tmem import TensorMemoryAttention
    lowering = {"regs": RegisterAttention, "tmem": TensorMemoryAttention}.get(placement(program))
    if lowering is None:
        raise ValueError(f"{program.target} lowering of attention kernel {name!r}: the target's atoms keep no "
                         "accumulator the attention lowering knows (registers or Tensor Memory)")
    return lowering(program, name).lower(context or make_context())
