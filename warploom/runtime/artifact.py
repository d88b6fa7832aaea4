"""A compiled kernel as data: cubin + PTX + everything the launcher needs (params, tensor maps,
grid rules, block/cluster shape, shared memory), saved to and loaded from a folder.

Folder layout: `kernel.cubin`, `kernel.ptx`, `meta.json` (all other fields). The artifact is
the contract between the compiler (which writes it, with MLIR) and the runtime (which reads
it, without MLIR), so loading validates everything and names the file at fault.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from . import rules

FORMAT_VERSION = 1
CUBIN_FILE, PTX_FILE, META_FILE = "kernel.cubin", "kernel.ptx", "meta.json"

PARAM_KINDS = ("tensormap", "ptr", "i32", "i64", "f32")
SWIZZLES = (0, 32, 64, 128)
L2_PROMOTIONS = (0, 64, 128, 256)
OOB_FILLS = ("zero", "nan")

# CUDA limits on grid dimensions (x, y, z).
GRID_LIMITS = (2**31 - 1, 65535, 65535)


@dataclass(frozen=True)
class ParamSpec:
    """One kernel parameter, in launch order. kind: tensormap | ptr | i32 | i64 | f32."""
    name: str
    kind: str

    def __post_init__(self):
        if self.kind not in PARAM_KINDS:
            raise ValueError(f"parameter {self.name!r} has kind {self.kind!r}; kinds are {', '.join(PARAM_KINDS)}")


@dataclass(frozen=True)
class TensorMapSpec:
    """How to build one TMA descriptor at launch time.

    box and dims are innermost first: dims=("K", "M") with box=(64, 128) means 64 elements
    along K (contiguous) by 128 along M. swizzle is in bytes (0 = none). oob_fill "zero" or
    "nan" (NaN-request-zero-FMA).
    """
    name: str
    operand: str
    dtype: str
    box: tuple[int, ...]
    swizzle: int
    dims: tuple[str, ...]
    l2_promotion: int = 128
    oob_fill: str = "zero"

    def __post_init__(self):
        object.__setattr__(self, "box", tuple(int(b) for b in self.box))
        object.__setattr__(self, "dims", tuple(str(d) for d in self.dims))
        where = f"tensor map {self.name!r}"
        if len(self.box) != len(self.dims):
            raise ValueError(f"{where}: box {self.box} has {len(self.box)} entries but dims {self.dims} has "
                             f"{len(self.dims)}; give one box size per dimension, innermost first")
        if self.swizzle not in SWIZZLES:
            raise ValueError(f"{where}: swizzle {self.swizzle} is not one of {SWIZZLES} (bytes)")
        if self.l2_promotion not in L2_PROMOTIONS:
            raise ValueError(f"{where}: l2_promotion {self.l2_promotion} is not one of {L2_PROMOTIONS} (bytes)")
        if self.oob_fill not in OOB_FILLS:
            raise ValueError(f"{where}: oob_fill {self.oob_fill!r} is not one of {OOB_FILLS}")

    def to_json(self) -> dict:
        return {"name": self.name, "operand": self.operand, "dtype": self.dtype, "box": list(self.box),
                "swizzle": self.swizzle, "dims": list(self.dims), "l2_promotion": self.l2_promotion,
                "oob_fill": self.oob_fill}


# ---- grid rules: see rules.py ------------------------------------------------------------
def eval_rule(rule, sizes: dict) -> int:
    """A grid rule's value on the problem sizes (Python ints)."""
    return rules.evaluate(rule, sizes)


def _triple(value, what: str) -> tuple[int, int, int]:
    t = tuple(int(v) for v in value)
    if len(t) != 3 or any(v < 1 for v in t):
        raise ValueError(f"{what} {tuple(value)!r} must be three integers >= 1")
    return t  # type: ignore[return-value]


