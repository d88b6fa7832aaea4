"""The math dialect: the few ops warploom's kernels use, with the semantics of their arith / llvm twins
(semantics.py).
"""
from __future__ import annotations

from . import semantics as sem
from .compiler import handles

handles("math.absf")(sem.sign_op)
handles("math.fma")(sem.fma_op)
# math.exp2 -> ex2.approx.f32 (no .ftz unless the kernel flushes f32 subnormals), ex2.approx.ftz.bf16, ex2.approx.f16
# (LLVM NVPTX); PTX ISA 9.7.3 "ex2", 9.7.4 "ex2"
handles("math.exp2")(sem.unary_approx(sem.ex2, lambda op, elem: elem == "bf16"))
