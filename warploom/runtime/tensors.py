"""Zero-copy views of the user's GPU tensors (torch, cupy, anything with
`__cuda_array_interface__` or DLPack) as a `DeviceTensor`: address, shape, strides in
elements, warploom dtype, device. Also output allocation in the same framework and the
stream the framework is currently using.

torch and cupy are imported only when the user's objects come from them (checked by the
module name of their type), so this module imports on machines that have neither.
"""
from __future__ import annotations

import functools

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from warploom.targets import ELEMENT_BITS

from . import dtypes

# Integer element types (for indices, masks, test outputs); MLIR spelling -> numpy dtype.
INT_DTYPES: dict[str, np.dtype] = {
    "i8": np.dtype(np.int8), "i16": np.dtype(np.int16), "i32": np.dtype(np.int32), "i64": np.dtype(np.int64),
    "ui8": np.dtype(np.uint8),
}


def numpy_dtype(name: str) -> np.dtype:
    """numpy dtype of a warploom element type, integers included."""
    return INT_DTYPES[name] if name in INT_DTYPES else dtypes.numpy_dtype(name)


def elem_bytes(name: str) -> int:
    if name in INT_DTYPES:
        return INT_DTYPES[name].itemsize
    bits = ELEMENT_BITS[dtypes.canonical(name)]
    if bits % 8:
        raise ValueError(f"{name} packs {8 // bits} elements per byte; address it as bytes (ui8) instead")
    return bits // 8


def from_numpy_dtype(dt) -> str:
    dt = np.dtype(dt)
    for name, nd in INT_DTYPES.items():
        if nd == dt:
            return name
    return dtypes.from_numpy(dt)


@dataclass
class DeviceTensor:
    """A GPU tensor seen without copying. strides are in ELEMENTS; obj keeps the memory alive.

    stream: for `__cuda_array_interface__` producers that name a stream (CAI v3), that stream;
    work on this tensor should be ordered after it. None otherwise.
    """
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str
    device: int
    framework: str  # "torch" | "cupy" | "cai"
    obj: Any
    stream: int | None = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def elem_bytes(self) -> int:
        return elem_bytes(self.dtype)

    def is_contiguous(self) -> bool:
        return self.strides == contiguous_strides(self.shape)


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(tuple(shape)):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def _module_of(x) -> str:
    return type(x).__module__ or ""


# ---- torch ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def _torch_dtype_map(torch) -> dict:
    """torch dtype -> warploom name; getattr because older torch lacks some fp8 types."""
    names = {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float8_e4m3fn": "f8E4M3FN",
             "float8_e5m2": "f8E5M2", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "ui8"}
    return {getattr(torch, t): w for t, w in names.items() if hasattr(torch, t)}


def _from_torch(x) -> DeviceTensor:
    import torch
    if not x.is_cuda:
        raise ValueError(f"tensor is on {x.device.type}; warploom kernels need CUDA tensors: move it with .cuda()")
    table = _torch_dtype_map(torch)
    if x.dtype not in table:
        raise TypeError(f"torch dtype {x.dtype} is not supported by warploom; supported: "
                        f"{', '.join(str(d) for d in table)}")
    return DeviceTensor(ptr=int(x.data_ptr()), shape=tuple(int(s) for s in x.shape),
                        strides=tuple(int(s) for s in x.stride()), dtype=table[x.dtype],
                        device=int(x.device.index if x.device.index is not None else torch.cuda.current_device()),
                        framework="torch", obj=x)


# ---- __cuda_array_interface__ -----------------------------------------------------------

# typestr (without byte order) -> warploom name. bf16 is '<V2' as torch (>= 2.6) and ml_dtypes
# spell it; a 1-byte 'V1' is ambiguous (two fp8 formats) unless descr or .dtype names it.
_TYPESTR = {"f4": "f32", "f2": "f16", "V2": "bf16", "f1": "f8E5M2",
            "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64", "u1": "ui8"}
_DESCR_NAMES = {"bfloat16": "bf16", "float8_e4m3fn": "f8E4M3FN", "float8_e5m2": "f8E5M2",
                "e4m3": "f8E4M3FN", "e5m2": "f8E5M2"}


