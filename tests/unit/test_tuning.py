"""The tuning table (warploom/tuning): buckets, candidates, lookups, what precompile builds. (`warploom tune`'s
refusals and a table entry no candidate matches: tests/unit/test_errors.py, rows of docs/errors.md.)"""
import json

import pytest

from warploom import ops, tuning
from warploom.kernels import STANDARD_KERNELS, GemmSpec, precompile_set


def test_buckets_round_each_dim_up_to_a_power_of_two():
    assert tuning.bucket(3000, 5000, 1000) == (4096, 8192, 1024)
    assert tuning.bucket(1, 4096, 4097) == (1, 4096, 8192)
    assert tuning.bucket(16, 8192, 8192) == (16, 8192, 8192)


def test_candidates_follow_m():
    small = tuning.candidates("bf16", "kn", 16)
    swap = [s for s in small if s.swap_ab]
    small = [s for s in small if not s.swap_ab]
    assert {s.block_m for s in small} == {64} and {s.stages for s in small} == {4, 8}
    # the swap-AB kernels whose block_m covers M, up to M = 32 (none at 33)
    assert {(s.block_m, s.block_n) for s in swap} == {(16, 64), (16, 128), (32, 64)}
    assert {s.epilogue for s in swap} == {"direct"} and {s.schedule for s in swap} == {"grid"}
    assert {(s.block_m, s.block_n) for s in tuning.candidates("bf16", "kn", 1) if s.swap_ab} == \
        {(8, 64), (16, 64), (16, 128), (32, 64)}
    assert not [s for s in tuning.candidates("bf16", "kn", 33) if s.swap_ab]
    mid = tuning.candidates("bf16", "kn", 128)
    assert {(128, 128, 6), (128, 64, 8)} <= {(s.block_m, s.block_n, s.stages) for s in mid}
    large = tuning.candidates("f16", "nk", 4096)
    assert {(s.block_n, s.schedule, s.cluster_m) for s in large} == {
        (128, "grid", 1), (128, "persistent", 1), (256, "grid", 1), (256, "persistent", 1), (128, "streamk", 1),
        (256, "streamk", 1), (128, "persistent", 2), (256, "persistent", 2)}     # 2x1 clusters only above M = 128
    assert {s.cluster_m for s in small + mid} == {1}
    assert all(s.elem == "f16" and s.b_layout == "nk" for s in large)
    assert (128, 64, 8) not in {(s.block_m, s.block_n, s.stages) for s in small + large}    # M in (64, 128] only
    assert {(s.block_m, s.block_n, s.stages) for s in small if s.schedule == "streamk"} == {(64, 64, 8)}
    assert {(s.block_n, s.stages) for s in mid if s.schedule == "streamk"} == {(128, 4), (128, 6), (256, 4)}
    assert len(set(tuning.all_candidates())) == len(tuning.all_candidates()) == 68 + 16    # + the swap-AB kernels
    with pytest.raises(ValueError, match="sm_100a has no candidates"):
        tuning.candidates("bf16", "kn", 16, "sm_100a")


@pytest.fixture
def table(tmp_path, monkeypatch):
    """An empty table for sm_90a in a temporary folder, instead of the shipped one."""
    monkeypatch.setattr(tuning, "TABLE_DIR", tmp_path)
    monkeypatch.setattr(tuning, "_TABLES", {})
    return tmp_path / "sm_90a.json"


def add(path, spec, shape):
    tuning.write(path, {tuning.entry_key("matmul", spec.elem, spec.b_layout, tuning.bucket(*shape)):
                        tuning.entry(spec, shape, {spec.kernel_name: 1.0}, 1.1, {})}, {"target": "sm_90a"})
    tuning._TABLES.clear()


def test_ops_takes_the_tuned_kernel_of_the_bucket(table, monkeypatch):
    deep = GemmSpec("bf16", "kn", 64, 4, "sm_90a", "grid", 64)           # a candidate the model would not pick
    add(table, deep, (16, 8192, 8192))
    assert tuning.lookup("bf16", "kn", 9, 5000, 5000) == deep            # the same bucket (16, 8192, 8192)
    assert ops.pick_spec("bf16", "kn", 16, 8192, k=8192) == deep
    assert ops.pick_spec("bf16", "kn", 16, 8192) != deep                  # no K: the model
    assert ops.pick_spec("bf16", "nk", 16, 8192, k=8192) != deep          # another layout: not tuned
    monkeypatch.setattr(ops, "TUNING", False)
    assert ops.pick_spec("bf16", "kn", 16, 8192, k=8192) != deep
    monkeypatch.setattr(ops, "TUNING", True)
    monkeypatch.setattr(ops, "SCHEDULE", "grid")                          # the caller chose: no table
    assert ops.pick_spec("bf16", "kn", 16, 8192, k=8192) != deep
    entry = json.loads(table.read_text())["entries"]["matmul/bf16/kn/16x8192x8192"]
    assert entry["name"] == deep.kernel_name and entry["ratio_vs_cublas"] == pytest.approx(1.1)


