"""Attentions written out with score and mask ops (tests/longform.py), fused by wl-fuse, compiled for both targets
and emulated, against the float64 interpreter of the graph as written (never through warploom.score: the
interpreter runs the graph ops themselves). Sq != Sk, ragged sizes, GQA and MQA written out (k and v's heads
repeated); the captured tensors and scalars are the call's.
The sm_100a kernels have never run on hardware here: this, ptxas and the SASS checks are how they are verified."""
import numpy as np
import pytest

from tests import longform
from warploom.build import attention_spec_of, compile_graph
from warploom.emulate import emulate_attention
from warploom.emulate.judge import judge_attention
from warploom.reference.interpret import evaluate
from warploom.reference.ops import round_to

# (target, variant, elem, B, H, Hkv, Sq, Sk, D): Hkv < H writes grouped-query attention out (k and v's heads
# repeated, wl.repeat), which wl-fuse gives the attention as its kv heads
CASES = [
    ("sm_90a", "softcap", "bf16", 1, 4, 2, 70, 140, 64),
    ("sm_90a", "bias-documents", "f16", 2, 2, 2, 100, 90, 64),
    ("sm_100a", "alibi-window", "bf16", 1, 4, 2, 70, 140, 64),
    ("sm_100a", "prefix-lm", "f16", 2, 2, 1, 90, 130, 64),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{t}-{n}-{e}-h{h}/{hkv}-{sq}x{sk}"
                                             for t, n, e, _, h, hkv, sq, sk, _ in CASES])
def test_a_fused_long_form_attention_computes_its_graph(case):
    target, name, elem, bsz, heads, kv_heads, sq, sk, d = case
    graph = longform.graph(name, elem, bsz, heads, sq, sk, d, kv_heads=kv_heads)
    kernel = compile_graph(graph, target)
    spec = attention_spec_of(kernel.program, target)
    assert spec.mods, "wl-fuse left the attention unfused"
    rng = np.random.default_rng(sq + sk)
    q, k, v = (round_to(rng.standard_normal((bsz, h, s, d)) * sc, elem)
               for h, s, sc in ((heads, sq, 1.5), (kv_heads, sk, 1.5), (kv_heads, sk, 1.0)))
    values = longform.values(name, bsz, sq, sk, heads, rng)
    out, _ = emulate_attention(q, k, v, causal=spec.causal, scale=kernel.graph_attrs["scale"], layout="bhsd",
                               program=kernel.program, scalars=values)
    tensors = {n: x for n, x in values.items() if isinstance(x, np.ndarray)}
    scalars = {n: x for n, x in values.items() if n not in tensors}
    ref = evaluate(graph.module, {"q": q, "k": k, "v": v, **tensors}, scalars=scalars)[0]
    verdict = judge_attention(out, None, q, k, v, elem, spec.causal, "bhsd", reference=ref)
    assert verdict.ok, verdict.problem
