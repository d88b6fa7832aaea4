"""The target-neutral lowering of a planned kernel program: what every kernel family shares on every target.

Input: the typed kernel program (warploom/kernel) of a kernel after wl-plan-barriers. Everything the code depends
on comes from it or from what it names: tile sizes, stages and threads from the program; roles and register
budgets from its `Role`s; each smem region's layout from an `SmemTile` (warploom/layout) built from the `Region`;
barrier offsets, counts, arrivals and tx bytes from its `MBarrier`s; hardware numbers from the program's
`warploom.targets` record; the target's MMA unit, accumulator access and fences from its atoms
(`warploom.lowering.atoms`, picked by the target's capabilities). Nothing is recomputed here, and the lowering
refuses (ValueError) what it cannot express instead of guessing.

`KernelLowering` builds one `gpu.module @<name>_mod [#nvvm.target<chip = ...>]` holding the dynamic-smem global
and the `llvm.func @<name>` kernel with the `mlir.dialects` builders through `warploom.lowering.emit` (typed and
verified as it is built, never formatted as text), and returns it with the runtime contract (`LoweredKernel`:
params, tensor maps, grid rules, block, cluster, smem bytes). What it writes once for every family:

  the kernel     its parameters (tensor maps by value as grid constants, pointers, scalars), the dynamic smem base
                 rounded up to the target's alignment, thread 0 initialising every mbarrier, the CTA barrier; a
                 cluster's CTAs meeting after it and before they exit; a kernel with Tensor Memory: the MMA role's
                 warp allocating the columns before the CTA barrier and freeing them at the end (a pair: after
                 the cluster barrier);
  roles          one dispatch for every kernel, on the warpgroup where every role is whole warpgroups and on the
                 warp otherwise (a role with a rank in one CTA of a pair only); each role's register budget
                 (setmaxnreg, where the plan sets budgets); 'thread' roles run by an elected lane (per stretch
                 between the whole warp's syncs where the warp must act as a whole), 'warp' and 'warpgroup' roles
                 by every thread; the drain of rings MMA commits release;
  rings          one ring state for every op on a barrier: stage = it % stages, phase = (it / stages) & 1 of a
                 loop iteration, at a slot of a ring taking several an iteration, lagged; rings counted in tiles;
                 one-barrier rings flipping every iteration; waits (parity phase or phase^1), arrivals (an MMA
                 commit, per warpgroup, per thread, per role; at the own CTA, the pair's leader or every CTA of a
                 cluster), expect_tx; named barriers (first/last tile, per-warpgroup turns); the atoms' fences
                 around a fenced role's syncs;
  copies         TMA box loops (one swizzle span of the contiguous dim a box), multicast over a cluster;
  descriptors    the MMA's smem descriptor: static bits from the layout, the start address added at run time;
  stream-K       the hand-off between the pieces of a split tile (named barrier, fences, an atomic count).

The families (`warploom.lowering.gemm`, `warploom.lowering.attention`) add their configuration, parameters,
tile walks, loops, MMAs and stores, and the few hooks the neutral code asks for (`_ring_iterations`,
`_tile_ring_state`, `_warpgroup_lanes`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from mlir import ir
from mlir.dialects import llvm

from warploom import targets
from warploom.kernel import Arrive, Compute, Copy, Mma, MmaWait, Role, Store, Sync, Wait
from warploom.kernel.program import BARRIER_STORAGE
from warploom.kernel.write import wl_name
from warploom.layout import SmemTile
from warploom.layout.descriptors import descriptor_step, start_address_field
from warploom.lowering import emit
from warploom.lowering.atoms import atoms_for
from warploom.lowering.emit import sync, tma
from warploom.lowering.emit.nobuilder import llvm_array, nvvm_target
from warploom.runtime import rules
from warploom.runtime.artifact import ParamSpec, TensorMapSpec

LLVM_OPT = 3                          # #nvvm.target's LLVM -O level
ELEM_TYPES = ("bf16", "f16")          # what the lowering takes: f16-kind MMA inputs with f32 accumulation
WAIT_TICKS = 0x989680                 # try_wait suspend-time hint (CUTLASS's value)
TMAP_BYTES, TMAP_ALIGN = 128, 64     # a CUtensorMap, passed by value as a grid constant
CTAID = ("x", "y", "z")

@dataclass
class LoweredKernel:
    name: str                              # the PTX entry point
    gpu_module: ir.Operation               # the built gpu.module holding the kernel; str() prints it
    params: list[ParamSpec]                # launch order
    tensor_maps: dict[str, TensorMapSpec]  # one per tensormap param, by name
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    grid: tuple                            # three runtime rules, e.g. ("cdiv", "N", 256)
    smem_bytes: int                        # dynamic shared memory to request at launch
    holder: ir.Module | None = field(default=None, repr=False, compare=False)   # keeps gpu_module alive

    @property
    def text(self) -> str:
        """The gpu.module printed with the lowering's value names (%tid1, %kt40, %ci32_7)."""
        return emit.text(self.gpu_module)



# ---- small helpers -----------------------------------------------------------------------------

def to_i64(v: int) -> int:
    """Unsigned 64-bit pattern -> the signed literal MLIR's i64 constants take."""
    return v - (1 << 64) if v >= (1 << 63) else v


@dataclass
class LoopState:
    """The current K-loop iteration: K tile index, ring iteration (it: counts on across the tiles of a
    persistent kernel), its stage and phase, and per-stage addresses."""
    kt: ir.Value
    it: ir.Value
    stage: ir.Value
    phase: ir.Value
    cache: dict
    once: bool = False      # not a loop: the ops of a ring used once per tile (attention's Q): its stage and phase
    stages: int | None = None   # the barriers' count of the ring a `once` state serves (None: the kernel's stages)




@dataclass
class RoleState:
    """What the ops of one role share while they are emitted."""
    role: Role
    first_wg: int
    wg_index: ir.Value | None = None       # warpgroup index inside the role (i32)
    thread_in_wg: ir.Value | None = None
    wg_leader: ir.Value | None = None      # thread 0 of each warpgroup (i1)
    loop: LoopState | None = None
    accs: dict | None = None        # accumulator name -> SSA value holding it now
    acc_n: dict | None = None       # accumulator name -> the MMA's n
    values: dict | None = None      # other register values by the program's name (attention: s, p, row_max, ...)
    fenced: bool = False            # the role's waits and syncs order Tensor Memory/MMA traffic (atoms' fences)
    elected: ir.Value | None = None     # a one-thread role whose warp acts as a whole: its issuing lane (i1)
    lane: ir.Value | None = None        # a warp role: the lane
    storer: ir.Value | None = None      # a warp or warpgroup role: the thread that issues its TMA stores (i1)
    row: ir.Value | None = None         # a warpgroup role on Tensor Memory: the thread's row (its TMEM lane)
    lane_addr: ir.Value | None = None   # ... and the TMEM address of its warp's first lane

    @property
    def name(self) -> str:
        return self.role.name

    @property
    def issue(self) -> str:
        return self.role.issue


