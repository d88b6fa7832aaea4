"""warploom.ops.attention on the GPU against a float32 torch reference: random inputs, poisoned outputs, ragged sizes.

Run on the H200 from an AOT cache built on a CPU host (warploom precompile --target sm_90a --cache .wlcache):
    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 -m pytest -m gpu tests/gpu/test_attention.py

The error of a case is  max |out - ref| / max |ref|  over the whole output (ref: float32 attention of the same
bf16/fp16 inputs), at most TOL = 2e-2. LSE (natural log, float32 [B, Hq, Sq]) is compared in absolute terms,
at most LSE_TOL, and must be -inf exactly where the reference is (rows that see no key). Causal masks align to
the bottom-right corner: query i sees key j iff j <= i + Sk - Sq; a row that sees no key gives exactly 0.

The main grid covers seqlen_q x seqlen_k in {1, 63, 128, 1000, 4096}^2, causal and not (50 cases); head dim
(64, 128, 256), GQA ratio (1, 4, 8), layout and dtype cycle through it so that every value of every axis meets
a spread of the others. Batch and heads shrink as the sequences grow, so the float32 reference (which holds the
full score matrix) stays small; the whole file takes well under a minute of GPU time.
"""
import importlib.util
import itertools
import math

import pytest

try:
    import torch
except ImportError:       # still collected (tests/unit checks the grid); tests/gpu/conftest.py skips every test
    torch = None
pytestmark = pytest.mark.gpu

from warploom import ops  # noqa: E402
from warploom.kernels import AttentionSpec, get_kernel  # noqa: E402

TOL = 2e-2
LSE_TOL = 2e-3
SEQLENS = (1, 63, 128, 1000, 4096)
HEAD_DIMS = (64, 128, 256)
GQA_RATIOS = (1, 4, 8)
LAYOUTS = ("bshd", "bhsd")
DTYPES = ("bf16", "f16")


def torch_dtype(name):
    return {"bf16": torch.bfloat16, "f16": torch.float16}[name]


# ---- the reference -------------------------------------------------------------------------

def to_bhsd(t, layout):
    return t.transpose(1, 2) if layout == "bshd" else t


