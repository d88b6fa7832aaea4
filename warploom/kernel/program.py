"""The typed kernel program: the one model of a kernel that planners write, lowerings read and the verifier checks.

A `Program` is plain data. It says who runs what (roles as warp ranges with an
issue mode and a register budget), where data lives (regions of shared memory or
Tensor Memory, with their layout, stages, offset and declared aliases), how
the roles hand data to each other (mbarriers, named barriers, and the rings that
pair a group of staged regions with a "full" and an "empty" barrier), and each
role's schedule (loops, waits, arrives, async copies, MMAs whose operands name
their source and major-ness, stores, register compute).

    producer warp ──copy q, k[s], v[s]──► smem ──full[s]──► consumer warpgroups ──empty[s]──► producer

Nothing in here knows a particular kernel: the GEMM and an FA3-style attention
are both instances (see tests/unit/test_kernel_program.py). `warploom.kernel.read`
builds a Program from the wl IR that the passes print; `warploom.kernel.verify`
checks one against a target.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Union

from warploom import targets
from warploom.dialect.shapes import TensorType

BARRIER_STORAGE = "mbarriers"        # the smem region that holds every mbarrier (planned by wl-plan-smem)
ISSUE_MODES = ("thread", "warp", "warpgroup")     # one elected thread, every thread of a warp, of a warpgroup
SPACES = ("smem", "tmem")
SOURCES = ("smem", "regs", "tmem")                # where an MMA operand is read from
MAJORS = ("K", "MN")                              # which logical dim of an operand is contiguous
PARITIES = ("phase", "phase^1")                   # a consumer waits for the phase; a producer for the one before
ARRIVERS = ("role", "warpgroup", "thread", "commit")   # Arrive.per
ARRIVE_CTAS = ("own", "leader", "pair")         # Arrive.cta: this CTA's barrier, the pair leader's, both CTAs'
#                                                 (a commit's multicast, or one arrival at each CTA's instance)
RING_COUNTS = ("iteration", "tile")               # Ring.counts: what advances a ring's stage


# ---- who runs: roles ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Role:
    """Warps [first_warp, first_warp + warps) running `body`; `issue` says which of their threads issue it. In a
    cluster kernel a role may run in one CTA of the cluster only (`rank`): the sm_100a CTA pair's MMA warp runs in
    the leader (rank 0), the same warp of the other CTA does other work."""
    name: str
    first_warp: int
    warps: int
    issue: str                       # ISSUE_MODES
    regs: int | None = None          # setmaxnreg budget per thread (None: what the launch gives)
    body: tuple = ()
    rank: int | None = None          # the CTA of a cluster (its %cluster_ctarank) that runs it; None: every CTA

    @property
    def warp_range(self) -> range:
        return range(self.first_warp, self.first_warp + self.warps)

    def walk(self) -> Iterator["Op"]:
        yield from walk(self.body)


# ---- where data lives: regions --------------------------------------------------------------------

@dataclass(frozen=True)
class Region:
    """A shared-memory or Tensor Memory region of `stages` copies of one tile.

    dims names the tile's logical dims, outermost first; the last is contiguous (for a TMA-filled smem tile,
    the contiguous dim of the global tensor too). offset/bytes (smem) or columns (tmem) are set by the planner;
    aliases names regions this one may overlap (O written into Q's region, P into S's columns)."""
    name: str
    space: str                       # SPACES
    elem: str
    shape: tuple[int, ...]           # one stage
    dims: tuple[str, ...] = ()
    stages: int = 1
    swizzle: int = 0                 # bytes (smem tiles)
    offset: int | None = None        # smem: byte offset from the aligned base; tmem: first column
    size: int | None = None          # smem: bytes of all stages; tmem: columns of all stages
    align: int = 1
    aliases: tuple[str, ...] = ()

    @property
    def stage_bytes(self) -> int:
        """Bytes of one stage of the tile (a whole number for the byte-sized and packed 4-bit types)."""
        elems = 1
        for d in self.shape:
            elems *= d
        return elems * targets.ELEMENT_BITS[self.elem] // 8

    def major_of(self, k_dim: str) -> str:
        """'K' when the contiguous dim is the contraction dim `k_dim`, else 'MN'."""
        return "K" if self.dims and self.dims[-1] == k_dim else "MN"


# ---- hand-offs: barriers and rings ----------------------------------------------------------------

@dataclass(frozen=True)
class MBarrier:
    """`count` mbarriers (one per stage); a phase completes after `arrivals` arrivals and `tx_bytes` landed."""
    name: str
    count: int
    arrivals: int
    tx_bytes: int = 0
    phase0: int = 0                  # the phase running after init
    scope: str = "cta"               # "cta" | "cluster" (init fence and sync at cluster scope)
    offset: int | None = None        # smem byte offset of barrier 0


@dataclass(frozen=True)
class NamedBarrier:
    """Hardware named barriers (bar.sync/bar.arrive id, threads): warp-synchronous hand-offs such as ping-pong.

    `count` > 1 declares one barrier per warpgroup of the role that uses it, ids id .. id + count - 1:
    warpgroup w's barrier is id + w (`Sync.slot` picks its own or the next warpgroup's)."""
    name: str
    id: int
    threads: int
    count: int = 1

    @property
    def ids(self) -> range:
        return range(self.id, self.id + self.count)


@dataclass(frozen=True)
class Ring:
    """A pipeline of `stages` slots over `regions`, filled by `producer`, drained by `consumers`.

    Declared by wl-pipeline (operand tiles) or wl-specialize (sm_100a's TMEM accumulators); wl-plan-barriers
    gives it a `full` barrier (the data of a slot landed) and, when slots are reused, an `empty` one (every
    consumer is done with the slot). `counts` says what moves it to its next slot: each iteration of the loop
    its ops sit in, or ("tile") each tile a persistent kernel's role walks (an accumulator ring: the ops on it
    sit outside the K loop, once per tile)."""
    name: str
    stages: int
    regions: tuple[str, ...]
    producer: str | None = None
    consumers: tuple[str, ...] = ()
    full: str | None = None
    empty: str | None = None
    counts: str = "iteration"        # RING_COUNTS
    relay: str | None = None         # a CTA pair: the role of the other CTA that tells the leader its slot landed
    peer: str | None = None          # ... on this barrier of the leader (wl-plan-barriers)
    uses: int = 1                    # slots taken per iteration (a shared K/V ring: 2, K's then V's); an op on the
    #                                  ring says which with its `use`: ring position = iteration * uses + use


# ---- what runs: ops --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Loop:
    """A loop over `trip` iterations (a rule over runtime sizes, e.g. ("cdiv", "K", 64): warploom.runtime.rules);
    ring stages advance per iteration. `carries` names the register values (accumulators, softmax statistics)
    that live across iterations.

    A software-pipelined loop has sections: when `first` is given, iteration 0 runs `first` instead of `body`
    (iterations 1 .. trip - 1 run `body`); `last` runs once more after iteration trip - 1, as iteration `trip`,
    so its ops act on earlier iterations' stages only (lag >= 1: attention's last O += P V). With trip = 0
    no section runs. Ops with a `lag` act on the stage (and phase) of iteration - lag."""
    trip: tuple
    body: tuple = ()
    carries: tuple[str, ...] = ()
    name: str = "loop"
    first: tuple = ()
    last: tuple = ()

    @property
    def sections(self) -> tuple[tuple[str, tuple], ...]:
        """(name, ops) of each section present, in execution order: first, body, last."""
        return tuple((n, ops) for n, ops in (("first", self.first), ("body", self.body), ("last", self.last))
                     if ops or n == "body")


@dataclass(frozen=True)
class Load:
    """Load one `tile` of kernel input `source` (logical `dims`, the last contiguous): the kernel level, before
    wl-pipeline gives the load a region (named `region`, the input's name by default: two tiles of one input need
    two names, e.g. an sm_100a attention's Q tiles q0 and q1) and makes it an async `Copy`."""
    source: str
    tile: tuple[int, ...]
    dims: tuple[str, ...]
    region: str | None = None
    use: int = 0                     # which of the iteration's slots of a ring taking several (Ring.uses)
    multicast: bool = False          # a cluster kernel (sm_90a): each CTA loads 1/cluster of the tile's boxes (by
    #                                  rank) and multicasts them to every CTA of the cluster


@dataclass(frozen=True)
class Wait:
    """Wait until this iteration's stage of `barrier` (of iteration - lag) completes the phase `parity` asks for."""
    barrier: str
    parity: str = "phase"            # PARITIES
    lag: int = 0
    use: int = 0                     # Ring.uses: the iteration's slot it waits on


@dataclass(frozen=True)
class Arrive:
    """Arrive on this iteration's stage of `barrier` (of iteration - lag); with tx_bytes, also expect that many
    bytes of async copies. `per` says who arrives: the role's issuing thread, one thread per warpgroup, every
    thread of the role (each after its own tcgen05.wait::ld), or ("commit", sm_100a) the tensor core for the issuing thread, once every MMA that
    thread issued before has completed (tcgen05.commit: one arrival)."""
    barrier: str
    lag: int = 0
    tx_bytes: int = 0
    per: str = "role"                # ARRIVERS
    cta: str = "own"                 # ARRIVE_CTAS (a CTA pair's kernel: arrive on the leader's instance, or on both)
    use: int = 0                     # Ring.uses: the iteration's slot it arrives for


@dataclass(frozen=True)
class Copy:
    """An async (TMA) copy of one stage of `region` from kernel input `source`, completing on `barrier`."""
    source: str
    region: str
    barrier: str | None = None       # None until wl-plan-barriers picks it
    use: int = 0                     # Ring.uses: the iteration's slot it fills
    multicast: bool = False          # Load.multicast: this CTA's share of the boxes, into every CTA of the cluster


@dataclass(frozen=True)
class Operand:
    """An MMA operand: a region (smem descriptor / TMEM) or a register value, and which of its dims is contiguous."""
    source: str                      # SOURCES
    name: str
    major: str = "K"                 # MAJORS
    use: int = 0                     # Ring.uses: the iteration's slot of a ring taking several that it reads


@dataclass(frozen=True)
class Mma:
    """acc (+)= a @ b over `shape` = (m, n, k) per issuing unit (a warpgroup for wgmma, the CTA for tcgen05)."""
    a: Operand
    b: Operand
    acc: Operand
    shape: tuple[int, int, int]
    k_dim: str = "K"                 # the logical dim summed over (QK^T: the head dim; PV: the key index)
    accumulate: bool = True
    lag: int = 0                     # reads ring stages of iteration - lag (attention's overlapped P V)


@dataclass(frozen=True)
class MmaWait:
    """Wait until at most `pending` MMA groups of this role are in flight."""
    pending: int


@dataclass(frozen=True)
class Store:
    """Store register (or TMEM) value `value` as a tile of kernel output `output`: straight to global memory, or,
    with `region`, staged through that smem region and stored from there by TMA (the output's tensor map). A
    staged store by a warpgroup role syncs each warpgroup on its instance of named barrier `barrier` before
    writing (the previous store, waited for by its issuing thread, has read the region) and between the writes
    (each thread fences them for the async proxy) and the one thread's TMA store."""
    value: str
    output: str
    tile: tuple[int, int]
    region: str | None = None
    barrier: str | None = None


@dataclass(frozen=True)
class Compute:
    """Register arithmetic between MMAs (online softmax, rescaling, casts): reads and writes named values."""
    kind: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]


