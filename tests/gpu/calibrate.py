"""Record GPU outputs of chosen sm_90a GEMM kernels, for calibrating the CPU emulator against the H200.

    PYTHONPATH=. WARPLOOM_CACHE_DIR=.wlcache WARPLOOM_OFFLINE=1 python3 tests/gpu/calibrate.py OUT.npz [--standard | --cluster | --swap]

--standard records every standard sm_90a kernel (STANDARD_CASES), six stream-K cases (STREAMK_CASES) and three swap-AB
cases (SWAP_CASES), --cluster
the five 2x1-cluster cases (CLUSTER_CASES), --swap the swap-AB cases alone, instead of the five CASES. (Two files, as one would pass the 16 MiB a
file the device call brings back.)

Each case names one standard kernel (dtype, B layout, block_n, schedule), ragged sizes and, for the
persistent kernels, a small CTA count (SMS) so each CTA walks several tiles. Two input sets per case:
"exact" (small integers: every product and partial sum is exact in fp32, so any summation order gives
the same fp32 value and the output must match the emulator bit for bit) and "random" (normal values in
the input dtype: hardware and emulator may sum in different orders; the difference is measured).
The kernel is launched through the runtime directly (not warploom.ops), so the kernel and the grid are
exactly the case's. C is poisoned with NaN before each launch. Writes one compressed .npz holding every output as
its 16-bit pattern (uint16, `<key>_c`), a manifest (JSON string) with the kernels' names, cache keys and each case's
`inputs_sha256`, and `inputs` (JSON: how the inputs are made). The inputs are not stored: they come from
tests/emulate/calibration_inputs.py (numpy.random.default_rng(2026), drawn case by case in manifest order), which the
replay (tests/emulate/calibration.py) calls too, and the hash tells it whether it made the same ones.
"""
from __future__ import annotations

import json
import sys

import numpy as np
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0])
from warploom.kernels import STANDARD_KERNELS, GemmSpec, get_kernel  # noqa: E402
from warploom.runtime.launch import default_launcher  # noqa: E402
from warploom.runtime.tensormap import encode_tiled  # noqa: E402
from warploom.runtime.tensors import as_device_tensor  # noqa: E402
from tests.emulate.calibration_inputs import DESCRIPTION, SEED, digest, inputs, to_bits  # noqa: E402

# (dtype, b_layout, block_n, schedule, M, N, K, SMS): M, N, K not multiples of the tiles; K % 8 == 0 and,
# for a [K, N] b, N % 8 == 0 (TMA's 16-byte rows: the kernel's own path, no padding)
CASES = [
    ("bf16", "kn", 128, "grid", 200, 264, 136, None),
    ("bf16", "nk", 256, "grid", 130, 300, 200, None),
    ("bf16", "kn", 256, "persistent", 260, 520, 136, 3),
    ("f16", "nk", 128, "persistent", 300, 200, 72, 2),
    ("f16", "kn", 128, "grid", 129, 136, 64, None),
]
# every standard kernel, at ragged sizes: grid 2 x 2 or 3 x 2 CTAs (4 x 3 to 5 x 3 for the 64-row tiles);
# persistent: 3 CTAs walking 6 or 9 tiles
STANDARD_CASES = [(s.elem, s.b_layout, s.block_n, s.schedule, *((200, 264, 136, None) if s.schedule == "grid"
                                                                else (260, 264, 136, 3)), s.block_m, s.stages)
                  for s in STANDARD_KERNELS["sm_90a"]]
# stream-K (the tuning candidates of both row counts): SMS picked so tiles have 1, 2 and 3+ pieces and some CTA's run
# lies inside one tile; the same SMS on the H200 and in the emulator gives the same pieces
STREAMK_CASES = [("bf16", "kn", 128, "streamk", 129, 264, 656, 13, 128, 4),
                 ("f16", "nk", 256, "streamk", 260, 264, 200, 5, 128, 4),
                 ("bf16", "nk", 64, "streamk", 33, 304, 1104, 9, 64, 8),
                 ("f16", "kn", 64, "streamk", 5, 304, 336, 2, 64, 8),
                 ("bf16", "nk", 128, "streamk", 128, 392, 1104, 11, 128, 6),
                 ("bf16", "kn", 128, "streamk", 330, 520, 336, 4, 128, 4)]    # 8 data-parallel tiles first
# 2x1 clusters sharing B (kernels.CLUSTER_KERNELS): an odd count of 128-row tiles (a cluster's second CTA without
# rows), ragged N and K, 2 clusters walking 3+ tiles each (SMS 4), and both ways of splitting B (boxes for [K, N],
# rows of the one box for a 128-column [N, K] tile)
CLUSTER_CASES = [("bf16", "kn", 256, "persistent", 300, 520, 200, 4, 128, 4, 2),
                 ("f16", "nk", 128, "persistent", 390, 264, 136, 4, 128, 4, 2),
                 ("bf16", "nk", 256, "persistent", 260, 264, 72, 2, 128, 4, 2),
                 ("f16", "kn", 128, "persistent", 520, 392, 136, 4, 128, 4, 2),
                 # walking in bands of 2 rows of pair tiles (5 x 3: bands of 2, 2 and 1; the last field group_m)
                 ("bf16", "kn", 256, "persistent", 1100, 520, 72, 4, 128, 4, 2, 2)]
