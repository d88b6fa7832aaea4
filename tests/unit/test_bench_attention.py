"""benchmarks/attention.py without a GPU: arguments, the FLOP formula, the grid, ratios, and the JSON/plot writer
fed with fake timings (the GPU parts import torch/jax only when they run)."""
import importlib.util
import json
from pathlib import Path

import pytest

_path = Path(__file__).parents[2] / "benchmarks" / "attention.py"
_spec = importlib.util.spec_from_file_location("bench_attention", _path)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_imports_no_gpu_framework():
    src = _path.read_text()
    top = src[: src.index("def attention_flops")]
    assert "import torch" not in top and "import jax" not in top


def test_flops():
    assert bench.attention_flops(1, 1, 1, 1, 1, False) == 4
    assert bench.attention_flops(16, 16, 1024, 1024, 128, False) == 4 * 16 * 16 * 1024**2 * 128
    assert bench.attention_flops(16, 16, 1024, 1024, 128, True) == 2 * 16 * 16 * 1024**2 * 128
    assert bench.attention_flops(2, 8, 100, 300, 64, False) == 4 * 2 * 8 * 100 * 300 * 64


def test_grid_is_the_peers_grid():
    cases = bench.grid()
    assert len(cases) == 2 * 4 * 2
    first = cases[0]
    assert (first["D"], first["S"], first["B"], first["H"], first["causal"]) == (64, 1024, 16, 32, False)
    assert all(c["B"] * c["S"] == 16384 and c["H"] * c["D"] == 2048 for c in cases)
    assert {(c["D"], c["S"]) for c in cases} == {(d, s) for d in (64, 128) for s in (1024, 4096, 8192, 16384)}
    assert bench.grid((128,), (32768,))[0]["B"] == 1                # at least one sequence a batch


