"""The one escape hatch to inline PTX (`llvm.inline_asm`), for instructions MLIR 22's NVVM dialect lacks.

Known gap it serves: wgmma.mma_async with A in registers (gpu-facts §3, last
bullet), built by `warploom.lowering.emit.wgmma.mma_async_reg_a`. Anything that
has an NVVM op must use the op instead: the op is verified, inline PTX is not.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import llvm

from .builder import Builder


def inline_ptx(b: Builder, asm: str, constraints: str, operands: list[ir.Value],
               result: ir.Type | None = None) -> ir.Value | None:
    """llvm.inline_asm (side effects, AT&T dialect as NVPTX expects) of `asm` with LLVM `constraints`:
    outputs first ('=f', ...), then one per operand ('r', 'l', or a digit tying it to an output)."""
    op = llvm.InlineAsmOp(result, operands, asm, constraints, has_side_effects=True,
                          loc=b.loc() if result is not None else None)
    return op.result if result is not None else None
