"""Element types warploom knows, by their MLIR spelling, with their numpy dtypes.

Lives in runtime/ because the launcher needs it too. numpy and ml_dtypes load on
first use of `NUMPY_DTYPES`: importing ml_dtypes costs about a second, which every
`warploom-opt` start would otherwise pay for names alone.
"""
from __future__ import annotations

import functools

# The element types, by their MLIR builtin spelling.
ELEMENT_TYPES: tuple[str, ...] = ("f32", "f16", "bf16", "f8E4M3FN", "f8E5M2", "f4E2M1FN")


@functools.cache
def numpy_dtypes() -> dict:
    """MLIR spelling -> numpy dtype (ml_dtypes gives exact low-precision rounding)."""
    import ml_dtypes
    import numpy as np
    return {
        "f32": np.dtype(np.float32),
        "f16": np.dtype(np.float16),
        "bf16": np.dtype(ml_dtypes.bfloat16),
        "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
        "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
        "f4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
    }


def __getattr__(name: str):
    if name == "NUMPY_DTYPES":          # the table, built on first use
        return numpy_dtypes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# Short names users may type, mapped to the MLIR spelling.
ALIASES: dict[str, str] = {
    "float32": "f32", "fp32": "f32",
    "float16": "f16", "fp16": "f16", "half": "f16",
    "bfloat16": "bf16",
    "e4m3": "f8E4M3FN", "fp8_e4m3": "f8E4M3FN", "float8_e4m3fn": "f8E4M3FN",
    "e5m2": "f8E5M2", "fp8_e5m2": "f8E5M2", "float8_e5m2": "f8E5M2",
    "e2m1": "f4E2M1FN", "fp4": "f4E2M1FN", "float4_e2m1fn": "f4E2M1FN",
}


def canonical(name) -> str:
    """Return the MLIR spelling of an element type: a name ("bf16", "bfloat16", ...) or a numpy dtype
    (np.float16, ml_dtypes.bfloat16, np.dtype("float32")); ValueError naming the choices for any other."""
    if not isinstance(name, str):
        return from_numpy(name)
    if name in ELEMENT_TYPES:
        return name
    if name.lower() in ALIASES:
        return ALIASES[name.lower()]
    choices = ", ".join(ELEMENT_TYPES)
    raise ValueError(f"unknown element type {name!r}: warploom supports {choices}")


def numpy_dtype(name: str):
    return numpy_dtypes()[canonical(name)]


def from_numpy(dtype) -> str:
    """The MLIR spelling for a numpy dtype, or raise ValueError."""
    import numpy as np
    try:
        if dtype is None:                 # np.dtype(None) is float64, which nobody means here
            raise TypeError
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"element type {dtype!r} is neither a name nor a numpy dtype; warploom supports "
                         f"{', '.join(ELEMENT_TYPES)} (names, or numpy / ml_dtypes dtypes)") from None
    for name, nd in numpy_dtypes().items():
        if nd == dt:
            return name
    raise ValueError(f"numpy dtype {dt} has no warploom element type; supported: {', '.join(ELEMENT_TYPES)}")
