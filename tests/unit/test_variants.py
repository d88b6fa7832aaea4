"""warploom.variants and `warploom precompile --variant`: which kernels a variant names, the refusals, and the
missing-kernel error that names the command building a call's modifiers (no compiling here)."""
from __future__ import annotations

import pytest

from warploom.kernels import MissingKernelError
from warploom.tools.cli import main, precompile_specs
from warploom.variants import STANDARD, resolve, variant_name


def window_without_default(b, h, q_idx, kv_idx, size):
    return q_idx - kv_idx <= size


def test_standard_variants_build_each_dtype_head_dim_and_causal_flag():
    specs = [s for s in precompile_specs("sm_90a", "attention", False, resolve("standard")) if s.mods]
    # bf16/f16 x head dims 64, 128, 256, each for ops.attention and ops.attention_varlen
    per_variant = {v.name: 2 * 3 * len(v.causal) * 2 for v in STANDARD}
    assert len(specs) == sum(per_variant.values()) == 96 and sum(s.varlen for s in specs) == 48
    docs = [s for s in specs if s.mods.sorted]          # the document variant: ids declared sorted, causal
    assert len(docs) == 12 and all(s.causal and s.mods.sorted == ("doc_id",) for s in docs)
    window = [s for s in specs if s.mods.mask is not None and "size" in dict(s.mods.scalars)
              and s.mods.mask.text.count("le") == 1]
    assert window and all(s.causal for s in window)
    assert {s.mods.scalars for s in specs if s.mods.score is not None} >= {(("cap", "f32"),), (("heads", "i32"),)}


def test_a_module_function_pair_is_one_kernel_per_shape():
    (v,) = resolve("warploom.variants:softcap+sliding_window")
    assert v.score_mod.__name__ == "softcap" and v.mask_mod.__name__ == "sliding_window"
    assert v.scalars() == {"cap": 30.0, "size": 1024}
    specs = [s for s in precompile_specs("sm_100a", "attention", False, [v]) if s.mods]
    assert len(specs) == 2 * 2 * 2 * 2 and all(s.kernel_name.startswith("wl_fa4_") for s in specs)


@pytest.mark.parametrize("text, message", [
    ("nomodule_here:fn", "cannot import 'nomodule_here'"),
    ("warploom.variants:nothere", "has no function 'nothere'"),
    ("justaname", "use 'standard' or MODULE:FUNCTION"),
    ("warploom.variants:softcap+alibi", "two score modifiers"),
    ("tests.unit.test_variants:window_without_default", "parameter 'size' of window_without_default has no default"),
])
def test_bad_variants_are_refused_with_the_way_out(text, message, capsys):
    assert main(["precompile", "--cache", "/tmp/wl-variant-refused", "--variant", text]) == 2
    assert message in capsys.readouterr().err


def test_variant_with_op_matmul_is_refused(capsys):
    assert main(["precompile", "--cache", "/tmp/wl-variant-refused", "--op", "matmul", "--variant", "standard"]) == 2
    assert "--variant builds attention kernels" in capsys.readouterr().err


def test_variant_names():
    from warploom.variants import prefix_lm, softcap
    assert variant_name(softcap, None) == "warploom.variants:softcap"
    assert variant_name(softcap, prefix_lm) == "warploom.variants:softcap+prefix_lm"
    assert variant_name(lambda s, b, h, q, k: s, None) is None
    assert variant_name(softcap, window_without_default) is None           # two modules: not one --variant


def test_a_missing_modified_kernel_names_the_variant_command(tmp_path, monkeypatch):
    from warploom import ops_attention
    from warploom.variants import softcap
    monkeypatch.setenv("WARPLOOM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPLOOM_OFFLINE", "1")
    mods, _ = ops_attention.traced_mods(softcap, None, {"cap": 20.0})
    spec = ops_attention.modified_spec("bf16", 128, True, "sm_90a", mods)
    with pytest.raises(MissingKernelError) as e:
        ops_attention.kernel_of(spec)
    assert "--variant warploom.variants:softcap" in str(e.value)


def test_explain_shows_the_modifiers_and_the_block_density(capsys):
    assert main(["explain", "--op", "attention", "--causal", "--variant", "warploom.variants:sliding_window",
                 "--seqlen", "4096"]) == 0
    out = capsys.readouterr().out
    assert "modifiers: mask (le (sub q_idx kv_idx) (scalar size i32)); size:i32" in out
    assert "scalar parameters: mod_size (i32)" in out
    # 32 query tiles of 128 rows: tile m walks blocks max(0, m - 8) .. m (a 1024-key window is 8 blocks plus one)
    assert "block sparsity at Sq = Sk = 4096 (size = 1024): 252 of 528 key blocks walked (47.7%)" in out


def test_explain_says_a_tabled_mask_walks_its_block_table(capsys):
    assert main(["explain", "--op", "attention", "--variant", "tests.gpu.mod_variants:block_sparse",
                 "--seqlen", "4096"]) == 0
    out = capsys.readouterr().out
    assert "block sparsity: a block table" in out and "built from the values of pattern at the call" in out


@pytest.mark.parametrize("argv, message", [
    (["--op", "attention", "--seqlen", "100"], "give --variant too"),
    (["--op", "matmul", "--variant", "warploom.variants:softcap"], "--variant applies to the attention"),
    (["--op", "attention", "--variant", "standard"], "names 6 variants"),
])
def test_explain_refuses_variant_options_that_do_not_apply(argv, message, capsys):
    assert main(["explain", *argv]) == 2
    assert message in capsys.readouterr().err
