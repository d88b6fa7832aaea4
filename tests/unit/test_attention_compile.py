"""How an AttentionSpec compiles (CPU, MLIR): its graph, the long way to the same graph, the planning options, and
the spec read back from a planned program. The compile of the whole kernel needs the attention planning passes
and lowering; until they exist that test skips, saying so."""
import pytest

from tests.emulate.fa3_plan import planned_fa3
from warploom.build import (attention_graph, attention_long_way_graph, attention_planning_passes, attention_spec_of,
                              compile_attention, compile_attention_graph, planned_attention)
from warploom.kernels import STANDARD_ATTENTION_KERNELS, AttentionSpec
from warploom.passes import run_pipeline

SPECS = STANDARD_ATTENTION_KERNELS["sm_90a"]
GRAPH_PASSES = ["wl-verify", "wl-fuse", "wl-verify"]


def fused_ir(graph) -> str:
    _, records = run_pipeline(graph, GRAPH_PASSES)
    return records[-1].ir


PADDED = [s for s in SPECS if not s.varlen]    # packed sequences have no long way: no graph op holds cu_seqlens


@pytest.mark.parametrize("spec", PADDED, ids=[s.kernel_name for s in PADDED])
def test_long_way_fuses_to_the_spec_graph(spec):
    """matmul -> scale -> (causal_mask) -> softmax -> matmul becomes exactly the spec's wl.attention (same IR,
    so the same kernel program, the same cache key and the same kernel)."""
    ir = fused_ir(attention_graph(spec))
    assert ir == fused_ir(attention_long_way_graph(spec))
    assert ir.count('"wl.attention"') == 1 and "wl.softmax" not in ir
    assert f"causal = {'true' if spec.causal else 'false'}" in ir
    assert f"tensor<?x?x?x{spec.head_dim}x{spec.elem}>" in ir


def test_planning_options():
    passes = attention_planning_passes(AttentionSpec("bf16", 256, True))
    assert "wl-tile{block-n=80 schedule=grid}" in passes and "wl-pipeline{stages=2}" in passes
    assert passes[-1] == "wl-plan-barriers" and "wl-lower-sm90" not in passes
    assert "wl-tile{block-n=128 schedule=persistent}" in attention_planning_passes(AttentionSpec("f16", 64))
    assert "wl-specialize{overlap=true}" in attention_planning_passes(AttentionSpec("f16", 64))
    assert "wl-specialize{overlap=false}" in attention_planning_passes(AttentionSpec("f16", 64, overlap=False))


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_spec_of_the_contract_program(d, causal):
    """The planned FA3 program of tests/emulate/fa3_plan.py (the contract) reads back as the standard spec."""
    for elem in ("bf16", "f16"):
        for schedule in ("grid", "persistent"):
            assert attention_spec_of(planned_fa3(elem, d, causal, schedule=schedule)) == \
                AttentionSpec(elem, d, causal, schedule=schedule)
            assert attention_spec_of(planned_fa3(elem, d, causal, overlap=False, schedule=schedule)) == \
                AttentionSpec(elem, d, causal, overlap=False, schedule=schedule)


def _planned(spec):
    """The planning passes must make the one attention kernel: "made 0 kernels" is a failure, never a skip."""
    return planned_attention(attention_graph(spec), spec)


def test_passes_plan_the_contract_program():
    spec = AttentionSpec("bf16", 128, True)
    program, _ = _planned(spec)
    assert attention_spec_of(program) == spec


def test_long_way_compiles_to_the_same_kernel():
    """warploom.build on the graph written the long way gives the kernel ops.attention runs: same entry name,
    same PTX, same cache key (so the GPU test that launches the cached kernel by that name covers both)."""
    spec = AttentionSpec("bf16", 128, True)
    _planned(spec)
    ours = compile_attention(spec)
    long_way = compile_attention_graph(attention_long_way_graph(spec), spec)
    assert long_way.name == ours.name == "wl_attn_bf16_d128_128x128_s2_causal_ov_persistent_q2"
    assert long_way.ptx == ours.ptx and long_way.key == ours.key


def test_a_graph_that_is_not_the_spec_is_refused():
    spec = AttentionSpec("bf16", 128, True)
    _planned(spec)
    with pytest.raises(ValueError, match="not bf16 attention forward, head dim 128, causal"):
        planned_attention(attention_graph(AttentionSpec("bf16", 128, False)), spec)
