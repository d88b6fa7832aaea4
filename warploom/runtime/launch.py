"""Load kernel artifacts onto a GPU and launch them through `cuda.bindings.driver`.

cuda.bindings (not cuda.core) because kernels take TMA descriptors BY VALUE: a CUtensorMap
packed with type None is copied into the parameter buffer, which cuda.core's launch refuses.
Clusters launch with cuLaunchKernelEx and a CLUSTER_DIMENSION attribute.
"""
from __future__ import annotations

from dataclasses import dataclass

import ctypes
import hashlib
import operator
import threading

from cuda.bindings import driver

from ._cuda import check, current_device, device_attribute, error_text, on_device
from .artifact import KernelArtifact

_DEFAULT_SMEM_LIMIT = 48 * 1024  # above this, a kernel must opt in to dynamic shared memory
_PORTABLE_CLUSTER = 8            # larger clusters need NON_PORTABLE_CLUSTER_SIZE_ALLOWED
_TENSOR_MAP_BYTES = 128          # sizeof(CUtensorMap)

_INT_RANGES = {"i32": (-2**31, 2**31 - 1, ctypes.c_int32), "i64": (-2**63, 2**63 - 1, ctypes.c_int64)}


def pack_params(artifact: KernelArtifact, args: dict) -> tuple[tuple, tuple]:
    """(values, types) for cuLaunchKernel, in artifact.params order; checks every argument.

    tensormap -> (CUtensorMap, None): None makes cuda.bindings pass the object's bytes by value.
    ptr -> (int, c_void_p); i32/i64 -> (int, c_int32/c_int64); f32 -> (float, c_float).
    """
    where = f"kernel {artifact.name!r}"
    names = [p.name for p in artifact.params]
    missing = [n for n in names if n not in args]
    extra = sorted(set(args) - set(names))
    if missing or extra:
        raise ValueError(f"{where} takes parameters {names}; missing {missing}, unknown {extra}")
    values, types = [], []
    for p in artifact.params:
        v = args[p.name]
        if p.kind == "tensormap":
            if not isinstance(v, driver.CUtensorMap):
                raise TypeError(f"{where}: parameter {p.name!r} needs a CUtensorMap (from encode_tiled), "
                                f"got {type(v).__name__}")
            values.append(v)
            types.append(None)
        elif p.kind == "ptr":
            addr = getattr(v, "ptr", v)  # a DeviceTensor or DeviceBuffer passes its address
            if not isinstance(addr, int) or isinstance(addr, bool) or not 0 <= addr < 2**64:
                raise TypeError(f"{where}: parameter {p.name!r} needs a device address (int), got {v!r}")
            values.append(addr)
            types.append(ctypes.c_void_p)
        elif p.kind in _INT_RANGES:
            lo, hi, ctype = _INT_RANGES[p.kind]
            if not isinstance(v, bool) and hasattr(v, "__index__"):
                v = operator.index(v)  # python and numpy integers; floats are refused below
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{where}: parameter {p.name!r} ({p.kind}) needs an int, got {v!r}")
            if not lo <= v <= hi:
                raise ValueError(f"{where}: parameter {p.name!r} = {v} does not fit {p.kind} ({lo}..{hi})")
            values.append(v)
            types.append(ctype)
        elif p.kind == "f32":
            try:
                values.append(float(v))
            except (TypeError, ValueError):
                raise TypeError(f"{where}: parameter {p.name!r} (f32) needs a number, got {v!r}") from None
            types.append(ctypes.c_float)
        else:  # ParamSpec already rejects other kinds; kept for safety
            raise ValueError(f"{where}: parameter {p.name!r} has unknown kind {p.kind!r}")
    return tuple(values), tuple(types)


