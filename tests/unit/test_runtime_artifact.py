"""KernelArtifact: grid rules, validation, and the folder round trip (CPU only)."""
import json

import pytest

from warploom.runtime.artifact import KernelArtifact, ParamSpec, TensorMapSpec, eval_rule


def make(**over):
    fields = dict(
        name="gemm_kernel", target="sm_90a", cubin=b"\x7fELF fake cubin", ptx=".version 8.0\n",
        smem_bytes=99 * 1024, block=(384, 1, 1), cluster=(2, 1, 1),
        grid=(("cdiv", "N", 128), ("cdiv", "M", 128), ("const", 1)),
        params=[ParamSpec("a_map", "tensormap"), ParamSpec("c", "ptr"), ParamSpec("m", "i32"),
                ParamSpec("scale", "f32")],
        tensor_maps={"a_map": TensorMapSpec("a_map", "A", "bf16", (64, 128), 128, ("K", "M"))},
        meta={"tile": [128, 128, 64], "stages": 4}, key="abc123")
    fields.update(over)
    return KernelArtifact(**fields)


def test_grid_rules():
    art = make()
    assert art.grid_for({"M": 256, "N": 129}) == (2, 2, 1)
    assert eval_rule(("mul_cdiv", "B", "S", 128), {"B": 3, "S": 257}) == 9
    assert eval_rule(("const", 7), {}) == 7
    # Integer ceil-division stays exact beyond float precision.
    assert eval_rule(("cdiv", "N", 3), {"N": 3 * 2**60 + 1}) == 2**60 + 1


def test_grid_missing_size_names_it():
    with pytest.raises(ValueError, match=r"needs size 'M'.*sizes given: N"):
        make().grid_for({"N": 128})


def test_grid_zero_and_too_large():
    with pytest.raises(ValueError, match=r"grid x = 0 .*N.*0.*skip the launch"):
        make().grid_for({"M": 128, "N": 0})
    art = make(grid=(("const", 1), ("cdiv", "M", 1), ("const", 1)))
    with pytest.raises(ValueError, match=r"grid y = 65536 .*1\.\.65535"):
        art.grid_for({"M": 65536})
    art = make(grid=(("mul_cdiv", "B", "S", 1), ("const", 1), ("const", 1)))
    assert art.grid_for({"B": 1, "S": 2**31 - 1})[0] == 2**31 - 1
    with pytest.raises(ValueError, match=r"grid x = 2147483648"):
        art.grid_for({"B": 2, "S": 2**30})


@pytest.mark.parametrize("rule, msg", [
    (("floor", "N", 2), "first entry"),
    (("cdiv", "N"), "takes 2"),
    (("cdiv", "N", 0), "divisor"),
    (("const", 0), "constant"),
    (("mul_cdiv", "B", 3, 128), "names must be strings"),
])
def test_bad_rules(rule, msg):
    with pytest.raises(ValueError, match=msg):
        make(grid=(rule, ("const", 1), ("const", 1)))


def test_contract_checks():
    with pytest.raises(ValueError, match="kind 'u32'"):
        ParamSpec("x", "u32")
    with pytest.raises(ValueError, match=r"\['a_map'\] have no TensorMapSpec"):
        make(tensor_maps={})
    with pytest.raises(ValueError, match="1536 threads"):
        make(block=(512, 3, 1))
    with pytest.raises(ValueError, match="swizzle 16"):
        TensorMapSpec("t", "A", "bf16", (64,), 16, ("K",))
    with pytest.raises(ValueError, match="one box size per dimension"):
        TensorMapSpec("t", "A", "bf16", (64, 64), 128, ("K",))


def test_save_load_round_trip(tmp_path):
    art = make()
    art.save(tmp_path / "k")
    assert sorted(p.name for p in (tmp_path / "k").iterdir()) == ["kernel.cubin", "kernel.ptx", "meta.json"]
    back = KernelArtifact.load(tmp_path / "k")
    assert back == art
    assert back.grid == (("cdiv", "N", 128), ("cdiv", "M", 128), ("const", 1))
    assert back.block == (384, 1, 1) and isinstance(back.params[0], ParamSpec)
    assert back.tensor_maps["a_map"].box == (64, 128)


def test_load_missing_file_names_path(tmp_path):
    make().save(tmp_path / "k")
    (tmp_path / "k" / "kernel.cubin").unlink()
    with pytest.raises(FileNotFoundError, match=r"k/kernel\.cubin is missing"):
        KernelArtifact.load(tmp_path / "k")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        KernelArtifact.load(tmp_path / "nowhere")


def test_load_broken_meta(tmp_path):
    folder = make().save(tmp_path / "k")
    (folder / "meta.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"meta\.json is not valid JSON"):
        KernelArtifact.load(folder)
    meta = make().to_json()
    del meta["grid"]
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"lacks field\(s\) \['grid'\]"):
        KernelArtifact.load(folder)
    meta = make().to_json()
    meta["format"] = 99
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="format 99"):
        KernelArtifact.load(folder)
    meta = make().to_json()
    meta["params"][0]["kind"] = "texture"
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"is invalid: .*kind 'texture'"):
        KernelArtifact.load(folder)


def test_meta_must_be_json(tmp_path):
    art = make(meta={"bad": object()})
    with pytest.raises(TypeError):
        art.save(tmp_path / "k")
    assert not (tmp_path / "k" / "meta.json").exists()


def test_persistent_grid_rule_caps_tiles_at_the_sm_count():
    from warploom.runtime.artifact import eval_rule
    rule = ("persistent", "M", 128, "N", 256, "SMS")
    assert eval_rule(rule, {"M": 8192, "N": 8192, "SMS": 132}) == 132
    assert eval_rule(rule, {"M": 1000, "N": 300, "SMS": 132}) == 8 * 2
    assert eval_rule(rule, {"M": 1, "N": 1, "SMS": 132}) == 1
    import pytest
    with pytest.raises(ValueError, match="SMS"):
        eval_rule(rule, {"M": 1, "N": 1})
