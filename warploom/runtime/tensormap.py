"""TMA tensor maps: check a tensor against the TMA layout rules, then encode a CUtensorMap
with `cuTensorMapEncodeTiled`.

The rules are checked in Python first (`check_tma_layout`, no driver needed) so a bad layout
gives a message with the value, the rule and the way out, and raises TmaLayoutError, which
callers (warploom.ops) catch to fall back to a path without TMA.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import dtypes
from .artifact import TensorMapSpec
from .tensors import INT_DTYPES, DeviceTensor, elem_bytes

MAX_RANK = 5
MAX_BOX = 256
MAX_GLOBAL_DIM = 2**32
MAX_STRIDE_BYTES = 2**40

# warploom dtype -> CUtensorMapDataType member. TMA moves bytes; fp8 travels as UINT8.
TMA_DATA_TYPES = {
    "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "f8E4M3FN": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "f8E5M2": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "i8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "ui8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "i16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "i32": "CU_TENSOR_MAP_DATA_TYPE_INT32",
    "i64": "CU_TENSOR_MAP_DATA_TYPE_INT64",
}
_SWIZZLE = {0: "CU_TENSOR_MAP_SWIZZLE_NONE", 32: "CU_TENSOR_MAP_SWIZZLE_32B",
            64: "CU_TENSOR_MAP_SWIZZLE_64B", 128: "CU_TENSOR_MAP_SWIZZLE_128B"}
_L2 = {0: "CU_TENSOR_MAP_L2_PROMOTION_NONE", 64: "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
       128: "CU_TENSOR_MAP_L2_PROMOTION_L2_128B", 256: "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"}
_OOB = {"zero": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE", "nan": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"}


class TmaLayoutError(ValueError):
    """The tensor's layout cannot be described by a TMA tensor map; a non-TMA path may still work."""


@dataclass(frozen=True)
class TmaLayout:
    """The checked arguments of cuTensorMapEncodeTiled (all innermost first)."""
    data_type: str                    # CUtensorMapDataType member name
    address: int
    global_dims: tuple[int, ...]
    global_strides: tuple[int, ...]   # bytes, rank - 1 entries (dimension 0 is contiguous)
    box: tuple[int, ...]
    swizzle: str
    l2_promotion: str
    oob_fill: str


