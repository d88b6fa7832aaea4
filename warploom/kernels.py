"""Which compiled kernels exist and how to find them: kernel specs, the standard set, cache lookup.

Imports no MLIR: on a machine that only runs kernels (WARPLOOM_OFFLINE=1, or no
MLIR installed) a spec is looked up in the cache's index; on a machine with the
compiler a miss compiles the kernel (warploom.compile) and records it.

The cache folder of a kernel is named by a key over its IR, target and toolchain
versions (runtime/cache.py). The index maps a spec to that key, and records the
hash of the compiler's own sources, so a cache built by another warploom is
never used by mistake.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from warploom.runtime.artifact import KernelArtifact
from warploom.runtime.cache import KernelCache, MissingKernelError, default_cache, offline

PACKAGE = Path(__file__).parent
COMPILER_SOURCES = ("dialect", "kernel", "layout", "targets", "passes", "lowering", "runtime/rules.py", "compile.py",
                    "kernels.py")


def gemm_kernel_name(elem: str, b_layout: str, tile, stages, schedule: str = "grid") -> str:
    """wl_gemm_{elem}_{b_layout}_{BM}x{BN}x{BK}_s{stages}[_persistent]: the PTX entry point of a GEMM kernel
    (the lowering names the kernel it builds with this; specs name the kernel they ask for)."""
    bm, bn, bk = tile
    sched = "" if schedule == "grid" else f"_{schedule}"
    return f"wl_gemm_{elem}_{b_layout}_{bm}x{bn}x{bk}_s{stages}{sched}"


@dataclass(frozen=True)
class GemmSpec:
    """A GEMM kernel: C[M,N] = A[M,K] @ B with B as [K,N] ("kn") or as [N,K] ("nk", a weight)."""
    elem: str = "bf16"
    b_layout: str = "kn"
    block_n: int = 256
    stages: int = 4
    target: str = "sm_90a"
    schedule: str = "grid"          # "grid": a CTA per tile; "persistent": one CTA per SM walks the tiles

    block_m: int = 128
    block_k: int = 64

    @property
    def tile(self) -> tuple[int, int, int]:
        return (self.block_m, self.block_n, self.block_k)

    @property
    def kernel_name(self) -> str:
        return gemm_kernel_name(self.elem, self.b_layout, self.tile, self.stages, self.schedule)

    @property
    def lookup_id(self) -> str:
        return f"{self.kernel_name}-{self.target}"

    def describe(self) -> str:
        b = "B [K,N]" if self.b_layout == "kn" else "B [N,K] (transposed weight)"
        return (f"{self.elem} GEMM, {b}, tile {'x'.join(map(str, self.tile))}, {self.stages} stages, {self.schedule} "
                f"schedule, {self.target}")


# The kernels `warploom precompile` builds: what warploom.ops.matmul may pick.
STANDARD_KERNELS: dict[str, list[GemmSpec]] = {
    "sm_90a": [GemmSpec(elem, layout, block_n, 4, "sm_90a", schedule)
               for schedule in ("grid", "persistent")
               for elem in ("bf16", "f16") for layout in ("kn", "nk") for block_n in (128, 256)],
}


def compiler_hash() -> str:
    """sha256 over the compiler's sources (read as files, nothing imported)."""
    h = hashlib.sha256()
    for name in COMPILER_SOURCES:
        path = PACKAGE / name
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            h.update(str(f.relative_to(PACKAGE)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def index_path(cache: KernelCache, spec: GemmSpec) -> Path:
    return cache.root / "index" / f"{spec.lookup_id}.json"


def read_index(cache: KernelCache, spec: GemmSpec) -> dict | None:
    try:
        return json.loads(index_path(cache, spec).read_text())
    except (OSError, ValueError):
        return None


def write_index(cache: KernelCache, spec: GemmSpec, key: str) -> None:
    path = index_path(cache, spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"spec": asdict(spec), "key": key, "compiler": compiler_hash()}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)       # atomic: readers see the old entry or the new one


def mlir_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("mlir") is not None


_memo: dict[tuple[str, GemmSpec], KernelArtifact] = {}


def get_kernel(spec: GemmSpec, cache: KernelCache | None = None) -> KernelArtifact:
    """The compiled kernel for `spec`: from memory, from the cache, or compiled now (and cached)."""
    # keyed by the cache's root as given (or the env var), so a hit costs no path handling
    memo_key = (str(cache.root) if cache is not None else os.environ.get("WARPLOOM_CACHE_DIR"), spec)
    if memo_key in _memo:
        return _memo[memo_key]
    cache = cache or default_cache()
    entry = read_index(cache, spec)
    artifact = None
    if entry is not None and entry.get("compiler") == compiler_hash():
        artifact = cache.get(entry["key"])
    if artifact is None:
        if offline() or not mlir_available():
            stale = " (the cache holds one built by another warploom version)" if entry else ""
            raise MissingKernelError(spec.lookup_id, spec.describe() + stale,
                                     f"warploom precompile --target {spec.target} --cache {cache.root}")
        from warploom.compile import compile_gemm
        artifact = compile_gemm(spec)
        cache.put(artifact)
        write_index(cache, spec, artifact.key)
    _memo[memo_key] = artifact
    return artifact
