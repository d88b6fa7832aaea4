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
