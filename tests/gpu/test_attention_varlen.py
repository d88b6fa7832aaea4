"""warploom.ops.attention_varlen (packed variable-length batches, issue 34 item 5) on the GPU, against a float32 torch
reference computed sequence by sequence: flash_attn_varlen_func's interface (q [Tq, Hq, D], k and v [Tk, Hkv, D],
cu_seqlens_q/k int32 on the GPU, LSE [Hq, Tq]), causal bottom-right per sequence, GQA and MQA, head dims 64, 128 and
256, bf16 and fp16, Sq != Sk per sequence, ragged lengths (0, 1, 17, 1000, 4097), a sequence with no key (zeros,
LSE -inf), outputs poisoned (NaN) before the launch through out=, q read in place from a packed qkv tensor, starts
given as a host list, score/mask modifiers per sequence (tests/gpu/mod_variants.py), one kernel for every batch
composition, and the refusals of bad starts before any launch.

    warploom precompile --target sm_90a --cache .wlcache && python3 -m tests.gpu.extra_kernels --cache .wlcache
    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 -m pytest -m gpu tests/gpu/test_attention_varlen.py
"""
import math

import pytest

try:
    import torch
except ImportError:       # tests/gpu/conftest.py skips every test without a GPU
    torch = None
pytestmark = pytest.mark.gpu

from tests.gpu.mod_variants import VARIANTS, VARLEN_MOD_CASES  # noqa: E402
from warploom import ops  # noqa: E402

TOL = 2e-2
LSE_TOL = 2e-3

# (head dim, dtype, causal, query lengths, key lengths, Hq, Hkv)
CASES = [
    (64, "bf16", True, [1000, 17, 4097, 1, 0, 300], [1000, 40, 4097, 17, 5, 200], 8, 2),
    (64, "f16", False, [513, 128, 129], [1, 1000, 0], 4, 4),
    (128, "bf16", False, [4097, 1000, 17], [1000, 4097, 17], 8, 1),
    (128, "f16", True, [1, 1000, 2000], [17, 1000, 1500], 16, 4),
    (256, "bf16", True, [1000, 300, 17], [1000, 700, 17], 4, 2),
    (256, "f16", False, [17, 1000], [4097, 1000], 2, 1),
]


def torch_dtype(name):
    return {"bf16": torch.bfloat16, "f16": torch.float16}[name]


def starts(lengths):
    return torch.tensor([0] + list(torch.tensor(lengths).cumsum(0).tolist()), dtype=torch.int32, device="cuda")


