"""`warploom compile`: what it writes (--emit, -o), and that it says so, exiting non-zero, when no kernel was built;
`warploom --version`."""
import re

import pytest

from warploom.tools.cli import main

MATMUL = """func.func @mm(%a: tensor<?x?xbf16>, %b: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %c : tensor<?x?xbf16>
}
"""
ADD = """func.func @f(%a: tensor<4x4xbf16>, %b: tensor<4x4xbf16>) -> tensor<4x4xbf16> {
  %c = "wl.add"(%a, %b) : (tensor<4x4xbf16>, tensor<4x4xbf16>) -> tensor<4x4xbf16>
  return %c : tensor<4x4xbf16>
}
"""


@pytest.fixture
def graph(tmp_path):
    def write(text: str):
        path = tmp_path / "graph.mlir"
        path.write_text(text)
        return str(path)
    return write


def test_no_kernel_built_is_an_error_that_says_so(graph, capsys):
    rc = main(["compile", graph(ADD), "--target", "sm_90a"])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "no kernel was built for sm_90a" in err and "left: wl.add" in err and "Traceback" not in err
    assert '"wl.add"' not in out and "--print-ir prints the IR the pipeline left" in err
    assert main(["compile", graph(ADD), "--print-ir"]) == 1
    out, err = capsys.readouterr()
    assert '"wl.add"' in out and out.lstrip().startswith("module")     # the IR alone on stdout, for the reader


@pytest.mark.parametrize("target, mark", [("sm_90a", "wgmma.mma_async"), ("sm_100a", "tcgen05.mma")])
def test_emit_ptx_to_a_file(graph, tmp_path, capsys, target, mark):
    out_file = tmp_path / "k.ptx"
    assert main(["compile", graph(MATMUL), "--target", target, "--emit", "ptx", "-o", str(out_file)]) == 0
    ptx = out_file.read_text()
    assert f".target {target}" in ptx and ".entry wl_gemm_bf16_kn_" in ptx and mark in ptx
    assert f"wrote {out_file}" in capsys.readouterr().err


def test_emit_sass_and_cubin(graph, tmp_path, capsys):
    assert main(["compile", graph(MATMUL), "--target", "sm_100a", "--emit", "sass"]) == 0
    out, err = capsys.readouterr()
    assert "UTCHMMA" in out and "ptxas:" in err and "0 B spills" in err
    cubin = tmp_path / "k.cubin"
    assert main(["compile", graph(MATMUL), "--emit", "cubin", "-o", str(cubin)]) == 0
    assert cubin.read_bytes()[:4] == b"\x7fELF"


def test_a_cubin_needs_an_output_file(graph, capsys):
    assert main(["compile", graph(MATMUL), "--emit", "cubin"]) == 2      # refused before compiling
    assert "give -o FILE" in capsys.readouterr().err


