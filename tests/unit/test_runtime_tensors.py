"""Zero-copy tensor views (CPU only): fake __cuda_array_interface__ objects, a stub `torch`
module standing in for the real one (not installed here), DLPack without torch."""
import sys
import types

import ml_dtypes
import numpy as np
import pytest

from warploom.runtime.tensors import (DeviceTensor, as_device_tensor, contiguous_strides, current_stream,
                                      elem_bytes, empty_like_framework)


class FakeCAI:
    def __init__(self, shape, typestr, strides=None, ptr=0x7000_0000, descr=None, stream=None, dtype=None):
        self.__cuda_array_interface__ = {"version": 3, "shape": shape, "typestr": typestr, "strides": strides,
                                         "data": (ptr, False), "stream": stream}
        if descr is not None:
            self.__cuda_array_interface__["descr"] = descr
        if dtype is not None:
            self.dtype = dtype
        self.device = types.SimpleNamespace(id=0)  # as cupy/numba do, so no driver is asked


def test_cai_f32_contiguous():
    t = as_device_tensor(FakeCAI((4, 8), "<f4"))
    assert (t.ptr, t.shape, t.strides, t.dtype, t.device, t.framework) == (0x7000_0000, (4, 8), (8, 1), "f32", 0, "cai")
    assert t.is_contiguous() and t.numel == 32 and t.elem_bytes == 4


def test_cai_f16_byte_strides_to_elements():
    # A transposed (column-major) f16 view: byte strides (2, 8) -> element strides (1, 4).
    t = as_device_tensor(FakeCAI((4, 3), "<f2", strides=(2, 8)))
    assert t.dtype == "f16" and t.strides == (1, 4) and not t.is_contiguous()


def test_cai_strides_not_multiple_of_element():
    with pytest.raises(ValueError, match="not multiples of the 2-byte element size"):
        as_device_tensor(FakeCAI((4, 3), "<f2", strides=(3, 12)))


def test_cai_bf16_and_fp8_spellings():
    assert as_device_tensor(FakeCAI((2,), "<V2")).dtype == "bf16"  # torch >= 2.6 / ml_dtypes spelling
    assert as_device_tensor(FakeCAI((2,), "<V2", descr=[("bfloat16", "<V2")])).dtype == "bf16"
    assert as_device_tensor(FakeCAI((2,), "|V1", descr=[("float8_e4m3fn", "|V1")])).dtype == "f8E4M3FN"
    assert as_device_tensor(FakeCAI((2,), "<V1", dtype=np.dtype(ml_dtypes.float8_e4m3fn))).dtype == "f8E4M3FN"
    assert as_device_tensor(FakeCAI((2,), "<i4")).dtype == "i32"
    with pytest.raises(TypeError, match="could be either fp8 format"):
        as_device_tensor(FakeCAI((2,), "|V1"))
    with pytest.raises(TypeError, match="'<c8' has no warploom element type"):
        as_device_tensor(FakeCAI((2,), "<c8"))
    with pytest.raises(TypeError, match="big-endian"):
        as_device_tensor(FakeCAI((2,), ">f4"))


def test_cai_masked_refused():
    x = FakeCAI((2,), "<f4")
    x.__cuda_array_interface__["mask"] = object()
    with pytest.raises(TypeError, match="masked"):
        as_device_tensor(x)


def test_cai_stream():
    assert current_stream(as_device_tensor(FakeCAI((2,), "<f4"))) == 0
    assert current_stream(as_device_tensor(FakeCAI((2,), "<f4", stream=1))) == 0  # legacy default
    assert current_stream(as_device_tensor(FakeCAI((2,), "<f4", stream=2))) == 2  # per-thread default
    assert current_stream(as_device_tensor(FakeCAI((2,), "<f4", stream=0xABC0))) == 0xABC0


def test_numpy_and_unknown_objects():
    with pytest.raises(ValueError, match="host memory"):
        as_device_tensor(np.zeros(3))
    with pytest.raises(TypeError, match="cannot use a builtins.list"):
        as_device_tensor([1, 2])


