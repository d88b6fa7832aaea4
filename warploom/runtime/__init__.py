"""warploom's runtime: load compiled kernels and launch them. Imports no MLIR, by design:
a machine with only numpy and cuda-python can run kernels compiled elsewhere."""
from . import dtypes  # noqa: F401
from .artifact import KernelArtifact, ParamSpec, TensorMapSpec
from .cache import KernelCache, MissingKernelError, cache_key, default_cache, offline
from .launch import Launcher, default_launcher
from .tensormap import TmaLayoutError, check_tma_layout, encode_tiled
from .tensors import DeviceBuffer, DeviceTensor, as_device_tensor, current_stream, empty_like_framework

__all__ = [
    "KernelArtifact", "ParamSpec", "TensorMapSpec",
    "KernelCache", "MissingKernelError", "cache_key", "default_cache", "offline",
    "Launcher", "default_launcher",
    "TmaLayoutError", "check_tma_layout", "encode_tiled",
    "DeviceBuffer", "DeviceTensor", "as_device_tensor", "current_stream", "empty_like_framework",
]
