"""The polynomial exp2 on the FMA units (warploom.lowering.emit.exp2) that both attention softmaxes may use for a share
of their exponentials: its fit and its f32 steps against float64 (the figures docs/attention-sm100.md and
docs/attention-sm90.md quote), and the IR it emits (no conversion, no MUFU op)."""
import numpy as np
import pytest
from mlir import ir

from tests.unit.test_emit import finish, kernel
from warploom.lowering.assemble import ToolMissing, assemble, disassemble, sass_counts
from warploom.lowering.ptx import gpu_module_to_ptx
from warploom.lowering.emit.exp2 import DEGREE, LOWEST, exp2_fma, exp2_fma_reference, exp2_poly_coefficients


def test_the_polynomial_fits_2_to_the_f_within_1_2e_7():
    f = np.linspace(-0.5, 0.5, 200001)
    cs = np.asarray(exp2_poly_coefficients(), np.float64)
    assert len(cs) == DEGREE == 5
    p = 1.0 + sum(c * f ** (k + 1) for k, c in enumerate(cs))
    rel = np.abs(p / np.exp2(f) - 1.0)
    assert rel.max() < 1.2e-7, float(rel.max())


def test_exp2_fma_over_the_softmax_range():
    """x = s * scale_log2 - max: from far below (masked: -inf) up to past the sm_100a rescaling threshold. Where the
    result is normal (x >= -126) the f32 steps stay within 2e-7 of 2^x; 0 is exactly 1; at or below -127 (and -inf)
    the result is +0.0, between them a subnormal below 2^-126."""
    x = np.concatenate([np.linspace(-126.0, 127.0, 800001), [-0.0, 0.0, 1.0, 8.0, -1.0, 0.5, -0.5]]).astype(np.float32)
    y = exp2_fma_reference(x).astype(np.float64)
    rel = np.abs(y / np.exp2(x.astype(np.float64)) - 1.0)
    assert rel.max() < 2e-7, float(rel.max())
    assert exp2_fma_reference(np.float32([0.0]))[0] == 1.0
    zero = exp2_fma_reference(np.array([LOWEST, -127.5, -200.0, -3e38, -np.inf], np.float32))
    assert (zero == 0).all() and not np.signbit(zero).any()
    tiny = exp2_fma_reference(np.linspace(-127.0, -126.0, 1001)[1:-1].astype(np.float32))
    assert (tiny >= 0).all() and (tiny < np.float32(2.0 ** -126)).all()


def test_exp2_fma_assembles_to_fma_pipe_work_only():
    """Through PTX and ptxas (sm_90a): the SASS has FFMAs and integer ops, and no MUFU, F2I, I2F or FRND (all of
    which run at the MUFU's 16 a clock per SM); one MUFU.EX2 next to it, from b.exp2, shows the check can fail."""
    counts = {}
    for with_mufu in (False, True):
        ctx, module, b = kernel(args=("ptr1",), names=("x",))
        with ctx, ir.Location.unknown(), b.at_body():
            x = b.load(b.f32, b.args[0], alignment=4)
            y = exp2_fma(b, x)
            b.store(b.addf(y, b.exp2(x)) if with_mufu else y, b.args[0], alignment=4)
        out = finish(ctx, module)
        assert "fptosi" not in out and "sitofp" not in out and out.count("llvm.intr.fma") == DEGREE
        try:
            sass = disassemble(assemble(gpu_module_to_ptx(module), "sm_90a", "ptxas").cubin)
        except ToolMissing as e:          # only a missing tool skips; a rejection fails
            pytest.skip(str(e))
        counts[with_mufu] = sass_counts(sass, ["MUFU", "F2I", "I2F", "FRND", "FFMA"])
    assert counts[False]["FFMA"] >= DEGREE
    assert counts[False]["MUFU"] == counts[False]["F2I"] == counts[False]["I2F"] == counts[False]["FRND"] == 0
    assert counts[True]["MUFU"] == 1


def test_exp2_fma_x2_packs_the_adds_and_fmas_on_sm_100a():
    """The pair version: on sm_100a the polynomial's adds and FMAs are packed f32x2 instructions (FADD2, FFMA2 in
    SASS), the clamp two FMNMX, no MUFU. (LLVM packs some scalar pairs by itself too, but not dependably: in the
    sm_100a attention kernel it packed 40 of the 160 FMAs the pair version packs.)"""
    from warploom.dialect import make_context
    from warploom.lowering.emit import Builder, ptr_type
    from warploom.lowering.emit.exp2 import exp2_fma_x2
    from warploom.lowering.emit.nobuilder import nvvm_target
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        b = Builder.kernel_module(module.body, "k_mod", "k", nvvm_target("sm_100a", "+ptx86", 3), [ptr_type(1)],
                                  [{}], ["x"], {"nvvm.kernel": ir.UnitAttr.get(),
                                                "nvvm.maxntid": ir.DenseI32ArrayAttr.get([128, 1, 1])})
        with b.at_body():
            x0 = b.load(b.f32, b.args[0], alignment=4)
            x1 = b.load(b.f32, b.gep(b.args[0], b.const(1), b.f32), alignment=4)
            y0, y1 = exp2_fma_x2(b, x0, x1)
            b.store(b.addf(y0, y1), b.args[0], alignment=4)
        module.operation.verify()
    ptx = gpu_module_to_ptx(module)
    assert ptx.count("fma.rn.f32x2") == DEGREE and "ex2" not in ptx
    try:
        sass = disassemble(assemble(ptx, "sm_100a", "ptxas").cubin)
    except ToolMissing as e:          # only a missing tool skips; a rejection fails
        pytest.skip(str(e))
    counts = sass_counts(sass, ["FFMA2", "FADD2", "MUFU"])
    assert counts["FFMA2"] == DEGREE and counts["FADD2"] >= 2 and counts["MUFU"] == 0
