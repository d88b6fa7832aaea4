"""GPU: record MUFU.EX2 (ex2.approx.ftz.f32) for warploom.emulate.mufu, and check the model on random inputs.

    OUT=<dir> python3 tests/gpu/probe_mufu.py    # on the GPU machine; writes mufu_ex2.npz (the table) and mufu2.json

Saves the hardware's results on the 2^-23 grids of [-1, 0] and [0, 1] (the first value's bits and the int8
differences of consecutive bit patterns: warploom/emulate/data/ex2_gh100.npz is this file) and checks the model
    ex2(x) = 2^n T(r),  X = trunc(x * 2^23) (toward zero), n = trunc(X / 2^23), r = X - n 2^23 (T: the grid values),
    flushed to +0 below 2^-126 (and x subnormal -> 1)
on random inputs of several ranges (mismatch counts)."""
import json, os, time
import numpy as np
import torch
import triton
import triton.language as tl

OUT = os.environ.get("OUT", "/tmp")
dev = "cuda"


@triton.jit
def _ex2(X, Y, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=0.0)
    y = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(Y + i, y, mask=m)


def hw(x):
    y = torch.empty_like(x)
    _ex2[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


t0 = time.time()
K = 1 << 23
k = torch.arange(0, K + 1, device=dev, dtype=torch.float64)
T = {}
out = {}
res = {"gpu": torch.cuda.get_device_name()}
for name, sign in (("neg", -1.0), ("pos", 1.0)):
    y = hw((sign * k / K).float())
    T[name] = y.double()
    bits = y.view(torch.int32).long()
    d = torch.diff(bits)
    res[f"diff_{name}"] = [int(d.min()), int(d.max())]
    out[f"ex2_{name}_first"] = np.array([int(bits[0])], np.int64)
    out[f"ex2_{name}_diff"] = d.clamp(-128, 127).to(torch.int8).cpu().numpy()


def model(x):
    X = torch.trunc(x.double() * K)
    n = torch.trunc(X / K)
    r = (X - n * K).long()
    t = torch.where(r <= 0, T["neg"][(-r).clamp(0, K)], T["pos"][r.clamp(0, K)])
    y = torch.ldexp(t, n)
    y = torch.where(y < 2.0 ** -126, torch.zeros_like(y), y)
    return y.float()


g = torch.Generator(device=dev).manual_seed(2)
N = 1 << 24
cases = {
    "uniform[-127,0]": -torch.rand(N, device=dev, generator=g, dtype=torch.float64) * 127,
    "uniform[-1,0]": -torch.rand(N, device=dev, generator=g, dtype=torch.float64),
    "tiny": -torch.rand(N, device=dev, generator=g, dtype=torch.float64) * 2.0 ** -torch.randint(0, 40, (N,), device=dev, generator=g).double(),
    "uniform[0,16]": torch.rand(N, device=dev, generator=g, dtype=torch.float64) * 16,
    "near-126": -126.0 - torch.rand(N, device=dev, generator=g, dtype=torch.float64) * 1.5,
    "uniform[-20,0]": -torch.rand(N, device=dev, generator=g, dtype=torch.float64) * 20,
}
res["model_mismatch"] = {}
for name, x in cases.items():
    x = x.float()
    y, m = hw(x), model(x)
    bad = y.view(torch.int32) != m.view(torch.int32)
    res["model_mismatch"][name] = int(bad.sum())
    if bad.any():
        i = torch.nonzero(bad)[:5, 0]
        res[f"examples_{name}"] = [[float(x[j]), float(y[j]), float(m[j])] for j in i]
special = torch.tensor([0.0, -0.0, 1e-40, -1e-40, -126.0, -126.5, -127.0, -1e30, float("-inf"), 127.9, 128.0], device=dev)
res["special"] = [[float(a), float(b)] for a, b in zip(special, hw(special))]
res["seconds"] = time.time() - t0
np.savez_compressed(os.path.join(OUT, "mufu_ex2.npz"), **out)
json.dump(res, open(os.path.join(OUT, "mufu2.json"), "w"), indent=1)
print(json.dumps(res, indent=1))
