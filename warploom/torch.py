"""PyTorch custom ops: `torch.ops.warploom.matmul` and `torch.ops.warploom.attention`, usable under torch.compile.

    import warploom.torch                                      # registers the ops (needs torch)
    c = torch.ops.warploom.matmul(a, b)                        # = warploom.ops.matmul(a, b)
    o = torch.ops.warploom.attention(q, k, v, True, None, "bhsd")
    o, lse = torch.ops.warploom.attention_lse(q, k, v, False, 0.125, "bshd")

Each op runs the warploom kernel (warploom.ops) on the tensors' GPU and current stream; its fake (meta) function
gives torch.compile the output's shape, dtype and device without running anything, so a compiled graph keeps the
op as one node. Forward only: the ops have no autograd formula yet (backward raises torch's own error).
"""
from __future__ import annotations

try:
    import torch
except ImportError:
    raise ImportError("warploom.torch registers PyTorch custom ops and needs torch: pip install torch "
                      "(warploom.ops works on any framework's CUDA tensors without it)") from None

from warploom import ops

LIB = "warploom"


@torch.library.custom_op(f"{LIB}::matmul", mutates_args=())
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B (bf16/f16 in and out, f32 accumulation): warploom.ops.matmul."""
    return ops.matmul(a, b)


@matmul.register_fake
def _matmul_fake(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "warploom::matmul takes 2-D a [M, K] and b [K, N]")
    torch._check(a.shape[1] == b.shape[0], lambda: f"warploom::matmul: a is {list(a.shape)}, b {list(b.shape)}")
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.custom_op(f"{LIB}::attention", mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None,
              layout: str = "bshd") -> torch.Tensor:
    """softmax(q kᵀ · scale [+ causal]) v: warploom.ops.attention (layout "bshd" or "bhsd")."""
    return ops.attention(q, k, v, causal=causal, scale=scale, layout=layout)


@attention.register_fake
def _attention_fake(q, k, v, causal=False, scale=None, layout="bshd"):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


@torch.library.custom_op(f"{LIB}::attention_lse", mutates_args=())
def attention_lse(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                  scale: float | None = None, layout: str = "bshd") -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse): lse float32 [B, Hq, Sq], the natural log of each row's softmax denominator."""
    return ops.attention(q, k, v, causal=causal, scale=scale, layout=layout, return_lse=True)


@attention_lse.register_fake
def _attention_lse_fake(q, k, v, causal=False, scale=None, layout="bshd"):
    b, s, h = (q.shape[0], q.shape[1], q.shape[2]) if layout == "bshd" else (q.shape[0], q.shape[2], q.shape[1])
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            q.new_empty((b, h, s), dtype=torch.float32))
