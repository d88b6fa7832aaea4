"""warploom.ops.matmul beside torch on a CUDA GPU (H100/H200: the sm_90a kernels; B200: the sm_100a ones).

    python examples/matmul_on_gpu.py

Needs torch and a GPU; elsewhere it says so and exits 0. Kernels compile on first use (or come from the cache:
WARPLOOM_CACHE_DIR, filled by `warploom precompile`).
"""
import sys


def main() -> int:
    try:
        import torch
    except ImportError:
        print("torch is not installed: this example runs on a GPU machine with torch")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA GPU here: this example runs on a GPU machine")
        return 0
    from warploom.ops import matmul
    torch.manual_seed(0)
    for m, n, k, transposed in ((4096, 4096, 4096, False), (1000, 3000, 520, True)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16).t() if transposed else \
            torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c = matmul(a, b)
        ref = (a.float() @ b.float())
        err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
        print(f"{m}x{n}x{k}{' (B as a transposed [N, K])' if transposed else ''}: max relative error {err:.1e}")
        if err > 1e-2:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