def test_version_names_the_toolchain(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("warploom ") and "mlir" in out and "ptxas" in out


def test_dump_dir_holds_every_step_and_the_resource_map(graph, tmp_path, capsys):
    import json
    folder = tmp_path / "dump"
    assert main(["compile", graph(MATMUL), "--target", "sm_100a", "--dump-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    names = sorted(p.name for p in folder.iterdir())
    assert names[0] == "00-input.mlir" and "04-wl-tile_target_sm_100a.mlir" in names
    assert names[-6:] == ["10-wl-lower-sm100.mlir", "11-ptx.ptx", "12-sass.sass", "13-kernel.cubin",
                          "resources.json", "resources.png"]
    assert (folder / "resources.png").read_bytes()[:4] == b"\x89PNG"
    assert (folder / "13-kernel.cubin").read_bytes()[:4] == b"\x7fELF"
    assert "UTCHMMA" in (folder / "12-sass.sass").read_text()
    res = json.loads((folder / "resources.json").read_text())
    assert res["target"] == "sm_100a" and res["tmem_columns"] == 256 and res["ptxas"]["spill_bytes"] == 0
    assert {r["name"] for r in res["roles"]} == {"producer", "mma", "epilogue"}
    assert {b["name"] for b in res["barriers"]} == {"ab_full", "ab_empty", "acc_full"}
    # the one-screen summary, last on stdout (the IR is in the folder): smem of the limit, TMEM, barriers, roles,
    # registers and spills
    assert "smem 230480 of 232448 B" in out and "TMEM 256 of 512 columns" in out
    assert "role mma: warps 1 (thread)" in out and out.rstrip().splitlines()[-1].startswith("  ptxas: ")
    assert "wl.lower" not in out and "gpu.module" not in out and len(out.splitlines()) < 40


def test_a_built_in_op(tmp_path, capsys):
    """--op attention compiles the standard kernel of those options (persistent at head dim 64)."""
    out_file = tmp_path / "a.ptx"
    assert main(["compile", "--op", "attention", "--head-dim", "64", "--causal", "--emit", "ptx",
                 "-o", str(out_file)]) == 0
    ptx = out_file.read_text()
    assert ".entry wl_attn_bf16_d64_128x128_s2_causal_ov_persistent_q2" in ptx and "wgmma.mma_async" in ptx
    assert "kernel (attention, sm_90a): 384 threads" in capsys.readouterr().out       # -o: stdout has the summary


def test_a_python_file_that_builds_a_graph(tmp_path, capsys):
    script = tmp_path / "g.py"
    script.write_text("import warploom\n"
                      "graph = warploom.Graph('mm')\n"
                      "a = graph.input('a', ('M', 'K'), 'bf16')\n"
                      "b = graph.input('b', ('K', 'N'), 'bf16')\n"
                      "graph.output(graph.matmul(a, b))\n")
    assert main(["compile", str(script), "--target", "sm_100a", "--emit", "ptx"]) == 0
    assert "tcgen05.mma.cta_group::1" in capsys.readouterr().out
    none = tmp_path / "none.py"
    none.write_text("x = 1\n")
    assert main(["compile", str(none)]) == 1
    assert "builds 0 warploom.Graph objects (none): name the one to compile `graph`" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["compile"], "give a .mlir file of wl ops, a Python file that builds a warploom.Graph, or --op"),
    (["compile", "x.mlir", "--op", "matmul"], "give a file (x.mlir) or --op matmul, not both"),
    (["compile", "missing.mlir"], "No such file"),
])
def test_bad_inputs_say_what_to_do(capsys, argv, message):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["explain", "--target", "sm_100a", "--block-m", "256"],
                                  ["explain", "--op", "attention", "--target", "sm_100a", "--head-dim", "64"]])
def test_explain_draws_the_maps(tmp_path, capsys, argv):
    png = tmp_path / "maps.png"
    assert main(argv + ["--png", str(png)]) == 0
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000
    out = capsys.readouterr().out
    assert "tmem (limit 512 columns)" in out
    # registers and spills from ptxas; sm_100a kernels say how they are verified
    assert re.search(r"^ptxas: \d+ registers a thread, 0 B spills, 0 B stack$", out, re.M), out
    assert "has not run on Blackwell hardware" in out


def test_explain_png_without_matplotlib_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    import builtins
    real = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert main(["explain", "--op", "attention", "--target", "sm_100a", "--png", str(tmp_path / "x.png")]) == 1
    assert "pip install 'warploom[plot]'" in capsys.readouterr().err


def test_explain_the_shared_kv_ring(capsys):
    """--shared-kv: the sm_100a attention with K and V through one ring of 3 slots (after the Q tiles, as the seed
    lays it out)."""
    assert main(["explain", "--op", "attention", "--target", "sm_100a", "--head-dim", "64", "--shared-kv"]) == 0
    out = capsys.readouterr().out
    assert "kernel wl_fa4_bf16_d64_256x128_s3_skv" in out
    assert re.search(r"^  kv\s+32768\s+49152\s+1024  3 x 128x64 bf16, 128B swizzle$", out, re.M), out
    assert "kv_full[3] kv_empty[3]" in out


def test_explain_the_swap_ab_gemm_and_two_q_stages(capsys):
    """--swap-ab (docs/swap-ab.md: 64 columns and 8 stages unless given, C from registers) and --q-stages 2 (the
    persistent attention's Q ring in two stages): the kernels they name, with their smem and barrier plans."""
    assert main(["explain", "--op", "gemm", "--swap-ab", "--block-m", "16"]) == 0
    out = capsys.readouterr().out
    assert "kernel wl_gemm_bf16_kn_16x64x64_s8_swap_direct" in out and "dynamic smem 83072 B" in out
    assert main(["explain", "--op", "attention", "--head-dim", "64", "--q-stages", "2"]) == 0
    out = capsys.readouterr().out
    assert "kernel wl_attn_bf16_d64_128x128_s2_ov_persistent_q2" in out
    assert "q_full[2] q_empty[2] k_full[2]" in out and re.search(r"^  total\s+115808 ", out, re.M), out
    assert main(["explain", "--op", "attention", "--q-stages", "2", "--schedule", "grid"]) == 2
    assert "q_stages = 2: 1, or 2 for the persistent sm_90a attention" in capsys.readouterr().err
