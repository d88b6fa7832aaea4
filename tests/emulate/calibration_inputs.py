"""The GEMM calibration's inputs: one definition for the recorder (tests/gpu/calibrate.py, on the GPU) and the replay
(tests/emulate/calibration.py, on the CPU). numpy and ml_dtypes only: no torch, no warploom.

A GEMM recording (tests/gpu/calibration/run*.npz) does not store its inputs: `case_inputs` makes them again from the
manifest, as the recorder made them, and each case's `inputs_sha256` (the hash of the bytes the GPU was given) says
whether they came out the same. numpy does not promise that a Generator's methods give the same stream in every
version (NEP 19); if one changes, the replay stops with that message instead of reporting a mismatch.
"""
from __future__ import annotations

import hashlib

import ml_dtypes
import numpy as np

SEED = 2026
NUMPY_DTYPE = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}
# written into a recording (its `inputs` entry), so that the file says how its inputs are made
DESCRIPTION = {"generator": "numpy.random.default_rng", "seed": SEED,
               "function": "tests/emulate/calibration_inputs.py: inputs(kind, dtype, M, N, K, b_layout, rng)",
               "order": "one generator, drawn from case by case in manifest order (each key's kind: its suffix, "
                        "exact or random)"}


def inputs(kind: str, dtype: str, m: int, n: int, k: int, b_layout: str, rng: np.random.Generator):
    """A [M, K] and B ([N, K] for b_layout "nk", else [K, N]) as float32 holding values of the input dtype. "exact":
    small integers (every product and fp32 partial sum exact, so any summation order gives the same accumulator);
    "random": normal values rounded to the input dtype."""
    if kind == "exact":
        a = rng.integers(-3, 4, size=(m, k)).astype(np.float32)
        b = rng.integers(-3, 4, size=(n, k) if b_layout == "nk" else (k, n)).astype(np.float32)
    else:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if b_layout == "nk" else (k, n)).astype(np.float32)
    low = NUMPY_DTYPE[dtype]      # the values the kernel reads: rounded to the input dtype here, once
    return a.astype(low).astype(np.float32), b.astype(low).astype(np.float32)


def kind_of(key: str) -> str:
    """A case key's input kind: "case3_random" -> "random"."""
    kind = key.rsplit("_", 1)[1]
    if kind not in ("exact", "random"):
        raise ValueError(f"case key {key!r}: its suffix must be exact or random")
    return kind


def digest(a: np.ndarray, b: np.ndarray) -> str:
    """sha256 of the two float32 arrays' bytes (C order), the inputs a case was launched with."""
    h = hashlib.sha256()
    for x in (a, b):
        h.update(np.ascontiguousarray(x, dtype=np.float32).tobytes())
    return h.hexdigest()


def case_inputs(manifest: list[dict], seed: int = SEED) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every case's (a, b), made as the recorder made them: one generator seeded `seed`, drawn from in manifest
    order."""
    rng = np.random.default_rng(seed)
    return {case["key"]: inputs(kind_of(case["key"]), case["dtype"], case["M"], case["N"], case["K"],
                                case["b_layout"], rng) for case in manifest}


def to_bits(c: np.ndarray, dtype: str) -> np.ndarray:
    """float32 outputs of a 16-bit kernel -> their uint16 patterns; refuses a value the output dtype cannot hold."""
    low = np.asarray(c, dtype=np.float32).astype(NUMPY_DTYPE[dtype])
    back = low.astype(np.float32)
    if not np.array_equal(back.view(np.uint32), np.asarray(c, dtype=np.float32).view(np.uint32)):
        raise ValueError(f"outputs not exactly representable in {dtype}: they are not a {dtype} kernel's")
    return low.view(np.uint16)


def from_bits(bits: np.ndarray, dtype: str) -> np.ndarray:
    """uint16 (or int16) patterns of the output dtype -> float32 values."""
    return bits.view(np.uint16).view(NUMPY_DTYPE[dtype]).astype(np.float32)
