"""Tuned GEMM kernel choices: the table `warploom.ops` consults before its tile model, and the candidates
`warploom tune` searches to fill it.

A table (`warploom/tuning/<target>.json`, shipped in the package) maps (op, element type, B layout, shape bucket)
to the kernel that ran fastest for that bucket on the GPU, with what was measured. A bucket rounds M, N and K up
to powers of two, so 3000x5000x1000 and 4000x4096x1024 share (4096, 8192, 1024). `warploom tune` (on a GPU)
times every candidate of `candidates()` for each shape it is given, beside cuBLAS, and writes the winners;
`warploom precompile` builds the candidates (`--tuning`) and every kernel the shipped table names, so a cache
built here serves the table there. A bucket the table lacks falls back to the tile model in `warploom.ops`.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from warploom import targets
from warploom.kernel.contract import SMALL_M_STAGES, GemmSpec

TABLE_DIR = Path(__file__).parent

# ---- the GEMM kernels beside the standard set (warploom.kernels.STANDARD_KERNELS) ---------------------------------
# `warploom precompile` builds them all (kernels.precompile_set); they are what `candidates` times and what
# warploom.ops.matmul may pick beside the standard set; warploom.kernels re-exports them.

# stream-K GEMMs (sm_90a): what warploom.ops.matmul may pick for few tiles or a partly idle last wave; `warploom
# precompile` builds them beside the standard set. The 64-row tile keeps the small-M kernels' deep ring, and the
# 128 x 128 tile comes with 6 stages too (the M = 128 grid kernels' best ring; benchmarks/NOTES.md, run 20).
# Not here: 64 x 128. Built the same way, it is exact in the emulator but wrong on the GPU, with no ptxas warning
# (tests/gpu/debug_streamk.py; benchmarks/NOTES.md, run 23).
STREAMK_KERNELS: dict[str, list[GemmSpec]] = {
    "sm_90a": [GemmSpec(elem, layout, block_n, stages, "sm_90a", "streamk", block_m)
               for elem in ("bf16", "f16") for layout in ("kn", "nk")
               for block_m, block_n, stages in ((64, 64, SMALL_M_STAGES), (128, 128, 4), (128, 128, 6),
                                                (128, 256, 4))]}

# swap-AB GEMMs (sm_90a, grid, C stored transposed from registers): C^T = B^T A^T, the wgmma's 64 rows along N and
# M its n (block_m 8..256), for decode-size M, where a 64-row tile wastes all but M of its rows (as cuBLAS does;
# benchmarks/NOTES.md, run 44). `warploom precompile` builds them; tuning candidates up to M = SWAP_M.
SWAP_KERNELS: dict[str, list[GemmSpec]] = {
    "sm_90a": [GemmSpec(elem, layout, block_n, SMALL_M_STAGES, "sm_90a", "grid", block_m, epilogue="direct",
                        swap_ab=True)
               for elem in ("bf16", "f16") for layout in ("kn", "nk")
               for block_m, block_n in ((8, 64), (16, 64), (16, 128), (32, 64))]}

# 2x1 clusters sharing B by TMA multicast (sm_90a, persistent): half the B traffic from L2 per CTA. `warploom
# precompile` builds them beside the standard set; they are tuning candidates (benchmarks/NOTES.md, runs 29-32).
# The 128 x 256 one also walking its tiles in bands of CLUSTER_GROUP_M rows (rules.tile_origin; benchmarks/NOTES.md,
# run 34), which the tile model takes (ops.pick_spec).
CLUSTER_GROUP_M = 8
CLUSTER_KERNELS: dict[str, list[GemmSpec]] = {
    "sm_90a": [GemmSpec(elem, layout, block_n, 4, "sm_90a", "persistent", cluster_m=2, group_m=group_m)
               for elem in ("bf16", "f16") for layout in ("kn", "nk")
               for block_n, group_m in ((128, 1), (256, 1), (256, CLUSTER_GROUP_M))]}

# what an entry chooses (elem and B layout are its key)
SPEC_FIELDS = ("block_m", "block_n", "stages", "schedule", "cluster_m", "group_m", "epilogue", "swap_ab")
# fields an entry written before they existed leaves out
SPEC_DEFAULTS = {"cluster_m": 1, "group_m": 1, "epilogue": "tma", "swap_ab": False}
ELEMENTS, LAYOUTS = ("bf16", "f16"), ("kn", "nk")
SWAP_M = 32           # up to here the swap-AB kernels join the candidates (M is their wgmma's n)
SMALL_M = 64          # up to here the candidates are 64-row tiles (a 128-row tile would be half empty or more)
MID_M = 128           # up to here the 128 x 128 grid kernels join them
PROBE_M = (1, SMALL_M, MID_M, MID_M + 1)    # one M of each candidate set


def bucket(m: int, n: int, k: int) -> tuple[int, int, int]:
    """M, N, K each rounded up to a power of two."""
    return tuple(1 << max(0, (v - 1).bit_length()) for v in (m, n, k))


def candidates(elem: str, b_layout: str, m: int, target: str = "sm_90a") -> list[GemmSpec]:
    """The kernels `warploom tune` times for a problem of M rows: small M the 64-row tiles with 4 and 8 stages
    (and the 128 x 128 and 128 x 64 grid kernels up to M = 128), larger M the 128-row tiles under both schedules; and stream-K
    kernels of the same tiles (64 rows, 8 stages up to M = 64; 128 rows, 4 stages above); above M = 128 the
    persistent 2x1 cluster kernels too; up to M = 32 the swap-AB kernels whose block_m covers M."""
    if not targets.get(target).hardware_here or targets.get(target).accumulator != "regs":
        raise ValueError(f"warploom tune searches sm_90a GEMM kernels; {target} has no candidates (its kernels "
                         "have not run on a GPU here)")
    out = []
    if m <= MID_M:
        out += [GemmSpec(elem, b_layout, bn, stages, target, "grid", 64)
                for bn in (64, 128) for stages in (4, 8)]
    if SMALL_M < m <= MID_M:
        out += [GemmSpec(elem, b_layout, 128, stages, target, "grid") for stages in (4, 6)]
        # 128 x 64 with a deep ring: twice the CTAs of 128 x 128 streaming B (128x8192x8192: 128 tiles, not 64),
        # A re-read from the L2 (not measured on the H200 yet; benchmarks/NOTES.md, after run 34)
        out += [GemmSpec(elem, b_layout, 64, SMALL_M_STAGES, target, "grid")]
    if m > SMALL_M:
        out += [GemmSpec(elem, b_layout, bn, 4, target, schedule)
                for bn in (128, 256) for schedule in ("persistent", "grid")]
    # stream-K (STREAMK_KERNELS): the 64-row tile with the deep ring for small M, the 128-row tiles above
    # (128 x 128 with 6 stages up to M = 128 only)
    out += [s for s in STREAMK_KERNELS[target] if (s.elem, s.b_layout) == (elem, b_layout)
            and (s.block_m == 64) == (m <= SMALL_M) and (s.stages == 4 or s.block_m == 64 or m <= MID_M)]
    # 2x1 clusters sharing B (CLUSTER_KERNELS): two 128-row tiles a cluster, so above M = 128
    if m > MID_M:
        out += [s for s in CLUSTER_KERNELS[target] if (s.elem, s.b_layout) == (elem, b_layout)]
    # swap-AB (SWAP_KERNELS): those whose block_m (the wgmma's n) covers M in one tile
    if m <= SWAP_M:
        out += [s for s in SWAP_KERNELS[target] if (s.elem, s.b_layout) == (elem, b_layout) and s.block_m >= m]
    return out


def all_candidates(target: str = "sm_90a") -> list[GemmSpec]:
    """Every kernel any problem may be tuned over (what `warploom precompile --tuning` builds)."""
    seen = {}
    for elem in ELEMENTS:
        for layout in LAYOUTS:
            for m in PROBE_M:
                for spec in candidates(elem, layout, m, target):
                    seen.setdefault(spec, None)
    return list(seen)


def table_path(target: str) -> Path:
    return TABLE_DIR / f"{target}.json"


def entry_key(op: str, elem: str, b_layout: str, shape_bucket) -> str:
    return f"{op}/{elem}/{b_layout}/{'x'.join(map(str, shape_bucket))}"


def spec_of(entry: dict, elem: str, b_layout: str, target: str) -> GemmSpec:
    """The GemmSpec an entry names (ValueError for an entry this warploom cannot build)."""
    fields = {f: entry["kernel"].get(f, SPEC_DEFAULTS.get(f)) for f in SPEC_FIELDS}
    spec = GemmSpec(elem, b_layout, fields["block_n"], fields["stages"], target, fields["schedule"],
                    fields["block_m"], epilogue=fields["epilogue"], cluster_m=fields["cluster_m"],
                    group_m=fields["group_m"], swap_ab=fields["swap_ab"])
    if spec not in [c for m in PROBE_M for c in candidates(elem, b_layout, m, target)]:
        raise ValueError(f"tuning entry names {spec.kernel_name}, which is not a tuning candidate")
    return spec


_TABLES: dict[str, dict] = {}


def load(target: str) -> dict:
    """The shipped table of `target` (an empty one when there is none), read once."""
    if target not in _TABLES:
        path = table_path(target)
        _TABLES[target] = json.loads(path.read_text())["entries"] if path.exists() else {}
    return _TABLES[target]


def lookup(elem: str, b_layout: str, m: int, n: int, k: int, target: str = "sm_90a") -> GemmSpec | None:
    """The tuned kernel for this problem's bucket, or None."""
    entry = load(target).get(entry_key("matmul", elem, b_layout, bucket(m, n, k)))
    return None if entry is None else spec_of(entry, elem, b_layout, target)


