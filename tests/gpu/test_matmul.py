"""warploom.ops.matmul on the GPU against torch in float32: random inputs, poisoned outputs, odd sizes.

Run on the H200 from an AOT cache built on a CPU host:
    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python -m pytest -m gpu tests/gpu
"""
import itertools

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from warploom import ops  # noqa: E402

SIZES = (1, 17, 127, 1000, 4096, 8192)
TOL = 1e-2


def rel_fro(out, ref):
    return (torch.linalg.norm(out.float() - ref) / torch.linalg.norm(ref)).item()


def shapes():
    """Mixed combinations from SIZES, skipping the ones over ~2^33 MACs to keep the run short."""
    picked = []
    for m, n, k in itertools.product(SIZES, repeat=3):
        if m * n * k <= 8192 * 8192 * 1024 and (m, n, k) not in picked:
            picked.append((m, n, k))
    # keep every size in every position, thin the rest deterministically
    extra = [(8192, 8192, 8192), (4096, 4096, 4096), (1, 1, 1), (17, 127, 1000)]
    return [s for s in picked[::3] if s not in extra] + extra


def run_case(m, n, k, dtype, transposed_b, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    if transposed_b:
        w = torch.randn(n, k, device="cuda", dtype=dtype, generator=g)
        b = w.t()                                  # the nn.Linear weight case: a view, no copy
    else:
        b = torch.randn(k, n, device="cuda", dtype=dtype, generator=g)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)   # poison: every element must be written
    got = ops.matmul(a, b, out=out)
    ref = a.float() @ b.float()
    torch.cuda.synchronize()
    assert got.data_ptr() == out.data_ptr()
    assert not torch.isnan(got).any(), f"unwritten or NaN outputs for {m}x{n}x{k}"
    return rel_fro(got, ref)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("m,n,k", shapes())
def test_matmul_matches_torch_fp32(m, n, k, dtype):
    err = run_case(m, n, k, dtype, transposed_b=False, seed=m * 7 + n * 13 + k)
    assert err <= TOL, f"{m}x{n}x{k}: relative Frobenius error {err:.2e}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("m,n,k", [(1000, 4096, 1000), (17, 127, 4096), (4096, 1000, 127), (8192, 4096, 4096), (1, 17, 1)])
def test_matmul_transposed_weight(m, n, k, dtype):
    err = run_case(m, n, k, dtype, transposed_b=True, seed=k)
    assert err <= TOL, f"{m}x{n}x{k} (b = w.t()): relative Frobenius error {err:.2e}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("m,n,k,transposed", [(8192, 8192, 1024, False), (1000, 1000, 1000, True), (17, 4096, 127, False),
                                              (4096, 17, 8192, True), (1, 1, 1, False), (2000, 3000, 520, False)])
def test_persistent_schedule(m, n, k, transposed, dtype, monkeypatch):
    monkeypatch.setattr(ops, "SCHEDULE", "persistent")
    err = run_case(m, n, k, dtype, transposed_b=transposed, seed=m + n + k)
    assert err <= TOL, f"persistent {m}x{n}x{k}: relative Frobenius error {err:.2e}"


@pytest.mark.parametrize("m,n,k,transposed", [(8192, 8192, 1024, False), (1000, 1000, 1000, True), (4096, 17, 8192, True)])
def test_grid_schedule(m, n, k, transposed, monkeypatch):
    monkeypatch.setattr(ops, "SCHEDULE", "grid")
    err = run_case(m, n, k, torch.bfloat16, transposed_b=transposed, seed=m + n + k)
    assert err <= TOL, f"grid {m}x{n}x{k}: relative Frobenius error {err:.2e}"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("m,n,k,transposed", [(3000, 5000, 1000, False), (128, 8192, 8192, True), (1, 4096, 4096, False),
                                              (17, 4096, 127, True), (1, 1, 1, False), (2000, 3000, 520, True),
                                              (300, 392, 8200, False)])