# swap-AB (kernels.SWAP_KERNELS; the last field: swap): M inside one tile and over two, K past the 8-stage ring, both
# B layouts, one and two consumer warpgroups
SWAP_CASES = [("bf16", "kn", 64, "grid", 5, 200, 656, None, 8, 8, 1, 1, True),
              ("f16", "nk", 64, "grid", 19, 136, 200, None, 16, 8, 1, 1, True),
              ("bf16", "nk", 128, "grid", 16, 300, 136, None, 16, 8, 1, 1, True)]
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16}


def run_case(dtype, b_layout, block_n, schedule, m, n, k, sms, a_np, b_np, block_m=128, stages=4, cluster_m=1,
             group_m=1, swap=False):
    spec = GemmSpec(dtype, b_layout, block_n, stages, "sm_90a", schedule, block_m, cluster_m=cluster_m,
                    group_m=group_m, epilogue="direct" if swap else "tma", swap_ab=swap)
    art = get_kernel(spec)
    a = torch.from_numpy(a_np).to("cuda", TORCH[dtype])
    b = torch.from_numpy(b_np).to("cuda", TORCH[dtype])            # row-major [N, K] or [K, N]: what TMA reads
    c = torch.full((m, n), float("nan"), device="cuda", dtype=TORCH[dtype])
    args = {"a": encode_tiled(art.tensor_maps["a"], as_device_tensor(a), [1, 0]),
            "b": encode_tiled(art.tensor_maps["b"], as_device_tensor(b), [1, 0]),
            # C leaves by TMA (its tensor map) in the standard kernels, from registers (a pointer) in direct ones
            "c": (encode_tiled(art.tensor_maps["c"], as_device_tensor(c), [1, 0]) if "c" in art.tensor_maps
                  else as_device_tensor(c).ptr), "M": m, "N": n, "K": k}
    sizes = {"M": m, "N": n, "K": k, "SMS": sms or 132}
    if schedule == "streamk":      # the fix-up's buffers: the workspace poisoned, the counters zero
        from warploom.runtime import rules
        floats, counts = spec.streamk_buffers(rules.evaluate(art.grid[0], sizes), m, n)
        workspace = torch.full((floats,), float("nan"), device="cuda", dtype=torch.float32)
        counters = torch.zeros(counts, device="cuda", dtype=torch.int32)
        args.update(workspace=workspace.data_ptr(), counters=counters.data_ptr())
    default_launcher().prepare(art, sizes, args, device=0).launch(torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    if schedule == "streamk":
        assert not counters.any(), f"{art.name}: stream-K counters not zero after the launch"
    return c.float().cpu().numpy(), art


def main(path: str, cases: list) -> None:
    rng = np.random.default_rng(SEED)        # calibration_inputs.case_inputs draws the same, in the same order
    arrays, manifest = {}, []
    for i, (dtype, b_layout, block_n, schedule, m, n, k, sms, *rest) in enumerate(cases):
        block_m, stages, cluster_m, group_m, swap = (list(rest) + [128, 4, 1, 1, False][len(rest):])[:5]
        for kind in ("exact", "random"):
            a, b = inputs(kind, dtype, m, n, k, b_layout, rng)
            c, art = run_case(dtype, b_layout, block_n, schedule, m, n, k, sms, a, b, block_m, stages, cluster_m,
                              group_m, swap)
            ref = a.astype(np.float64) @ (b.T if b_layout == "nk" else b).astype(np.float64)
            assert not np.isnan(c).any(), f"case {i} {kind}: unwritten outputs"
            rel = float(np.linalg.norm(c - ref) / np.linalg.norm(ref))
            key = f"case{i}_{kind}"
            arrays[key + "_c"] = to_bits(c, dtype)        # the inputs are made again from the manifest
            manifest.append({"key": key, "dtype": dtype, "b_layout": b_layout, "block_n": block_n, "block_m": block_m, "stages": stages,
                             "cluster_m": cluster_m, "group_m": group_m, "schedule": schedule,
                             **({"epilogue": "direct", "swap_ab": True} if swap else {}), "M": m, "N": n, "K": k, "SMS": sms, "kernel": art.name,
                             "artifact_key": art.key, "rel_err_vs_f64": rel,
                             "inputs_sha256": digest(a, b)})
            print(f"{key}: {art.name} {m}x{n}x{k} SMS={sms} rel err vs float64 {rel:.2e}")
    np.savez_compressed(path, manifest=json.dumps(manifest), inputs=json.dumps(DESCRIPTION), **arrays)
    print(f"wrote {path}")


if __name__ == "__main__":
    flags = sys.argv[2:]
    main(sys.argv[1], STANDARD_CASES + STREAMK_CASES + SWAP_CASES if "--standard" in flags else
         CLUSTER_CASES if "--cluster" in flags else SWAP_CASES if "--swap" in flags else CASES)
