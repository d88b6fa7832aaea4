"""Compare the emulated attention kernels with the H200: replay tests/gpu/calibrate_attention.py's recording.

    python -m tests.emulate.calibration_attention tests/gpu/calibration/attention-run59.npz [--seeds 2]

Each recorded case is one standard sm_90a attention kernel run by warploom.ops.attention on the H200 (random
inputs, ragged sizes, GQA 2, causal cases with rows that see no key). The emulator runs the same kernel (the
manifest's name must be the one the compiler builds now) on the same inputs. Since the emulator models the tensor
core's accumulation and MUFU.EX2 as measured on the device (warploom.emulate.tensorcore, warploom.emulate.mufu;
2026-12-06) the outputs are expected bitwise equal; before, 0.01-3% of them differed by a rounding step or a few.
The LSE goes through lg2.approx, which the emulator takes from MUFU.LG2's measured table too: bitwise equal as well.
A recording keeps its inputs (q, k, v as 16-bit patterns): they come from a CUDA torch generator, which the CPU
cannot run again.
The table reports how many outputs differ, by how many units in the last place (of the 16-bit output type), the
largest LSE difference, and whether the H200's own output passes the bound the emulator's outputs are held to
(warploom.emulate.judge): the bound must hold for the hardware, or it is too tight to mean anything.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass

import ml_dtypes
import numpy as np

DTYPES = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}


@dataclass
class AttentionComparison:
    kernel: str
    shape: str
    seed: int
    differ: int              # outputs whose 16-bit patterns differ
    total: int
    max_ulps: int            # the largest difference in units in the last place of the output type (an output
                             # near 0 has tiny ulps: see max_abs)
    max_abs: float           # max |out emulated - out H200|
    lse_diff: float          # max |lse emulated - lse H200| over rows that see a key
    h200_within_bound: bool  # the H200's output passes warploom.emulate.judge against float64
    h200_problem: str


def _ordered(bits: np.ndarray) -> np.ndarray:
    """16-bit float patterns -> integers in float order (so a difference counts ulps across zero too)."""
    b = bits.astype(np.int32) & 0xFFFF
    return np.where(b & 0x8000, 0x8000 - (b & 0x7FFF), 0x8000 + b)


def compare(path, seeds: int = 1) -> list[AttentionComparison]:
    from warploom.build import planned_attention_program
    from warploom.emulate import emulate_attention
    from warploom.emulate.judge import judge_attention
    from warploom.lowering import kernel_name

    data = np.load(path)
    rows = []
    for case in json.loads(str(data["manifest"])):
        i, elem, d, causal, layout = case["case"], case["elem"], case["head_dim"], case["causal"], case["layout"]
        dt = DTYPES[elem]
        q, k, v, out = (data[f"{i}_{n}"].view(np.uint16).view(dt) for n in ("q", "k", "v", "out"))
        lse = data[f"{i}_lse"]
        schedule = next((s for s in ("persistent", "streamk") if f"_{s}" in case["kernel"]), "grid")
        block_m = int(re.search(r"_d\d+_(\d+)x\d+_", case["kernel"]).group(1))      # 128, or 192 (tall)
        q_stages = re.search(r"_q(\d)(_p\d)?$", case["kernel"])                      # _q2: Q prefetched
        poly = re.search(r"_p(\d)$", case["kernel"])                                  # _pK: K of 8 exp2 by FMA
        program = planned_attention_program(elem, d, causal, schedule=schedule, block_m=block_m,
                                            q_stages=int(q_stages.group(1)) if q_stages else 1,
                                            exp2_poly=int(poly.group(1)) / 8 if poly else None)
        if kernel_name(program) != case["kernel"]:
            raise ValueError(f"case {i}: recorded with {case['kernel']}, the compiler builds {kernel_name(program)} "
                             "now: record a new run (tests/gpu/calibrate_attention.py)")
        h200 = judge_attention(out, lse, q, k, v, elem, causal, layout)
        shape = f"B{case['B']} Sq{case['Sq']} Sk{case['Sk']} H{case['Hq']}/{case['Hkv']}"
        for seed in range(seeds):
            # a persistent kernel: its tile order as the H200 run chose it (recorded), on 3 CTAs walking the tiles
            # (a tile's arithmetic does not depend on its CTA); a stream-K one on the GPU's SM count, which sets
            # the pieces each tile is merged from
            sms = case["sms"] if schedule == "streamk" else 3
            o, l = emulate_attention(q, k, v, causal=causal, seed=seed, layout=layout, program=program,
                                     tile_order=case.get("tile_order"), sms=sms)
            a, b = o.view(np.uint16), out.view(np.uint16)
            seen = np.isfinite(lse)
            rows.append(AttentionComparison(
                case["kernel"], shape, seed, int((a != b).sum()), a.size,
                int(np.abs(_ordered(a) - _ordered(b)).max()),
                float(np.abs(o.astype(np.float64) - out.astype(np.float64)).max()),
                float(np.abs(l[seen].astype(np.float64) - lse[seen]).max()) if seen.any() else 0.0,
                h200.ok, h200.problem))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.emulate.calibration_attention", description=__doc__.split("\n")[0])
    ap.add_argument("npz")
    ap.add_argument("--seeds", type=int, default=1)
    args = ap.parse_args(argv)
    rows = compare(args.npz, args.seeds)
    print(f"{'kernel':<40} {'shape':<22} {'seed':>4} {'differ':>12} {'max ulps':>8} {'max |d|':>9} {'lse diff':>9}  "
          "H200 within bound")
    for r in rows:
        print(f"{r.kernel:<40} {r.shape:<22} {r.seed:>4} {r.differ:>6}/{r.total:<6} {r.max_ulps:>8} {r.max_abs:9.2e} "
              f"{r.lse_diff:9.2e}  "
              f"{'yes' if r.h200_within_bound else 'NO: ' + r.h200_problem}")
    return 0 if all(r.h200_within_bound for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
