"""warploom.ops.attention with score and mask modifiers (issue 34) on the GPU, against a float32 torch reference of
the same modifiers: the variants of tests/gpu/mod_variants.py (softcap 30 and 50 with causal, sliding windows of 256
and 1024 keys causal and symmetric, ALiBi-causal, prefix-LM with one prefix and with a prefix per batch row, a
per-head mask, rows that see no key, a relative-bias table, documents from doc_id with causal, undeclared and
declared non-decreasing), each at head dims 64,
128 and 256, bf16 and fp16, with GQA 1 < Hkv < Hq and with MQA (mod_variants.grid_cases), Sq != Sk, ragged sizes (1,
17, 1000, 4097), outputs poisoned (NaN) before the launch.

The reference calls the same Python functions eagerly on torch index grids (warploom.score's functions compute on
torch tensors as well as trace), so it shares no code with the kernel's lowering of them. Error: max |out - ref| /
max |ref| <= TOL; LSE absolute <= LSE_TOL, -inf exactly where a row sees no key (whose output must be exactly 0).

    warploom precompile --target sm_90a --cache .wlcache && python3 -m tests.gpu.extra_kernels --cache .wlcache
    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 -m pytest -m gpu tests/gpu/test_attention_mods.py
"""
import math

import pytest

try:
    import torch
except ImportError:       # tests/gpu/conftest.py skips every test without a GPU
    torch = None
pytestmark = pytest.mark.gpu

from tests.gpu.mod_variants import GPU_CASES, VARIANTS, captured_scalars, traced  # noqa: E402
from warploom import ops  # noqa: E402

TOL = 2e-2
LSE_TOL = 2e-3

CASES = GPU_CASES


def torch_dtype(name):
    return {"bf16": torch.bfloat16, "f16": torch.float16}[name]


def gpu_scalars(variant, sq, sk, hq, bsz=1):
    """The variant's scalars for these sizes, captured tensors as CUDA tensors (mod_variants.captured_scalars)."""
    import numpy as np
    from warploom.score import nondecreasing
    values = captured_scalars(variant, sq, sk, hq, np.random.default_rng(sq + sk + hq), bsz)
    return {n: (torch.from_numpy(v).cuda() if isinstance(v, np.ndarray) else
                nondecreasing(torch.from_numpy(v.tensor).cuda()) if isinstance(v, nondecreasing) else v)
            for n, v in values.items()}


def reference(q, k, v, variant, layout, scalars=None):
    """(out in q's layout, lse [B, Hq, Sq]) in float32 of the variant's modifiers, evaluated eagerly."""
    score_mod, mask_mod, own, causal = VARIANTS[variant]
    scalars = own if scalars is None else scalars
    to_bhsd = (lambda t: t.transpose(1, 2)) if layout == "bshd" else (lambda t: t)
    q, k, v = (to_bhsd(t).float() for t in (q, k, v))
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    k, v = (t.repeat_interleave(hq // hkv, dim=1) for t in (k, v))
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    dev = q.device
    bi, hi = torch.arange(b, device=dev).view(-1, 1, 1, 1), torch.arange(hq, device=dev).view(1, -1, 1, 1)
    qi, ki = torch.arange(sq, device=dev).view(1, 1, -1, 1), torch.arange(sk, device=dev).view(1, 1, 1, -1)
    if score_mod is not None:
        s = score_mod(s, bi, hi, qi, ki, **scalars).expand(s.shape).float()
    keep = torch.ones_like(s, dtype=torch.bool)
    if mask_mod is not None:
        keep = keep & mask_mod(bi, hi, qi, ki, **scalars)
    if causal:
        keep = keep & (ki <= qi + sk - sq)
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)          # rows with no key: 0
    out = torch.matmul(p, v)
    return (out.transpose(1, 2) if layout == "bshd" else out), lse


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-d{c[1]}-{c[2]}-b{c[3]}-{c[4]}x{c[5]}-h{c[6]}/{c[7]}-{c[8]}"
                                             for c in CASES])
def test_modified_attention_matches_float32_reference(case):
    variant, d, dtype, b, sq, sk, hq, hkv, layout = case
    score_mod, mask_mod, _, causal = VARIANTS[variant]
    scalars = gpu_scalars(variant, sq, sk, hq, b)
    g = torch.Generator(device="cuda").manual_seed(sq * 7 + sk)
    shape = (lambda s, h: (b, s, h, d)) if layout == "bshd" else (lambda s, h: (b, h, s, d))
    # scores of tens of units: softcap 30 bends them, the windows and biases decide which keys dominate
    q, k, v = (torch.randn(shape(s, h), generator=g, device="cuda", dtype=torch.float32).mul(m).to(torch_dtype(dtype))
               for (s, h), m in (((sq, hq), 2.5), ((sk, hkv), 2.5), ((sk, hkv), 1.0)))
    out = torch.full(shape(sq, hq), float("nan"), device="cuda", dtype=torch_dtype(dtype))
    got, lse = ops.attention(q, k, v, causal=causal, layout=layout, out=out, return_lse=True,
                             score_mod=score_mod, mask_mod=mask_mod, scalars=scalars)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, variant, layout, scalars)
    assert got is out and not torch.isnan(out).any()
    err = (out.float() - ref).abs().max().item() / max(ref.abs().max().item(), 1e-6)
    assert err <= TOL, f"relative error {err:.3g} > {TOL}"
    blind = torch.isneginf(ref_lse)
    assert torch.equal(torch.isneginf(lse), blind)
    rows = out.transpose(1, 2) if layout == "bshd" else out
    assert (rows[blind] == 0).all()
    if (~blind).any():
        lerr = (lse[~blind] - ref_lse[~blind]).abs().max().item()
        assert lerr <= LSE_TOL, f"LSE error {lerr:.3g} > {LSE_TOL}"


