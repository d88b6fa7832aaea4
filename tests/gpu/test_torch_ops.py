"""torch.ops.warploom.*: the custom ops give what warploom.ops gives, eagerly and inside torch.compile (H200)."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

import warploom.torch  # noqa: E402,F401  (registers the ops)
from warploom import ops  # noqa: E402


def test_matmul_op_eager_and_compiled():
    torch.manual_seed(0)
    a = torch.randn(300, 520, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(520, 264, device="cuda", dtype=torch.bfloat16)
    want = ops.matmul(a, b)
    assert torch.equal(torch.ops.warploom.matmul(a, b), want)

    @torch.compile(fullgraph=True)
    def f(x, y):
        return torch.ops.warploom.matmul(x, y) * 2
    assert torch.equal(f(a, b), want * 2)


def test_attention_ops_eager_and_compiled():
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 4, 200, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    want, want_lse = ops.attention(q, k, v, causal=True, layout="bhsd", return_lse=True)
    assert torch.equal(torch.ops.warploom.attention(q, k, v, True, None, "bhsd"), want)
    out, lse = torch.ops.warploom.attention_lse(q, k, v, True, None, "bhsd")
    assert torch.equal(out, want) and torch.equal(lse, want_lse) and lse.shape == (2, 4, 200)

    @torch.compile(fullgraph=True)
    def f(a, b, c):
        return torch.ops.warploom.attention(a, b, c, True, None, "bhsd") + 1
    assert torch.equal(f(q, k, v), want + 1)


def test_attention_mod_op_names_its_variant_eager_and_compiled():
    """torch.ops.warploom.attention_mod: the modifiers named as `--variant` names them, the scalars as arguments: the
    same result as ops.attention with the functions, another cap value runs the same kernel, inside torch.compile."""
    from warploom.variants import softcap
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 1000, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    want = ops.attention(q, k, v, causal=True, score_mod=softcap, scalars={"cap": 50.0})
    got = torch.ops.warploom.attention_mod(q, k, v, "warploom.variants:softcap", ["cap"], [50.0], causal=True)
    assert torch.equal(got, want)

    @torch.compile(fullgraph=True)
    def f(a, b, c):
        return torch.ops.warploom.attention_mod(a, b, c, "warploom.variants:softcap", ["cap"], [50.0],
                                                causal=True) * 2
    assert torch.equal(f(q, k, v), want * 2)
    with pytest.raises(ValueError, match="has no parameter 'cup'"):
        torch.ops.warploom.attention_mod(q, k, v, "warploom.variants:softcap", ["cup"], [50.0], causal=True)


def test_attention_varlen_op_eager_and_compiled():
    torch.manual_seed(3)
    q, k, v = (torch.randn(1300, 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cu = torch.tensor([0, 1000, 1001, 1300], dtype=torch.int32, device="cuda")
    want = ops.attention_varlen(q, k, v, cu, cu, causal=True)
    assert torch.equal(torch.ops.warploom.attention_varlen(q, k, v, cu, cu, 1000, 1000, True), want)

    @torch.compile(fullgraph=True)
    def f(a, b, c, s):
        return torch.ops.warploom.attention_varlen(a, b, c, s, s, 1000, 1000, True) + 1
    assert torch.equal(f(q, k, v, cu), want + 1)


def test_cuda_graph_capture_and_replay():
    """Both ops captured into one CUDA graph (after a warm-up on a side stream, as torch asks) and replayed on new
    inputs copied into the captured tensors: the outputs equal eager calls on those inputs."""
    torch.manual_seed(2)
    a = torch.randn(300, 520, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(520, 264, device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(2, 4, 200, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))

    def step():
        return torch.ops.warploom.matmul(a, b), torch.ops.warploom.attention(q, k, v, True, None, "bhsd")

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        c, o = step()
    for trial in range(3):
        for x in (a, b, q, k, v):
            x.copy_(torch.randn_like(x))
        c.fill_(float("nan"))
        o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(c, ops.matmul(a, b)), trial
        assert torch.equal(o, ops.attention(q, k, v, causal=True, layout="bhsd")), trial


def test_repeated_matmul_takes_the_fast_path():
    """A repeated call on the same torch tensors launches the remembered kernel with a fresh C each time (or the
    given out=): bit for bit what the checked path gives, after the inputs changed in place."""
    torch.manual_seed(3)
    a = torch.randn(200, 136, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(136, 72, device="cuda", dtype=torch.bfloat16)
    c1 = ops.matmul(a, b)
    assert ops._torch_key(a, b, None) in ops._FAST
    c2 = ops.matmul(a, b)
    assert c2.data_ptr() != c1.data_ptr() and torch.equal(c1, c2)
    a.copy_(torch.randn_like(a))
    out = torch.empty(200, 72, device="cuda", dtype=torch.bfloat16)
    for got in (ops.matmul(a, b), ops.matmul(a, b, out=out), ops.matmul(a, b, out=out)):
        assert torch.equal(got, ops._gemm(a, b, None, None))          # the checked path, no fast-path key


def test_repeated_attention_takes_the_fast_path():
    """Repeated attention calls on the same torch tensors, without out= and with the LSE: the remembered launch with
    a fresh out (its tensor map re-pointed) and lse each time, bit for bit the checked path's results."""
    import warploom.ops_attention as oa
    torch.manual_seed(4)
    q, k, v = (torch.randn(2, 3, 150, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o1, l1 = ops.attention(q, k, v, causal=True, layout="bhsd", return_lse=True)
    assert oa.torch_call_key(q, k, v, None, True, None, "bhsd", True) in oa._FAST
    o2, l2 = ops.attention(q, k, v, causal=True, layout="bhsd", return_lse=True)
    assert o2.data_ptr() != o1.data_ptr() and torch.equal(o1, o2) and torch.equal(l1, l2)
    q.copy_(torch.randn_like(q))
    for _ in range(2):
        got = ops.attention(q, k, v, causal=True, layout="bhsd")
        oa._FAST.clear()                                   # the checked path, for the reference
        want = ops.attention(q, k, v, causal=True, layout="bhsd")
        assert torch.equal(got, want)
