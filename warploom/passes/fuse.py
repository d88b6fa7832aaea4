"""wl-fuse: rewrite matmul -> (scale) -> (causal_mask) -> softmax -> matmul into one wl.attention.

The chain is fused only when it is exactly attention over rank-4 [B, H, S, D]
tensors: the first matmul contracts q with k transposed (transpose_b), the
softmax runs over the last (key) axis, every intermediate has one use, the
second matmul takes the probabilities as its left operand, and a scale is
positive (so it commutes with the mask). Anything else is left alone.
"""
from __future__ import annotations

from mlir import ir

from warploom.dialect import make_attr, op_attrs, op_kind, tensor_type

from .registry import register


def single_user(value: ir.Value):
    """The one op using `value`, or None if it has zero or several uses."""
    uses = list(value.uses)
    return uses[0].owner if len(uses) == 1 else None


def defining(value: ir.Value, kind: str):
    owner = value.owner
    if isinstance(owner, ir.Block) or op_kind(owner) != kind:
        return None
    return owner


def match_attention(softmax):
    """Return (scores_matmul, [ops between scores and softmax], mask_op, pv_matmul, scale) for an attention chain."""
    rank = ir.RankedTensorType(softmax.operation.results[0].type).rank
    if rank != 4 or op_attrs(softmax)["axis"] not in (-1, rank - 1):
        return None
    pv = single_user(softmax.operation.results[0])
    if pv is None or op_kind(pv) != "matmul" or pv.operation.operands[0] != softmax.operation.results[0]:
        return None
    if op_attrs(pv)["transpose_a"] or op_attrs(pv)["transpose_b"]:
        return None

    chain = {"scale": None, "causal_mask": None}
    walked = []   # the ops between the scores and the softmax, downstream first
    value = softmax.operation.operands[0]
    while True:   # walk up through at most one scale and one mask, in either order
        owner = value.owner
        kind = None if isinstance(owner, ir.Block) else op_kind(owner)
        if kind not in chain or chain[kind] is not None or single_user(value) is None:
            break
        chain[kind] = owner
        walked.append(owner)
        value = owner.operation.operands[0]
    qk = defining(value, "matmul")
    if qk is None or single_user(value) is None:
        return None
    attrs = op_attrs(qk)
    if attrs["transpose_a"] or not attrs["transpose_b"]:
        return None
    scale = op_attrs(chain["scale"])["factor"] if chain["scale"] is not None else 1.0
    if scale <= 0:
        return None
    # attention computes in the inputs' element type end to end: a chain that widens
    # (bf16 scores -> f32 probabilities) is a different computation, left alone
    elems = {tensor_type(op.operation.results[0].type).elem for op in (qk, *walked, softmax, pv)}
    elems |= {tensor_type(v.type).elem for v in (*qk.operation.operands, pv.operation.operands[1])}
    if len(elems) != 1:
        return None
    return qk, walked, chain["causal_mask"], pv, scale


def fuse_one(softmax) -> bool:
    found = match_attention(softmax)
    if found is None:
        return False
    qk, walked, mask_op, pv, scale = found
    q, k = qk.operation.operands
    v = pv.operation.operands[1]
    chain = [qk, *reversed(walked), softmax, pv]      # in IR order, so erasing it backwards erases users first
    with ir.InsertionPoint(pv), ir.Location.fused([op.operation.location for op in chain]):
        attention = ir.Operation.create(
            "wl.attention", results=[pv.operation.results[0].type], operands=[q, k, v],
            attributes={"causal": make_attr("bool", mask_op is not None), "scale": make_attr("float", scale),
                        "layout": make_attr("str", "bhsd")})
    pv.operation.results[0].replace_all_uses_with(attention.results[0])
    for op in reversed(chain):
        op.operation.erase()
    return True


@register("wl-fuse", "Fuse matmul -> scale -> causal_mask -> softmax -> matmul into wl.attention")
def run(module):
    softmaxes = []

    def collect(op):
        if op_kind(op) == "softmax":
            softmaxes.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(collect)
    for softmax in softmaxes:
        fuse_one(softmax)
