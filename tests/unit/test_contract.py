"""The kernel contract (warploom/kernel/contract.py): each fact written once, and the compiled kernels keep it."""
import pytest

from warploom.kernel import contract
from warploom.kernel.contract import (ATTENTION_CAUSAL_PERSISTENT_PARAMS, ATTENTION_PARAMS, ATTENTION_PERSISTENT_PARAMS,
                                      ATTENTION_STREAMK_PARAMS, AttentionSpec, GemmSpec)


def test_gemm_params_follow_the_epilogue_and_the_schedule():
    base = (("a", "tensormap"), ("b", "tensormap"))
    sizes = (("M", "i32"), ("N", "i32"), ("K", "i32"))
    assert GemmSpec().params == base + (("c", "tensormap"),) + sizes
    assert GemmSpec(epilogue="direct").params == base + (("c", "ptr"),) + sizes
    assert GemmSpec(schedule="streamk").params == base + (("c", "tensormap"), ("workspace", "ptr"),
                                                          ("counters", "ptr")) + sizes


def test_attention_params_by_schedule():
    assert AttentionSpec("bf16", 256).params == ATTENTION_PARAMS                  # grid
    assert AttentionSpec("bf16", 128).params == ATTENTION_PERSISTENT_PARAMS       # persistent
    assert AttentionSpec("bf16", 128, True).params == ATTENTION_CAUSAL_PERSISTENT_PARAMS
    assert AttentionSpec("bf16", 128, schedule="streamk").params == ATTENTION_STREAMK_PARAMS
    assert ATTENTION_STREAMK_PARAMS[-2:] == tuple((n, "ptr") for n in contract.STREAMK_PARAMS)


def test_defaults_are_the_contracts():
    """GemmSpec, wl-tile and wl-pipeline take their defaults from the contract (one number each)."""
    import inspect

    from warploom.passes import pipeline, tile
    spec = GemmSpec()
    assert (spec.block_m, spec.block_n, spec.block_k, spec.stages) == (
        contract.GEMM_BLOCK_M, contract.GEMM_BLOCK_N, contract.GEMM_BLOCK_K, contract.GEMM_STAGES)
    assert inspect.signature(tile.run).parameters["block_k"].default == contract.GEMM_BLOCK_K
    assert pipeline.DEFAULT_STAGES == {"gemm": contract.GEMM_STAGES, "attention": contract.ATTENTION_STAGES}
    assert AttentionSpec().stages == contract.default_attention_stages() == contract.ATTENTION_STAGES
    assert contract.default_attention_stages(shared_kv=True) == contract.FA4_SHARED_KV_SLOTS


@pytest.mark.parametrize("spec", [GemmSpec(block_n=128), GemmSpec(block_n=128, epilogue="direct"),
                                  GemmSpec(block_n=128, schedule="streamk"),
                                  GemmSpec(block_n=128, target="sm_100a", schedule="persistent")],
                         ids=lambda s: s.kernel_name)
def test_compiled_gemms_keep_the_contract(spec):
    """The lowering's parameter list, name and launch order, is the contract's (ops.matmul packs by it)."""
    from warploom.build import compile_gemm
    artifact = compile_gemm(spec)
    assert artifact.name == spec.kernel_name
    assert tuple((p.name, p.kind) for p in artifact.params) == spec.params


@pytest.mark.parametrize("spec", [AttentionSpec("bf16", 64, True), AttentionSpec("f16", 64, target="sm_100a")],
                         ids=lambda s: s.kernel_name)
def test_compiled_attention_keeps_the_contract(spec):
    from warploom.build import compile_attention
    contract.check_attention_artifact(compile_attention(spec), spec)      # name, parameters, tensor maps
