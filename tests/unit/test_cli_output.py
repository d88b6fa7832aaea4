"""Output a script would pipe (issue 37): a reader that stops early (`| head`) ends the command quietly with exit 0;
`warploom compile` puts one thing on stdout (the product asked for, or else the pass table and the plan's summary,
the summary last)."""
import subprocess

import pytest
from test_errors import GEMM, tool

from warploom.tools.cli import main


@pytest.mark.parametrize("argv", [["warploom", "passes"], ["warploom", "--help"], ["warploom-opt", "--list-passes"]])
def test_a_reader_that_stops_early_ends_it_quietly(argv):
    """`warploom passes | head -1`: stdout's reader is gone before the command writes (the pipe closed first)."""
    proc = subprocess.Popen(tool(argv[0]) + argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert err == "", err                   # no "[Errno 32] Broken pipe", no "Exception ignored"


def test_a_reader_that_stops_midway(tmp_path):
    """`warploom-opt big.mlir | head -1`: the reader goes after the first line of a long output."""
    path = tmp_path / "big.mlir"
    path.write_text("\n".join(GEMM.replace("@gemm", f"@gemm{i}") for i in range(400)))
    proc = subprocess.Popen(tool("warploom-opt") + [str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == "", err


def test_print_ir_puts_the_ir_alone_on_stdout(tmp_path, capsys):
    path = tmp_path / "g.mlir"
    path.write_text(GEMM)
    assert main(["compile", str(path), "--print-ir"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("module") and "gpu.module" in out and "wl-plan-smem" not in out
    assert "wl-plan-smem" in err and "kernel (gemm, sm_90a)" in err        # the table and the summary: stderr
    assert main(["compile", str(path)]) == 0                               # no product asked: the report, last
    out, err = capsys.readouterr()
    assert "gpu.module" not in out and out.rstrip().splitlines()[-1].startswith("  role consumer")
    assert "--print-ir" in err


@pytest.mark.parametrize("argv, words", [
    (["--print-ir", "--emit", "ptx"], "--print-ir prints the IR on stdout, where --emit ptx would write too"),
    (["--print-ir", "--print-ir-after-all"], "give one of --print-ir, --print-ir-after-all"),
    (["--print-ir-after-all", "--emit", "sass"], "give --emit sass an -o FILE"),
])
def test_two_products_for_stdout_are_refused(argv, words, capsys):
    assert main(["compile", "--op", "matmul"] + argv) == 2
    assert words in capsys.readouterr().err
