"""The CPU schedule simulator: run a resource-assigned GEMM kernel (wl IR after wl-plan-barriers) on numpy.

Each warpgroup of each role is a coroutine; mbarriers keep a phase, pending
arrivals and tx bytes exactly as the hardware does (a wait on parity P passes
while the barrier's current phase parity differs from P); TMA copies are in
flight until the scheduler lands them; wgmma groups read their smem stages until
an mma_wait retires them. Interleavings come from a seeded random scheduler, so a
protocol error shows up as one of:

  deadlock      every coroutine waits and no copy is in flight
  race          a TMA copy lands in a stage that in-flight MMAs still read, or an
                MMA reads a stage whose data has not landed for this iteration
  wrong result  C differs from the float64 reference

Smem is held per buffer stage as logical tiles (no swizzle): the simulator checks
the schedule and the data flow of the plan, not the byte layout of the lowering.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from .ops import round_to


class SimulationError(RuntimeError):
    """A deadlock, a race or a malformed program, with what each coroutine was doing."""


@dataclass
class Barrier:
    arrivals: int               # arrivals that complete a phase
    pending: int = 0
    tx: int = 0
    completed: int = 0          # phases completed so far

    def __post_init__(self):
        self.pending = self.arrivals

    def arrive(self, tx_bytes: int = 0) -> None:
        self.tx += tx_bytes
        self.pending -= 1
        if self.pending < 0:
            raise SimulationError(f"mbarrier got more arrivals than its count {self.arrivals}")
        self._maybe_complete()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._maybe_complete()

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.arrivals

    def passed(self, parity: int) -> bool:
        """try_wait.parity: the phase with this parity has completed (the current one has the other parity)."""
        return self.completed % 2 != parity


@dataclass
class Stage:
    data: np.ndarray | None = None
    landed_for: int = -1        # the ring iteration whose copy landed here
    readers: int = 0            # in-flight MMA groups reading this stage


@dataclass
class Copy:
    buffer: str
    stage: int
    it: int
    tile: np.ndarray
    barrier: Barrier
    nbytes: int


@dataclass
class Group:
    reads: list = field(default_factory=list)     # (buffer, stage) pairs


class CTA:
    """One CTA running the program over its output tiles."""

    def __init__(self, program, a, b, c, sizes, tiles, rng):
        self.p, self.a, self.b, self.c, self.sizes, self.tiles, self.rng = program, a, b, c, sizes, tiles, rng
        self.BM, self.BN, self.BK = program.attrs["tile"]
        self.S = program.attrs["stages"]
        self.b_layout = program.attrs["b_layout"]
        self.trips = -(-sizes["K"] // self.BK)
        self.buffers = {n: [Stage() for _ in range(self.S)] for n, buf in program.buffers.items()
                        if n != "mbarriers"}
        self.bars = {n: [Barrier(r["arrivals"]) for _ in range(r["count"])] for n, r in program.barriers.items()}
        self.copies: list[Copy] = []
        self.waiting: dict[str, tuple[str, Barrier, int]] = {}   # coroutine -> (what, barrier, parity)

    # ---- global memory tiles (TMA semantics: out-of-bounds elements read as zero) ----
    def global_tile(self, operand: str, m0: int, n0: int, k0: int) -> np.ndarray:
        if operand == "a":
            src, r0, c0, rows, cols = self.a, m0, k0, self.BM, self.BK
        elif self.b_layout == "kn":
            src, r0, c0, rows, cols = self.b, k0, n0, self.BK, self.BN
        else:
            src, r0, c0, rows, cols = self.b, n0, k0, self.BN, self.BK
        tile = np.zeros((rows, cols))
        part = src[r0:r0 + rows, c0:c0 + cols]
        tile[:part.shape[0], :part.shape[1]] = part
        return tile

    def tile_bytes(self, name: str) -> int:
        buf = self.p.buffers[name]
        return int(np.prod(buf["shape"])) * (2 if buf["elem"] in ("bf16", "f16") else 4)

    # ---- coroutines ----
    def role_coroutines(self):
        for role in self.p.roles:
            wgs = role.attrs["warpgroups"]
            for i, wg in enumerate(wgs):
                name = f"{role.attrs['name']}[wg{wg}]"
                if role.attrs.get("issue") == "one_thread" and i > 0:
                    continue      # one elected thread issues for the whole role
                yield name, self.run_role(role, i, name)

    def run_role(self, role, wg_index: int, name: str):
        accs: dict[str, np.ndarray] = {}
        inflight: list[Group] = []
        for t_index, (m0, n0) in enumerate(self.tiles):
            it_base = t_index * self.trips
            for op in role.body:
                yield from self.run_op(op, name, wg_index, accs, inflight, m0, n0, it_base)
        if inflight:
            raise SimulationError(f"{name} ended with {len(inflight)} MMA group(s) never waited for")

    def run_op(self, op, name, wg, accs, inflight, m0, n0, it_base, it=None):
        kind, a = op.kind, op.attrs
        if kind == "k_loop":
            for kt in range(self.trips):
                for inner in op.body:
                    yield from self.run_op(inner, name, wg, accs, inflight, m0, n0, it_base,
                                           it=(it_base + kt, kt))
            return
        if kind == "mma_wait":
            while len(inflight) > a["pending"]:
                for buf, stage in inflight.pop(0).reads:
                    self.buffers[buf][stage].readers -= 1
            return
        if kind == "store_tile":
            if inflight:
                raise SimulationError(f"race: {name} stores accumulator {a['acc']!r} while {len(inflight)} MMA "
                                      "group(s) that write it are still in flight (missing mma_wait {pending = 0})")
            self.store(accs[a["acc"]], m0 + wg * a["tile"][0], n0)
            accs.pop(a["acc"])
            return
        if it is None:
            raise SimulationError(f"wl.{kind} in {name} is outside a k_loop")
        ring_it, kt = it
        stage, phase = ring_it % self.S, (ring_it // self.S) & 1
        if kind == "wait":
            parity = phase if a["parity"] == "consumer" else phase ^ 1
            bar = self.bars[a["barrier"]][stage]
            while not bar.passed(parity):
                self.waiting[name] = (f"waits {a['barrier']}[{stage}] parity {parity} (iteration {ring_it})",
                                      bar, parity)
                yield
            self.waiting.pop(name, None)
        elif kind == "arrive_expect_tx":
            self.bars[a["barrier"]][stage].arrive(a["bytes"])
        elif kind == "arrive":
            lag = a.get("lag", 0)
            if ring_it >= lag:
                self.bars[a["barrier"]][(ring_it - lag) % self.S].arrive()
        elif kind == "async_load":
            st = self.buffers[a["buffer"]][stage]
            if st.readers:
                raise SimulationError(f"race: {name} issues a TMA copy into {a['buffer']}[{stage}] (iteration "
                                      f"{ring_it}) while {st.readers} MMA group(s) still read it")
            tile = self.global_tile(a["operand"], m0, n0, kt * self.BK)
            self.copies.append(Copy(a["buffer"], stage, ring_it, tile, self.bars[a["barrier"]][stage],
                                    self.tile_bytes(a["buffer"])))
        elif kind == "mma":
            m, n, k = a["shape"]
            group = Group()
            tiles = []
            for operand in ("a", "b"):
                st = self.buffers[a[operand]][stage]
                if st.landed_for != ring_it:
                    raise SimulationError(f"race: {name} reads {a[operand]}[{stage}] for iteration {ring_it} but it "
                                          f"holds iteration {st.landed_for}'s data")
                st.readers += 1
                group.reads.append((a[operand], stage))
                tiles.append(st.data)
            a_tile = tiles[0][wg * m:(wg + 1) * m]
            b_tile = tiles[1] if self.b_layout == "kn" else tiles[1].T
            accs[a["acc"]] = accs.get(a["acc"], np.zeros((m, n))) + a_tile @ b_tile
            inflight.append(group)
        else:
            raise SimulationError(f"the simulator does not know wl.{kind}")

    def land(self, copy: Copy) -> None:
        st = self.buffers[copy.buffer][copy.stage]
        if st.readers:
            raise SimulationError(f"race: a TMA copy lands in {copy.buffer}[{copy.stage}] (iteration {copy.it}) "
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


def cta_tiles(program, sizes: dict, num_ctas: int | None) -> list[list[tuple[int, int]]]:
    """The (m0, n0) tiles of each CTA, by the kernel's schedule."""
    bm, bn, _ = program.attrs["tile"]
    m_tiles, n_tiles = -(-sizes["M"] // bm), -(-sizes["N"] // bn)
    order = [(t // n_tiles * bm, t % n_tiles * bn) for t in range(m_tiles * n_tiles)]
    if program.attrs.get("schedule", "grid") != "persistent":
        return [[t] for t in order]
    ctas = min(len(order), num_ctas or sizes.get("SMS", 132))
    return [order[i::ctas] for i in range(ctas)]


def simulate_gemm(program, a: np.ndarray, b: np.ndarray, *, seed: int = 0, num_ctas: int | None = None,
                  out_elem: str | None = None) -> np.ndarray:
    """C of the planned GEMM `program` on a [M, K] and b ([K, N] or [N, K] by its b_layout), rounded to
    `out_elem` (default: the kernel's output element type). Raises SimulationError on a protocol error."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    m, k = a.shape
    n = b.shape[1] if program.attrs["b_layout"] == "kn" else b.shape[0]
    sizes = {"M": m, "N": n, "K": k}
    c = np.full((m, n), np.nan)
    rng = random.Random(seed)
    for tiles in cta_tiles(program, sizes, num_ctas):
        CTA(program, a, b, c, sizes, tiles, rng).run()
    if np.isnan(c).any():
        raise SimulationError(f"{int(np.isnan(c).sum())} elements of C were never written")
    return round_to(c, out_elem or program.result.elem)