def test_parse_args():
    a = bench.parse_args([])
    assert a.head_dims == [64, 128] and a.seqlens == [1024, 4096, 8192, 16384] and a.jax == "subprocess"
    assert a.layout == "bshd" and a.iters == 50
    a = bench.parse_args(["--out", "/tmp/x", "--head-dims", "128", "--seqlens", "2048", "--jax", "off", "--tag", "r1"])
    assert (a.out, a.head_dims, a.seqlens, a.jax, a.tag) == ("/tmp/x", [128], [2048], "off", "r1")
    for bad in (["--seqlens", "0"], ["--iters", "0"], ["--jax", "maybe"], ["--layout", "sbhd"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def fake_rows():
    rows = []
    for i, case in enumerate(bench.grid()):
        ms = {"warploom_bf16": 1.0 + 0.01 * i, "cudnn_bf16": 1.1, "fa2_bf16": 1.6, "warploom_f16": 1.0,
              "jax_mgpu_f16": None if i == 3 else 0.9}
        rows.append(dict(case, ms=ms, errors={"jax_mgpu_f16": "ValueError: no"} if i == 3 else {}))
    return rows


def test_rates_ratios_and_merge():
    rows = fake_rows()
    bench.merge(rows, "jax_mgpu_f16", [{"D": 64, "S": 1024, "causal": False, "ms": 0.5, "timing": "t"},
                                       {"D": 1, "S": 1, "causal": False, "ms": 1}])
    assert rows[0]["ms"]["jax_mgpu_f16"] == 0.5 and rows[0]["timing"] == {"jax_mgpu_f16": "t"}
    for r in rows:
        bench.fill_rates(r)
    r = rows[0]
    assert r["tflops"]["cudnn_bf16"] == pytest.approx(r["flops"] / 1.1 / 1e9)
    assert r["warploom_vs_cudnn"] == pytest.approx(1.1 / 1.0)
    assert rows[3]["warploom_f16_vs_jax"] is None and rows[3]["tflops"]["jax_mgpu_f16"] is None
    s = bench.summary(rows)
    assert s["warploom_f16_vs_jax"]["cases"] == 15 and s["warploom_vs_cudnn"]["cases"] == 16
    assert s["warploom_vs_fa2"]["geomean"] == pytest.approx(bench.geomean([1.6 / r["ms"]["warploom_bf16"] for r in rows]))
    text = bench.table(rows)
    assert "wl/cuDNN" in text and "1.100" in text and len(text.splitlines()) == 1 + 16


def test_write_results(tmp_path, monkeypatch):
    rows = [bench.fill_rates(r) for r in fake_rows()]
    rows[5]["ms"]["warploom_bf16"] = None                        # a failed peer: no rate, no ratio
    bench.fill_rates(rows[5])
    meta = {"date": "2026-12-03", "commit": "abc1234", "gpu": "NVIDIA H200", "sms": 132}
    paths = bench.write_results(rows, meta, str(tmp_path / "out"), tag="t")
    doc = json.loads(Path(paths["json"]).read_text())
    assert Path(paths["json"]).name == "attention-t-2026-12-03.json"
    assert doc["commit"] == "abc1234" and doc["gpu"] == "NVIDIA H200" and len(doc["rows"]) == 16
    assert doc["rows"][5]["warploom_vs_cudnn"] is None and doc["summary"]["warploom_vs_cudnn"]["cases"] == 15
    if importlib.util.find_spec("matplotlib") is None:
        assert paths["png"] is None
    else:
        assert Path(paths["png"]).stat().st_size > 0


def _attention_ab():
    path = Path(__file__).parents[2] / "benchmarks" / "attention_ab.py"
    spec = importlib.util.spec_from_file_location("attention_ab", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_attention_ab_tiles_name_the_kernels_they_build():
    """benchmarks/attention_ab.py: `@[D:]BN[sST]` swaps the tile of head dim D (128 unless given) only; no GPU
    framework at import."""
    ab = _attention_ab()
    assert ab.parse_tile("") == {} and ab.parse_tile("128") == {"head_dim": 128, "block_n": 128}
    assert ab.parse_tile("128s3") == {"head_dim": 128, "block_n": 128, "stages": 3}
    assert ab.parse_tile("128k") == {"head_dim": 128, "block_n": 128, "schedule": "streamk"}
    assert ab.parse_tile("64:128q2k") == {"head_dim": 64, "block_n": 128, "q_stages": 2, "schedule": "streamk"}
    assert ab.parse_tile("64:192s3") == {"head_dim": 64, "block_n": 192, "stages": 3}
    assert ab.parse_tile("64:128q2") == {"head_dim": 64, "block_n": 128, "q_stages": 2}
    assert ab.parse_tile("128s2q2") == {"head_dim": 128, "block_n": 128, "stages": 2, "q_stages": 2}
    assert ab.parse_tile("64:192x128") == {"head_dim": 64, "block_m": 192, "block_n": 128}
    assert ab.parse_tile("64:192x128q1") == {"head_dim": 64, "block_m": 192, "block_n": 128, "q_stages": 1}
    assert ab.build_spec(64, False, ab.parse_tile("64:192x128q1")).kernel_name == \
        "wl_attn_bf16_d64_192x128_s2_ov_persistent"
    assert ab.build_spec(64, False, ab.parse_tile("64:192x128")).kernel_name == "wl_attn_bf16_d64_192x128_s2_ov_persistent_q2"
    assert ab.build_spec(64, True, ab.parse_tile("64:176")).kernel_name == "wl_attn_bf16_d64_128x176_s2_causal_ov_persistent"
    assert ab.build_spec(128, True, ab.parse_tile("64:176")).kernel_name == "wl_attn_bf16_d128_128x128_s2_causal_ov_persistent_q2"
    assert ab.build_spec(128, True, ab.parse_tile("128s3")).kernel_name == "wl_attn_bf16_d128_128x128_s3_causal_ov_persistent"
    # pK: K of each 8 exp2 by the FMA polynomial (after qN when both are given)
    assert ab.parse_tile("64:128p2") == {"head_dim": 64, "block_n": 128, "exp2_poly": 0.25}
    assert ab.parse_tile("64:192x128q1p1") == {"head_dim": 64, "block_m": 192, "block_n": 128, "q_stages": 1,
                                               "exp2_poly": 0.125}
    assert ab.build_spec(64, True, ab.parse_tile("64:128p2")).kernel_name == \
        "wl_attn_bf16_d64_128x128_s2_causal_ov_persistent_q2_p2"
    assert ab.build_spec(128, False, {}).kernel_name == "wl_attn_bf16_d128_128x128_s2_ov_persistent_q2"
    assert ab.build_spec(64, False, ab.parse_tile("160")).kernel_name == "wl_attn_bf16_d64_128x128_s2_ov_persistent_q2"
    assert "torch" not in ab.__dict__


def test_burst_timings_merge_into_their_own_peers_and_ratio():
    rows = fake_rows()
    bench.merge(rows, "jax_mgpu_f16", [
        {"D": 64, "S": 1024, "causal": False, "ms": 0.5, "burst": {"jax_mgpu_f16": 0.6, "warploom_f16": 0.4},
         "burst_rounds": {"jax_mgpu_f16": [0.6, 0.7, 0.5], "warploom_f16": [0.4, 0.4, 0.5]}},
        {"D": 64, "S": 1024, "causal": True, "ms": 0.5, "burst_error": "RuntimeError: no kernel"}])
    r, bad = rows[0], rows[1]
    assert r["ms"]["jax_mgpu_f16"] == 0.5          # the CUPTI figure keeps its own peer
    assert r["ms"]["jax_mgpu_f16_burst"] == 0.6 and r["ms"]["warploom_f16_burst"] == 0.4
    assert r["ms_rounds"]["warploom_f16_burst"] == [0.4, 0.4, 0.5]
    assert bad["ms"]["warploom_f16_burst"] is None and "no kernel" in bad["errors"]["warploom_f16_burst"]
    for row in rows:
        bench.fill_rates(row)
    assert r["warploom_f16_vs_jax_burst"] == pytest.approx(0.6 / 0.4)
    assert bad["warploom_f16_vs_jax_burst"] is None and rows[2]["warploom_f16_vs_jax_burst"] is None
    assert bench.summary(rows)["warploom_f16_vs_jax_burst"]["cases"] == 1
    assert "16/JAXb" in bench.table(rows) and "1.500" in bench.table(rows)


def test_burst_side_by_side_alternates_and_takes_the_median():
    order, synced = [], []
    def call(name):
        def run():
            order.append(name)
            return name
        return run
    out = bench.burst_side_by_side({"a": call("a"), "b": call("b")}, {"a": synced.append, "b": synced.append},
                                   warmup=2, iters=3, rounds=2)
    # each round: one peer's warm-up and burst, then the other's; the second round in the other order
    assert order == ["a"] * 5 + ["b"] * 5 + ["b"] * 5 + ["a"] * 5
    assert synced == ["a", "a", "b", "b", "b", "b", "a", "a"]    # one sync after the warm-up, one after the burst
    assert set(out["ms"]) == {"a", "b"} and len(out["rounds"]["a"]) == 2 and out["ms"]["a"] >= 0


def test_burst_flag_reaches_the_child():
    assert bench.parse_args([]).burst is True and bench.parse_args(["--no-burst"]).burst is False