SLOTS = ("own", "next")                           # a warpgroup's own named barrier, or the next warpgroup's
SYNC_TILES = ("each", "first", "last")   # Sync.tiles: at every tile, or at the CTA's first / last only


@dataclass(frozen=True)
class Sync:
    """bar.sync (or bar.arrive when `arrive_only`) on a named barrier.

    For a barrier with one instance per warpgroup, `slot` "own" is this warpgroup's (id + w), "next" the next
    one's (id + (w + 1) % count): FA3's ping-pong is sync(own) before the MMAs, arrive(next) after them.
    `warpgroup` = i restricts the op to warpgroup i of the role (the one-off hand-over that starts the turns).
    `tiles` "first" / "last" runs the op only at the first / last tile of its CTA (a persistent kernel runs each
    role's body once per tile, and the turns go on from one tile to the next: the hand-over that starts them, and
    the one that takes the last, happen once per CTA); "each" at every tile."""
    barrier: str
    arrive_only: bool = False
    slot: str = "own"                # SLOTS
    warpgroup: int | None = None
    tiles: str = "each"              # SYNC_TILES


@dataclass(frozen=True)
class Opaque:
    """A wl op the kernel program has no form for; the verifier reports it and lowerings refuse it."""
    kind: str
    attrs: tuple = ()


