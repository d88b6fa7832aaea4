"""`warploom emulate` runs what warploom.ops.matmul would run for the shape (issue 37): the kernel pick_spec picks
with K (the tuning table's buckets use it), on zero-padded copies where ops.matmul makes them, and says so."""
import pytest

from warploom import ops
from warploom.kernels import GemmSpec
from warploom.tools.cli import main
from warploom.tools.emulate import ops_launch


@pytest.mark.parametrize("layout, target, mnk, launch", [
    ("kn", "sm_90a", (200, 304, 136), (136, (136, 304), 304)),          # rows TMA reads: no copies
    ("kn", "sm_90a", (200, 300, 136), (136, (136, 304), 300)),          # B [K,N]'s N = 300: B padded, N told 300
    ("nk", "sm_90a", (200, 300, 136), (136, (300, 136), 300)),          # B [N,K]'s rows are K long: no copies
    ("nk", "sm_90a", (130, 136, 100), (104, (136, 104), 136)),          # K = 100: A and B padded to K = 104
    ("kn", "sm_100a", (130, 100, 60), (64, (64, 104), 104)),            # sm_100a stores C by TMA: C padded too
])
def test_the_launch_is_the_one_ops_matmul_makes(layout, target, mnk, launch):
    """ops.py's slower path: K rounded up to 8 when A's or B's rows are not 16-byte strides, B [K,N]'s N with it,
    C on sm_100a (stored by TMA); the kernel is told the problem's M and N and the padded K."""
    spec = GemmSpec("bf16", layout, 128, target=target, schedule="persistent")
    assert ops_launch(spec, *mnk) == launch


@pytest.mark.parametrize("argv, padding", [
    (["--shape", "200x300x136"], ("N = 300 not a multiple of 8 (rows TMA cannot read), so it copies B into [136, "
                                  "304], zero-padded, and runs the kernel with M = 200, N = 300, K = 136")),
    (["--shape", "130x136x100", "--b-layout", "nk"], ("K = 100 not a multiple of 8 (rows TMA cannot read), so it "
                                                      "copies A into [130, 104], B into [136, 104]")),
])
def test_a_shape_ops_matmul_pads_is_emulated_padded(argv, padding, capsys):
    assert main(["emulate", "--exact"] + argv) == 0
    out = capsys.readouterr().out
    assert f"padding as warploom.ops.matmul does: {padding}" in out and "all 1 seed(s) match" in out


def test_the_pick_uses_k_as_ops_matmul_does(monkeypatch, capsys):
    seen = []
    real = ops.pick_spec

    def spy(*args, **kwargs):
        seen.append(kwargs.get("k"))
        return real(*args, **kwargs)
    monkeypatch.setattr(ops, "pick_spec", spy)
    assert main(["emulate", "--shape", "4096x4096x4000"]) == 2        # too many tiles: refused after the pick
    err = capsys.readouterr().err
    assert seen == [4000] and "512 output tiles" in err
    assert "walked by the persistent grid's 2 CTAs (--sms 2)" in err          # not "(2 CTAs, ...)": 512 tiles


def test_sms_on_a_grid_schedule_kernel_is_refused(capsys):
    """--sms applies only where the picked kernel is persistent or stream-K (known after the pick)."""
    assert main(["emulate", "--shape", "130x136x200", "--schedule", "grid", "--sms", "4"]) == 2
    assert "--sms 4: sets the CTA count of a persistent or stream-K grid, and warploom.ops.matmul picks " \
           "wl_gemm_bf16_kn_128x" in capsys.readouterr().err
