"""Run a lowered kernel on the CPU: bind a launch's arguments, run every CTA of the grid, report.

    kernel = EmulatedKernel.of(lower_kernel(program, name))          # or .of(artifact, gpu_module)
    report = emulate_launch(kernel, {"a": a, "b": b, "c": c}, sizes={"M": 130, "N": 136, "K": 72, "SMS": 2},
                            seed=0, delay=4)

The launch contract is the runtime's (warploom.runtime.artifact): parameters in order (tensor
maps, pointers (None: a null pointer), i32/i64/f32 scalars), tensor-map specs (dims and box innermost first: a row-major numpy
array's axes reversed, as warploom.ops encodes them with dims_order [1, 0]), grid rules evaluated
with warploom.runtime.rules, block, cluster and dynamic smem bytes. Clusters run one after another:
the CTAs of one thread-block cluster (the contract's cluster shape; the grid must be a multiple of
it) run together in one scheduler (cluster.Cluster), interleaving all their warps and async events,
sharing distributed shared memory and barrier.cluster; CTAs of different clusters share nothing but
the output they write to disjoint tiles. Without clusters every CTA is a cluster of one.

It runs what it is given and compiles nothing: the front door that builds a spec's kernel first (emulate_gemm,
emulate_attention) is front.py, a layer above warploom.build.
"""
from __future__ import annotations

import itertools
import random
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from warploom.runtime import rules
from warploom.targets import get as get_target

from .compiler import Compiled, compile_kernel
from .errors import EmulationError, OutOfBoundsError, RegisterBudgetError, UnknownOpError
from .machine import CTA, MAX_CLUSTER_CTAS, NUMPY_ELEMS, SMEM_BASE, WARP, Cluster, GlobalMemory, Warp
from .names import SmemNames

TMAP_BASE = 0x1000          # made-up param-space addresses of the tensor-map parameters, 128 B apart
TMAP_BYTES = 128


@dataclass
class EmulatedKernel:
    """A compiled kernel and its launch contract (the fields of LoweredKernel / KernelArtifact)."""
    name: str
    compiled: Compiled
    params: list
    tensor_maps: dict
    grid: tuple
    block: tuple
    cluster: tuple
    smem_bytes: int
    names: SmemNames | None = None        # the plan's names for smem addresses, for messages (from gemm_kernel)
    # what owns the MLIR the closures point back to (for error messages): the LoweredKernel (its holder module) or
    # the module given; without it the ops are freed with their module and printing one crashes
    source: object = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, kernel, gpu_module=None) -> EmulatedKernel:
        """From a LoweredKernel (which holds its gpu.module) or a KernelArtifact plus the gpu.module (the op, or a
        module holding it) it was built from."""
        if isinstance(kernel, EmulatedKernel):
            return kernel
        module = gpu_module if gpu_module is not None else getattr(kernel, "gpu_module", None)
        if module is None:
            raise ValueError(f"kernel {kernel.name!r} carries no gpu.module: pass gpu_module= (the MLIR it was "
                             "lowered to) to emulate it")
        compiled = compile_kernel(find_gpu_module(module, kernel.name), kernel.name)
        # the ops' OpInfo (error messages) read the MLIR ops: their module (a LoweredKernel's holder) must outlive them
        return cls(kernel.name, compiled, list(kernel.params), dict(kernel.tensor_maps), tuple(kernel.grid),
                   tuple(kernel.block), tuple(kernel.cluster), kernel.smem_bytes, source=(kernel, module))


def find_gpu_module(module, kernel_name: str):
    """The gpu.module op holding `kernel_name`: the op itself, or found inside a builtin module."""
    op = module.operation if hasattr(module, "operation") else module
    if op.name == "gpu.module":
        return op
    for child in op.regions[0].blocks[0].operations:
        child = child.operation
        if child.name == "gpu.module":
            for f in child.regions[0].blocks[0].operations:
                if f.operation.name == "llvm.func" and str(f.operation.attributes["sym_name"]).strip('"') == kernel_name:
                    return child
    raise ValueError(f"no gpu.module holding kernel {kernel_name!r} in the given module")


