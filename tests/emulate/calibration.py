"""Compare the emulator with the H200: emulate the launches recorded by tests/gpu/calibrate.py, bit for bit.

    python -m tests.emulate.calibration tests/gpu/calibration/run26.npz [--seeds 3]

Each recorded case is one standard sm_90a kernel launched on the H200 on "exact" inputs (small
integers: every fp32 partial sum is exact, so any summation order gives the same accumulator) and on
"random" ones. The emulator runs the same kernel (rebuilt here from the same compiler sources: the
manifest's kernel name must match) on the same inputs with the same grid and SMS, under several
interleavings, and the outputs are compared as bits. A recording holds the outputs as 16-bit patterns and no inputs:
they are made again by tests/emulate/calibration_inputs.py, the recorder's own generator, and checked against the
hash the recorder kept (recordings from before 2026-12-07, in git history, hold float32 inputs and outputs; both
forms are read):

- every case, exact and random inputs: the outputs must be bitwise equal. Random inputs are the test of the
  emulator's tensor core (warploom.emulate.tensorcore: the k16 step's alignment, truncation and rounding, measured
  on the device); before that model (2026-12-06) 0.002-0.1% of their outputs differed by a rounding step;
- a difference, if any, is also judged against the bound below, and the table says how many elements
  differ and by how many units in the last place.

Bound (per element): |emulated - H200| <= ulp(output dtype, at the larger magnitude) + 2 K 2^-24 (|A| @ |B|),
i.e. one rounding step of the output plus twice the worst-case error of an fp32 sum of K products in
any order (two sums that may each err that much).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .calibration_inputs import case_inputs, digest, from_bits

CALIBRATION = Path(__file__).resolve().parents[1] / "gpu" / "calibration"
# A recording's name: [<what>-]run<N>[-<what>].npz, N the GPU run (tests/gpu/RESULTS.md) that recorded it. Its family
# is the name without the run number (run26 -> "run", run37-cluster -> "run-cluster", attention-run59 ->
# "attention-run"); the folder keeps one recording per family, the current one (tests/unit/test_calibration_budget.py)
RECORDING = re.compile(r"^(?P<before>(?:[a-z0-9]+-)*)run(?P<run>\d+)(?P<after>(?:-[a-z0-9]+)*)\.npz$")
BUDGET_BYTES = 20 * 10 ** 6        # the whole folder, recordings and README


def family(path: Path) -> str:
    """The kernel family a recording's file name says it holds (its name without the run number)."""
    m = RECORDING.match(Path(path).name)
    if m is None:
        raise ValueError(f"{Path(path).name}: a calibration recording is named [<what>-]run<N>[-<what>].npz")
    return f"{m['before']}run{m['after']}"


def recordings(kind: str) -> list[Path]:
    """The folder's recordings of the GEMM ("gemm": tests/gpu/calibrate.py's, run*.npz) or the attention
    ("attention": calibrate_attention.py's, attention-run*.npz): what the replay tests read."""
    pattern = {"gemm": "run*.npz", "attention": "attention-run*.npz"}[kind]
    return sorted(p for p in CALIBRATION.glob(pattern) if RECORDING.match(p.name))


@dataclass
class Comparison:
    key: str
    kernel: str
    shape: str
    seed: int
    differ: int          # elements whose bits differ
    total: int
    max_ulp: int         # largest difference in units of the output dtype's last place
    within_bound: bool
    worst_ratio: float   # largest |difference| / bound (<= 1 within the bound)

    @property
    def exact(self) -> bool:
        return self.key.endswith("_exact")


def ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    """The spacing of the output dtype at |x| (bf16: 8 significand bits, f16: 11)."""
    bits = {"bf16": 8, "f16": 11}[dtype]
    e = np.floor(np.log2(np.maximum(np.abs(x), 2.0 ** -14)))
    return 2.0 ** (e - (bits - 1))


def ordinal(x: np.ndarray, elem) -> np.ndarray:
    """Integers in the order of the 16-bit float values, so that adjacent floats differ by one."""
    i = x.astype(elem).view(np.int16).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFF), i)