def reference(q, k, v, cu_q, cu_k, causal, variant=None, scalars=None):
    """(out [Tq, Hq, D], lse [Hq, Tq]) in float32, each sequence alone (b = its index for the modifiers)."""
    score_mod, mask_mod = (VARIANTS[variant][:2] if variant else (None, None))
    out = torch.zeros(q.shape, dtype=torch.float32, device="cuda")
    lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), device="cuda")
    hq, hkv, d = q.shape[1], k.shape[1], q.shape[2]
    for i in range(len(cu_q) - 1):
        rq, rk = slice(int(cu_q[i]), int(cu_q[i + 1])), slice(int(cu_k[i]), int(cu_k[i + 1]))
        qs, ks, vs = (t.float().transpose(0, 1) for t in (q[rq], k[rk], v[rk]))     # [H, S, D]
        ks, vs = (t.repeat_interleave(hq // hkv, dim=0) for t in (ks, vs))
        sq, sk = qs.shape[1], ks.shape[1]
        if sq == 0:
            continue
        s = torch.matmul(qs, ks.transpose(-1, -2)) / math.sqrt(d)
        hi = torch.arange(hq, device="cuda").view(-1, 1, 1)
        qi, ki = torch.arange(sq, device="cuda").view(1, -1, 1), torch.arange(sk, device="cuda").view(1, 1, -1)
        b = torch.full((1, 1, 1), i, device="cuda")
        if score_mod is not None:
            s = score_mod(s, b, hi, qi, ki, **scalars).expand(s.shape).float()
        keep = torch.ones_like(s, dtype=torch.bool)
        if mask_mod is not None:
            keep = keep & mask_mod(b, hi, qi, ki, **scalars)
        if causal:
            keep = keep & (ki <= qi + sk - sq)
        s = s.masked_fill(~keep, float("-inf"))
        l_ = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - l_.unsqueeze(-1)).nan_to_num(0.0)
        out[rq] = torch.matmul(p, vs).transpose(0, 1)
        lse[:, rq] = l_
    return out, lse


def check(out, lse, ref, ref_lse):
    assert not torch.isnan(out).any(), "NaN in the output: a row never written or 0/0"
    err = (out.float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-6)
    assert err <= TOL, err
    finite = torch.isfinite(ref_lse)
    assert torch.equal(torch.isneginf(lse), ~finite), "LSE -inf exactly where a row sees no key"
    assert (lse[finite] - ref_lse[finite]).abs().max().item() <= LSE_TOL
    assert (out[(~finite).transpose(0, 1)] == 0).all(), "a row that sees no key is exactly 0"


def inputs(d, dtype, lq, lk, hq, hkv, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    t = torch_dtype(dtype)
    q = torch.randn(sum(lq), hq, d, generator=g, device="cuda").mul(1.5).to(t)
    k = torch.randn(sum(lk), hkv, d, generator=g, device="cuda").mul(1.5).to(t)
    v = torch.randn(sum(lk), hkv, d, generator=g, device="cuda").to(t)
    return q, k, v


@pytest.mark.parametrize("case", CASES, ids=[f"d{c[0]}-{c[1]}-{'causal' if c[2] else 'full'}-{len(c[3])}seqs-h{c[5]}/"
                                             f"{c[6]}" for c in CASES])
def test_packed_sequences_match_float32_reference(case):
    d, dtype, causal, lq, lk, hq, hkv = case
    q, k, v = inputs(d, dtype, lq, lk, hq, hkv, sum(lq) + d)
    cu_q, cu_k = starts(lq), starts(lk)
    out = torch.full_like(q, float("nan"))                    # poisoned: every row must be written
    o, lse = ops.attention_varlen(q, k, v, cu_q, cu_k, max(lq), max(lk), causal=causal, return_lse=True, out=out)
    assert o is out and lse.shape == (hq, sum(lq)) and lse.dtype == torch.float32
    torch.cuda.synchronize()
    check(out, lse, *reference(q, k, v, cu_q, cu_k, causal))


@pytest.mark.parametrize("case", VARLEN_MOD_CASES, ids=[c[0] for c in VARLEN_MOD_CASES])
def test_modifiers_per_sequence(case):
    variant, d, dtype, lq, lk, hq, hkv = case
    score_mod, mask_mod, scalars, causal = VARIANTS[variant]
    q, k, v = inputs(d, dtype, lq, lk, hq, hkv, 7)
    cu_q, cu_k = starts(lq), starts(lk)
    o, lse = ops.attention_varlen(q, k, v, cu_q, cu_k, causal=causal, return_lse=True, score_mod=score_mod,
                                  mask_mod=mask_mod, scalars=scalars)
    torch.cuda.synchronize()
    check(o, lse, *reference(q, k, v, cu_q, cu_k, causal, variant, scalars))


def test_strided_q_from_packed_qkv_and_host_starts():
    """q, k, v sliced out of one packed [T, 3, H, D] tensor are read in place; starts as a Python list."""
    lq = [300, 1, 700]
    qkv = torch.randn(sum(lq), 3, 8, 128, device="cuda", dtype=torch.bfloat16)
    q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    cu = [0, 300, 301, 1001]
    o = ops.attention_varlen(q, k, v, cu, cu, causal=True)
    ref, _ = reference(q, k, v, torch.tensor(cu), torch.tensor(cu), True)
    torch.cuda.synchronize()
    assert (o.float() - ref).abs().max().item() / ref.abs().max().item() <= TOL


def test_one_kernel_for_every_batch_composition():
    """Other compositions of the same rows (and other counts of sequences) load no other kernel: the starts are
    kernel arguments."""
    from warploom import kernels
    q, k, v = inputs(128, "bf16", [2000], [2000], 4, 4, 3)
    ops.attention_varlen(q, k, v, starts([2000]), starts([2000]), causal=True)
    before = len(kernels._memo)
    for lengths in ([1000, 1000], [1, 1999], [500, 500, 500, 500]):
        cu = starts(lengths)
        o = ops.attention_varlen(q, k, v, cu, cu, causal=True)
        ref, _ = reference(q, k, v, cu, cu, True)
        torch.cuda.synchronize()
        assert (o.float() - ref).abs().max().item() / ref.abs().max().item() <= TOL, lengths
    assert len(kernels._memo) == before


@pytest.mark.parametrize("bad, match", [
    ([0, 10, 5, 30], "must not decrease"),
    ([1, 10, 30], "must start at 0"),
    ([0, 10, 29], "ends at 29"),
])
def test_bad_starts_are_refused_before_launch(bad, match):
    q, k, v = inputs(64, "bf16", [30], [30], 2, 2, 1)
    with pytest.raises(ValueError, match=match):
        ops.attention_varlen(q, k, v, torch.tensor(bad, dtype=torch.int32, device="cuda"), starts([30]))


def test_bad_max_seqlen_and_dtype_are_refused():
    q, k, v = inputs(64, "bf16", [30, 50], [30, 50], 2, 2, 1)
    cu = starts([30, 50])
    with pytest.raises(ValueError, match="longest sequence has 50"):
        ops.attention_varlen(q, k, v, cu, cu, 40, 50)
    with pytest.raises(ValueError, match="int32"):
        ops.attention_varlen(q, k, v, cu.long(), cu)
    with pytest.raises(ValueError, match="required with check=False"):
        ops.attention_varlen(q, k, v, cu, cu, check=False)


def test_a_repeated_call_takes_the_prepared_launch_and_rechecks_changed_starts():
    """The fast path of a repeated torch call (ops_varlen._FAST, as ops.attention's): the same output bits into a
    fresh out (and lse) at every call, with check=False and with check=True; starts written in place since the last
    call are read and checked again (a bad one refused), and a longer sequence written in place resizes the grid
    instead of leaving rows out."""
    from warploom import ops_varlen
    q, k, v = inputs(64, "bf16", [300, 500], [300, 500], 4, 2, 7)
    cu = starts([300, 500])
    first, lse = ops.attention_varlen(q, k, v, cu, cu, causal=True, return_lse=True)
    for kwargs in ({}, {"check": False, "max_seqlen_q": 500, "max_seqlen_k": 500}):
        for _ in range(3):
            o, l_ = ops.attention_varlen(q, k, v, cu, cu, causal=True, return_lse=True, **kwargs)
            torch.cuda.synchronize()
            assert o.data_ptr() != first.data_ptr() and torch.equal(o, first) and torch.equal(l_, lse)
    assert len(ops_varlen._FAST) >= 2
    cu[1] = 100                                        # in place: sequences of 100 and 700 rows
    o = ops.attention_varlen(q, k, v, cu, cu, causal=True)
    ref, _ = reference(q, k, v, cu, cu, True)
    torch.cuda.synchronize()
    assert (o.float() - ref).abs().max().item() / ref.abs().max().item() <= TOL
    cu[1] = 900                                        # past the end of the second: refused
    with pytest.raises(ValueError, match="must not decrease"):
        ops.attention_varlen(q, k, v, cu, cu, causal=True)