@dataclass
class TensorMapBinding:
    spec: object
    array: np.ndarray


@dataclass
class EmulationReport:
    kernel: str
    grid: tuple
    ctas: int
    seconds: float
    stats: dict = field(default_factory=dict)   # scheduler steps, TMA loads, wgmma issued
    cluster: tuple = (1, 1, 1)

    def __str__(self) -> str:
        s = ", ".join(f"{k} {v}" for k, v in sorted(self.stats.items()))
        shape = f", cluster {self.cluster}" if tuple(self.cluster) != (1, 1, 1) else ""
        return f"{self.kernel}: grid {self.grid}{shape}, {self.ctas} CTAs in {self.seconds:.2f} s ({s})"


class Launch:
    """What every CTA of one launch shares: global memory, tensor maps, grid, smem size and base."""

    def __init__(self, kernel: EmulatedKernel, grid: tuple, smem_base: int, cluster: tuple = (1, 1, 1),
                 launch_regs: int | None = None):
        self.kernel, self.grid, self.smem_base, self.cluster = kernel, grid, smem_base, tuple(cluster)
        self.smem_bytes = kernel.smem_bytes
        # Registers per thread at launch, which setmaxnreg then moves between warpgroups: by default what
        # the lowering assumes (targets.Target.launch_regs: one block fills the register file).
        target = get_target("sm_90a")
        threads = kernel.block[0] * kernel.block[1] * kernel.block[2]
        self.register_file = target.register_file
        self.launch_regs = target.launch_regs(threads) if launch_regs is None else launch_regs
        if self.launch_regs * threads > self.register_file:
            raise RegisterBudgetError(f"kernel {kernel.name!r}: {self.launch_regs} registers per thread x {threads} "
                                      f"threads exceed the {self.register_file}-register file of {target.name}")
        self.memory = GlobalMemory()
        self.tmaps: dict[int, TensorMapBinding] = {}
        self.stats = Counter()
        self.check_unread = True              # emulate_launch(check_unread=): see there
        self.releases: dict = {}              # empty-barrier address -> [(smem offsets lo, hi) of its stage]
        self.address_cache: dict = {}
        self.tolerate: frozenset = frozenset()   # emulate_launch(tolerate=): error kinds noted, not raised
        self.tolerated: list[str] = []           # their messages, in order

    def report(self, error) -> None:
        """Raise `error`, unless the launch tolerates its kind (emulate_launch(tolerate=)): then note its message
        (stats["tolerated"], `tolerated`) and let the emulation go on."""
        if type(error).__name__ not in self.tolerate:
            raise error
        self.stats["tolerated"] += 1
        self.tolerated.append(str(error))

    def tensor_map_at(self, addr: int) -> TensorMapBinding:
        if addr not in self.tmaps:
            known = ", ".join(f"{b.spec.name!r} at 0x{a:x}" for a, b in self.tmaps.items())
            raise OutOfBoundsError(f"0x{addr:x} is not a tensor-map parameter (the launch has {known}): TMA ops "
                                   "take the kernel's tensor-map argument itself")
        return self.tmaps[addr]

    def sreg(self, name: str, axis: int, cta: CTA) -> int:
        if name == "ctaid":
            return cta.id[axis]
        if name == "nctaid":
            return self.grid[axis]
        if name == "ntid":
            return self.kernel.block[axis]
        # PTX ISA "Special Registers" of a cluster ("Cluster of cooperative thread arrays")
        shape = self.cluster
        if name == "cluster_ctarank":
            return cta.rank
        if name == "cluster_nctarank":
            return shape[0] * shape[1] * shape[2]
        if name == "clusterid":
            return cta.id[axis] // shape[axis]
        if name == "nclusterid":
            return self.grid[axis] // shape[axis]
        if name == "cluster_ctaid":
            return cta.id[axis] % shape[axis]
        if name == "cluster_nctaid":
            return shape[axis]
        raise UnknownOpError(f"special register {name} is not modelled")