def compare(npz: Path, seeds: int = 3) -> list[Comparison]:
    from warploom.emulate import emulate_gemm
    from warploom.emulate.machine import NUMPY_ELEMS
    from warploom.kernels import GemmSpec

    data = np.load(npz)
    manifest = json.loads(str(data["manifest"]))
    stored = f"{manifest[0]['key']}_a" in data.files       # before 2026-12-07: the inputs in the file, as float32
    made = None if stored else case_inputs(manifest, json.loads(str(data["inputs"]))["seed"])
    out = []
    for case in manifest:
        spec = GemmSpec(case["dtype"], case["b_layout"], case["block_n"], case.get("stages", 4), "sm_90a",
                        case["schedule"], case.get("block_m", 128), epilogue=case.get("epilogue", "tma"),
                        cluster_m=case.get("cluster_m", 1), group_m=case.get("group_m", 1),
                        swap_ab=case.get("swap_ab", False))
        if spec.kernel_name != case["kernel"]:
            raise SystemExit(f"{npz}: case {case['key']} ran kernel {case['kernel']}; this checkout builds "
                             f"{spec.kernel_name} for that spec")
        a, b = (data[f"{case['key']}_a"], data[f"{case['key']}_b"]) if stored else made[case["key"]]
        if "inputs_sha256" in case and digest(a, b) != case["inputs_sha256"]:
            raise SystemExit(f"{npz}: case {case['key']}: the inputs made by tests/emulate/calibration_inputs.py are "
                             "not the ones recorded (a changed generator, or numpy's stream changed): this recording "
                             "cannot be replayed; record a new one (tests/gpu/calibrate.py)")
        gpu = data[f"{case['key']}_c"]
        gpu = gpu if gpu.dtype == np.float32 else from_bits(gpu, case["dtype"])
        elem = NUMPY_ELEMS[case["dtype"]]
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        b64 = b64.T if case["b_layout"] == "nk" else b64
        k = a.shape[1]
        magnitude = np.abs(a64) @ np.abs(b64)
        g = gpu.astype(np.float64)
        for seed in range(seeds):
            emu = emulate_gemm(spec, a, b, seed=seed, sms=case["SMS"] or 2, delay=8).astype(np.float64)
            diff = np.abs(emu - g)
            bound = ulp(np.maximum(np.abs(emu), np.abs(g)), case["dtype"]) + 2 * k * 2.0 ** -24 * magnitude
            differ = int(np.count_nonzero(ordinal(emu, elem) != ordinal(g, elem)))
            ratio = float(np.max(np.where(diff > 0, diff / bound, 0.0)))
            out.append(Comparison(case["key"], case["kernel"], f"{case['M']}x{case['N']}x{case['K']}"
                                  + (f" SMS={case['SMS']}" if case["SMS"] else ""), seed, differ, emu.size,
                                  int(np.max(np.abs(ordinal(emu, elem) - ordinal(g, elem)))),
                                  bool(np.all(diff <= bound) and not np.isnan(emu).any()), ratio))
    return out


def table(rows: list[Comparison]) -> str:
    lines = ["| case | kernel | M x N x K | seed | elements differing | max ulp | within bound (worst diff/bound) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        verdict = "bitwise equal" if r.differ == 0 else f"{r.differ} of {r.total} ({100 * r.differ / r.total:.3f}%)"
        lines.append(f"| {r.key} | {r.kernel} | {r.shape} | {r.seed} | {verdict} | {r.max_ulp} | "
                     f"{'yes' if r.within_bound else 'NO'} ({r.worst_ratio:.2f}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.emulate.calibration", description=__doc__.split("\n")[0])
    ap.add_argument("npz", nargs="?", default=str(CALIBRATION / "run26.npz"), help="a calibrate.py recording")
    ap.add_argument("--seeds", type=int, default=3, help="interleavings per case (default 3)")
    args = ap.parse_args(argv)
    rows = compare(Path(args.npz), args.seeds)
    print(table(rows))
    ok = all(r.differ == 0 for r in rows)
    print("\nevery case bitwise equal (exact and random inputs)" if ok else
          f"\nCALIBRATION FAILS ({'within the bound' if all(r.within_bound for r in rows) else 'beyond the bound'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
