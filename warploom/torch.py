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

# Registered through torch.library.Library (the dispatcher calls the Python kernel directly) rather than the
# @torch.library.custom_op decorator, whose wrapper costs about 12 µs more a call on the H200 (benchmarks/NOTES.md,
# host overhead): forward-only ops need none of what it adds.
_lib = torch.library.Library(LIB, "DEF")
_lib.define("matmul(Tensor a, Tensor b) -> Tensor")
_lib.define("attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, str layout='bshd') "
            "-> Tensor")
_lib.define("attention_lse(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, "
            "str layout='bshd') -> (Tensor, Tensor)")


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B (bf16/f16 in and out, f32 accumulation): warploom.ops.matmul."""
    return ops.matmul(a, b)


def _attention(q, k, v, causal=False, scale=None, layout="bshd"):
    """softmax(q kᵀ · scale [+ causal]) v: warploom.ops.attention (layout "bshd" or "bhsd")."""
    return ops.attention(q, k, v, causal=causal, scale=scale, layout=layout)


def _attention_lse(q, k, v, causal=False, scale=None, layout="bshd"):
    """(out, lse): lse float32 [B, Hq, Sq], the natural log of each row's softmax denominator."""
    return ops.attention(q, k, v, causal=causal, scale=scale, layout=layout, return_lse=True)


for _name, _fn in (("matmul", _matmul), ("attention", _attention), ("attention_lse", _attention_lse)):
    _lib.impl(_name, _fn, "CUDA")


@torch.library.register_fake(f"{LIB}::matmul")
def _matmul_fake(a, b):
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "warploom::matmul takes 2-D a [M, K] and b [K, N]")
    torch._check(a.shape[1] == b.shape[0], lambda: f"warploom::matmul: a is {list(a.shape)}, b {list(b.shape)}")
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.register_fake(f"{LIB}::attention")
def _attention_fake(q, k, v, causal=False, scale=None, layout="bshd"):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


@torch.library.register_fake(f"{LIB}::attention_lse")
def _attention_lse_fake(q, k, v, causal=False, scale=None, layout="bshd"):
    b, s, h = (q.shape[0], q.shape[1], q.shape[2]) if layout == "bshd" else (q.shape[0], q.shape[2], q.shape[1])
    return (torch.empty_like(q, memory_format=torch.contiguous_format),
            q.new_empty((b, h, s), dtype=torch.float32))


matmul = torch.ops.warploom.matmul
attention = torch.ops.warploom.attention
attention_lse = torch.ops.warploom.attention_lse
