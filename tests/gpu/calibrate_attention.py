"""Record H200 outputs of the standard sm_90a attention kernels, to compare the CPU emulator with the hardware.

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 tests/gpu/calibrate_attention.py OUT.npz

One case per (dtype, head dim, causal) standard kernel, and per tall (192-row) one, at ragged sizes (Sq, Sk not
multiples of the tiles; causal cases with Sq > Sk so some rows see no key), GQA 2, layout bshd, through
warploom.ops.attention (out and lse poisoned with NaN first); then two kernels with a share of exp2 on the FMA
polynomial (AttentionSpec.exp2_poly: 2 of 8, and all), and two stream-K kernels on few tiles (every tile split
over several CTAs, merged by the last piece: the merge's ex2 and FMAs as the GPU computes them; the manifest keeps
the SM count, which sets the pieces). Saves q, k, v and out as their 16-bit patterns (int16), lse
as float32, and a manifest. The emulator replays them with `python -m tests.emulate.calibration_attention OUT.npz`:
the outputs and the LSE bitwise (the tensor core, MUFU.EX2 and MUFU.LG2 as measured). The inputs are kept (a CUDA
generator made them; the CPU cannot make them again): the file replaces the family's previous one
(tests/gpu/calibration/README.md: one recording per family, 20 MB in all).
"""
from __future__ import annotations

import json
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])
from warploom import ops  # noqa: E402
from warploom.kernels import ATTENTION_TALL_BLOCK_M, AttentionSpec  # noqa: E402
from warploom.ops_attention import pick_spec  # noqa: E402
from warploom.runtime.launch import sm_count  # noqa: E402

# (dtype, head dim, causal, B, Sq, Sk, Hq, Hkv)
CASES = [(elem, d, causal, 1, 200 if causal else 130, 150 if causal else 300, 2, 1)
         for elem in ("bf16", "f16") for d in (64, 128, 256) for causal in (False, True)]
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16}
# the tall (192-row) tiles ops.attention takes from Sq 4096 on, recorded at a small size by naming them (spec=)
TALL_CASES = [(elem, 64, False, 1, 250, 300, 2, 1) for elem in ("bf16", "f16")]
# the polynomial exp2 (wl-tile{exp2-poly}): (dtype, head dim, causal, B, Sq, Sk, Hq, Hkv, share)
POLY_CASES = [("bf16", 64, True, 1, 200, 150, 2, 1, 0.25), ("f16", 128, False, 1, 130, 300, 2, 1, 1.0)]
# the stream-K kernels (schedule "streamk"), named: 4 tiles of 6 and 8 key blocks (ragged), so on 132 SMs each CTA
# takes one key block and every tile is merged from 6 or 8 pieces
STREAMK_CASES = [("bf16", 128, False, 1, 200, 700, 2, 1), ("f16", 64, False, 1, 130, 1000, 2, 2)]


def main(path: str) -> None:
    arrays, manifest = {}, []
    streamk_from = len(CASES + TALL_CASES + POLY_CASES)
    for i, (elem, d, causal, b, sq, sk, hq, hkv, *poly) in enumerate(CASES + TALL_CASES + POLY_CASES + STREAMK_CASES):
        spec = (pick_spec(elem, d, causal) if i < len(CASES) else
                AttentionSpec(elem, d, causal, schedule="streamk") if i >= streamk_from else
                AttentionSpec(elem, d, causal, exp2_poly=poly[0]) if poly else
                AttentionSpec(elem, d, causal, block_m=ATTENTION_TALL_BLOCK_M))
        g = torch.Generator(device="cuda").manual_seed(100 + i)
        q = torch.randn(b, sq, hq, d, device="cuda", generator=g).to(TORCH[elem])
        k = torch.randn(b, sk, hkv, d, device="cuda", generator=g).to(TORCH[elem])
        v = torch.randn(b, sk, hkv, d, device="cuda", generator=g).to(TORCH[elem])
        out = torch.full_like(q, float("nan"))
        out, lse = ops.attention(q, k, v, causal=causal, out=out, return_lse=True, spec=spec)
        torch.cuda.synchronize()
        for name, t in (("q", q), ("k", k), ("v", v), ("out", out)):
            arrays[f"{i}_{name}"] = t.cpu().view(torch.int16).numpy()
        arrays[f"{i}_lse"] = lse.cpu().numpy()
        sms = sm_count(q.device.index or 0)
        order = 0 if spec.schedule in ("persistent", "streamk") and not causal else None   # causal: the table's
        manifest.append({"case": i, "elem": elem, "head_dim": d, "causal": causal, "B": b, "Sq": sq, "Sk": sk,
                         "Hq": hq, "Hkv": hkv, "layout": "bshd", "kernel": spec.kernel_name, "tile_order": order,
                         "sms": sms})
        print(f"{spec.kernel_name}: B={b} Sq={sq} Sk={sk} H={hq}/{hkv} recorded", flush=True)
    np.savez_compressed(path, manifest=json.dumps(manifest), **arrays)
    print(f"-> {path}")


if __name__ == "__main__":
    main(sys.argv[1])
