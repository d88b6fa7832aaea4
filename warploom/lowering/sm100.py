"""sm_100a (Blackwell) GEMM lowering: a planned tcgen05 kernel `Program` -> one `gpu.module` of NVVM/LLVM ops.

The kernel these passes plan (wl-tile{target=sm_100a}, wl-pipeline, wl-specialize, wl-plan-tmem, wl-plan-smem,
wl-plan-barriers) has three warp roles and its accumulator in Tensor Memory:

    warp 0     producer   one elected thread: per K tile, wait ab_empty, expect_tx on ab_full, TMA A and B;
                          at the end, wait each ab_empty stage once more (the last releases landed: _drain)
    warp 1     mma        allocates TMEM; one elected thread per tile: wait acc_empty, per K tile wait ab_full,
                          BK/16 tcgen05.mma (kind::f16, D in this tile's accumulator stage, enable-input-d off for
                          the tile's first), tcgen05.commit -> ab_empty; after the K loop commit -> acc_full.
                          At the CTA's last tile the whole warp syncs on tmem_free with the epilogue, then frees TMEM
    warps 2-5  epilogue   per tile: wait acc_full, each warp tcgen05.ld's its lane quadrant (warp % 4) of the
                          accumulator 32 columns at a time (tcgen05.wait::ld each), converts and stores its rows
                          of C; then each thread arrives on acc_empty; at the last tile bar.arrive on tmem_free

Everything else is the sm_90a GEMM lowering's (`_GemmLowering`: parameters, tensor maps, the smem base, mbarrier
init, TMA box loops, the persistent tile walk) with the sm_100a target's numbers. Fences: tcgen05.fence
::after_thread_sync after every wait or barrier a tcgen05 role passes, ::before_thread_sync before every arrive or
barrier that publishes tcgen05 work (PTX ISA 9.7.16.6 "tcgen05-memory-consistency-model"); the TMEM address is
written by tcgen05.alloc before the CTA barrier and read after it.

The descriptors come from `warploom.layout`: the smem descriptors' static bits from `Sm100SmemDescriptor.for_tile`
(the start address added at run time), the instruction descriptor from `Sm100InstrDescriptor` (dtypes, M, N,
majors). No Blackwell GPU exists here: these kernels are checked by ptxas, by their SASS and by the emulator,
and have not run on hardware.
"""
from __future__ import annotations

from mlir import ir

from warploom import targets
from warploom.kernel import Arrive, Copy, Loop, Mma, Program, Role, Store, Sync, Wait
from warploom.layout import Sm100InstrDescriptor, Sm100SmemDescriptor
from warploom.lowering.emit import sync, tcgen05, tma
from warploom.lowering.emit import sync as sync_ops
from warploom.runtime.artifact import TensorMapSpec

from .sm90 import LoweredKernel, _GemmLowering, _Loop, _Role, kernel_name  # noqa: F401  (kernel_name: same naming)

T = targets.get("sm_100a")
LD_COLUMNS = 32               # columns per tcgen05.ld in the epilogue: 32 registers a thread at a time
OPS = {Loop: "loop", Wait: "wait", Arrive: "arrive", Copy: "copy", Mma: "mma", Store: "store", Sync: "sync"}
WL_NAMES = ("wl.k_loop", "wl.wait", "wl.arrive_expect_tx", "wl.arrive", "wl.async_load", "wl.mma", "wl.store_tile",
            "wl.named_barrier_sync", "wl.named_barrier_arrive")


def lower_kernel(program: Program, name: str, context: ir.Context | None = None) -> LoweredKernel:
    """Lower a planned sm_100a GEMM kernel; ValueError names what cannot be lowered and why."""
    from warploom.dialect import make_context
    return _Sm100GemmLowering(program, name).lower(context or make_context())