def reference(q, k, v, *, causal=False, scale=None, layout="bshd"):
    """(out, lse) in float32: out in q's layout, lse [B, Hq, Sq]; the same semantics as the kernel (GQA,
    bottom-right causal mask, 0 and -inf for rows that see no key)."""
    q, k, v = (to_bhsd(t, layout).float() for t in (q, k, v))
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    k = k.repeat_interleave(hq // hkv, dim=1)
    v = v.repeat_interleave(hq // hkv, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    if causal:
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        s = s.masked_fill(j > i + (sk - sq), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)[..., None])   # 0 where no key
    out = torch.matmul(p, v)
    return to_bhsd(out, layout), lse


def rel_max_err(out, ref) -> float:
    """max |out - ref| / max |ref|: the error norm of every case here."""
    return ((out.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def check_lse(lse, ref_lse, what):
    assert lse.dtype == torch.float32 and tuple(lse.shape) == tuple(ref_lse.shape), (what, lse.dtype, lse.shape)
    assert lse.is_contiguous()
    no_key = torch.isneginf(ref_lse)
    assert torch.equal(torch.isneginf(lse), no_key), f"{what}: lse is -inf on other rows than the reference"
    assert not torch.isnan(lse).any(), f"{what}: NaN in lse"
    if (~no_key).any():
        err = (lse[~no_key] - ref_lse[~no_key]).abs().max().item()
        assert err <= LSE_TOL, f"{what}: max |lse - ref| = {err:.2e} > {LSE_TOL}"


def poison_allocator(numel):
    """Best effort: leave a NaN-filled block of this size in torch's caching allocator, so that a float32 result
    allocated by warploom (lse) most likely starts as NaN and an unwritten element is seen."""
    block = torch.full((numel,), float("nan"), device="cuda", dtype=torch.float32)
    del block


def make_inputs(b, sq, sk, hq, hkv, d, dtype, layout, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def shape(s, h):
        return (b, s, h, d) if layout == "bshd" else (b, h, s, d)
    return tuple(torch.randn(shape(s, h), device="cuda", dtype=dtype, generator=g)
                 for s, h in ((sq, hq), (sk, hkv), (sk, hkv)))


def no_key_rows(sq, sk, causal):
    """Query rows that see no key under the bottom-right causal mask."""
    return max(0, sq - sk) if causal else 0


def run_case(b, sq, sk, hq, hkv, d, dtype, layout, causal, return_lse, seed, scale=None):
    q, k, v = make_inputs(b, sq, sk, hq, hkv, d, dtype, layout, seed)
    out = torch.full(q.shape, float("nan"), device="cuda", dtype=dtype)    # poison: every element must be written
    if return_lse:
        poison_allocator(b * hq * sq)
    got = ops.attention(q, k, v, causal=causal, scale=scale, return_lse=return_lse, out=out, layout=layout)
    got_out, got_lse = got if return_lse else (got, None)
    ref, ref_lse = reference(q, k, v, causal=causal, scale=scale, layout=layout)
    torch.cuda.synchronize()
    what = f"{layout} B{b} Sq{sq} Sk{sk} Hq{hq} Hkv{hkv} D{d} {dtype} causal={causal}"
    assert got_out.data_ptr() == out.data_ptr(), what
    assert not torch.isnan(got_out).any(), f"{what}: unwritten or NaN outputs"
    dead = no_key_rows(sq, sk, causal)
    if dead:
        rows = got_out[:, :dead] if layout == "bshd" else got_out[:, :, :dead]
        assert (rows == 0).all(), f"{what}: the {dead} rows that see no key must be 0"
    err = rel_max_err(got_out, ref)
    assert err <= TOL, f"{what}: max|out-ref|/max|ref| = {err:.2e} > {TOL}"
    if return_lse:
        check_lse(got_lse, ref_lse, what)
    return err


# ---- the main grid -------------------------------------------------------------------------

def grid_cases():
    cases = []
    for j, (sq, sk, causal) in enumerate(itertools.product(SEQLENS, SEQLENS, (False, True))):
        d = HEAD_DIMS[j % 3]
        ratio = GQA_RATIOS[(j // 3) % 3]
        layout = LAYOUTS[(j // 9) % 2]
        dtype = ("bf16", "f16")[(j // 2) % 2]
        return_lse = (j // 6) % 2 == 0
        small = sq * sk <= 1000 * 1000
        hkv = 2 if small else 1
        b = 2 if sq * sk <= 128 * 4096 else 1
        cases.append(pytest.param(b, sq, sk, ratio * hkv, hkv, d, dtype, layout, causal, return_lse,
                                  id=f"{dtype}-d{d}-{layout}-sq{sq}-sk{sk}-{'causal' if causal else 'full'}-"
                                     f"gqa{ratio}{'-lse' if return_lse else ''}"))
    return cases


@pytest.mark.parametrize("b, sq, sk, hq, hkv, d, dtype, layout, causal, return_lse", grid_cases())
def test_attention_matches_float32_reference(b, sq, sk, hq, hkv, d, dtype, layout, causal, return_lse):
    run_case(b, sq, sk, hq, hkv, d, torch_dtype(dtype), layout, causal, return_lse,
             seed=sq * 31 + sk * 7 + d + hq + int(causal))


@pytest.mark.parametrize("scale", [0.05, 1.0])
@pytest.mark.parametrize("causal", [False, True])
def test_explicit_scale(scale, causal):
    run_case(2, 200, 333, 4, 4, 128, torch.bfloat16, "bshd", causal, True, seed=5, scale=scale)


def test_reference_agrees_with_torch_sdpa():
    """The reference itself, against torch's SDPA (top-left causal = bottom-right when Sq == Sk)."""
    q, k, v = make_inputs(2, 256, 256, 8, 8, 128, torch.bfloat16, "bhsd", seed=1)
    for causal in (False, True):
        ref, _ = reference(q, k, v, causal=causal, layout="bhsd")
        sdpa = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        assert rel_max_err(sdpa, ref) < 1e-5


# ---- masks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
def test_rows_that_see_no_key_give_zero_and_minus_inf(layout):
    # Sq > Sk, causal: the first Sq - Sk = 937 queries see no key (bottom-right alignment)
    q, k, v = make_inputs(1, 1000, 63, 4, 1, 64, torch.bfloat16, layout, seed=3)
    out, lse = ops.attention(q, k, v, causal=True, return_lse=True, layout=layout)
    ref, ref_lse = reference(q, k, v, causal=True, layout=layout)
    torch.cuda.synchronize()
    rows = out[:, :937] if layout == "bshd" else out[:, :, :937]
    assert (rows == 0).all()
    assert torch.isneginf(lse[:, :, :937]).all() and torch.isfinite(lse[:, :, 937:]).all()
    assert rel_max_err(out, ref) <= TOL
    check_lse(lse, ref_lse, "no-key rows")


def test_causal_is_bottom_right_aligned():
    # Sq < Sk: the last query sees every key, the first sees Sk - Sq + 1 of them; top-left would differ a lot
    q, k, v = make_inputs(1, 63, 1000, 2, 2, 128, torch.float16, "bshd", seed=4)
    out = ops.attention(q, k, v, causal=True)
    ref, _ = reference(q, k, v, causal=True)
    top_left = torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2).float() for t in (q, k, v)), is_causal=True).transpose(1, 2)
    torch.cuda.synchronize()
    assert rel_max_err(out, ref) <= TOL
    assert rel_max_err(out, top_left) > 10 * TOL


# ---- strides, copies and out= --------------------------------------------------------------

def test_packed_qkv_views_are_read_in_place():
    b, s, h, d = 2, 1000, 8, 128
    qkv = torch.randn(b, s, 3, h, d, device="cuda", dtype=torch.bfloat16)
    q, k, v = qkv.unbind(2)                                     # strided views, no copy
    assert ops.attention_plan(q, k, v, causal=True).zero_copy
    for causal in (False, True):
        out = ops.attention(q, k, v, causal=causal)
        ref, _ = reference(q, k, v, causal=causal)
        assert rel_max_err(out, ref) <= TOL


def test_fused_gqa_projection_views_are_read_in_place():
    # one projection output [B, S, Hq + 2 Hkv, D] sliced into q, k, v (GQA 4), in bhsd through a transpose
    b, s, hq, hkv, d = 1, 777, 16, 4, 64
    x = torch.randn(b, s, hq + 2 * hkv, d, device="cuda", dtype=torch.float16)
    q, k, v = x[:, :, :hq], x[:, :, hq:hq + hkv], x[:, :, hq + hkv:]
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))         # bhsd views of the same memory
    assert ops.attention_plan(qt, kt, vt, layout="bhsd").zero_copy
    out, lse = ops.attention(qt, kt, vt, causal=True, layout="bhsd", return_lse=True)
    ref, ref_lse = reference(qt, kt, vt, causal=True, layout="bhsd")
    assert rel_max_err(out, ref) <= TOL
    check_lse(lse, ref_lse, "fused gqa views")


def test_inputs_tma_cannot_read_take_the_copy_path():
    b, s, h, d = 2, 300, 4, 128
    q = torch.randn(b, s, d, h, device="cuda", dtype=torch.bfloat16).transpose(2, 3)     # head dim not contiguous
    flat = torch.randn(b * s * h * d + 1, device="cuda", dtype=torch.bfloat16)
    k = flat[1:].view(b, s, h, d)                                                       # base 2 bytes off
    v = torch.randn(b, s, h, d + 4, device="cuda", dtype=torch.bfloat16)[..., :d]       # 264-byte head stride
    p = ops.attention_plan(q, k, v)
    assert all(p.copies[n] for n in "qkv"), p.copies
    for causal in (False, True):
        out = ops.attention(q, k, v, causal=causal)
        ref, _ = reference(q, k, v, causal=causal)
        assert rel_max_err(out, ref) <= TOL


def test_out_view_with_its_own_strides():
    b, s, h, d = 2, 500, 4, 128
    q, k, v = make_inputs(b, s, s, h, h, d, torch.bfloat16, "bshd", seed=9)
    wide = torch.full((b, s, h, d + 64), float("nan"), device="cuda", dtype=torch.bfloat16)
    out = wide[..., :d]                                        # last dim contiguous, strides of the wide tensor
    got = ops.attention(q, k, v, causal=True, out=out)
    ref, _ = reference(q, k, v, causal=True)
    torch.cuda.synchronize()
    assert got.data_ptr() == wide.data_ptr()
    assert rel_max_err(got, ref) <= TOL
    assert torch.isnan(wide[..., d:]).all(), "the kernel wrote outside out's elements"


# ---- empty problems, streams, repeated calls -----------------------------------------------

def test_sq_zero_and_sk_zero():
    q, k, v = make_inputs(2, 0, 100, 4, 4, 64, torch.bfloat16, "bshd", seed=0)
    out, lse = ops.attention(q, k, v, return_lse=True)
    assert out.shape == (2, 0, 4, 64) and lse.shape == (2, 4, 0)
    q, k, v = make_inputs(2, 100, 0, 4, 4, 64, torch.bfloat16, "bshd", seed=0)
    out, lse = ops.attention(q, k, v, return_lse=True)
    torch.cuda.synchronize()
    assert (out == 0).all() and torch.isneginf(lse).all() and lse.shape == (2, 4, 100)


def test_default_out_is_torch_on_the_current_stream():
    q, k, v = make_inputs(2, 300, 300, 8, 2, 128, torch.bfloat16, "bhsd", seed=2)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = ops.attention(q, k, v, layout="bhsd")
    s.synchronize()
    assert isinstance(out, torch.Tensor) and out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()
    assert rel_max_err(out, reference(q, k, v, layout="bhsd")[0]) <= TOL


def test_repeated_calls_on_the_same_tensors_see_new_values():
    q, k, v = make_inputs(1, 1000, 1000, 4, 4, 128, torch.float16, "bshd", seed=6)
    out = torch.empty_like(q)
    for _ in range(3):
        for t in (q, k, v):
            t.normal_()
        got = ops.attention(q, k, v, causal=True, out=out)
        assert rel_max_err(got, reference(q, k, v, causal=True)[0]) <= TOL


# ---- bad input -----------------------------------------------------------------------------

def _cuda(*shape, dtype=None):
    return torch.randn(*shape, device="cuda", dtype=dtype or torch.bfloat16)


@pytest.mark.parametrize("make, error, text", [
    (lambda: (torch.randn(1, 8, 2, 64, dtype=torch.bfloat16), _cuda(1, 8, 2, 64), _cuda(1, 8, 2, 64)),
     ValueError, "attention: q: tensor is on cpu"),
    (lambda: (_cuda(1, 8, 2, 64), _cuda(1, 8, 2, 128), _cuda(1, 8, 2, 128)), ValueError, "head dim 64 but k has 128"),
    (lambda: (_cuda(1, 8, 6, 64), _cuda(1, 8, 4, 64), _cuda(1, 8, 4, 64)), ValueError, "must divide"),
    (lambda: (_cuda(1, 8, 2, 96), _cuda(1, 8, 2, 96), _cuda(1, 8, 2, 96)), ValueError, "head dim 96"),
    (lambda: (_cuda(1, 8, 2, 64, dtype=torch.float32),) * 3, TypeError, "bf16 or f16"),
    (lambda: (_cuda(1, 8, 2, 64), _cuda(2, 8, 2, 64), _cuda(2, 8, 2, 64)), ValueError, "batch sizes differ"),
    (lambda: (_cuda(8, 2, 64),) * 3, ValueError, "rank 4"),
], ids=["cpu", "qk-head-dims", "gqa", "head-dim-96", "f32", "batch", "rank"])
def test_bad_input_is_refused_before_launch(make, error, text):
    with pytest.raises(error, match=text):
        ops.attention(*make())


# ---- the persistent schedule -----------------------------------------------------------------

PERSISTENT_CASES = [  # (b, sq, sk, hq, hkv, d, causal): more tiles than SMs, so every CTA walks several
    (4, 1100, 1100, 16, 4, 64, True), (4, 1100, 900, 16, 16, 64, False), (3, 700, 2000, 16, 2, 128, True),
    (1, 4096, 4096, 8, 8, 128, True), (2, 1500, 1000, 32, 8, 128, True), (8, 1024, 1024, 32, 32, 64, True)]


@pytest.mark.parametrize("b, sq, sk, hq, hkv, d, causal", PERSISTENT_CASES)
def test_persistent_schedule_is_bitwise_the_grid_kernel(b, sq, sk, hq, hkv, d, causal):
    """The standard persistent kernel (one CTA per SM walking 100s of tiles, K/V rings and Q's phase carried from
    tile to tile; Sq > Sk cases have tiles with no key block) with its standard deal (causal: the host's greedy
    table) and the snake deals of both tile orders (causal: as tables): within TOL of the reference, and bit for
    bit the output of the grid-schedule kernel of the same tile (a tile's arithmetic does not depend on which CTA
    runs it, or after which tiles)."""
    import warploom.ops_attention as oa
    q, k, v = make_inputs(b, sq, sk, hq, hkv, d, torch.bfloat16, "bshd", seed=sq + sk + d)
    spec = oa.pick_spec("bf16", d, causal)
    assert spec.schedule == "persistent"
    grid = AttentionSpec("bf16", d, causal, spec.block_n, schedule="grid")   # the same tile, a CTA per tile
    outs, pick_spec = [], oa.pick_spec
    try:
        for order, chosen in ((None, spec), (0, spec), (1, spec), (None, grid)):
            oa.TILE_ORDER = order
            oa.pick_spec = lambda *args, _s=chosen, **kwargs: _s
            out = torch.full_like(q, float("nan"))
            outs.append(ops.attention(q, k, v, causal=causal, out=out))
    finally:
        oa.TILE_ORDER, oa.pick_spec = None, pick_spec
    ref, _ = reference(q, k, v, causal=causal)
    torch.cuda.synchronize()
    assert rel_max_err(outs[0], ref) <= TOL
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the standard deal and order 0 differ"
    assert torch.equal(outs[0].view(torch.int16), outs[2].view(torch.int16)), "the standard deal and order 1 differ"
    assert torch.equal(outs[0].view(torch.int16), outs[3].view(torch.int16)), "persistent and grid kernels differ"


# ---- the tall tile (192 query rows, three consumer warpgroups) -------------------------------------------------

@pytest.mark.parametrize("elem", ["bf16", "f16"])
def test_tall_tile_is_picked_for_long_rows_and_is_bitwise_the_128_row_kernel(elem):
    """Head dim 64, non-causal, Sq >= 4096: ops.attention runs the 192-row kernel (warploom.kernels.tall_attention);
    ragged Sq (not a multiple of 192) and Sk, GQA 2: within TOL of the reference, and bit for bit the 128-row
    kernel's output (the key blocks, and so each row's arithmetic, are the same)."""
    import warploom.ops_attention as oa
    b, sq, sk, hq, hkv, d = 1, 4160, 4100, 4, 2, 64
    dtype = torch.bfloat16 if elem == "bf16" else torch.float16
    q, k, v = make_inputs(b, sq, sk, hq, hkv, d, dtype, "bshd", seed=45)
    plan = oa.attention_plan(q, k, v)
    assert plan.spec.block_m == 192 and plan.spec.kernel_name.startswith(f"wl_attn_{elem}_d64_192x128_")
    tall = ops.attention(q, k, v, out=torch.full_like(q, float("nan")))
    short = ops.attention(q, k, v, out=torch.full_like(q, float("nan")), spec=AttentionSpec(elem, d, False))
    ref, _ = reference(q, k, v, causal=False)
    torch.cuda.synchronize()
    assert rel_max_err(tall, ref) <= TOL
    assert torch.equal(tall.view(torch.int16), short.view(torch.int16)), "the 192- and 128-row kernels differ"


@pytest.mark.parametrize("d, causal, block_m", [(64, False, 128), (64, True, 128), (128, False, 128),
                                                (128, True, 128), (64, False, 192)],
                         ids=["d64-full", "d64-causal", "d128-full", "d128-causal", "d64-full-tall"])
def test_two_q_stages_give_the_bits_of_one(d, causal, block_m):
    """The standard persistent kernel, with two Q stages (the producer loads the next tile's Q while this one runs;
    built, emulated and mutation-tested on the CPU), on more tiles than SMs, ragged Sq, GQA 2: within TOL of the
    reference and bit for bit the one-stage kernel's output (tests/gpu/extra_kernels.py q1_specs; 192 rows: head dim
    64's tall tile, three consumer warpgroups)."""
    b, sq, sk, hq, hkv = 4, 1100, 1030, 16, 8
    q, k, v = make_inputs(b, sq, sk, hq, hkv, d, torch.bfloat16, "bshd", seed=46 + d)
    one = ops.attention(q, k, v, causal=causal, out=torch.full_like(q, float("nan")),
                        spec=AttentionSpec("bf16", d, causal, block_m=block_m, q_stages=1))
    two = ops.attention(q, k, v, causal=causal, out=torch.full_like(q, float("nan")),
                        spec=AttentionSpec("bf16", d, causal, block_m=block_m))
    assert AttentionSpec("bf16", d, causal, block_m=block_m).q_stages == 2
    ref, _ = reference(q, k, v, causal=causal)
    torch.cuda.synchronize()
    assert rel_max_err(two, ref) <= TOL
    assert torch.equal(two.view(torch.int16), one.view(torch.int16)), "two Q stages changed the output"


@pytest.mark.parametrize("d, causal, share", [(64, False, 0.25), (64, True, 0.125), (128, True, 0.25), (64, False, 1.0),
                                               (128, False, 1.0)],
                         ids=["d64-full-p2", "d64-causal-p1", "d128-causal-p2", "d64-full-p8", "d128-full-p8"])
def test_polynomial_exp2_share_stays_within_tolerance(d, causal, share):
    """A share of the softmax's exp2 on the FMA units (wl-tile{exp2-poly}; warploom.lowering.emit.exp2; emulated and
    mutation-tested on the CPU): the persistent kernel on more tiles than SMs, ragged Sq, GQA 2, rows that see no
    key (causal, Sq > Sk): within TOL and LSE_TOL of the reference, 0 and -inf exactly on the rows with no key, and
    within a few 16-bit ulps of the all-MUFU kernel (tests/gpu/extra_kernels.py poly_specs)."""
    b, sq, sk, hq, hkv = 2, 1300, 1030, 16, 8
    q, k, v = make_inputs(b, sq, sk, hq, hkv, d, torch.bfloat16, "bshd", seed=52 + d)
    spec = AttentionSpec("bf16", d, causal, exp2_poly=share)
    assert spec.kernel_name.endswith(f"_p{round(share * 8)}")
    poison_allocator(b * hq * sq)
    poly, lse = ops.attention(q, k, v, causal=causal, out=torch.full_like(q, float("nan")), return_lse=True,
                              spec=spec)
    mufu = ops.attention(q, k, v, causal=causal, out=torch.full_like(q, float("nan")),
                         spec=AttentionSpec("bf16", d, causal))
    ref, ref_lse = reference(q, k, v, causal=causal)
    torch.cuda.synchronize()
    assert not torch.isnan(poly).any(), "unwritten or NaN outputs"
    dead = no_key_rows(sq, sk, causal)
    assert (poly[:, :dead] == 0).all(), f"the {dead} rows that see no key must be 0"
    assert rel_max_err(poly, ref) <= TOL
    check_lse(lse, ref_lse, spec.kernel_name)
    assert (poly.float() - mufu.float()).abs().max().item() <= 4 * 2.0 ** -8 * mufu.float().abs().max().item()


# ---- the stream-K schedule (non-causal) ----------------------------------------------------------------------

STREAMK_CASES = [  # (b, sq, sk, hq, hkv, d, dtype, layout): tiles vs SMs so that the last waves split, ragged sizes
    (2, 8192, 8192, 16, 16, 128, "bf16", "bshd"),      # 2048 tiles on 132 SMs: 14 waves whole, then 1.5 split
    (2, 1100, 1030, 16, 8, 128, "f16", "bhsd"),        # 288 tiles, 9 key blocks each (ragged last): GQA 2
    (1, 700, 5000, 2, 1, 64, "bf16", "bshd"),          # 12 tiles on 132 SMs: every tile in ~11 pieces
    (3, 4100, 4097, 16, 4, 64, "f16", "bshd"),         # 1584 tiles; one key in the last block
]


@pytest.mark.parametrize("b, sq, sk, hq, hkv, d, dtype, layout", STREAMK_CASES)
def test_streamk_schedule_matches_the_reference_and_repeats_its_bits(b, sq, sk, hq, hkv, d, dtype, layout):
    """The stream-K kernel (the last waves' tiles split over their key blocks, merged by the last piece to finish;
    emulated and mutation-tested on the CPU): within TOL and LSE_TOL of the reference, no NaN left in the poisoned
    output, the same bits on a second launch and on another stream (the merge reads the pieces in key order, so it
    does not matter which finished last; each stream has its own fix-up buffers, left zeroed by every launch), and
    the tiles computed whole bit for bit the persistent kernel's."""
    from warploom.runtime import rules
    dt = torch_dtype(dtype)
    q, k, v = make_inputs(b, sq, sk, hq, hkv, d, dt, layout, seed=61 + d + sq)
    spec = AttentionSpec(dtype, d, False, schedule="streamk")
    assert spec.kernel_name.endswith("_streamk_q2")
    poison_allocator(b * hq * sq * d)
    outs = []
    for stream in (torch.cuda.current_stream(), torch.cuda.current_stream(), torch.cuda.Stream()):
        with torch.cuda.stream(stream):
            out, lse = ops.attention(q, k, v, layout=layout, out=torch.full_like(q, float("nan")), return_lse=True,
                                     spec=spec)
        stream.synchronize()
        outs.append((out, lse))
    persistent = ops.attention(q, k, v, layout=layout, out=torch.full_like(q, float("nan")),
                               spec=AttentionSpec(dtype, d, False))
    ref, ref_lse = reference(q, k, v, layout=layout)
    torch.cuda.synchronize()
    out, lse = outs[0]
    assert not torch.isnan(out).any(), "unwritten or NaN outputs"
    assert rel_max_err(out, ref) <= TOL
    check_lse(lse, ref_lse, spec.kernel_name)
    for again, again_lse in outs[1:]:
        assert torch.equal(again.view(torch.int16), out.view(torch.int16)), "a second launch gave other bits"
        assert torch.equal(again_lse, lse)
    # the data-parallel tiles (query block m, head h, batch: tile order 0) are computed whole, as the persistent
    # kernel computes them
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count
    tiles, kt = rules.cdiv(sq, 128) * hq * b, rules.cdiv(sk, 128)
    ctas = min(sms, tiles * kt)
    dp = rules.streamk_dp_tiles(tiles, ctas)
    a, p = to_bhsd(out, layout), to_bhsd(persistent, layout)
    blocks = rules.cdiv(sq, 128)
    for t in range(0, dp, max(1, dp // 64)):
        m, hb = t % blocks, t // blocks
        rows = slice(128 * m, min(sq, 128 * m + 128))
        assert torch.equal(a[hb // hq, hb % hq, rows].view(torch.int16), p[hb // hq, hb % hq, rows].view(torch.int16)), \
            f"whole tile {t} differs from the persistent kernel's"


def test_ops_picks_streamk_where_the_persistent_deal_idles():
    """A small batch's prefill over long keys (64 tiles of 128 rows: the persistent deal would leave half the SMs
    idle): ops.attention runs the stream-K kernel (kernels.streamk_attention), within TOL and LSE_TOL of the
    reference; the grid's shape (2048 tiles, 3% idle) keeps the persistent kernel."""
    import warploom.ops_attention as oa
    q, k, v = make_inputs(1, 1024, 16384, 8, 8, 128, torch.bfloat16, "bshd", seed=71)
    assert oa.attention_plan(q, k, v).spec.schedule == "streamk"
    big = torch.empty(2, 8192, 16, 128, device="cuda", dtype=torch.bfloat16)
    assert oa.attention_plan(big, big, big).spec.schedule == "persistent"
    out, lse = ops.attention(q, k, v, out=torch.full_like(q, float("nan")), return_lse=True)
    ref, ref_lse = reference(q, k, v)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any()
    assert rel_max_err(out, ref) <= TOL
    check_lse(lse, ref_lse, "stream-K picked by ops")


# ---- the long way ----------------------------------------------------------------------------

def test_long_way_graph_kernel_runs():
    """The graph written the long way (matmul, scale, causal_mask, softmax, matmul) compiles to the kernel of
    AttentionSpec("bf16", 128, causal=True): tests/unit/test_attention_compile.py checks on the CPU that both
    compile to the same name, PTX and cache key. Here the cached kernel of that name runs, against the long way
    in torch. Where MLIR is installed the long-way graph is also compiled here and compared with the cache."""
    spec = AttentionSpec("bf16", 128, causal=True)
    artifact = get_kernel(spec)
    assert artifact.name == spec.kernel_name == "wl_attn_bf16_d128_128x128_s2_causal_ov_persistent_q2"
    if importlib.util.find_spec("mlir") is not None:
        from warploom.build import attention_long_way_graph, compile_attention_graph
        long_way = compile_attention_graph(attention_long_way_graph(spec), spec)
        assert (long_way.name, long_way.ptx) == (artifact.name, artifact.ptx)
    b, h, s, d = 2, 4, 700, 128
    q, k, v = make_inputs(b, s, s, h, h, d, torch.bfloat16, "bhsd", seed=8)
    qf, kf, vf = q.float(), k.float(), v.float()
    scores = (qf @ kf.transpose(-1, -2)) * (1 / math.sqrt(d))
    scores = scores.masked_fill(torch.ones(s, s, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    long_way_ref = torch.softmax(scores, dim=-1) @ vf
    out = ops.attention(q, k, v, causal=True, layout="bhsd")
    assert rel_max_err(out, long_way_ref) <= TOL


def test_repeated_calls_take_the_prepared_launch_and_see_new_data():
    """A second call on the same tensors with out= skips every check (ops_attention._FAST): it must still compute
    on the tensors' current values, and a call that differs in any option must not take the first call's launch."""
    from warploom import ops_attention
    b, s, h, d = 2, 300, 4, 64
    q, k, v = make_inputs(b, s, s, h, h, d, torch.bfloat16, "bshd", seed=21)
    out = torch.empty_like(q)
    ops.attention(q, k, v, out=out)
    hits = len(ops_attention._FAST)
    for seed in (22, 23):
        nq, nk, nv = make_inputs(b, s, s, h, h, d, torch.bfloat16, "bshd", seed=seed)
        q.copy_(nq), k.copy_(nk), v.copy_(nv)
        out.fill_(float("nan"))
        ops.attention(q, k, v, out=out)
        assert rel_max_err(out, reference(q, k, v)[0]) <= TOL
    assert len(ops_attention._FAST) == hits                          # the repeats were hits, not new entries
    for causal, scale in ((True, None), (False, 0.3), (True, 0.3)):
        out.fill_(float("nan"))
        ops.attention(q, k, v, out=out, causal=causal, scale=scale)
        assert rel_max_err(out, reference(q, k, v, causal=causal, scale=scale)[0]) <= TOL, (causal, scale)
