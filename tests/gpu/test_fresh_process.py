"""Each small-M (64-row) sm_90a GEMM kernel, standard and stream-K, first in a fresh process, on exact inputs.

H200 run 18 found wl_gemm_bf16_nk_64x128x64_s4 wrong (every row of a tile but its first) when it was the first
kernel a process launched, and right after some other kernels had run: ptxas had ignored setmaxnreg (C7508) and
serialized the wgmmas (C7520) of the 256-thread kernels. The test in test_matmul.py runs every kernel after many
others, so it passed; this one gives each 64-row kernel a process of its own (tests/gpu/logs/run19-debug_nk64.log).
"""
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu

from warploom.kernels import STANDARD_KERNELS, STREAMK_KERNELS  # noqa: E402

SMALL = [s for s in STANDARD_KERNELS["sm_90a"] + STREAMK_KERNELS["sm_90a"] if s.block_m == 64]

CHILD = """
import sys, torch
from warploom import ops
from warploom.kernels import GemmSpec, get_kernel
spec = GemmSpec({elem!r}, {layout!r}, {block_n}, {stages}, "sm_90a", {schedule!r}, 64)
dtype = torch.bfloat16 if spec.elem == "bf16" else torch.float16
g = torch.Generator(device="cuda").manual_seed(1)
for m, n, k in ((300, 392, 328), (200, 264, 136)):
    a = torch.randint(-2, 3, (m, k), device="cuda", generator=g).to(dtype)
    b = torch.randint(-2, 3, (n, k) if spec.b_layout == "nk" else (k, n), device="cuda", generator=g).to(dtype)
    b = b.t() if spec.b_layout == "nk" else b
    out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    got = ops.run_gemm(get_kernel(spec), a, b, out=out).float()
    bad = int((got != a.float() @ b.float()).sum())
    print(spec.kernel_name, m, n, k, "elements wrong:", bad)
    if bad:
        sys.exit(1)
"""


@pytest.mark.parametrize("spec", SMALL, ids=lambda s: s.kernel_name)
def test_first_kernel_of_a_process_is_exact(spec):
    code = CHILD.format(elem=spec.elem, layout=spec.b_layout, block_n=spec.block_n, stages=spec.stages,
                        schedule=spec.schedule)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