ORDERS = ("random", "round_robin", "priority")     # how the scheduler interleaves warps (Cluster.run)


def emulate_launch(kernel, args: dict, sizes: dict, *, gpu_module=None, seed: int = 0, delay: int = 4,
                   order: str = "random", smem_base: int = SMEM_BASE, ctas=None, trace: dict | None = None,
                   launch_regs: int | None = None, check_unread: bool = True, tolerate=()) -> EmulationReport:
    """Run every CTA of the launch (or the clusters holding the CTA ids in `ctas`: a cluster's CTAs only run
    together); outputs are written into the `args` arrays.

    args: numpy arrays by parameter name (tensor maps and pointers), and ints for scalars (else taken from
    sizes). seed picks the interleaving of warps and async completions; delay is the most scheduler steps an
    async operation may take; order "random", "round_robin" or "priority" (Cluster.run). trace: {CTA id (x, y, z): list}, the CTAs
    whose (step, warp, kind, text) records of waits, arrivals, TMA copies and wgmmas to append to the list;
    launch_regs the registers per thread at launch (default: sm_90a's register file shared evenly, as the
    lowering plans setmaxnreg budgets). check_unread: a TMA copy may not overwrite smem an earlier copy wrote
    that no MMA or ld.shared has read yet (a stage released before its consumer used it); switch it off only
    for a kernel that loads data on purpose and never reads it. tolerate: names of error kinds (only those whose
    check goes through `Launch.report`: "PairDeallocError") to count in the report's stats as "tolerated" instead
    of raising, for a known bug whose fix is pending (the mutation probe), so that the rest is still checked."""
    k = EmulatedKernel.of(kernel, gpu_module)
    if order not in ORDERS:
        raise ValueError(f"order {order!r}: one of {', '.join(ORDERS)}")
    grid = tuple(rules.evaluate(r, sizes) for r in k.grid)
    shape = _cluster_shape(k, grid)
    launch = Launch(k, grid, smem_base, shape, launch_regs)
    launch.check_unread = check_unread
    launch.tolerate = frozenset(tolerate)
    if k.names is not None and check_unread:
        # the plan's ring stages, by the smem address of the barrier whose phase hands each back to its producer
        base = k.names.base(smem_base)
        launch.releases = {base + bar: [(base - smem_base + off, base - smem_base + off + n) for off, n in stage]
                           for bar, stage in k.names.releases}
    values = []
    for i, p in enumerate(k.params):
        if p.kind == "tensormap":
            spec = k.tensor_maps[p.name]
            array = _input(args, p.name, spec.dtype, len(spec.box))
            addr = TMAP_BASE + TMAP_BYTES * i
            launch.tmaps[addr] = TensorMapBinding(spec, array)
            values.append(addr)
        elif p.kind == "ptr":
            if p.name in args and args[p.name] is None:
                values.append(0)                # a null pointer: any access through it is out of bounds
                continue
            if p.name not in args or not isinstance(args[p.name], np.ndarray):
                raise ValueError(f"kernel {k.name!r} parameter {p.name!r} (pointer) needs a numpy array (or None "
                                 "for a null pointer) in args")
            values.append(launch.memory.add(p.name, args[p.name]))
        elif p.kind == "f32":
            v = args.get(p.name, sizes.get(p.name))
            if v is None:
                raise ValueError(f"kernel {k.name!r} parameter {p.name!r} (f32) has no value in args or sizes")
            values.append(np.float32(v))
        elif p.kind in ("i32", "i64"):
            v = args.get(p.name, sizes.get(p.name))
            if v is None:
                raise ValueError(f"kernel {k.name!r} parameter {p.name!r} ({p.kind}) has no value in args or sizes")
            values.append(int(v) & ((1 << int(p.kind[1:])) - 1))
        else:
            raise UnknownOpError(f"parameter {p.name!r} of kind {p.kind!r} is not modelled")
    threads = k.block[0] * k.block[1] * k.block[2]
    if k.block[1:] != (1, 1):
        raise UnknownOpError(f"block {k.block}: only 1-D blocks are modelled")
    rng = random.Random(seed)
    ids = list(ctas) if ctas is not None else list(itertools.product(*(range(g) for g in grid)))
    # clusters in the order their first requested CTA comes; each cluster's CTAs by rank
    clusters: dict = {}
    for i in ids:
        clusters.setdefault(tuple(i[a] // shape[a] for a in range(3)), None)
    t0 = time.perf_counter()
    count = 0
    with np.errstate(all="ignore"):            # float ops make inf and NaN as the hardware does
        for cid in clusters:
            cluster = Cluster(launch, cid, shape, rng, delay, order)
            warps = []
            for dz, dy, dx in itertools.product(*(range(n) for n in shape[::-1])):
                cta = CTA(launch, (cid[0] * shape[0] + dx, cid[1] * shape[1] + dy, cid[2] * shape[2] + dz), rng,
                          delay, order, cluster)
                if trace is not None and cta.id in trace:
                    cta.trace = trace[cta.id]
                cta_warps = [Warp(cta, w, k.compiled.nslots, threads) for w in range(-(-threads // WARP))]
                for w in cta_warps:
                    k.compiled.start(w, values)
                warps += cta_warps
            count += cluster.size
            try:
                cluster.run(warps)
            except EmulationError as e:
                if k.names is not None:        # name the plan's regions and barriers beside their addresses
                    e.detail = k.names.annotate(e.detail, smem_base)
                    e.args = (str(e),)
                raise
    return EmulationReport(k.name, grid, count, time.perf_counter() - t0, dict(launch.stats), shape)


def _cluster_shape(k: EmulatedKernel, grid: tuple) -> tuple:
    """The contract's cluster shape, checked against the grid (PTX ISA "Cluster of cooperative thread arrays")."""
    shape = tuple(int(c) for c in k.cluster)
    if len(shape) != 3 or any(c < 1 for c in shape):
        raise ValueError(f"kernel {k.name!r} has cluster {k.cluster}: give three positive extents (x, y, z)")
    n = shape[0] * shape[1] * shape[2]
    if n > MAX_CLUSTER_CTAS:
        raise ValueError(f"kernel {k.name!r} has cluster {shape} of {n} CTAs: at most {MAX_CLUSTER_CTAS} (8 portable, "
                         "16 with the non-portable size opt-in)")
    bad = [a for a in range(3) if grid[a] % shape[a]]
    if bad:
        axes = ", ".join(f"{'xyz'[a]}: {grid[a]} % {shape[a]} = {grid[a] % shape[a]}" for a in bad)
        raise ValueError(f"kernel {k.name!r}: grid {grid} is not a multiple of its cluster {shape} ({axes}); a "
                         "launch with clusters needs whole clusters in every dimension")
    return shape


def _input(args: dict, name: str, dtype: str, rank: int) -> np.ndarray:
    if name not in args:
        raise ValueError(f"tensor-map parameter {name!r} needs its numpy array in args")
    a = args[name]
    want = NUMPY_ELEMS.get(dtype)
    if not isinstance(a, np.ndarray) or a.dtype != want or a.ndim != rank:
        got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
        raise TypeError(f"tensor-map parameter {name!r} needs a {rank}-d {dtype} numpy array, got {got}: "
                        f"convert it with .astype(warploom.emulate.machine.NUMPY_ELEMS[{dtype!r}])")
    return a            # a view is fine (TMA sees its shape); a TMA store writes through it into the caller's array
