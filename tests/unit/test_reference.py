"""Checks warploom.reference against formulas written independently of it (loops, einsum, bit tricks)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from warploom import reference as ref
from warploom.runtime.dtypes import numpy_dtype


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def randn(seed: int, *shape: int) -> np.ndarray:
    # Shift away from zero so no test input is exactly 0 by accident.
    x = rng(seed).standard_normal(shape)
    return np.where(x == 0, 0.5, x)


# ---------------------------------------------------------------- matmul


def loop_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    m, k = a.shape
    n = b.shape[1]
    out = np.empty((m, n))
    for i in range(m):
        for j in range(n):
            out[i, j] = math.fsum(a[i, p] * b[p, j] for p in range(k))
    return out


def test_matmul_matches_triple_loop():
    a, b = randn(1, 5, 7), randn(2, 7, 3)
    np.testing.assert_allclose(ref.matmul(a, b), loop_matmul(a, b), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_transposes_match_einsum(ta, tb):
    m, k, n = 17, 33, 9
    a = randn(3, k, m) if ta else randn(3, m, k)
    b = randn(4, n, k) if tb else randn(4, k, n)
    spec = ("km" if ta else "mk") + "," + ("nk" if tb else "kn") + "->mn"
    np.testing.assert_allclose(ref.matmul(a, b, transpose_a=ta, transpose_b=tb),
                               np.einsum(spec, a, b), rtol=1e-12, atol=1e-12)


def test_matmul_batched_rank4_with_transpose():
    a, b = randn(5, 2, 3, 17, 11), randn(6, 2, 3, 13, 11)
    got = ref.matmul(a, b, transpose_b=True)
    assert got.shape == (2, 3, 17, 13)
    np.testing.assert_allclose(got, np.einsum("xymk,xynk->xymn", a, b), rtol=1e-12, atol=1e-12)
    for i in range(2):
        for j in range(3):
            np.testing.assert_allclose(got[i, j], loop_matmul(a[i, j], b[i, j].T), rtol=1e-12, atol=1e-12)


def test_matmul_takes_low_precision_inputs_and_returns_float64():
    a = randn(7, 5, 9).astype(ml_dtypes.bfloat16)
    b = randn(8, 9, 3).astype(ml_dtypes.float8_e4m3fn)
    got = ref.matmul(a, b)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, loop_matmul(a.astype(np.float64), b.astype(np.float64)), rtol=1e-13)


def test_matmul_k_mismatch_names_the_sizes():
    with pytest.raises(ValueError, match=r"K=7.*K=6"):
        ref.matmul(np.ones((5, 7)), np.ones((6, 3)))
    # After transposing a, its K is 5, which now does match.
    assert ref.matmul(np.ones((5, 7)), np.ones((5, 3)), transpose_a=True).shape == (7, 3)


def test_matmul_batch_mismatch_raises():
    with pytest.raises(ValueError, match=r"\(2,\).*\(3,\)"):
        ref.matmul(np.ones((2, 4, 5)), np.ones((3, 5, 6)))
    with pytest.raises(ValueError, match="rank"):
        ref.matmul(np.ones(5), np.ones((5, 6)))


# ---------------------------------------------------------------- attention


def loop_attention(q, k, v, causal, scale, lse=None):
    """Per-(b, h, i) python loop on bhsd tensors; kv head is picked as h * Hkv // Hq. Causal: query i sees key
    j <= i + Sk - Sq (bottom-right); a row with no key gives 0 (and log-sum-exp -inf into `lse`)."""
    batch, hq, sq, d = q.shape
    hkv, sk, dv = k.shape[1], k.shape[2], v.shape[3]
    out = np.zeros((batch, hq, sq, dv))
    for b in range(batch):
        for h in range(hq):
            g = h * hkv // hq
            for i in range(sq):
                keys = [j for j in range(sk) if not causal or j <= i + sk - sq]
                if not keys:
                    if lse is not None:
                        lse[b, h, i] = -math.inf
                    continue
                logits = [scale * sum(q[b, h, i, c] * k[b, g, j, c] for c in range(d)) for j in keys]
                top = max(logits)
                weights = [math.exp(s - top) for s in logits]
                denom = sum(weights)
                if lse is not None:
                    lse[b, h, i] = top + math.log(denom)
                for c in range(dv):
                    out[b, h, i, c] = sum(w * v[b, g, j, c] for w, j in zip(weights, keys)) / denom
    return out


ATTN_CASES = [
    # B, Hq, Hkv, Sq, Sk, D, Dv, causal, scale
    (2, 2, 2, 5, 7, 3, 3, False, None),
    (1, 4, 2, 17, 33, 8, 5, False, None),
    (1, 4, 2, 17, 33, 8, 8, True, None),
    (2, 6, 1, 9, 9, 4, 4, True, 0.3),
    (1, 6, 1, 11, 5, 3, 7, True, None),  # Sq > Sk: the first 6 queries see no key (bottom-right mask)
    (1, 2, 1, 4, 9, 3, 3, True, None),   # Sq < Sk: query 0 sees keys 0..5
    (1, 3, 3, 7, 13, 5, 5, False, 2.5),
]


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("case", ATTN_CASES, ids=lambda c: "B{}_Hq{}_Hkv{}_Sq{}_Sk{}_D{}_Dv{}_c{}_s{}".format(*c))
def test_attention_matches_loop(case, layout):
    batch, hq, hkv, sq, sk, d, dv, causal, scale = case
    seed = sum(case[:7])
    q, k, v = randn(seed, batch, hq, sq, d), randn(seed + 1, batch, hkv, sk, d), randn(seed + 2, batch, hkv, sk, dv)
    want_lse = np.zeros((batch, hq, sq))
    want = loop_attention(q, k, v, causal, 1 / math.sqrt(d) if scale is None else scale, want_lse)
    if layout == "bhsd":
        got, lse = ref.attention(q, k, v, causal=causal, scale=scale, return_lse=True)
        np.testing.assert_allclose(lse, want_lse, rtol=1e-12, atol=1e-12)
    else:
        to_bshd = lambda t: np.ascontiguousarray(t.transpose(0, 2, 1, 3))  # noqa: E731
        got = ref.attention(to_bshd(q), to_bshd(k), to_bshd(v), causal=causal, scale=scale, layout="bshd")
        got = got.transpose(0, 2, 1, 3)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_attention_is_stable_for_large_logits():
    q, k, v = randn(40, 1, 2, 5, 4) * 300, randn(41, 1, 2, 6, 4) * 300, randn(42, 1, 2, 6, 4)
    with np.errstate(over="raise", invalid="raise"):
        got = ref.attention(q, k, v, causal=True)
    np.testing.assert_allclose(got, loop_attention(q, k, v, True, 0.5), rtol=1e-10, atol=1e-12)


def test_attention_causal_first_row_is_first_value():
    # With Sq == Sk query 0 sees only key 0, so its output must be exactly v[..., 0, :].
    q, k, v = randn(50, 2, 4, 6, 3), randn(51, 2, 2, 6, 3), randn(52, 2, 2, 6, 5)
    got = ref.attention(q, k, v, causal=True)
    np.testing.assert_array_equal(got[:, 0::2, 0, :], v[:, :, 0, :])
    np.testing.assert_array_equal(got[:, 1::2, 0, :], v[:, :, 0, :])


def test_attention_without_keys_gives_zeros():
    out = ref.attention(randn(60, 1, 2, 3, 4), np.ones((1, 1, 0, 4)), np.ones((1, 1, 0, 5)), causal=True)
    assert out.shape == (1, 2, 3, 5)
    np.testing.assert_array_equal(out, 0.0)


def test_attention_bad_shapes():
    q, k, v = np.ones((1, 4, 5, 8)), np.ones((1, 2, 7, 8)), np.ones((1, 2, 7, 8))
    with pytest.raises(ValueError, match=r"D=8.*D=6"):
        ref.attention(q, np.ones((1, 2, 7, 6)), v)
    with pytest.raises(ValueError, match=r"Hq=4.*Hkv=3"):
        ref.attention(q, np.ones((1, 3, 7, 8)), np.ones((1, 3, 7, 8)))
    with pytest.raises(ValueError, match="'bsdh'"):
        ref.attention(q, k, v, layout="bsdh")
    with pytest.raises(ValueError, match=r"Sk=7.*Sk=6"):
        ref.attention(q, k, np.ones((1, 2, 6, 8)))
    # In bshd the head count sits in axis 2: Hq=5 there is not a multiple of Hkv=2.
    with pytest.raises(ValueError, match=r"Hq=5.*Hkv=2"):
        ref.attention(np.ones((1, 3, 5, 8)), np.ones((1, 7, 2, 8)), np.ones((1, 7, 2, 8)), layout="bshd")


# ---------------------------------------------------------------- elementwise


def test_binary_ops_broadcast():
    a, b = randn(70, 3, 17), randn(71, 17)
    np.testing.assert_array_equal(ref.add(a, b), [[a[i, j] + b[j] for j in range(17)] for i in range(3)])
    np.testing.assert_array_equal(ref.mul(a, b), [[a[i, j] * b[j] for j in range(17)] for i in range(3)])
    np.testing.assert_array_equal(ref.maximum(a, b), [[max(a[i, j], b[j]) for j in range(17)] for i in range(3)])


def test_unary_ops_match_math():
    x = randn(72, 33) * 3
    np.testing.assert_array_equal(ref.scale(x, 0.125), x / 8)
    np.testing.assert_allclose(ref.exp(x), [math.exp(t) for t in x], rtol=1e-15)
    np.testing.assert_allclose(ref.exp2(x), [2.0 ** t for t in x], rtol=1e-15)
    np.testing.assert_array_equal(ref.relu(x), [t if t > 0 else 0.0 for t in x])


def test_unary_ops_take_low_precision_inputs():
    x = np.array([-1.5, 0.5, 3.0], dtype=ml_dtypes.float4_e2m1fn)
    got = ref.relu(x)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [0.0, 0.5, 3.0])


def test_gelu_known_values():
    assert ref.gelu(np.array(1.0)) == pytest.approx(0.8413447460685429, rel=1e-15)
    assert ref.gelu(np.array(-1.0)) == pytest.approx(-0.15865525393145707, rel=1e-14)
    assert ref.gelu(np.array(1.0), approximate="tanh") == pytest.approx(0.8411919906082768, rel=1e-15)
    with pytest.raises(ValueError, match="'sigmoid'"):
        ref.gelu(np.ones(2), approximate="sigmoid")


def test_gelu_matches_scalar_formulas():
    x = randn(73, 4, 17) * 3
    # Exact GELU is x * Phi(x), with Phi the normal CDF written via erfc here.
    phi = np.vectorize(lambda t: 0.5 * math.erfc(-t / math.sqrt(2)))(x)
    np.testing.assert_allclose(ref.gelu(x), x * phi, rtol=1e-12, atol=1e-15)
    tanh_form = np.vectorize(
        lambda t: t / (1 + math.exp(-2 * math.sqrt(2 / math.pi) * (t + 0.044715 * t ** 3))))(x)
    np.testing.assert_allclose(ref.gelu(x, approximate="tanh"), tanh_form, rtol=1e-12, atol=1e-15)


def test_silu_matches_formula_and_survives_tails():
    x = randn(74, 33) * 5
    np.testing.assert_allclose(ref.silu(x), [t / (1 + math.exp(-t)) for t in x], rtol=1e-14)
    with np.errstate(over="raise", invalid="raise"):
        tails = ref.silu(np.array([-800.0, -40.0, 40.0, 800.0]))
    np.testing.assert_allclose(tails, [0.0, -40 * math.exp(-40) / (1 + math.exp(-40)), 40.0, 800.0], rtol=1e-14)


# ---------------------------------------------------------------- reductions and softmax


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_reductions_drop_the_axis(axis):
    x = randn(80, 3, 5, 7)
    moved = np.moveaxis(x, axis, -1)
    want_max = np.array([max(row) for row in moved.reshape(-1, moved.shape[-1])]).reshape(moved.shape[:-1])
    want_sum = np.array([math.fsum(row) for row in moved.reshape(-1, moved.shape[-1])]).reshape(moved.shape[:-1])
    assert ref.reduce_max(x, axis).shape == moved.shape[:-1]
    np.testing.assert_array_equal(ref.reduce_max(x, axis), want_max)
    np.testing.assert_allclose(ref.reduce_sum(x, axis), want_sum, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_matches_exp_over_sum(axis):
    x = randn(81, 17, 33)
    e = np.vectorize(math.exp)(x)
    want = e / e.sum(axis=axis, keepdims=True)
    got = ref.softmax(x, axis=axis)
    np.testing.assert_allclose(got, want, rtol=1e-14)
    np.testing.assert_allclose(got.sum(axis=axis), 1.0, rtol=1e-14)


def test_softmax_is_shift_invariant_and_stable():
    x = randn(82, 5, 9)
    with np.errstate(over="raise", invalid="raise"):
        shifted = ref.softmax(x + 1000.0)
    np.testing.assert_allclose(shifted, ref.softmax(x), rtol=1e-12)


def test_softmax_fully_masked_row_is_zero():
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 0.0]])
    np.testing.assert_array_equal(ref.softmax(x), [[0, 0, 0], [0.5, 0, 0.5]])


@pytest.mark.parametrize("sq,sk", [(5, 7), (7, 5), (4, 4)])
def test_causal_mask_pattern(sq, sk):
    x = randn(83, 2, sq, sk)
    before = x.copy()
    got = ref.causal_mask(x)
    np.testing.assert_array_equal(x, before)  # input untouched
    for i in range(sq):
        for j in range(sk):
            if j > i + sk - sq:          # bottom-right alignment
                assert np.all(got[:, i, j] == -np.inf)
            else:
                np.testing.assert_array_equal(got[:, i, j], x[:, i, j])


def test_op_table_is_complete():
    """Every graph op has its reference function (the interpreter's own: a runtime scalar's value and a constant)."""
    from warploom.dialect import GRAPH_OPS
    from warploom.reference.interpret import RENAMED
    names = {RENAMED.get(op, op) for op in GRAPH_OPS} - {"scalar", "constant"}
    assert set(ref.OPS) == names
    for name, fn in ref.OPS.items():
        assert fn is getattr(ref, name)


# ---------------------------------------------------------------- rounding: hand-checked cases

# Each case was worked out from the format: bf16 keeps 8 significand bits, e4m3fn 4 (bias 7,
# 0x7F is NaN so the top is 1.75 * 2**8), e5m2 3 (bias 15, IEEE inf/NaN), e2m1fn 2 (no inf/NaN).
HAND_CASES = [
    ("bf16", 1 + 2 ** -8, 1.0),  # exact tie between 1 and 1 + 2**-7: even significand (1) wins
    ("bf16", 1 + 3 * 2 ** -8, 1 + 2 ** -6),  # tie between odd 1 + 2**-7 and even 1 + 2**-6
    ("bf16", 1 + 3 * 2 ** -9, 1 + 2 ** -7),  # 0.75 ulp above 1: not a tie, rounds up
    ("bf16", 1 + 2 ** -8 + 2 ** -40, 1 + 2 ** -7),  # a hair past the tie (would tie again via f32)
    ("bf16", 257.0, 256.0),  # ulp is 2 in [256, 512): tie, 256 even
    ("bf16", 259.0, 260.0),  # tie between odd 258 and even 260
    ("f8E4M3FN", 0.1, 0.1015625),  # 0.1 = 1.6 * 2**-4, ulp 2**-7: 12.8 ulps -> 13 ulps
    ("f8E4M3FN", 17.0, 16.0),  # ulp 2 in [16, 32): tie, 16 (mantissa 000) even
    ("f8E4M3FN", 19.0, 20.0),  # tie between 18 (001) and 20 (010)
    ("f8E4M3FN", 448.0, 448.0),  # largest finite
    ("f8E4M3FN", 2 ** -9, 2 ** -9),  # smallest subnormal: 2**-6 * 2**-3
    ("f8E4M3FN", 2 ** -10, 0.0),  # half the smallest subnormal: tie, 0 even
    ("f8E5M2", 0.1, 0.09375),  # ulp 2**-6: 6.4 ulps -> 6 ulps
    ("f8E5M2", 17.0, 16.0),  # ulp 4 in [16, 32)
    ("f8E5M2", 18.0, 16.0),  # tie between 16 (00) and 20 (01)
    ("f8E5M2", 22.0, 24.0),  # tie between 20 (01) and 24 (10)
    ("f8E5M2", 57344.0, 57344.0),  # largest finite: 1.75 * 2**15
    ("f4E2M1FN", 0.25, 0.0),  # tie between 0 and 0.5
    ("f4E2M1FN", 0.75, 1.0),  # tie between 0.5 (odd code 1) and 1 (even code 2)
    ("f4E2M1FN", 1.25, 1.0),
    ("f4E2M1FN", 2.5, 2.0),  # tie between 2 (code 4) and 3 (code 5)
    ("f4E2M1FN", 3.5, 4.0),  # tie between 3 (code 5) and 4 (code 6)
    ("f4E2M1FN", 5.0, 4.0),  # tie between 4 (code 6) and 6 (code 7)
    ("f4E2M1FN", -5.5, -6.0),
]


@pytest.mark.parametrize("dtype,x,want", HAND_CASES)
def test_round_to_hand_cases(dtype, x, want):
    got = ref.round_to(np.array([x, -x]), dtype)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [want, -want])


def test_out_of_range_behaviour_per_format():
    # These pin down ml_dtypes' choices so a kernel's saturation policy can be compared to them.
    assert ref.round_to(np.array([61439.0]), "f8E5M2")[0] == 57344.0
    assert ref.round_to(np.array([61440.0]), "f8E5M2")[0] == np.inf  # tie with 2**16, which is even
    assert ref.round_to(np.array([464.0]), "f8E4M3FN")[0] == 448.0  # tie with the NaN slot: stays finite
    assert np.isnan(ref.round_to(np.array([465.0]), "f8E4M3FN")[0])  # no inf in e4m3fn
    np.testing.assert_array_equal(ref.round_to(np.array([7.0, -1e9, np.inf]), "f4E2M1FN"), [6.0, -6.0, 6.0])


def test_cast_returns_the_element_type():
    x = randn(90, 17)
    for dtype in ("f32", "f16", "bf16", "f8E4M3FN", "f8E5M2", "f4E2M1FN", "e4m3"):
        got = ref.cast(x, dtype)
        assert got.dtype == numpy_dtype(dtype)
        np.testing.assert_array_equal(got.astype(np.float64), ref.round_to(x, dtype))


# ---------------------------------------------------------------- rounding: independent implementations


def bf16_by_bits(x32: np.ndarray) -> np.ndarray:
    """Round float32 to bf16 by integer arithmetic: add 0x7FFF plus the kept lsb, clear the low half."""
    bits = x32.view(np.uint32).astype(np.uint64)
    lsb = (bits >> 16) & 1
    rounded = ((bits + 0x7FFF + lsb) & 0xFFFF0000).astype(np.uint32)
    return rounded.view(np.float32).astype(np.float64)


def test_bf16_matches_bit_rounding_on_random_float32():
    r = rng(100)
    bits = r.integers(0, 2 ** 32, size=10_000, dtype=np.uint64).astype(np.uint32)
    # A quarter of them are exact ties (low half 0x8000), the hardest case for ties-to-even.
    bits[::4] = (bits[::4] & 0xFFFF0000) | 0x8000
    x32 = bits.view(np.float32)
    x32 = x32[np.isfinite(x32)]  # random exponents of all ones are inf/NaN: not a rounding question
    assert x32.size > 9_000
    np.testing.assert_array_equal(ref.round_to(x32.astype(np.float64), "bf16"), bf16_by_bits(x32))


def nearest_even(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Nearest value of ``grid`` (non-negative, ascending, grid[i] has code i) to |x|, sign restored.

    On a tie the even code wins, which is the even mantissa because positive codes are consecutive.
    """
    mag = np.abs(x)
    dist = np.abs(mag[:, None] - grid[None, :])
    first = np.argmin(dist, axis=1)  # argmin returns the lower of two tied indices
    best = dist[np.arange(x.size), first]
    nxt = np.minimum(first + 1, grid.size - 1)
    tied = (nxt != first) & (dist[np.arange(x.size), nxt] == best)
    pick = np.where(tied & (first % 2 == 1), nxt, first)
    return np.copysign(grid[pick], x)


