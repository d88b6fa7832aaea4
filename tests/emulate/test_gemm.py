"""Every standard sm_90a GEMM, lowered and emulated thread by thread, against the float64 reference.

Ragged sizes (M, N, K not multiples of the tile) exercise TMA zero fill and the guarded store; K spans
more k-tiles than the ring has stages, so barrier phases wrap; persistent kernels get SMS = 2 so each
CTA walks several tiles and its ring iterations count on across them. Three seeds = three
interleavings of warps, TMA landings and wgmma completions. Exact inputs (small integers) must give
exactly the float64 result; random ones must round like it.
"""
import numpy as np
import pytest

from warploom import tuning
from warploom.emulate import emulate_gemm
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.kernels import SMALL_M_STAGES, STANDARD_KERNELS, SWAP_KERNELS, GemmSpec
from warploom.reference.ops import matmul, round_to

SPECS = STANDARD_KERNELS["sm_90a"]
# grid kernels: 2 x 2 (BN 128) or 2 x 1 CTAs; persistent: 4 tiles over 2 CTAs for either BN; K = 5 k-tiles + a tail
SIZES = {"grid": (130, 136, 328), "persistent": (130, 264, 200)}


def operands(spec, rng, exact: bool):
    m, n, k = SIZES[spec.schedule]
    draw = (lambda shape: rng.integers(-1, 2, shape).astype(np.float64)) if exact else rng.standard_normal
    a = round_to(draw((m, k)), spec.elem)
    b = round_to(draw((k, n) if spec.b_layout == "kn" else (n, k)), spec.elem)
    return a, b, matmul(a, b, transpose_b=spec.b_layout == "nk")


@pytest.mark.parametrize("spec", SPECS, ids=[s.kernel_name for s in SPECS])
def test_exact_inputs_give_the_exact_result(spec):
    a, b, ref = operands(spec, np.random.default_rng(7), exact=True)
    c = emulate_gemm(spec, a, b, seed=0)
    assert c.dtype == NUMPY_ELEMS[spec.elem]
    np.testing.assert_array_equal(c.astype(np.float64), ref)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("spec", SPECS, ids=[s.kernel_name for s in SPECS])
def test_random_inputs_match_the_reference(spec, seed):
    a, b, ref = operands(spec, np.random.default_rng(100 + seed), exact=False)
    c = emulate_gemm(spec, a, b, seed=seed, delay=8).astype(np.float64)
    assert not np.isnan(c).any()
    # f32 accumulation then one rounding to the 16-bit type: within one rounding step of the reference,
    # and nearly always the reference's own rounding
    np.testing.assert_allclose(c, ref, rtol=2 ** -7, atol=1e-3)
    assert np.mean(c == round_to(ref, spec.elem)) > 0.99


def test_round_robin_and_no_delay_give_the_same_bits():
    spec = SPECS[0]
    a, b, _ = operands(spec, np.random.default_rng(3), exact=False)
    c0 = emulate_gemm(spec, a, b, seed=0, delay=0)
    c1 = emulate_gemm(spec, a, b, seed=5, delay=16)
    np.testing.assert_array_equal(c0.view(np.uint16), c1.view(np.uint16))


def test_every_scheduler_order_gives_the_same_bits():
    """"priority" (one warp races ahead, async operations land last) and "round_robin" interleave the warps
    otherwise than "random"; a correct kernel's C does not depend on it. An unknown order names the known ones."""
    spec = SPECS[0]
    a, b, _ = operands(spec, np.random.default_rng(4), exact=False)
    c0 = emulate_gemm(spec, a, b, seed=0)
    for order in ("priority", "round_robin"):
        c1 = emulate_gemm(spec, a, b, seed=1, order=order)
        np.testing.assert_array_equal(c0.view(np.uint16), c1.view(np.uint16))
    with pytest.raises(ValueError, match="'random', 'round_robin', 'priority'|random, round_robin, priority"):
        emulate_gemm(spec, a, b, order="fastest")


def test_swizzle_is_applied_to_absolute_addresses():
    """The kernel rounds its smem base up to 1024 B at run time; any 16-aligned base must give the same C."""
    from warploom.emulate import emulate_launch, gemm_kernel
    spec = SPECS[0]
    a, b, ref = operands(spec, np.random.default_rng(9), exact=True)
    m, n, k = SIZES[spec.schedule]
    for base in (0x10, 0x400, 0x7F0):
        c = np.full((m, n), np.nan, NUMPY_ELEMS[spec.elem])
        emulate_launch(gemm_kernel(spec), {"a": a.astype(c.dtype), "b": b.astype(c.dtype), "c": c},
                       {"M": m, "N": n, "K": k}, smem_base=base)
        np.testing.assert_array_equal(c.astype(np.float64), ref)


# what only the tuning table may pick, and the standard kernels with deep rings (K = 328 does not wrap 8 stages);
# the stream-K ones in test_streamk.py
DEEP_OR_TUNED = [s for s in tuning.all_candidates() if (s not in SPECS or s.stages > 4) and s.schedule != "streamk"]


@pytest.mark.parametrize("spec", DEEP_OR_TUNED, ids=[s.kernel_name for s in DEEP_OR_TUNED])
def test_tuning_candidates_give_the_exact_result(spec):
    """The kernels outside the standard set that `warploom tune` may put in the table, and the standard ones with
    deep rings: K spans more k-tiles than their 6 or 8 stages, so the phases wrap."""
    rng = np.random.default_rng(11)
    m, n, k = 70, 136, 1100
    a = round_to(rng.integers(-1, 2, (m, k)).astype(np.float64), spec.elem)
    b = round_to(rng.integers(-1, 2, (k, n) if spec.b_layout == "kn" else (n, k)).astype(np.float64), spec.elem)
    c = emulate_gemm(spec, a, b, seed=1)
    np.testing.assert_array_equal(c.astype(np.float64), matmul(a, b, transpose_b=spec.b_layout == "nk"))


SWAP = [s for s in SWAP_KERNELS["sm_90a"] if (s.elem, s.b_layout, s.block_m, s.block_n) in
        (("bf16", "kn", 16, 64), ("f16", "nk", 8, 64), ("bf16", "kn", 16, 128))]


@pytest.mark.parametrize("m, n, k", [(5, 200, 328), (19, 136, 200)])
@pytest.mark.parametrize("spec", SWAP, ids=[s.kernel_name for s in SWAP])
def test_swap_ab_gives_the_bits_of_the_64_row_kernel(spec, m, n, k):
    """A swap-AB kernel (C^T = B^T A^T, C stored transposed) on random inputs, ragged M (inside one tile and over two),
    N and K: right against float64, C written everywhere (it starts NaN), and bit for bit what the standard 64-row
    kernel gives (as on the H200: tests/gpu/test_matmul.py); B [K, N] feeds the wgmma's A MN-major."""
    rng = np.random.default_rng(m + spec.block_m)
    a = round_to(rng.standard_normal((m, k)), spec.elem)
    b = round_to(rng.standard_normal((k, n) if spec.b_layout == "kn" else (n, k)), spec.elem)
    ref = matmul(a, b, transpose_b=spec.b_layout == "nk")
    c = emulate_gemm(spec, a, b, seed=2, delay=8)
    assert not np.isnan(c.astype(np.float64)).any()
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=2 ** -7, atol=1e-3)
    rows64 = GemmSpec(spec.elem, spec.b_layout, 64, SMALL_M_STAGES, "sm_90a", "grid", 64)
    np.testing.assert_array_equal(c.view(np.uint16), emulate_gemm(rows64, a, b, seed=0).view(np.uint16))