class _Sm100GemmLowering(_GemmLowering):
    T = T
    OPS = OPS
    OP_NAMES = WL_NAMES
    WARPGROUP_ROLES = False
    SMEM_DESCRIPTOR = Sm100SmemDescriptor

    # ---- configuration ----------------------------------------------------------------------------
    def _read_config(self) -> None:
        if self.p.target != T.name:
            self._fail(f"the kernel is planned for {self.p.target}; this lowering is for {T.name}")
        self.group = int(self.p.attrs.get("cta_group", 1))          # 2: a CTA pair (cta_group::2)
        if self.group not in (1, 2):
            self._fail(f"cta_group {self.group}: tcgen05 takes cta_group 1 or 2")
        self.pair = self.group == 2
        self.WALK = "persistent_pairs" if self.pair else "persistent"
        super()._read_config()
        if self.pair and not self.persistent:
            self._fail("a CTA pair's GEMM is lowered persistent only (grid persistent_pairs)")

    def _cluster(self, attrs) -> tuple[int, int, int]:
        """(2, 1, 1) for a CTA pair, else no cluster."""
        want = [self.group, 1, 1]
        if list(attrs.get("cluster", [1, 1, 1])) != want:
            self._fail(f"cluster {attrs.get('cluster')} with cta_group {self.group}: expected {want}")
        return tuple(want)

    def _check_plan(self) -> None:
        """Roles of warps covering the block once each; smem regions and barriers placed; TMEM regions placed in
        the allocation; smem for the run-time base round-up."""
        p = self.p
        for rank in range(self.group):          # in every CTA of the cluster, each warp has one role
            warps = sorted(w for role in p.roles if role.rank in (None, rank) for w in role.warp_range)
            if warps != list(range(self.threads // T.warp_size)):
                where = f" in CTA {rank} of the pair" if self.pair else ""
                self._fail(f"roles cover warps {warps}{where}; {self.threads} threads need each of "
                           f"0..{self.threads // T.warp_size - 1} exactly once")
        if any(r.regs is not None for r in p.roles):
            self._fail("a role sets a register budget: the sm_100a GEMM's warp roles keep the launch's share "
                       "(setmaxnreg acts on whole warpgroups)")
        self.launch_regs = None
        smem = check_placement(self)
        self.tiles = {r.name: self._tile(r) for r in smem if r.dims}
        slots = [r for r in smem if not r.dims and r.elem == "i32"]
        if len(slots) != 1:
            self._fail(f"expected one i32 smem word for the TMEM address (wl-specialize's tmem_addr), found "
                       f"{[r.name for r in slots]}")
        self.tmem_slot = slots[0]
        owners = [r for r in p.roles if any(isinstance(o, Mma) for o in r.walk())]
        if len(owners) != 1 or owners[0].issue != "thread" or owners[0].warps != 1:
            self._fail(f"roles issuing MMAs: {[r.name for r in owners]}; tcgen05.mma needs one one-thread role in "
                       "one warp (it allocates and frees TMEM too)")
        self.mma_role = owners[0]
        # the warp that allocates and frees TMEM in each CTA: the MMA role's (in a pair, the other CTA runs
        # another role, the relay, in that warp)
        self.tmem_roles = {r.name for r in p.roles if self.mma_role.first_warp in r.warp_range}
        self.mma_k = T.mma_k_of(self.elem)

    def _regs(self, role: Role) -> int:
        return 0

    # ---- parameters: C is stored by TMA (its tensor map) ------------------------------------------------
    def _param_list(self) -> list[tuple[str, str]]:
        """Tensor maps by value (a, b, then c), then M, N, K."""
        return [(n, "tensormap") for n in self.tmaps] + [(s, "i32") for s in ("M", "N", "K")]

    def _bind_args(self, args: dict) -> None:
        self.M, self.N, self.K = (args[n] for n in ("M", "N", "K"))

    def _store_map(self, op: Store) -> TensorMapSpec:
        """C's TMA map (N, M innermost first): a box of one chunk (one swizzle span of columns by the tile's rows)."""
        if op.output != "c":
            self._fail(f"store of {op.output!r} through smem: the GEMM stages c only")
        tile = self.tiles[self._region(op.region).name]
        if tile.num_boxes != 1:
            self._fail(f"staging region {op.region!r} {tile.shape}: one chunk must be one TMA box")
        return TensorMapSpec(name="c", operand="c", dtype=self.elem, box=tile.box, swizzle=tile.swizzle.bytes,
                             dims=(tile.dims[1], tile.dims[0]))

    # ---- prologue: TMEM allocation around the CTA barrier -------------------------------------------
    def _before_cta_barrier(self) -> None:
        b, c = self.b, self.b.const
        self.warp = b.divu(self.tid, c(T.warp_size))
        self.slot_ptr = b.gep(self.base, c(self.tmem_slot.offset))
        with b.if_(b.cmp("eq", self.warp, c(self.mma_role.first_warp))):
            tcgen05.alloc(b, self.slot_ptr, self.tmem_columns, self.group)
            tcgen05.relinquish(self.group)
            tcgen05.fence_before()

    def _after_cta_barrier(self) -> None:
        if self.pair:       # both CTAs' barriers are initialised (and fenced for the cluster) before either uses them
            sync_ops.cluster_barrier()
        tcgen05.fence_after()
        self.taddr = _load_i32(self.b, self.slot_ptr)

    # ---- roles -----------------------------------------------------------------------------------------
    def _roles(self) -> None:
        """if warp in role0 { role0 } else if warp in role1 { ... } else { last role }; a role with a rank runs in
        that CTA of the pair only. A pair's CTAs then meet at a cluster barrier, so that neither exits while the
        other may still arrive on its barriers or read its smem (the leader's MMAs read both CTAs' operands)."""
        b, c = self.b, self.b.const
        roles = sorted(self.p.roles, key=lambda r: (r.first_warp, r.rank if r.rank is not None else -1))
        self.rank = sync_ops.cluster_rank(b) if self.pair else None

        def chain(i: int) -> None:
            if i == len(roles) - 1:
                self._role(roles[i])
                return
            r = roles[i]
            cond = (b.cmp("eq", self.warp, c(r.first_warp)) if r.warps == 1
                    else b.cmp("ult", self.warp, c(r.warp_range.stop)))   # earlier roles took the lower warps
            if r.rank is not None:
                if not self.pair:
                    self._fail(f"role {r.name!r} runs in CTA {r.rank} of a cluster, but the kernel has none")
                cond = b.and_(cond, b.cmp("eq", self.rank, c(r.rank)))
            then, orelse = b.if_else(cond)
            with then:
                self._role(r)
            with orelse:
                chain(i + 1)

        chain(0)
        if self.pair:
            sync_ops.cluster_barrier()

    def _role(self, role: Role) -> None:
        b, c = self.b, self.b.const
        ctx = _Role(role=role, first_wg=0, accs={}, acc_n={})
        ctx.tcgen05 = role.name in self.tmem_roles or any(isinstance(o, Store) for o in role.walk())
        if role.issue == "thread":
            ctx.elected = sync.elect_sync(b)
            if self._loaded_inputs(role):
                with b.if_(ctx.elected):
                    for source in self._loaded_inputs(role):
                        tma.prefetch_tensormap(self.tmap_args[source])
            self._tile_loop(role.body, ctx)
            self._drain(role, ctx)
            if role.name in self.tmem_roles:    # every lane of the warp, after the epilogue said it is done
                tcgen05.fence_after()
                tcgen05.dealloc(b, self.taddr, self.tmem_columns, self.group)
        elif role.issue == "warp":
            ctx.lane = b.remu(self.tid, c(T.warp_size))
            ctx.storer = b.cmp("eq", self.tid, c(role.first_warp * T.warp_size))   # issues the role's TMA stores
            self._tile_loop(role.body, ctx)
            if any(isinstance(o, Store) and o.region is not None for o in role.walk()):
                with b.if_(ctx.storer):         # the last stores have read their smem before the CTA exits
                    tma.bulk_wait_group(0, read=True)
        else:
            self._fail(f"role {role.name!r} has issue = {role.issue!r}; the sm_100a lowering knows 'thread' "
                       "and 'warp'")

    def _drain(self, role: Role, ctx: _Role) -> None:
        """A role that waits for the operand ring's stages back (the producer, parity phase^1) waits once more for
        each stage after its last K iteration: every release the MMA thread's tcgen05.commit sends to this CTA's
        barriers (a pair's leader multicasts them to both) has landed before the CTA exits, so no late arrival
        writes smem the SM may have handed to the next CTA. A stage this CTA never used passes at once (a fresh
        barrier completes parity phase^1 = 1 from the start)."""
        b, c = self.b, self.b.const
        names = []
        for op in role.walk():
            ring = self.p.ring_of_barrier(op.barrier) if isinstance(op, Wait) else None
            if ring is not None and ring.counts != "tile" and op.parity == "phase^1" and op.barrier not in names:
                names.append(op.barrier)
        if not names:
            return
        with b.if_(ctx.elected):
            for i in range(self.stages):
                state = self._loop_state_n(c(0), b.add(self.cta_iterations, c(i)), self.stages)
                for name in names:
                    self.rings[name].at(state.stage).wait(b.xor(state.phase, c(1)))

    def _tile_loop(self, ops, ctx: _Role) -> None:
        """The role's ops once (grid) or once per tile of this CTA (persistent); self.tile_j counts the CTA's tiles
        (the accumulator ring's position), self.last_tile is true at its last one."""
        b, c = self.b, self.b.const
        if not self.persistent:
            self.tile_j, self.last_tile = c(0), b.cmp("eq", c(0), c(0))
            self.cta_iterations = self.trips
            self._tile_states()
            self._top_ops(ops, ctx)
            return
        from warploom.runtime import rules
        n_tiles, m_tiles = rules.tile_counts(self.grid[0], {"M": self.M, "N": self.N}, b)
        # a pair walks the tiles as one: cluster c of the grid's clusters takes tiles c, c + clusters, ...
        first = b.sreg("clusterid" if self.pair else "ctaid", "x", "cta")
        step = b.sreg("nclusterid" if self.pair else "nctaid", "x", "ncta")
        total = b.mul(m_tiles, n_tiles)
        # the K iterations this CTA's tiles take in all: tiles first, first + step, ... below total
        mine = b.divu(b.add(b.sub(total, b.minu(first, total)), b.sub(step, c(1))), step)
        self.cta_iterations = b.mul(mine, self.trips)
        with b.for_(first, total, step, iv=b.fresh("tile")) as loop:
            tile = loop.iv
            self.tile_j = b.divu(b.sub(tile, first), step)
            self.it_base = b.mul(self.tile_j, self.trips)
            self.last_tile = b.cmp("uge", b.add(tile, step), total)
            self._tile_states()
            self.origin = rules.tile_origin(self.grid[0], tile, n_tiles, b)
            if self.pair:       # this CTA's rows of the pair's tile
                self.origin["M"] = b.add(self.origin["M"], b.mul(self.rank, c(self.BM // self.group)))
            self._top_ops(ops, ctx)
        self.it_base, self.origin = None, {}

    def _coord_origin(self, dim: str, loop: _Loop) -> ir.Value | None:
        """TMA coordinates: a pair's CTA loads its own rows of A and its half of B's columns."""
        if dim == "N" and self.pair:
            return self.b.add(self.origin["N"], self.b.mul(self.rank, self.b.const(self.BN // self.group)))
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

    def _top_ops(self, ops, ctx: _Role) -> None:
        """A role's ops at tile level. In a one-thread role the elected lane runs them, except the named-barrier
        syncs, which the whole warp takes (bar.sync counts threads)."""
        if ctx.issue != "thread":
            self._ops(ops, ctx)
            return
        run_elected(self, ops, ctx)

    # ---- ring state -----------------------------------------------------------------------------------
    def _state(self, barrier: str, ctx: _Role) -> tuple[_Loop, int]:
        """(ring state, stages) for an op on `barrier`: the K loop's iteration, or for a ring counted in tiles
        the CTA's tile count."""
        ring = self.p.ring_of_barrier(barrier)
        if ring is not None and ring.counts == "tile":
            if ctx.loop is not None:
                self._fail(f"barrier {barrier!r} advances per tile but is used inside the K loop")
            return self.tile_cache[("tile", ring.stages)], ring.stages
        return self._need_loop_named(barrier, ctx), self.stages

    def _need_loop_named(self, barrier: str, ctx: _Role) -> _Loop:
        if ctx.loop is None:
            self._fail(f"an op on barrier {barrier!r} in role {ctx.name!r} is outside the K loop; its stage would "
                       "be undefined")
        return ctx.loop

    def _loop_state_n(self, kt: ir.Value, it: ir.Value, stages: int) -> _Loop:
        b, c = self.b, self.b.const
        return _Loop(kt, it, b.remu(it, c(stages)), b.and_(b.divu(it, c(stages)), c(1)), {})

    def _bar(self, name: str, ctx: _Role) -> tuple[sync.Mbarrier, _Loop]:
        state, stages = self._state(name, ctx)
        ring = self._ring(name)
        if ring.count != stages:
            self._fail(f"mbarrier ring {name!r} has {ring.count} barriers for {stages} stages")
        key = ("bar", name)
        if key not in state.cache:
            state.cache[key] = self.rings[name].at(state.stage)
        return state.cache[key], state

    # ---- ops --------------------------------------------------------------------------------------------
    def _op_loop(self, op: Loop, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        self._check_gemm_loop(op, ctx)
        with b.for_(c(0), self.trips, c(1), iv=b.fresh("kt")) as loop:
            kt = loop.iv
            it = kt if self.it_base is None else b.add(self.it_base, kt)
            ctx.loop = self._loop_state(kt, it)
            self._ops(op.body, ctx)
            ctx.loop = None

    def _op_wait(self, op: Wait, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        if op.lag:
            self._fail(f"wl.wait lag = {op.lag}: the sm_100a GEMM waits on its own iteration's stage")
        bar, state = self._bar(op.barrier, ctx)
        if op.parity not in ("phase", "phase^1"):
            self._fail(f"wl.wait parity {op.parity!r}; expected 'phase' (consumer) or 'phase^1' (producer)")
        bar.wait(state.phase if op.parity == "phase" else b.xor(state.phase, c(1)))
        if ctx.tcgen05:
            tcgen05.fence_after()

    def _op_arrive(self, op: Arrive, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        if op.lag:
            self._fail(f"wl.arrive lag = {op.lag}: the sm_100a GEMM frees its own iteration's stage")
        if op.tx_bytes:
            self._arrive_expect_tx(op, ctx)
            return
        bar, _ = self._bar(op.barrier, ctx)
        if op.cta not in ("own", "leader", "pair") or (op.cta != "own" and not self.pair):
            self._fail(f"wl.arrive at the {op.cta!r} CTA's barrier in a kernel of cluster {list(self.cluster)}")
        if op.per == "commit":
            if ctx.role is not self.mma_role:
                self._fail(f"tcgen05.commit arrival on {op.barrier!r} in role {ctx.name!r}, which issues no MMAs")
            if op.cta == "leader":
                self._fail(f"tcgen05.commit on the leader's {op.barrier!r}: the MMA thread runs in the leader")
            # pair: multicast to the barrier at the same offset in both CTAs (ranks 0 and 1)
            tcgen05.commit(b, bar.addr, self.group, (1 << self.group) - 1 if op.cta == "pair" else None)
        elif op.per in ("thread", "role") and (ctx.issue == "warp") == (op.per == "thread"):
            if ctx.tcgen05 and op.per == "thread":
                tcgen05.fence_before()
            if op.cta == "leader":            # the pair's rank-0 CTA's instance of the barrier
                sync_ops.remote_arrive(b, sync_ops.mapa(b, bar.addr, c(0)), scope="cluster")
            elif op.cta == "own":
                bar.arrive()
            else:
                self._fail(f"wl.arrive per {op.per!r} at both CTAs' {op.barrier!r}: only a commit multicasts")
        else:
            self._fail(f"wl.arrive per {op.per!r} in role {ctx.name!r} (issue {ctx.issue!r}) is not lowered")

    def _op_sync(self, op: Sync, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        nb = self.p.named_barriers.get(op.barrier)
        if nb is None or nb.count != 1:
            self._fail(f"named barrier {op.barrier!r}: the sm_100a GEMM syncs on single named barriers")
        if op.slot != "own" or op.warpgroup is not None:
            self._fail(f"named barrier {op.barrier!r} slot {op.slot!r}: no per-warpgroup turns here")
        cond = {"each": None, "last": self.last_tile}.get(op.tiles, False)
        if cond is False:
            self._fail(f"named barrier {op.barrier!r} at tiles {op.tiles!r}: the sm_100a GEMM syncs at each or the "
                       "last tile")

        def emit():
            if ctx.tcgen05:
                tcgen05.fence_before()
            if op.arrive_only:
                sync.named_barrier_arrive(b, nb.id, nb.threads)
            else:
                sync.named_barrier_sync(b, nb.id, nb.threads)
                if ctx.tcgen05:
                    tcgen05.fence_after()

        if cond is None:
            emit()
        else:
            with b.if_(cond):
                emit()

    def _acc_columns(self, name: str, ctx: _Role) -> tuple[ir.Value, int]:
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

    def _op_mma(self, op: Mma, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        loop = self._need_loop(op, ctx)
        if ctx.role is not self.mma_role:
            self._fail(f"wl.mma in role {ctx.name!r}")
        if op.lag:
            self._fail(f"wl.mma lag = {op.lag}: the GEMM's MMAs read their own iteration's stage")
        m, n, k = op.shape
        try:
            T.check_mma_shape(m, n, self.elem, self.group)
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
        if extent_a != {"M": m // self.group, "K": k} or extent_b != {"N": n // self.group, "K": k}:
            self._fail(f"wl.mma shape {list(op.shape)} does not match buffers {a_reg.name!r} {list(a_reg.shape)} "
                       f"and {b_reg.name!r} {list(b_reg.shape)}")
        a_major, b_major = a_tile.major(op.k_dim), b_tile.major(op.k_dim)
        try:
            T.check_mma_major(self.elem, a_major)
            T.check_mma_major(self.elem, b_major)
            idesc = Sm100InstrDescriptor(self.elem, self.elem, "f32", m, n, a_major=a_major,
                                         b_major=b_major).encode()
        except ValueError as e:
            self._fail(f"wl.mma: {e}")
        d, _ = self._acc_columns(op.acc.name, ctx)
        desc_a, _ = self._descriptor(a_reg, loop, None, op.k_dim)
        desc_b, _ = self._descriptor(b_reg, loop, None, op.k_dim)
        first_k = b.cmp("ne", loop.kt, c(0))            # the tile's first K tile overwrites the accumulator
        on = b.cmp("eq", c(0), c(0))
        for kk in range(k // self.mma_k):
            da = desc_a if kk == 0 else b.add(desc_a, c(a_tile.k_block_offset(kk, self.mma_k) >> 4, b.i64))
            db = desc_b if kk == 0 else b.add(desc_b, c(b_tile.k_block_offset(kk, self.mma_k) >> 4, b.i64))
            tcgen05.mma(b, d, da, db, idesc, first_k if kk == 0 else on, self.group)

    def _op_store(self, op: Store, ctx: _Role) -> None:
        """C from the accumulator, through smem and TMA, one chunk (the staging tile: the tile's 128 rows by one
        128-byte swizzle span of columns) at a time, alternating the staging region's two buffers. Warp w reads
        TMEM lanes 32 (w % 4) .. + 31 (its quadrant: PTX ISA 9.7.16.8.1), thread i the row 32 (w % 4) + i, 32
        columns per tcgen05.ld (tcgen05.wait::ld before use), converts them and writes its row of the chunk as
        16-byte stores at the swizzled addresses the layout gives; then fence.proxy.async, a sync of the epilogue
        warps, and the role's first thread TMA-stores the chunk (rows past M and columns past N are dropped by the
        tensor map) and commits it. Before a buffer is written again that thread waits until at most one store is
        pending (wait_group.read 1: the store that read it two chunks ago is done) and the warps sync."""
        b, c = self.b, self.b.const
        if ctx.issue != "warp" or ctx.loop is not None:
            self._fail(f"wl.store_tile in role {ctx.name!r}: the epilogue warps store, outside the K loop")
        if op.output != "c" or op.region is None or op.barrier is None:
            self._fail(f"wl.store_tile of {op.output!r}: the sm_100a GEMM stores c through a staging smem region "
                       "(wl-pipeline) with a named barrier (wl-specialize)")
        taddr, per_stage = self._acc_columns(op.value, ctx)
        acc, staging = self._region(op.value), self._region(op.region)
        bm = self.BM // self.group                # a pair's CTA stores its own rows
        if list(op.tile) != [bm, self.BN] or list(acc.shape) != [bm, self.BN] or per_stage != self.BN:
            self._fail(f"wl.store_tile tile {list(op.tile)} must be the accumulator's [{bm}, {self.BN}]")
        quadrants = T.tmem.lanes // T.tmem.lanes_per_warp
        if ctx.role.warps != quadrants:
            self._fail(f"role {ctx.name!r} has {ctx.role.warps} warps; the epilogue needs {quadrants}, one per TMEM "
                       "lane quadrant")
        tile = self.tiles[staging.name]
        rows, cols = tile.shape
        nb = self.p.named_barriers.get(op.barrier)
        if rows != bm or self.BN % cols or cols % LD_COLUMNS or staging.stages != 2 or nb is None or \
                nb.threads != ctx.role.warps * T.warp_size:
            self._fail(f"staging region {staging.name!r} ({staging.stages} x {list(tile.shape)}) and barrier "
                       f"{op.barrier!r}: expected 2 chunks of [{bm}, n] with n dividing {self.BN}, synced by "
                       f"the {ctx.role.warps * T.warp_size} epilogue threads")
        quadrant = b.remu(self.warp, c(quadrants))
        lane0 = b.mul(quadrant, c(T.tmem.lanes_per_warp))
        row_addr = b.add(taddr, b.mul(lane0, c(1 << 16)))           # lane field: bits 16..
        row = b.add(lane0, ctx.lane)                                 # the thread's row of the tile
        row_at = b.mul(row, c(tile.span))
        ty = {"bf16": ir.BF16Type, "f16": ir.F16Type}[self.elem].get()
        pair_f32, pair_ty = ir.VectorType.get([2], b.f32), ir.VectorType.get([2], ty)
        quad_i32 = ir.VectorType.get([4], b.i32)
        elem_bytes = tile.elem_bits // 8
        granule = 16 // elem_bytes                                   # elements per 16-byte store
        m0, n0 = self.origin["M"], self.origin["N"]
        chunk_bytes = staging.size // staging.stages

        def sync():
            tcgen05.fence_before()
            sync_ops.named_barrier_sync(b, nb.id, nb.threads)
            tcgen05.fence_after()

        for j in range(self.BN // cols):
            with b.if_(ctx.storer):              # this buffer's previous store (two chunks ago) has read it
                tma.bulk_wait_group(1, read=True)
            sync()
            vals = []
            for h in range(cols // LD_COLUMNS):
                v = tcgen05.ld_32x32b(b, b.add(row_addr, c(j * cols + h * LD_COLUMNS)), LD_COLUMNS)
                vals.append(v)
            tcgen05.wait_ld()
            f32 = [b.bitcast(b.extractelement(v, i, "d"), b.f32) for v in vals for i in range(LD_COLUMNS)]
            base = staging.offset + (j % staging.stages) * chunk_bytes
            for g in range(cols // granule):
                quad = b.undef(quad_i32)
                for p in range(granule // 2):
                    u = b.insertelement(b.undef(pair_f32), f32[g * granule + 2 * p], c(0))
                    u = b.insertelement(u, f32[g * granule + 2 * p + 1], c(1))
                    quad = b.insertelement(quad, b.bitcast(b.fptrunc(u, pair_ty), b.i32), c(p))
                at = tile.swizzle.apply_with(b, b.add(row_at, c(g * 16)))
                b.store(quad, b.gep(self.base, b.add(at, c(base))), alignment=16)
            sync_ops.fence_proxy_async_smem()
            sync()
            with b.if_(ctx.storer):
                tma.tma_store(b, self.tmap_args["c"], b.gep(self.base, c(base)), [b.add(n0, c(j * cols)), m0])
                tma.bulk_commit_group()


def check_placement(lowering) -> list:
    """What an sm_100a kernel's plan must hold before it is lowered: every region placed, TMEM regions inside the
    allocation (sets lowering.tmem_columns), mbarriers aligned, smem_bytes covering the plan and the run-time base
    round-up. Returns the smem regions."""
    p, fail = lowering.p, lowering._fail
    lowering.tmem_columns = p.attrs.get("tmem_columns")
    if lowering.tmem_columns is None:
        fail("the kernel has no 'tmem_columns' attribute: run wl-plan-tmem first")
    for region in p.regions.values():
        if region.offset is None or region.size is None:
            fail(f"buffer {region.name!r} has no offset: run wl-plan-smem and wl-plan-tmem first")
        if region.space == "tmem" and region.offset + region.size > lowering.tmem_columns:
            fail(f"TMEM region {region.name!r} (columns {region.offset}..{region.offset + region.size - 1}) "
                 f"is outside the {lowering.tmem_columns}-column allocation")
    for bar in p.barriers.values():
        if bar.offset is None or bar.offset % T.mbarrier_bytes:
            fail(f"mbarrier {bar.name!r} needs an {T.mbarrier_bytes}-byte aligned offset (run wl-plan-barriers)")
    smem = [r for r in p.regions.values() if r.space == "smem"]
    end = max([r.offset + r.size for r in smem] + [b.offset + T.mbarrier_bytes * b.count for b in p.barriers.values()])
    if lowering.smem_bytes < end + T.smem_base_align - 1:
        fail(f"smem_bytes = {lowering.smem_bytes} does not cover the plan's {end} B plus {T.smem_base_align - 1} B for "
             f"the run-time {T.smem_base_align} B alignment of the base")
    return smem


def run_elected(lowering, ops, ctx: _Role) -> None:
    """A one-thread role's ops (sm_100a kernels): the elected lane (ctx.elected) runs them, except the named-barrier
    syncs, which the whole warp takes (bar.sync counts threads)."""
    run: list = []
    for op in list(ops) + [None]:
        if op is None or isinstance(op, Sync):
            if run:
                with lowering.b.if_(ctx.elected):
                    lowering._ops(run, ctx)
                run = []
            if op is not None:
                lowering._op_sync(op, ctx)
        else:
            run.append(op)


def _load_i32(b, ptr: ir.Value) -> ir.Value:
    from mlir.dialects import llvm
    return llvm.LoadOp(b.i32, ptr, loc=b.loc("taddr")).result