def test_precompile_builds_what_the_table_names(table):
    deep = GemmSpec("f16", "nk", 64, 4, "sm_90a", "grid", 64)            # a tuning candidate outside the standard set
    standard = STANDARD_KERNELS["sm_90a"][0]
    add(table, deep, (1, 4096, 4096))
    add(table, standard, (8192, 8192, 8192))
    everything = precompile_set("sm_90a")
    assert everything.count(deep) == 1 and everything.count(standard) == 1 and everything[-1] == deep


def test_the_shipped_table_names_candidates_of_its_buckets():
    entries = tuning.load("sm_90a")
    for key, entry in entries.items():
        op, elem, layout, shape_bucket = key.split("/")
        assert op == "matmul" and "x".join(map(str, tuning.bucket(*entry["shape"]))) == shape_bucket
        spec = tuning.spec_of(entry, elem, layout, "sm_90a")
        assert spec in tuning.candidates(elem, layout, entry["shape"][0]) and spec.kernel_name == entry["name"]
        assert entry["ms"] == min(entry["candidates_ms"].values())
        m, n, k = entry["shape"]
        assert ops.pick_spec(elem, layout, m, n, k=k) == spec      # what warploom.ops.matmul runs there


def test_explain_names_the_kernel_ops_picks_and_why(tmp_path):
    """`warploom explain --shape` on a bucket of the shipped table and on one the table lacks."""
    import subprocess
    import sys
    env = {"WARPLOOM_CACHE_DIR": str(tmp_path)}
    entries = tuning.load("sm_90a")
    key = next(iter(sorted(entries)))
    _, elem, layout, _ = key.split("/")
    m, n, k = entries[key]["shape"]
    import os
    cmd = [sys.executable, "-m", "warploom.tools.cli", "explain", "--dtype", elem, "--b-layout", layout]
    tuned = subprocess.run(cmd + ["--shape", f"{m}x{n}x{k}"], capture_output=True, text=True,
                           env={**os.environ, **env})
    assert tuned.returncode == 0, tuned.stderr
    assert "the tuning table's entry for bucket" in tuned.stdout and f"kernel {entries[key]['name']} " in tuned.stdout
    model = subprocess.run(cmd + ["--shape", "3000x700x100"], capture_output=True, text=True, env={**os.environ, **env})
    assert model.returncode == 0 and "the tile model (no tuning table entry" in model.stdout, model.stderr



@pytest.mark.parametrize("m,n", [(1, 4096), (16, 8192), (64, 8192), (128, 8192), (3000, 5000), (8192, 8192)])
@pytest.mark.parametrize("layout", ["kn", "nk"])
def test_ops_under_streamk_picks_a_built_streamk_kernel(m, n, layout, monkeypatch):
    """SCHEDULE = "streamk": whatever tile the model would take, the kernel is one `warploom precompile` builds (an
    offline GPU machine has nothing else)."""
    from warploom.kernels import STREAMK_KERNELS
    monkeypatch.setattr(ops, "SCHEDULE", "streamk")
    for elem in ("bf16", "f16"):
        spec = ops.pick_spec(elem, layout, m, n, k=4096)
        assert spec.schedule == "streamk" and spec in STREAMK_KERNELS["sm_90a"], spec
        assert spec in precompile_set("sm_90a")


@pytest.mark.parametrize("schedule", ["grid", "persistent", "auto"])
def test_the_model_takes_the_cluster_kernel_for_the_persistent_wide_tile(schedule, monkeypatch):
    """With no table entry (no K): the persistent 128 x 256 tile runs in 2x1 clusters once M has two 128-row tiles;
    never the grid schedule, never M <= 128, never 128 x 128; every pick is a kernel precompile builds."""
    from warploom.kernels import CLUSTER_KERNELS
    monkeypatch.setattr(ops, "SCHEDULE", schedule)
    for m, n in [(1, 4096), (128, 8192), (129, 8192), (3000, 5000), (6144, 3072), (8192, 8192), (300, 392)]:
        for layout in ("kn", "nk"):
            spec = ops.pick_spec("f16", layout, m, n)
            clustered = spec.schedule == "persistent" and spec.block_n == 256 and m > 128
            assert (spec.cluster_m, spec.group_m) == ((2, 8) if clustered else (1, 1)), (m, n, spec)
            assert (spec in CLUSTER_KERNELS["sm_90a"]) == clustered and spec in precompile_set("sm_90a")
    if schedule == "persistent":
        assert ops.pick_spec("bf16", "kn", 8192, 8192).cluster_m == 2


@pytest.mark.parametrize("schedule", ["grid", "persistent", "auto"])
def test_the_model_takes_the_swap_ab_kernel_for_decode_size_m(schedule, monkeypatch):
    """With no table entry (no K): M up to tuning.SWAP_M takes the swap-AB kernel of 64 columns whose block_m is the
    least covering M; M = 33 the 64-row tile; every pick is a kernel precompile builds."""
    monkeypatch.setattr(ops, "SCHEDULE", schedule)
    for layout in ("kn", "nk"):
        for m, block_m in [(1, 8), (8, 8), (9, 16), (16, 16), (17, 32), (32, 32)]:
            spec = ops.pick_spec("bf16", layout, m, 4096)
            assert (spec.swap_ab, spec.block_m, spec.block_n, spec.schedule) == (True, block_m, 64, "grid"), (m, spec)
            assert spec in precompile_set("sm_90a")
        assert not ops.pick_spec("f16", layout, 33, 4096).swap_ab
