"""sm_90a (Hopper) lowering: a planned kernel `Program` -> one `gpu.module` of NVVM/LLVM ops, plus launch data.

Input: the typed kernel program (warploom/kernel) of a kernel after wl-plan-barriers.
Everything the code depends on comes from it or from what it names: tile sizes,
stages and threads from the program; warp roles and register budgets from its
`Role`s; each smem region's layout from an `SmemTile` (warploom/layout) built from
the `Region` (TMA boxes, where each box lands, descriptor LBO/SBO, the offset of each
MMA k-block and of each warpgroup's rows); barrier offsets, counts, arrivals and
tx bytes from its `MBarrier`s; hardware numbers from `warploom.targets`. Nothing is
recomputed here, and the lowering refuses (ValueError) what it cannot express
instead of guessing.

Output (`LoweredKernel`): one `gpu.module @<name>_mod [#nvvm.target<chip = "sm_90a", ...>]`
holding the dynamic-smem global and the `llvm.func @<name>` kernel, built with
the `mlir.dialects` builders through `warploom.lowering.emit` (typed and verified
as it is built, never formatted as text) in the caller's context, and the
runtime contract (params, tensor maps, grid rules, block, cluster, smem bytes).
`warploom.lowering.ptx` turns the module into PTX, `assemble` into a cubin.

Code shape:
  prologue   tid, CTA tile origins, the dynamic smem base rounded up to the target's base alignment,
             thread 0 initialises every mbarrier, fence + bar.sync (all threads);
  roles      `scf.if` on the warpgroup index; each role runs setmaxnreg, then
             its ops in order: Loop -> scf.for (stage = i % S, phase = (i/S)&1),
             Wait -> mbarrier.try_wait.parity, Arrive (tx) -> arrive.expect_tx, Copy ->
             cp.async.bulk.tensor (TMA), Mma -> wgmma.mma_async on smem
             descriptors, MmaWait -> wgmma.wait_group, Arrive -> mbarrier.arrive,
             Store -> the accumulator fragment stored to C: through the staging smem and TMA stores, in
             64-column chunks, when the plan stages C (the default); from registers otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from warploom import targets
from warploom.dialect import make_context
from warploom.kernel import Arrive, Copy, Loop, Mma, MmaWait, Program, Role, Store, Wait
from warploom.kernel.program import BARRIER_STORAGE
from warploom.kernel.write import wl_name
from warploom.kernels import STREAMK_PARAMS, STREAMK_SLOTS
from warploom.layout import SmemTile, WgmmaSmemDescriptor
from warploom.lowering import emit
from warploom.lowering.emit import sync, tma, wgmma
from warploom.lowering.emit.nobuilder import llvm_array, nvvm_target
from warploom.runtime import rules
from warploom.runtime.artifact import ParamSpec, TensorMapSpec

T = targets.get("sm_90a")
LLVM_OPT = 3                          # #nvvm.target's LLVM -O level
ELEM_TYPES = ("bf16", "f16")          # what this lowering takes: wgmma f16-kind inputs with f32 accumulation
WAIT_TICKS = 0x989680                 # try_wait suspend-time hint (CUTLASS's value)
TMAP_BYTES, TMAP_ALIGN = 128, 64     # a CUtensorMap, passed by value as a grid constant
CTAID = ("x", "y", "z")
OPS = {Loop: "loop", Wait: "wait", Arrive: "arrive", Copy: "copy", Mma: "mma", MmaWait: "mma_wait",
       Store: "store"}
WL_NAMES = ("wl.k_loop", "wl.wait", "wl.arrive_expect_tx", "wl.async_load", "wl.mma", "wl.mma_wait", "wl.arrive",
            "wl.store_tile")


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


def kernel_name(program: Program) -> str:
    """wl_gemm_{elem}_{b_layout}_{BM}x{BN}x{BK}_s{stages}[_persistent][_c2][_g8][_swap][_direct]: the name
    wl-lower-sm90 gives a kernel."""
    from warploom.kernels import gemm_kernel_name
    b = program.regions.get("b")
    b_layout = "?" if b is None else ("nk" if b.dims == ("N", "K") else "kn")
    multicast = any(isinstance(o, Copy) and o.multicast for r in program.roles for o in r.walk())
    return gemm_kernel_name(next(iter(program.inputs.values())).elem, b_layout, program.attrs["tile"],
                            program.attrs.get("stages", "?"), program.attrs.get("schedule", "grid"), program.target,
                            program.attrs.get("epilogue", "tma"),
                            int(program.attrs.get("cluster", [1])[0]) if multicast else 1,
                            int(program.attrs.get("group_m", 1)), bool(program.attrs.get("swap_ab", False)))


def lower_kernel(program: Program, name: str, context: ir.Context | None = None) -> LoweredKernel:
    """Lower a planned GEMM kernel; ValueError names what cannot be lowered and why.

    The gpu.module is built in `context` (the one of the module being lowered; a fresh one
    when left out), inside a module of its own (`LoweredKernel.holder`) that a pass may move it out of."""
    return _GemmLowering(program, name).lower(context or make_context())


# ---- small helpers -----------------------------------------------------------------------------

def to_i64(v: int) -> int:
    """Unsigned 64-bit pattern -> the signed literal MLIR's i64 constants take."""
    return v - (1 << 64) if v >= (1 << 63) else v


@dataclass
class _Loop:
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
class _Piece:
    """The piece of a tile a stream-K CTA works on now: tile index, its first stream-K iteration t0, the K tiles
    [lo, hi) of it in this CTA's run, and the run's start, the CTA, the CTA count and the stream-K iteration count."""
    tile: ir.Value
    t0: ir.Value
    lo: ir.Value
    hi: ir.Value
    start: ir.Value
    cta: ir.Value
    ctas: ir.Value
    iters: ir.Value


@dataclass
class _Role:
    """What the ops of one role share while they are emitted."""
    role: Role
    first_wg: int
    wg_index: ir.Value | None = None       # warpgroup index inside the role (i32)
    thread_in_wg: ir.Value | None = None
    wg_leader: ir.Value | None = None      # thread 0 of each warpgroup (i1)
    loop: _Loop | None = None
    accs: dict | None = None        # accumulator name -> SSA value holding it now
    acc_n: dict | None = None       # accumulator name -> wgmma n
    values: dict | None = None      # other register values by the program's name (attention: s, p, row_max, ...)

    @property
    def name(self) -> str:
        return self.role.name

    @property
    def issue(self) -> str:
        return self.role.issue