def check_tma_layout(spec: TensorMapSpec, t: DeviceTensor, dims_order) -> TmaLayout:
    """Check t against the TMA rules for spec; dims_order lists t's axes innermost first.

    Raises TmaLayoutError (a ValueError) for a layout TMA cannot describe, TypeError for a
    dtype that does not match the spec, ValueError for a bad dims_order.
    """
    where = f"tensor map {spec.name!r} (operand {spec.operand}, dims {spec.dims})"
    want = spec.dtype if spec.dtype in INT_DTYPES else dtypes.canonical(spec.dtype)
    if t.dtype != want:
        raise TypeError(f"{where}: the kernel was built for {want} but the tensor is {t.dtype}; "
                        f"convert it (.to({want})) or build a kernel for {t.dtype}")
    if want not in TMA_DATA_TYPES:
        raise TmaLayoutError(f"{where}: element type {want} has no TMA data type; supported: "
                             f"{', '.join(TMA_DATA_TYPES)}")
    eb = elem_bytes(want)

    order = [int(a) for a in dims_order]
    rank = len(order)
    if not 1 <= rank <= MAX_RANK:
        raise TmaLayoutError(f"{where}: rank {rank} is outside 1..{MAX_RANK}, the TMA limit; "
                             "merge contiguous axes or use the non-TMA path")
    if len(spec.box) != rank:
        raise ValueError(f"{where}: dims_order {order} has {rank} axes but the box {spec.box} has {len(spec.box)}")
    if sorted(set(order)) != sorted(order) or any(not 0 <= a < t.ndim for a in order):
        raise ValueError(f"{where}: dims_order {order} must list distinct axes of a {t.ndim}-d tensor")
    unlisted = [a for a in range(t.ndim) if a not in order and t.shape[a] != 1]
    if unlisted:
        raise ValueError(f"{where}: axes {unlisted} of shape {t.shape} are not in dims_order {order}; "
                         "only size-1 axes may be left out")

    if t.ptr % 16:
        raise TmaLayoutError(f"{where}: base address 0x{t.ptr:x} is not 16-byte aligned (TMA needs "
                             f"address % 16 == 0); the tensor is probably a slice: pass a view starting at a "
                             f"multiple of {max(16 // eb, 1)} elements, or .contiguous()/.clone() it")

    dims = tuple(int(t.shape[a]) for a in order)
    for i, (a, d) in enumerate(zip(order, dims)):
        if not 1 <= d <= MAX_GLOBAL_DIM:
            hint = "an empty tensor needs no kernel: skip the launch" if d == 0 else "split the tensor"
            raise TmaLayoutError(f"{where}: axis {a} (TMA dim {i}) has size {d}, outside 1..2^32; {hint}")

    # Strides of size-1 axes never move the address, so any legal value will do; use one the
    # driver accepts instead of failing on whatever the framework reported (torch may say 1).
    inner_axis = order[0]
    if dims[0] != 1 and t.strides[inner_axis] != 1:
        raise TmaLayoutError(f"{where}: the innermost axis {inner_axis} has stride {t.strides[inner_axis]} "
                             "elements; TMA needs it contiguous (stride 1): pass a .contiguous() tensor or "
                             "a kernel built for the transposed layout")
    strides, span = [], dims[0] * eb
    for i in range(1, rank):
        a = order[i]
        s = span if dims[i] == 1 else int(t.strides[a]) * eb
        if dims[i] == 1:
            s = max(16, -(-s // 16) * 16)
        if s <= 0 or s % 16:
            raise TmaLayoutError(f"{where}: axis {a} (TMA dim {i}) has stride {t.strides[a]} elements = {s} bytes; "
                                 "TMA needs a positive multiple of 16 bytes: pad the row length to a multiple of "
                                 f"{max(16 // eb, 1)} elements or use the non-TMA path")
        if s >= MAX_STRIDE_BYTES:
            raise TmaLayoutError(f"{where}: axis {a} (TMA dim {i}) stride {s} bytes is not below 2^40; "
                                 "split the tensor")
        strides.append(s)
        span = max(span, s * dims[i])

    box = spec.box
    for i, b in enumerate(box):
        if not 1 <= b <= MAX_BOX:
            raise TmaLayoutError(f"{where}: box[{i}] = {b} is outside 1..{MAX_BOX}; use a smaller tile")
    inner_bytes = box[0] * eb
    if inner_bytes % 16:
        raise TmaLayoutError(f"{where}: inner box {box[0]} x {eb} B = {inner_bytes} bytes is not a multiple of 16; "
                             f"make box[0] a multiple of {max(16 // eb, 1)}")
    if spec.swizzle and inner_bytes > spec.swizzle:
        raise TmaLayoutError(f"{where}: inner box {inner_bytes} bytes exceeds the {spec.swizzle}-byte swizzle; "
                             f"use box[0] <= {spec.swizzle // eb} or a wider swizzle")
    return TmaLayout(data_type=TMA_DATA_TYPES[want], address=t.ptr, global_dims=dims, global_strides=tuple(strides),
                     box=box, swizzle=_SWIZZLE[spec.swizzle], l2_promotion=_L2[spec.l2_promotion],
                     oob_fill=_OOB[spec.oob_fill])


def encode_tiled(spec: TensorMapSpec, t: DeviceTensor, dims_order):
    """A CUtensorMap for t (checked first); pass it by value as a kernel parameter."""
    from cuda.bindings import driver

    from ._cuda import ensure_init, error_text

    lay = check_tma_layout(spec, t, dims_order)
    ensure_init()
    rank = len(lay.global_dims)
    err, tmap = driver.cuTensorMapEncodeTiled(
        getattr(driver.CUtensorMapDataType, lay.data_type),
        rank,
        lay.address,
        [driver.cuuint64_t(d) for d in lay.global_dims],
        [driver.cuuint64_t(s) for s in lay.global_strides],
        [driver.cuuint32_t(b) for b in lay.box],
        [driver.cuuint32_t(1)] * rank,  # element strides: every element (no strided traversal)
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, lay.swizzle),
        getattr(driver.CUtensorMapL2promotion, lay.l2_promotion),
        getattr(driver.CUtensorMapFloatOOBfill, lay.oob_fill),
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed for tensor map {spec.name!r}: {error_text(err)} "
                           f"(dtype {lay.data_type}, dims {lay.global_dims}, strides {lay.global_strides} B, "
                           f"box {lay.box}, {lay.swizzle}, address 0x{lay.address:x})")
    return tmap