def test_streamk_schedule(m, n, k, transposed, dtype, monkeypatch):
    """ops under SCHEDULE = "streamk" (the 64-row tiles for M <= 64): ragged sizes, tiles of one to dozens of pieces;
    three calls on the same inputs give the same bits (the pieces are summed in K order, whoever finishes last; the
    counters are back at zero after each launch)."""
    monkeypatch.setattr(ops, "SCHEDULE", "streamk")
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    b = (torch.randn(n, k, device="cuda", dtype=dtype, generator=g).t() if transposed
         else torch.randn(k, n, device="cuda", dtype=dtype, generator=g))
    ref = a.float() @ b.float()
    got = []
    for _ in range(3):
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        got.append(ops.matmul(a, b, out=out))
    torch.cuda.synchronize()
    assert not torch.isnan(got[0]).any(), f"streamk {m}x{n}x{k}: unwritten outputs"
    assert rel_fro(got[0], ref) <= TOL
    for c in got[1:]:
        assert torch.equal(c.view(torch.int16), got[0].view(torch.int16)), f"streamk {m}x{n}x{k}: results differ"


def _streamk_kernels():
    from warploom import tuning
    return [s for s in tuning.all_candidates() if s.schedule == "streamk"]


@pytest.mark.parametrize("spec", _streamk_kernels(), ids=lambda s: s.kernel_name)
def test_every_streamk_kernel(spec):
    """Each stream-K kernel by name, at a ragged size whose tiles split into many pieces on 132 SMs (few tiles,
    K = 8200), C poisoned; twice, the same bits."""
    from warploom.kernels import get_kernel
    dtype = torch.bfloat16 if spec.elem == "bf16" else torch.float16
    m, n, k = (45, 392, 8200) if spec.block_m == 64 else (300, 392, 8200)
    g = torch.Generator(device="cuda").manual_seed(spec.block_n)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    b = (torch.randn(n, k, device="cuda", dtype=dtype, generator=g).t() if spec.b_layout == "nk"
         else torch.randn(k, n, device="cuda", dtype=dtype, generator=g))
    outs = []
    for _ in range(2):
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        outs.append(ops.run_gemm(get_kernel(spec), a, b, out=out))
    torch.cuda.synchronize()
    assert not torch.isnan(outs[0]).any(), f"{spec.kernel_name}: unwritten outputs"
    assert rel_fro(outs[0], a.float() @ b.float()) <= TOL
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))


def _cluster_kernels():
    from warploom.kernels import CLUSTER_KERNELS
    return CLUSTER_KERNELS["sm_90a"]


@pytest.mark.parametrize("m, n, k", [(300, 392, 1000), (1000, 2056, 520), (4100, 4000, 136)])
@pytest.mark.parametrize("spec", _cluster_kernels(), ids=lambda s: s.kernel_name)
def test_every_cluster_kernel(spec, m, n, k):
    """Each 2x1-cluster kernel (B multicast) by name on ragged sizes: an odd count of 128-row tiles (the cluster's
    second CTA has no rows), ragged N and K, more tiles than the co-resident clusters take at once (4100x4000);
    C poisoned, twice, the same bits; every launch takes only clusters that fit (cluster_slots)."""
    from warploom.kernels import get_kernel
    from warploom.runtime.launch import default_launcher, sm_count
    dtype = torch.bfloat16 if spec.elem == "bf16" else torch.float16
    g = torch.Generator(device="cuda").manual_seed(spec.block_n + m)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    b = (torch.randn(n, k, device="cuda", dtype=dtype, generator=g).t() if spec.b_layout == "nk"
         else torch.randn(k, n, device="cuda", dtype=dtype, generator=g))
    art = get_kernel(spec)
    slots = default_launcher().cluster_slots(art, 0)
    assert 2 <= slots <= sm_count(0) and slots % 2 == 0
    outs = []
    for _ in range(2):
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        outs.append(ops.run_gemm(art, a, b, out=out))
    torch.cuda.synchronize()
    assert not torch.isnan(outs[0]).any(), f"{spec.kernel_name}: unwritten outputs"
    assert rel_fro(outs[0], a.float() @ b.float()) <= TOL
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))


