"""sm_90a (Hopper) lowering: a planned `wl.kernel` -> one `gpu.module` of NVVM/LLVM ops, plus launch data.

Input: a kernel after wl-plan-barriers, read with `read_kernel` (see
warploom/dialect/kernel_ir.py). Everything the code depends on comes from that
program: tile sizes, stages and threads from the kernel attributes; warp roles
and register budgets from `wl.role`; smem offsets, sizes and swizzle from
`wl.buffer`; barrier offsets, counts, arrivals and tx bytes from `wl.mbarrier`.
Nothing is recomputed here: the plan is the single source, and the lowering
refuses (ValueError) what it cannot express instead of guessing.

Output (`LoweredKernel`): one `gpu.module @<name>_mod [#nvvm.target<chip = "sm_90a", ...>]`
holding the dynamic-smem global and the `llvm.func @<name>` kernel, built with
the `mlir.dialects` builders through `warploom.lowering.emit` (typed and verified
as it is built, never formatted as text) in the caller's context, and the
runtime contract (params, tensor maps, grid rules, block, cluster, smem bytes).
`warploom.lowering.ptx` turns the module into PTX, `assemble` into a cubin.

Code shape (hardware-checked in /work/proto_sm90/gemm_sm90.py, whose numerics
and descriptor constants are kept exactly):
  prologue   tid, CTA tile origins, the dynamic smem base rounded up to 1024 B,
             thread 0 initialises every mbarrier, fence + bar.sync (all threads);
  roles      `scf.if` on the warpgroup index; each role runs setmaxnreg, then
             its ops in order: k_loop -> scf.for (stage = i % S, phase = (i/S)&1),
             wait -> mbarrier.try_wait.parity, arrive_expect_tx, async_load ->
             cp.async.bulk.tensor (TMA), mma -> wgmma.mma_async on smem
             descriptors, mma_wait -> wgmma.wait_group, arrive -> mbarrier.arrive,
             store_tile -> the accumulator fragment stored to global memory.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from mlir import ir

from warploom.dialect import make_context
from warploom.dialect.kernel_ir import KernelProgram, KOp
from warploom.lowering import emit
from warploom.lowering.emit import sync, tma, wgmma
from warploom.lowering.emit.nobuilder import llvm_array, nvvm_target
from warploom.runtime.artifact import ParamSpec, TensorMapSpec

TARGET = ("sm_90a", "+ptx80", 3)      # #nvvm.target: chip, PTX features, LLVM -O level
ELEM_TYPES = ("bf16", "f16")          # wgmma f16-family inputs with f32 accumulation
ELEM_BYTES = 2
SWIZZLE_BYTES = 128                   # TMA box rows and wgmma descriptors use the 128B swizzle
SWIZZLE_REPEAT = 1024                 # 8 rows x 128 B: tiles at multiples of this have base_offset 0
THREADS_PER_WARPGROUP = 128
REGISTER_FILE = 65536
MMA_M = 64                            # wgmma rows per warpgroup
MMA_K = 16                            # wgmma k per instruction for 16-bit inputs
MBARRIER_BYTES = 8
WAIT_TICKS = 0x989680                 # try_wait suspend-time hint (CUTLASS's value)
TMAP_BYTES, TMAP_ALIGN = 128, 64     # a CUtensorMap, passed by value as a grid constant
CTAID = ("x", "y", "z")

# The logical dims of each GEMM operand, outermost first; the last dim is contiguous in memory.
OPERAND_DIMS = {"kn": {"a": ("M", "K"), "b": ("K", "N"), "c": ("M", "N")},
                "nk": {"a": ("M", "K"), "b": ("N", "K"), "c": ("M", "N")}}



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


def kernel_name(program: KernelProgram) -> str:
    """wl_gemm_{elem}_{b_layout}_{BM}x{BN}x{BK}_s{stages}[_persistent]: the name wl-lower-sm90 gives a kernel."""
    bm, bn, bk = program.attrs["tile"]
    elem = program.inputs[0].elem
    sched = "_persistent" if program.attrs.get("schedule", "grid") == "persistent" else ""
    return f"wl_gemm_{elem}_{program.attrs.get('b_layout', '?')}_{bm}x{bn}x{bk}_s{program.attrs.get('stages', '?')}{sched}"


def lower_kernel(program: KernelProgram, name: str, context: ir.Context | None = None) -> LoweredKernel:
    """Lower a planned GEMM kernel; ValueError names what cannot be lowered and why.

    The gpu.module is built in `context` (the one of the module being lowered; a fresh one
    when left out), inside a module of its own (`LoweredKernel.holder`) that a pass may move it out of."""
    return _GemmLowering(program, name).lower(context or make_context())


# ---- small helpers -----------------------------------------------------------------------------

def parse_rule(text: str, where: str) -> tuple:
    """'cdiv(N, 256)' -> ("cdiv", "N", 256); '1' -> ("const", 1)."""
    text = str(text).strip()
    if re.fullmatch(r"\d+", text):
        return ("const", int(text))
    m = re.fullmatch(r"cdiv\(\s*(\w+)\s*,\s*(\d+)\s*\)", text)
    if m:
        return ("cdiv", m.group(1), int(m.group(2)))
    m = re.fullmatch(r"persistent\(\s*(\w+)\s*,\s*(\d+)\s*,\s*(\w+)\s*,\s*(\d+)\s*,\s*(\w+)\s*\)", text)
    if m:
        return ("persistent", m.group(1), int(m.group(2)), m.group(3), int(m.group(4)), m.group(5))
    raise ValueError(f"{where} {text!r} is not a rule the sm_90a lowering knows ('cdiv(SIZE, n)', "
                     "'persistent(M, bm, N, bn, SMS)' or an integer)")


def desc_hi_bits(lbo_bytes: int, sbo_bytes: int, swizzle: int = 1, base_offset: int = 0) -> int:
    """The constant bits of a Hopper wgmma smem matrix descriptor (PTX ISA "Matrix Descriptor Format"):
    [16,30) LBO >> 4, [32,46) SBO >> 4, [49,52) base offset, [62,64) swizzle (1 = 128B).
    The start address field [0,14) = (addr & 0x3FFFF) >> 4 is added at run time."""
    assert lbo_bytes % 16 == 0 and sbo_bytes % 16 == 0
    v = ((lbo_bytes >> 4) & 0x3FFF) << 16
    v |= ((sbo_bytes >> 4) & 0x3FFF) << 32
    v |= (base_offset & 7) << 49
    v |= (swizzle & 3) << 62
    return v


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


@dataclass
class _Role:
    """What the ops of one role share while they are emitted."""
    name: str
    first_wg: int
    issue: str                      # "one_thread" | "warpgroup"
    wg_index: ir.Value | None = None       # warpgroup index inside the role (i32)
    thread_in_wg: ir.Value | None = None
    wg_leader: ir.Value | None = None      # thread 0 of each warpgroup (i1)
    loop: _Loop | None = None
    accs: dict | None = None        # accumulator name -> SSA value holding it now
    acc_n: dict | None = None       # accumulator name -> wgmma n


class _GemmLowering:
    def __init__(self, program: KernelProgram, name: str):
        self.p = program
        self.name = name
        self._read_config()

    # ---- configuration: read and check the plan --------------------------------------------
    def _fail(self, msg: str):
        raise ValueError(f"sm_90a lowering of kernel {self.name!r}: {msg}")

    def _read_config(self) -> None:
        a = self.p.attrs
        if a.get("kind") != "gemm":
            self._fail(f"kernel kind {a.get('kind')!r} has no sm_90a lowering (only 'gemm')")
        for key, after in (("stages", "wl-pipeline"), ("threads", "wl-specialize"), ("smem_bytes", "wl-plan-smem")):
            if key not in a:
                self._fail(f"the kernel has no {key!r} attribute: run {after} (and the passes after it) first")
        if not self.p.barriers:
            self._fail("the kernel has no wl.mbarrier ops: run wl-plan-barriers first")
        self.BM, self.BN, self.BK = a["tile"]
        self.stages, self.threads, self.smem_bytes = a["stages"], a["threads"], a["smem_bytes"]
        self.b_layout = a.get("b_layout")
        if self.b_layout not in OPERAND_DIMS:
            self._fail(f"b_layout {self.b_layout!r}: the sm_90a GEMM takes 'kn' or 'nk'")
        self.dims = OPERAND_DIMS[self.b_layout]
        if a.get("acc_elem", "f32") != "f32":
            self._fail(f"acc_elem {a.get('acc_elem')!r}: only f32 accumulators are lowered")
        if list(a.get("cluster", [1, 1, 1])) != [1, 1, 1]:
            self._fail(f"cluster {a.get('cluster')}: thread-block clusters are not lowered yet; use [1, 1, 1]")
        if self.threads % THREADS_PER_WARPGROUP:
            self._fail(f"threads = {self.threads} is not a whole number of warpgroups")
        self.elem = self.p.inputs[0].elem
        elems = {t.elem for t in self.p.inputs} | {self.p.result.elem}
        if self.elem not in ELEM_TYPES or elems != {self.elem}:
            self._fail(f"element types {sorted(elems)}: wgmma here takes one of {ELEM_TYPES} in and out")
        if list(self.p.input_names) != ["a", "b"]:
            self._fail(f"inputs {self.p.input_names}: the GEMM kernel takes exactly 'a' and 'b'")

        # Grid: which CTA index walks which output dim, and by how much (the CTA tile origin).
        self.grid = tuple(parse_rule(g, "grid rule") for g in a["grid"])
        if len(self.grid) != 3:
            self._fail(f"grid {a['grid']} needs three rules")
        self.origin_axis = {}
        self.persistent = a.get("schedule", "grid") == "persistent"
        if self.persistent:
            if self.grid[0] != ("persistent", "M", self.BM, "N", self.BN, self.grid[0][-1]) or \
                    self.grid[1:] != (("const", 1), ("const", 1)):
                self._fail(f"grid {a['grid']}: a persistent kernel needs "
                           f"['persistent(M, {self.BM}, N, {self.BN}, SMS)', '1', '1']")
        for axis, rule in enumerate(self.grid if not self.persistent else ()):
            if rule[0] == "cdiv":
                self.origin_axis[rule[1]] = (axis, rule[2])
            elif rule[1] != 1:
                self._fail(f"grid rule {a['grid'][axis]!r}: constant grid dims other than 1 have no tile meaning")
        extents = {} if self.persistent else {"M": self.BM, "N": self.BN}
        for dim, extent in extents.items():
            if dim not in self.origin_axis or self.origin_axis[dim][1] != extent:
                self._fail(f"grid {a['grid']} must tile {dim} by {extent} (the kernel tile) on one axis")

        # Roles: together they must cover every warpgroup exactly once.
        wgs = sorted(w for r in self.p.roles for w in r.attrs["warpgroups"])
        if wgs != list(range(self.threads // THREADS_PER_WARPGROUP)):
            self._fail(f"roles cover warpgroups {wgs}; {self.threads} threads need each of "
                       f"0..{self.threads // THREADS_PER_WARPGROUP - 1} exactly once")
        used = sum(THREADS_PER_WARPGROUP * len(r.attrs["warpgroups"]) * r.attrs["regs"] for r in self.p.roles)
        if used > REGISTER_FILE:
            self._fail(f"role register budgets need {used} registers; the register file holds {REGISTER_FILE}")
        # What every thread gets at launch (ptxas allocates the file evenly, in units of 8);
        # setmaxnreg then moves registers from roles below it to roles above it.
        self.launch_regs = REGISTER_FILE // self.threads // 8 * 8

        for buf in self.p.buffers.values():
            if "offset" not in buf:
                self._fail(f"buffer {buf['name']!r} has no offset: run wl-plan-smem first")
        for bar in self.p.barriers.values():
            if "offset" not in bar or bar["offset"] % MBARRIER_BYTES:
                self._fail(f"mbarrier ring {bar['name']!r} needs an 8-byte aligned offset (run wl-plan-barriers)")
        # The kernel rounds the dynamic smem base up to 1024 B at run time (up to 1023 B lost),
        # so the launch must ask for the plan's end plus that much.
        end = max([b["offset"] + b["bytes"] for b in self.p.buffers.values()]
                  + [r["offset"] + MBARRIER_BYTES * r["count"] for r in self.p.barriers.values()])
        if self.smem_bytes < end + SWIZZLE_REPEAT - 1:
            self._fail(f"smem_bytes = {self.smem_bytes} does not cover the plan's {end} B plus "
                       f"{SWIZZLE_REPEAT - 1} B for the run-time {SWIZZLE_REPEAT} B alignment of the base")

    def _buffer(self, name: str) -> dict:
        buf = self.p.buffers.get(name)
        if buf is None:
            self._fail(f"no wl.buffer named {name!r}")
        return buf

    def _stage_bytes(self, buf: dict) -> int:
        if buf["bytes"] % buf["stages"]:
            self._fail(f"buffer {buf['name']!r}: {buf['bytes']} bytes do not split into {buf['stages']} stages")
        return buf["bytes"] // buf["stages"]

    def _swizzled_tile(self, buf: dict, operand: str) -> tuple[str, str, int, int]:
        """Check a TMA/wgmma tile buffer; return (row dim, contiguous dim, rows, 128-byte column chunks)."""
        rows_dim, cols_dim = self.dims[operand]
        rows, cols = buf["shape"]
        if buf["swizzle"] != SWIZZLE_BYTES or buf["elem"] != self.elem:
            self._fail(f"buffer {buf['name']!r} must be {self.elem} with the {SWIZZLE_BYTES}B swizzle, "
                       f"got {buf['elem']} swizzle {buf['swizzle']}")
        if (cols * ELEM_BYTES) % SWIZZLE_BYTES or rows % 8:
            self._fail(f"buffer {buf['name']!r} tile {rows}x{cols}: rows must be a multiple of 8 and the "
                       f"contiguous dim a multiple of {SWIZZLE_BYTES} bytes")
        if buf["offset"] % SWIZZLE_REPEAT or self._stage_bytes(buf) % SWIZZLE_REPEAT:
            self._fail(f"buffer {buf['name']!r} (offset {buf['offset']}) and its stages must be "
                       f"{SWIZZLE_REPEAT}-byte aligned so wgmma descriptors can use base offset 0")
        return rows_dim, cols_dim, rows, cols * ELEM_BYTES // SWIZZLE_BYTES

    def _ring(self, name: str) -> dict:
        bar = self.p.barriers.get(name)
        if bar is None:
            self._fail(f"no wl.mbarrier ring named {name!r}")
        return bar

    # ---- the kernel ---------------------------------------------------------------------------
    def lower(self, context: ir.Context) -> LoweredKernel:
        self.tmaps: dict[str, TensorMapSpec] = {}
        for op in (o for r in self.p.roles for o in r.walk() if o.kind == "async_load"):
            self.tmaps.setdefault(op.attrs["operand"], self._tensor_map(op))
        if sorted(self.tmaps) != sorted(self.p.input_names):
            self._fail(f"async loads cover inputs {sorted(self.tmaps)}; the kernel needs one per input "
                       f"{self.p.input_names} (each input is read through its TMA tensor map)")
        self.tmaps = {n: self.tmaps[n] for n in self.p.input_names}     # params in input order
        with context, ir.Location.unknown():
            holder = ir.Module.create()
            self.b = self._kernel_function(holder.body)
            with self.b.at_body():
                self._prologue()
                self._roles()
            gpu_module = self.b.module.operation
            gpu_module.verify()
        params = ([ParamSpec(n, "tensormap") for n in self.tmaps] + [ParamSpec("c", "ptr")]
                  + [ParamSpec(s, "i32") for s in ("M", "N", "K")])
        return LoweredKernel(name=self.name, gpu_module=gpu_module, params=params,
                             tensor_maps=dict(self.tmaps), block=(self.threads, 1, 1), cluster=(1, 1, 1),
                             grid=self.grid, smem_bytes=self.smem_bytes, holder=holder)

    def _kernel_function(self, block: ir.Block) -> emit.Builder:
        """gpu.module @<name>_mod holding the dynamic-smem global and the kernel's llvm.func (empty body):
        tensor maps by value (grid constants), then C (global pointer), then M, N, K."""
        ptr, i8, i32 = emit.ptr_type, ir.IntegerType.get_signless(8), ir.IntegerType.get_signless(32)
        tmap_attrs = {"llvm.byval": ir.TypeAttr.get(llvm_array(TMAP_BYTES, i8)),
                      "nvvm.grid_constant": ir.UnitAttr.get(),
                      "llvm.align": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), TMAP_ALIGN)}
        args = [ptr()] * len(self.tmaps) + [ptr(1), i32, i32, i32]
        names = [f"tmap_{n}" for n in self.tmaps] + ["c", "M", "N", "K"]
        b = emit.Builder.kernel_module(
            block, f"{self.name}_mod", self.name, nvvm_target(*TARGET), args,
            [tmap_attrs] * len(self.tmaps) + [{}] * 4, names,
            # nvvm.maxntid: ptxas honours setmaxnreg only when the kernel declares its block size
            {"nvvm.kernel": ir.UnitAttr.get(), "nvvm.maxntid": ir.DenseI32ArrayAttr.get([self.threads, 1, 1])},
            # extern .shared .align 1024: the base is also rounded up at run time (see _prologue)
            smem=(self.smem_symbol, SWIZZLE_REPEAT))
        self.tmap_args = dict(zip(self.tmaps, b.args))
        self.c_ptr, self.M, self.N, self.K = b.args[len(self.tmaps):]
        return b

    @property
    def smem_symbol(self) -> str:
        return f"{self.name}_smem"

    def _tensor_map(self, op: KOp) -> TensorMapSpec:
        """TMA descriptor for an operand: dims innermost first, one box = 128 B of the contiguous dim x rows."""
        operand = op.attrs["operand"]
        if operand not in ("a", "b"):
            self._fail(f"async_load of operand {operand!r}: only the inputs 'a' and 'b' are loaded")
        rows_dim, cols_dim, rows, _ = self._swizzled_tile(self._buffer(op.attrs["buffer"]), operand)
        return TensorMapSpec(name=operand, operand=operand, dtype=self.elem,
                             box=(SWIZZLE_BYTES // ELEM_BYTES, rows), swizzle=SWIZZLE_BYTES,
                             dims=(cols_dim, rows_dim))

    def _prologue(self) -> None:
        b, c = self.b, self.b.const
        self.tid = b.sreg("tid", "x", "tid")
        # CTA tile origins along M and N, from the grid rules (e.g. n0 = ctaid.x * 256);
        # a persistent kernel sets them per tile instead (see _tile_loop)
        self.origin = {}
        self.it_base = None
        for dim in (("N", "M") if not self.persistent else ()):
            axis, extent = self.origin_axis[dim]
            cta = b.sreg("ctaid", CTAID[axis], "cta")
            self.origin[dim] = b.mul(cta, c(extent))

        # Dynamic smem base rounded up to 1024 B, so 128B-swizzled tiles start on a swizzle repeat.
        raw = b.addressof(self.smem_symbol, b.ptr(3), "smem")
        raw_i = b.ptrtoint(raw, b.i32)
        aligned = b.and_(b.add(raw_i, c(SWIZZLE_REPEAT - 1)), c(-SWIZZLE_REPEAT))
        self.base = b.gep(raw, b.sub(aligned, raw_i))
        base_i64 = b.ptrtoint(self.base, b.i64)
        # wgmma descriptors hold the shared-window address as (addr & 0x3FFFF) >> 4
        self.base_enc = b.shru(b.and_(base_i64, c(0x3FFFF, b.i64)), c(4, b.i64))
        # K-loop trip count, shared by every role: ceil(K / BK) tiles; TMA zero-fills the tail of the last
        for loop in (o for r in self.p.roles for o in r.walk() if o.kind == "k_loop"):
            rule = parse_rule(loop.attrs["trip"], "k_loop trip")
            if rule != ("cdiv", "K", self.BK):
                self._fail(f"k_loop trip {loop.attrs['trip']!r}: expected 'cdiv(K, {self.BK})' (the kernel's K tiles)")
        self.trips = b.divu(b.add(self.K, c(self.BK - 1)), c(self.BK))

        # Thread 0 initialises every planned barrier with its arrival count; the fence makes the
        # init visible to the async proxy (TMA), the CTA barrier to the other threads.
        self.rings = {name: sync.MbarrierRing(b, self.base, r["offset"], r["count"], MBARRIER_BYTES, WAIT_TICKS)
                      for name, r in self.p.barriers.items()}
        with b.if_(b.cmp("eq", self.tid, c(0))):
            for ring in sorted(self.p.barriers.values(), key=lambda r: r["offset"]):
                self.rings[ring["name"]].init(ring["arrivals"])
            sync.fence_mbarrier_init()
        # bar.sync 0 with every thread, before the role split. No CTA-wide barrier may follow:
        # the idle threads of a one-thread role exit early.
        sync.cta_barrier()
        self.wg = b.divu(self.tid, c(THREADS_PER_WARPGROUP))

    def _roles(self) -> None:
        """if wg in role0 { role0 } else if wg in role1 { ... } else { last role }."""
        b, c = self.b, self.b.const
        roles = sorted(self.p.roles, key=lambda r: min(r.attrs["warpgroups"]))

        def chain(i: int) -> None:
            if i == len(roles) - 1:
                self._role(roles[i])
                return
            wgs = sorted(roles[i].attrs["warpgroups"])
            if wgs != list(range(wgs[0], wgs[-1] + 1)):
                self._fail(f"role {roles[i].attrs['name']!r} has non-contiguous warpgroups {wgs}")
            if len(wgs) == 1:
                cond = b.cmp("eq", self.wg, c(wgs[0]))
            else:   # earlier roles took the lower warpgroups, so an upper bound is enough
                cond = b.cmp("ule", self.wg, c(wgs[-1]))
            then, orelse = b.if_else(cond)
            with then:
                self._role(roles[i])
            with orelse:
                chain(i + 1)

        chain(0)

    def _role(self, role: KOp) -> None:
        b, c = self.b, self.b.const
        attrs = role.attrs
        ctx = _Role(name=attrs["name"], first_wg=min(attrs["warpgroups"]), issue=attrs.get("issue", "warpgroup"),
                    accs={}, acc_n={})
        sync.role_registers(attrs["regs"], self.launch_regs)
        if ctx.issue == "one_thread":
            # One elected lane of the role's first warp issues everything; the others fall through.
            warp = b.divu(self.tid, c(32))
            with b.if_(b.cmp("eq", warp, c(ctx.first_wg * 4))):
                with b.if_(sync.elect_sync(b)):
                    for operand in self._loaded_operands(role):
                        tma.prefetch_tensormap(self.tmap_args[operand])
                    self._tile_loop(role.body, ctx)
        elif ctx.issue == "warpgroup":
            ctx.wg_index = b.sub(self.wg, c(ctx.first_wg))
            ctx.thread_in_wg = b.remu(self.tid, c(THREADS_PER_WARPGROUP))
            ctx.wg_leader = b.cmp("eq", ctx.thread_in_wg, c(0))
            self._tile_loop(role.body, ctx)
        else:
            self._fail(f"role {ctx.name!r} has issue = {ctx.issue!r}; the lowering knows 'one_thread' and 'warpgroup'")

    def _tile_loop(self, ops: list[KOp], ctx: _Role) -> None:
        """The role's ops, once (grid schedule) or once per tile of this CTA (persistent schedule)."""
        if not self.persistent:
            self._ops(ops, ctx)
            return
        b, c = self.b, self.b.const
        n_tiles = b.divu(b.add(self.N, c(self.BN - 1)), c(self.BN))
        m_tiles = b.divu(b.add(self.M, c(self.BM - 1)), c(self.BM))
        first = b.sreg("ctaid", "x", "cta")
        step = b.sreg("nctaid", "x", "ncta")
        tile_name = b.fresh("tile")
        with b.for_(first, b.mul(m_tiles, n_tiles), step, iv=tile_name) as loop:
            tile = loop.iv
            # every role of the CTA walks the same tiles in the same order, so ring iterations
            # (stage, phase) agree: this is the CTA's (tile - first) / step-th tile
            self.it_base = b.mul(b.divu(b.sub(tile, first), step), self.trips)
            self.origin = {"M": b.mul(b.divu(tile, n_tiles), c(self.BM)),
                           "N": b.mul(b.remu(tile, n_tiles), c(self.BN))}
            self._ops(ops, ctx)
        self.it_base, self.origin = None, {}

    def _loaded_operands(self, role: KOp) -> list[str]:
        seen = []
        for op in role.walk():
            if op.kind == "async_load" and op.attrs["operand"] not in seen:
                seen.append(op.attrs["operand"])
        return seen

    # ---- ops ------------------------------------------------------------------------------
    OPS = ("k_loop", "wait", "arrive_expect_tx", "async_load", "mma", "mma_wait", "arrive", "store_tile")

    def _ops(self, ops: list[KOp], ctx: _Role) -> None:
        for op in ops:
            if op.kind not in self.OPS:
                self._fail(f"cannot lower wl.{op.kind} in role {ctx.name!r}; the sm_90a lowering handles "
                           f"{', '.join('wl.' + k for k in self.OPS)}")
            getattr(self, f"_op_{op.kind}")(op, ctx)

    def _need_loop(self, op: KOp, ctx: _Role) -> _Loop:
        if ctx.loop is None:
            self._fail(f"wl.{op.kind} in role {ctx.name!r} is outside a wl.k_loop; its stage would be undefined")
        return ctx.loop

    def _op_k_loop(self, op: KOp, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        if ctx.loop is not None:
            self._fail("nested wl.k_loop")
        # The loop carries the accumulators its MMAs update (zero on entry).
        carried = []
        for mma in (o for o in op.body if o.kind == "mma"):
            name, n = mma.attrs["acc"], mma.attrs["shape"][1]
            if name not in ctx.accs:
                ctx.accs[name] = b.zero(wgmma.acc_type(b, n), "acc")
                ctx.acc_n[name] = n
            if name not in carried:
                carried.append(name)
        kt_name = b.fresh("kt")
        res_name = b.fresh("accf") if carried else None     # the accumulators after the loop
        arg_names = [b.fresh("acc_in") for _ in carried]
        outer = dict(ctx.accs)
        with b.for_(c(0), self.trips, c(1), iter_args=[ctx.accs[n] for n in carried], iv=kt_name,
                    args=arg_names, results=res_name) as loop:
            ctx.accs.update(zip(carried, loop.args))
            kt = loop.iv
            it = kt if self.it_base is None else b.add(self.it_base, kt)
            stage = b.remu(it, c(self.stages))
            phase = b.and_(b.divu(it, c(self.stages)), c(1))
            ctx.loop = _Loop(kt, it, stage, phase, {})
            self._ops(op.body, ctx)
            ctx.loop = None
            loop.yield_(*(ctx.accs[n] for n in carried))
        if carried:
            ctx.accs = outer
            ctx.accs.update(zip(carried, loop.results))

    def _barrier(self, name: str, loop: _Loop) -> sync.Mbarrier:
        """This stage's mbarrier of ring `name` (its address computed once per loop body)."""
        key = ("bar", name)
        if key not in loop.cache:
            ring = self._ring(name)
            if ring["count"] != self.stages:
                self._fail(f"mbarrier ring {name!r} has {ring['count']} barriers for {self.stages} stages")
            loop.cache[key] = self.rings[name].at(loop.stage)
        return loop.cache[key]

    def _k_origin(self, loop: _Loop) -> ir.Value:
        """First K index of this iteration's tile."""
        if "k0" not in loop.cache:
            loop.cache["k0"] = self.b.mul(loop.kt, self.b.const(self.BK))
        return loop.cache["k0"]

    def _stage_offset(self, buf: dict, loop: _Loop) -> ir.Value:
        """Byte offset (i32, from the aligned smem base) of this stage's tile of `buf`."""
        b, c = self.b, self.b.const
        if buf["stages"] != self.stages:
            self._fail(f"buffer {buf['name']!r} has {buf['stages']} stages, the kernel {self.stages}")
        off = b.mul(loop.stage, c(self._stage_bytes(buf)))
        return off if buf["offset"] == 0 else b.add(c(buf["offset"]), off)

    def _op_wait(self, op: KOp, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
        parity = op.attrs["parity"]
        if parity == "consumer":
            ph = loop.phase
        elif parity == "producer":   # the opposite phase: the first lap over fresh barriers passes at once
            ph = b.xor(loop.phase, c(1))
        else:
            self._fail(f"wl.wait parity {parity!r}; expected 'consumer' or 'producer'")
        self._barrier(op.attrs["barrier"], loop).wait(ph)

    def _op_arrive_expect_tx(self, op: KOp, ctx: _Role) -> None:
        loop = self._need_loop(op, ctx)
        if ctx.issue != "one_thread":
            self._fail(f"wl.arrive_expect_tx in role {ctx.name!r} (issue {ctx.issue!r}): it must be issued by one "
                       "thread, or each thread would arrive")
        ring = self._ring(op.attrs["barrier"])
        if op.attrs["bytes"] != ring["tx_bytes"]:
            self._fail(f"wl.arrive_expect_tx expects {op.attrs['bytes']} bytes but ring {ring['name']!r} is planned "
                       f"for {ring['tx_bytes']}")
        self._barrier(op.attrs["barrier"], loop).arrive_expect_tx(op.attrs["bytes"])

    def _op_async_load(self, op: KOp, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
        if ctx.issue != "one_thread":
            self._fail(f"wl.async_load in role {ctx.name!r}: TMA copies are issued by one thread")
        operand = op.attrs["operand"]
        buf = self._buffer(op.attrs["buffer"])
        rows_dim, cols_dim, rows, chunks = self._swizzled_tile(buf, operand)
        if list(op.attrs["tile"]) != list(buf["shape"]):
            self._fail(f"wl.async_load tile {op.attrs['tile']} differs from buffer {buf['name']!r} {buf['shape']}")
        bar = self._barrier(op.attrs["barrier"], loop)
        stage_off = self._stage_offset(buf, loop)
        # One TMA box covers 128 B of the contiguous dim x all rows; a wider tile takes several boxes,
        # stored one after another (rows * 128 B each): the layout the wgmma descriptors expect.
        for j in range(chunks):
            coord = []
            for dim, step in ((cols_dim, SWIZZLE_BYTES // ELEM_BYTES * j), (rows_dim, 0)):
                v = self._k_origin(loop) if dim == "K" else self.origin[dim]
                coord.append(v if step == 0 else b.add(v, c(step)))
            dst = stage_off if j == 0 else b.add(stage_off, c(j * rows * SWIZZLE_BYTES))
            tma.tma_load(b, b.gep(self.base, dst), self.tmap_args[operand], bar.addr, coord)

    def _descriptor(self, buf: dict, operand: str, loop: _Loop,
                    row_offset: ir.Value | None) -> tuple[ir.Value, int, str]:
        """wgmma smem descriptor of this stage's tile: (i64 value, k16 step in encoded units, "row"|"col").

        K-major (K contiguous): 128B swizzle, LBO unused (16 B by convention), SBO = 8 rows x 128 B;
        a k16 step moves the start address by 16 elements = 32 B inside the swizzle atom (the hardware
        applies the XOR on absolute address bits, so this is exact). MN-major (B given [K, N]):
        LBO = distance between 64-wide N chunks (one TMA box = K rows x 128 B), SBO = 8 K rows x 128 B,
        a k16 step moves 16 K rows = 2048 B.
        """
        b, c = self.b, self.b.const
        rows_dim, cols_dim, rows, chunks = self._swizzled_tile(buf, operand)
        if cols_dim == "K" and chunks != 1:
            self._fail(f"buffer {buf['name']!r}: a K-major wgmma operand needs its K tile to be exactly "
                       f"{SWIZZLE_BYTES} bytes (one swizzle row), got {chunks} x {SWIZZLE_BYTES}")
        if cols_dim == "K":
            hi = desc_hi_bits(16, 8 * SWIZZLE_BYTES)
            k_step, major = (MMA_K * ELEM_BYTES) >> 4, "col"
        elif rows_dim == "K":
            hi = desc_hi_bits(rows * SWIZZLE_BYTES, 8 * SWIZZLE_BYTES)
            k_step, major = (MMA_K * SWIZZLE_BYTES) >> 4, "row"
        else:
            self._fail(f"buffer {buf['name']!r} has no K dim")
        addr = self._stage_offset(buf, loop)
        if row_offset is not None:
            addr = b.add(addr, row_offset)
        lo = b.add(self.base_enc, b.ext64(b.shru(addr, c(4)), False))
        return b.or_(lo, c(to_i64(hi), b.i64)), k_step, major

    def _op_mma(self, op: KOp, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
        if ctx.issue != "warpgroup":
            self._fail(f"wl.mma in role {ctx.name!r}: wgmma is issued by whole warpgroups")
        m, n, k = op.attrs["shape"]
        if m != MMA_M or not (8 <= n <= 256 and n % 8 == 0) or k % MMA_K:
            self._fail(f"wl.mma shape {op.attrs['shape']}: wgmma takes m = {MMA_M}, n in 8..256 step 8, "
                       f"k a multiple of {MMA_K}")
        if op.attrs.get("a_rows", "per_warpgroup") != "per_warpgroup":
            self._fail(f"wl.mma a_rows {op.attrs['a_rows']!r}: only 'per_warpgroup' (each warpgroup its 64 rows)")
        a_buf, b_buf = self._buffer(op.attrs["a"]), self._buffer(op.attrs["b"])
        if self.dims["a"][1] != "K":
            self._fail("A must be K-major")
        # The smem tiles must be exactly what the wgmma reads: A = (warpgroups x 64) x k, B = k x n.
        extent = {d: v for d, v in zip(self.dims["b"], b_buf["shape"])}
        n_wgs = len(next(r for r in self.p.roles if r.attrs["name"] == ctx.name).attrs["warpgroups"])
        if list(a_buf["shape"]) != [MMA_M * n_wgs, k] or extent != {"N": n, "K": k}:
            self._fail(f"wl.mma shape {op.attrs['shape']} does not match buffers {a_buf['name']!r} "
                       f"{a_buf['shape']} and {b_buf['name']!r} {b_buf['shape']} for {n_wgs} warpgroups")
        # each warpgroup reads its own 64 rows of A: 64 rows x 128 B, a multiple of the swizzle repeat
        a_rows = b.mul(ctx.wg_index, c(MMA_M * SWIZZLE_BYTES))
        desc_a, a_step, _ = self._descriptor(a_buf, "a", loop, a_rows)
        desc_b, b_step, b_major = self._descriptor(b_buf, "b", loop, None)
        acc_name = op.attrs["acc"]
        acc = ctx.accs[acc_name]
        wgmma.fence()
        for kk in range(k // MMA_K):
            da = desc_a if kk == 0 else b.add(desc_a, c(kk * a_step, b.i64))
            db = desc_b if kk == 0 else b.add(desc_b, c(kk * b_step, b.i64))
            # B <col> = K-major, <row> = MN-major (transposed) B
            acc = wgmma.mma_async(b, acc, da, db, (m, n, MMA_K), self.elem, b_major)
        wgmma.commit()
        ctx.accs[acc_name] = acc

    def _op_mma_wait(self, op: KOp, ctx: _Role) -> None:
        pending = op.attrs["pending"]
        if not 0 <= pending <= 7:
            self._fail(f"wl.mma_wait pending = {pending}: wgmma.wait_group takes 0..7")
        wgmma.wait(pending)

    def _op_arrive(self, op: KOp, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
        lag = op.attrs.get("lag", 0)
        if not 0 <= lag < self.stages:
            self._fail(f"wl.arrive lag = {lag}: must be 0..{self.stages - 1}")
        if lag == 0:
            bar = self._barrier(op.attrs["barrier"], loop)
        else:   # the stage of iteration kt - lag, i.e. (kt + stages - lag) % stages
            self._ring(op.attrs["barrier"])
            stage = b.remu(b.add(loop.it, c(self.stages - lag)), c(self.stages))
            bar = self.rings[op.attrs["barrier"]].at(stage)
        issue = op.attrs.get("issue", ctx.issue)
        if issue == "one_thread_per_warpgroup" and ctx.issue == "warpgroup":
            # One signalling thread per warpgroup (CUTLASS): the ring expects one arrival per warpgroup.
            # With a lag, iterations before the first `lag` have no earlier stage to free.
            cond = ctx.wg_leader if lag == 0 else b.and_(ctx.wg_leader, b.cmp("uge", loop.it, c(lag)))
            with b.if_(cond):
                bar.arrive()
        elif issue == "one_thread" and ctx.issue == "one_thread":
            bar.arrive()
        else:
            self._fail(f"wl.arrive issue {issue!r} in role {ctx.name!r} (issue {ctx.issue!r}) is not lowered")

    def _op_store_tile(self, op: KOp, ctx: _Role) -> None:
        """Store a warpgroup's m64nN f32 fragment to C (row-major [M, N]) as the output element type.

        Fragment: warp w owns rows 16w..16w+15; lane l: r0 = 16w + l/4; register 4j+2h+e holds
        (r0 + 8h, 8j + 2(l%4) + e). Fast path (the warpgroup's whole 64 x N slice in bounds, N even):
        pairs packed to one 4-byte store. Otherwise one guarded 2-byte store per element.
        """
        b, c = self.b, self.b.const
        if ctx.issue != "warpgroup" or ctx.loop is not None:
            self._fail(f"wl.store_tile in role {ctx.name!r} must follow the k_loop of a warpgroup role")
        if op.attrs["operand"] != "c" or op.attrs.get("rows", "per_warpgroup") != "per_warpgroup":
            self._fail(f"wl.store_tile of {op.attrs['operand']!r} rows {op.attrs.get('rows')!r}: only the output "
                       "'c', per warpgroup")
        acc_name = op.attrs["acc"]
        if acc_name not in ctx.accs:
            self._fail(f"wl.store_tile reads accumulator {acc_name!r}, which no wl.mma of role {ctx.name!r} writes")
        n = ctx.acc_n[acc_name]
        if list(op.attrs["tile"]) != [MMA_M, n]:
            self._fail(f"wl.store_tile tile {op.attrs['tile']} must be the fragment of the MMA, [{MMA_M}, {n}]")
        res = ctx.accs[acc_name]
        ty = {"bf16": ir.BF16Type, "f16": ir.F16Type}[self.elem].get()
        pair_f32, pair_ty = ir.VectorType.get([2], b.f32), ir.VectorType.get([2], ty)
        m0, n0 = self.origin["M"], self.origin["N"]
        warp_in_wg = b.divu(ctx.thread_in_wg, c(32))
        lane = b.remu(self.tid, c(32))
        wg_row0 = b.add(m0, b.mul(ctx.wg_index, c(MMA_M)))
        row0 = b.add(wg_row0, b.add(b.mul(warp_in_wg, c(16)), b.divu(lane, c(4))))
        col0 = b.add(n0, b.mul(b.remu(lane, c(4)), c(2)))
        vals = [b.extractvalue(res, i, b.f32, "f") for i in range(n // 2)]
        n64 = b.ext64(self.N)
        rows = [row0, b.add(row0, c(8))]
        col64 = b.ext64(col0)
        rowptr = [b.gep(self.c_ptr, b.add(b.mul(b.ext64(r), n64), col64), ty) for r in rows]
        in_m = b.cmp("sle", b.add(wg_row0, c(MMA_M)), self.M)
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