def positive_grid(ml_type) -> np.ndarray:
    """Every finite non-negative value of an 8-bit type, by viewing raw bit patterns (no casting)."""
    codes = np.arange(128, dtype=np.uint8)  # sign bit clear
    vals = codes.view(ml_type).astype(np.float64)
    vals = vals[np.isfinite(vals)]  # drop NaN (and e5m2's inf), which sit at the top codes
    assert np.all(np.diff(vals) > 0)  # codes are consecutive in value, so index == code
    return vals


def rounding_samples(grid: np.ndarray, seed: int, n: int = 4000) -> np.ndarray:
    """Random values across the whole range (log-spread), plus every midpoint and its neighbours."""
    r = rng(seed)
    top = grid[-1]
    tiny = grid[1] / 4
    mags = np.concatenate([
        np.exp(r.uniform(np.log(tiny), np.log(top), n)),
        r.uniform(0, top, n // 4),
    ])
    mids = (grid[:-1] + grid[1:]) / 2  # exact in float64
    mags = np.concatenate([mags, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf)])
    mags = mags[(mags > 0) & (mags <= top)]
    signs = np.where(r.random(mags.size) < 0.5, -1.0, 1.0)
    return mags * signs


@pytest.mark.parametrize("dtype,ml_type,top", [
    ("f8E4M3FN", ml_dtypes.float8_e4m3fn, 448.0),
    ("f8E5M2", ml_dtypes.float8_e5m2, 57344.0),
])
def test_fp8_matches_enumerated_nearest(dtype, ml_type, top):
    grid = positive_grid(ml_type)
    assert grid[-1] == top
    x = rounding_samples(grid, seed=101)
    np.testing.assert_array_equal(ref.round_to(x, dtype), nearest_even(x, grid))


def test_fp4_matches_nearest_of_list():
    grid = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])  # codes 0..7 of e2m1fn
    x = np.concatenate([rng(102).uniform(-6, 6, 10_000), rounding_samples(grid, seed=103, n=200)])
    np.testing.assert_array_equal(ref.round_to(x, "f4E2M1FN"), nearest_even(x, grid))
