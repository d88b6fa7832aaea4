"""`warploom emulate`: exit codes (match, mismatch, emulation error, refused input) and the --timeline text,
run through warploom.tools.cli.main on small shapes."""
import re

import pytest

from warploom.emulate import machine
from warploom.emulate.mbarrier import Mbarriers
from warploom.tools.cli import main

SMALL = ["emulate", "--op", "matmul", "--target", "sm_90a", "--shape", "130x136x200",    # 2 x 2 CTAs, 4 k-tiles
         "--schedule", "grid"]


def run(capsys, *extra):
    rc = main(SMALL + list(extra))
    out, err = capsys.readouterr()
    return rc, out, err


def test_match_exits_0_and_prints_a_line_per_seed(capsys):
    rc, out, err = run(capsys, "--seeds", "2")
    assert rc == 0, err
    assert "picks wl_gemm_bf16_kn_128x128x64_s4" in out
    rows = [line for line in out.splitlines() if re.match(r"\s+\d+\s+wl_gemm_", line)]
    assert len(rows) == 2
    for seed, row in enumerate(rows):
        assert re.match(rf"\s+{seed}\s+wl_gemm_bf16_kn_128x128x64_s4\s+\(2, 2, 1\)\s+4\s+[\d.]+\s+[\d.e+-]+\s+OK$", row), row


