"""Hopper warpgroup MMA helpers: fence, mma_async on smem descriptors, commit, wait, and A-from-registers.

    fence(); acc = mma_async(b, acc, desc_a, desc_b, (64, 256, 16), "bf16", b_major="row"); commit(); wait(0)
    acc = mma_async_reg_a(b, acc, a_regs, desc_b, n=64, elem="bf16")   # FA3-style P @ V, P in registers

The accumulator is the m64nN f32 fragment as an LLVM struct of N/2 f32 (`acc_type`).
`mma_async` is MLIR 22's `nvvm.wgmma.mma_async` (A only as an smem descriptor);
`mma_async_reg_a` fills the gap with inline PTX (gpu-facts §3).
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import nvvm

from .builder import Builder
from .inline import inline_ptx
from .nobuilder import nvvm_mma_shape


def acc_type(b: Builder, n: int) -> ir.Type:
    """The wgmma m64nN f32 accumulator: N/2 registers per thread, as an LLVM struct."""
    return b.struct([b.f32] * (n // 2))


def fence() -> None:
    """wgmma.fence: order register accesses (accumulators, A registers) before the next wgmma."""
    nvvm.WgmmaFenceAlignedOp()


def commit() -> None:
    """wgmma.commit_group: close the group of the wgmmas issued so far."""
    nvvm.WgmmaGroupSyncAlignedOp()


def wait(pending: int) -> None:
    """wgmma.wait_group pending: until at most `pending` groups are in flight."""
    nvvm.WgmmaWaitGroupSyncOp(pending)


def mma_async(b: Builder, acc: ir.Value, desc_a: ir.Value, desc_b: ir.Value, shape: tuple[int, int, int],
              elem: str, b_major: str, a_major: str = "row", scale_d: str = "one") -> ir.Value:
    """acc += A @ B on smem descriptors; returns the new accumulator. `elem` is the A/B type (bf16, f16);
    majors are MMALayout names: A 'row' = K-major; B 'col' = K-major, 'row' = MN-major (MLIR 22 emits
    imm-trans-b = 1 - layout). `scale_d` "zero" overwrites the accumulator (its input is ignored)."""
    m, n, k = shape
    ty = getattr(nvvm.WGMMATypes, elem)
    return nvvm.WgmmaMmaAsyncOp(
        acc.type, acc, desc_a, desc_b, nvvm_mma_shape(m, n, k), ty, ty, nvvm.WGMMATypes.f32,
        getattr(nvvm.WGMMAScaleOut, scale_d), nvvm.WGMMAScaleIn.one, nvvm.WGMMAScaleIn.one,
        getattr(nvvm.MMALayout, a_major), getattr(nvvm.MMALayout, b_major),
        # the default, spelled out as the parser records it (D[<f32>, <one>, <wrapped>])
        satfinite=nvvm.MMAIntOverflow.wrapped, loc=b.loc("acc")).result


def mma_async_reg_a(b: Builder, acc: ir.Value, a_regs: list[ir.Value], desc_b: ir.Value, n: int, elem: str,
                    scale_d: ir.Value | None = None, trans_b: int = 1) -> ir.Value:
    """acc (+)= A @ B with A in registers: four b32 registers per thread (the m64k16 A fragment, two
    16-bit elements each), B an smem descriptor. `scale_d` (i32, 0 = overwrite, else accumulate) defaults
    to accumulate; `trans_b` is imm-trans-b (1 = B MN-major). MLIR 22 has no op for this form."""
    if elem not in ("bf16", "f16"):
        raise ValueError(f"wgmma with A in registers: elem {elem!r} is not lowered here; use 'bf16' or 'f16'")
    if len(a_regs) != 4:
        raise ValueError(f"wgmma with A in registers takes 4 b32 registers per thread, got {len(a_regs)}")
    if not (8 <= n <= 256 and n % 8 == 0):
        raise ValueError(f"wgmma n = {n}: must be 8..256 in steps of 8")
    h = n // 2
    accs = [b.extractvalue(acc, i, b.f32) for i in range(h)]
    d = ", ".join(f"${i}" for i in range(h))
    a = ", ".join(f"${2 * h + i}" for i in range(4))
    asm = ("{\n.reg .pred p;\n"
           f"setp.ne.b32 p, ${2 * h + 5}, 0;\n"
           f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{elem}.{elem} {{{d}}}, {{{a}}}, ${2 * h + 4}, "
           f"p, 1, 1, {trans_b};\n}}")
    constraints = ",".join(["=f"] * h + [str(i) for i in range(h)] + ["r"] * 4 + ["l", "r"])
    scale = scale_d if scale_d is not None else b.const(1)
    return inline_ptx(b, asm, constraints, accs + list(a_regs) + [desc_b, scale], acc.type)
