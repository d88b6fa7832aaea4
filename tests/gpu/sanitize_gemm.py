"""One mid-size GEMM for compute-sanitizer (memcheck, racecheck): odd sizes so edge tiles are exercised.

    compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm.py [auto|grid|persistent]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from warploom import ops  # noqa: E402

ops.SCHEDULE = sys.argv[1] if len(sys.argv) > 1 else ops.SCHEDULE
print(f"schedule {ops.SCHEDULE}")
# the last two take the 64-row kernels (M <= 64; M near 128 with few column tiles)
for m, n, k, transposed in ((1000, 1000, 1000, False), (777, 1001, 1000, True), (16, 4096, 1000, False),
                            (128, 2048, 1000, True)):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t() if transposed else \
        torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = ops.matmul(a, b)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    err = (torch.linalg.norm(c.float() - ref) / torch.linalg.norm(ref)).item()
    print(f"{m}x{n}x{k} transposed_b={transposed}: relative error {err:.2e}")
    assert err < 1e-2
print("sanitize_gemm OK")
