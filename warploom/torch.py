"""PyTorch custom ops: `torch.ops.warploom.matmul`, `attention`, `attention_mod` and `attention_varlen`, usable
under torch.compile.

    import warploom.torch                                      # registers the ops (needs torch)
    c = torch.ops.warploom.matmul(a, b)                        # = warploom.ops.matmul(a, b)
    o = torch.ops.warploom.attention(q, k, v, True, None, "bhsd")
    o, lse = torch.ops.warploom.attention_lse(q, k, v, False, 0.125, "bshd")
    o = torch.ops.warploom.attention_mod(q, k, v, "warploom.variants:softcap", ["cap"], [50.0], causal=True)
    o = torch.ops.warploom.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=True)   # packed [T, H, D]

attention_mod names its modifiers as `warploom precompile --variant` does ("MODULE:FUNCTION" or
"MODULE:SCORE_FN+MASK_FN": functions at a module's top level, imported once), since an op's schema cannot carry a
Python function; the scalars' values (names, values; an i32 scalar's value is rounded to an int) and captured
tensors (tensor_names, tensors) are arguments, so another value runs the same kernel. Parameters a call leaves out
take the functions' defaults.

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
from warploom.score import nondecreasing

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
# list defaults other than numbers' are refused by torch's schema parser (torch 2.11: "lists are only supported for
# float, int and complex types"), so the name and tensor lists are optional, None for none
_lib.define("attention_mod(Tensor q, Tensor k, Tensor v, str variant, str[]? names=None, float[] values=[], "
            "str[]? tensor_names=None, Tensor[]? tensors=None, bool causal=False, float? scale=None, "
            "str layout='bshd') -> Tensor")
_lib.define("attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
            "int max_seqlen_q, int max_seqlen_k, bool causal=False, float? scale=None) -> Tensor")


def _matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B (bf16/f16 in and out, f32 accumulation): warploom.ops.matmul."""
    return ops.matmul(a, b)


def _attention(q, k, v, causal=False, scale=None, layout="bshd"):
    """softmax(q kᵀ · scale [+ causal]) v: warploom.ops.attention (layout "bshd" or "bhsd")."""
    return ops.attention(q, k, v, causal=causal, scale=scale, layout=layout)


def _attention_lse(q, k, v, causal=False, scale=None, layout="bshd"):
    """(out, lse): lse float32 [B, Hq, Sq], the natural log of each row's softmax denominator."""
    return ops.attention(q, k, v, causal=causal, scale=scale, layout=layout, return_lse=True)


_VARIANTS: dict = {}       # "MODULE:FUNCTION" -> warploom.variants.Variant, resolved once


def _variant(text: str):
    if text not in _VARIANTS:
        from warploom.variants import resolve
        if text == "standard":
            raise ValueError("warploom::attention_mod: name one variant, MODULE:FUNCTION or MODULE:SCORE_FN+MASK_FN "
                             "(e.g. warploom.variants:softcap), not 'standard'")
        (_VARIANTS[text],) = resolve(text)
    return _VARIANTS[text]


def _attention_mod(q, k, v, variant, names=(), values=(), tensor_names=(), tensors=(), causal=False, scale=None,
                   layout="bshd"):
    """ops.attention with the modifiers `variant` names; scalars from names/values and tensor_names/tensors, the
    rest at the functions' defaults."""
    var = _variant(variant)
    names, values, tensor_names, tensors = names or (), values or (), tensor_names or (), tensors or ()
    if len(names) != len(values) or len(tensor_names) != len(tensors):
        raise ValueError(f"warploom::attention_mod: {len(names)} names for {len(values)} values, {len(tensor_names)} "
                         f"tensor names for {len(tensors)} tensors: give one of each per scalar")
    defaults = var.scalars()
    unknown = sorted((set(names) | set(tensor_names)) - set(defaults))
    if unknown:
        raise ValueError(f"warploom::attention_mod: {variant} has no parameter {unknown[0]!r}; its scalars are "
                         f"{sorted(defaults)}")
    scalars = dict(defaults)
    for n, x in zip(names, values):       # the schema's floats: an i32 parameter (an int default) takes an int
        scalars[n] = round(x) if isinstance(defaults[n], int) and not isinstance(defaults[n], bool) else x
    for n, t in zip(tensor_names, tensors):    # ids the variant declares sorted are declared so here too
        scalars[n] = nondecreasing(t) if isinstance(defaults[n], nondecreasing) else t
    return ops.attention(q, k, v, causal=causal, scale=scale, layout=layout, score_mod=var.score_mod,
                         mask_mod=var.mask_mod, scalars=scalars)


def _attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None):
    """warploom.ops.attention_varlen: packed sequences q [Tq, Hq, D], k, v [Tk, Hkv, D]."""
    return ops.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
                                scale=scale)


for _name, _fn in (("matmul", _matmul), ("attention", _attention), ("attention_lse", _attention_lse),
                   ("attention_mod", _attention_mod), ("attention_varlen", _attention_varlen)):
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


@torch.library.register_fake(f"{LIB}::attention_mod")
def _attention_mod_fake(q, k, v, variant, names=(), values=(), tensor_names=(), tensors=(), causal=False, scale=None,
                        layout="bshd"):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


@torch.library.register_fake(f"{LIB}::attention_varlen")
def _attention_varlen_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None):
    torch._check(q.dim() == 3, lambda: "warploom::attention_varlen takes packed q [Tq, Hq, D]")
    return torch.empty_like(q, memory_format=torch.contiguous_format)


matmul = torch.ops.warploom.matmul
attention = torch.ops.warploom.attention
attention_lse = torch.ops.warploom.attention_lse
attention_mod = torch.ops.warploom.attention_mod
attention_varlen = torch.ops.warploom.attention_varlen
