"""GPU: record the tensor core's fp32 accumulation (wgmma, bf16/f16 inputs) for warploom.emulate.tensorcore.

    OUT=<dir> python3 tests/gpu/probe_tensorcore.py     # on the GPU machine; writes mma_bf16.npz, mma_f16.npz, mma.json

D = A[64 x K] B[K x 64] + C (K = 16: one k16 wgmma step; 32: two), fp32 C and D, through triton's tl.dot (the
PTX is checked to hold wgmma). Inputs: normal values scaled by random powers of two (narrow and wide exponent
spreads, to expose the alignment and truncation), C zero, small or large. 32 problems per configuration; the
first two of each are kept in tests/emulate/data/hgmma-h100-2026-12-06.npz (tests/emulate/test_tensorcore.py).
Recorded on an H100 at 2026-12-06 (benchmarks/NOTES.md, "The tensor core's and MUFU's arithmetic")."""
import json, os, time, zlib
import numpy as np
import torch
import triton
import triton.language as tl

OUT = os.environ.get("OUT", "/tmp")
dev = "cuda"


@triton.jit
def _mma(A, B, C, D, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr):
    p = tl.program_id(0)
    rm = tl.arange(0, BM)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(A + p * BM * K + rm[:, None] * K + rk[None, :])
    b = tl.load(B + p * K * N + rk[:, None] * N + rn[None, :])
    c = tl.load(C + p * BM * N + rm[:, None] * N + rn[None, :])
    d = tl.dot(a, b, c)
    tl.store(D + p * BM * N + rm[:, None] * N + rn[None, :], d)


def run(dtype, P, K, N, spread, c_scale, seed):
    g = torch.Generator(device=dev).manual_seed(seed)
    BM = 64

    def rnd(*shape):
        x = torch.randn(*shape, device=dev, generator=g, dtype=torch.float32)
        e = torch.randint(-spread, spread + 1, shape, device=dev, generator=g).float()
        return (x * torch.exp2(e)).to(dtype)
    a, b = rnd(P, BM, K), rnd(P, K, N)
    c = (torch.randn(P, BM, N, device=dev, generator=g) * c_scale *
         torch.exp2(torch.randint(-spread, spread + 1, (P, BM, N), device=dev, generator=g).float()))
    d = torch.empty_like(c)
    k = _mma[(P,)](a, b, c, d, N=N, K=K, BM=BM, num_warps=4)
    ptx = k.asm["ptx"]
    return a, b, c, d, ("wgmma" in ptx), ("mma.sync" in ptx)


t0 = time.time()
res = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__}
out = {}
for dname, dtype in (("bf16", torch.bfloat16), ("f16", torch.float16)):
    for K in (16, 32):
        for tag, spread, cs in (("narrow", 2, 1.0), ("wide", 8 if dname == "f16" else 20, 1.0), ("bigc", 3, 64.0),
                                ("zeroc", 4, 0.0)):
            a, b, c, d, wg, ms = run(dtype, 32, K, 64, spread, cs, zlib.crc32(f"{dname}{K}{tag}".encode()) % 1000)
            key = f"{dname}_k{K}_{tag}"
            res[key] = {"wgmma": wg, "mma_sync": ms, "nan": int(torch.isnan(d).sum()), "inf": int(torch.isinf(d).sum())}
            out[key + "_a"] = a.view(torch.int16).cpu().numpy()
            out[key + "_b"] = b.view(torch.int16).cpu().numpy()
            out[key + "_c"] = c.cpu().numpy()
            out[key + "_d"] = d.cpu().numpy()
res["seconds"] = time.time() - t0
for dn in ("bf16", "f16"):
    np.savez_compressed(os.path.join(OUT, f"mma_{dn}.npz"), **{k: v for k, v in out.items() if k.startswith(dn)})
json.dump(res, open(os.path.join(OUT, "mma.json"), "w"), indent=1)
print(json.dumps(res, indent=1))
