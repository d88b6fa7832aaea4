"""A failing pass or assembler leaves a reproducer: the failing step's input and the command that replays it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlir import ir

from warploom.lowering.assemble import ToolError, assemble
from warploom.passes import run_pipeline
from warploom.tools.cli import main

GRAPH = """func.func @mm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
"""


@pytest.fixture
def repro_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPLOOM_REPRO_DIR", str(tmp_path / "repro"))
    return tmp_path / "repro"


def test_a_failing_pass_writes_its_input_and_the_call_that_replays_it(repro_dir, capsys):
    import warploom
    g = warploom.Graph("mm")
    a, b = g.input("a", ("M", "K"), "bf16"), g.input("b", ("K", "N"), "bf16")
    g.output(g.matmul(a, b))
    with pytest.raises(ir.MLIRError) as e:
        run_pipeline(g, ["wl-verify", "wl-tile{block-n=96}"])
    folder = Path(e.value.reproducer)
    assert folder.parent == repro_dir and (folder / "input.mlir").read_text().count('"wl.matmul"') == 1
    assert any("reproducer:" in n and "replay.sh" in n for n in e.value.__notes__)
    script = (folder / "replay.sh").read_text()
    assert "warploom-opt input.mlir '--pass-pipeline=builtin.module(wl-tile{block-n=96})'" in script
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    r = subprocess.run(["sh", str(folder / "replay.sh")], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "block-n = 96: must be a multiple of 64" in r.stderr


def test_the_cli_says_where_the_reproducer_is(repro_dir, tmp_path, capsys):
    src = tmp_path / "g.mlir"
    src.write_text(GRAPH)
    assert main(["compile", str(src), "--target", "sm_100a", "--dump-dir", str(tmp_path / "d")]) == 0   # fine
    capsys.readouterr()
    assert main(["compile", "--op", "matmul", "--block-n", "96"]) == 1
    err = capsys.readouterr().err
    assert f"reproducer: {repro_dir}/wl-tile_block-n_96" in err and "replay.sh" in err


def test_a_failing_assembler_writes_the_ptx_and_the_ptxas_call(repro_dir):
    with pytest.raises(ToolError) as e:
        assemble(".version 8.6\n.target sm_90a\n.address_size 64\nthis is not ptx\n", "sm_90a", "ptxas")
    where = str(e.value).rsplit("reproducer: ", 1)[1].split("/replay.sh")[0]
    folder = Path(where)
    assert folder.parent == repro_dir and "this is not ptx" in (folder / "kernel.ptx").read_text()
    assert "ptxas -v -arch=sm_90a -O3 kernel.ptx -o kernel.cubin" in (folder / "replay.sh").read_text()
