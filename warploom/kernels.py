"""Which compiled kernels exist and how to find them: the standard sets, the measured heuristics, cache lookup.

Imports no MLIR: on a machine that only runs kernels (WARPLOOM_OFFLINE=1, or no
MLIR installed) a spec is looked up in the cache's index; on a machine with the
compiler a miss compiles the kernel (warploom.build) and records it.

The kernel contract (specs, parameters, tensor maps, defaults, names) lives in warploom/kernel/contract.py, which
the compiler reads; the names below re-export it for the host API, tools and tests. Nothing in the compiler core
(dialect, passes, lowering, kernel, layout, targets, runtime, emulate) imports this module.

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
from dataclasses import asdict
from pathlib import Path

from warploom.kernel.contract import (  # noqa: F401  (re-exported: the contract's names, for ops, tools and tests)
    ATTENTION_BLOCK_M, ATTENTION_BLOCK_N, ATTENTION_BOX_D, ATTENTION_CAUSAL_PERSISTENT_PARAMS, ATTENTION_ELEMENTS,
    ATTENTION_EXP2_POLY, ATTENTION_HEAD_DIMS, ATTENTION_MAP_DIMS, ATTENTION_PARAMS, ATTENTION_PERSISTENT_PARAMS,
    ATTENTION_Q_STAGES, ATTENTION_SCHEDULE, ATTENTION_SCHEDULES, ATTENTION_STAGES, ATTENTION_STREAMK_PARAMS,
    ATTENTION_TALL_BLOCK_M, ATTENTION_WALKS, EXP2_POLY_GROUP, FA4_BLOCK_N, FA4_EXP2_POLY, FA4_HEAD_DIMS,
    FA4_Q_TILES, FA4_RESCALE_THRESHOLD, FA4_SHARED_KV_SLOTS, FA4_TILE_ROWS, GEMM_BLOCK_K, GEMM_BLOCK_M,
    GEMM_BLOCK_N, GEMM_SIZES, GEMM_STAGES, SM90_MMA_M, SM90_WARPGROUP_THREADS, SMALL_M_STAGES, STREAMK_PARAMS,
    STREAMK_SLOTS, AttentionSpec, GemmSpec, attention_kernel_name, attention_params, attention_streamk_buffers,
    check_attention_artifact, check_exp2_poly, default_attention_block_n, default_attention_exp2_poly,
    default_attention_q_stages, default_attention_schedule, default_attention_stages, exp2_poly_suffix,
    fa4_kernel_name, gemm_kernel_name, gemm_params, streamk_buffers)
from warploom.runtime.artifact import KernelArtifact
from warploom.runtime.cache import KernelCache, MissingKernelError, default_cache, offline
from warploom.tuning import (CLUSTER_GROUP_M, CLUSTER_KERNELS, STREAMK_KERNELS,  # noqa: F401  (re-exported)
                             SWAP_KERNELS, table_specs)

PACKAGE = Path(__file__).parent
# what a compiled kernel depends on (the contract is kernel/contract.py; this module's sets and heuristics choose
# kernels but build none)
COMPILER_SOURCES = ("dialect", "kernel", "layout", "targets", "passes", "lowering", "score", "runtime/rules.py",
                    "build.py")   # score: the modifiers' expressions, which the lowering evaluates into the kernel


# The GEMM kernels `warploom precompile` builds: what warploom.ops.matmul may pick.
STANDARD_KERNELS: dict[str, list[GemmSpec]] = {
    "sm_90a": [GemmSpec(elem, layout, block_n, 4, "sm_90a", schedule)
               for schedule in ("grid", "persistent")
               for elem in ("bf16", "f16") for layout in ("kn", "nk") for block_n in (128, 256)]
    # small M (M <= 64): one consumer warpgroup of 64 rows and a ring of 8 stages, which beat 4 on every small-M shape
    # measured (benchmarks/NOTES.md, runs 20-22)
    + [GemmSpec(elem, layout, block_n, SMALL_M_STAGES, "sm_90a", "grid", 64)
       for elem in ("bf16", "f16") for layout in ("kn", "nk") for block_n in (64, 128)],
    # tcgen05, one CTA per SM walking the tiles, the accumulator double-buffered in TMEM. Assembled, SASS-checked
    # and emulated here; never run on a Blackwell GPU (none exists here).
    # 128 x 128 and 128 x 256 on one CTA (cta_group::1), 256 x 256 over a CTA pair (cta_group::2, a cluster of 2)
    "sm_100a": [GemmSpec(elem, layout, block_n, 4, "sm_100a", "persistent", block_m)
                for elem in ("bf16", "f16") for layout in ("kn", "nk")
                for block_m, block_n in ((128, 128), (128, 256), (256, 256))],
}

# ---- attention ----------------------------------------------------------------------------
# Tall tiles (ATTENTION_TALL_BLOCK_M = 192 query rows, three consumer warpgroups taking turns at the tensor cores:
# FA3's tile at head dim 64) for the persistent non-causal kernels of these head dims from this many query rows
# on: faster there at head dim 64, slower below, causal (a 192-row tile crosses the diagonal over two key blocks)
# and at head dim 128 (192 x 96: the registers leave room for no longer key block) (benchmarks/NOTES.md, run 44).
ATTENTION_TALL_MIN_SQ = {64: 4096}


# The stream-K schedule in place of the persistent walk (non-causal sm_90a attention, the 128-row tiles) where the
# persistent deal leaves at least this share of the SMs' time idle, 1 - (T / P) / ceil(T / P) for T tiles on P SMs.
# Run 57 (benchmarks/NOTES.md; an H100): idle 52% (64 tiles) 1.39x and 24% (200 tiles) 1.11x the persistent
# kernel; idle 3% (128, 256, 512 and 2048 tiles) 0.78-1.02x: the runs that cross tiles read K and V out of step with
# the tiles beside them (no L2 sharing), which costs more than a few per cent of idle SMs gain. And only where each
# CTA's stream-K run is long enough to pay for its pieces' extra Q loads, epilogues and merges (the runs measured: 62
# and 97 key blocks; a run of a block or two would spend more on its merge than on its keys).
ATTENTION_STREAMK_MIN_IDLE = 0.15
ATTENTION_STREAMK_MIN_RUN = 16          # key blocks of a CTA's stream-K run


def attention_idle_share(tiles: int, sms: int) -> float:
    """The share of the SMs' time the persistent deal of `tiles` equal tiles over `sms` SMs leaves idle."""
    if tiles < 1 or sms < 1:
        return 0.0
    waves = -(-tiles // sms)
    return 1.0 - tiles / (sms * waves)


def streamk_attention(head_dim: int, causal: bool, tiles: int, blocks: int, sms: int) -> bool:
    """Whether the standard sm_90a kernel for `tiles` tiles of `blocks` key blocks on `sms` SMs takes the stream-K
    schedule: non-causal, a head dim whose standard kernel is persistent, the persistent deal idling at least
    ATTENTION_STREAMK_MIN_IDLE, and stream-K runs of at least ATTENTION_STREAMK_MIN_RUN key blocks."""
    if causal or default_attention_schedule(head_dim) != "persistent" or tiles < 1 or blocks < 1 or sms < 1:
        return False
    ctas = min(sms, tiles * blocks)
    dp = max(tiles // ctas - 1, 0) * ctas                      # rules.streamk_dp_tiles
    return (attention_idle_share(tiles, sms) >= ATTENTION_STREAMK_MIN_IDLE
            and (tiles - dp) * blocks >= ATTENTION_STREAMK_MIN_RUN * ctas)


def tall_attention(head_dim: int, causal: bool, seqlen_q: int | None, schedule: str | None = None) -> bool:
    """Whether the standard sm_90a kernel for this problem takes the tall (192-row) tile."""
    least = ATTENTION_TALL_MIN_SQ.get(head_dim)
    return (least is not None and not causal and seqlen_q is not None and seqlen_q >= least
            and (schedule or default_attention_schedule(head_dim)) == "persistent")



# The attention kernels `warploom precompile` builds: what warploom.ops.attention may pick.
STANDARD_ATTENTION_KERNELS: dict[str, list[AttentionSpec]] = {
    "sm_90a": [AttentionSpec(elem, d, causal) for elem in ATTENTION_ELEMENTS for d in ATTENTION_HEAD_DIMS
               for causal in (False, True)]
    + [AttentionSpec(elem, d, False, block_m=ATTENTION_TALL_BLOCK_M) for elem in ATTENTION_ELEMENTS
       for d in ATTENTION_TALL_MIN_SQ]
    + [AttentionSpec(elem, d, False, schedule="streamk") for elem in ATTENTION_ELEMENTS for d in ATTENTION_HEAD_DIMS
       if default_attention_schedule(d) == "persistent"]
    # packed variable-length batches (warploom.ops.attention_varlen): grid kernels reading cu_seqlens
    + [AttentionSpec(elem, d, causal, varlen=True) for elem in ATTENTION_ELEMENTS for d in ATTENTION_HEAD_DIMS
       for causal in (False, True)],
    "sm_100a": [AttentionSpec(elem, d, causal, target="sm_100a", varlen=varlen) for elem in ATTENTION_ELEMENTS
                for d in FA4_HEAD_DIMS for causal in (False, True) for varlen in (False, True)],
}


def precompile_set(target: str) -> list:
    """Every kernel `warploom precompile --target TARGET` builds: the standard GEMMs, the stream-K, cluster and swap-AB
    GEMMs, then the attention kernels, then the GEMMs the shipped tuning table names that are not among them
    (warploom/tuning)."""
    standard = (list(STANDARD_KERNELS.get(target, ())) + list(STREAMK_KERNELS.get(target, ()))
                + list(CLUSTER_KERNELS.get(target, ())) + list(SWAP_KERNELS.get(target, ()))
                + list(STANDARD_ATTENTION_KERNELS.get(target, ())))
    return standard + [s for s in table_specs(target) if s not in standard]



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


def index_path(cache: KernelCache, spec: GemmSpec | AttentionSpec) -> Path:
    return cache.root / "index" / f"{spec.lookup_id}.json"


def read_index(cache: KernelCache, spec: GemmSpec | AttentionSpec) -> dict | None:
    try:
        return json.loads(index_path(cache, spec).read_text())
    except (OSError, ValueError):
        return None


def write_index(cache: KernelCache, spec: GemmSpec | AttentionSpec, key: str) -> None:
    path = index_path(cache, spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"spec": asdict(spec), "key": key, "compiler": compiler_hash()}
    if getattr(spec, "mods", None) is not None:
        doc["spec"]["mods"] = spec.mods.text            # the modifiers' canonical text, not their trees
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)       # atomic: readers see the old entry or the new one


def mlir_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("mlir") is not None


_memo: dict[tuple[str, GemmSpec | AttentionSpec], KernelArtifact] = {}


def compile_spec(spec: GemmSpec | AttentionSpec) -> KernelArtifact:
    """Compile `spec` now (imports the compiler, and so MLIR)."""
    if isinstance(spec, AttentionSpec):
        from warploom.build import compile_attention
        return compile_attention(spec)
    from warploom.build import compile_gemm
    return compile_gemm(spec)


def get_kernel(spec: GemmSpec | AttentionSpec, cache: KernelCache | None = None) -> KernelArtifact:
    """The compiled kernel for `spec`: from memory, from the cache, or compiled now (and cached)."""
    # keyed by the cache's root as given (or the env var), so a hit costs no path handling
    memo_key = (str(cache.root) if cache is not None else os.environ.get("WARPLOOM_CACHE_DIR"), spec)
    if memo_key in _memo:
        return _memo[memo_key]
    cache = cache or default_cache()
    artifact, entry = _cached(cache, spec)
    if artifact is None:
        if offline() or not mlir_available():
            stale = " (the cache holds one built by another warploom version)" if entry else ""
            raise MissingKernelError(spec.lookup_id, spec.describe() + stale,
                                     f"warploom precompile --target {spec.target} --cache {cache.root}")
        cache.check_writable()              # before minutes of compiling, not after
        with cache.lock(spec.lookup_id):    # processes wanting the same kernel: one compiles, the others wait
            artifact, _ = _cached(cache, spec)      # ... and find it here
            if artifact is None:
                artifact = compile_spec(spec)
                cache.put(artifact)
                write_index(cache, spec, artifact.key)
    _memo[memo_key] = artifact
    return artifact


def _cached(cache: KernelCache, spec: GemmSpec | AttentionSpec) -> tuple[KernelArtifact | None, dict | None]:
    """(the cached artifact of `spec` built by this compiler, or None; its index entry, or None)."""
    entry = read_index(cache, spec)
    if entry is not None and entry.get("compiler") == compiler_hash():
        return cache.get(entry["key"]), entry
    return None, entry