def test_the_blackwell_gemm_is_emulated(capsys):
    """--target sm_100a runs the tcgen05 kernel ops.matmul would pick on a Blackwell GPU (never run on one here)."""
    rc = main(["emulate", "--op", "matmul", "--target", "sm_100a", "--shape", "130x136x200", "--exact"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "wl_gemm_bf16_kn_128x128x64_s4_persistent_sm100a" in out and "0.00e+00  OK" in out


def test_exact_inputs_nk_f16(capsys):
    rc, out, err = run(capsys, "--exact", "--dtype", "f16", "--b-layout", "nk")
    assert rc == 0, err
    assert "wl_gemm_f16_nk_128x128x64_s4" in out and "0.00e+00  OK" in out


def test_a_wrong_reference_exits_1(capsys, monkeypatch):
    from warploom.reference import ops
    real = ops.matmul
    monkeypatch.setattr(ops, "matmul", lambda *a, **k: real(*a, **k) + 1.0)
    rc, out, err = run(capsys)
    assert rc == 1
    assert "MISMATCH" in out and "does not match the float64 reference" in err


def test_an_emulation_error_exits_2_with_its_message_and_timeline(capsys, monkeypatch):
    # the consumers' arrivals on the ring's empty barriers are lost: the producer waits for a free stage forever
    real = Mbarriers.arrive

    def lossy(self, addr, count=1, tx=0, warp=None, knows=None):
        if tx == 0:
            return self.get(addr).phase
        return real(self, addr, count, tx, warp, knows)
    monkeypatch.setattr(Mbarriers, "arrive", lossy)
    rc, out, err = run(capsys, "--timeline", "--shape", "130x136x328")     # 6 k-tiles: stages are reused
    assert rc == 2
    assert "DeadlockError" in out
    assert "seed 0: DeadlockError: CTA (" in err and "deadlock" in err and "Traceback" not in err
    assert "waits for mbarrier" in err and "nvvm.mbarrier.try_wait.parity" in err     # the op, printed from its MLIR
    assert re.search(r"wait +mbarrier 0x[0-9a-f]+\(empty\[0\]\) parity 0  still waiting", out)


@pytest.mark.parametrize("extra, message", [
    (["--shape", "130x0x64"], "give M, N and K as positive integers"),
    (["--shape", "128x128"], "MxNxK"),
    (["--shape", "1100x1024x64"], "72 output tiles of 128x128 (72 CTAs, grid (8, 9, 1))"),
    (["--shape", "1100x1024x64"], "more than --max-ctas 64: pass --max-ctas 72"),
    (["--timeline", "--cta", "2,0"], "the grid is (2, 2, 1)"),
])
def test_refused_input_exits_2_with_the_way_out(capsys, extra, message):
    rc = main(SMALL + extra)
    out, err = capsys.readouterr()
    assert rc == 2
    assert message in err, err
    assert "Traceback" not in err


def test_argparse_refuses_an_unknown_dtype():
    with pytest.raises(SystemExit) as e:
        main(SMALL + ["--dtype", "f32"])
    assert e.value.code == 2


def test_timeline_shows_waits_arrivals_copies_and_wgmmas_of_producer_and_consumers(capsys):
    rc, out, err = run(capsys, "--timeline", "--cta", "1,1", "--timeline-limit", "100")
    assert rc == 0, err
    assert "timeline of CTA (1, 1, 0), seed 0" in out
    warp = {}
    for line in out.splitlines():
        m = re.match(r"\s+warp (\d+)\s+step\s+(\d+)\s+(\w+)\s+(.*)", line)
        if m:
            warp.setdefault(int(m.group(1)), []).append((int(m.group(2)), m.group(3), m.group(4)))
    producer, consumer = warp[0], warp[4]
    kinds = {k for _, k, _ in producer}
    assert {"init", "wait", "arrive", "copy", "landed"} <= kinds
    assert any(k == "copy" and "TMA load of 'b' box [128, 0]" in t and "(b[0])" in t for _, k, t in producer)
    assert any(k == "arrive" and "(full[0]) x1 expect_tx 32768 B" in t for _, k, t in producer)
    assert any(k == "wait" and "(empty[0]) parity 1  passed" in t for _, k, t in producer)
    kinds = {k for _, k, _ in consumer}
    assert {"wait", "mma", "commit", "done", "arrive"} <= kinds
    assert any(k == "wait" and re.search(r"\(full\[0\]\) parity 0  passed (at once|at step \d+)", t)
               for _, k, t in consumer)
    assert any(k == "wait" and t.startswith("wgmma.wait_group") for _, k, t in consumer)
    assert any(k == "mma" and "A smem 0x" in t and "(a[0])" in t for _, k, t in consumer)
    assert any(k == "arrive" and "(empty[0])" in t for _, k, t in consumer)
    for events in warp.values():              # each warp's records are in scheduler order
        steps = [s for s, _, _ in events]
        assert steps == sorted(steps)


def test_timeline_limit_cuts_each_warp(capsys):
    rc, out, err = run(capsys, "--timeline", "--timeline-limit", "3")
    assert rc == 0, err
    assert all(len(re.findall(rf"^  warp {w} ", out, re.M)) <= 3 for w in range(12))
    assert "more (--timeline-limit)" in out


def test_no_trace_is_kept_by_default():
    import numpy as np
    from warploom.emulate import emulate_launch, gemm_kernel
    from warploom.kernels import GemmSpec
    seen = []
    real = machine.Cluster.run

    def spy(self, warps):
        seen.extend(cta.trace for cta in self.ctas)
        return real(self, warps)
    k = gemm_kernel(GemmSpec("bf16", "kn", 128))
    e = machine.NUMPY_ELEMS["bf16"]
    a, b, c = np.ones((64, 64), e), np.ones((64, 128), e), np.zeros((64, 128), e)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(machine.Cluster, "run", spy)
        emulate_launch(k, {"a": a, "b": b, "c": c}, {"M": 64, "N": 128, "K": 64})
    assert seen == [None]


def test_the_kernel_is_the_one_ops_matmul_picks(monkeypatch, capsys):
    from warploom import ops
    monkeypatch.setattr(ops, "pick_spec", lambda *a, **k: ops.GemmSpec("bf16", "kn", 256))
    rc, out, err = run(capsys, "--shape", "128x256x64")
    assert rc == 0, err
    assert "picks wl_gemm_bf16_kn_128x256x64_s4" in out


def test_schedule_option_picks_under_that_schedule_and_restores_it(capsys):
    from warploom import ops
    before = ops.SCHEDULE
    rc, out, err = run(capsys, "--schedule", "persistent", "--exact", "--shape", "130x264x200")
    assert rc == 0, err
    assert "wl_gemm_bf16_kn_128x128x64_s4_persistent" in out and "(2, 1, 1)" in out
    assert ops.SCHEDULE == before


def test_pick_spec_is_the_choice_of_matmul(monkeypatch):
    from warploom import ops
    assert ops.pick_spec("bf16", "kn", 130, 136).tile == (128, 128, 64)       # one wave either way: 4 smaller tiles
    assert ops.pick_spec("f16", "nk", 8192, 8192).tile == (128, 256, 64)
    # M <= 32: the swap-AB kernel, 64 columns of C a CTA and the least block_m (wgmma n) covering M
    assert ops.pick_spec("bf16", "kn", 16, 8192).tile == (16, 64, 64) and ops.pick_spec("bf16", "kn", 16, 8192).swap_ab
    assert ops.pick_spec("bf16", "nk", 1, 4096).tile == (8, 64, 64)
    # M <= 64: 64-row tiles (grid schedule), 128 wide while that makes a tile for a third of the SMs
    assert ops.pick_spec("bf16", "kn", 40, 8192).tile == (64, 128, 64)         # 64 tiles
    assert ops.pick_spec("bf16", "nk", 40, 4096).tile == (64, 64, 64)          # 32 tiles of 64 x 128: too few
    assert ops.pick_spec("bf16", "kn", 64, 32768).tile == (64, 128, 64)
    # larger M: the 128-row tile with the least modelled time (waves x work / measured rate)
    assert ops.pick_spec("bf16", "kn", 128, 8192).tile == (128, 128, 64)       # 64 tiles against 32
    assert ops.pick_spec("bf16", "kn", 512, 8192).tile == (128, 256, 64)       # 128 tiles: one wave, widest tile
    assert ops.pick_spec("bf16", "kn", 6144, 3072).tile == (128, 256, 64)      # 5 waves of 256 beat 9 of 128
    assert ops.pick_spec("bf16", "kn", 1000, 4096).tile == (128, 256, 64)      # 1 wave of 256 beats 2 of 128
    assert all(ops.pick_spec("bf16", "kn", m, 8192, lambda: 8).schedule == "grid" for m in (1, 16))
    monkeypatch.setattr(ops, "SCHEDULE", "auto")                           # persistent from 2 waves of tiles on
    assert ops.pick_spec("bf16", "kn", 8192, 8192, 132).schedule == "persistent"
    assert ops.pick_spec("bf16", "kn", 8192, 8192, lambda: 1100).schedule == "grid"   # 2048 tiles < 2 x 1100


# ---- --op attention ----------------------------------------------------------------------------------------

ATTN = ["emulate", "--op", "attention", "--shape", "1,130,200,2,1,64"]       # 2 query blocks x 2 heads, GQA 2


def test_attention_match_exits_0(capsys):
    rc = main(ATTN + ["--causal", "--seeds", "2", "--layout", "bhsd"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "picks wl_attn_bf16_d64_128x128_s2_causal" in out
    # 2 query blocks x 2 heads on 4 CTAs: one tile each, of 2 key blocks (Sk = 200) + 1
    assert ("deal on an H200 (132 SMs): 4 tiles over 4 CTAs, heads in groups of 1; work (key blocks + 1 a tile): "
            "busiest CTA 3, average 3.0") in out
    rows = [line for line in out.splitlines() if re.match(r"\s+\d+\s+wl_attn_", line)]
    assert len(rows) == 2 and all(row.endswith("OK") for row in rows), out


def test_attention_mismatch_exits_1(capsys, monkeypatch):
    """A lowering whose causal mask uses the other row of each thread: the CLI must say MISMATCH and exit 1."""
    from warploom.emulate import front
    from warploom.lowering import attention_regs

    from .test_attention import _WrongMaskRow
    monkeypatch.setattr(front, "_KERNELS", {})          # no kernel compiled from the right lowering
    monkeypatch.setattr(attention_regs, "RegisterAttention", _WrongMaskRow)
    rc = main(["emulate", "--op", "attention", "--shape", "1,100,100,1,1,64", "--causal"])
    out, err = capsys.readouterr()
    assert rc == 1, out + err
    assert "MISMATCH: " in out and "beyond the bound" in out
    assert "does not match the float64 reference" in err and "Traceback" not in err


@pytest.mark.parametrize("extra, message", [
    (["--shape", "1,130,200,2"], "attention takes B,Sq,Sk,H,Hkv,D"),
    (["--shape", "1,0,200,2,1,64"], "must be at least 1"),
    (["--shape", "1,130,200,3,2,64"], "H = 3 query heads is not a multiple of Hkv = 2"),
    (["--shape", "1,130,200,2,1,96"], "head dim 96; the attention kernels take 64, 128, 256"),
    (["--target", "sm_100a", "--shape", "1,130,200,2,1,256"], "head dim 256 has no sm_100a kernel (the FA4-style "
                                                                "kernel takes 64, 128)"),
    (["--shape", "2,1000,64,8,1,64"], "takes 128 CTAs (cdiv(Sq, 128) x H x B); that is more than --max-ctas 64"),
    (["--timeline"], "traced for --op matmul only"),
])
def test_attention_refused_input_exits_2(capsys, extra, message):
    rc = main(ATTN + extra)
    out, err = capsys.readouterr()
    assert rc == 2
    assert message in err, err
    assert "Traceback" not in err


def test_attention_sm100a_emulates(capsys):
    """--target sm_100a runs the FA4-style kernel ops.attention would pick on a Blackwell GPU (emulated only: no
    Blackwell GPU exists here)."""
    rc = main(["emulate", "--op", "attention", "--target", "sm_100a", "--shape", "1,200,130,2,1,64", "--causal",
               "--seeds", "1"])
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert "picks wl_fa4_bf16_d64_256x128_s2_causal (sm_100a)" in out and "OK" in out