def table_specs(target: str) -> list[GemmSpec]:
    """Every kernel the shipped table names (what `warploom precompile` adds to the standard set)."""
    out = {}
    for key, entry in load(target).items():
        _, elem, b_layout, _ = key.split("/")
        out.setdefault(spec_of(entry, elem, b_layout, target), None)
    return list(out)


def entry(spec: GemmSpec, shape, timings: dict, cublas_ms: float, meta: dict) -> dict:
    """A table entry: the winner's fields, the shape it was measured on, every candidate's time."""
    fields = asdict(spec)
    return {"kernel": {f: fields[f] for f in SPEC_FIELDS}, "name": spec.kernel_name, "shape": list(shape),
            "ms": timings[spec.kernel_name], "cublas_ms": cublas_ms, "ratio_vs_cublas": cublas_ms / timings[spec.kernel_name],
            "candidates_ms": timings, **meta}


def write(path: Path, entries: dict, meta: dict) -> None:
    """Merge `entries` into the table at `path` (entries of the same key are replaced)."""
    old = json.loads(path.read_text())["entries"] if path.exists() else {}
    old.update(entries)
    path.write_text(json.dumps({"about": "warploom tuning table: the fastest kernel per (op, elem, B layout, shape "
                                         "bucket) measured by `warploom tune`; see warploom/tuning/__init__.py",
                                **meta, "entries": dict(sorted(old.items()))}, indent=1) + "\n")