Op = Union[Loop, Load, Wait, Arrive, Copy, Mma, MmaWait, Store, Compute, Sync, Opaque]


def walk(ops) -> Iterator[Op]:
    for op in ops:
        yield op
        if isinstance(op, Loop):
            for _, ops in op.sections:
                yield from walk(ops)


# ---- the program ---------------------------------------------------------------------------------

@dataclass
class Program:
    """A kernel: inputs and output, launch shape, and the resources and schedule of its roles."""
    kind: str                                        # "gemm", "attention", ...
    target: str
    inputs: dict[str, TensorType]
    outputs: dict[str, TensorType]
    threads: int | None = None
    roles: list[Role] = field(default_factory=list)
    regions: dict[str, Region] = field(default_factory=dict)
    barriers: dict[str, MBarrier] = field(default_factory=dict)
    named_barriers: dict[str, NamedBarrier] = field(default_factory=dict)
    rings: dict[str, Ring] = field(default_factory=dict)
    registers: dict[str, tuple[int, ...]] = field(default_factory=dict)   # named register tiles, per issuing unit
    smem_bytes: int | None = None                    # dynamic smem the launch asks for (planner's total)
    attrs: dict = field(default_factory=dict)        # tile, grid, schedule, cluster: the launch rules
    body: tuple = ()                                 # the kernel-level schedule, before wl-specialize gives it roles

    def role(self, name: str) -> Role:
        for r in self.roles:
            if r.name == name:
                return r
        raise KeyError(name)

    def ring_of_barrier(self, barrier: str) -> Ring | None:
        return next((r for r in self.rings.values() if barrier in (r.full, r.empty, r.peer)), None)

    def ring_of_region(self, region: str) -> Ring | None:
        return next((r for r in self.rings.values() if region in r.regions), None)

    def ops(self) -> Iterator[tuple[Role, Op]]:
        for role in self.roles:
            for op in role.walk():
                yield role, op