class FakeDLPack:
    def __init__(self, device_type):
        self.device_type = device_type

    def __dlpack__(self, stream=None):
        raise AssertionError("must not be consumed without torch")

    def __dlpack_device__(self):
        return (self.device_type, 0)


def test_dlpack_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(TypeError, match="offers only DLPack.*torch is not installed"):
        as_device_tensor(FakeDLPack(2))
    with pytest.raises(ValueError, match="device type 1, not CUDA"):
        as_device_tensor(FakeDLPack(1))


def test_elem_bytes():
    assert [elem_bytes(d) for d in ("bf16", "f16", "f32", "f8E4M3FN", "i32", "ui8")] == [2, 2, 4, 1, 4, 1]
    with pytest.raises(ValueError, match="packs 2 elements per byte"):
        elem_bytes("f4E2M1FN")
    assert contiguous_strides((2, 3, 4)) == (12, 4, 1)


# ---- a stub `torch` module: exercises the torch path without torch installed --------------

def make_fake_torch():
    torch = types.ModuleType("torch")

    class dtype:  # hashable stand-ins for torch dtypes
        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return f"torch.{self.name}"

    for name in ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2", "int32", "int64", "float64"):
        setattr(torch, name, dtype(name))

    class Tensor:
        def __init__(self, shape, dtype, is_cuda=True, ptr=0x9000_0000, strides=None, index=0):
            self.shape, self.dtype, self.is_cuda, self._ptr = tuple(shape), dtype, is_cuda, ptr
            self._strides = strides or contiguous_strides(shape)
            self.device = types.SimpleNamespace(type="cuda" if is_cuda else "cpu", index=index if is_cuda else None)

        def data_ptr(self):
            return self._ptr

        def stride(self):
            return self._strides

    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    torch.empty = lambda shape, dtype, device: Tensor(shape, dtype, index=device.index, ptr=0xA000_0000)
    torch.cuda = types.SimpleNamespace(current_stream=lambda dev: types.SimpleNamespace(cuda_stream=0x5000 + dev),
                                       current_device=lambda: 0)
    return torch


@pytest.fixture
def fake_torch(monkeypatch):
    torch = make_fake_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def test_torch_path(fake_torch):
    x = fake_torch.Tensor((128, 64), fake_torch.bfloat16, strides=(1, 128), index=1)
    t = as_device_tensor(x)
    assert (t.ptr, t.shape, t.strides, t.dtype, t.device, t.framework) == \
        (0x9000_0000, (128, 64), (1, 128), "bf16", 1, "torch")
    assert t.obj is x
    assert current_stream(t) == 0x5001
    assert as_device_tensor(fake_torch.Tensor((2,), fake_torch.float8_e5m2)).dtype == "f8E5M2"


def test_torch_cpu_tensor_refused(fake_torch):
    msg = r"tensor is on cpu; warploom kernels need CUDA tensors: move it with \.cuda\(\)"
    with pytest.raises(ValueError, match=msg):
        as_device_tensor(fake_torch.Tensor((2,), fake_torch.float32, is_cuda=False))


def test_torch_unsupported_dtype(fake_torch):
    with pytest.raises(TypeError, match="not supported by warploom"):
        as_device_tensor(fake_torch.Tensor((2,), fake_torch.float64))


def test_torch_empty_like(fake_torch):
    ref = as_device_tensor(fake_torch.Tensor((4, 4), fake_torch.bfloat16, index=0))
    out = empty_like_framework(ref, (8, 16), "f32")
    assert out.framework == "torch" and out.shape == (8, 16) and out.dtype == "f32" and out.ptr == 0xA000_0000
    assert out.obj.dtype is fake_torch.float32


def test_device_tensor_passthrough():
    t = DeviceTensor(16, (1,), (1,), "f32", 0, "cai", None)
    assert as_device_tensor(t) is t
