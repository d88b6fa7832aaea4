"""wgmma with A in registers (the inline-asm form warploom emits for FlashAttention's P @ V), end to end: the
standard GEMMs with every consumer wgmma rewritten to take A from registers computed from the thread index
(tests/emulate/handbuilt.py), emulated thread by thread; C must be exactly A_pattern @ B, which checks the
m64k16 A fragment (layout.fragments.wgmma_a_k16) against the PTX ISA mapping written out in the kernel."""
import numpy as np
import pytest

from .handbuilt import a_matrix, lowered, ops, register_a
from warploom.emulate import EmulatedKernel, UnknownOpError, emulate_launch
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.emulate.regwgmma import parse_register_a
from warploom.kernels import GemmSpec

CASES = [GemmSpec("bf16", "kn", 128, 4), GemmSpec("f16", "nk", 128, 4),
         GemmSpec("bf16", "nk", 256, 4, schedule="persistent")]
M, N, K = 130, 264, 200


def run(kernel, spec, seed=0, b=None):
    elem = NUMPY_ELEMS[spec.elem]
    rng = np.random.default_rng(1)
    a = rng.integers(-2, 3, (M, K)).astype(elem)          # loaded by TMA but unused: A comes from registers
    if b is None:
        b = rng.integers(-2, 3, (K, N) if spec.b_layout == "kn" else (N, K)).astype(elem)
    c = np.full((M, N), np.nan, elem)
    emulate_launch(EmulatedKernel.of(kernel), {"a": a, "b": b, "c": c}, {"M": M, "N": N, "K": K, "SMS": 2},
                   seed=seed, delay=6, check_unread=False)      # the A tiles are loaded and never read
    return b, c


@pytest.mark.parametrize("spec", CASES, ids=[s.kernel_name for s in CASES])
def test_register_a_gemm_is_exact(spec):
    k = register_a(lowered(spec), spec)
    assert not ops(k, "nvvm.wgmma.mma_async") and ops(k, "llvm.inline_asm")
    b, c = run(k, spec, seed=1)
    bb = b.astype(np.float64) if spec.b_layout == "kn" else b.astype(np.float64).T
    ref = a_matrix(M, K) @ bb          # small integers: exact in f32 and in the 16-bit output
    np.testing.assert_array_equal(c.astype(np.float64), ref)


def test_the_fragment_is_not_a_transpose_or_swap():
    """The pattern has no symmetry a wrong mapping could hide behind: swapped halves, rows or k-steps change C."""
    a = a_matrix(64, 64)
    assert not np.array_equal(a, a.T)
    assert not np.array_equal(a[:, 0::2], a[:, 1::2])
    assert not np.array_equal(a[:8], a[8:16]) and not np.array_equal(a[:, :8], a[:, 8:16])


def test_the_asm_is_parsed_once_per_form():
    spec = CASES[0]
    k = register_a(lowered(spec), spec)
    form = parse_register_a(ops(k, "llvm.inline_asm")[0])
    assert (form.n, form.elem, form.trans_b, form.scale_a, form.scale_b) == (128, "bf16", 1, 1.0, 1.0)
    assert form.acc == tuple(range(64)) and form.a == (64, 65, 66, 67) and (form.b, form.scale_d) == (68, 69)


def test_other_inline_asm_is_unknown_and_named():
    spec = CASES[0]
    k = register_a(lowered(spec), spec)
    asm = ops(k, "llvm.inline_asm")[0]
    from mlir import ir
    with k.gpu_module.context:
        text = ir.StringAttr(asm.attributes["asm_string"]).value.replace("p, 1, 1, 1;", "p, 1, 1, 1, 1;")
        asm.attributes["asm_string"] = ir.StringAttr.get(text)
    with pytest.raises(UnknownOpError, match=r"llvm.inline_asm .*wgmma.mma_async.sync.aligned.m64n128k16.*"
                                             r"p, 1, 1, 1, 1;.*not a register-A wgmma"):
        EmulatedKernel.of(k)