class _Sm90Lowering:
    """What every sm_90a kernel lowering shares: the plan's checks (roles, registers, regions, barriers, smem),
    the kernel function and its parameters, the prologue pieces (dynamic smem base, mbarrier init), the role
    dispatch with setmaxnreg, ring stage/phase, waits and arrivals, TMA box loops and wgmma descriptors.
    Subclasses read their kind's configuration (`_read_config`), name their parameters (`_param_list`,
    `_bind_args`), write the prologue and the ops only they have."""
    OPS: dict = {}
    T = T                                   # the target: its hardware numbers (an sm_100a lowering sets its own)
    WARPGROUP_ROLES = True                  # roles are whole warpgroups (sm_90a); sm_100a's are warps
    SMEM_DESCRIPTOR = WgmmaSmemDescriptor   # the MMA's shared memory descriptor encoder (warploom.layout)
    MIN_CTAS_PER_SM = 0                     # .minnctapersm (0: none); the sm_100a attention needs 1 for setmaxnreg
    cluster_m = 1                           # CTAs of a cluster along M (the GEMM's 2x1 clusters sharing B: 2)
    rank = None                             # %cluster_ctarank (i32) in a cluster kernel

    def __init__(self, program: Program, name: str):
        self.p = program
        self.name = name
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
                           "sm_90a lowering takes roles of whole warpgroups")
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
        """The smem layout of a TMA/wgmma tile region, checked against what the descriptors assume."""
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
                       f"{tile.align}-byte aligned so wgmma descriptors can use base offset 0")
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
        # wgmma descriptors hold the shared-window address as (addr & 0x3FFFF) >> 4
        self.base_enc = b.shru(b.and_(base_i64, c(0x3FFFF, b.i64)), c(4, b.i64))

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
        """What the prologue does before the CTA-wide barrier besides the mbarrier init (sm_100a: alloc TMEM)."""

    def _after_cta_barrier(self) -> None:
        """What every thread does after it (sm_100a: read the TMEM address)."""

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
        ctx = _Role(role=role, first_wg=role.first_warp * self.T.warp_size // self.T.warpgroup_threads, accs={}, acc_n={})
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

    def _streamk_hand_off(self, ctx: _Role, counter_index: ir.Value, pieces: ir.Value, bar: ir.Value) -> ir.Value:
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

    def _tile_loop(self, ops, ctx: _Role) -> None:
        """The role's ops (a persistent GEMM runs them once per tile)."""
        self._ops(ops, ctx)

    def _loaded_inputs(self, role: Role) -> list[str]:
        seen = []
        for op in role.walk():
            if isinstance(op, Copy) and op.source not in seen:
                seen.append(op.source)
        return seen

    # ---- ops ------------------------------------------------------------------------------
    def _ops(self, ops, ctx: _Role) -> None:
        for op in ops:
            kind = self.OPS.get(type(op))
            if kind is None:
                self._fail(f"cannot lower {wl_name(op)} in role {ctx.name!r}; the sm_90a lowering handles "
                           f"{', '.join(self.OP_NAMES)}")
            getattr(self, f"_op_{kind}")(op, ctx)

    def _mma_shape(self, op, what: str = "wl.mma") -> tuple[int, int, int]:
        """(m, n, k) of an Mma, checked against the target's wgmma shapes and the instruction k."""
        m, n, k = op.shape
        try:
            self.T.check_mma_shape(m, n, self.elem)
            if k % self.mma_k:
                raise ValueError(f"k = {k} is not a multiple of the wgmma k = {self.mma_k}")
        except ValueError as e:
            self._fail(f"{what} shape {list(op.shape)}: {e}")
        return m, n, k

    def _need_loop(self, op, ctx: _Role) -> _Loop:
        if ctx.loop is None:
            self._fail(f"{type(op).__name__} in role {ctx.name!r} is outside a wl.k_loop; its stage would be "
                       "undefined")
        return ctx.loop

    def _loop_state(self, kt: ir.Value, it: ir.Value) -> _Loop:
        """Ring iteration `it` (at loop index kt): stage = it % stages, phase = (it / stages) & 1."""
        b, c = self.b, self.b.const
        stage = b.remu(it, c(self.stages))
        phase = b.and_(b.divu(it, c(self.stages)), c(1))
        return _Loop(kt, it, stage, phase, {})

    def _lagged(self, loop: _Loop, lag: int) -> _Loop:
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

    def _barrier(self, name: str, loop: _Loop) -> sync.Mbarrier:
        """This stage's mbarrier of ring `name` (its address computed once per loop body)."""
        key = ("bar", name)
        if key not in loop.cache:
            ring = self._ring(name)
            stages = (loop.stages or 1) if loop.once else self.stages
            if ring.count != stages:
                self._fail(f"mbarrier ring {name!r} has {ring.count} barriers for {stages} stages")
            loop.cache[key] = self.rings[name].at(loop.stage)
        return loop.cache[key]

    def _stage_offset(self, region, loop: _Loop) -> ir.Value:
        """Byte offset (i32, from the aligned smem base) of this stage's tile of `region`."""
        b, c = self.b, self.b.const
        if region.stages == 1 and self.stages != 1:     # loaded once (attention's Q): no stage to pick
            return c(region.offset)
        if region.stages != self.stages:
            self._fail(f"buffer {region.name!r} has {region.stages} stages, the kernel {self.stages}")
        off = b.mul(loop.stage, c(self._stage_bytes(region)))
        return off if region.offset == 0 else b.add(c(region.offset), off)

    def _op_wait(self, op: Wait, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        loop = self._lagged(self._need_loop(op, ctx), op.lag)
        if op.parity == "phase":
            ph = loop.phase
        elif op.parity == "phase^1":   # the phase before: the first lap over fresh barriers passes at once
            ph = b.xor(loop.phase, c(1))
        else:
            self._fail(f"wl.wait parity {op.parity!r}; expected 'phase' (consumer) or 'phase^1' (producer)")
        self._barrier(op.barrier, loop).wait(ph)

    def _op_arrive(self, op: Arrive, ctx: _Role) -> None:
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
            self._fail(f"wl.arrive at the {op.cta!r} CTA's barrier: the sm_90a lowering arrives at its own CTA's, or "
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

    def _arrive_expect_tx(self, op: Arrive, ctx: _Role) -> None:
        loop = self._need_loop(op, ctx)
        if ctx.issue != "thread":
            self._fail(f"wl.arrive_expect_tx in role {ctx.name!r} (issue {ctx.issue!r}): it must be issued by one "
                       "thread, or each thread would arrive")
        ring = self._ring(op.barrier)
        if op.tx_bytes != ring.tx_bytes:
            self._fail(f"wl.arrive_expect_tx expects {op.tx_bytes} bytes but ring {ring.name!r} is planned "
                       f"for {ring.tx_bytes}")
        self._barrier(op.barrier, loop).arrive_expect_tx(op.tx_bytes)

    def _coord_origin(self, dim: str, loop: _Loop) -> ir.Value | None:
        """The TMA coordinate where this CTA's (and iteration's) tile starts along `dim`; None for 0."""
        raise NotImplementedError

    def _outer_coords(self, op: Copy) -> list[ir.Value]:
        """TMA coordinates of the tensor map's dims past the tile's two (attention: head, batch)."""
        return []

    def _op_copy(self, op: Copy, ctx: _Role) -> None:
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

    def _multicast_copy(self, op: Copy, loop: _Loop, tile: SmemTile, stage_off: ir.Value, bar) -> None:
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

    def _descriptor(self, region, loop: _Loop, row_offset: ir.Value | None,
                    k_dim: str = "K") -> tuple[ir.Value, SmemTile]:
        """The MMA's smem descriptor of this stage's tile (i64): the start address added at run time to the static
        bits (LBO, SBO, swizzle; on sm_100a the version too) that the layout derives; see SmemTile.operand."""
        b, c = self.b, self.b.const
        tile = self.tiles[region.name]
        try:
            static = self.SMEM_DESCRIPTOR.for_tile(tile, k_dim).static_bits()
        except ValueError as e:
            self._fail(f"buffer {region.name!r}: {e}")
        addr = self._stage_offset(region, loop)
        if row_offset is not None:
            addr = b.add(addr, row_offset)
        lo = b.add(self.base_enc, b.ext64(b.shru(addr, c(4)), False))
        return b.or_(lo, c(to_i64(static), b.i64)), tile

    def _op_mma_wait(self, op: MmaWait, ctx: _Role) -> None:
        if not 0 <= op.pending <= 7:
            self._fail(f"wl.mma_wait pending = {op.pending}: wgmma.wait_group takes 0..7")
        wgmma.wait(op.pending)


class _GemmLowering(_Sm90Lowering):
    """The warp-specialized GEMM: one K loop per tile, C stored from the accumulator fragment (through smem and TMA,
    or directly)."""
    OPS = OPS
    OP_NAMES = WL_NAMES

    # ---- configuration: read and check the plan --------------------------------------------
    def _read_config(self) -> None:
        p, a = self.p, self.p.attrs
        if p.kind != "gemm":
            self._fail(f"kernel kind {p.kind!r} has no sm_90a lowering (only 'gemm')")
        for value, key, after in ((a.get("stages"), "stages", "wl-pipeline"), (p.threads, "threads", "wl-specialize"),
                                  (p.smem_bytes, "smem_bytes", "wl-plan-smem")):
            if value is None:
                self._fail(f"the kernel has no {key!r} attribute: run {after} (and the passes after it) first")
        if not p.barriers:
            self._fail("the kernel has no wl.mbarrier ops: run wl-plan-barriers first")
        self.BM, self.BN, self.BK = a["tile"]
        self.stages, self.threads, self.smem_bytes = a["stages"], p.threads, p.smem_bytes
        if a.get("acc_elem", "f32") != "f32":
            self._fail(f"acc_elem {a.get('acc_elem')!r}: only f32 accumulators are lowered")
        self.cluster = self._cluster(a)
        if self.WARPGROUP_ROLES and self.threads % self.T.warpgroup_threads:
            self._fail(f"threads = {self.threads} is not a whole number of warpgroups")
        if list(p.inputs) != ["a", "b"]:
            self._fail(f"inputs {list(p.inputs)}: the GEMM kernel takes exactly 'a' and 'b'")
        self.elem = p.inputs["a"].elem
        elems = {t.elem for t in p.inputs.values()} | {t.elem for t in p.outputs.values()}
        if self.elem not in ELEM_TYPES or elems != {self.elem}:
            self._fail(f"element types {sorted(elems)}: wgmma here takes one of {ELEM_TYPES} in and out")
        self.mma_m = self.T.mma_shapes[0].m[0]            # wgmma rows per warpgroup
        self.mma_k = self.T.mma_k_of(self.elem)           # K of one wgmma instruction
        # swap-AB (C^T = B^T A^T): the accumulator's rows run along N (block-n of them), its columns along M
        self.swap = bool(a.get("swap_ab", False))
        acc_rows, acc_cols = (self.BN, self.BM) if self.swap else (self.BM, self.BN)
        if self.swap and a.get("schedule", "grid") != "grid":
            self._fail(f"swap_ab with schedule {a.get('schedule')!r}: the swap-AB GEMM is lowered for the grid "
                       "schedule only")
        if acc_rows == self.mma_m or acc_cols <= 64:
            # one consumer warpgroup (256 threads), or a 64-column accumulator (32 registers a thread): without
            # .minnctapersm 1 ptxas 13.0 cannot tell the register count at entry, ignores setmaxnreg (C7508) and then
            # serializes every wgmma (C7520); tests/unit/test_assemble.py caught both for the 128 x 64 tile
            self.MIN_CTAS_PER_SM = 1

        # Grid: which CTA index walks which output dim, and by how much (the CTA tile origin).
        try:
            self.grid = tuple(rules.check(g) for g in a["grid"])
        except ValueError as e:
            self._fail(f"grid {a['grid']}: {e}")
        shown = [rules.text(g) for g in self.grid]
        if len(self.grid) != 3:
            self._fail(f"grid {shown} needs three rules")
        self.origin_axis = {}
        self.streamk = a.get("schedule", "grid") == "streamk"
        self.persistent = a.get("schedule", "grid") == "persistent" or self.streamk
        self.group_m = int(a.get("group_m", 1))      # the persistent walk's tile order (rules.tile_origin)
        if self.group_m not in rules.GROUP_M or (self.group_m > 1 and (not self.persistent or self.streamk)):
            self._fail(f"group_m = {self.group_m}: the tile order of a persistent (not stream-K) kernel, one of "
                       f"{', '.join(map(str, rules.GROUP_M))}")
        if self.streamk:
            if self.grid[0] != ("streamk", "M", self.BM, "N", self.BN, "K", self.BK, self.grid[0][-1]) or \
                    self.grid[1:] != (("const", 1), ("const", 1)) or self.WALK != "persistent":
                self._fail(f"grid {shown}: a stream-K kernel needs "
                           f"['streamk(M, {self.BM}, N, {self.BN}, K, {self.BK}, SMS)', '1', '1']")
        elif self.persistent:
            walk_m = self.BM * self.cluster_m
            if self.grid[0] != (self.WALK, "M", walk_m, "N", self.BN, self.grid[0][-1]) or \
                    self.grid[1:] != (("const", 1), ("const", 1)):
                self._fail(f"grid {shown}: a persistent kernel needs "
                           f"['{self.WALK}(M, {walk_m}, N, {self.BN}, SMS)', '1', '1']")
        for axis, rule in enumerate(self.grid if not self.persistent else ()):
            if rule[0] == "cdiv":
                self.origin_axis[rule[1]] = (axis, rule[2])
            elif rule != ("const", 1):
                self._fail(f"grid rule {shown[axis]!r}: grid dims other than cdiv rules and 1 have no tile meaning")
        extents = {} if self.persistent else {"M": self.BM, "N": self.BN}
        for dim, extent in extents.items():
            if dim not in self.origin_axis or self.origin_axis[dim][1] != extent:
                self._fail(f"grid {shown} must tile {dim} by {extent} (the kernel tile) on one axis")

        self._check_plan()

    # ---- the kernel ---------------------------------------------------------------------------
    WALK = "persistent"          # the persistent grid rule this lowering walks (runtime/rules.py)

    def _cluster(self, attrs) -> tuple[int, int, int]:
        """The kernel's thread-block cluster: none, or (2, 1, 1) when B is multicast: the two CTAs take the two
        block-m row halves of one tile of 2 x block-m rows (the walk persistent_pairs), and each loads half of the
        B tile both read, into both CTAs."""
        cluster = [int(d) for d in attrs.get("cluster", [1, 1, 1])]
        multicast = any(isinstance(o, Copy) and o.multicast for r in self.p.roles for o in r.walk())
        if cluster == [1, 1, 1] and not multicast:
            return (1, 1, 1)
        if cluster != [2, 1, 1] or not multicast or attrs.get("schedule") != "persistent":
            self._fail(f"cluster {cluster} ({'with' if multicast else 'without'} a multicast copy, schedule "
                       f"{attrs.get('schedule', 'grid')!r}): the sm_90a GEMM lowers clusters of [2, 1, 1] that "
                       "multicast B, persistent only; or no cluster")
        self.cluster_m, self.WALK = 2, "persistent_pairs"
        return (2, 1, 1)

    def _after_cta_barrier(self) -> None:
        """A cluster's CTAs meet once every barrier of each is initialised (and fenced for the cluster), before any
        multicast lands in, or any arrival reaches, another CTA."""
        if self.rank is not None:
            sync.cluster_barrier()

    def _roles(self) -> None:
        """The roles; a cluster's CTAs then meet again, so that neither exits while the other may still multicast
        into its smem or arrive on its barriers."""
        super()._roles()
        if self.rank is not None:
            sync.cluster_barrier()

    def _param_list(self) -> list[tuple[str, str]]:
        """Tensor maps by value (grid constants: a, b, and c when C leaves by TMA), then C as a global pointer when
        it is stored from registers, then (stream-K) the fix-up's workspace and counters, then M, N, K."""
        c_ptr = [] if "c" in self.tmaps else [("c", "ptr")]
        fixup = [(n, "ptr") for n in STREAMK_PARAMS] if self.streamk else []
        return [(n, "tensormap") for n in self.tmaps] + c_ptr + fixup + [(s, "i32") for s in ("M", "N", "K")]

    def _bind_args(self, args: dict) -> None:
        self.c_ptr = args.get("c")
        self.workspace, self.counters = args.get("workspace"), args.get("counters")
        self.M, self.N, self.K = (args[n] for n in ("M", "N", "K"))

    def _store_map(self, op: Store) -> TensorMapSpec:
        """C's TMA map (N, M innermost first): a box of one chunk's columns (one swizzle span) by one warpgroup's
        rows, so each consumer warpgroup stores its own rows."""
        if op.output != "c":
            self._fail(f"store of {op.output!r} through smem: the GEMM stages c only")
        tile = self.tiles[self._region(op.region).name]
        if tile.num_boxes != 1:
            self._fail(f"staging region {op.region!r} {tile.shape}: one chunk must be one TMA box wide")
        return TensorMapSpec(name="c", operand="c", dtype=self.elem, box=(tile.box[0], self.mma_m),
                             swizzle=tile.swizzle.bytes, dims=(tile.dims[1], tile.dims[0]))

    def _tensor_map(self, op: Copy) -> TensorMapSpec:
        """TMA descriptor of an input: its box and dims (innermost first) are the region's tile's (a multicast copy
        that splits each box's rows over the cluster: 1 / cluster of the rows, see `_multicast_share`)."""
        if op.source not in ("a", "b"):
            self._fail(f"async_load of operand {op.source!r}: only the inputs 'a' and 'b' are loaded")
        tile = self.tiles[self._region(op.region).name]
        box = tile.box
        if op.multicast and self._multicast_share(tile)[0] == "rows":
            box = (box[0], box[1] // self.cluster_m)
        return TensorMapSpec(name=op.source, operand=op.source, dtype=self.elem, box=box,
                             swizzle=tile.swizzle.bytes, dims=(tile.dims[1], tile.dims[0]))

    def _multicast_share(self, tile: SmemTile) -> tuple[str, int]:
        """How a multicast copy splits `tile` over the cluster's CTAs: ("boxes", n), each CTA loading n whole boxes
        (rank r: boxes r*n ..), when the boxes divide evenly; else ("rows", n), each CTA loading rows r*n .. of every
        box (a B [N, K] tile is one box of block-n rows). The rows of a box are whole 128-byte swizzle spans, so a
        slice starting at a multiple of the swizzle's 8-row repeat lands swizzled as the whole box would."""
        cm = self.cluster_m
        if tile.num_boxes % cm == 0:
            return "boxes", tile.num_boxes // cm
        rows = tile.box[1]
        if rows % (cm * 8):
            self._fail(f"a multicast copy of a tile of {tile.num_boxes} box(es) of {rows} rows cannot be split over "
                       f"{cm} CTAs (whole boxes, or a multiple of 8 rows each)")
        return "rows", rows // cm

    def _prologue(self) -> None:
        b, c = self.b, self.b.const
        self.tid = b.sreg("tid", "x", "tid")
        # CTA tile origins along M and N, from the grid rules (e.g. n0 = ctaid.x * 256);
        # a persistent kernel sets them per tile instead (see _tile_loop)
        self.origin = {}
        self.it_base, self.piece = None, None
        for dim in (("N", "M") if not self.persistent else ()):
            axis, extent = self.origin_axis[dim]
            cta = b.sreg("ctaid", CTAID[axis], "cta")
            self.origin[dim] = b.mul(cta, c(extent))
        self.rank = sync.cluster_rank(b) if self.cluster_m > 1 else None

        self._smem_base()
        # K-loop trip count, shared by every role: ceil(K / BK) tiles; TMA zero-fills the tail of the last
        trip = ("cdiv", "K", self.BK)
        for loop in (o for r in self.p.roles for o in r.walk() if isinstance(o, Loop)):
            if tuple(loop.trip) != trip:
                self._fail(f"k_loop trip {list(loop.trip)}: expected {list(trip)} (the kernel's K tiles)")
        self.trips = rules.evaluate(trip, {"K": self.K}, b)

        self._init_barriers()

    def _tile_loop(self, ops, ctx: _Role) -> None:
        """The role's ops, once (grid schedule) or once per tile of this CTA (persistent schedule), or once per piece
        of a tile in this CTA's run of iterations (stream-K)."""
        if not self.persistent:
            self._ops(ops, ctx)
            return
        if self.streamk:
            self._streamk_loop(ops, ctx)
            return
        b, c = self.b, self.b.const
        n_tiles, m_tiles = rules.tile_counts(self.grid[0], {"M": self.M, "N": self.N}, b)
        # a 2x1 cluster walks the tiles of 2 x block-m rows as one (cluster c takes tiles c, c + clusters, ...)
        first = b.sreg("clusterid" if self.rank is not None else "ctaid", "x", "cta")
        step = b.sreg("nclusterid" if self.rank is not None else "nctaid", "x", "ncta")
        tile_name = b.fresh("tile")
        with b.for_(first, b.mul(m_tiles, n_tiles), step, iv=tile_name) as loop:
            tile = loop.iv
            # every role of the CTA (and of its cluster) walks the same tiles in the same order, so ring iterations
            # (stage, phase) agree: this is the CTA's (tile - first) / step-th tile
            self.it_base = b.mul(b.divu(b.sub(tile, first), step), self.trips)
            self.origin = rules.tile_origin(self.grid[0], tile, n_tiles, b, self.group_m, m_tiles)
            if self.rank is not None:       # this CTA's block-m rows of the cluster's tile
                self.origin["M"] = b.add(self.origin["M"], b.mul(self.rank, c(self.BM)))
            self._ops(ops, ctx)
        self.it_base, self.origin = None, {}

    def _streamk_loop(self, ops, ctx: _Role) -> None:
        """Stream-K (rules, "stream-K"): first this CTA's data-parallel tiles cta, cta + P, ... below D, whole (D / P of
        them: ring iterations 0 .. D / P * kt); then its run [start, end) of the I = (T - D) kt stream-K iterations,
        tile by tile: for stream-K tile u from start / kt to (end - 1) / kt (tile D + u), its K tiles [lo, hi) in the
        run, at ring iteration D / P * kt + u * kt + kt_index - start, so every role's stages and phases agree."""
        b, c = self.b, self.b.const
        n_tiles, _ = rules.tile_counts(self.grid[0], {"M": self.M, "N": self.N}, b)
        cta = b.sreg("ctaid", "x", "cta")
        ctas = b.sreg("nctaid", "x", "ncta")
        tiles, _ = rules.streamk_tiles(self.grid[0], {"M": self.M, "N": self.N, "K": self.K}, b)
        dp = rules.streamk_dp_tiles(tiles, ctas, b)
        with b.for_(cta, dp, ctas, iv=b.fresh("tile")) as loop:       # data-parallel: whole tiles
            self.it_base = b.mul(b.divu(b.sub(loop.iv, cta), ctas), self.trips)
            self.origin = rules.tile_origin(self.grid[0], loop.iv, n_tiles, b)
            ctx.accs, ctx.acc_n = {}, {}
            self._ops(ops, ctx)
        dp_iters = b.mul(b.divu(dp, ctas), self.trips)                 # the ring iterations they took
        iters = b.mul(b.sub(tiles, dp), self.trips)
        start = rules.streamk_start(cta, ctas, iters, b)
        end = rules.streamk_start(b.add(cta, c(1)), ctas, iters, b)
        first = b.divu(start, self.trips)
        last = b.add(b.divu(b.sub(end, c(1)), self.trips), c(1))
        with b.for_(first, last, c(1), iv=b.fresh("sktile")) as loop:
            t0 = b.mul(loop.iv, self.trips)                 # the stream-K tile's first stream-K iteration
            lo = b.sub(b.maxs(start, t0), t0)               # never negative: indices stay below 2^31 (rules)
            hi = b.sub(b.mins(end, b.add(t0, self.trips)), t0)
            tile = b.add(dp, loop.iv)
            self.piece = _Piece(tile, t0, lo, hi, start, cta, ctas, iters)
            self.it_base = b.add(dp_iters, b.sub(t0, start))
            self.origin = rules.tile_origin(self.grid[0], tile, n_tiles, b)
            ctx.accs, ctx.acc_n = {}, {}
            self._ops(ops, ctx)
        self.it_base, self.origin, self.piece = None, {}, None

    # ---- ops ------------------------------------------------------------------------------
    def _check_gemm_loop(self, op: Loop, ctx: _Role) -> None:
        """A GEMM's K loop: not nested, not software-pipelined."""
        if ctx.loop is not None:
            self._fail("nested wl.k_loop")
        if op.first or op.last:
            self._fail("a software-pipelined wl.k_loop (first / last sections): the GEMM lowering has none")

    def _op_loop(self, op: Loop, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        self._check_gemm_loop(op, ctx)
        # The loop carries the accumulators its MMAs update (zero on entry).
        carried = []
        for mma in (o for o in op.body if isinstance(o, Mma)):
            name, n = mma.acc.name, mma.shape[1]
            if name not in ctx.accs:
                ctx.accs[name] = b.zero(wgmma.acc_type(b, n), "acc")
                ctx.acc_n[name] = n
            if name not in carried:
                carried.append(name)
        kt_name = b.fresh("kt")
        res_name = b.fresh("accf") if carried else None     # the accumulators after the loop
        arg_names = [b.fresh("acc_in") for _ in carried]
        outer = dict(ctx.accs)
        lo, hi = (c(0), self.trips) if self.piece is None else (self.piece.lo, self.piece.hi)
        with b.for_(lo, hi, c(1), iter_args=[ctx.accs[n] for n in carried], iv=kt_name,
                    args=arg_names, results=res_name) as loop:
            ctx.accs.update(zip(carried, loop.args))
            kt = loop.iv
            it = kt if self.it_base is None else b.add(self.it_base, kt)
            ctx.loop = self._loop_state(kt, it)
            self._ops(op.body, ctx)
            ctx.loop = None
            loop.yield_(*(ctx.accs[n] for n in carried))
        if carried:
            ctx.accs = outer
            ctx.accs.update(zip(carried, loop.results))

    def _k_origin(self, loop: _Loop) -> ir.Value:
        """First K index of this iteration's tile."""
        if "k0" not in loop.cache:
            loop.cache["k0"] = self.b.mul(loop.kt, self.b.const(self.BK))
        return loop.cache["k0"]

    def _coord_origin(self, dim: str, loop: _Loop) -> ir.Value | None:
        return self._k_origin(loop) if dim == "K" else self.origin[dim]

    def _op_mma(self, op: Mma, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
        if ctx.issue != "warpgroup":
            self._fail(f"wl.mma in role {ctx.name!r}: wgmma is issued by whole warpgroups")
        if op.lag:
            self._fail(f"wl.mma lag = {op.lag}: the GEMM's MMAs read their own iteration's stage")
        m, n, k = self._mma_shape(op)
        if op.a.source != "smem" or op.b.source != "smem" or op.acc.source != "regs":
            self._fail(f"wl.mma reads a from {op.a.source}, b from {op.b.source} into {op.acc.source}: this lowering "
                       "takes a and b from smem descriptors and accumulates in registers")
        a_reg, b_reg = self._region(op.a.name), self._region(op.b.name)
        a_tile, b_tile = self.tiles[a_reg.name], self.tiles[b_reg.name]
        # The smem tiles must be exactly what the wgmma reads: A = (warpgroups x m) x k, B = n x k, each in either
        # major-ness (A MN-major: a swap-AB GEMM's B [K, N] tile as the wgmma's A)
        n_wgs = ctx.role.warps * self.T.warp_size // self.T.warpgroup_threads
        (a_rows_dim,), (b_cols_dim,) = ([d for d in t.dims if d != op.k_dim] for t in (a_tile, b_tile))
        if dict(zip(a_tile.dims, a_tile.shape)) != {a_rows_dim: m * n_wgs, op.k_dim: k} or \
                dict(zip(b_tile.dims, b_tile.shape)) != {b_cols_dim: n, op.k_dim: k}:
            self._fail(f"wl.mma shape {list(op.shape)} does not match buffers {a_reg.name!r} {list(a_reg.shape)} "
                       f"and {b_reg.name!r} {list(b_reg.shape)} for {n_wgs} warpgroups")
        # each warpgroup reads its own m rows of A: the layout says where warpgroup 1's rows start
        a_rows = b.mul(ctx.wg_index, c(a_tile.sub_tile_offset(a_rows_dim, 1, m))) if n_wgs > 1 else None
        desc_a, _ = self._descriptor(a_reg, loop, a_rows)
        desc_b, _ = self._descriptor(b_reg, loop, None)
        # wgmma layouts: A <row> = K-major, <col> = MN-major (imm-trans-a); B <col> = K-major, <row> = MN-major
        a_major = "row" if a_tile.major(op.k_dim) == "K" else "col"
        b_major = "col" if b_tile.major(op.k_dim) == "K" else "row"
        acc = ctx.accs[op.acc.name]
        wgmma.fence()
        for kk in range(k // self.mma_k):
            # k-block kk starts k_block_offset bytes into each tile: the descriptor address counts 16-byte units
            da = desc_a if kk == 0 else b.add(desc_a, c(a_tile.k_block_offset(kk, self.mma_k) >> 4, b.i64))
            db = desc_b if kk == 0 else b.add(desc_b, c(b_tile.k_block_offset(kk, self.mma_k) >> 4, b.i64))
            acc = wgmma.mma_async(b, acc, da, db, (m, n, self.mma_k), self.elem, b_major, a_major)
        wgmma.commit()
        ctx.accs[op.acc.name] = acc

    def _op_store(self, op: Store, ctx: _Role) -> None:
        """Store a warpgroup's m64nN f32 fragment to C as the output element type: through the staging smem and TMA
        (`_store_staged`) when the plan gives the store a region, else from registers (`_store_direct`)."""
        if ctx.issue != "warpgroup" or ctx.loop is not None:
            self._fail(f"wl.store_tile in role {ctx.name!r} must follow the k_loop of a warpgroup role")
        if op.output != "c":
            self._fail(f"wl.store_tile of {op.output!r}: only the output 'c', per warpgroup")
        if op.value not in ctx.accs:
            self._fail(f"wl.store_tile reads accumulator {op.value!r}, which no wl.mma of role {ctx.name!r} writes")
        n = ctx.acc_n[op.value]
        if list(op.tile) != [self.mma_m, n]:
            self._fail(f"wl.store_tile tile {list(op.tile)} must be the fragment of the MMA, [{self.mma_m}, {n}]")
        if self.swap:
            if op.region is not None:
                self._fail("a swap-AB GEMM stores C^T's fragment transposed from registers; its store takes no "
                           f"staging region ({op.region!r}): build it with epilogue=direct")
            self._store_transposed(op, ctx)
        elif self.piece is not None:
            with self.b.if_(self._streamk_fixup(op, ctx)):
                self._store_staged(op, ctx)
        elif op.region is None:
            self._store_direct(op, ctx)
        else:
            self._store_staged(op, ctx)

    def _streamk_fixup(self, op: Store, ctx: _Role) -> ir.Value:
        """Stream-K: make ctx.accs[op.value] this warpgroup's rows of the whole tile and return whether to store them
        (i1, the same in every thread of the warpgroup).

        A whole tile (K tiles 0 .. kt in this CTA): its accumulator, stored. A partial piece: each thread writes its
        fragment rows that are inside M to the workspace slot (CTA, slot, warpgroup), slot 0 for the CTA's first
        piece and 1 for its last, as 16-byte vectors of 4 f32 at ((h * n/16 + j) * 128 + thread) * 16 bytes; the
        warpgroup syncs on its named barrier; its first thread fences (gpu scope) and adds 1 to the tile's counter
        (tile * warpgroups + warpgroup). The piece that brings the count to the tile's number of pieces is the last:
        its thread sets the counter back to 0 (ready for the next launch) and fences again, bar.red tells the
        warpgroup, and every thread sums the pieces' slots in K order (CTAs streamk_cta(t0) .. streamk_cta(t0 + kt -
        1)), starting from 0, so the sum does not depend on which CTA finished last. The others store nothing."""
        b, c = self.b, self.b.const
        pc, n = self.piece, ctx.acc_n[op.value]
        acc = ctx.accs[op.value]
        nb = self.p.named_barriers.get(op.barrier) if op.barrier else None
        threads = self.T.warpgroup_threads
        if nb is None or nb.threads != threads:
            self._fail(f"the stream-K fix-up syncs each consumer warpgroup on the store's named barrier; "
                       f"{op.barrier!r} is not one of {threads} threads")
        n_wgs = ctx.role.warps * self.T.warp_size // threads
        f32x4 = ir.VectorType.get([4], b.f32)
        per_row = n // 16                                     # 4-value vectors of one fragment row half
        lane = b.remu(self.tid, c(self.T.warp_size))
        warp = b.divu(ctx.thread_in_wg, c(self.T.warp_size))
        row0 = b.add(b.add(self.origin["M"], b.mul(ctx.wg_index, c(self.mma_m))),
                     b.add(b.mul(warp, c(16)), b.divu(lane, c(4))))
        row_ok = [b.cmp("slt", b.add(row0, c(8 * h)), self.M) for h in range(2)]

        def vector_at(h: int, j: int) -> list[int]:     # the fragment registers of vector j of row half h
            return [4 * (2 * j + q) + 2 * h + e for q in range(2) for e in range(2)]

        def slot_ptr(cta: ir.Value) -> ir.Value:
            """This thread's first f32 of CTA `cta`'s slot for this tile and warpgroup."""
            slot = b.select(b.cmp("ule", pc.t0, rules.streamk_start(cta, pc.ctas, pc.iters, b)), c(0), c(1))
            index = b.add(b.mul(cta, c(STREAMK_SLOTS)), slot)
            floats = b.add(b.mul(b.add(b.mul(index, c(n_wgs)), ctx.wg_index), c(self.mma_m * n)),
                           b.mul(ctx.thread_in_wg, c(4)))
            return b.gep(self.workspace, floats, b.f32)

        whole = b.and_(b.cmp("eq", pc.lo, c(0)), b.cmp("eq", pc.hi, self.trips))
        then, orelse, (total, store) = b.if_values(whole, [acc.type, b.i1])
        with then as out:
            out += [acc, b.const(1, b.i1)]
        with orelse as out:
            mine = slot_ptr(pc.cta)
            for h in range(2):
                with b.if_(row_ok[h]):
                    for j in range(per_row):
                        v = b.undef(f32x4)
                        for e, r in enumerate(vector_at(h, j)):
                            v = b.insertelement(v, b.extractvalue(acc, r, b.f32, "f"), c(e))
                        b.store(v, b.gep(mine, (h * per_row + j) * threads * 4, b.f32), alignment=16)
            bar = b.add(c(nb.id), ctx.wg_index)
            first, pieces = self._streamk_ctas(pc.t0, self.trips, pc.ctas, pc.iters)
            reduce = self._streamk_hand_off(ctx, b.add(b.mul(pc.tile, c(n_wgs)), ctx.wg_index), pieces, bar)
            sum_then, sum_else, (summed,) = b.if_values(reduce, [acc.type])
            with sum_then as out2:
                with b.for_(first, b.add(first, pieces), c(1), iter_args=[b.zero(acc.type, "acc")],
                            iv=b.fresh("piece"), results=b.fresh("sum")) as loop:
                    part, = loop.args
                    src = slot_ptr(loop.iv)
                    for h in range(2):
                        got, skip, vecs = b.if_values(row_ok[h], [f32x4] * per_row)
                        with got as vals:
                            vals += [b.load(f32x4, b.gep(src, (h * per_row + j) * threads * 4, b.f32), 16, "part")
                                     for j in range(per_row)]
                        with skip as vals:
                            vals += [b.zero(f32x4)] * per_row
                        for j, v in enumerate(vecs):
                            for e, r in enumerate(vector_at(h, j)):
                                x = b.addf(b.extractvalue(part, r, b.f32, "f"), b.extractelement(v, e))
                                part = b.insertvalue(part, x, r)
                    loop.yield_(part)
                out2.append(loop.results[0])
            with sum_else as out2:
                out2.append(acc)
            out += [summed, reduce]
        ctx.accs[op.value] = total
        return store

    def _pack_pair(self, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """Two f32 values as one i32 holding the pair in the output type (cvt.rn.{ty}x2.f32), lo first."""
        b, c = self.b, self.b.const
        ty = {"bf16": ir.BF16Type, "f16": ir.F16Type}[self.elem].get()
        u = b.insertelement(b.undef(ir.VectorType.get([2], b.f32)), lo, c(0))
        u = b.insertelement(u, hi, c(1))
        return b.fptrunc(u, ir.VectorType.get([2], ty))

    def _store_staged(self, op: Store, ctx: _Role) -> None:
        """C through smem and TMA, one chunk of columns (one 128-byte swizzle span) at a time, the staging region's
        two buffers in turn. Per chunk: the warpgroup's first thread waits until the buffer's last TMA store has
        read it (wait_group.read 1, or 0 at a tile's first chunk: the previous tile's stores may use either
        buffer), the warpgroup syncs on its named barrier, each thread writes its fragment's pairs of the chunk
        (one 4-byte st.shared each, at the swizzled address of the layout) into the warpgroup's 64 rows, fences
        them for the async proxy, the warpgroup syncs again, and the first thread TMA-stores the 64 x 64 box at
        (n0 + 64 j, m0 + 64 w) and commits it. The tensor map drops rows past M and columns past N."""
        b, c = self.b, self.b.const
        n = ctx.acc_n[op.value]
        staging = self._region(op.region)
        tile = self.tiles[staging.name]
        rows, cols = tile.shape
        nb = self.p.named_barriers.get(op.barrier) if op.barrier else None
        n_wgs = ctx.role.warps * self.T.warp_size // self.T.warpgroup_threads
        if rows != n_wgs * self.mma_m or n % cols or staging.stages != 2 or tile.num_boxes != 1:
            self._fail(f"staging region {staging.name!r} ({staging.stages} x {list(tile.shape)}): expected 2 chunks "
                       f"of [{n_wgs * self.mma_m}, one swizzle span] with the span dividing {n}")
        if nb is None or nb.count != n_wgs or nb.threads != self.T.warpgroup_threads:
            self._fail(f"wl.store_tile syncs on {op.barrier!r}: a named barrier of {self.T.warpgroup_threads} "
                       f"threads per consumer warpgroup ({n_wgs})")
        res = ctx.accs[op.value]
        vals = [b.extractvalue(res, i, b.f32, "f") for i in range(n // 2)]
        lane = b.remu(self.tid, c(self.T.warp_size))
        warp = b.divu(ctx.thread_in_wg, c(self.T.warp_size))
        wg_row = b.mul(ctx.wg_index, c(self.mma_m))
        elem_bytes = tile.elem_bits // 8
        col_byte = b.mul(b.mul(b.remu(lane, c(4)), c(2)), c(elem_bytes))     # the thread's pair in each 8 columns
        row_at = []
        for h in range(2):     # the thread's rows r0 and r0 + 8 of the tile, as byte offsets of their first pair
            row = b.add(wg_row, b.add(b.add(b.mul(warp, c(16)), b.divu(lane, c(4))), c(8 * h)))
            row_at.append(b.add(b.mul(row, c(tile.span)), col_byte))
        chunk_bytes = staging.size // staging.stages
        bar = b.add(c(nb.id), ctx.wg_index)
        m0, n0 = self.origin["M"], self.origin["N"]
        wg_src = b.mul(wg_row, c(tile.span))
        for j in range(n // cols):
            with b.if_(ctx.wg_leader):          # the buffer's last store has read it
                tma.bulk_wait_group(0 if j == 0 else 1, read=True)
            sync.named_barrier_sync(b, bar, nb.threads)
            base = staging.offset + (j % staging.stages) * chunk_bytes
            for q in range(cols // 8):          # fragment columns 8q .. 8q + 7 of the chunk: registers of j8 = 8j/8 + q
                j8 = j * cols // 8 + q
                for h in range(2):
                    at = tile.swizzle.apply_with(b, b.add(row_at[h], c(8 * q * elem_bytes)))
                    pair = self._pack_pair(vals[4 * j8 + 2 * h], vals[4 * j8 + 2 * h + 1])
                    b.store(b.bitcast(pair, b.i32), b.gep(self.base, b.add(at, c(base))), alignment=4)
            sync.fence_proxy_async_smem()       # the writes, for the TMA store's async reads
            sync.named_barrier_sync(b, bar, nb.threads)
            with b.if_(ctx.wg_leader):
                src = b.gep(self.base, b.add(wg_src, c(base)))
                tma.tma_store(b, self.tmap_args["c"], src, [b.add(n0, c(j * cols)), b.add(m0, wg_row)])
                tma.bulk_commit_group()

    def _store_direct(self, op: Store, ctx: _Role) -> None:
        """Store a warpgroup's m64nN f32 fragment to C (row-major [M, N]) from registers.

        Fragment (warploom.layout.fragments.wgmma_accumulator): warp w owns rows 16w..16w+15; lane l:
        r0 = 16w + l/4; register 4j+2h+e holds (r0 + 8h, 8j + 2(l%4) + e). Fast path (the warpgroup's whole
        64 x N slice in bounds, N even): pairs packed to one 4-byte store. Otherwise one guarded 2-byte store
        per element.
        """
        b, c = self.b, self.b.const
        n = ctx.acc_n[op.value]
        res = ctx.accs[op.value]
        ty = {"bf16": ir.BF16Type, "f16": ir.F16Type}[self.elem].get()
        pair_f32, pair_ty = ir.VectorType.get([2], b.f32), ir.VectorType.get([2], ty)
        m0, n0 = self.origin["M"], self.origin["N"]
        warp_in_wg = b.divu(ctx.thread_in_wg, c(self.T.warp_size))
        lane = b.remu(self.tid, c(self.T.warp_size))
        wg_row0 = b.add(m0, b.mul(ctx.wg_index, c(self.mma_m)))
        row0 = b.add(wg_row0, b.add(b.mul(warp_in_wg, c(16)), b.divu(lane, c(4))))
        col0 = b.add(n0, b.mul(b.remu(lane, c(4)), c(2)))
        vals = [b.extractvalue(res, i, b.f32, "f") for i in range(n // 2)]
        n64 = b.ext64(self.N)
        rows = [row0, b.add(row0, c(8))]
        col64 = b.ext64(col0)
        rowptr = [b.gep(self.c_ptr, b.add(b.mul(b.ext64(r), n64), col64), ty) for r in rows]
        in_m = b.cmp("sle", b.add(wg_row0, c(self.mma_m)), self.M)
        in_n = b.cmp("sle", b.add(n0, c(n)), self.N)
        n_even = b.cmp("eq", b.and_(self.N, c(1)), c(0))   # 4-byte alignment of the packed pairs
        fast = b.and_(b.and_(in_m, in_n), n_even)
        then, orelse = b.if_else(fast)
        with then:
            for j in range(n // 8):
                for h in range(2):
                    u = b.undef(pair_f32)
                    u = b.insertelement(u, vals[4 * j + 2 * h], c(0))
                    u = b.insertelement(u, vals[4 * j + 2 * h + 1], c(1))
                    pair = b.fptrunc(u, pair_ty)   # cvt.rn.{ty}x2.f32
                    b.store(pair, b.gep(rowptr[h], 8 * j, ty), alignment=4)
        with orelse:
            row_ok = [b.cmp("slt", r, self.M) for r in rows]
            for j in range(n // 8):
                for e in range(2):
                    col_ok = b.cmp("slt", b.add(col0, c(8 * j + e)), self.N)
                    for h in range(2):
                        with b.if_(b.and_(row_ok[h], col_ok)):
                            v = b.truncf(vals[4 * j + 2 * h + e], ty)
                            b.store(v, b.gep(rowptr[h], 8 * j + e, ty), alignment=2)

    def _store_transposed(self, op: Store, ctx: _Role) -> None:
        """swap-AB: store a warpgroup's m64nN f32 fragment of C^T (rows along N, columns along M) to C (row-major
        [M, N]) from registers, transposed.

        Fragment register 4j+2h+e of lane l in warp w holds C^T (r, q) with r = 16w + l/4 + 8h and q = 8j + 2(l%4) +
        e, i.e. C[m0 + q, n0 + 64 wg + r]. Its two columns q, q + 1 are two rows of C, so each value is one
        2-byte store, guarded by row < M and column < N; the lanes of a quad-column (l%4 alike) write 8 adjacent
        elements of one row of C."""
        b, c = self.b, self.b.const
        n = ctx.acc_n[op.value]
        res = ctx.accs[op.value]
        ty = {"bf16": ir.BF16Type, "f16": ir.F16Type}[self.elem].get()
        m0, n0 = self.origin["M"], self.origin["N"]
        warp_in_wg = b.divu(ctx.thread_in_wg, c(self.T.warp_size))
        lane = b.remu(self.tid, c(self.T.warp_size))
        col0 = b.add(b.add(n0, b.mul(ctx.wg_index, c(self.mma_m))),
                     b.add(b.mul(warp_in_wg, c(16)), b.divu(lane, c(4))))    # C's column of fragment row r0
        row0 = b.add(m0, b.mul(b.remu(lane, c(4)), c(2)))                   # C's row of fragment column q0
        vals = [b.extractvalue(res, i, b.f32, "f") for i in range(n // 2)]
        n64 = b.ext64(self.N)
        cols = [col0, b.add(col0, c(8))]
        col_ok = [b.cmp("slt", col, self.N) for col in cols]
        for j in range(n // 8):
            for e in range(2):
                row = b.add(row0, c(8 * j + e))
                row_ptr = b.gep(self.c_ptr, b.mul(b.ext64(row), n64), ty)
                row_ok = b.cmp("slt", row, self.M)
                for h in range(2):
                    with b.if_(b.and_(row_ok, col_ok[h])):
                        v = b.truncf(vals[4 * j + 2 * h + e], ty)
                        b.store(v, b.gep(row_ptr, b.ext64(cols[h]), ty), alignment=2)