class KernelLowering:
    """What every kernel lowering shares, on every target: the plan's checks (roles, registers, regions, barriers,
    smem), the kernel function and its parameters, the prologue pieces (dynamic smem base, mbarrier init), the role
    dispatch with setmaxnreg, ring stage/phase, waits and arrivals, TMA box loops and MMA descriptors. The target
    (`self.T`) is the program's; its atoms (`self.atoms`) supply the MMA unit's instructions. Families read their
    kind's configuration (`_read_config`), name their parameters (`_param_list`, `_bind_args`), write the prologue
    and the ops only they have."""
    OPS: dict = {}
    OP_NAMES: tuple = ()
    MIN_CTAS_PER_SM = 0                     # .minnctapersm (0: none); ptxas needs 1 to honour setmaxnreg in some
    ISSUES: tuple = ("thread", "warpgroup")  # the role issue forms the family lowers
    cluster = (1, 1, 1)                     # the kernel's thread-block cluster
    cluster_m = 1                           # CTAs of a cluster along M (the GEMM's 2x1 clusters sharing B: 2)
    rank = None                             # %cluster_ctarank (i32) in a cluster kernel
    cta_group = 1                           # CTAs one MMA spans (a CTA pair's tcgen05: 2)
    tmem_columns = None                     # the Tensor Memory allocation (columns), set by _check_placement
    mma_role = None                         # a kernel with Tensor Memory: the one-thread role issuing the MMAs
    warp = None                             # the thread's warp index (i32), once computed (_warp)
    tile_first = tile_last = None           # a persistent walk: i1, at the CTA's first / last tile (None: one tile)

    def __init__(self, program, name: str):
        self.p = program
        self.name = name
        self.T = targets.get(program.target)        # its hardware numbers
        self.atoms = atoms_for(self.T)              # its MMA unit, accumulator access and fences
        self._read_config()

    # ---- configuration: read and check the plan --------------------------------------------
    def _fail(self, msg: str):
        raise ValueError(f"{self.T.name} lowering of kernel {self.name!r}: {msg}")

    def _read_config(self) -> None:
        raise NotImplementedError

    def _check_plan(self) -> None:
        """What every kernel's plan must satisfy here: its roles (`_check_roles`), placed regions and barriers, and
        smem for the run-time base round-up."""
        p = self.p
        self._check_roles()
        for region in p.regions.values():
            if region.offset is None or region.size is None:
                self._fail(f"buffer {region.name!r} has no offset: run wl-plan-smem first")
        for bar in p.barriers.values():
            if bar.offset is None or bar.offset % self.T.mbarrier_bytes:
                self._fail(f"mbarrier ring {bar.name!r} needs an {self.T.mbarrier_bytes}-byte aligned offset "
                           "(run wl-plan-barriers)")
        # The kernel rounds the dynamic smem base up at run time (losing up to align - 1 bytes),
        # so the launch must ask for the plan's end plus that much.
        end = max([r.offset + r.size for r in p.regions.values()]
                  + [b.offset + self.T.mbarrier_bytes * b.count for b in p.barriers.values()])
        if self.smem_bytes < end + self.T.smem_base_align - 1:
            self._fail(f"smem_bytes = {self.smem_bytes} does not cover the plan's {end} B plus "
                       f"{self.T.smem_base_align - 1} B for the run-time {self.T.smem_base_align} B alignment of the base")
        self.tiles = {name: self._tile(region) for name, region in p.regions.items() if name != BARRIER_STORAGE}

    def _check_roles(self) -> None:
        """Roles: in every CTA (of a pair: each rank) each warp has exactly one role, of an issue form the family
        lowers (ISSUES). setmaxnreg acts on whole warpgroups, so the roles of one warpgroup need one register budget;
        none set anywhere: every thread keeps the launch's share and no setmaxnreg is emitted (self.launch_regs
        None). Sets self.by_warpgroup: the role dispatch's unit is the warpgroup where every role is whole
        warpgroups in one CTA, the warp otherwise."""
        p, T = self.p, self.T
        warps_per_wg = T.warpgroup_threads // T.warp_size
        ranks = sorted({r.rank for r in p.roles if r.rank is not None}) or [None]
        for rank in ranks:
            warps = sorted(w for role in p.roles if role.rank in (None, rank) for w in role.warp_range)
            if warps != list(range(self.threads // T.warp_size)):
                where = f" in CTA {rank} of the pair" if rank is not None else ""
                self._fail(f"roles cover warps {warps}{where}; {self.threads} threads need each of "
                           f"0..{self.threads // T.warp_size - 1} exactly once")
        for role in p.roles:
            if role.issue not in self.ISSUES:
                self._fail(f"role {role.name!r} has issue = {role.issue!r}; the lowering knows "
                           f"{' and '.join(repr(i) for i in self.ISSUES)}")
        self.by_warpgroup = all(r.rank is None and r.first_warp % warps_per_wg == 0 and r.warps % warps_per_wg == 0
                                for r in p.roles)
        if all(r.regs is None for r in p.roles):
            self.launch_regs = None
            return
        # What every thread gets at launch; setmaxnreg then moves registers from roles below it to roles above it.
        self.launch_regs = T.launch_regs(self.threads)
        per_wg: dict[int, set] = {}
        for r in p.roles:
            for w in r.warp_range:
                per_wg.setdefault(w // warps_per_wg, set()).add(self._regs(r))
        for wg, budgets in sorted(per_wg.items()):
            if len(budgets) != 1:
                self._fail(f"warpgroup {wg} has register budgets {sorted(budgets)}: setmaxnreg sets one budget "
                           "for a whole warpgroup, so its roles need one")
        used = sum(T.warp_size * r.warps * self._regs(r) for r in p.roles)
        if used > T.register_file:
            self._fail(f"role register budgets need {used} registers; the register file holds {T.register_file}")

    def _regs(self, role: Role) -> int:
        return self.launch_regs if role.regs is None else role.regs

    def _tile(self, region) -> SmemTile:
        """The smem layout of a TMA/MMA tile region, checked against what the descriptors assume."""
        if region.elem != self.elem or len(region.shape) != 2 or len(region.dims) != 2:
            self._fail(f"buffer {region.name!r} must be a 2-D {self.elem} tile with named dims, got {region.elem} "
                       f"{region.shape} dims {region.dims}")
        if region.size % region.stages:
            self._fail(f"buffer {region.name!r}: {region.size} bytes do not split into {region.stages} stages")
        try:
            tile = SmemTile(region.dims, region.shape, region.elem, region.swizzle)
        except ValueError as e:
            self._fail(f"buffer {region.name!r}: {e}")
        if region.offset % tile.align or (region.size // region.stages) % tile.align:
            self._fail(f"buffer {region.name!r} (offset {region.offset}) and its stages must be "
                       f"{tile.align}-byte aligned so MMA descriptors can use base offset 0")
        return tile

    def _region(self, name: str):
        region = self.p.regions.get(name)
        if region is None:
            self._fail(f"no wl.buffer named {name!r}")
        return region

    def _stage_bytes(self, region) -> int:
        return region.size // region.stages

    def _ring(self, name: str):
        bar = self.p.barriers.get(name)
        if bar is None:
            self._fail(f"no wl.mbarrier ring named {name!r}")
        return bar

    # ---- the kernel ---------------------------------------------------------------------------
    def lower(self, context: ir.Context) -> LoweredKernel:
        self.tmaps: dict[str, TensorMapSpec] = {}
        for op in (o for r in self.p.roles for o in r.walk() if isinstance(o, Copy)):
            self.tmaps.setdefault(op.source, self._tensor_map(op))
        if sorted(self.tmaps) != sorted(self.p.inputs):
            self._fail(f"async loads cover inputs {sorted(self.tmaps)}; the kernel needs one per input "
                       f"{list(self.p.inputs)} (each input is read through its TMA tensor map)")
        self.tmaps = {n: self.tmaps[n] for n in self.p.inputs}     # params in input order
        for op in (o for r in self.p.roles for o in r.walk() if isinstance(o, Store) and o.region is not None):
            self.tmaps.setdefault(op.output, self._store_map(op))   # then outputs stored by TMA, in store order
        with context, ir.Location.unknown():
            holder = ir.Module.create()
            self.b = self._kernel_function(holder.body)
            with self.b.at_body():
                self._prologue()
                self._roles()
            gpu_module = self.b.module.operation
            gpu_module.verify()
        params = [ParamSpec(n, kind) for n, kind in self._param_list()]
        return LoweredKernel(name=self.name, gpu_module=gpu_module, params=params,
                             tensor_maps=dict(self.tmaps), block=(self.threads, 1, 1),
                             cluster=self.cluster,
                             grid=self.grid, smem_bytes=self.smem_bytes, holder=holder)

    def _param_list(self) -> list[tuple[str, str]]:
        """The kernel's parameters in launch order: (name, ParamSpec kind); tensor maps by input name."""
        raise NotImplementedError

    def _store_map(self, op: Store) -> TensorMapSpec:
        """The TMA descriptor an output staged through smem is stored with."""
        self._fail(f"store of {op.output!r} through smem {op.region!r}: this lowering stores from registers")

    def _bind_args(self, args: dict) -> None:
        """Keep the kernel's parameter values (by name; tensor maps under 'tmap_<input>')."""
        raise NotImplementedError

    def _kernel_function(self, block: ir.Block) -> emit.Builder:
        """gpu.module @<name>_mod holding the dynamic-smem global and the kernel's llvm.func (empty body), its
        arguments `_param_list`: tensor maps by value (grid constants), global pointers, scalars."""
        ptr, i8 = emit.ptr_type, ir.IntegerType.get_signless(8)
        tmap_attrs = {"llvm.byval": ir.TypeAttr.get(llvm_array(TMAP_BYTES, i8)),
                      "nvvm.grid_constant": ir.UnitAttr.get(),
                      "llvm.align": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), TMAP_ALIGN)}
        kinds = {"tensormap": ptr, "ptr": lambda: ptr(1), "i32": lambda: ir.IntegerType.get_signless(32),
                 "i64": lambda: ir.IntegerType.get_signless(64), "f32": ir.F32Type.get}
        plist = self._param_list()
        args = [kinds[kind]() for _, kind in plist]
        names = [f"tmap_{n}" if kind == "tensormap" else n for n, kind in plist]
        b = emit.Builder.kernel_module(
            block, f"{self.name}_mod", self.name, nvvm_target(self.T.name, self.T.ptx_features, LLVM_OPT), args,
            [tmap_attrs if kind == "tensormap" else {} for _, kind in plist], names,
            # nvvm.maxntid: ptxas honours setmaxnreg only when the kernel declares its block size
            {"nvvm.kernel": ir.UnitAttr.get(), "nvvm.maxntid": ir.DenseI32ArrayAttr.get([self.threads, 1, 1]),
             **({"nvvm.minctasm": ir.IntegerAttr.get(ir.IntegerType.get_signless(32), self.MIN_CTAS_PER_SM)}
                if self.MIN_CTAS_PER_SM else {})},
            # extern .shared aligned like the base: the base is also rounded up at run time (see _smem_base)
            smem=(self.smem_symbol, self.T.smem_base_align))
        self.tmap_args = {n: v for (n, kind), v in zip(plist, b.args) if kind == "tensormap"}
        self._bind_args(dict(zip(names, b.args)))
        return b

    @property
    def smem_symbol(self) -> str:
        return f"{self.name}_smem"

    def _smem_base(self) -> None:
        """self.base: the dynamic smem base rounded up to the target's alignment (so swizzled tiles start on a
        swizzle repeat); self.base_enc: its descriptor encoding."""
        b, c = self.b, self.b.const
        # Dynamic smem base rounded up so swizzled tiles start on a swizzle repeat.
        align = self.T.smem_base_align
        raw = b.addressof(self.smem_symbol, b.ptr(3), "smem")
        raw_i = b.ptrtoint(raw, b.i32)
        aligned = b.and_(b.add(raw_i, c(align - 1)), c(-align))
        self.base = b.gep(raw, b.sub(aligned, raw_i))
        base_i64 = b.ptrtoint(self.base, b.i64)
        self.base_enc = start_address_field(base_i64, b.i64_ops)

    def _init_barriers(self) -> None:
        """Thread 0 initialises every planned mbarrier, then bar.sync 0 with every thread; self.wg = warpgroup."""
        b, c = self.b, self.b.const
        # Thread 0 initialises every planned barrier with its arrival count; the fence makes the
        # init visible to the async proxy (TMA), the CTA barrier to the other threads.
        self.rings = {name: sync.MbarrierRing(b, self.base, r.offset, r.count, self.T.mbarrier_bytes, WAIT_TICKS)
                      for name, r in self.p.barriers.items()}
        with b.if_(b.cmp("eq", self.tid, c(0))):
            for ring in sorted(self.p.barriers.values(), key=lambda r: r.offset):
                self.rings[ring.name].init(ring.arrivals)
            sync.fence_mbarrier_init()
        self._before_cta_barrier()
        # bar.sync 0 with every thread, before the role split. No CTA-wide barrier may follow:
        # the idle threads of a one-thread role exit early.
        sync.cta_barrier()
        self.wg = b.divu(self.tid, c(self.T.warpgroup_threads))
        self._after_cta_barrier()

    def _before_cta_barrier(self) -> None:
        """What the prologue does before the CTA-wide barrier besides the mbarrier init: a kernel with Tensor Memory
        has the MMA role's warp allocate its columns (and give up the right to allocate more) and write the address
        to the smem slot."""
        if self.tmem_columns is None:
            return
        b, c = self.b, self.b.const
        self.warp = b.divu(self.tid, c(self.T.warp_size))
        self.slot_ptr = b.gep(self.base, c(self.tmem_slot.offset))
        with b.if_(b.cmp("eq", self.warp, c(self.mma_role.first_warp))):
            self.atoms.tmem_alloc(b, self.slot_ptr, self.tmem_columns, self.cta_group)
            self.atoms.tmem_relinquish(self.cta_group)
            self.atoms.before_sync()

    def _after_cta_barrier(self) -> None:
        """What every thread does after it: a cluster's CTAs meet once every barrier of each is initialised (and
        fenced for the cluster), before any multicast lands in, or any arrival reaches, another CTA; a kernel with
        Tensor Memory reads the address its allocating warp wrote."""
        if self.cluster != (1, 1, 1):
            sync.cluster_barrier()
        if self.tmem_columns is not None:
            self.atoms.after_sync()
            self.taddr = self._load_tmem_address()

    def _roles(self) -> None:
        """The one role dispatch of every kernel: if unit in role0 { role0 } else if unit in role1 { ... } else { last
        role }, roles in warp order, so an upper bound picks each. The unit is the warpgroup where every role is
        whole warpgroups (self.by_warpgroup), the warp otherwise; a role with a rank runs in that CTA of a pair only.
        Then a cluster's CTAs meet at a cluster barrier, so that neither exits while the other may still multicast
        into its smem, arrive on its barriers or (a pair) read its Tensor Memory, which its allocating warp frees
        only then."""
        b, c = self.b, self.b.const
        roles = sorted(self.p.roles, key=lambda r: (r.first_warp, -1 if r.rank is None else r.rank))
        per = self.T.warpgroup_threads // self.T.warp_size if self.by_warpgroup else 1
        unit = self.wg if self.by_warpgroup else self._warp()

        def chain(i: int) -> None:
            r = roles[i]
            if i == len(roles) - 1:
                self._role(r)
                return
            first, last = r.first_warp // per, r.warp_range.stop // per - 1
            cond = b.cmp("eq", unit, c(first)) if first == last else b.cmp("ule", unit, c(last))
            if r.rank is not None:
                if self.rank is None:
                    self._fail(f"role {r.name!r} runs in CTA {r.rank} of a cluster, but the kernel has none")
                cond = b.and_(cond, b.cmp("eq", self.rank, c(r.rank)))
            then, orelse = b.if_else(cond)
            with then:
                self._role(r)
            with orelse:
                chain(i + 1)

        chain(0)
        if self.cluster != (1, 1, 1):
            sync.cluster_barrier()
            if self.tmem_columns is not None:     # both CTAs' epilogues are done with the pair's Tensor Memory only
                with b.if_(b.cmp("eq", self._warp(), c(self.mma_role.first_warp))):   # now (the ISA's example)
                    self._free_tmem()

    def _warp(self) -> ir.Value:
        """The thread's warp index (i32), computed once."""
        if self.warp is None:
            self.warp = self.b.divu(self.tid, self.b.const(self.T.warp_size))
        return self.warp

    def _role(self, role: Role) -> None:
        """One role's code: its register budget (setmaxnreg, where the plan sets budgets), then by issue form:
        'thread' one elected lane of the role's first warp issues its ops (`_thread_role`); 'warp' every thread of
        its warps runs them (the first thread issues the TMA stores); 'warpgroup' every thread, knowing its
        warpgroup, its index in it and the warpgroup's leader (`_warpgroup_lanes`: a Tensor Memory accumulator's
        lane). A role whose TMA stores read smem waits for those reads before the CTA exits."""
        b, c = self.b, self.b.const
        ctx = RoleState(role=role, first_wg=role.first_warp * self.T.warp_size // self.T.warpgroup_threads, accs={},
                        acc_n={}, values={})
        if self.launch_regs is not None:
            sync.role_registers(self._regs(role), self.launch_regs)
        ctx.fenced = self._fenced(role)
        if role.issue == "thread":
            self._thread_role(role, ctx)
            return
        if not role.body:       # spare warps idle
            return
        if role.issue == "warp":
            ctx.lane = b.remu(self.tid, c(self.T.warp_size))
            ctx.storer = b.cmp("eq", self.tid, c(role.first_warp * self.T.warp_size))   # issues the role's TMA stores
        else:
            ctx.wg_index = b.sub(self.wg, c(ctx.first_wg))
            ctx.thread_in_wg = b.remu(self.tid, c(self.T.warpgroup_threads))
            ctx.wg_leader = ctx.storer = b.cmp("eq", ctx.thread_in_wg, c(0))
            self._warpgroup_lanes(ctx)
        self._tile_loop(role.body, ctx)
        if any(isinstance(o, Store) and o.region is not None for o in role.walk()):
            with b.if_(ctx.storer):     # the last TMA stores have read their smem before the CTA exits
                tma.bulk_wait_group(0, read=True)

    def _warpgroup_lanes(self, ctx: RoleState) -> None:
        """What a warpgroup role's threads know besides their warpgroup (a Tensor Memory accumulator: the lane)."""

    def _fenced(self, role: Role) -> bool:
        """Whether the role's waits and syncs order Tensor Memory or MMA traffic (the atoms' fences around them): in
        a kernel with Tensor Memory, the allocating warp's roles and the roles that issue MMAs, compute on or store
        accumulators."""
        if self.tmem_columns is None:
            return False
        return (self.mma_role.first_warp in role.warp_range
                or any(isinstance(o, (Mma, Store, Compute)) for o in role.walk()))

    def _thread_role(self, role: Role, ctx: RoleState) -> None:
        """A one-thread role: one elected lane of its first warp prefetches the tensor maps it loads through and
        issues its ops. Where the role's warp must act as a whole (a named-barrier sync, the drain of rings that MMA
        commits release, freeing Tensor Memory) the lane is elected once (ctx.elected) and runs each stretch of ops
        between those; otherwise the elected lane runs the whole role."""
        b, c = self.b, self.b.const
        drained = self._drained_rings(role)
        frees = self.tmem_columns is not None and self.cluster == (1, 1, 1) and self.mma_role.first_warp in role.warp_range
        whole_warp = drained or frees or any(isinstance(o, Sync) for o in role.walk())

        def body() -> None:
            if not whole_warp:
                with b.if_(sync.elect_sync(b)):
                    for source in self._loaded_inputs(role):
                        tma.prefetch_tensormap(self.tmap_args[source])
                    self._tile_loop(role.body, ctx)
                return
            self._elect(role, ctx)
            self._tile_loop(role.body, ctx)
            self._drain(drained, ctx)
            if frees:                   # every lane of the warp, after the roles reading the columns said they are done
                self._free_tmem()

        if role.warps == 1:
            body()
            return
        warp = b.divu(self.tid, c(self.T.warp_size))
        with b.if_(b.cmp("eq", warp, c(role.first_warp))):
            body()

    def _role_ops(self, ops, ctx: RoleState) -> None:
        """A role's ops at tile level: in a one-thread role whose warp acts as a whole, the elected lane runs them but
        for the named-barrier syncs, which the whole warp takes (`_run_elected`)."""
        if ctx.elected is None:
            self._ops(ops, ctx)
        else:
            self._run_elected(ops, ctx)

    def _drained_rings(self, role: Role) -> list[str]:
        """The barriers the role waits on for stages back (parity phase^1) of rings whose stages MMA commits release
        (tcgen05.commit arrives when the MMAs finish, after the issuing thread moved on) and that advance with the K
        loop: after its last iteration the role waits each stage once more (`_drain`)."""
        committed = {o.barrier for r in self.p.roles for o in r.walk() if isinstance(o, Arrive) and o.per == "commit"}
        names = []
        for op in role.walk():
            if not isinstance(op, Wait) or op.parity != "phase^1" or op.barrier not in committed:
                continue
            ring = self.p.ring_of_barrier(op.barrier)
            if ring is not None and ring.counts != "tile" and self._ring(op.barrier).count > 1 \
                    and op.barrier not in names:
                names.append(op.barrier)
        return names

    def _drain(self, names: list[str], ctx: RoleState) -> None:
        """The drain: every release the MMA commits send to this CTA's barriers `names` (a pair's leader multicasts
        them to both) has landed before the CTA exits, so no late arrival writes smem the SM may have handed to the
        next CTA. A stage this CTA never used passes at once (a fresh barrier completes parity phase^1 = 1 from the
        start)."""
        if not names:
            return
        b, c = self.b, self.b.const
        with b.if_(ctx.elected):
            for name in names:
                used = self._ring_iterations(name)
                for i in range(self._ring(name).count):
                    state = self._loop_state(c(0), b.add(used, c(i)))
                    self._barrier(name, state).wait(b.xor(state.phase, c(1)))

    def _ring_iterations(self, name: str) -> ir.Value:
        """The stages of ring `name` this CTA took in all (the drain starts there)."""
        raise NotImplementedError

    def _free_tmem(self) -> None:
        """The allocating warp frees the kernel's Tensor Memory (every lane; the kernel's cta_group)."""
        self.atoms.after_sync()
        self.atoms.tmem_dealloc(self.b, self.taddr, self.tmem_columns, self.cta_group)

    def _streamk_ctas(self, t0: ir.Value, k_tiles: ir.Value, ctas: ir.Value, iters: ir.Value) -> tuple:
        """(the first CTA, the count of CTAs) whose runs hold a piece of the stream-K tile whose iterations start at
        t0: streamk_cta(t0) .. streamk_cta(t0 + k_tiles - 1), in K order."""
        b, c = self.b, self.b.const
        first = rules.streamk_cta(t0, ctas, iters, b)
        last = rules.streamk_cta(b.add(t0, b.sub(k_tiles, c(1))), ctas, iters, b)
        return first, b.add(b.sub(last, first), c(1))

    def _streamk_hand_off(self, ctx: RoleState, counter_index: ir.Value, pieces: ir.Value, bar: ir.Value) -> ir.Value:
        """After the warpgroup wrote its piece to the workspace: whether this piece is the tile's last to finish (i1,
        the same in every thread of the warpgroup). The warpgroup syncs on named barrier `bar`; its first thread
        fences (gpu scope: release of the slot writes) and adds 1 to counters[counter_index]; the piece that
        brings it to `pieces` is the last: that thread sets it back to 0 (ready for the next launch) and fences
        again (acquire: the other pieces' slots, before reading them); bar.red.or tells the warpgroup."""
        b, c = self.b, self.b.const
        threads = self.T.warpgroup_threads
        sync.named_barrier_sync(b, bar, threads)
        lead, other, (is_last,) = b.if_values(ctx.wg_leader, [b.i1])
        with lead as yielded:
            sync.fence_gpu()
            counter = b.gep(self.counters, counter_index, b.i32)
            last = b.cmp("eq", sync.atomic_add_gpu(b, counter, c(1)), b.sub(pieces, c(1)))
            with b.if_(last):
                b.store(c(0), counter, alignment=4)
                sync.fence_gpu()
            yielded.append(last)
        with other as yielded:
            yielded.append(b.const(0, b.i1))
        return sync.named_barrier_any(b, bar, threads, is_last)

    def _tile_loop(self, ops, ctx: RoleState) -> None:
        """The role's ops (a persistent GEMM runs them once per tile)."""
        self._role_ops(ops, ctx)

    def _loaded_inputs(self, role: Role) -> list[str]:
        seen = []
        for op in role.walk():
            if isinstance(op, Copy) and op.source not in seen:
                seen.append(op.source)
        return seen

    # ---- ops ------------------------------------------------------------------------------
    def _ops(self, ops, ctx: RoleState) -> None:
        for op in ops:
            kind = self.OPS.get(type(op))
            if kind is None:
                self._fail(f"cannot lower {wl_name(op)} in role {ctx.name!r}; the {self.T.name} lowering handles "
                           f"{', '.join(self.OP_NAMES)}")
            getattr(self, f"_op_{kind}")(op, ctx)

    def _mma_shape(self, op, what: str = "wl.mma") -> tuple[int, int, int]:
        """(m, n, k) of an Mma, checked against the target's MMA shapes and the instruction k."""
        m, n, k = op.shape
        try:
            self.T.check_mma_shape(m, n, self.elem)
            if k % self.mma_k:
                raise ValueError(f"k = {k} is not a multiple of the MMA instruction's k = {self.mma_k}")
        except ValueError as e:
            self._fail(f"{what} shape {list(op.shape)}: {e}")
        return m, n, k

    def _need_loop(self, op, ctx: RoleState) -> LoopState:
        if ctx.loop is None:
            self._fail(f"{type(op).__name__} in role {ctx.name!r} is outside a wl.k_loop; its stage would be "
                       "undefined")
        return ctx.loop

    def _loop_state(self, kt: ir.Value, it: ir.Value) -> LoopState:
        """Ring iteration `it` (at loop index kt): stage = it % stages, phase = (it / stages) & 1."""
        b, c = self.b, self.b.const
        stage = b.remu(it, c(self.stages))
        phase = b.and_(b.divu(it, c(self.stages)), c(1))
        return LoopState(kt, it, stage, phase, {})

    def _lagged(self, loop: LoopState, lag: int) -> LoopState:
        """The ring state of iteration it - lag (an op with a lag acts on an earlier iteration's stage and phase;
        the program runs it only where that iteration exists)."""
        if not lag:
            return loop
        if not 0 < lag < self.stages:
            self._fail(f"lag = {lag}: must be 0..{self.stages - 1}")
        key = ("lag", lag)
        if key not in loop.cache:
            c = self.b.const
            loop.cache[key] = self._loop_state(self.b.sub(loop.kt, c(lag)), self.b.sub(loop.it, c(lag)))
        return loop.cache[key]

    def _barrier(self, name: str, loop: LoopState) -> sync.Mbarrier:
        """This stage's mbarrier of ring `name` (its address computed once per loop body)."""
        key = ("bar", name)
        if key not in loop.cache:
            ring = self._ring(name)
            stages = (loop.stages or 1) if loop.once else self.stages
            if ring.count != stages:
                self._fail(f"mbarrier ring {name!r} has {ring.count} barriers for {stages} stages")
            loop.cache[key] = self.rings[name].at(loop.stage)
        return loop.cache[key]

    def _stage_offset(self, region, loop: LoopState) -> ir.Value:
        """Byte offset (i32, from the aligned smem base) of this stage's tile of `region`."""
        b, c = self.b, self.b.const
        if region.stages == 1 and self.stages != 1:     # loaded once (attention's Q): no stage to pick
            return c(region.offset)
        if region.stages != self.stages:
            self._fail(f"buffer {region.name!r} has {region.stages} stages, the kernel {self.stages}")
        off = b.mul(loop.stage, c(self._stage_bytes(region)))
        return off if region.offset == 0 else b.add(c(region.offset), off)

    def _use_state(self, loop: LoopState | None, ring, use: int) -> LoopState | None:
        """The ring state of slot `use` of this iteration on a ring taking several slots an iteration (the shared
        K/V ring: position = it * uses + use, stage and phase from it); the iteration's own state otherwise."""
        if loop is None or ring is None or ring.uses == 1:
            if use:
                self._fail(f"slot use {use} on {ring.name if ring else 'a region'!r}, which takes one slot an iteration")
            return loop
        if not 0 <= use < ring.uses:
            self._fail(f"slot use {use} of ring {ring.name!r}, which takes {ring.uses} slots an iteration")
        key = ("use", ring.name, use)
        if key not in loop.cache:
            b, c = self.b, self.b.const
            loop.cache[key] = self._loop_state(loop.kt, b.add(b.mul(loop.it, c(ring.uses)), c(use)))
        return loop.cache[key]

    def _tile_ring_state(self, name: str, ctx: RoleState) -> LoopState | None:
        """The state at this tile of a ring counted in tiles that the family keeps apart from the loops (the Tensor
        Memory GEMM's accumulator ring); None: the ring follows the loop (or the family's `_need_loop`)."""
        return None

    def _ring_state(self, op, ctx: RoleState) -> LoopState:
        """The ring state an op on a barrier acts at: a ring counted in tiles at this tile (`_tile_ring_state`); else
        the loop's iteration (outside a loop: `_need_loop`), at the op's slot of a ring that takes several an
        iteration, `lag` iterations back. A ring of one barrier used every iteration of a loop of several stages
        flips its phase each iteration: barrier 0, phase it & 1."""
        state = self._tile_ring_state(op.barrier, ctx)
        if state is not None:
            return state
        loop = self._use_state(self._need_loop(op, ctx), self.p.ring_of_barrier(op.barrier), op.use)
        loop = self._lagged(loop, op.lag)
        if not loop.once and self._ring(op.barrier).count == 1 and self.stages != 1:
            key = ("every",)
            if key not in loop.cache:
                loop.cache[key] = LoopState(loop.kt, loop.it, 0, self.b.and_(loop.it, self.b.const(1)), {},
                                            once=True, stages=1)
            return loop.cache[key]
        return loop

    @property
    def _cluster_released(self) -> set:
        """The barriers another CTA's threads arrive on with a cluster-scope release (an arrival at the pair's
        leader: the relay's hand-over of its stage, the peer epilogue's release of the accumulator): their waits
        acquire at cluster scope, so that release and acquire are morally strong."""
        return {o.barrier for r in self.p.roles for o in r.walk() if isinstance(o, Arrive) and o.cta == "leader"}

    def _op_wait(self, op: Wait, ctx: RoleState) -> None:
        """Wait for the state's phase ('phase': the consumer's) or the one before ('phase^1': the producer's; the
        first lap over fresh barriers passes at once), acquiring at cluster scope where another CTA's cluster-scope
        releases arrive (`_cluster_released`); in a fenced role, the atoms' fence after it."""
        b, c = self.b, self.b.const
        state = self._ring_state(op, ctx)
        if op.parity == "phase":
            ph = state.phase
        elif op.parity == "phase^1":
            ph = b.xor(state.phase, c(1))
        else:
            self._fail(f"wl.wait parity {op.parity!r}; expected 'phase' (consumer) or 'phase^1' (producer)")
        self._barrier(op.barrier, state).wait(ph, "cluster" if op.barrier in self._cluster_released else "cta")
        if ctx.fenced:
            self.atoms.after_sync()

    def _op_arrive(self, op: Arrive, ctx: RoleState) -> None:
        """An arrival on the state's barrier, by: 'commit' the MMA thread's commit (arrives when its MMAs finish; at
        both CTAs' barriers for a pair's 'pair'); 'warpgroup' each warpgroup's leader (at every CTA's barrier of a
        cluster for 'pair'; with a lag, only where iteration it - lag exists); 'thread' every thread of a warp or
        warpgroup role (the atoms' fence before it in a fenced role); 'role' the one thread of a one-thread role.
        'leader': at the pair's rank-0 CTA's instance of the barrier."""
        if op.tx_bytes:
            self._arrive_expect_tx(op, ctx)
            return
        b, c = self.b, self.b.const
        if op.cta not in ("own", "leader", "pair") or (op.cta != "own" and self.rank is None):
            self._fail(f"wl.arrive at the {op.cta!r} CTA's barrier in a kernel of cluster {list(self.cluster)}")
        if op.lag:
            loop = self._need_loop(op, ctx)
            if not 0 < op.lag < self.stages:
                self._fail(f"wl.arrive lag = {op.lag}: must be 0..{self.stages - 1}")
            self._ring(op.barrier)      # the stage of iteration it - lag, i.e. (it + stages - lag) % stages
            bar = self.rings[op.barrier].at(b.remu(b.add(loop.it, c(self.stages - op.lag)), c(self.stages)))
        else:
            state = self._ring_state(op, ctx)
            bar = self._barrier(op.barrier, state)
            loop = state
        if op.per == "commit":
            if ctx.role is not self.mma_role:
                self._fail(f"MMA commit arrival on {op.barrier!r} in role {ctx.name!r}, which issues no MMAs")
            if op.cta == "leader":
                self._fail(f"MMA commit on the leader's {op.barrier!r}: the MMA thread runs in the leader")
            # pair: multicast to the barrier at the same offset in both CTAs (ranks 0 and 1)
            self.atoms.commit(b, bar.addr, self.cta_group, (1 << self.cta_group) - 1 if op.cta == "pair" else None)
        elif op.per == "warpgroup" and ctx.issue == "warpgroup" and op.cta != "leader":
            # One signalling thread per warpgroup (CUTLASS): the ring expects one arrival per warpgroup.
            # With a lag, iterations before the first `lag` have no earlier stage to free.
            cond = ctx.wg_leader if op.lag == 0 else b.and_(ctx.wg_leader, b.cmp("uge", loop.it, c(op.lag)))
            with b.if_(cond):
                # the slot is free here: tell every CTA's producer that multicasts into it (a CTA-scope release:
                # the arrival hands back smem whose reads are done, nothing this thread wrote; sync.remote_arrive)
                if op.cta == "pair":
                    for r in range(self.cluster_m):
                        sync.remote_arrive(b, sync.mapa(b, bar.addr, c(r)))
                else:
                    bar.arrive()
        elif (op.per == "thread" and ctx.issue in ("warp", "warpgroup")) or (op.per == "role" and ctx.issue == "thread"):
            if op.lag:
                self._fail(f"wl.arrive per {op.per!r} with lag {op.lag}: only per-warpgroup arrivals lag")
            if ctx.fenced and op.per == "thread":
                self.atoms.before_sync()
            if op.cta == "leader":            # the pair's rank-0 CTA's instance of the barrier
                sync.remote_arrive(b, sync.mapa(b, bar.addr, c(0)), scope="cluster")
            elif op.cta == "own":
                bar.arrive()
            else:
                self._fail(f"wl.arrive per {op.per!r} at every CTA's {op.barrier!r}: only a commit or a warpgroup's "
                           "leader arrives there")
        else:
            self._fail(f"wl.arrive per {op.per!r} in role {ctx.name!r} (issue {ctx.issue!r}) is not lowered")

    def _arrive_expect_tx(self, op: Arrive, ctx: RoleState) -> None:
        loop = self._use_state(self._need_loop(op, ctx), self.p.ring_of_barrier(op.barrier), op.use)
        if ctx.issue != "thread":
            self._fail(f"wl.arrive_expect_tx in role {ctx.name!r} (issue {ctx.issue!r}): it must be issued by one "
                       "thread, or each thread would arrive")
        ring = self._ring(op.barrier)
        if op.tx_bytes != ring.tx_bytes:
            self._fail(f"wl.arrive_expect_tx expects {op.tx_bytes} bytes but ring {ring.name!r} is planned "
                       f"for {ring.tx_bytes}")
        self._barrier(op.barrier, loop).arrive_expect_tx(op.tx_bytes)

    def _coord_origin(self, dim: str, loop: LoopState) -> ir.Value | None:
        """The TMA coordinate where this CTA's (and iteration's) tile starts along `dim`; None for 0."""
        raise NotImplementedError

    def _outer_coords(self, op: Copy) -> list[ir.Value]:
        """TMA coordinates of the tensor map's dims past the tile's two (attention: head, batch)."""
        return []

    def _copy_coords(self, op: Copy, tile: SmemTile, coord: list) -> list:
        """The TMA coordinates of one box of a copy: its [column, row] in the tile's two dims, then the map's outer
        dims (`_outer_coords`)."""
        return coord + self._outer_coords(op)

    def _op_copy(self, op: Copy, ctx: RoleState) -> None:
        b, c = self.b, self.b.const
        loop = self._use_state(self._need_loop(op, ctx), self.p.ring_of_region(op.region), op.use)
        if ctx.issue != "thread":
            self._fail(f"wl.async_load in role {ctx.name!r}: TMA copies are issued by one thread")
        region = self._region(op.region)
        tile = self.tiles[region.name]
        bar = self._barrier(op.barrier, loop)
        stage_off = self._stage_offset(region, loop)
        # The tile's boxes, one swizzle span of the contiguous dim x all rows each, stored one after another:
        # box j starts at element box_start(j) of the contiguous dim and lands at byte box_offset(j).
        rows_dim, cols_dim = tile.dims
        if op.multicast:
            self._multicast_copy(op, loop, tile, stage_off, bar)
            return
        for j in range(tile.num_boxes):
            coord = []
            for dim, step in ((cols_dim, tile.box_start(j)), (rows_dim, 0)):
                v = self._coord_origin(dim, loop)
                coord.append(c(step) if v is None else v if step == 0 else b.add(v, c(step)))
            coord = self._copy_coords(op, tile, coord)
            dst = stage_off if j == 0 else b.add(stage_off, c(tile.box_offset(j)))
            tma.tma_load(b, b.gep(self.base, dst), self.tmap_args[op.source], bar.addr, coord)

    def _multicast_copy(self, op: Copy, loop: LoopState, tile: SmemTile, stage_off: ir.Value, bar) -> None:
        """This CTA's share of the tile (`_multicast_share`: n whole boxes from box rank * n, or rows rank * n ..
        of every box), loaded once into the same offset of every CTA of the cluster (.multicast::cluster), each
        copy signalling the stage's full barrier there."""
        b, c = self.b, self.b.const
        if self.rank is None:
            self._fail(f"a multicast copy of {op.source!r} in a kernel without a cluster")
        how, n = self._multicast_share(tile)
        mask = (1 << self.cluster_m) - 1
        rows_dim, cols_dim = tile.dims
        col0, row0 = self._coord_origin(cols_dim, loop), self._coord_origin(rows_dim, loop)

        def plus(v, k):          # v + k (k an int or an i32 value; v None: 0); None when both are 0
            if isinstance(k, int):
                k = None if k == 0 else c(k)
            return k if v is None else v if k is None else b.add(v, k)

        def value(v):
            return c(0) if v is None else v

        if how == "boxes":
            pieces = []
            for j in range(n):
                box = plus(b.mul(self.rank, c(n)), j)
                pieces.append((b.mul(box, c(tile.box[0])), 0, b.mul(box, c(tile.box_bytes))))
        else:
            first_row = b.mul(self.rank, c(n))
            rows_at = b.mul(first_row, c(tile.span))        # each row of a box is one swizzle span of bytes
            pieces = [(tile.box_start(j), first_row, plus(rows_at, tile.box_offset(j))) for j in range(tile.num_boxes)]
        # each piece: (offset along the contiguous dim, row offset, byte offset in the stage)
        for col, row, at in pieces:
            coord = [value(plus(col0, col)), value(plus(row0, row))] + self._outer_coords(op)
            tma.tma_load(b, b.gep(self.base, b.add(stage_off, at)), self.tmap_args[op.source], bar.addr, coord, mask)

    def _descriptor(self, region, loop: LoopState, row_offset: ir.Value | None,
                    k_dim: str = "K") -> tuple[ir.Value, SmemTile]:
        """The MMA's smem descriptor of this stage's tile (i64): the start address added at run time to the static
        bits (LBO, SBO, swizzle; on Tensor Memory targets the version too) that the layout derives; see SmemTile.operand."""
        b, c = self.b, self.b.const
        tile = self.tiles[region.name]
        try:
            static = self.atoms.smem_descriptor.for_tile(tile, k_dim).static_bits()
        except ValueError as e:
            self._fail(f"buffer {region.name!r}: {e}")
        addr = self._stage_offset(region, loop)
        if row_offset is not None:
            addr = b.add(addr, row_offset)
        lo = b.add(self.base_enc, b.ext64(descriptor_step(addr, b), False))
        return b.or_(lo, c(to_i64(static), b.i64)), tile

    def _op_sync(self, op: Sync, ctx: RoleState) -> None:
        """A named barrier (bar.sync, or bar.arrive for arrive_only) over its planned thread count. At the CTA's first
        or last tile only where the op says so (a persistent walk sets self.tile_first / tile_last; a CTA of one
        tile takes every one). A barrier with one instance per warpgroup of the role takes the warpgroup's own
        ('own') or the next one's ('next': the ping-pong turns), or one warpgroup's only (op.warpgroup). In a fenced
        role the atoms' fences go around it (before an arrive or sync, after a sync)."""
        b, c = self.b, self.b.const
        nb = self.p.named_barriers.get(op.barrier)
        if nb is None:
            self._fail(f"Sync on {op.barrier!r}: no such named barrier")
        n_wgs = ctx.role.warps * self.T.warp_size // self.T.warpgroup_threads if ctx.issue == "warpgroup" else 1
        if nb.count not in (1, n_wgs):
            self._fail(f"named barrier {nb.name!r} has {nb.count} instances for {n_wgs} warpgroups")
        if op.warpgroup is not None and ctx.issue != "warpgroup":
            self._fail(f"Sync on {nb.name!r} for warpgroup {op.warpgroup} in role {ctx.name!r} (issue {ctx.issue!r})")
        if op.slot not in ("own", "next"):
            self._fail(f"Sync slot {op.slot!r}: 'own' or 'next'")
        if op.tiles not in ("each", "first", "last"):
            self._fail(f"Sync tiles {op.tiles!r}: 'each', 'first' or 'last'")
        if op.tiles != "each" and self.tile_first is not None:      # persistent: the CTA's first / last tile only
            with b.if_(self.tile_first if op.tiles == "first" else self.tile_last):
                self._op_sync(replace(op, tiles="each"), ctx)
            return

        def emit(bid) -> None:
            if ctx.fenced:
                self.atoms.before_sync()
            if op.arrive_only:
                sync.named_barrier_arrive(b, bid, nb.threads)
            else:
                sync.named_barrier_sync(b, bid, nb.threads)
                if ctx.fenced:
                    self.atoms.after_sync()

        if op.warpgroup is not None:            # one warpgroup only: its barrier is known here
            w = op.warpgroup
            idx = w if op.slot == "own" else (w + 1) % nb.count
            with b.if_(b.cmp("eq", ctx.wg_index, c(w))):
                emit(nb.id + idx % nb.count)
            return
        if nb.count == 1:
            bid = nb.id
        elif op.slot == "own":
            bid = b.add(c(nb.id), ctx.wg_index)
        else:
            bid = b.add(c(nb.id), b.remu(b.add(ctx.wg_index, c(1)), c(nb.count)))
        emit(bid)

    def _op_mma_wait(self, op: MmaWait, ctx: RoleState) -> None:
        try:
            self.atoms.mma_wait(op.pending)
        except ValueError as e:
            self._fail(str(e))

    # ---- Tensor Memory kernels: placement, elected one-thread roles, the TMEM address ------------------------
    def _check_placement(self) -> list:
        """What a kernel with Tensor Memory regions must hold before it is lowered: every region placed, TMEM regions
        inside the allocation (sets self.tmem_columns), mbarriers aligned, smem_bytes covering the plan and the
        run-time base round-up. Returns the smem regions."""
        p, fail, T = self.p, self._fail, self.T
        self.tmem_columns = p.attrs.get("tmem_columns")
        if self.tmem_columns is None:
            fail("the kernel has no 'tmem_columns' attribute: run wl-plan-tmem first")
        for region in p.regions.values():
            if region.offset is None or region.size is None:
                fail(f"buffer {region.name!r} has no offset: run wl-plan-smem and wl-plan-tmem first")
            if region.space == "tmem" and region.offset + region.size > self.tmem_columns:
                fail(f"TMEM region {region.name!r} (columns {region.offset}..{region.offset + region.size - 1}) "
                     f"is outside the {self.tmem_columns}-column allocation")
        for bar in p.barriers.values():
            if bar.offset is None or bar.offset % T.mbarrier_bytes:
                fail(f"mbarrier {bar.name!r} needs an {T.mbarrier_bytes}-byte aligned offset (run wl-plan-barriers)")
        smem = [r for r in p.regions.values() if r.space == "smem"]
        end = max([r.offset + r.size for r in smem]
                  + [b.offset + T.mbarrier_bytes * b.count for b in p.barriers.values()])
        if self.smem_bytes < end + T.smem_base_align - 1:
            fail(f"smem_bytes = {self.smem_bytes} does not cover the plan's {end} B plus {T.smem_base_align - 1} B "
                 f"for the run-time {T.smem_base_align} B alignment of the base")
        return smem

    def _check_tmem_owner(self, smem: list) -> None:
        """A kernel with Tensor Memory: one i32 smem word for the address the allocation writes (wl-specialize's
        tmem_addr), and one one-thread role in one warp issuing the MMAs; its warp allocates and frees the columns."""
        slots = [r for r in smem if not r.dims and r.elem == "i32"]
        if len(slots) != 1:
            self._fail(f"expected one i32 smem word for the TMEM address (wl-specialize's tmem_addr), found "
                       f"{[r.name for r in slots]}")
        self.tmem_slot = slots[0]
        owners = [r for r in self.p.roles if any(isinstance(o, Mma) for o in r.walk())]
        if len(owners) != 1 or owners[0].issue != "thread" or owners[0].warps != 1:
            self._fail(f"roles issuing MMAs: {[r.name for r in owners]}; the MMA needs one one-thread role in "
                       "one warp (it allocates and frees TMEM too)")
        self.mma_role = owners[0]

    def _elect(self, role: Role, ctx: RoleState) -> None:
        """A one-thread role of a warp: elect the lane that issues its ops (ctx.elected) and let it prefetch the tensor
        maps the role loads through."""
        b = self.b
        ctx.elected = sync.elect_sync(b)
        if self._loaded_inputs(role):
            with b.if_(ctx.elected):
                for source in self._loaded_inputs(role):
                    tma.prefetch_tensormap(self.tmap_args[source])

    def _run_elected(self, ops, ctx: RoleState) -> None:
        """A one-thread role's ops: the elected lane (ctx.elected) runs them, except the named-barrier syncs, which
        the whole warp takes (bar.sync counts threads)."""
        run: list = []
        for op in list(ops) + [None]:
            if op is None or isinstance(op, Sync):
                if run:
                    with self.b.if_(ctx.elected):
                        self._ops(run, ctx)
                    run = []
                if op is not None:
                    self._op_sync(op, ctx)
            else:
                run.append(op)

    def _load_tmem_address(self) -> ir.Value:
        """The Tensor Memory base address the allocating warp's alloc wrote to the smem slot (self.slot_ptr)."""
        return llvm.LoadOp(self.b.i32, self.slot_ptr, loc=self.b.loc("taddr")).result