class Launcher:
    """Loads each artifact once per device (module + function) and launches it.

    Modules live in each device's primary context, the one torch and cupy use, so launches on
    their streams need no context switch.
    """

    def __init__(self):
        self._functions: dict[tuple[str, int], object] = {}
        self._cluster_slots: dict[tuple[str, int], int] = {}     # (kernel, device) -> CTAs of co-resident clusters
        self._modules: list = []  # kept alive for the process: functions point into them
        self._lock = threading.Lock()

    def function(self, artifact: KernelArtifact, device: int):
        """The CUfunction of artifact on device, loading the module on first use."""
        # An artifact without a cache key (built in memory) is identified by its binary.
        ident = artifact.key or hashlib.sha256(bytes(artifact.cubin) + artifact.ptx.encode()).hexdigest()
        cache_key = (ident, device)
        fn = self._functions.get(cache_key)
        if fn is not None:
            return fn
        with self._lock:
            fn = self._functions.get(cache_key)
            if fn is None:
                fn = self._load(artifact, device)
                self._functions[cache_key] = fn
        return fn

    def _load(self, artifact: KernelArtifact, device: int):
        where = f"kernel {artifact.name!r} (target {artifact.target})"
        check_target(artifact, device)
        # A cubin runs as is; PTX alone is JIT-compiled by the driver (it must be NUL-terminated).
        image = bytes(artifact.cubin) if artifact.cubin else artifact.ptx.encode("utf-8") + b"\0"
        with on_device(device):
            err, module = driver.cuModuleLoadData(image)
            if err != driver.CUresult.CUDA_SUCCESS:
                hint = ""
                if err in (driver.CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU, driver.CUresult.CUDA_ERROR_INVALID_IMAGE):
                    attrs = driver.CUdevice_attribute
                    major = device_attribute(device, attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
                    minor = device_attribute(device, attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
                    hint = f"; device {device} is sm_{major}{minor}: rebuild for that target"
                raise RuntimeError(f"cuModuleLoadData failed for {where}: {error_text(err)}{hint}")
            self._modules.append(module)
            fn = check(driver.cuModuleGetFunction(module, artifact.name.encode()),
                       f"cuModuleGetFunction({artifact.name!r}) for {where}")
            if artifact.smem_bytes > _DEFAULT_SMEM_LIMIT:
                limit = device_attribute(
                    device, driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
                if artifact.smem_bytes > limit:
                    raise ValueError(f"{where} needs {artifact.smem_bytes} bytes of dynamic shared memory; device "
                                     f"{device} allows {limit} per block: rebuild with fewer pipeline stages or "
                                     "smaller tiles")
                check(driver.cuFuncSetAttribute(
                    fn, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    artifact.smem_bytes), f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) for {where}")
            c = artifact.cluster
            if c[0] * c[1] * c[2] > _PORTABLE_CLUSTER:
                check(driver.cuFuncSetAttribute(
                    fn, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                    f"cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED) for {where}")
        return fn

    def cluster_slots(self, artifact: KernelArtifact, device: int) -> int:
        """The CTAs a persistent cluster kernel may launch at once on `device`: cluster size x the clusters that fit
        together (cuOccupancyMaxActiveClusters: a cluster's CTAs share one GPC, so an SM count that a GPC's share
        does not divide leaves SMs no cluster can use), at most the SM count. One CTA per SM for other kernels."""
        size = artifact.cluster[0] * artifact.cluster[1] * artifact.cluster[2]
        sms = sm_count(device)
        if size == 1:
            return sms
        key = (artifact.key or artifact.name, device)
        if key not in self._cluster_slots:
            fn = self.function(artifact, device)
            attr = driver.CUlaunchAttribute()
            attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = artifact.cluster
            cfg = driver.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = (sms // size * size, 1, 1)
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = artifact.block
            cfg.sharedMemBytes = artifact.smem_bytes
            cfg.attrs = [attr]
            cfg.numAttrs = 1
            with on_device(device):
                clusters = check(driver.cuOccupancyMaxActiveClusters(fn, cfg),
                                 f"cuOccupancyMaxActiveClusters for kernel {artifact.name!r}")
            if clusters < 1:
                raise ValueError(f"kernel {artifact.name!r}: no cluster of {artifact.cluster} CTAs with "
                                 f"{artifact.smem_bytes} B of shared memory each fits on device {device}")
            self._cluster_slots[key] = min(sms, clusters * size)
        return self._cluster_slots[key]

    def prepare(self, artifact: KernelArtifact, sizes: dict[str, int], args: dict[str, object],
                device: int | None = None) -> "PreparedLaunch":
        """Everything about a launch but the stream: grid, function, packed parameters (all checked).

        A caller that launches the same kernel on the same tensors again can keep it and skip the
        checks, which cost more host time than a small GEMM takes on the GPU."""
        where = f"kernel {artifact.name!r}"
        grid = artifact.grid_for(sizes)
        cluster = artifact.cluster
        for axis, g, c in zip("xyz", grid, cluster):
            if g % c:
                raise ValueError(f"{where}: grid {axis} = {g} is not a multiple of the cluster size {c} along {axis} "
                                 f"(grid {grid}, cluster {cluster}); round the grid rule up to a multiple of {c}")
        values, types = pack_params(artifact, args)
        if device is None:
            device = current_device()
            device = 0 if device is None else device
        return PreparedLaunch(where, self.function(artifact, device), grid, artifact.block, cluster,
                              artifact.smem_bytes, device, values, types)

    def launch(self, artifact: KernelArtifact, sizes: dict[str, int], args: dict[str, object], stream: int,
               device: int | None = None) -> None:
        """Launch artifact with its grid evaluated on sizes, on stream (a CUstream handle).

        device: the GPU ordinal the tensors live on; default: the current context's device, else 0.
        """
        self.prepare(artifact, sizes, args, device).launch(stream)


@dataclass(frozen=True)
class PreparedLaunch:
    """A launch with everything but the stream decided: the function, grid, block, cluster, shared memory, and the
    kernel parameters packed once into C storage (`kernelParams`: an array of pointers to each value, a tensor map
    pointing at its own 128 bytes), so a launch costs one driver call and no per-call marshalling."""
    where: str
    fn: object
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    smem_bytes: int
    device: int
    values: tuple
    types: tuple

    def __post_init__(self):
        cells = [v if t is None else t(v) for v, t in zip(self.values, self.types)]   # CUtensorMap: its own bytes
        pointers = (ctypes.c_void_p * max(1, len(cells)))(
            *[c.getPtr() if t is None else ctypes.addressof(c) for c, t in zip(cells, self.types)])
        object.__setattr__(self, "_cells", cells)           # kept alive: the pointers point into them
        object.__setattr__(self, "_pointers", pointers)
        object.__setattr__(self, "_params", ctypes.addressof(pointers))

    def copy(self) -> "PreparedLaunch":
        """The same launch with its own parameter storage, tensor maps included (copied byte for byte): what a fast
        path keeps to rewrite an output's address in (`set_pointer`, `set_tensor_map_address`), leaving the tensor
        maps memoized elsewhere untouched."""
        values = []
        for v, t in zip(self.values, self.types):
            if t is None:
                mine = driver.CUtensorMap()
                ctypes.memmove(mine.getPtr(), v.getPtr(), _TENSOR_MAP_BYTES)
                v = mine
            values.append(v)
        return PreparedLaunch(self.where, self.fn, self.grid, self.block, self.cluster, self.smem_bytes, self.device,
                              tuple(values), self.types).hold(*self.held)

    @property
    def held(self) -> tuple:
        return getattr(self, "_held", ())

    def hold(self, *objects) -> "PreparedLaunch":
        """Keep `objects` alive as long as this launch (and its copies): buffers its parameters point at that no
        one else keeps (a mask's block table evicted from its cache while a fast path still launches with it)."""
        object.__setattr__(self, "_held", self.held + objects)
        return self

    def set_pointer(self, index: int, address: int) -> None:
        """Change pointer parameter `index` in place (a fast path's fresh output): only in a `copy` that one
        caller owns and launches right after."""
        if self.types[index] is not ctypes.c_void_p:
            raise TypeError(f"{self.where}: parameter {index} is not a pointer")
        self._cells[index].value = address

    def set_tensor_map_address(self, index: int, address: int) -> None:
        """Point tensor-map parameter `index` at `address` (same shape, strides and alignment: a fresh output like
        the one it was encoded for) with cuTensorMapReplaceAddress; only in a `copy`, as `set_pointer`."""
        if self.types[index] is not None:
            raise TypeError(f"{self.where}: parameter {index} is not a tensor map")
        check(driver.cuTensorMapReplaceAddress(self._cells[index], address), "cuTensorMapReplaceAddress")

    def launch(self, stream: int) -> None:
        if self.cluster == (1, 1, 1):        # the current context is nearly always the device's: try it first
            bx, by, bz = self.block
            gx, gy, gz = self.grid
            if driver.cuLaunchKernel(self.fn, gx, gy, gz, bx, by, bz, self.smem_bytes, stream, self._params,
                                     0)[0] == driver.CUresult.CUDA_SUCCESS:
                return
        self._launch(stream)                 # clusters, or another context current: the checked path

    def _launch(self, stream: int) -> None:
        hstream = driver.CUstream(int(stream))
        bx, by, bz = self.block
        with on_device(self.device):
            if self.cluster == (1, 1, 1):
                result = driver.cuLaunchKernel(self.fn, *self.grid, bx, by, bz, self.smem_bytes, hstream,
                                               self._params, 0)
            else:
                attr = driver.CUlaunchAttribute()
                attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = self.cluster
                cfg = driver.CUlaunchConfig()
                cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = self.grid
                cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = bx, by, bz
                cfg.sharedMemBytes = self.smem_bytes
                cfg.hStream = hstream
                cfg.attrs = [attr]
                cfg.numAttrs = 1
                result = driver.cuLaunchKernelEx(cfg, self.fn, self._params, 0)
        err = result[0]
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"launch of {self.where} failed: {error_text(err)} (grid {self.grid}, block "
                               f"{self.block}, cluster {self.cluster}, {self.smem_bytes} B shared memory, "
                               f"device {self.device})")


_default: Launcher | None = None


def default_launcher() -> Launcher:
    """One process-wide Launcher, so modules load once."""
    global _default
    if _default is None:
        _default = Launcher()
    return _default


_SM_COUNTS: dict[int, int] = {}


class TargetMismatchError(RuntimeError):
    """A kernel built for one GPU architecture was about to be launched on another."""


def device_capability(device: int) -> tuple[int, int]:
    """(major, minor) compute capability of a device."""
    attrs = driver.CUdevice_attribute
    return (device_attribute(device, attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            device_attribute(device, attrs.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))


def device_name(device: int) -> str:
    from ._cuda import cu_device
    name = check(driver.cuDeviceGetName(256, cu_device(device)), "cuDeviceGetName")
    return bytes(name).split(b"\0", 1)[0].decode(errors="replace")


def device_target(device: int) -> str:
    """The warploom target whose kernels run on `device` ("sm_90a" on an H100/H200, "sm_100a" on a B200);
    TargetMismatchError naming the GPU when warploom builds none for it."""
    from warploom import targets
    major, minor = device_capability(device)
    target = targets.for_capability(major, minor)
    if target is None:
        known = ", ".join(f"{t.name} (compute capability {t.compute_capability[0]}.{t.compute_capability[1]}, "
                          f"{t.chip})" for t in targets.TARGETS.values())
        raise TargetMismatchError(f"device {device} ({device_name(device)}) has compute capability {major}.{minor}; "
                                  f"warploom builds kernels for {known} only")
    return target.name


def check_target(artifact: KernelArtifact, device: int) -> None:
    """Refuse, before anything is loaded, a kernel built for another architecture than the device's: an
    arch-specific cubin ("sm_100a") runs on that one compute capability only."""
    from warploom import targets
    want = targets.get(artifact.target).compute_capability
    have = device_capability(device)
    if have != want:
        own = targets.for_capability(*have)
        fix = (f"Use the kernel built for {own.name} (warploom.ops picks it by itself), or run on a GPU of "
               f"compute capability {want[0]}.{want[1]}" if own is not None else
               f"warploom builds kernels for {', '.join(targets.TARGETS)} only: run on a GPU of one of those")
        raise TargetMismatchError(
            f"kernel {artifact.name!r} is built for {artifact.target} (compute capability {want[0]}.{want[1]}), but "
            f"device {device} ({device_name(device)}) has compute capability {have[0]}.{have[1]}: it cannot run "
            f"there. {fix}")


def sm_count(device: int) -> int:
    """Multiprocessors of the device: a persistent kernel launches at most one CTA per SM."""
    if device not in _SM_COUNTS:
        from cuda.bindings import driver

        from warploom.runtime._cuda import device_attribute
        _SM_COUNTS[device] = device_attribute(device, driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
    return _SM_COUNTS[device]
