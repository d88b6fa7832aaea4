"""Host helpers every launch API shares (warploom.ops.matmul, warploom.ops_attention.attention): the operand views
and their refusals, the device's target, torch's stream, device buffers (the stream-K fix-up's, uploaded tables)
and fills.

Imports numpy and cuda-python only (torch when the caller's tensors are torch's), like the rest of the runtime.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .launch import device_target
from .tensors import DeviceTensor, as_device_tensor


def describe(t: DeviceTensor) -> str:
    return f"{t.framework} tensor of shape {list(t.shape)}, {t.dtype}, strides {list(t.strides)}"


def view(x, op: str, name: str) -> DeviceTensor:
    """as_device_tensor, its refusals (host memory, a CPU torch tensor, an unsupported dtype) naming the op and the
    operand ("matmul: a: ...")."""
    try:
        return as_device_tensor(x)
    except ValueError as e:
        raise ValueError(f"{op}: {name}: {e}") from None
    except TypeError as e:
        raise TypeError(f"{op}: {name}: {e}") from None


def layout_key(t: DeviceTensor) -> tuple:
    """What a tensor map or a prepared launch of `t` depends on: its address, shape, strides, dtype and device."""
    return (t.ptr, tuple(t.shape), tuple(t.strides), t.dtype, t.device)


class Lru(OrderedDict):
    """A memo of at most `slots` entries, the least recently used dropped first (tensor maps, prepared launches and
    the torch fast path of both launch APIs)."""

    def __init__(self, slots: int):
        super().__init__()
        self.slots = slots

    def hit(self, key):
        """The entry of `key` (None if there is none), marked as the most recently used."""
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def keep(self, key, value):
        """Remember `value` for `key`, dropping the least recently used entry beyond `slots`; `value`."""
        self[key] = value
        if len(self) > self.slots:
            self.popitem(last=False)
        return value


_TARGETS: dict[int, str] = {}


def target_of(device: int) -> str:
    """The device's warploom target, asked once per device."""
    if device not in _TARGETS:
        _TARGETS[device] = device_target(device)
    return _TARGETS[device]


def torch_stream(t) -> int:
    """The raw handle of torch's current stream on t's device (where torch has it, without making a Stream object,
    as Triton asks for it)."""
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    return raw(t.device.index) if raw is not None else torch.cuda.current_stream(t.device).cuda_stream


# ---- the stream-K fix-up's buffers -------------------------------------------------------------------------------

_FIXUP: dict = {}         # (device, stream) -> {"workspace": DeviceBuffer, "counters": DeviceBuffer, "retired": [...]}


def fixup_buffers(floats: int, counts: int, device: int, stream: int) -> tuple[int, int]:
    """(workspace, counters) addresses for a stream-K launch (GEMM or attention) needing `floats` f32 and `counts`
    i32 on `stream`: one pair per device and stream (launches on one stream run in order, so they can share it; two
    streams never do). Grown to the next power of two when a launch needs more; grown-out buffers stay allocated (a
    launch in flight, or a prepared one, may still use them). New counters are zeroed on the stream; every launch
    leaves them zero."""
    from cuda.bindings import driver

    from ._cuda import check, on_device
    from .tensors import DeviceBuffer
    entry = _FIXUP.setdefault((device, stream), {"workspace": None, "counters": None, "retired": []})
    for name, need, dtype in (("workspace", floats, "f32"), ("counters", counts, "i32")):
        buf = entry[name]
        if buf is None or buf.shape[0] < need:
            if buf is not None:
                entry["retired"].append(buf)
            buf = entry[name] = DeviceBuffer((1 << max(need - 1, 1).bit_length(),), dtype, device)
            if name == "counters":
                with on_device(device):
                    check(driver.cuMemsetD8Async(buf.ptr, 0, buf.nbytes, stream), "cuMemsetD8Async")
    return entry["workspace"].ptr, entry["counters"].ptr


def upload_i32(values: list[int], device: int):
    """A device copy of `values` (int32); the object keeps the memory (and has .ptr)."""
    from cuda.bindings import driver

    from ._cuda import check, on_device
    from .tensors import DeviceBuffer
    host = np.asarray(values, np.int32)
    buf = DeviceBuffer(host.shape, "i32", device)
    with on_device(device):
        check(driver.cuMemcpyHtoD(buf.ptr, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
    return buf


_READ: Lru | None = None     # (address, shape, strides, torch's version counter) -> the host copy


def read_back(t: DeviceTensor) -> np.ndarray:
    """A host copy (numpy, int32) of an int32 device tensor, after the work queued on it: by its framework (torch,
    cupy), else by the driver after the context's work. A torch tensor's copy is kept per version of it (torch counts
    in-place writes), so a call that passes the same unchanged tensor again reads nothing."""
    global _READ
    if _READ is None:
        _READ = Lru(16)
    version = getattr(t.obj, "_version", None) if t.framework == "torch" else None
    key = (layout_key(t), version) if version is not None else None
    hit = _READ.hit(key) if key is not None else None
    if hit is not None:
        return hit
    if t.framework == "torch":
        out = t.obj.detach().cpu().numpy()
    elif t.framework == "cupy":
        import cupy
        out = cupy.asnumpy(t.obj)
    else:
        from cuda.bindings import driver

        from ._cuda import check, on_device
        span = 1 + sum((d - 1) * st for d, st in zip(t.shape, t.strides)) if t.numel else 0
        flat = np.empty(span, np.int32)
        with on_device(t.device):
            check(driver.cuCtxSynchronize(), "cuCtxSynchronize")
            if span:
                check(driver.cuMemcpyDtoH(flat.ctypes.data, t.ptr, flat.nbytes), "cuMemcpyDtoH")
        out = np.lib.stride_tricks.as_strided(flat, t.shape, tuple(4 * st for st in t.strides)).copy()
    out = np.ascontiguousarray(out, np.int32)
    if key is not None:
        _READ.keep(key, out)
    return out


def fill(t: DeviceTensor, value: float) -> None:
    """Every element of `t` = `value` (by its framework, on its stream; else by the driver: any value in a 4-byte
    buffer, 0 in others)."""
    if t.numel == 0:
        return
    if t.framework == "torch":
        t.obj.fill_(value)
    elif t.framework == "cupy":
        t.obj.fill(value)
    else:
        from cuda.bindings import driver

        from ._cuda import check
        if t.elem_bytes == 4:
            bits = int(np.array(value, np.float32).view(np.uint32))
            check(driver.cuMemsetD32(t.ptr, bits, t.numel), "cuMemsetD32")
        elif value == 0:
            check(driver.cuMemsetD8(t.ptr, 0, t.numel * t.elem_bytes), "cuMemsetD8")
        else:
            raise ValueError(f"cannot fill a {t.dtype} buffer with {value}")
