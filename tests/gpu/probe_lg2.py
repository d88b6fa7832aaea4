"""GPU: MUFU.LG2 (lg2.approx.f32) structure: hw(2^e m) against RN/RZ/RD/RU of e + hw(m), m on the 2^-23 grid.

    OUT=<dir> python3 tests/gpu/probe_lg2.py    # on the GPU machine; writes lg2.json (mismatch counts) and lg2.npz

Run 2026-12-06 on an H100: RZ is exact for e >= 0 and misses for e < 0 (benchmarks/NOTES.md, "The tensor core's
and MUFU's arithmetic"); the emulator does not model lg2.approx bit for bit yet."""
import json, os
import numpy as np
import torch
import triton
import triton.language as tl

OUT = os.environ.get("OUT", "/tmp")
dev = "cuda"


@triton.jit
def _lg2(X, Y, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=1.0)
    y = tl.inline_asm_elementwise("lg2.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(Y + i, y, mask=m)


def hw(x):
    y = torch.empty_like(x)
    _lg2[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y


def rz(s):
    f = s.float()
    over = f.double().abs() > s.abs()
    return torch.where(over, torch.nextafter(f, torch.zeros_like(f)), f)


def rd(s):
    f = s.float()
    return torch.where(f.double() > s, torch.nextafter(f, torch.full_like(f, -float("inf"))), f)


def ru(s):
    f = s.float()
    return torch.where(f.double() < s, torch.nextafter(f, torch.full_like(f, float("inf"))), f)


K = 1 << 23
k = torch.arange(0, K, device=dev, dtype=torch.float64)
m = 1.0 + k / K
h0 = hw(m.float()).double()
res = {"gpu": torch.cuda.get_device_name()}
out = {}
for e in (-1, 1, 2, 3, 4, 8, 16, -2, -8, -20):
    y = hw((m * 2.0 ** e).float())
    s = e + h0
    cands = {"rn": s.float(), "rz": rz(s), "rd": rd(s), "ru": ru(s)}
    res[f"e{e}"] = {n: int((c.view(torch.int32) != y.view(torch.int32)).sum()) for n, c in cands.items()}
    if e in (-1, 1, 4, -8):
        bits = y.view(torch.int32).long()
        out[f"e{e}_first"] = np.array([int(bits[0])])
        d = torch.diff(bits)
        res[f"e{e}_diff_range"] = [int(d.min()), int(d.max())]
        out[f"e{e}_diff"] = d.clamp(-128, 127).to(torch.int8).cpu().numpy()
b0 = h0.float().view(torch.int32).long()
out["e0_first"] = np.array([int(b0[0])])
out["e0_diff"] = torch.diff(b0).clamp(-128, 127).to(torch.int8).cpu().numpy()
res["e0_diff_range"] = [int(torch.diff(b0).min()), int(torch.diff(b0).max())]
# values below 1 and odd inputs
sp = torch.tensor([1.0, 2.0, 0.5, 0.0, -1.0, float("inf"), 1e-40, 3.0, 0.75], device=dev)
res["special"] = [[float(a), float(b)] for a, b in zip(sp, hw(sp))]
np.savez_compressed(os.path.join(OUT, "lg2.npz"), **out)
json.dump(res, open(os.path.join(OUT, "lg2.json"), "w"), indent=1)
print(json.dumps(res, indent=1))