def _cai_dtype(x, cai: dict) -> str:
    # An object that carries a numpy(-like) dtype (cupy, numba, ml_dtypes arrays) says it best.
    dt = getattr(x, "dtype", None)
    if dt is not None:
        try:
            return from_numpy_dtype(dt)
        except (TypeError, ValueError):
            pass
    typestr = cai.get("typestr")
    if not isinstance(typestr, str) or len(typestr) < 3:
        raise TypeError(f"__cuda_array_interface__ typestr {typestr!r} is not a valid type string")
    order, code = typestr[0], typestr[1:]
    if order == ">" and code[-1] != "1":
        raise TypeError(f"typestr {typestr!r} is big-endian; GPUs are little-endian: convert the array first")
    for entry in cai.get("descr") or ():
        if isinstance(entry, (tuple, list)) and entry and str(entry[0]).lower() in _DESCR_NAMES:
            return _DESCR_NAMES[str(entry[0]).lower()]
    if code in _TYPESTR:
        return _TYPESTR[code]
    if code == "V1":
        raise TypeError(f"typestr {typestr!r} is a 1-byte type that could be either fp8 format; pass an object "
                        "whose .dtype is ml_dtypes.float8_e4m3fn/float8_e5m2, or a descr naming it")
    raise TypeError(f"typestr {typestr!r} has no warploom element type; supported: "
                    f"{', '.join(sorted(set(_TYPESTR.values())))}")


def _pointer_device(ptr: int) -> int:
    """Device ordinal owning a pointer, asked of the driver; 0 when no driver can be reached
    (then nothing can launch anyway, and the launcher will report the missing driver)."""
    if ptr == 0:
        return 0
    try:
        from cuda.bindings import driver

        from ._cuda import check, ensure_init
        ensure_init()
        attr = driver.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
        return int(check(driver.cuPointerGetAttribute(attr, ptr), "cuPointerGetAttribute(DEVICE_ORDINAL)"))
    except RuntimeError:
        return 0


