"""The GEMM lowering, for every target: a planned GEMM `Program` -> one `gpu.module` of NVVM/LLVM ops.

`GemmLowering` holds what the GEMM is on any target: its configuration (tile, stages, grid rule and walk, swap-AB),
its parameters (tensor maps a, b and c when C leaves by TMA, C as a pointer otherwise, the stream-K fix-up's
buffers, M, N, K), its tensor maps, its prologue (tile origins from the grid rule, the K loop's trip count) and the
TMA coordinates of a K tile. Where the accumulator lives decides the rest, and the target's atoms say where
(`warploom.lowering.atoms`: `atoms.accumulator`):

  "regs" (`RegisterGemm`; sm_90a's wgmma): warpgroup roles, the consumer warpgroups' K loop carrying the
         accumulator fragment, MMAs committed and waited for in groups, C stored from the fragment through the
         staging smem and TMA (or directly, or transposed for swap-AB), grid / persistent / stream-K walks, 2x1
         clusters multicasting B;
  "tmem" (`TensorMemoryGemm`; sm_100a's tcgen05): warp roles (a TMA warp, an MMA warp, four epilogue warps), one
         thread issuing the MMAs into a double-buffered accumulator in Tensor Memory, commits as arrivals, the
         epilogue reading TMEM 32 columns at a time, a CTA pair (cta_group::2) over a 2x1 cluster.

    warp 0     producer   one elected thread: per K tile, wait ab_empty, expect_tx on ab_full, TMA A and B;
                          at the end, wait each ab_empty stage once more (the last releases landed: _drain)
    warp 1     mma        allocates TMEM; one elected thread per tile: wait acc_empty, per K tile wait ab_full,
                          BK/16 MMAs (D in this tile's accumulator stage, enable-input-d off for the tile's first),
                          commit -> ab_empty; after the K loop commit -> acc_full. At the CTA's last tile the whole
                          warp syncs on tmem_free with the epilogue, then frees TMEM
    warps 2-5  epilogue   per tile: wait acc_full, each warp loads its lane quadrant (warp % 4) of the accumulator 32
                          columns a load (one wait::ld per staging chunk), converts and stores its rows of C; then
                          each thread arrives on acc_empty; at the last tile bar.arrive on tmem_free

The role dispatch, the ring states, waits, arrivals, named barriers, TMEM allocation and the drain are
`KernelLowering`'s (core.py), the same for both forms. Code shape of the register GEMM:
  prologue   tid, CTA tile origins, the dynamic smem base rounded up to the target's base alignment,
             thread 0 initialises every mbarrier, fence + bar.sync (all threads);
  roles      `scf.if` on the warpgroup index; each role runs setmaxnreg, then
             its ops in order: Loop -> scf.for (stage = i % S, phase = (i/S)&1),
             Wait -> mbarrier.try_wait.parity, Arrive (tx) -> arrive.expect_tx, Copy ->
             cp.async.bulk.tensor (TMA), Mma -> the MMA atom on smem descriptors, MmaWait -> its wait,
             Arrive -> mbarrier.arrive,
             Store -> the accumulator fragment stored to C: through the staging smem and TMA stores, in
             64-column chunks, when the plan stages C (the default); from registers otherwise.
C's staged epilogue is written once, for both forms (`GemmLowering._store_staged`, over the atoms' `row_chunks` and
`read_rows`: the fragment's registers, or the thread's TMEM lane 32 columns a load); the forms say only what differs
(`_staged_plan`, `_staged_rows`, `_staged_barrier`, `_staged_depth`).
sm_100a code built here has no Blackwell GPU to run on: it is checked by ptxas, its SASS and the emulator only.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from warploom.kernel import Arrive, Copy, Loop, Mma, MmaWait, Program, Store, Sync, Wait
from warploom.kernel.contract import STREAMK_SLOTS, gemm_kernel_name, gemm_params
from warploom.layout import SmemTile
from warploom.layout.descriptors import k_block_steps
from warploom.layout.fragments import accumulator_register, fragment_col, fragment_row
from warploom.layout.tmem import lane_offset
from warploom.lowering.core import CTAID, ELEM_TYPES, KernelLowering, LoopState, LoweredKernel, RoleState
from warploom.lowering.emit import sync, tma
from warploom.lowering.emit.staging import granule_runs
from warploom.runtime import rules
from warploom.runtime.artifact import TensorMapSpec

LD_COLUMNS = 32               # TMEM columns per load in the Tensor Memory epilogue: 32 registers a thread at a time


def kernel_name(program: Program) -> str:
    """wl_gemm_{elem}_{b_layout}_{BM}x{BN}x{BK}_s{stages}[_persistent][_c2][_g8][_swap][_direct]: the name a GEMM
    kernel gets."""
    b = program.regions.get("b")
    b_layout = "?" if b is None else ("nk" if b.dims == ("N", "K") else "kn")
    multicast = any(isinstance(o, Copy) and o.multicast for r in program.roles for o in r.walk())
    return gemm_kernel_name(next(iter(program.inputs.values())).elem, b_layout, program.attrs["tile"],
                            program.attrs.get("stages", "?"), program.attrs.get("schedule", "grid"), program.target,
                            program.attrs.get("epilogue", "tma"),
                            int(program.attrs.get("cluster", [1])[0]) if multicast else 1,
                            int(program.attrs.get("group_m", 1)), bool(program.attrs.get("swap_ab", False)))


def lower_gemm(program: Program, name: str, context: ir.Context | None = None) -> LoweredKernel:
    """Lower a planned GEMM kernel (its target's atoms pick the register or Tensor Memory form); ValueError names
    what cannot be lowered and why.

    The gpu.module is built in `context` (the one of the module being lowered; a fresh one
    when left out), inside a module of its own (`LoweredKernel.holder`) that a pass may move it out of."""
    from warploom.dialect import make_context
    from warploom.lowering.atoms import atoms_for
    from warploom import targets
    accumulator = atoms_for(targets.get(program.target)).accumulator
    lowering = {"regs": RegisterGemm, "tmem": TensorMemoryGemm}.get(accumulator)
    if lowering is None:
        raise ValueError(f"{program.target} lowering of GEMM kernel {name!r}: the target's atoms keep no accumulator "
                         "the GEMM lowering knows (registers or Tensor Memory)")
    return lowering(program, name).lower(context or make_context())


@dataclass
class GemmPiece:
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



class GemmLowering(KernelLowering):
    """The warp-specialized GEMM on any target: configuration, parameters, tensor maps, prologue, K-tile coordinates.
    `RegisterGemm` and `TensorMemoryGemm` add the roles, the K loop, the MMAs and the epilogue of each accumulator
    placement."""

    # ---- configuration: read and check the plan --------------------------------------------
    def _read_config(self) -> None:
        p, a = self.p, self.p.attrs
        if p.kind != "gemm":
            self._fail(f"kernel kind {p.kind!r} has no GEMM lowering (only 'gemm')")
        for value, key, after in ((a.get("stages"), "stages", "wl-pipeline"), (p.threads, "threads", "wl-specialize"),
                                  (p.smem_bytes, "smem_bytes", "wl-plan-smem")):
            if value is None:
                self._fail(f"the kernel has no {key!r} attribute: run {after} (and the passes after it) first")
        if not p.barriers:
            self._fail("the kernel has no wl.mbarrier ops: run wl-plan-barriers first")
        self.BM, self.BN, self.BK = a["tile"]
        self.cta_rows = self.BM // self.cta_group         # a CTA pair's MMA spans the tile's rows; each CTA has half
        self.stages, self.threads, self.smem_bytes = a["stages"], p.threads, p.smem_bytes
        if a.get("acc_elem", "f32") != "f32":
            self._fail(f"acc_elem {a.get('acc_elem')!r}: only f32 accumulators are lowered")
        self.cluster = self._cluster(a)
        if self.atoms.issue == "warpgroup" and self.threads % self.T.warpgroup_threads:
            self._fail(f"threads = {self.threads} is not a whole number of warpgroups")
        if list(p.inputs) != ["a", "b"]:
            self._fail(f"inputs {list(p.inputs)}: the GEMM kernel takes exactly 'a' and 'b'")
        self.elem = p.inputs["a"].elem
        elems = {t.elem for t in p.inputs.values()} | {t.elem for t in p.outputs.values()}
        if self.elem not in ELEM_TYPES or elems != {self.elem}:
            self._fail(f"element types {sorted(elems)}: the MMA here takes one of {ELEM_TYPES} in and out")
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

    def _param_list(self) -> list[tuple[str, str]]:
        """The contract's parameters (kernel.contract.gemm_params): tensor maps by value (grid constants: a, b, and c
        when C leaves by TMA), C as a global pointer when it is stored from registers, (stream-K) the fix-up's
        workspace and counters, then M, N, K; checked against the tensor maps the plan's copies and stores need."""
        params = list(gemm_params("tma" if "c" in self.tmaps else "direct", "streamk" if self.streamk else "grid"))
        maps = [n for n, kind in params if kind == "tensormap"]
        if maps != list(self.tmaps):
            self._fail(f"the plan loads and stores through tensor maps {list(self.tmaps)}; the GEMM contract's are "
                       f"{maps}")
        return params

    def _bind_args(self, args: dict) -> None:
        self.c_ptr = args.get("c")
        self.workspace, self.counters = args.get("workspace"), args.get("counters")
        self.M, self.N, self.K = (args[n] for n in ("M", "N", "K"))

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
        self.rank = sync.cluster_rank(b) if self.cluster != (1, 1, 1) else None

        self._smem_base()
        # K-loop trip count, shared by every role: ceil(K / BK) tiles; TMA zero-fills the tail of the last
        trip = ("cdiv", "K", self.BK)
        for loop in (o for r in self.p.roles for o in r.walk() if isinstance(o, Loop)):
            if tuple(loop.trip) != trip:
                self._fail(f"k_loop trip {list(loop.trip)}: expected {list(trip)} (the kernel's K tiles)")
        self.trips = rules.evaluate(trip, {"K": self.K}, b)

        self._init_barriers()

    # ---- the persistent walk ------------------------------------------------------------------
    def _persistent_walk(self, ops, ctx: RoleState) -> None:
        """The role's ops once per tile of this CTA: CTA (or cluster: a 2x1 cluster or a CTA pair walks its tiles of
        2 x its rows as one) c of P takes tiles c, c + P, ... in the rule's order (`rules.tile_origin`, bands of
        group_m rows). Every role of the CTA (and of its cluster) walks the same tiles in the same order, so ring
        iterations (stage, phase) agree: this is the CTA's (tile - first) / step-th tile (self.tile_j), its K
        iterations start at tile_j x trips (self.it_base). `_walk_counts` and `_at_walk_tile` add what a form counts
        per CTA and per tile."""
        b, c = self.b, self.b.const
        n_tiles, m_tiles = rules.tile_counts(self.grid[0], {"M": self.M, "N": self.N}, b)
        clustered = self.cluster != (1, 1, 1)
        first = b.sreg("clusterid" if clustered else "ctaid", "x", "cta")
        step = b.sreg("nclusterid" if clustered else "nctaid", "x", "ncta")
        tile_name = b.fresh("tile")
        total = b.mul(m_tiles, n_tiles)
        self._walk_counts(first, step, total)
        with b.for_(first, total, step, iv=tile_name) as loop:
            tile = loop.iv
            self.tile_j = b.divu(b.sub(tile, first), step)
            self.it_base = b.mul(self.tile_j, self.trips)
            self._at_walk_tile(tile, first, step, total)
            self.origin = rules.tile_origin(self.grid[0], tile, n_tiles, b, self.group_m, m_tiles)
            if clustered:       # this CTA's rows of the cluster's tile
                self.origin["M"] = b.add(self.origin["M"], b.mul(self.rank, c(self.cta_rows)))
            self._role_ops(ops, ctx)
        self.it_base, self.origin, self.tile_first, self.tile_last = None, {}, None, None

    def _walk_counts(self, first: ir.Value, step: ir.Value, total: ir.Value) -> None:
        """What a form counts for the whole walk before it starts (the Tensor Memory GEMM: the CTA's K iterations)."""

    def _at_walk_tile(self, tile: ir.Value, first: ir.Value, step: ir.Value, total: ir.Value) -> None:
        """What a form sets at each tile of the walk before its ops (the Tensor Memory GEMM: first/last tile, the
        accumulator ring's state)."""

    # ---- ops ------------------------------------------------------------------------------
    def _check_gemm_loop(self, op: Loop, ctx: RoleState) -> None:
        """A GEMM's K loop: not nested, not software-pipelined."""
        if ctx.loop is not None:
            self._fail("nested wl.k_loop")
        if op.first or op.last:
            self._fail("a software-pipelined wl.k_loop (first / last sections): the GEMM lowering has none")

    def _op_loop(self, op: Loop, ctx: RoleState) -> None:
        """The K loop: scf.for over this tile's K tiles (a stream-K piece's [lo, hi)), ring iteration it_base + kt. It
        carries the register accumulators its MMAs update (zero on entry); one in Tensor Memory stays there."""
        b, c = self.b, self.b.const
        self._check_gemm_loop(op, ctx)
        carried = []
        for mma in (o for o in op.body if isinstance(o, Mma) and o.acc.source == "regs"):
            name, n = mma.acc.name, mma.shape[1]
            if name not in ctx.accs:
                ctx.accs[name] = self.atoms.zero_acc(b, n)
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

    def _k_origin(self, loop: LoopState) -> ir.Value:
        """First K index of this iteration's tile."""
        if "k0" not in loop.cache:
            loop.cache["k0"] = self.b.mul(loop.kt, self.b.const(self.BK))
        return loop.cache["k0"]

    def _coord_origin(self, dim: str, loop: LoopState) -> ir.Value | None:
        return self._k_origin(loop) if dim == "K" else self.origin[dim]

    # ---- C's staged epilogue, written once: the accumulator's rows through swizzled smem and TMA ------------------
    def _store_staged(self, op: Store, ctx: RoleState) -> None:
        """C through smem and TMA, for both forms: one chunk of columns at a time (the staging tile: one 128-byte
        swizzle span of columns by the role's rows, one TMA box), the staging region's two buffers in turn.

        Per chunk: the role's storing thread waits until the buffer's last TMA store has read it (wait_group.read
        `_staged_depth`), the role syncs on its named barrier (`_staged_barrier`, with the atoms' fences); each thread
        reads its values of the chunk (the atoms' `row_chunks` / `read_rows`: the fragment's registers, held from
        before the first chunk, or its TMEM lane's chunk by tcgen05.ld, LD_COLUMNS columns a load, and wait::ld) and
        writes each of its rows (`_staged_rows`) run by run (`emit.staging.granule_runs`: a fragment's 4-byte pair,
        a TMEM row's 16-byte granule; the rows' k-th runs side by side), each run one st.shared of packed 16-bit pairs
        at the address the staging tile's swizzled layout gives; fence.proxy.async, the role syncs again, and the
        storing thread TMA-stores the role's rows of the chunk at (n0 + the chunk's first column, m0 + the role's
        first row) and commits it. The tensor map drops rows past M and columns past N."""
        b, c = self.b, self.b.const
        staging, tile, nb, n, acc = self._staged_plan(op, ctx)
        cols = tile.shape[1]
        chunks = self.atoms.row_chunks(n, cols)
        held = [self.atoms.read_rows(b, acc, ch, "f") for ch in chunks] if self.atoms.rows_resident else None
        source, rows, first_row = self._staged_rows(ctx, tile, acc)
        bar = self._staged_barrier(nb, ctx)
        elem_bytes = tile.elem_bits // 8
        chunk_bytes = staging.size // staging.stages
        m0, n0 = self.origin["M"], self.origin["N"]
        rows_at = None if first_row is None else b.mul(first_row, c(tile.span))   # the role's rows in the chunk

        def sync_role():
            self.atoms.before_sync()
            sync.named_barrier_sync(b, bar, nb.threads)
            self.atoms.after_sync()

        for j in range(n // cols):
            lo, hi = j * cols, (j + 1) * cols
            with b.if_(ctx.storer):              # the buffer's last store has read it
                tma.bulk_wait_group(self._staged_depth(j, n // cols), read=True)
            sync_role()
            mine = [k for k, ch in enumerate(chunks) if any(lo <= col < hi for row in ch.rows for _, col in row)]
            if len(mine) != 1:
                self._fail(f"the accumulator's row chunks {[ch.first for ch in chunks]} do not give columns "
                           f"{lo} .. {hi - 1} (one staging chunk) in one read")
            ch = chunks[mine[0]]
            vals = held[mine[0]] if held is not None else self.atoms.read_rows(b, source, ch, "f", LD_COLUMNS)
            base = staging.offset + (j % staging.stages) * chunk_bytes
            runs = [granule_runs([(i, col - lo) for i, col in columns if lo <= col < hi], elem_bytes)
                    for columns in ch.rows]
            for k in range(max(len(r) for r in runs)):      # the k-th run of each row in turn
                for row_at, row_runs in zip(rows, runs):
                    if k >= len(row_runs):
                        continue
                    run = row_runs[k]
                    # the swizzle moves a 16-byte granule within its row only: the run's first byte places it all
                    box, within = divmod(run[0][1] * elem_bytes, tile.span)
                    at = tile.swizzle.apply_with(b, b.add(row_at, c(within)))
                    pairs = [(run[p][0], run[p + 1][0]) for p in range(0, len(run), 2)]     # values of each word
                    if len(pairs) == 1:
                        value = b.bitcast(self._pack_pair(vals[pairs[0][0]], vals[pairs[0][1]]), b.i32)
                    else:
                        value = b.undef(ir.VectorType.get([len(pairs)], b.i32))
                        for p, (v0, v1) in enumerate(pairs):
                            value = b.insertelement(value, b.bitcast(self._pack_pair(vals[v0], vals[v1]), b.i32),
                                                    c(p))
                    b.store(value, b.gep(self.base, b.add(at, c(base + box * tile.box_bytes))),
                            alignment=4 * len(pairs))
            sync.fence_proxy_async_smem()       # the writes, for the TMA store's async reads
            sync_role()
            with b.if_(ctx.storer):
                src = b.gep(self.base, c(base) if rows_at is None else b.add(rows_at, c(base)))
                tma.tma_store(b, self.tmap_args["c"], src,
                              [b.add(n0, c(lo)), m0 if first_row is None else b.add(m0, first_row)])
                tma.bulk_commit_group()

    def _pack_pair(self, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """Two f32 values as one i32 holding the pair in the output type (cvt.rn.{ty}x2.f32), lo first."""
        b, c = self.b, self.b.const
        ty = {"bf16": ir.BF16Type, "f16": ir.F16Type}[self.elem].get()
        u = b.insertelement(b.undef(ir.VectorType.get([2], b.f32)), lo, c(0))
        u = b.insertelement(u, hi, c(1))
        return b.fptrunc(u, ir.VectorType.get([2], ty))

    def _staged_plan(self, op: Store, ctx: RoleState) -> tuple:
        """The staged store's plan, checked against what the form stores: (the staging region, its SmemTile, the
        named barrier, the accumulator's columns, the accumulator: what `_staged_rows` and the atoms read)."""
        raise NotImplementedError

    def _staged_rows(self, ctx: RoleState, tile: SmemTile, acc) -> tuple:
        """(what the atoms' `read_rows` reads a streamed chunk from; the byte offset in a staging chunk of each row
        the thread holds, at its first column; the role's first row of the tile, or None for 0)."""
        raise NotImplementedError

    def _staged_barrier(self, nb, ctx: RoleState):
        """The id of the role's instance of the staging barrier (an int, or an i32 value picked at run time)."""
        raise NotImplementedError

    def _staged_depth(self, j: int, count: int) -> int:
        """The TMA stores that may stay pending (still reading smem) when the role writes the buffer of chunk j of
        the tile's `count`."""
        raise NotImplementedError


class RegisterGemm(GemmLowering):
    """The GEMM whose accumulator is a warpgroup's register fragment (atoms.accumulator == "regs"): one K loop per
    tile, C stored from the fragment (through smem and TMA, or directly)."""
    OPS = {Loop: "loop", Wait: "wait", Arrive: "arrive", Copy: "copy", Mma: "mma", MmaWait: "mma_wait",
           Store: "store"}
    OP_NAMES = ("wl.k_loop", "wl.wait", "wl.arrive_expect_tx", "wl.async_load", "wl.mma", "wl.mma_wait", "wl.arrive",
                "wl.store_tile")

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

    def _tile_loop(self, ops, ctx: RoleState) -> None:
        """The role's ops, once (grid schedule) or once per tile of this CTA (persistent schedule: `_persistent_walk`),
        or once per piece of a tile in this CTA's run of iterations (stream-K)."""
        if not self.persistent:
            self._role_ops(ops, ctx)
            return
        if self.streamk:
            self._streamk_loop(ops, ctx)
            return
        self._persistent_walk(ops, ctx)

    def _streamk_loop(self, ops, ctx: RoleState) -> None:
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
            self.piece = GemmPiece(tile, t0, lo, hi, start, cta, ctas, iters)
            self.it_base = b.add(dp_iters, b.sub(t0, start))
            self.origin = rules.tile_origin(self.grid[0], tile, n_tiles, b)
            ctx.accs, ctx.acc_n = {}, {}
            self._ops(ops, ctx)
        self.it_base, self.origin, self.piece = None, {}, None

    def _op_mma(self, op: Mma, ctx: RoleState) -> None:
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
        if ctx.issue != "warpgroup":
            self._fail(f"wl.mma in role {ctx.name!r}: the MMA is issued by whole warpgroups")
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
        a_major, b_major = a_tile.major(op.k_dim), b_tile.major(op.k_dim)
        # k-block kk starts k_block_offset bytes into each tile: the descriptor's steps
        a_steps, b_steps = (k_block_steps(t, k // self.mma_k, self.mma_k) for t in (a_tile, b_tile))
        ctx.accs[op.acc.name] = self.atoms.mma_smem(b, ctx.accs[op.acc.name], desc_a, desc_b, a_steps, b_steps,
                                                    (m, n, self.mma_k), self.elem, a_major, b_major)

    def _op_store(self, op: Store, ctx: RoleState) -> None:
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

    def _streamk_fixup(self, op: Store, ctx: RoleState) -> ir.Value:
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
                     fragment_row(warp, lane, b))
        row_ok = [b.cmp("slt", b.add(row0, c(8 * h)), self.M) for h in range(2)]

        def vector_at(h: int, j: int) -> list[int]:     # the fragment registers of vector j of row half h
            return [accumulator_register(2 * j + q, h, e) for q in range(2) for e in range(2)]

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

    def _staged_plan(self, op: Store, ctx: RoleState) -> tuple:
        """Two buffers of [warpgroups x 64 rows, one swizzle span dividing the fragment's n columns], one TMA box
        each; a named barrier of 128 threads per consumer warpgroup. The accumulator: the warpgroup's fragment."""
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
        return staging, tile, nb, n, ctx.accs[op.value]

    def _staged_rows(self, ctx: RoleState, tile: SmemTile, acc) -> tuple:
        """The fragment's rows r0 and r0 + 8 of the warpgroup's 64 (warp w: 16w + lane / 4), at the thread's first
        column 2 (lane % 4); the warpgroup's rows start at 64 wg. The registers are held: nothing is streamed."""
        b, c = self.b, self.b.const
        lane = b.remu(self.tid, c(self.T.warp_size))
        warp = b.divu(ctx.thread_in_wg, c(self.T.warp_size))
        wg_row = b.mul(ctx.wg_index, c(self.mma_m))
        elem_bytes = tile.elem_bits // 8
        col_byte = b.mul(fragment_col(lane, b), c(elem_bytes))     # the thread's pair in each 8 columns
        row_at = []
        for h in range(2):     # the thread's rows r0 and r0 + 8 of the tile, as byte offsets of their first pair
            row = b.add(wg_row, fragment_row(warp, lane, b, half=h))
            row_at.append(b.add(b.mul(row, c(tile.span)), col_byte))
        return acc, row_at, wg_row

    def _staged_barrier(self, nb, ctx: RoleState):
        """The warpgroup's own instance of the barrier: id + warpgroup index."""
        return self.b.add(self.b.const(nb.id), ctx.wg_index)

    def _staged_depth(self, j: int, count: int) -> int:
        """One (the store of two chunks ago, which read this buffer, is done), but none at a tile's first chunk: the
        previous tile's last store may be in either buffer (a fragment of one chunk uses buffer 0 every tile)."""
        return 0 if j == 0 else 1

    def _store_direct(self, op: Store, ctx: RoleState) -> None:
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
        row0 = b.add(wg_row0, fragment_row(warp_in_wg, lane, b))
        col0 = b.add(n0, fragment_col(lane, b))
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

    def _store_transposed(self, op: Store, ctx: RoleState) -> None:
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
                     fragment_row(warp_in_wg, lane, b))    # C's column of fragment row r0
        row0 = b.add(m0, fragment_col(lane, b))                   # C's row of fragment column q0
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


class TensorMemoryGemm(GemmLowering):
    """The GEMM whose accumulator is in Tensor Memory (atoms.accumulator == "tmem"): warp roles, one thread issuing
    the MMAs, the accumulator double-buffered over the tiles, the epilogue reading it back."""
    ISSUES = ("thread", "warp")
    OPS = {Loop: "loop", Wait: "wait", Arrive: "arrive", Copy: "copy", Mma: "mma", Store: "store", Sync: "sync"}
    OP_NAMES = ("wl.k_loop", "wl.wait", "wl.arrive_expect_tx", "wl.arrive", "wl.async_load", "wl.mma", "wl.store_tile",
                "wl.named_barrier_sync", "wl.named_barrier_arrive")

    # ---- configuration ----------------------------------------------------------------------------
    def _read_config(self) -> None:
        self.cta_group = int(self.p.attrs.get("cta_group", 1))          # 2: a CTA pair (cta_group::2)
        if self.cta_group not in (1, 2):
            self._fail(f"cta_group {self.cta_group}: the MMA takes cta_group 1 or 2")
        self.pair = self.cta_group == 2
        self.WALK = "persistent_pairs" if self.pair else "persistent"
        super()._read_config()
        if self.pair and not self.persistent:
            self._fail("a CTA pair's GEMM is lowered persistent only (grid persistent_pairs)")

    def _cluster(self, attrs) -> tuple[int, int, int]:
        """(2, 1, 1) for a CTA pair, else no cluster."""
        want = [self.cta_group, 1, 1]
        if list(attrs.get("cluster", [1, 1, 1])) != want:
            self._fail(f"cluster {attrs.get('cluster')} with cta_group {self.cta_group}: expected {want}")
        return tuple(want)

    def _check_plan(self) -> None:
        """Roles (`_check_roles`); smem regions and barriers placed; TMEM regions placed in the allocation; smem for
        the run-time base round-up; the TMEM address slot and the MMA role (`_check_tmem_owner`)."""
        self._check_roles()
        smem = self._check_placement()
        self.tiles = {r.name: self._tile(r) for r in smem if r.dims}
        self._check_tmem_owner(smem)
        self.mma_k = self.T.mma_k_of(self.elem)

    def _store_map(self, op: Store) -> TensorMapSpec:
        """C's TMA map (N, M innermost first): a box of one chunk (one swizzle span of columns by the tile's rows)."""
        if op.output != "c":
            self._fail(f"store of {op.output!r} through smem: the GEMM stages c only")
        tile = self.tiles[self._region(op.region).name]
        if tile.num_boxes != 1:
            self._fail(f"staging region {op.region!r} {tile.shape}: one chunk must be one TMA box")
        return TensorMapSpec(name="c", operand="c", dtype=self.elem, box=tile.box, swizzle=tile.swizzle.bytes,
                             dims=(tile.dims[1], tile.dims[0]))

    def _ring_iterations(self, name: str) -> ir.Value:
        """The K iterations of this CTA's tiles: every K ring takes one stage an iteration."""
        return self.cta_iterations

    def _tile_loop(self, ops, ctx: RoleState) -> None:
        """The role's ops once (grid) or once per tile of this CTA (persistent: `_persistent_walk`); self.tile_j counts
        the CTA's tiles (the accumulator ring's position), self.tile_first / tile_last are true at its first / last
        one, self.cta_iterations counts its K iterations in all (the drain starts after them)."""
        if not self.persistent:
            self.tile_j = self.b.const(0)
            self.cta_iterations = self.trips
            self._tile_states()
            self._role_ops(ops, ctx)
            return
        self._persistent_walk(ops, ctx)

    def _walk_counts(self, first: ir.Value, step: ir.Value, total: ir.Value) -> None:
        b, c = self.b, self.b.const
        # the K iterations this CTA's tiles take in all: tiles first, first + step, ... below total
        mine = b.divu(b.add(b.sub(total, b.minu(first, total)), b.sub(step, c(1))), step)
        self.cta_iterations = b.mul(mine, self.trips)

    def _at_walk_tile(self, tile: ir.Value, first: ir.Value, step: ir.Value, total: ir.Value) -> None:
        b = self.b
        self.tile_first = b.cmp("eq", tile, first)
        self.tile_last = b.cmp("uge", b.add(tile, step), total)
        self._tile_states()

    def _coord_origin(self, dim: str, loop: LoopState) -> ir.Value | None:
        """TMA coordinates: a pair's CTA loads its own rows of A and its half of B's columns."""
        if dim == "N" and self.pair:
            return self.b.add(self.origin["N"], self.b.mul(self.rank, self.b.const(self.BN // self.cta_group)))
        return super()._coord_origin(dim, loop)

    def _tile_states(self) -> None:
        """The stage, phase and barriers of every ring counted in tiles, at this tile: made before any role op,
        so they dominate every use (inside the elected lane's blocks, the K loop, the epilogue)."""
        self.tile_cache = {}
        for ring in (r for r in self.p.rings.values() if r.counts == "tile"):
            state = self.tile_cache.setdefault(("tile", ring.stages),
                                               self._loop_state_n(self.tile_j, self.tile_j, ring.stages))
            for name in (ring.full, ring.empty):
                if name is not None:
                    state.cache[("bar", name)] = self.rings[name].at(state.stage)

    # ---- ring state -----------------------------------------------------------------------------------
    def _tile_ring_state(self, name: str, ctx: RoleState) -> LoopState | None:
        """A ring counted in tiles (the accumulator's): its state at this tile (`_tile_states`), used outside the K
        loop only."""
        ring = self.p.ring_of_barrier(name)
        if ring is None or ring.counts != "tile":
            return None
        if ctx.loop is not None:
            self._fail(f"barrier {name!r} advances per tile but is used inside the K loop")
        return self.tile_cache[("tile", ring.stages)]

    def _loop_state_n(self, kt: ir.Value, it: ir.Value, stages: int) -> LoopState:
        """A ring of `stages` stages at iteration `it`, apart from the K loop's stages."""
        b, c = self.b, self.b.const
        return LoopState(kt, it, b.remu(it, c(stages)), b.and_(b.divu(it, c(stages)), c(1)), {}, once=True,
                         stages=stages)

    # ---- ops --------------------------------------------------------------------------------------------
    def _acc_columns(self, name: str, ctx: RoleState) -> tuple[ir.Value, int]:
        """The TMEM address (lane 0) of this tile's stage of accumulator `name`, and its columns per stage."""
        b, c = self.b, self.b.const
        acc = self._region(name)
        if acc.space != "tmem":
            self._fail(f"accumulator {name!r} is in {acc.space}; tcgen05.mma accumulates in Tensor Memory")
        ring = self.p.ring_of_region(name)
        if ring is None or ring.counts != "tile" or ring.full is None:
            self._fail(f"accumulator {name!r} has no ring counted in tiles (wl-specialize, wl-plan-barriers)")
        per_stage = acc.size // acc.stages
        state = self.tile_cache[("tile", ring.stages)]
        col = b.add(c(acc.offset), b.mul(state.stage, c(per_stage))) if acc.stages > 1 else c(acc.offset)
        return b.add(self.taddr, col), per_stage

    def _op_mma(self, op: Mma, ctx: RoleState) -> None:
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
        if ctx.role is not self.mma_role:
            self._fail(f"wl.mma in role {ctx.name!r}")
        if op.lag:
            self._fail(f"wl.mma lag = {op.lag}: the GEMM's MMAs read their own iteration's stage")
        m, n, k = op.shape
        try:
            self.T.check_mma_shape(m, n, self.elem, self.cta_group)
        except ValueError as e:
            self._fail(f"wl.mma shape {list(op.shape)}: {e}")
        if k % self.mma_k:
            self._fail(f"wl.mma k = {k} is not a multiple of the tcgen05.mma K = {self.mma_k}")
        if op.a.source != "smem" or op.b.source != "smem" or op.acc.source != "tmem":
            self._fail(f"wl.mma reads a from {op.a.source}, b from {op.b.source} into {op.acc.source}: this lowering "
                       "takes a and b from smem descriptors and accumulates in TMEM")
        a_reg, b_reg = self._region(op.a.name), self._region(op.b.name)
        a_tile, b_tile = self.tiles[a_reg.name], self.tiles[b_reg.name]
        extent_a, extent_b = dict(zip(a_tile.dims, a_tile.shape)), dict(zip(b_tile.dims, b_tile.shape))
        # each CTA of a pair holds its half of A's rows and of B's columns
        if extent_a != {"M": m // self.cta_group, "K": k} or extent_b != {"N": n // self.cta_group, "K": k}:
            self._fail(f"wl.mma shape {list(op.shape)} does not match buffers {a_reg.name!r} {list(a_reg.shape)} "
                       f"and {b_reg.name!r} {list(b_reg.shape)}")
        a_major, b_major = a_tile.major(op.k_dim), b_tile.major(op.k_dim)
        try:
            idesc = self.atoms.instr_descriptor(self.elem, m, n, a_major=a_major, b_major=b_major)
        except ValueError as e:
            self._fail(f"wl.mma: {e}")
        d, _ = self._acc_columns(op.acc.name, ctx)
        desc_a, _ = self._descriptor(a_reg, loop, None, op.k_dim)
        desc_b, _ = self._descriptor(b_reg, loop, None, op.k_dim)
        first_k = b.cmp("ne", loop.kt, c(0))            # the tile's first K tile overwrites the accumulator
        a_steps, b_steps = (k_block_steps(t, k // self.mma_k, self.mma_k) for t in (a_tile, b_tile))
        self.atoms.mma_smem(b, d, desc_a, desc_b, a_steps, b_steps, idesc, first_k, self.cta_group)

    def _op_store(self, op: Store, ctx: RoleState) -> None:
        """C from this tile's accumulator stage, through smem and TMA (`_store_staged`), by the epilogue warps."""
        if ctx.issue != "warp" or ctx.loop is not None:
            self._fail(f"wl.store_tile in role {ctx.name!r}: the epilogue warps store, outside the K loop")
        if op.output != "c" or op.region is None or op.barrier is None:
            self._fail(f"wl.store_tile of {op.output!r}: the sm_100a GEMM stores c through a staging smem region "
                       "(wl-pipeline) with a named barrier (wl-specialize)")
        self._store_staged(op, ctx)

    def _staged_plan(self, op: Store, ctx: RoleState) -> tuple:
        """Two buffers of [the CTA's rows, n] with n dividing BN (a multiple of the 32 columns of a load); one warp per
        TMEM lane quadrant; a named barrier of the epilogue warps. The accumulator: its stage's TMEM address."""
        taddr, per_stage = self._acc_columns(op.value, ctx)
        acc, staging = self._region(op.value), self._region(op.region)
        bm = self.BM // self.cta_group                # a pair's CTA stores its own rows
        if list(op.tile) != [bm, self.BN] or list(acc.shape) != [bm, self.BN] or per_stage != self.BN:
            self._fail(f"wl.store_tile tile {list(op.tile)} must be the accumulator's [{bm}, {self.BN}]")
        quadrants = self.T.tmem.lanes // self.T.tmem.lanes_per_warp
        if ctx.role.warps != quadrants:
            self._fail(f"role {ctx.name!r} has {ctx.role.warps} warps; the epilogue needs {quadrants}, one per TMEM "
                       "lane quadrant")
        tile = self.tiles[staging.name]
        rows, cols = tile.shape
        nb = self.p.named_barriers.get(op.barrier)
        if rows != bm or self.BN % cols or cols % LD_COLUMNS or staging.stages != 2 or nb is None or \
                nb.threads != ctx.role.warps * self.T.warp_size:
            self._fail(f"staging region {staging.name!r} ({staging.stages} x {list(tile.shape)}) and barrier "
                       f"{op.barrier!r}: expected 2 chunks of [{bm}, n] with n dividing {self.BN}, synced by "
                       f"the {ctx.role.warps * self.T.warp_size} epilogue threads")
        return staging, tile, nb, self.BN, taddr

    def _staged_rows(self, ctx: RoleState, tile: SmemTile, acc) -> tuple:
        """Warp w reads TMEM lanes 32 (w % 4) .. + 31 (its quadrant: PTX ISA 9.7.16.8.1), thread i the row 32 (w % 4)
        + i of the CTA's tile: its lane's address is what a chunk is read from; the role holds every row."""
        b, c = self.b, self.b.const
        quadrants = self.T.tmem.lanes // self.T.tmem.lanes_per_warp
        quadrant = b.remu(self.warp, c(quadrants))
        lane0 = b.mul(quadrant, c(self.T.tmem.lanes_per_warp))
        row_addr = b.add(acc, lane_offset(lane0, b))
        row = b.add(lane0, ctx.lane)                                 # the thread's row of the tile
        return (row_addr, 0), [b.mul(row, c(tile.span))], None

    def _staged_barrier(self, nb, ctx: RoleState):
        """One barrier for the four epilogue warps."""
        return nb.id

    def _staged_depth(self, j: int, count: int) -> int:
        """One: the store of two chunks ago, which read this buffer, is done; none at the first chunk of a tile of an
        odd count, whose buffer the previous tile's last store read."""
        return 0 if j == 0 and count % 2 else 1
