"""The examples run as a user would run them (the CPU ones end to end; the GPU one says it needs a GPU here)."""
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("script, args, expect", [
    ("gemm.py", ["--target", "sm_100a"], "emulated 200x264x136: max relative error"),
    ("gemm.py", [], "role consumer"),
    ("attention.py", [], "emulated against float64: OK"),
    ("attention_written_out.py", [], "{'cap': 30.0, 'window': 7}: emulated against the float64 interpreter of the "
                                     "graph: OK"),
    ("matmul_on_gpu.py", [], ""),
    ("inspect_ir.py", ["--target", "sm_100a", "--after", "wl-plan-tmem"], '"wl.buffer"() {columns = 256'),
])
def test_example_runs(script, args, expect):
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert expect in r.stdout


def test_the_mlir_example_compiles(tmp_path):
    """examples/attention.mlir: fused, planned and assembled by `warploom compile`, every product dumped."""
    r = subprocess.run([sys.executable, "-m", "warploom.tools.cli", "compile", str(EXAMPLES / "attention.mlir"),
                        "--dump-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"00-input.mlir", "02-wl-fuse.mlir", "resources.json", "resources.png"} <= names
    assert any(n.endswith(".cubin") for n in names) and any(n.endswith(".sass") for n in names)


def test_the_tall_tile_spills_as_the_readme_says():
    """README's assembly note: the 192-row attention tiles spill (ptxas's report, both dtypes), the 128-row one of the
    same head dim does not; the numbers the README quotes are ptxas's."""
    import re

    from warploom.kernels import STANDARD_ATTENTION_KERNELS, AttentionSpec, get_kernel
    readme = " ".join((EXAMPLES.parent / "README.md").read_text().split())
    said = re.search(r"spill (\d+) B to local memory \(ptxas: (\d+) B spills, (\d+) B stack", readme)
    tall = [s for s in STANDARD_ATTENTION_KERNELS["sm_90a"] if s.block_m == 192]
    assert {s.elem for s in tall} == {"bf16", "f16"} and len(tall) == 2 and {s.head_dim for s in tall} == {64}
    for spec in tall:
        report = get_kernel(spec).meta["ptxas"]
        assert (report["spill_bytes"], report["spill_bytes"], report["stack_bytes"]) == tuple(map(int, said.groups()))
    assert get_kernel(AttentionSpec("bf16", 64)).meta["ptxas"]["spill_bytes"] == 0