def _from_cai(x, framework: str) -> DeviceTensor:
    cai = x.__cuda_array_interface__
    if not isinstance(cai, dict) or "data" not in cai or "shape" not in cai:
        raise TypeError(f"{type(x).__name__}.__cuda_array_interface__ lacks 'data' or 'shape'")
    if cai.get("mask") is not None:
        raise TypeError("masked arrays (__cuda_array_interface__ 'mask') are not supported: "
                        "fill the masked values first")
    dtype = _cai_dtype(x, cai)
    size = elem_bytes(dtype)
    shape = tuple(int(s) for s in cai["shape"])
    ptr = int(cai["data"][0] or 0)
    if cai.get("strides") is None:
        strides = contiguous_strides(shape)
    else:
        byte_strides = tuple(int(s) for s in cai["strides"])
        if len(byte_strides) != len(shape):
            raise TypeError(f"__cuda_array_interface__ strides {byte_strides} do not match shape {shape}")
        bad = [s for s in byte_strides if s % size]
        if bad:
            raise ValueError(f"byte strides {byte_strides} are not multiples of the {size}-byte element size of "
                             f"{dtype}; make the array contiguous first")
        strides = tuple(s // size for s in byte_strides)
    device = getattr(getattr(x, "device", None), "id", None)
    if not isinstance(device, int):
        device = _pointer_device(ptr)
    stream = cai.get("stream") if cai.get("version", 0) >= 3 else None
    return DeviceTensor(ptr=ptr, shape=shape, strides=strides, dtype=dtype, device=device,
                        framework=framework, obj=x, stream=int(stream) if stream else None)


# ---- entry point ------------------------------------------------------------------------

def as_device_tensor(x) -> DeviceTensor:
    """View x (torch tensor, cupy array, CAI object, DLPack object) as a DeviceTensor, no copy."""
    if isinstance(x, DeviceTensor):
        return x
    mod = _module_of(x)
    # torch is imported only if x's type comes from it, or if the user already imported it
    # (then subclasses of torch.Tensor defined elsewhere are still seen as torch).
    torch = sys.modules.get("torch")
    if (mod.startswith("torch") and hasattr(x, "data_ptr")) or (
            torch is not None and isinstance(getattr(torch, "Tensor", None), type) and isinstance(x, torch.Tensor)):
        return _from_torch(x)
    if hasattr(x, "__cuda_array_interface__"):
        return _from_cai(x, "cupy" if mod.startswith("cupy") else "cai")
    if mod == "numpy":
        raise ValueError("numpy arrays are host memory; warploom kernels need CUDA tensors "
                         "(torch.from_numpy(a).cuda() or cupy.asarray(a))")
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        dev_type, _ = x.__dlpack_device__()
        if int(dev_type) not in (2, 13):  # kDLCUDA, kDLCUDAManaged
            raise ValueError(f"{type(x).__name__} lives on DLPack device type {int(dev_type)}, not CUDA (2); "
                             "warploom kernels need CUDA tensors")
        try:
            import torch
        except ImportError:
            raise TypeError(f"{type(x).__name__} offers only DLPack, which warploom reads through torch, and torch "
                            "is not installed; pass a torch tensor, a cupy array or an object with "
                            "__cuda_array_interface__") from None
        # The torch view shares memory and keeps the producer alive; outputs come back as torch.
        return _from_torch(torch.from_dlpack(x))
    raise TypeError(f"cannot use a {type(x).__module__}.{type(x).__name__} as a GPU tensor: pass a torch CUDA "
                    "tensor, a cupy array, or an object with __cuda_array_interface__ or __dlpack__")


# ---- outputs and streams ----------------------------------------------------------------

class DeviceBuffer:
    """A minimal GPU array (cuMemAlloc) for callers whose inputs are plain CAI objects.

    Exposes __cuda_array_interface__ v3 (C-contiguous), .dtype, .shape, .ptr; frees on GC.
    """

    def __init__(self, shape, dtype: str, device: int = 0):
        from cuda.bindings import driver

        from ._cuda import check, on_device
        self.shape = tuple(int(s) for s in shape)
        self.wl_dtype = dtype
        self.dtype = numpy_dtype(dtype)
        self.device = device
        n = 1
        for s in self.shape:
            n *= s
        self.nbytes = n * self.dtype.itemsize
        self.ptr = 0
        if self.nbytes:
            with on_device(device):
                self.ptr = int(check(driver.cuMemAlloc(self.nbytes), f"cuMemAlloc({self.nbytes} bytes)"))

    @property
    def __cuda_array_interface__(self) -> dict:
        name = {"bf16": "bfloat16", "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2"}.get(self.wl_dtype, "")
        return {"version": 3, "shape": self.shape, "typestr": self.dtype.str, "descr": [(name, self.dtype.str)],
                "data": (self.ptr, False), "strides": None, "stream": None}

    def __del__(self):
        ptr, self.ptr = getattr(self, "ptr", 0), 0
        if ptr and sys is not None and not sys.is_finalizing():
            try:
                from cuda.bindings import driver

                from ._cuda import on_device
                with on_device(self.device):
                    driver.cuMemFree(ptr)
            except Exception:  # noqa: BLE001 - never raise from a finalizer
                pass

    def __repr__(self) -> str:
        return f"DeviceBuffer(shape={self.shape}, dtype={self.wl_dtype}, device={self.device}, ptr=0x{self.ptr:x})"


def empty_like_framework(ref: DeviceTensor, shape, dtype: str) -> DeviceTensor:
    """Allocate an uninitialised C-contiguous tensor in ref's framework, on ref's device."""
    shape = tuple(int(s) for s in shape)
    name = dtype if dtype in INT_DTYPES else dtypes.canonical(dtype)
    if ref.framework == "torch":
        import torch
        table = {w: t for t, w in _torch_dtype_map(torch).items()}
        if name not in table:
            raise TypeError(f"this torch has no dtype for {name}")
        return _from_torch(torch.empty(shape, dtype=table[name], device=ref.obj.device))
    if ref.framework == "cupy":
        import cupy
        try:
            with cupy.cuda.Device(ref.device):
                arr = cupy.empty(shape, dtype=numpy_dtype(name))
            return _from_cai(arr, "cupy")
        except (TypeError, ValueError):
            pass  # this cupy has no such dtype (e.g. bf16): fall through to a plain buffer
    return _from_cai(DeviceBuffer(shape, name, ref.device), "cai")


def current_stream(t: DeviceTensor) -> int:
    """The CUstream handle the tensor's framework is using now (0 = legacy default stream)."""
    if t.framework == "torch":
        import torch
        return int(torch.cuda.current_stream(t.device).cuda_stream)
    if t.framework == "cupy":
        import cupy
        with cupy.cuda.Device(t.device):
            return int(cupy.cuda.get_current_stream().ptr)
    if t.stream is not None:
        # CAI v3 stream numbers: 1 = legacy default stream (handle 0), 2 = per-thread default
        # (handle CU_STREAM_PER_THREAD = 2), anything else is a CUstream handle.
        return 0 if t.stream == 1 else int(t.stream)
    return 0