@pytest.mark.parametrize("m, n, k", [(1100, 2056, 264), (4100, 4000, 136)])
@pytest.mark.parametrize("group", [4, 8])
@pytest.mark.parametrize("layout", ["kn", "nk"])
def test_banded_walk_gives_the_same_bits(layout, group, m, n, k):
    """The 2x1-cluster 128 x 256 kernel walking its tiles in bands (tests/gpu/extra_kernels.py GROUPS) computes each
    tile as the row-by-row walk does: the same bits, on ragged sizes with a last band of fewer rows and more tiles
    than the clusters take at once; C poisoned."""
    from warploom.kernels import GemmSpec, get_kernel
    g = torch.Generator(device="cuda").manual_seed(group + m)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    b = (torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g).t() if layout == "nk"
         else torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=g))
    outs = []
    for group_m in (1, group):
        spec = GemmSpec("bf16", layout, 256, 4, "sm_90a", "persistent", cluster_m=2, group_m=group_m)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        outs.append(ops.run_gemm(get_kernel(spec), a, b, out=out))
    torch.cuda.synchronize()
    assert not torch.isnan(outs[1]).any(), "unwritten outputs"
    assert rel_fro(outs[1], a.float() @ b.float()) <= TOL
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))


def test_unknown_schedule_is_refused(monkeypatch):
    monkeypatch.setattr(ops, "SCHEDULE", "zigzag")
    a = torch.randn(4, 8, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="SCHEDULE = 'zigzag'"):
        ops.matmul(a, a.t().contiguous())


def test_repeated_calls_on_padded_operands_stay_correct():
    """The slower (padded) path copies operands into fresh buffers each call: a second call with the same
    shapes, whose tensors may reuse the same addresses, must not reuse a launch that pointed at old copies."""
    for seed in range(3):
        g = torch.Generator(device="cuda").manual_seed(seed)
        a = torch.randn(17, 1000, device="cuda", dtype=torch.bfloat16, generator=g)
        b = torch.randn(1000, 127, device="cuda", dtype=torch.bfloat16, generator=g)      # N % 8 != 0: padded b
        out = torch.full((17, 127), float("nan"), device="cuda", dtype=torch.bfloat16)
        got = ops.matmul(a, b, out=out)
        assert rel_fro(got, a.float() @ b.float()) <= TOL


