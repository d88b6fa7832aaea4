"""The FA4-style attention on Tensor Memory accumulators (the "tmem" atoms: sm_100a's tcgen05) -> one `gpu.module`.

Input: the program the attention planning passes make for sm_100a (wl-tile{target=sm_100a} .. wl-plan-barriers;
`warploom.build.planned_sm100_attention`); docs/attention-sm100.md is the contract. Each CTA takes two Q tiles of
128 rows (query rows row0 + 128 i + r, r = the TMEM lane), one (query block, head, batch) of the grid:

    load        one elected thread: Q0, Q1 once, then per key block the K and V stages (4-D TMA boxes); at the
                end it waits each K and V slot back once more (`_drain`: the last commits landed before exit)
    mma         allocates TMEM (512 columns); one elected thread per key block j: S_i = Q_i K_j^T into TMEM (after
                P_i V_{j-1} is done, as S_i's columns hold P_i), commit s<i>_full; P_i V_j with P_i from TMEM
                (tcgen05.mma with A in Tensor Memory), commit o<i>_full; commits free the K and V stages. At the end
                the warp waits on named barrier tmem_free for the correction warpgroup and frees TMEM
    softmax<i>  a warpgroup per Q tile, thread r of quadrant q (warp % 4) owning row 32 q + r: per key block it
                tcgen05.ld's its row of S_i, masks (keys >= Sk; causal: keys > row + Sk - Sq), and runs the online
                softmax in the exp2 domain with the scale folded into one FMA and FA4's conditional rescaling: the
                row's max m moves only when the block's max exceeds it by more than `rescale_threshold` (log2
                units), the factor 2^(m_old - m_new) is then handed to the correction, else 1; P = 2^(s * scale_log2
                - m) with a share `exp2_poly` of the columns by a polynomial on the FMA units (`emit.exp2`),
                packed to 16-bit pairs and tcgen05.st into S_i's columns; the factor and the running row sum go to
                the correction rows in smem; arrive p<i>_full. After the last block: the LSE of its row
    correction  per key block and tile: wait p<i>_full (the factors) and o<i>_full of block j-1, and when a lane of
                the warp has a factor != 1, rescale its quadrant's rows of O_i in TMEM (ld, multiply, st, 32 columns
                at a time); arrive o<i>_ready. After the last block (o<i>_full: every MMA reading Q_i is done too):
                O_i / row sum, converted and written into Q_i's smem at its 128B-swizzled address, fenced, synced on
                the `epilogue` named barrier, and TMA-stored by the warpgroup's first thread (rows past Sq dropped)

Fences (PTX ISA 9.7.16.6 "tcgen05-memory-consistency-model"): tcgen05.fence::after_thread_sync after every wait or
barrier a TMEM role passes, ::before_thread_sync before every arrive or barrier that publishes its TMEM work.
What every attention has (parameters, 4-D tensor maps, GQA heads, the causal trip rule, the online softmax of a key
block: `_softmax_block` over the score atoms) comes from `warploom.lowering.attention.AttentionLowering`, what every kernel has (the role dispatch, ring states, waits,
arrivals and named barriers with their fences, TMEM allocation and freeing, the drain, TMA box loops, smem
descriptors, elected one-thread roles) from `warploom.lowering.core.KernelLowering`; the MMA, TMEM and fence
instructions from the target's atoms (`warploom.lowering.atoms.tcgen05`). No Blackwell GPU exists here: these
kernels are checked by ptxas, their SASS and the emulator, and have not run on hardware.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import llvm, nvvm, scf

from warploom import targets
from warploom.kernel import Arrive, Compute, Copy, Loop, Mma, Store, Sync, Wait
from warploom.layout.descriptors import k_block_steps
from warploom.layout.tmem import lane_offset
from warploom.lowering.attention import LN2, AttentionLowering
from warploom.lowering.core import RoleState
from warploom.runtime.artifact import TensorMapSpec

CHUNK = 32                  # TMEM columns per load/store of O (the correction warpgroup's 88 registers)


class TensorMemoryAttention(AttentionLowering):
    """The FA4-style attention whose accumulators are in Tensor Memory (atoms.accumulator == "tmem")."""
    # ptxas 13.0 ignores setmaxnreg in this 512-thread kernel unless it also knows one CTA fills an SM (C7508:
    # "unable to determine register count at entry"); with .minnctapersm 1 it allocates each role's budget
    MIN_CTAS_PER_SM = 1
    ROW_CHUNK = CHUNK

    ISSUES = ("thread", "warpgroup", "warp")
    OPS = {Loop: "loop", Wait: "wait", Arrive: "arrive", Copy: "copy", Mma: "mma", Compute: "compute", Store: "store",
           Sync: "sync"}
    OP_NAMES = ("Loop", "Wait", "Arrive", "Copy", "Mma", "Compute", "Store", "Sync")

    # ---- configuration ------------------------------------------------------------------------------------
    def _read_config(self) -> None:
        if self.p.target != self.T.name:
            self._fail(f"the kernel is planned for {self.p.target}; this lowering is for {self.T.name}")
        a = self.p.attrs
        if a.get("rope_depth") or a.get("scale_dtype"):
            self._fail(f"rope_depth = {a.get('rope_depth')}, scale_dtype = {a.get('scale_dtype')!r}: the seed's rope "
                       "columns (MLA) and per-token scales (FP8) are planned (their smem is reserved) but not lowered "
                       "yet; plan without rope-depth and scale-dtype")
        self.rows = self.T.tmem.lanes
        self.q_tiles = int(a.get("q_tiles", 0))
        super()._read_config()
        if self.persistent:
            self._fail("schedule = persistent: the sm_100a attention is lowered with the grid schedule only")
        if self.BM != self.q_tiles * self.rows:
            self._fail(f"tile rows {self.BM}: the kernel takes q_tiles = {self.q_tiles} tiles of {self.rows} rows")
        missing = [key for key in ("rescale_threshold", "exp2_poly") if key not in a]
        if missing:
            self._fail(f"the kernel has no {missing} attributes (wl-tile{{target=sm_100a}} sets them)")
        if self.BN % CHUNK or self.D % CHUNK:
            self._fail(f"block_n {self.BN} and head dim {self.D} must be multiples of {CHUNK} (TMEM columns per load)")

    def _check_plan(self) -> None:
        """Roles (`_check_roles`: the 16 warps once, one register budget per warpgroup within the register file), a
        warpgroup role is one warpgroup and the spare warps have no ops; regions, TMEM columns and barriers placed;
        the TMEM address slot and the MMA role (`_check_tmem_owner`); the correction rows."""
        p = self.p
        self._check_roles()
        for role in p.roles:
            if role.issue == "warpgroup" and role.warps * self.T.warp_size != self.T.warpgroup_threads:
                self._fail(f"role {role.name!r} has {role.warps} warps; a warpgroup role here is one warpgroup")
            if role.issue == "warp" and role.body:
                self._fail(f"role {role.name!r} of issue 'warp' has ops; the attention's spare warps idle")
        smem = self._check_placement()
        self.tiles = {r.name: self._tile(r) for r in smem if r.dims}
        self._check_tmem_owner(smem)
        self.corr = p.regions.get("correction")
        if self.corr is None or tuple(self.corr.shape) != (self.q_tiles, 2, self.rows):
            self._fail(f"expected an smem region 'correction' [q_tiles = {self.q_tiles}, 2, {self.rows}] f32 "
                       f"(wl-specialize), found {self.corr.shape if self.corr else 'none'}")

    def _tmem(self, name: str):
        region = self._region(name)
        if region.space != "tmem":
            self._fail(f"{name!r} is in {region.space}; expected a Tensor Memory region")
        return region

    # ---- parameters and tensor maps --------------------------------------------------------------------------
    def _store_map(self, op: Store) -> TensorMapSpec:
        """O's 4-D TMA map (D, S, H, B): a box of one swizzle span of D by one Q tile's 128 rows."""
        if op.output != "out":
            self._fail(f"store of {op.output!r} through smem: attention stages out only")
        tile = self.tiles[self._region(op.region).name]
        return TensorMapSpec(name="out", operand="out", dtype=self.elem, box=(tile.box[0], self.rows, 1, 1),
                             swizzle=tile.swizzle.bytes, dims=self._map_dims())

    # ---- roles: the warpgroup roles' threads each own a row of the tile: their TMEM lane ------------------------
    def _warpgroup_lanes(self, ctx: RoleState) -> None:
        b, c = self.b, self.b.const
        quadrant = b.remu(self._warp(), c(self.T.tmem.lanes // self.T.tmem.lanes_per_warp))
        lane0 = b.mul(quadrant, c(self.T.tmem.lanes_per_warp))
        ctx.row = b.add(lane0, b.remu(self.tid, c(self.T.warp_size)))        # the thread's row: its TMEM lane
        ctx.lane_addr = b.add(self.taddr, lane_offset(lane0, b))

    def _ring_iterations(self, name: str) -> ir.Value:
        """The slots the key loop took: trips x the ring's slots a block."""
        return self.b.mul(self.trips, self.b.const(self.p.ring_of_barrier(name).uses))

    # ---- TMA loads: Q tile i starts at row row0 + 128 i --------------------------------------------------------
    def _op_copy(self, op: Copy, ctx: RoleState) -> None:
        q_regions = [r.name for r in self.p.regions.values() if r.space == "smem" and r.dims == ("M", "D")
                     and not r.aliases]
        self._copy_row = None
        if op.source == "q":
            if op.region not in q_regions:
                self._fail(f"Q copy into {op.region!r}: expected one of the Q tiles {q_regions}")
            i = q_regions.index(op.region)
            self._copy_row = self.row0 if i == 0 else self.b.add(self.row0, self.b.const(i * self.rows))
        super()._op_copy(op, ctx)

    def _coord_origin(self, dim: str, loop) -> ir.Value | None:
        if dim == "M":
            return self._copy_row
        return super()._coord_origin(dim, loop)

    # ---- MMAs ------------------------------------------------------------------------------------------------
    def _op_mma(self, op: Mma, ctx: RoleState) -> None:
        """S_i = Q_i K^T (A, B smem descriptors) or O_i (+)= P_i V (A in TMEM at P_i's columns, 16 keys = 8 columns
        per instruction; enable-input-d off at the first key block's first instruction)."""
        b, c = self.b, self.b.const
        loop = ctx.loop
        if loop is None or ctx.role is not self.mma_role:
            self._fail(f"wl.mma in role {ctx.name!r}: the MMA thread issues them, in the key loop")
        m, n, k = op.shape
        try:
            self.T.check_mma_shape(m, n, self.elem, 1)
        except ValueError as e:
            self._fail(f"wl.mma shape {list(op.shape)}: {e}")
        mma_k = self.T.mma_k_of(self.elem)
        if m != self.rows or k % mma_k:
            self._fail(f"wl.mma shape {list(op.shape)}: M must be {self.rows} (all TMEM lanes), K a multiple of "
                       f"{mma_k}")
        if op.b.source != "smem" or op.acc.source != "tmem":
            self._fail(f"wl.mma b from {op.b.source} into {op.acc.source}: B from smem, D in TMEM")
        b_reg = self._region(op.b.name)
        b_tile = self.tiles[b_reg.name]
        d = b.add(self.taddr, c(self._tmem(op.acc.name).offset))
        desc_b, _ = self._descriptor(b_reg, self._use_state(loop, self.p.ring_of_region(b_reg.name), op.b.use), None,
                                     op.k_dim)
        try:
            idesc = self.atoms.instr_descriptor(self.elem, m, n, a_major="K", b_major=b_tile.major(op.k_dim))
        except ValueError as e:
            self._fail(f"wl.mma: {e}")
        kblocks = k // mma_k
        b_steps = k_block_steps(b_tile, kblocks, mma_k, op.k_dim)
        if op.a.source == "smem":
            a_reg = self._region(op.a.name)
            a_tile = self.tiles[a_reg.name]
            if a_tile.major(op.k_dim) != "K" or op.accumulate:
                self._fail(f"wl.mma A {op.a.name!r}: S = Q K^T takes K-major Q and overwrites S")
            desc_a, _ = self._descriptor(a_reg, loop, None, op.k_dim)
            self.atoms.mma_smem(b, d, desc_a, desc_b, k_block_steps(a_tile, kblocks, mma_k, op.k_dim), b_steps, idesc,
                                lambda: b.cmp("ne", c(0), c(0)))        # S = Q K^T overwrites S
        elif op.a.source == "tmem":
            p = self._tmem(op.a.name)
            cols = mma_k * targets.ELEMENT_BITS[p.elem] // self.T.tmem.cell_bits        # 8: two 16-bit keys a cell
            if not op.accumulate:
                self._fail("wl.mma O += P V accumulates over the key blocks")
            first = b.cmp("ne", loop.kt, c(0))           # the first key block overwrites O
            self.atoms.mma_tmem_a(b, d, lambda kk: b.add(self.taddr, c(p.offset + kk * cols)), desc_b, b_steps, idesc,
                                  first)
        else:
            self._fail(f"wl.mma A from {op.a.source!r}: smem or tmem")

    # ---- register math -------------------------------------------------------------------------------------
    def _op_compute(self, op: Compute, ctx: RoleState) -> None:
        if ctx.issue != "warpgroup":
            self._fail(f"Compute in role {ctx.name!r}: register math runs in warpgroup roles")
        handler = {"online_softmax": self._softmax, "rescale": self._rescale, "lse": self._lse,
                   "normalize": self._normalize}.get(op.kind)
        if handler is None:
            self._fail(f"Compute {op.kind!r}: the sm_100a attention lowering knows online_softmax, rescale, lse "
                       "and normalize")
        handler(op, ctx)

    def _tile_index(self, name: str) -> int:
        digits = name.lstrip("abcdefghijklmnopqrstuvwxyz_")
        if not digits.isdigit() or int(digits) >= self.q_tiles:
            self._fail(f"{name!r}: expected a per-Q-tile name ending in 0..{self.q_tiles - 1}")
        return int(digits)

    def _corr_ptr(self, tile: int, which: int, ctx: RoleState) -> ir.Value:
        """&correction[tile][which][row] (which 0: the factor, 1: the row sum)."""
        b, c = self.b, self.b.const
        at = b.add(c(self.corr.offset + (tile * 2 + which) * self.T.tmem.lanes * 4), b.mul(ctx.row, c(4)))
        return b.gep(self.base, at)

    def _load_f32(self, ptr: ir.Value) -> ir.Value:
        return llvm.LoadOp(self.b.f32, ptr, alignment=4, loc=self.b.loc("ld")).result

    def _row_index(self, tile: int, ctx: RoleState) -> ir.Value:
        """The thread's query row (global in the head): row0 + 128 tile + its lane."""
        return self.b.add(self.row0, self.b.add(self.b.const(tile * self.rows), ctx.row))

    def _thread_rows(self, ctx: RoleState, tile: int) -> tuple[list, None]:
        """The thread's one row (its TMEM lane of Q tile `tile`); its columns count from the block's first."""
        return [self._row_index(tile, ctx)], None

    def _tile_row0(self, tile: int) -> ir.Value:
        return self.b.add(self.row0, self.b.const(tile * self.rows))

    def _softmax(self, op: Compute, ctx: RoleState) -> None:
        """One key block of row `ctx.row` of Q tile i (module docstring, softmax<i>): `_softmax_block` on the
        thread's TMEM lane of S_i, CHUNK columns at a time in two passes (the whole row would not fit the role's
        128 registers a thread), P chunk by chunk into S_i's columns (P's chunk h lands on S columns h * CHUNK / 2 ..,
        which the second pass has already read), the max rule FA4's thresholded one. Then the factor and the running
        row sum go to the correction rows in smem, once the P stores are done."""
        b = self.b
        s_name, max_name, sum_name = op.reads
        if ctx.loop is None or len(op.writes) != 4:
            self._fail(f"Compute online_softmax {list(op.writes)} outside the key loop or not P, max, sum, factor")
        i = self._tile_index(s_name)
        s, p = self._tmem(s_name), self._tmem(op.writes[0])
        m_new, l_new, (factor,), _ = self._softmax_block(ctx, i, (ctx.lane_addr, s.offset), (ctx.lane_addr, p.offset),
                                                         ctx.values[max_name], ctx.values[sum_name])
        self.atoms.tmem_wait_store()
        b.store(factor, self._corr_ptr(i, 0, ctx), alignment=4)
        b.store(l_new[0], self._corr_ptr(i, 1, ctx), alignment=4)
        ctx.values.update({max_name: m_new, sum_name: l_new})

    def _rescale(self, op: Compute, ctx: RoleState) -> None:
        """O_i *= the row's factor, by the warp's quadrant, only when one of its 32 rows has a factor != 1 (a
        warp-uniform branch: tcgen05.ld/st are warp-collective), 32 columns at a time."""
        b, c = self.b, self.b.const
        corr_name, o_name = op.reads
        i = self._tile_index(o_name)
        o = self._tmem(o_name)
        factor = self._load_f32(self._corr_ptr(i, 0, ctx))
        need = b.select(b.cmpf("une", factor, b.constf(1.0)), c(1), c(0))
        anyone = nvvm.ReduxOp(b.i32, need, nvvm.ReduxKind.OR, c(-1), loc=b.loc("any")).result
        with b.if_(b.cmp("ne", anyone, c(0))):
            for h in range(self.D // CHUNK):
                at = b.add(ctx.lane_addr, c(o.offset + h * CHUNK))
                raw = self.atoms.tmem_load(b, at, CHUNK)
                self.atoms.tmem_wait_load()
                out = b.undef(ir.VectorType.get([CHUNK], b.i32))
                for j in range(CHUNK):
                    v = b.mulf(b.bitcast(b.extractelement(raw, j, "o"), b.f32), factor)
                    out = b.insertelement(out, b.bitcast(v, b.i32), c(j))
                self.atoms.tmem_store(b, at, out)
            self.atoms.tmem_wait_store()

    def _lse(self, op: Compute, ctx: RoleState) -> None:
        """lse = (m + log2(sum)) ln 2 with m in scaled log2 units; -inf for a row that saw no key."""
        b = self.b
        max_name, sum_name = op.reads
        (m,), (total,) = ctx.values[max_name], ctx.values[sum_name]          # the thread's one row
        log2_norm = self.max_rule.log2_norm(b, m, total, self._log2_unit())
        ctx.values[op.writes[0]] = b.mulf(log2_norm, b.constf(LN2))

    def _normalize(self, op: Compute, ctx: RoleState) -> None:
        """1 / row sum (0 for a row that saw no key), from the correction rows: the store scales O by it. A tile with
        no key block (causal rows before the first key, a packed sequence without keys, a mask keeping nothing) has
        no row sum there: the softmax never ran, so its sum is 0 without reading the rows."""
        b = self.b
        o_name, _ = op.reads
        i = self._tile_index(o_name)
        if_op = scf.IfOp(b.cmp("sgt", self.trips, b.const(0)), [b.f32], has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            scf.YieldOp([self._load_f32(self._corr_ptr(i, 1, ctx))])
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp([b.constf(0.0)])
        total = if_op.results[0]
        empty = b.cmpf("oeq", total, b.constf(0.0))
        ctx.values[f"inv{i}"] = b.select(empty, b.constf(0.0), b.divf(b.constf(1.0), total))

    # ---- stores --------------------------------------------------------------------------------------------
    # ---- O's epilogue (AttentionLowering._store_out): O_i / row sum staged on Q_i's bytes ---------------------------
    def _out_staging(self, op: Store) -> tuple:
        region, nb = self._region(op.region), self.p.named_barriers.get(op.barrier)
        tile = self.tiles[region.name]
        if list(op.tile) != [self.rows, self.D] or tile.shape != (self.rows, self.D):
            self._fail(f"Store tile {list(op.tile)} through {region.name!r} {tile.shape}: O_i is "
                       f"[{self.rows}, {self.D}]")
        if nb is None or nb.threads != self.T.warpgroup_threads:
            self._fail(f"Store of out syncs on {op.barrier!r}: a named barrier of the warpgroup's "
                       f"{self.T.warpgroup_threads} threads")
        return region, nb, tile

    def _out_barrier(self, nb, ctx: RoleState) -> int:
        return nb.id

    def _before_out_writes(self, ctx: RoleState, region, bar, nb) -> None:
        """O_i's staging tile lies on Q_i's bytes, free once the last MMA reading Q_i is done (the o<i>_full wait
        before this). A tile with no key block ran no MMA, so nothing waited for Q_i's copy, which may still be
        landing: wait for it (its full barrier's one phase) before writing over it."""
        b, c = self.b, self.b.const
        rings = [self.p.ring_of_region(name) for name in region.aliases]
        q_ring = next((r for r in rings if r is not None and r.stages == 1), None)
        if q_ring is None:
            self._fail(f"staging region {region.name!r} aliases {list(region.aliases)}: expected a Q tile's region")
        with b.if_(b.cmp("eq", self.trips, c(0))):
            self.rings[q_ring.full].at(0).wait(c(0))

    def _out_values(self, op: Store, ctx: RoleState, ch) -> list:
        """The thread's row of O_i, CHUNK columns at a time by tcgen05.ld (none when the tile had no key block: O is
        then 0), times 1 / row sum (`normalize`)."""
        b = self.b
        i = self._tile_index(op.value)
        inv = ctx.values.get(f"inv{i}")
        if inv is None:
            self._fail(f"Store of {op.value!r} before its normalize")
        if_op = scf.IfOp(b.cmp("sgt", self.trips, b.const(0)), [b.f32] * ch.size, has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            scf.YieldOp(self.atoms.read_rows(b, (ctx.lane_addr, self._tmem(op.value).offset), ch, "o"))
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp([b.constf(0.0)] * ch.size)
        return [b.mulf(v, inv) for v in if_op.results]

    def _out_rows(self, ctx: RoleState) -> tuple:
        """The thread's row of O_i (its TMEM lane) is the staging tile's row; its columns count from the chunk's."""
        return (lambda h: ctx.row), None

    def _out_box(self, op: Store, ctx: RoleState, tile) -> tuple:
        """Q tile i's rows: row0 + 128 i, the staging tile's whole."""
        return self.b.add(self.row0, self.b.const(self._tile_index(op.value) * self.rows)), None

    def _store_lse(self, op: Store, ctx: RoleState) -> None:
        """lse[b, h, row] (float32 [B, Hq, Sq]) for the thread's row when < Sq and the lse pointer is not null."""
        b, c = self.b, self.b.const
        a = self.args
        i = self._tile_index(op.value)
        row = self._row_index(i, ctx)
        given = b.cmp("ne", b.ptrtoint(a["lse"], b.i64), c(0, b.i64))
        with b.if_(b.and_(given, b.cmp("slt", row, a["Sq"]))):
            plane = self._lse_plane()
            b.store(ctx.values[op.value], b.gep(a["lse"], b.add(plane, b.ext64(row)), b.f32), alignment=4)
