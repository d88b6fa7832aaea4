"""GPU: record MUFU.RCP (rcp.approx.ftz.f32) for warploom.emulate.mufu, and check a model of it on random inputs.

    OUT=<dir> python3 tests/gpu/probe_rcp.py    # on the GPU machine; writes rcp_gh100.npz (the table) and rcp.json

Saves the hardware's 1/m on the 2^-23 grid of m in [1, 2] (the first value's bits and the int8 differences of
consecutive bit patterns) and checks the model
    rcp(s 2^e m) = s 2^-e R(m)   (m in [1, 2), R the grid values), flushed to 0 below 2^-126; a subnormal or zero
    input reads as 0 (+-inf); inf -> 0
on random inputs of several ranges (mismatch counts, and the first examples of any mismatch)."""
import json, os, time
import numpy as np
import torch
import triton
import triton.language as tl

OUT = os.environ.get("OUT", "/tmp")
dev = "cuda"


@triton.jit
def _rcp(X, Y, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=1.0)
    y = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(Y + i, y, mask=m)


def hw(x):
    y = torch.empty_like(x)
    _rcp[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


t0 = time.time()
K = 1 << 23
k = torch.arange(0, K + 1, device=dev, dtype=torch.float64)
grid = (1.0 + k / K).float()
R = hw(grid)
bits = R.view(torch.int32).long()
d = torch.diff(bits)
res = {"gpu": torch.cuda.get_device_name(), "diff": [int(d.min()), int(d.max())],
       "exact_vs_correctly_rounded": int((R == (1.0 / grid.double()).float()).sum())}
np.savez_compressed(os.path.join(OUT, "rcp_gh100.npz"), rcp_first=np.array([int(bits[0])], np.int64),
                    rcp_diff=d.clamp(-128, 127).to(torch.int8).cpu().numpy())
Rd = R.double()


def model(x):
    x = x.float()
    tiny = x.abs() < 2.0 ** -126                                   # zero or subnormal: ftz reads 0
    m, e = torch.frexp(x.double().abs())                          # |x| = m 2^e, m in [0.5, 1)
    m, e = m * 2, e - 1                                           # m in [1, 2)
    j = torch.round((m - 1) * K).long().clamp(0, K)
    y = torch.ldexp(Rd[j], -e) * torch.sign(x.double())
    y = torch.where(y.abs() < 2.0 ** -126, torch.zeros_like(y) * torch.sign(x.double()), y)
    y = torch.where(tiny, torch.where(torch.signbit(x), -torch.inf, torch.inf).double(), y)
    y = torch.where(torch.isinf(x), torch.zeros_like(y) * torch.sign(x.double()), y)
    return y.float()


g = torch.Generator(device=dev).manual_seed(3)
N = 1 << 24
u = lambda: torch.rand(N, device=dev, generator=g, dtype=torch.float64)
cases = {
    "[1,2)": 1 + u(),
    "[-64,64]": (u() * 2 - 1) * 64,
    "wide": torch.sign(u() - 0.5) * torch.exp2((u() * 250) - 125),
    "near-2^126": torch.exp2(125.5 + u() * 2.4),
    "[0.5,32]": 0.5 + u() * 31.5,
}
res["model_mismatch"] = {}
for name, x in cases.items():
    x = x.float()
    y, m = hw(x), model(x)
    bad = (y.view(torch.int32) != m.view(torch.int32)) & ~(torch.isnan(y) & torch.isnan(m))
    res["model_mismatch"][name] = int(bad.sum())
    if bad.any():
        i = torch.nonzero(bad)[:5, 0]
        res[f"examples_{name}"] = [[float(x[j]), float(y[j]), float(m[j])] for j in i]
special = torch.tensor([0.0, -0.0, 1e-40, -1e-40, 1.0, -1.0, 2.0, 3.0, 1e30, float("inf"), -float("inf"),
                        2.0 ** 126, 2.0 ** 127, 1.5 * 2.0 ** 126], device=dev)
res["special"] = [[float(a), float(b), float(c)] for a, b, c in zip(special, hw(special), model(special))]
res["seconds"] = round(time.time() - t0, 1)
json.dump(res, open(os.path.join(OUT, "rcp.json"), "w"), indent=1)
print(json.dumps(res)[:2000])
