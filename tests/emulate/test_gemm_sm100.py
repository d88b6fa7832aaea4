"""Every standard sm_100a GEMM (tcgen05, Tensor Memory), lowered and emulated thread by thread against the float64
reference. No Blackwell GPU exists here: this, ptxas and the SASS checks (tests/unit/test_assemble.py) are how these
kernels are verified; they have not run on hardware.

Ragged M, N, K (TMA zero fill, the guarded epilogue); SMS = 2, so each CTA walks 2-3 tiles and both TMEM
accumulator stages turn over (acc_full / acc_empty phases wrap) while the operand ring's iterations count on across
tiles. Three interleavings (seeds) of warps, TMA landings and MMA completions per kernel; the emulator reports any
race (an MMA writing an accumulator stage the epilogue still reads, a TMA refilling a stage an MMA reads, a tcgen05.ld
before its commit arrived) or deadlock as an error.
"""
import numpy as np
import pytest

from warploom.emulate import emulate_gemm
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.kernels import STANDARD_KERNELS
from warploom.reference.ops import matmul, round_to

SPECS = STANDARD_KERNELS["sm_100a"]
# the CTA-pair kernels (cta_group::2) free their TMEM after the kernel's last cluster barrier, when both CTAs'
# epilogues are done: the emulator's PairDeallocError check (tests/emulate/test_pair_dealloc.py) passes them
CASES = [pytest.param(s, id=s.kernel_name) for s in SPECS]
SIZE = (130, 264, 200)       # 2 row tiles x 2-3 column tiles; K: 3 whole k-tiles and a tail


def operands(spec, rng, exact: bool):
    m, n, k = SIZE
    draw = (lambda shape: rng.integers(-1, 2, shape).astype(np.float64)) if exact else rng.standard_normal
    a = round_to(draw((m, k)), spec.elem)
    b = round_to(draw((k, n) if spec.b_layout == "kn" else (n, k)), spec.elem)
    return a, b, matmul(a, b, transpose_b=spec.b_layout == "nk")


@pytest.mark.parametrize("spec", CASES)
def test_exact_inputs_give_the_exact_result(spec):
    a, b, ref = operands(spec, np.random.default_rng(7), exact=True)
    c = emulate_gemm(spec, a, b, seed=0)
    assert c.dtype == NUMPY_ELEMS[spec.elem]
    np.testing.assert_array_equal(c.astype(np.float64), ref)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("spec", CASES)
def test_random_inputs_match_the_reference(spec, seed):
    a, b, ref = operands(spec, np.random.default_rng(100 + seed), exact=False)
    c = emulate_gemm(spec, a, b, seed=seed, delay=8).astype(np.float64)
    assert not np.isnan(c).any()
    np.testing.assert_allclose(c, ref, rtol=2 ** -7, atol=1e-3)
    assert np.mean(c == round_to(ref, spec.elem)) > 0.99


def test_one_tile_per_cta_and_many_tiles_per_cta_agree():
    """SMS = 1 (one CTA walks all six tiles, each accumulator stage three times) gives C bit for bit as SMS = 6."""
    spec = SPECS[0]
    a, b, _ = operands(spec, np.random.default_rng(3), exact=False)
    c1 = emulate_gemm(spec, a, b, seed=4, sms=1)
    c6 = emulate_gemm(spec, a, b, seed=5, sms=6)
    np.testing.assert_array_equal(c1.view(np.uint16), c6.view(np.uint16))
