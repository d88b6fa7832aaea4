"""GPU: the first MUFU probe (2026-12-06, an H100): ex2.approx.ftz.f32 and lg2.approx.f32 on the 2^-23 grids
against the correctly rounded values, and the structure hypotheses the emulator's model rests on (ex2's input read
as fixed point with 23 fraction bits truncated toward zero; 2^(n+f) = 2^n T(f) with n = trunc(x)).

    OUT=<dir> python3 tests/gpu/probe_mufu_structure.py   # writes mufu.npz and mufu.json (the mismatch counts)

Its counts are in tests/gpu/logs/probe-mufu-structure-2026-12-06.json; tests/gpu/probe_mufu.py records the table."""
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


@triton.jit
def _lg2(X, Y, N, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    x = tl.load(X + i, mask=m, other=1.0)
    y = tl.inline_asm_elementwise("lg2.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(Y + i, y, mask=m)


def hw(kernel, x):
    y = torch.empty_like(x)
    n = x.numel()
    kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


def cr(fn, x):
    """Correctly rounded f32 of fn(float64(x))."""
    return fn(x.double()).float()


def ulps(a, b):
    """a - b in ulps (same-sign finite floats), int64."""
    return a.view(torch.int32).long() - b.view(torch.int32).long()


res = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__}
t0 = time.time()
K = 1 << 23
k = torch.arange(0, K + 1, device=dev, dtype=torch.float64)
tables = {}
# ex2 on the 2^-23 grid of [-1, 0] and [0, 1]
for name, xs in (("ex2_neg", -k / K), ("ex2_pos", k / K)):
    x = xs.float()
    y = hw(_ex2, x)
    d = ulps(y, cr(torch.exp2, x))
    res[name] = {"min": int(d.min()), "max": int(d.max()), "nonzero": int((d != 0).sum()), "n": int(d.numel())}
    tables[name] = d.clamp(-127, 127).to(torch.int8).cpu().numpy()
# lg2 on the 2^-23 grid of mantissas [1, 2]
x = (1.0 + k / K).float()
y = hw(_lg2, x)
ref = cr(torch.log2, x)
d = ulps(y, ref)
res["lg2_mant"] = {"min": int(d.min()), "max": int(d.max()), "nonzero": int((d != 0).sum()), "n": int(d.numel()),
                   "abs_err_max": float((y.double() - torch.log2(x.double())).abs().max())}
tables["lg2_mant_bits"] = y.view(torch.int32).cpu().numpy()      # whole results: lg2 near 1 has tiny ulps

# H3: inputs in (-1, 0) at full precision vs the same rounded to a fixed-point grid of 2^-G
g = torch.Generator(device=dev).manual_seed(1)
x = -torch.rand(1 << 24, device=dev, generator=g, dtype=torch.float32)
x = torch.cat([x, -torch.rand(1 << 22, device=dev, generator=g) * 2.0 ** -torch.randint(1, 30, (1 << 22,), device=dev, generator=g)])
x = x.float()
y = hw(_ex2, x)
h3 = {}
for G in (22, 23, 24, 25, 26, 28, 32):
    for mode, f in (("floor", torch.floor), ("round", torch.round), ("trunc", torch.trunc)):
        q = (f(x.double() * 2.0 ** G) / 2.0 ** G).float()
        h3[f"{G}-{mode}"] = int((hw(_ex2, q).view(torch.int32) != y.view(torch.int32)).sum())
res["ex2_fixed_point_small"] = h3
res["ex2_small_vs_cr"] = {"nonzero": int((ulps(y, cr(torch.exp2, x)) != 0).sum()), "n": int(x.numel())}

# H2: |x| >= 1: ex2(x) = 2^n ex2(x - n), n = floor(x) (frac in [0, 1)) or trunc(x) (frac in (-1, 0])
x = (-torch.rand(1 << 24, device=dev, generator=g, dtype=torch.float64) * 127.0).float()
x = x[x.abs() >= 1]
y = hw(_ex2, x)
h2 = {}
for mode, f in (("floor", torch.floor), ("trunc", torch.trunc), ("round", torch.round)):
    n = f(x.double())
    frac = (x.double() - n).float()
    model = torch.ldexp(hw(_ex2, frac).double(), n).float()
    h2[mode] = int((model.view(torch.int32) != y.view(torch.int32)).sum())
res["ex2_split_large"] = h2
res["ex2_large_n"] = int(x.numel())
res["ex2_below_126"] = {"zero": int((hw(_ex2, torch.tensor([-126.5, -127.0, -130.0, -1e30, float("-inf")], device=dev)) == 0).sum())}
# H2 for lg2: lg2(2^e m) = f32(e + lg2(m)) ?
e = torch.randint(-20, 40, (1 << 24,), device=dev, generator=g)
m = (1.0 + torch.floor(torch.rand(1 << 24, device=dev, generator=g, dtype=torch.float64) * K) / K)
x = torch.ldexp(m, e).float()
y = hw(_lg2, x)
lm = hw(_lg2, m.float())
res["lg2_split"] = {"f32_add": int(((e.float() + lm).view(torch.int32) != y.view(torch.int32)).sum()),
                    "f64_add_rounded": int(((e.double() + lm.double()).float().view(torch.int32) != y.view(torch.int32)).sum()),
                    "n": int(x.numel()),
                    "vs_cr_nonzero": int((ulps(y, cr(torch.log2, x)) != 0).sum())}
res["seconds"] = time.time() - t0
np.savez_compressed(os.path.join(OUT, "mufu.npz"), **tables)
json.dump(res, open(os.path.join(OUT, "mufu.json"), "w"), indent=1)
print(json.dumps(res, indent=1))
