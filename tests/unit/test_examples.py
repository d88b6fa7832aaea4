"""The examples run as a user would run them (the CPU ones end to end; the GPU one says it needs a GPU here)."""
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("script, args, expect", [
    ("gemm_explained.py", ["--target", "sm_100a"], "emulated 200x264x136: max relative error"),
    ("gemm_explained.py", [], "role consumer"),
    ("attention_long_way.py", [], "emulated against float64: OK"),
    ("matmul_on_gpu.py", [], ""),
])
def test_example_runs(script, args, expect):
    r = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert expect in r.stdout