@dataclass
class KernelArtifact:
    name: str
    target: str
    cubin: bytes
    ptx: str
    smem_bytes: int
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    grid: tuple
    params: list[ParamSpec]
    tensor_maps: dict[str, TensorMapSpec]
    meta: dict = field(default_factory=dict)
    key: str = ""

    def __post_init__(self):
        # Normalise what JSON turns into lists, then check the whole contract once.
        self.block = _triple(self.block, f"kernel {self.name!r}: block")
        self.cluster = _triple(self.cluster, f"kernel {self.name!r}: cluster")
        self.grid = tuple(rules.check(r) for r in self.grid)
        self.params = [p if isinstance(p, ParamSpec) else ParamSpec(**p) for p in self.params]
        self.tensor_maps = {k: v if isinstance(v, TensorMapSpec) else TensorMapSpec(**v)
                            for k, v in self.tensor_maps.items()}
        self.validate()

    def validate(self) -> None:
        where = f"kernel {self.name!r}"
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"kernel name {self.name!r} must be a non-empty string (the PTX entry name)")
        if not isinstance(self.cubin, (bytes, bytearray)) or not isinstance(self.ptx, str):
            raise ValueError(f"{where}: cubin must be bytes and ptx a str")
        if not self.cubin and not self.ptx:
            raise ValueError(f"{where}: has neither cubin nor PTX; nothing could be loaded")
        if not isinstance(self.smem_bytes, int) or self.smem_bytes < 0:
            raise ValueError(f"{where}: smem_bytes {self.smem_bytes!r} must be an int >= 0")
        if len(self.grid) != 3:
            raise ValueError(f"{where}: grid needs 3 rules (x, y, z), got {len(self.grid)}")
        threads = self.block[0] * self.block[1] * self.block[2]
        if threads > 1024:
            raise ValueError(f"{where}: block {self.block} has {threads} threads; CUDA allows at most 1024")
        names = [p.name for p in self.params]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"{where}: parameter names repeat: {dup}")
        tmap_params = {p.name for p in self.params if p.kind == "tensormap"}
        if tmap_params - set(self.tensor_maps):
            raise ValueError(f"{where}: tensormap parameter(s) {sorted(tmap_params - set(self.tensor_maps))} "
                             "have no TensorMapSpec in tensor_maps")
        if set(self.tensor_maps) - tmap_params:
            raise ValueError(f"{where}: tensor_maps {sorted(set(self.tensor_maps) - tmap_params)} name no "
                             "parameter of kind 'tensormap'")
        for k, spec in self.tensor_maps.items():
            if spec.name != k:
                raise ValueError(f"{where}: tensor_maps[{k!r}] is named {spec.name!r}; the key must be its name")

    # ---- launch geometry ----
    def grid_for(self, sizes: dict[str, int]) -> tuple[int, int, int]:
        """Evaluate the grid rules on the problem sizes; each dimension must fit CUDA's limits."""
        out = []
        for axis, rule, limit in zip("xyz", self.grid, GRID_LIMITS):
            v = eval_rule(rule, sizes)
            if not 1 <= v <= limit:
                used = {n: sizes[n] for n in rule[1:] if isinstance(n, str) and n in sizes}
                hint = ("an empty problem launches nothing: skip the launch when a size is 0" if v < 1
                        else "split the problem or choose a larger tile")
                raise ValueError(f"kernel {self.name!r}: grid {axis} = {v} from rule {rule!r} with sizes {used} "
                                 f"is outside 1..{limit}; {hint}")
            out.append(v)
        return tuple(out)  # type: ignore[return-value]

    # ---- folder round trip ----
    def to_json(self) -> dict:
        return {"format": FORMAT_VERSION, "name": self.name, "target": self.target, "key": self.key,
                "smem_bytes": self.smem_bytes, "block": list(self.block), "cluster": list(self.cluster),
                "grid": [list(r) for r in self.grid],
                "params": [{"name": p.name, "kind": p.kind} for p in self.params],
                "tensor_maps": {k: v.to_json() for k, v in self.tensor_maps.items()},
                "meta": self.meta}

    def save(self, folder, fsync: bool = False) -> Path:
        """Write the three files into `folder` (created if needed). fsync=True flushes each to disk."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        meta = json.dumps(self.to_json(), indent=1, sort_keys=True)  # fails here, before writing, if meta is not JSON
        _write(folder / CUBIN_FILE, bytes(self.cubin), fsync)
        _write(folder / PTX_FILE, self.ptx.encode("utf-8"), fsync)
        _write(folder / META_FILE, meta.encode("utf-8"), fsync)
        return folder

    @classmethod
    def load(cls, folder) -> KernelArtifact:
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"kernel artifact folder {folder} does not exist")
        paths = {f: folder / f for f in (CUBIN_FILE, PTX_FILE, META_FILE)}
        for path in paths.values():
            if not path.is_file():
                raise FileNotFoundError(f"kernel artifact {folder} is incomplete: {path} is missing "
                                        "(rebuild it; a cache entry can be deleted to force a rebuild)")
        try:
            meta = json.loads(paths[META_FILE].read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{paths[META_FILE]} is not valid JSON: {e}") from e
        if not isinstance(meta, dict):
            raise ValueError(f"{paths[META_FILE]}: expected a JSON object, got {type(meta).__name__}")
        if meta.get("format") != FORMAT_VERSION:
            raise ValueError(f"{paths[META_FILE]}: format {meta.get('format')!r}, this warploom reads format "
                             f"{FORMAT_VERSION}; rebuild the kernel with this version")
        required = ("name", "target", "key", "smem_bytes", "block", "cluster", "grid", "params", "tensor_maps", "meta")
        missing = [k for k in required if k not in meta]
        if missing:
            raise ValueError(f"{paths[META_FILE]} lacks field(s) {missing}")
        try:
            return cls(name=meta["name"], target=meta["target"], cubin=paths[CUBIN_FILE].read_bytes(),
                       ptx=paths[PTX_FILE].read_text(encoding="utf-8"), smem_bytes=meta["smem_bytes"],
                       block=meta["block"], cluster=meta["cluster"], grid=meta["grid"], params=meta["params"],
                       tensor_maps=meta["tensor_maps"], meta=meta["meta"], key=meta["key"])
        except (TypeError, ValueError) as e:
            raise ValueError(f"kernel artifact {folder} is invalid: {e}") from e


def _write(path: Path, data: bytes, fsync: bool) -> None:
    with open(path, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
