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
                 rounded up to the target's alignment, thread 0 initialising every mbarrier, the CTA barrier;
  roles          dispatch on the warpgroup (roles of whole warpgroups) or on the warp (roles of warps, a role
                 with a rank in one CTA of a pair only), each role's register budget (setmaxnreg), one-thread
                 roles run by an elected lane;
  rings          stage = it % stages, phase = (it / stages) & 1 of a ring iteration; lagged states; rings counted
                 in tiles; waits (parity phase or phase^1), arrivals (per warpgroup, per role, at a pair's
                 leader or at every CTA of a cluster), expect_tx; the producer's drain after its last iteration;
  copies         TMA box loops (one swizzle span of the contiguous dim a box), multicast over a cluster;
  descriptors    the MMA's smem descriptor: static bits from the layout, the start address added at run time;
  stream-K       the hand-off between the pieces of a split tile (named barrier, fences, an atomic count).

The families (`warploom.lowering.gemm`, `warploom.lowering.attention`) add their configuration, parameters,
tile walks, MMAs and stores.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import llvm

from warploom import targets
from warploom.kernel import Arrive, Copy, MmaWait, Role, Store, Sync, Wait
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
    cluster_m = 1                           # CTAs of a cluster along M (the GEMM's 2x1 clusters sharing B: 2)
    rank = None                             # %cluster_ctarank (i32) in a cluster kernel

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
        """What every kernel's plan must satisfy here: roles of whole warpgroups covering the block, register
        budgets within the file, placed regions and barriers, and smem for the run-time base round-up."""
        p = self.p
        # Roles: whole warpgroups here (a one-thread role elects its lane in the first warp); together
        # they must cover every warpgroup exactly once.
        warps_per_wg = self.T.warpgroup_threads // self.T.warp_size
        wgs = []
        for role in p.roles:
            if role.first_warp % warps_per_wg or role.warps % warps_per_wg:
                self._fail(f"role {role.name!r} spans warps {role.first_warp}..{role.warp_range.stop - 1}; the "
                           "lowering takes roles of whole warpgroups here")
            wgs += range(role.first_warp // warps_per_wg, role.warp_range.stop // warps_per_wg)
        if sorted(wgs) != list(range(self.threads // self.T.warpgroup_threads)):
            self._fail(f"roles cover warpgroups {sorted(wgs)}; {self.threads} threads need each of "
                       f"0..{self.threads // self.T.warpgroup_threads - 1} exactly once")
        # What every thread gets at launch; setmaxnreg then moves registers from roles below it to roles above it.
        self.launch_regs = self.T.launch_regs(self.threads)
        used = sum(self.T.warp_size * r.warps * self._regs(r) for r in p.roles)
        if used > self.T.register_file:
            self._fail(f"role register budgets need {used} registers; the register file holds {self.T.register_file}")

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
                             cluster=getattr(self, "cluster", (1, 1, 1)),
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
        """What the prologue does before the CTA-wide barrier besides the mbarrier init (Tensor Memory: alloc)."""

    def _after_cta_barrier(self) -> None:
        """What every thread does after it (Tensor Memory: read its address)."""

    def _roles(self) -> None:
        """if wg in role0 { role0 } else if wg in role1 { ... } else { last role }."""
        b, c = self.b, self.b.const
        roles = sorted(self.p.roles, key=lambda r: r.first_warp)
        warps_per_wg = self.T.warpgroup_threads // self.T.warp_size

        def chain(i: int) -> None:
            if i == len(roles) - 1:
                self._role(roles[i])
                return
            first, last = roles[i].first_warp // warps_per_wg, roles[i].warp_range.stop // warps_per_wg - 1
            if first == last:
                cond = b.cmp("eq", self.wg, c(first))
            else:   # earlier roles took the lower warpgroups, so an upper bound is enough
                cond = b.cmp("ule", self.wg, c(last))
            then, orelse = b.if_else(cond)
            with then:
                self._role(roles[i])
            with orelse:
                chain(i + 1)

        chain(0)

    def _role(self, role: Role) -> None:
        b, c = self.b, self.b.const
        ctx = RoleState(role=role, first_wg=role.first_warp * self.T.warp_size // self.T.warpgroup_threads, accs={}, acc_n={})
        sync.role_registers(self._regs(role), self.launch_regs)
        if role.issue == "thread":
            # One elected lane of the role's first warp issues everything; the others fall through.
            warp = b.divu(self.tid, c(self.T.warp_size))
            with b.if_(b.cmp("eq", warp, c(role.first_warp))):
                with b.if_(sync.elect_sync(b)):
                    for source in self._loaded_inputs(role):
                        tma.prefetch_tensormap(self.tmap_args[source])
                    self._tile_loop(role.body, ctx)
        elif role.issue == "warpgroup":
            ctx.wg_index = b.sub(self.wg, c(ctx.first_wg))
            ctx.thread_in_wg = b.remu(self.tid, c(self.T.warpgroup_threads))
            ctx.wg_leader = b.cmp("eq", ctx.thread_in_wg, c(0))
            self._tile_loop(role.body, ctx)
            if any(isinstance(o, Store) and o.region is not None and o.barrier is not None for o in role.walk()):
                with b.if_(ctx.wg_leader):     # the last TMA stores have read their smem before the CTA exits
                    tma.bulk_wait_group(0, read=True)
        else:
            self._fail(f"role {role.name!r} has issue = {role.issue!r}; the lowering knows 'thread' and 'warpgroup'")

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
        self._ops(ops, ctx)

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

    def _op_wait(self, op: Wait, ctx: RoleState) -> None:
        b, c = self.b, self.b.const
        loop = self._lagged(self._need_loop(op, ctx), op.lag)
        if op.parity == "phase":
            ph = loop.phase
        elif op.parity == "phase^1":   # the phase before: the first lap over fresh barriers passes at once
            ph = b.xor(loop.phase, c(1))
        else:
            self._fail(f"wl.wait parity {op.parity!r}; expected 'phase' (consumer) or 'phase^1' (producer)")
        self._barrier(op.barrier, loop).wait(ph)

    def _op_arrive(self, op: Arrive, ctx: RoleState) -> None:
        if op.tx_bytes:
            self._arrive_expect_tx(op, ctx)
            return
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
        if not 0 <= op.lag < self.stages:
            self._fail(f"wl.arrive lag = {op.lag}: must be 0..{self.stages - 1}")
        if op.lag == 0:
            bar = self._barrier(op.barrier, loop)
        else:   # the stage of iteration kt - lag, i.e. (kt + stages - lag) % stages
            self._ring(op.barrier)
            stage = b.remu(b.add(loop.it, c(self.stages - op.lag)), c(self.stages))
            bar = self.rings[op.barrier].at(stage)
        if op.cta not in ("own", "pair") or (op.cta == "pair" and self.rank is None):
            self._fail(f"wl.arrive at the {op.cta!r} CTA's barrier: the lowering arrives at its own CTA's, or "
                       "(a cluster kernel) at every CTA's")
        if op.per == "warpgroup" and ctx.issue == "warpgroup":
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
        elif op.per == "role" and ctx.issue == "thread" and op.cta == "own":
            bar.arrive()
        else:
            self._fail(f"wl.arrive per {op.per!r} in role {ctx.name!r} (issue {ctx.issue!r}) is not lowered")

    def _arrive_expect_tx(self, op: Arrive, ctx: RoleState) -> None:
        loop = self._need_loop(op, ctx)
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

    def _op_copy(self, op: Copy, ctx: RoleState) -> None:
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
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
            coord += self._outer_coords(op)
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
