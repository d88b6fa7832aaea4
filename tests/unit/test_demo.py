"""`warploom demo` on this CPU-only machine: the attention (fused, planned, emulated) and the GEMM, their plans and
PTX/SASS summaries, exit 0; the GPU launches are skipped without a GPU; --dump-ir writes every kernel's passes."""
from warploom.tools.cli import main


def test_demo_runs_and_shows_both_kernels(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("WARPLOOM_CACHE_DIR", str(tmp_path / "cache"))
    dump = tmp_path / "ir"
    assert main(["demo", "--dump-ir", str(dump)]) == 0
    out = capsys.readouterr().out
    assert "wl-fuse's one wl.attention vs the five ops" in out and "relative error 0.0e+00" in out
    assert "the emulator runs the lowered attention kernel" in out and "within the bound" in out
    assert "== kernel wl_attn_bf16_d64_128x128_s2_causal_ov_persistent_q2 ==" in out
    assert "q_full[2] q_empty[2] k_full[2] k_empty[2] v_full[2] v_empty[2]" in out
    assert "turn         1..2          256  consumer (one per warpgroup)" in out      # the ping-pong's barriers
    assert "== kernel wl_gemm_bf16_kn_128x256x64_s4 ==" in out
    assert "LDL x0, STL x0" in out and "demo OK" in out
    # --dump-ir: every kernel the demo builds, each in its folder, through its lowering (the GEMM's only, before)
    for folder, last in (("attention", "wl-lower-sm90"), ("gemm", "wl-lower-sm90"), ("sm100a-gemm", "wl-lower-sm100")):
        names = sorted(p.name for p in (dump / folder).iterdir())
        assert names[0] == "00-input.mlir" and names[-1].endswith(f"-{last}.mlir"), (folder, names)
    assert any("wl-fuse" in n for n in (p.name for p in (dump / "attention").iterdir()))
    assert any("wl-plan-tmem" in n for n in (p.name for p in (dump / "sm100a-gemm").iterdir()))