def test_repeated_calls_on_the_same_tensors_see_new_values():
    a = torch.randn(300, 200, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(200, 256, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(300, 256, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a.normal_()
        b.normal_()
        assert rel_fro(ops.matmul(a, b, out=out), a.float() @ b.float()) <= TOL


def test_default_out_is_torch_on_current_stream():
    a = torch.randn(300, 200, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(200, 100, device="cuda", dtype=torch.bfloat16)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c = ops.matmul(a, b)
    s.synchronize()
    assert isinstance(c, torch.Tensor) and c.shape == (300, 100) and c.dtype == torch.bfloat16
    assert rel_fro(c, a.float() @ b.float()) <= TOL


def test_non_contiguous_inputs_take_the_copy_path():
    a = torch.randn(256, 512, device="cuda", dtype=torch.float16)[:, ::2]     # strides (512, 2)
    b = torch.randn(256, 300, device="cuda", dtype=torch.float16)
    assert rel_fro(ops.matmul(a, b), a.float() @ b.float()) <= TOL


@pytest.mark.parametrize("make, error, text", [
    (lambda: (torch.randn(4, 8, dtype=torch.bfloat16), torch.randn(8, 4, dtype=torch.bfloat16)), ValueError, "cpu"),
    (lambda: (torch.randn(4, 8, device="cuda", dtype=torch.bfloat16),
              torch.randn(9, 4, device="cuda", dtype=torch.bfloat16)), ValueError, "K = 8 vs 9"),
    (lambda: (torch.randn(4, 8, device="cuda"), torch.randn(8, 4, device="cuda")), TypeError, "f32"),
    (lambda: (torch.randn(2, 4, 8, device="cuda", dtype=torch.bfloat16),
              torch.randn(8, 4, device="cuda", dtype=torch.bfloat16)), ValueError, "2-D"),
    (lambda: (torch.randn(4, 8, device="cuda", dtype=torch.bfloat16),
              torch.randn(8, 4, device="cuda", dtype=torch.float16)), TypeError, "cast one"),
])
def test_bad_input_is_refused_before_launch(make, error, text):
    a, b = make()
    with pytest.raises(error, match=text):
        ops.matmul(a, b)


def _every_sm90_kernel():
    from warploom.kernels import STANDARD_KERNELS
    from tests.gpu.extra_kernels import extra_gemm_specs
    return list(STANDARD_KERNELS["sm_90a"]) + extra_gemm_specs()


@pytest.mark.parametrize("spec", _every_sm90_kernel(), ids=lambda s: s.kernel_name)
def test_every_sm90_gemm_kernel(spec):
    """Each standard sm_90a GEMM kernel (and each kernel the benchmark runs beside them: the direct-epilogue twins),
    called by name at a ragged size with several tiles a side, C poisoned: every element written, and right."""
    from warploom.kernels import get_kernel
    dtype = torch.bfloat16 if spec.elem == "bf16" else torch.float16
    m, n, k = 300, 392, 328          # 3-5 row tiles, 2-7 column tiles, 5 k-tiles + a tail
    g = torch.Generator(device="cuda").manual_seed(m + spec.block_n)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    b = (torch.randn(n, k, device="cuda", dtype=dtype, generator=g).t() if spec.b_layout == "nk"
         else torch.randn(k, n, device="cuda", dtype=dtype, generator=g))
    out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    got = ops.run_gemm(get_kernel(spec), a, b, out=out)
    torch.cuda.synchronize()
    assert not torch.isnan(got).any(), f"{spec.kernel_name}: unwritten outputs"
    assert rel_fro(got, a.float() @ b.float()) <= TOL


def _swap_kernels():
    from warploom.kernels import SWAP_KERNELS
    return SWAP_KERNELS["sm_90a"]


@pytest.mark.parametrize("m, n, k", [(1, 392, 328), (5, 200, 4100), (16, 4096, 136), (19, 1000, 520)])
@pytest.mark.parametrize("spec", _swap_kernels(), ids=lambda s: s.kernel_name)
def test_swap_ab_kernel_gives_the_bits_of_the_64_row_kernel(spec, m, n, k):
    """Each swap-AB kernel (C^T = B^T A^T: B's tile as the wgmma's A, MN-major for B [K, N]; C stored transposed from
    registers) on ragged decode sizes (M below, at and above its block-m; N and K off the tile), C poisoned: every
    element written, right against float32, and the same bits as the standard 64 x 64 grid kernel's (the emulator gives them
    the same bits: each element is summed over K in the same k16 steps)."""
    from warploom.kernels import SMALL_M_STAGES, GemmSpec, get_kernel
    dtype = torch.bfloat16 if spec.elem == "bf16" else torch.float16
    g = torch.Generator(device="cuda").manual_seed(m + n + spec.block_m)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    b = (torch.randn(n, k, device="cuda", dtype=dtype, generator=g).t() if spec.b_layout == "nk"
         else torch.randn(k, n, device="cuda", dtype=dtype, generator=g))
    outs = []
    for s in (spec, GemmSpec(spec.elem, spec.b_layout, 64, SMALL_M_STAGES, "sm_90a", "grid", 64)):
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        outs.append(ops.run_gemm(get_kernel(s), a, b, out=out))
    torch.cuda.synchronize()
    assert not torch.isnan(outs[0]).any(), f"{spec.kernel_name}: unwritten outputs"
    assert rel_fro(outs[0], a.float() @ b.float()) <= TOL
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
