"""Small helpers over `cuda.bindings.driver`: lazy cuInit, CUresult checks with readable
errors, and the primary context of a device made current without clobbering the caller's.

Nothing here touches the driver at import time, so `warploom.runtime` imports on machines
with no GPU (cuda.bindings itself imports fine without libcuda; its calls then fail).
"""
from __future__ import annotations

import contextlib
import threading

from cuda.bindings import driver

_lock = threading.Lock()
_initialized = False
_primary: dict[int, object] = {}  # device ordinal -> retained primary CUcontext (kept for the process)


def error_text(err) -> str:
    """'CUDA_ERROR_X: description' for a CUresult; works even when the driver cannot be asked."""
    name = getattr(err, "name", str(err))
    try:
        rc, desc = driver.cuGetErrorString(err)
        if rc == driver.CUresult.CUDA_SUCCESS and desc:
            return f"{name}: {desc.decode(errors='replace')}"
    except Exception:  # noqa: BLE001 - the text is best effort; never hide the real error
        pass
    return name


def check(result, what: str):
    """Unpack a cuda.bindings return tuple: raise RuntimeError naming `what` unless CUDA_SUCCESS.

    Returns the value(s) after the CUresult: None, one value, or a tuple.
    """
    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed: {error_text(err)}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def ensure_init() -> None:
    """cuInit(0) once per process, on first use (never at import)."""
    global _initialized
    if _initialized:
        return
    with _lock:
        if _initialized:
            return
        try:
            result = driver.cuInit(0)
        except RuntimeError as e:  # cuda.bindings raises when libcuda.so.1 cannot be loaded
            raise RuntimeError(f"the CUDA driver could not be loaded ({e}): warploom kernels need an NVIDIA GPU "
                               "with its driver; on a CPU-only machine use warploom.reference instead") from e
        check(result, "cuInit(0)")
        _initialized = True


def device_count() -> int:
    ensure_init()
    return check(driver.cuDeviceGetCount(), "cuDeviceGetCount")


def cu_device(ordinal: int):
    ensure_init()
    n = device_count()
    if not 0 <= ordinal < n:
        raise ValueError(f"CUDA device {ordinal} does not exist: this machine has {n} device(s) (0..{n - 1})")
    return check(driver.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")


def device_attribute(ordinal: int, attr) -> int:
    return check(driver.cuDeviceGetAttribute(attr, cu_device(ordinal)), f"cuDeviceGetAttribute({attr.name})")


def primary_context(ordinal: int):
    """The primary context of a device (the one torch and cupy use), retained once and kept."""
    with _lock:
        ctx = _primary.get(ordinal)
    if ctx is not None:
        return ctx
    dev = cu_device(ordinal)
    ctx = check(driver.cuDevicePrimaryCtxRetain(dev), f"cuDevicePrimaryCtxRetain(device {ordinal})")
    with _lock:
        # Another thread may have raced us; keep the first and drop our extra reference.
        if ordinal in _primary:
            driver.cuDevicePrimaryCtxRelease(dev)
            return _primary[ordinal]
        _primary[ordinal] = ctx
    return ctx


def current_device() -> int | None:
    """The device of the calling thread's current context, or None when there is none."""
    ensure_init()
    ctx = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if ctx is None or int(ctx) == 0:
        return None
    return int(check(driver.cuCtxGetDevice(), "cuCtxGetDevice"))


@contextlib.contextmanager
def on_device(ordinal: int):
    """Run the body with the primary context of `ordinal` current.

    When it is already current (torch/cupy made it so) nothing changes. Otherwise it is pushed
    and popped afterwards, so the caller's current context is left exactly as it was.
    """
    ensure_init()
    ctx = primary_context(ordinal)
    cur = check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if cur is not None and int(cur) == int(ctx):
        yield ctx
        return
    check(driver.cuCtxPushCurrent(ctx), f"cuCtxPushCurrent(primary context of device {ordinal})")
    try:
        yield ctx
    finally:
        check(driver.cuCtxPopCurrent(), "cuCtxPopCurrent")