def test_another_scalar_value_compiles_nothing():
    """softcap 30 and 50 (and windows 256 and 1024) run one kernel each: the traced graph is the kernel's identity."""
    assert traced("softcap30-causal")[0] == traced("softcap50-causal")[0]
    assert traced("window256-causal")[0] == traced("window1024-causal")[0]
    from warploom import kernels
    q, k, v = (torch.randn(1, 300, 2, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    score_mod, _, _, causal = VARIANTS["softcap30-causal"]
    a = ops.attention(q, k, v, causal=causal, score_mod=score_mod, scalars={"cap": 30.0})
    before = len(kernels._memo)
    c = ops.attention(q, k, v, causal=causal, score_mod=score_mod, scalars={"cap": 5.0})
    assert len(kernels._memo) == before and not torch.equal(a, c)


def test_captured_tensors_are_checked_before_launch():
    """A bias table too small for the problem's distances, one on the CPU, and one of another dtype: each refused
    with a message naming the tensor, before anything runs."""
    score_mod = VARIANTS["relative-bias"][0]
    q, k, v = (torch.randn(1, 200, 4, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    small = torch.zeros(4, 300, device="cuda")
    with pytest.raises(ValueError, match=r"'bias' \(shape \[4, 300\]\) is indexed along dimension 1"):
        ops.attention(q, k, v, score_mod=score_mod, scalars={"bias": small, "shift": 199})
    with pytest.raises(ValueError, match="cpu"):
        ops.attention(q, k, v, score_mod=score_mod, scalars={"bias": torch.zeros(4, 399), "shift": 199})
    with pytest.raises(ValueError, match="float64"):
        ops.attention(q, k, v, score_mod=score_mod, scalars={"bias": torch.zeros(4, 399, device="cuda",
                                                                                   dtype=torch.float64), "shift": 199})


def test_sorted_ids_are_checked_and_rechecked_after_an_in_place_write():
    """Document ids declared non-decreasing: block sparsity from their ends on the GPU (the same output as the ids
    undeclared, which walk every causal block), a tensor out of order refused before the launch, and one sorted at
    the first call then written out of order in place refused at the next (torch's version counter: a repeated call
    on the same tensors skips its checks only while the ids are unchanged)."""
    from warploom.score import nondecreasing
    mask_mod = VARIANTS["document-sorted-causal"][1]
    q, k, v = (torch.randn(1, 700, 2, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    ids = torch.repeat_interleave(torch.arange(4, device="cuda", dtype=torch.int32),
                                  torch.tensor([150, 300, 90, 160], device="cuda"))
    declared = ops.attention(q, k, v, causal=True, mask_mod=mask_mod, scalars={"doc_id": nondecreasing(ids)})
    plain = ops.attention(q, k, v, causal=True, mask_mod=mask_mod, scalars={"doc_id": ids})
    torch.cuda.synchronize()
    assert torch.equal(declared, plain)
    ids[400] = 0
    with pytest.raises(ValueError, match=r"doc_id\[399\] = 1 > doc_id\[400\] = 0"):
        ops.attention(q, k, v, causal=True, mask_mod=mask_mod, scalars={"doc_id": nondecreasing(ids)})
    bad = ids.flip(0).contiguous()
    with pytest.raises(ValueError, match="declared nondecreasing"):
        ops.attention(q, k, v, causal=True, mask_mod=mask_mod, scalars={"doc_id": nondecreasing(bad)})


def test_block_table_is_built_on_the_gpu_and_again_after_an_in_place_write():
    """A mask its bounds cannot follow (a per-head block pattern read at q_idx // 64, kv_idx // 64) walks the block
    table that ops.attention builds with torch on the GPU (warploom.score.table): the same table as numpy builds on
    the host, the float32 reference's output, and the pattern zeroed in place gives zero rows (torch's version
    counter: the table is built again, and a stale one's full blocks would be left unmasked)."""
    import numpy as np

    from warploom import ops_attention
    from warploom.score.table import build_table
    mask_mod = VARIANTS["block-sparse"][1]
    sq, sk, hq = 1000, 1300, 4
    scalars = gpu_scalars("block-sparse", sq, sk, hq)
    g = torch.Generator(device="cuda").manual_seed(3)
    q = torch.randn(1, sq, hq, 64, generator=g, device="cuda").to(torch.bfloat16)
    k, v = (torch.randn(1, sk, 2, 64, generator=g, device="cuda").to(torch.bfloat16) for _ in range(2))
    out = ops.attention(q, k, v, mask_mod=mask_mod, scalars=scalars)
    torch.cuda.synchronize()
    built = ops_attention.LAST_TABLE[0]
    mods = traced("block-sparse")[0]
    bm, bn = built.key[6], built.key[7]
    host = build_table(mods.mask, {"size": 64}, {"pattern": scalars["pattern"].cpu().numpy()}, sq, sk, bm, bn, 1, hq,
                       False)
    assert np.array_equal(built.tensor.cpu().numpy(), host)
    assert 0 < host[..., 0].sum() < host.shape[1] * host.shape[2] * (host.shape[3] - 1)     # some blocks skipped
    ref, _ = reference(q, k, v, "block-sparse", "bshd", scalars)
    err = (out.float() - ref).abs().max().item() / ref.abs().max().item()
    assert err <= TOL, f"relative error {err:.3g} > {TOL}"
    scalars["pattern"].zero_()
    again = ops.attention(q, k, v, mask_mod=mask_mod, scalars=scalars)
    torch.cuda.synchronize()
    assert ops_attention.LAST_TABLE[0] is not built and (again == 0).all()
