"""The CPU schedule simulator: run a planned GEMM kernel program (a `warploom.kernel.Program`) on numpy.

Each warpgroup of a warpgroup role, and the one issuing thread of a thread
role, is a coroutine; mbarriers keep a phase, pending arrivals and tx bytes
exactly as the hardware does (a wait on parity P passes while the barrier's
current phase parity differs from P); TMA copies are in flight until the
scheduler lands them; wgmma groups read their smem stages until an MmaWait
retires them. Interleavings come from a seeded random scheduler, so a protocol
error shows up as one of:

  deadlock      every coroutine waits and no copy is in flight
  race          a TMA copy lands in a stage that in-flight MMAs still read, or an
                MMA reads a stage whose data has not landed for this iteration
  wrong result  C differs from the float64 reference

Smem is held per region stage as logical tiles (no swizzle): the simulator checks
the schedule and the data flow of the plan, not the byte layout of the lowering.
A region's dims name the global tensor's dims too (the last is contiguous in
both), which is how a copy finds its tile and an MMA orients its operands.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from warploom import targets
from warploom.kernel import Arrive, Copy, Loop, Mma, MmaWait, Program, Role, Store, Wait
from warploom.runtime import rules

from .ops import round_to


class SimulationError(RuntimeError):
    """A deadlock, a race or a malformed program, with what each coroutine was doing."""


@dataclass
class Barrier:
    arrivals: int               # arrivals that complete a phase
    phase: int = 0              # the running phase (starts at the barrier's phase0)
    pending: int = 0
    tx: int = 0

    def __post_init__(self):
        self.pending = self.arrivals

    def arrive(self, count: int = 1, tx_bytes: int = 0) -> None:
        self.tx += tx_bytes
        self.pending -= count
        if self.pending < 0:
            raise SimulationError(f"mbarrier got more arrivals than its count {self.arrivals}")
        self._maybe_complete()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.arrivals

    def passed(self, parity: int) -> bool:
        """try_wait.parity: the phase with this parity has completed (the running one has the other parity)."""
        return self.phase % 2 != parity


@dataclass
class Stage:
    data: np.ndarray | None = None
    landed_for: int = -1        # the ring iteration whose copy landed here
    readers: int = 0            # in-flight MMA groups reading this stage


@dataclass
class Transfer:
    """A TMA copy in flight: lands `tile` in a region stage, then completes its bytes on `barrier`."""
    region: str
    stage: int
    it: int
    tile: np.ndarray
    barrier: Barrier
    nbytes: int


@dataclass
class Group:
    reads: list = field(default_factory=list)     # (region, stage) pairs


def slot(count: int, ring_it: int) -> tuple[int, int]:
    """(stage, phase parity) of ring iteration `ring_it` on a resource of `count` stages."""
    return ring_it % count, (ring_it // count) & 1


def k_last(tile: np.ndarray, dims: tuple[str, ...], k_dim: str) -> np.ndarray:
    """The tile with the contraction dim as its last axis."""
    return tile if dims[-1] == k_dim else tile.T


class CTA:
    """One CTA running the program over its output tiles."""

    def __init__(self, program: Program, inputs: dict, c, sizes, tiles, rng):
        self.p, self.inputs, self.c, self.sizes, self.tiles, self.rng = program, inputs, c, sizes, tiles, rng
        self.target = targets.get(program.target)
        self.BM, self.BN, self.BK = program.attrs["tile"]
        # every loop of the GEMM schedule walks the K tiles; ring iterations count on across tiles by this much
        self.trips = rules.evaluate(next(op.trip for _, op in program.ops() if isinstance(op, Loop)), sizes)
        self.stages = {n: [Stage() for _ in range(r.stages)] for n, r in program.regions.items() if r.space == "smem"}
        self.bars = {n: [Barrier(b.arrivals, b.phase0) for _ in range(b.count)] for n, b in program.barriers.items()}
        self.copies: list[Transfer] = []
        self.waiting: dict[str, tuple[str, Barrier, int]] = {}   # coroutine -> (what, barrier, parity)

    # ---- global memory tiles (TMA semantics: out-of-bounds elements read as zero) ----
    def global_tile(self, copy: Copy, origin: dict[str, int]) -> np.ndarray:
        region = self.p.regions[copy.region]
        src = self.inputs[copy.source]
        (r0, c0), (rows, cols) = (origin[d] for d in region.dims), region.shape
        tile = np.zeros((rows, cols))
        part = src[r0:r0 + rows, c0:c0 + cols]
        tile[:part.shape[0], :part.shape[1]] = part
        return tile

    def stage_bytes(self, name: str) -> int:
        return self.p.regions[name].stage_bytes

    # ---- coroutines ----
    def role_coroutines(self):
        per_wg = self.target.warpgroup_threads // self.target.warp_size
        for role in self.p.roles:
            first_wg = role.first_warp // per_wg
            if role.issue == "thread":      # one elected thread issues for the whole role
                units = [first_wg]
            elif role.issue == "warpgroup":
                units = list(range(first_wg, first_wg + -(-role.warps // per_wg)))
            else:
                raise SimulationError(f"role {role.name!r} issues per {role.issue}; the simulator runs roles that "
                                      "issue per thread or per warpgroup")
            for i, wg in enumerate(units):
                name = f"{role.name}[wg{wg}]"
                yield name, self.run_role(role, i, name)

    def arrivals(self, role: Role, op: Arrive) -> int:
        """Arrivals one coroutine makes: its warpgroup's one thread, the role's issuing thread, or every thread."""
        if op.per == "warpgroup" or role.issue == "thread":
            return 1
        return self.target.warpgroup_threads

    def run_role(self, role: Role, wg_index: int, name: str):
        accs: dict[str, np.ndarray] = {}
        inflight: list[Group] = []
        for t_index, (m0, n0) in enumerate(self.tiles):
            it_base = t_index * self.trips
            for op in role.body:
                yield from self.run_op(role, op, name, wg_index, accs, inflight, m0, n0, it_base)
        if inflight:
            raise SimulationError(f"{name} ended with {len(inflight)} MMA group(s) never waited for")

    def run_op(self, role, op, name, wg, accs, inflight, m0, n0, it_base, it=None):
        if isinstance(op, Loop):
            for kt in range(rules.evaluate(op.trip, self.sizes)):
                for inner in op.body:
                    yield from self.run_op(role, inner, name, wg, accs, inflight, m0, n0, it_base,
                                           it=(it_base + kt, kt))
            return
        if isinstance(op, MmaWait):
            while len(inflight) > op.pending:
                for region, stage in inflight.pop(0).reads:
                    self.stages[region][stage].readers -= 1
            return
        if isinstance(op, Store):
            if inflight:
                raise SimulationError(f"race: {name} stores accumulator {op.value!r} while {len(inflight)} MMA "
                                      "group(s) that write it are still in flight (missing MmaWait(pending=0))")
            self.store(accs.pop(op.value), m0 + wg * op.tile[0], n0)
            return
        if not isinstance(op, (Wait, Arrive, Copy, Mma)):
            raise SimulationError(f"the simulator does not know {type(op).__name__} (in {name})")
        if it is None:
            raise SimulationError(f"{type(op).__name__} in {name} is outside a loop")
        ring_it, kt = it
        if isinstance(op, Copy) and op.barrier is None:
            raise SimulationError(f"{name} copies {op.source!r} with no barrier to complete on; run wl-plan-barriers")
        if isinstance(op, Wait):
            bar_stage, phase = slot(self.p.barriers[op.barrier].count, ring_it)
            if op.parity not in ("phase", "phase^1"):
                raise SimulationError(f"{name} waits on parity {op.parity!r} of {op.barrier!r}; "
                                      "the simulator knows 'phase' and 'phase^1'")
            parity = phase if op.parity == "phase" else phase ^ 1
            bar = self.bars[op.barrier][bar_stage]
            while not bar.passed(parity):
                self.waiting[name] = (f"waits {op.barrier}[{bar_stage}] parity {parity} (iteration {ring_it})",
                                      bar, parity)
                yield
            self.waiting.pop(name, None)
        elif isinstance(op, Arrive):
            if ring_it >= op.lag:
                bar_stage, _ = slot(self.p.barriers[op.barrier].count, ring_it - op.lag)
                self.bars[op.barrier][bar_stage].arrive(self.arrivals(role, op), op.tx_bytes)
        elif isinstance(op, Copy):
            stage, _ = slot(self.p.regions[op.region].stages, ring_it)
            st = self.stages[op.region][stage]
            if st.readers:
                raise SimulationError(f"race: {name} issues a TMA copy into {op.region}[{stage}] (iteration "
                                      f"{ring_it}) while {st.readers} MMA group(s) still read it")
            tile = self.global_tile(op, {"M": m0, "N": n0, "K": kt * self.BK})
            bar_stage, _ = slot(self.p.barriers[op.barrier].count, ring_it)
            self.copies.append(Transfer(op.region, stage, ring_it, tile, self.bars[op.barrier][bar_stage],
                                        self.stage_bytes(op.region)))
        else:
            self.mma(op, name, wg, accs, inflight, ring_it)

    def mma(self, op: Mma, name, wg, accs, inflight, ring_it) -> None:
        m, n, _ = op.shape
        group = Group()
        tiles = []
        for operand in (op.a, op.b):
            if operand.source != "smem":
                raise SimulationError(f"{name} reads MMA operand {operand.name!r} from {operand.source}; the "
                                      "simulator reads operands from smem")
            region = self.p.regions[operand.name]
            stage, _ = slot(region.stages, ring_it)
            st = self.stages[operand.name][stage]
            if st.landed_for != ring_it:
                raise SimulationError(f"race: {name} reads {operand.name}[{stage}] for iteration {ring_it} but it "
                                      f"holds iteration {st.landed_for}'s data")
            st.readers += 1
            group.reads.append((operand.name, stage))
            tiles.append(k_last(st.data, region.dims, op.k_dim))
        a_tile = tiles[0][wg * m:(wg + 1) * m]
        product = a_tile @ tiles[1].T
        accs[op.acc.name] = (accs.get(op.acc.name, np.zeros((m, n))) + product) if op.accumulate else product
        inflight.append(group)

    def land(self, copy: Transfer) -> None:
        st = self.stages[copy.region][copy.stage]
        if st.readers:
            raise SimulationError(f"race: a TMA copy lands in {copy.region}[{copy.stage}] (iteration {copy.it}) "
                                  f"while {st.readers} MMA group(s) still read it")
        st.data, st.landed_for = copy.tile, copy.it
        copy.barrier.complete_tx(copy.nbytes)

    def store(self, acc: np.ndarray, r0: int, c0: int) -> None:
        m, n = self.sizes["M"], self.sizes["N"]
        rows, cols = min(acc.shape[0], max(0, m - r0)), min(acc.shape[1], max(0, n - c0))
        if rows > 0 and cols > 0:
            self.c[r0:r0 + rows, c0:c0 + cols] = acc[:rows, :cols]

    def run(self, max_steps: int = 10_000_000) -> int:
        live = dict(self.role_coroutines())
        steps = 0
        while live or self.copies:
            steps += 1
            if steps > max_steps:
                raise SimulationError("step limit reached")
            choices = list(live) + (["<land>"] if self.copies else [])
            pick = self.rng.choice(choices)
            if pick == "<land>":
                self.land(self.copies.pop(self.rng.randrange(len(self.copies))))
                continue
            try:
                next(live[pick])
            except StopIteration:
                del live[pick]
                continue
            blocked = [n for n in live if n in self.waiting and not self.waiting[n][1].passed(self.waiting[n][2])]
            if live and len(blocked) == len(live) and not self.copies:
                detail = "; ".join(f"{n}: {self.waiting[n][0]}" for n in live)
                raise SimulationError(f"deadlock: {detail}")
        return steps


def cta_tiles(program: Program, sizes: dict, num_ctas: int | None) -> list[list[tuple[int, int]]]:
    """The (m0, n0) tiles of each CTA, by the kernel's schedule: the persistent tile order is the one
    warploom.runtime.rules.tile_origin defines (the lowering emits the same function)."""
    bm, bn, _ = program.attrs["tile"]
    order_rule = ("persistent", "M", bm, "N", bn, "SMS")
    sizes = {**sizes, "SMS": num_ctas or sizes.get("SMS", 132)}
    n_tiles, m_tiles = rules.tile_counts(order_rule, sizes)
    order = [tuple(rules.tile_origin(order_rule, t, n_tiles)[d] for d in ("M", "N")) for t in range(m_tiles * n_tiles)]
    if program.attrs.get("schedule", "grid") != "persistent":
        return [[t] for t in order]
    ctas = rules.evaluate(order_rule, sizes)
    return [order[i::ctas] for i in range(ctas)]


def bind_sizes(program: Program, inputs: dict[str, np.ndarray]) -> dict[str, int]:
    """M, N, K from the inputs' shapes, read through the dims of the regions their copies fill."""
    sizes: dict[str, int] = {}
    for _, op in program.ops():
        if not isinstance(op, Copy):
            continue
        dims = program.regions[op.region].dims
        for dim, extent in zip(dims, inputs[op.source].shape):
            if sizes.setdefault(dim, extent) != extent:
                raise ValueError(f"input {op.source!r} has {dim} = {extent}, another input {sizes[dim]}")
    return sizes


def simulate_gemm(program: Program, a: np.ndarray, b: np.ndarray, *, seed: int = 0, num_ctas: int | None = None,
                  out_elem: str | None = None) -> np.ndarray:
    """C of the planned GEMM `program` on a [M, K] and b ([K, N] or [N, K], as its region's dims say), rounded
    to `out_elem` (default: the kernel's output element type). Raises SimulationError on a protocol error."""
    inputs = dict(zip(program.inputs, (np.asarray(a, np.float64), np.asarray(b, np.float64))))
    sizes = bind_sizes(program, inputs)
    c = np.full((sizes["M"], sizes["N"]), np.nan)
    rng = random.Random(seed)
    for tiles in cta_tiles(program, sizes, num_ctas):
        CTA(program, inputs, c, sizes, tiles, rng).run()
    if np.isnan(c).any():
        raise SimulationError(f"{int(np.isnan(c).sum())} elements of C were never written")
    (output,) = program.outputs.values()
    return round_to(c, out_elem or output.elem)
