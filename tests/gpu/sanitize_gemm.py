"""GEMMs for compute-sanitizer (memcheck, racecheck): odd sizes so edge tiles are exercised.

    compute-sanitizer --tool memcheck python3 tests/gpu/sanitize_gemm.py [auto|grid|persistent|streamk|candidates]

A schedule runs warploom.ops.matmul under it on four problems (two of them taken by the 64-row kernels);
`candidates` runs every tuning candidate (warploom/tuning: what the shipped table may name) by name, bf16 with
B [K, N] and fp16 with B = w.t(), on ragged problems of M = 5 (the swap-AB kernels join), 40 and 130.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from warploom import ops, tuning  # noqa: E402
from warploom.kernels import get_kernel  # noqa: E402


def check(c, a, b, what):
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    err = (torch.linalg.norm(c.float() - ref) / torch.linalg.norm(ref)).item()
    print(f"{what}: relative error {err:.2e}")
    assert err < 1e-2


mode = sys.argv[1] if len(sys.argv) > 1 else ops.SCHEDULE
print(f"mode {mode}")
if mode == "candidates":
    for elem, layout, m in (("bf16", "kn", 5), ("bf16", "kn", 40), ("bf16", "kn", 130), ("f16", "nk", 5),
                            ("f16", "nk", 40), ("f16", "nk", 130)):
        dtype = torch.bfloat16 if elem == "bf16" else torch.float16
        a = torch.randn(m, 1000, device="cuda", dtype=dtype)
        b = torch.randn(392, 1000, device="cuda", dtype=dtype).t() if layout == "nk" else \
            torch.randn(1000, 392, device="cuda", dtype=dtype)
        for spec in tuning.candidates(elem, layout, m):
            check(ops.run_gemm(get_kernel(spec), a, b), a, b, f"{spec.kernel_name} {m}x392x1000")
else:
    ops.SCHEDULE = mode
    # the last two take the 64-row kernels (M <= 64; M near 128 with few column tiles)
    for m, n, k, transposed in ((1000, 1000, 1000, False), (777, 1001, 1000, True), (16, 4096, 1000, False),
                                (128, 2048, 1000, True)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t() if transposed else \
            torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        check(ops.matmul(a, b), a, b, f"{m}x{n}x{k} transposed_b={transposed}")
print("sanitize_gemm OK")
