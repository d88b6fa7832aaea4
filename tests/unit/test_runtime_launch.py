"""Launcher parameter packing and pre-driver checks (CPU only; the real launch is in tests/gpu)."""
import ctypes

import numpy as np
import pytest
from cuda.bindings import driver

from warploom.runtime.artifact import KernelArtifact, ParamSpec, TensorMapSpec
from warploom.runtime.launch import Launcher, pack_params
from warploom.runtime.tensors import DeviceTensor


def make(cluster=(1, 1, 1)):
    return KernelArtifact(
        name="k", target="sm_90a", cubin=b"x", ptx="", smem_bytes=0, block=(128, 1, 1), cluster=cluster,
        grid=(("cdiv", "N", 128), ("const", 1), ("const", 1)),
        params=[ParamSpec("a_map", "tensormap"), ParamSpec("out", "ptr"), ParamSpec("n", "i32"),
                ParamSpec("total", "i64"), ParamSpec("scale", "f32")],
        tensor_maps={"a_map": TensorMapSpec("a_map", "A", "bf16", (64, 64), 128, ("K", "M"))}, key="k1")


def args(**over):
    a = {"a_map": driver.CUtensorMap(), "out": 0x7000_0000, "n": 5, "total": 2**40, "scale": 0.5}
    a.update(over)
    return a


def test_pack_in_param_order():
    tmap = driver.CUtensorMap()
    values, types = pack_params(make(), args(a_map=tmap, n=np.int32(7)))
    assert values == (tmap, 0x7000_0000, 7, 2**40, 0.5)
    assert types == (None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_float)
    assert type(values[2]) is int


def test_pack_accepts_device_tensor_for_ptr():
    t = DeviceTensor(0x1234_0000, (4,), (1,), "f32", 0, "cai", None)
    assert pack_params(make(), args(out=t))[0][1] == 0x1234_0000


def test_pack_errors():
    with pytest.raises(ValueError, match=r"missing \['scale'\], unknown \['scael'\]"):
        a = args()
        a["scael"] = a.pop("scale")
        pack_params(make(), a)
    with pytest.raises(TypeError, match="needs a CUtensorMap"):
        pack_params(make(), args(a_map=b"\0" * 128))
    with pytest.raises(ValueError, match=r"'n' = 2147483648 does not fit i32"):
        pack_params(make(), args(n=2**31))
    with pytest.raises(TypeError, match=r"'n' \(i32\) needs an int, got 1.5"):
        pack_params(make(), args(n=1.5))
    with pytest.raises(TypeError, match="needs a device address"):
        pack_params(make(), args(out=-1))
    with pytest.raises(TypeError, match=r"\(f32\) needs a number"):
        pack_params(make(), args(scale="x"))


def test_cluster_must_divide_grid():
    with pytest.raises(ValueError, match="grid x = 3 is not a multiple of the cluster size 2"):
        Launcher().launch(make(cluster=(2, 1, 1)), {"N": 384}, args(), stream=0, device=0)


def test_no_driver_message():
    from warploom.runtime import _cuda
    try:
        _cuda.ensure_init()
    except RuntimeError as e:
        assert "CUDA driver could not be loaded" in str(e) or "cuInit" in str(e)
    else:
        pytest.skip("a CUDA driver is present on this machine")


def test_prepared_launch_packs_its_parameters_once():
    """The kernelParams array a prepared launch hands cuLaunchKernel: a pointer per parameter, a tensor map's to its
    own 128 bytes, a scalar's to its C value; set_pointer rewrites one pointer parameter in place."""
    import ctypes

    from cuda.bindings import driver

    from warploom.runtime.launch import PreparedLaunch

    tmap = driver.CUtensorMap()
    values = (tmap, 0x7F0000001000, 300, 1.5)
    types = (None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_float)
    p = PreparedLaunch("kernel 'k'", None, (1, 1, 1), (128, 1, 1), (1, 1, 1), 0, 0, values, types)
    ptrs = (ctypes.c_void_p * 4).from_address(p._params)
    assert ptrs[0] == tmap.getPtr()
    assert ctypes.c_void_p.from_address(ptrs[1]).value == 0x7F0000001000
    assert ctypes.c_int32.from_address(ptrs[2]).value == 300
    assert ctypes.c_float.from_address(ptrs[3]).value == 1.5
    p.set_pointer(1, 0x7F0000002000)
    assert ctypes.c_void_p.from_address(ptrs[1]).value == 0x7F0000002000
    with pytest.raises(TypeError, match="parameter 2 is not a pointer"):
        p.set_pointer(2, 0)
