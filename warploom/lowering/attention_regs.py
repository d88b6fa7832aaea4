"""The FA3-style attention on register accumulators (the "regs" atoms: sm_90a's wgmma) -> one `gpu.module`.

Input: the kernel program of `tests/emulate/fa3_plan.py::planned_fa3` (what the attention planning passes
produce); docs/attention-sm90.md is the contract (schedule, fragments, parameters). What every attention has
(configuration, parameters, tensor maps, the prologue, the tile walks, Q's ring and the online softmax of a key
block over the score atoms) comes from `warploom.lowering.attention.AttentionLowering`, what every kernel has (plan checks, the kernel function, the smem
base, mbarrier init, role dispatch with setmaxnreg, ring stage and phase, waits, arrivals, TMA box loops,
descriptors) from `warploom.lowering.core.KernelLowering`, the MMA instructions from the target's atoms. What
the consumer warpgroups do with their registers is here:

  consumer   Sync -> bar.sync / bar.arrive on the named barrier turn[w] or turn[(w+1) % 2] (an i32 id picked
             at run time from the warpgroup index); Mma on smem x smem (S = Q K^T, scale-d 0 on the first
             k-block) or registers x smem (O += P V, `emit.wgmma.mma_async_reg_a`); Compute "online_softmax"
             (serial schedule), "softmax" and "rescale" (overlapped schedule) and "normalize" in registers;
             Store of O rows < Sq through the out strides, and of the LSE when its pointer is not null. The key
             loop is AttentionLowering's (a software-pipelined one: FA3's intra-warpgroup overlap); a softmax run
             while MMA groups are in flight ends with an anchor load (`_anchor`) that keeps it before the
             wgmma.wait_group ending the overlap.

Register values of the consumer (per thread, the m64nN wgmma fragment: rows r0 = 16*warp + lane/4 and
r0 + 8; register 4c + 2h + e holds (r0 + 8h, 8c + 2(lane % 4) + e)): s (the S accumulator struct), p (the
register-A fragments of P, 4 i32 per k16 block), o_acc (the O accumulator struct), row_max and row_sum
(one f32 per row h: row_sum is the thread's partial sum, reduced over the quad once, in normalize), lse.
"""
from __future__ import annotations


from mlir import ir
from mlir.dialects import llvm, scf

from warploom.kernel import Arrive, Compute, Copy, Loop, Mma, MmaWait, Store, Sync, Wait
from warploom.kernel.contract import STREAMK_SLOTS
from warploom.layout.descriptors import k_block_steps
from warploom.layout.fragments import FRAGMENT_HALF_ROWS, fragment_col, fragment_row
from warploom.lowering.attention import LN2, AttentionLowering
from warploom.lowering.core import RoleState
from warploom.lowering.emit import sync, tma
from warploom.runtime import rules

MOVED = "_moved"        # (corr, its warp vote) from the softmax, for the rescale of the same block


class RegisterAttention(AttentionLowering):
    """The FA3-style attention whose accumulators are warpgroup register fragments (atoms.accumulator == "regs")."""
    OPS = {Loop: "loop", Wait: "wait", Arrive: "arrive", Copy: "copy", Mma: "mma", MmaWait: "mma_wait",
           Store: "store", Compute: "compute", Sync: "sync"}
    OP_NAMES = ("Loop", "Wait", "Arrive", "Copy", "Mma", "MmaWait", "Store", "Compute", "Sync")

    # ---- ops ----------------------------------------------------------------------------------
    def _op_mma(self, op: Mma, ctx: RoleState) -> None:
        b, c = self.b, self.b.const
        loop = self._lagged(self._need_loop(op, ctx), op.lag)      # lag: an earlier block's stage (P_{j-1} V_{j-1})
        if ctx.issue != "warpgroup":
            self._fail(f"Mma in role {ctx.name!r}: wgmma is issued by whole warpgroups")
        m, n, k = self._mma_shape(op, "Mma")
        if op.b.source != "smem" or op.acc.source != "regs":
            self._fail("Mma: B must come from smem and the accumulator live in registers")
        if ctx.values is None:
            ctx.values = {}
        b_reg = self._region(op.b.name)
        b_tile = self.tiles[b_reg.name]
        if b_tile.major(op.k_dim) != op.b.major:
            self._fail(f"Mma B {op.b.name!r} is {b_tile.major(op.k_dim)}-major over {op.k_dim}, the program says "
                       f"{op.b.major}")
        desc_b, _ = self._descriptor(b_reg, loop, None, op.k_dim)
        kblocks = k // self.mma_k
        if op.a.source == "smem":
            a_reg = self._region(op.a.name)
            a_tile = self.tiles[a_reg.name]
            if a_tile.major(op.k_dim) != "K":
                self._fail("A from smem must be K-major")
            a_rows = b.mul(ctx.wg_index, c(a_tile.sub_tile_offset("M", 1, m)))
            desc_a, _ = self._descriptor(a_reg, loop, a_rows, op.k_dim)
            if op.accumulate:
                acc = ctx.values[op.acc.name]
            else:                               # the first k-block overwrites: the input is not read
                acc = self.atoms.undef_acc(b, n)
            acc = self.atoms.mma_smem(b, acc, desc_a, desc_b, k_block_steps(a_tile, kblocks, self.mma_k, op.k_dim),
                                      k_block_steps(b_tile, kblocks, self.mma_k, op.k_dim), (m, n, self.mma_k),
                                      self.elem, "K", b_tile.major(op.k_dim), overwrite=not op.accumulate)
        elif op.a.source == "regs":
            frags = ctx.values.get(op.a.name)
            if not isinstance(frags, list) or len(frags) != kblocks:
                self._fail(f"Mma A from registers {op.a.name!r}: no register-A fragments for {kblocks} k-blocks "
                           "(a Compute must write them first)")
            if not op.accumulate:
                self._fail("Mma with A in registers accumulates here")
            acc = self.atoms.mma_regs_a(b, ctx.values[op.acc.name], frags, desc_b,
                                        k_block_steps(b_tile, kblocks, self.mma_k, op.k_dim), n, self.elem,
                                        b_tile.major(op.k_dim))
        else:
            self._fail(f"Mma A from {op.a.source!r}: smem or registers")
        ctx.values[op.acc.name] = acc

    # ---- the thread's rows and the fragment ------------------------------------------------------
    def _rows(self, ctx: RoleState) -> dict:
        """Per thread: lane, quad column offset, and the two query rows (global index) it holds. Computed where
        they are used (in the key loop: in its masked blocks only, not held in registers across the loop)."""
        if ctx.loop is not None or "_rows" not in ctx.values:
            b, c = self.b, self.b.const
            lane = b.remu(self.tid, c(self.T.warp_size))
            warp = b.divu(ctx.thread_in_wg, c(self.T.warp_size))
            r0 = b.add(b.add(self.row0, b.mul(ctx.wg_index, c(self.mma_m))),
                       fragment_row(warp, lane, b))
            rows = {"lane": lane, "col": fragment_col(lane, b), "rows": [r0, b.add(r0, c(FRAGMENT_HALF_ROWS))]}
            if ctx.loop is not None:
                return rows
            ctx.values["_rows"] = rows
        return ctx.values["_rows"]

    def _thread_rows(self, ctx: RoleState, tile: int) -> tuple[list, ir.Value]:
        """The thread's two fragment rows and its quad's first column (`_rows`)."""
        rows = self._rows(ctx)
        return rows["rows"], rows["col"]

    def _tile_row0(self, tile: int) -> ir.Value:
        return self.row0

    # ---- Compute ----------------------------------------------------------------------------------
    def _op_compute(self, op: Compute, ctx: RoleState) -> None:
        if ctx.issue != "warpgroup":
            self._fail(f"Compute in role {ctx.name!r}: register math runs in warpgroup roles")
        if op.kind in ("online_softmax", "softmax"):
            self._online_softmax(op, ctx)
        elif op.kind == "rescale":
            self._rescale(op, ctx)
        elif op.kind == "normalize":
            self._normalize(op, ctx)
        else:
            self._fail(f"Compute {op.kind!r}: the attention lowering knows online_softmax, softmax, rescale and "
                       "normalize")

    def _online_softmax(self, op: Compute, ctx: RoleState) -> None:
        """online_softmax: S, statistics, O -> P, statistics, O rescaled; softmax (the overlapped schedule): S,
        statistics -> P, statistics, corr (O is rescaled later, by `rescale`, once the P V in flight retired). The
        block's softmax is `AttentionLowering._softmax_block`; here the warp's vote on whether any row moved its max
        and the anchor that keeps the softmax beside the MMAs in flight, before P is packed."""
        if op.kind == "online_softmax":
            s_name, max_name, sum_name, o_name = op.reads
            want = ("p", max_name, sum_name, o_name)
        else:
            s_name, max_name, sum_name = op.reads
            o_name = None
            want = ("p", max_name, sum_name, op.writes[-1])
        if tuple(op.writes) != want:
            self._fail(f"Compute {op.kind} writes {list(op.writes)}: expected {', '.join(want)}")
        if ctx.loop is None:
            self._fail(f"Compute {op.kind} outside the key loop")
        voted = []

        def anchored(l_new: list, corr: list) -> None:
            voted.append(self._moved(corr))
            if self.in_flight:          # MMA groups run beside this softmax: keep it before the wait that ends them
                self._anchor(l_new, voted[0])

        m_new, l_new, corr, (frags,) = self._softmax_block(ctx, 0, ctx.values[s_name], None, ctx.values[max_name],
                                                           ctx.values[sum_name], before_write=anchored)
        moved = voted[0]
        ctx.values.update({"p": frags, max_name: m_new, sum_name: l_new})
        if o_name is None:
            ctx.values[op.writes[-1]] = corr
            ctx.values[MOVED] = (corr, moved)
        else:
            ctx.values[o_name] = self._scaled(ctx.values[o_name], corr, moved)

    def _moved(self, corr: list) -> ir.Value:
        """i1, warp-uniform: whether any row of the warp moved its max in this block (a corr not exactly 1)."""
        b = self.b
        one = b.constf(1.0)
        return sync.warp_any(b, b.or_(b.cmpf("une", corr[0], one), b.cmpf("une", corr[1], one)))

    def _anchor(self, row_sums: list, moved: ir.Value) -> None:
        """Keep the softmax where the program puts it: beside the MMA groups still in flight (the overlapped
        schedule), before the wgmma.wait_group that ends the overlap. ptxas 13.0 schedules WARPGROUP.DEPBAR as
        early as its basic block allows (it put the wait_group 0 before the whole softmax: no overlap left), but
        never above a volatile shared-memory load; and LLVM may sink pure arithmetic past the wait. So a 4-byte
        volatile load of the Q tile (landed, never rewritten; the value is not used) follows the softmax, at an
        address that depends on the new row sums, which depend on every p of the block: Q + 4 when a sum is NaN
        (still inside Q, so harmless), else Q + 0. Neither compiler can move the load above the softmax, nor the
        wait above the load. The address depends on the warp's vote of `_moved` too (Q + 8 or + 12 when no row moved
        its max), so that vote is also done beside the MMAs, not after the wait."""
        b, c = self.b, self.b.const
        q = self.p.regions["q"]
        nan = b.cmpf("uno", row_sums[0], row_sums[1])
        # + 8 when no row of the warp moved its max: the rescale's warp vote is settled before the wait too
        at = b.add(b.select(nan, c(4), c(0)), b.select(moved, c(0), c(8)))
        # this tile's Q stage: the other one may be taking the next tile's Q by TMA meanwhile
        addr = b.gep(self.base, b.add(self._stage_offset(q, None), at))
        llvm.LoadOp(b.i32, addr, alignment=4, volatile_=True, loc=b.loc("anchor"))

    def _scaled(self, o: ir.Value, corr: list, moved: ir.Value) -> ir.Value:
        """O *= corr, row by row (register i of the fragment is row h = (i / 2) % 2), skipped by the whole warp when
        no row of its 16 moved its max (every corr exactly 1: O * 1 is O, bit for bit). Late in a long row the max
        rarely moves, and the D/2 multiplies sit between the wait for the last P V and the next turn
        (benchmarks/NOTES.md, run 38)."""
        b = self.b
        op = scf.IfOp(moved, [o.type], has_else=True)
        with ir.InsertionPoint(op.then_block):
            scaled = o
            for i in range(self.D // 2):
                scaled = b.insertvalue(scaled, b.mulf(b.extractvalue(scaled, i, b.f32, "o"), corr[(i // 2) % 2]), i)
            scf.YieldOp([scaled])
        with ir.InsertionPoint(op.else_block):
            scf.YieldOp([o])
        return op.results[0]

    def _rescale(self, op: Compute, ctx: RoleState) -> None:
        """O *= corr (the overlapped schedule: after the P V that accumulated into O retired)."""
        o_name, corr_name = op.reads
        if tuple(op.writes) != (o_name,):
            self._fail(f"Compute rescale writes {list(op.writes)}: expected {o_name}")
        if corr_name not in ctx.values:
            self._fail(f"Compute rescale reads {corr_name!r}, which no softmax before it wrote")
        corr = ctx.values[corr_name]
        made, moved = ctx.values.get(MOVED, (None, None))
        if made is not corr:            # corr from elsewhere (not this iteration's softmax): vote here
            moved = self._moved(corr)
        ctx.values[o_name] = self._scaled(ctx.values[o_name], corr, moved)

    def _normalize(self, op: Compute, ctx: RoleState) -> None:
        b = self.b
        o_name, max_name, sum_name = op.reads
        if tuple(op.writes) != (o_name, "lse"):
            self._fail(f"Compute normalize writes {list(op.writes)}: expected {o_name}, lse")
        if self.piece is not None:
            self.store_flag = self._streamk_merge(ctx, o_name, max_name, sum_name)
        sl2 = self._log2_unit()
        zero = b.constf(0.0)
        inv, lse = [], []
        totals = self.atoms.row_reduce(b, ctx.values[sum_name], b.addf)
        for h in range(2):
            total = totals[h]
            empty = b.cmpf("oeq", total, zero)                 # the row saw no key: O = 0, lse = -inf
            inv.append(b.select(empty, zero, b.divf(b.constf(1.0), total)))
            # lse = max * scale + ln(sum) = (max * scale_log2 + log2(sum)) * ln 2; log2(0) = -inf
            lse.append(b.mulf(self.max_rule.log2_norm(b, ctx.values[max_name][h], total, sl2), b.constf(LN2)))
        o = ctx.values[o_name]
        for i in range(self.D // 2):
            o = b.insertvalue(o, b.mulf(b.extractvalue(o, i, b.f32, "o"), inv[(i // 2) % 2]), i)
        ctx.values.update({o_name: o, "lse": lse})

    def _streamk_merge(self, ctx: RoleState, o_name: str, max_name: str, sum_name: str) -> ir.Value:
        """Stream-K: make O, the row maxima and the row sums those of the whole tile; return whether this
        warpgroup stores them (i1, the same in all its threads). A whole tile keeps its own and stores. A partial
        piece writes each thread's O fragment (head dim / 2 f32, unnormalized) and its rows' (max, max, sum, sum) as
        16-byte vectors to its workspace slot (CTA, slot, warpgroup: slot 0 for the CTA's first piece, 1 for its
        last; vector j of thread t at (j * 128 + t) * 16 bytes), then hands off (`_streamk_hand_off`). The last
        piece to finish merges the tile's pieces from their slots in key order (CTAs streamk_cta(t0) ..
        streamk_cta(t0 + kt - 1); its own slot too, so the result does not depend on which piece finished last):
        M = the largest piece maximum of each row, O = sum of O_i 2^((m_i - M) scale_log2), the row sums likewise,
        and stores; the others' stores are dropped (`_store_out`: their O box at row Sq; `_store_lse`: predicated
        off)."""
        b, c = self.b, self.b.const
        pc, threads = self.piece, self.T.warpgroup_threads
        n_wgs = self.BM // self.mma_m
        n_vec = self.D // 8                                   # the O fragment: D / 2 f32 a thread, 4 a vector
        f32x4 = ir.VectorType.get([4], b.f32)
        sl2 = self._log2_unit()
        store = next((o for o in ctx.role.walk() if isinstance(o, Store) and o.output == "out"), None)
        nb = self.p.named_barriers.get(store.barrier) if store is not None and store.barrier else None
        if nb is None or nb.threads != threads:
            self._fail(f"the stream-K merge syncs each consumer warpgroup on the O store's named barrier of {threads} "
                       "threads; the consumers' role has none")
        o, mx, sm = ctx.values[o_name], list(ctx.values[max_name]), list(ctx.values[sum_name])

        def slot(cta: ir.Value) -> ir.Value:
            """This thread's first f32 of CTA `cta`'s slot for this tile and warpgroup."""
            which = b.select(b.cmp("ule", pc.t0, rules.streamk_start(cta, pc.ctas, pc.iters, b)), c(0), c(1))
            index = b.add(b.mul(b.add(b.mul(cta, c(STREAMK_SLOTS)), which), c(n_wgs)), ctx.wg_index)
            floats = b.add(b.mul(index, c(threads * 4 * (n_vec + 1))), b.mul(ctx.thread_in_wg, c(4)))
            return b.gep(self.args["workspace"], floats, b.f32)

        def vector(base: ir.Value, j: int) -> ir.Value:
            return b.gep(base, j * threads * 4, b.f32)

        def pack(vals: list) -> ir.Value:
            v = b.undef(f32x4)
            for e, x in enumerate(vals):
                v = b.insertelement(v, x, c(e))
            return v

        then, orelse, results = b.if_values(pc.whole, [o.type] + [b.f32] * 4 + [b.i1])
        with then as out:
            out += [o, *mx, *sm, b.const(1, b.i1)]
        with orelse as out:
            mine = slot(pc.cta)
            for j in range(n_vec):
                b.store(pack([b.extractvalue(o, 4 * j + e, b.f32, "o") for e in range(4)]), vector(mine, j),
                        alignment=16)
            b.store(pack(mx + sm), vector(mine, n_vec), alignment=16)
            first, pieces = self._streamk_ctas(pc.t0, pc.kt, pc.ctas, pc.iters)
            bar = b.add(c(nb.id), ctx.wg_index)
            last = self._streamk_hand_off(ctx, b.add(b.mul(pc.tile, c(n_wgs)), ctx.wg_index), pieces, bar)
            merge, keep, merged = b.if_values(last, [o.type] + [b.f32] * 4)
            with merge as out2:
                end = b.add(first, pieces)
                ninf = b.constf(float("-inf"))
                with b.for_(first, end, c(1), iter_args=[ninf, ninf], iv=b.fresh("piece")) as loop:
                    stats = b.load(f32x4, vector(slot(loop.iv), n_vec), 16, "stats")
                    loop.yield_(*(b.maxnumf(loop.args[h], b.extractelement(stats, h)) for h in range(2)))
                top = list(loop.results)
                zero = b.constf(0.0)
                with b.for_(first, end, c(1), iter_args=[b.zero(o.type, "acc"), zero, zero],
                            iv=b.fresh("piece")) as loop:
                    base = slot(loop.iv)
                    stats = b.load(f32x4, vector(base, n_vec), 16, "stats")
                    w = [b.exp2(b.mulf(b.subf(b.extractelement(stats, h), top[h]), sl2)) for h in range(2)]
                    acc = loop.args[0]
                    for j in range(n_vec):
                        v = b.load(f32x4, vector(base, j), 16, "part")
                        for e in range(4):
                            i = 4 * j + e                     # register i holds row (i / 2) % 2 of the thread's two
                            acc = b.insertvalue(acc, b.fma(b.extractelement(v, e), w[(i // 2) % 2],
                                                           b.extractvalue(acc, i, b.f32, "o")), i)
                    loop.yield_(acc, *(b.fma(b.extractelement(stats, 2 + h), w[h], loop.args[1 + h])
                                       for h in range(2)))
                out2 += [loop.results[0], *top, *loop.results[1:]]
            with keep as out2:
                out2 += [o, *mx, *sm]
            out += [*merged, last]
        ctx.values.update({o_name: results[0], max_name: list(results[1:3]), sum_name: list(results[3:5])})
        return results[5]

    # ---- Store ------------------------------------------------------------------------------------
    # ---- O's epilogue (AttentionLowering._store_out): each warpgroup its 64 rows of the CTA's staging tile ----------
    def _out_staging(self, op: Store) -> tuple:
        if list(op.tile) != [self.mma_m, self.D]:
            self._fail(f"Store tile {list(op.tile)}: the O fragment is [{self.mma_m}, {self.D}]")
        if op.region is None or op.barrier is None:
            self._fail("Store of out: the attention lowering stores O through a staging smem region (wl-pipeline) "
                       "with a named barrier per warpgroup (wl-specialize)")
        region, nb = self._region(op.region), self.p.named_barriers.get(op.barrier)
        n_wgs = self.BM // self.mma_m
        if nb is None or nb.count != n_wgs or nb.threads != self.T.warpgroup_threads:
            self._fail(f"Store of out syncs on {op.barrier!r}: a named barrier of {self.T.warpgroup_threads} threads per "
                       f"consumer warpgroup ({n_wgs})")
        tile = self.tiles[region.name]
        if tile.rows != self.BM or tile.shape[1] != self.D:
            self._fail(f"staging region {region.name!r} {tile.shape}: it holds the CTA's [{self.BM}, {self.D}] O")
        return region, nb, tile

    def _out_barrier(self, nb, ctx: RoleState) -> ir.Value:
        return self.b.add(self.b.const(nb.id), ctx.wg_index)

    def _before_out_writes(self, ctx: RoleState, region, bar, nb) -> None:
        """On its own bytes the staging tile is written only by the next store, so the issuing thread waits for the
        previous store's reads here, a tile later (and once more before the CTA exits: KernelLowering._role), not
        right after issuing it: the warpgroup goes on to the next tile meanwhile. On another region's bytes (O over
        Q's), what follows the store (q_empty's arrival) may free them, so the wait stays at the store
        (`_out_wait_after`). Then the warpgroup syncs: the previous store has read the region."""
        if not region.aliases:
            with self.b.if_(ctx.wg_leader):
                tma.bulk_wait_group(0, read=True)
        sync.named_barrier_sync(self.b, bar, nb.threads)

    def _out_wait_after(self, region) -> bool:
        return bool(region.aliases)

    def _out_values(self, op: Store, ctx: RoleState, ch) -> list:
        """The O fragment's registers (normalized by `normalize`)."""
        return self.atoms.read_rows(self.b, ctx.values[op.value], ch, "o")

    def _out_rows(self, ctx: RoleState) -> tuple:
        """The thread's fragment rows in the warpgroup's 64 rows of the staging tile, and its quad's first column."""
        b, c = self.b, self.b.const
        rows = self._rows(ctx)
        lane, wg_row = rows["lane"], b.mul(ctx.wg_index, c(self.mma_m))
        warp = b.divu(ctx.thread_in_wg, c(self.T.warp_size))
        ctx.values["_wg_row"] = wg_row
        return (lambda h: b.add(wg_row, fragment_row(warp, lane, b, half=h))), rows["col"]

    def _out_box(self, op: Store, ctx: RoleState, tile) -> tuple:
        """The warpgroup's rows: row0 + 64 w (stream-K: a piece that did not merge its tile stores nothing: its box
        starts at row Sq, past the end, and TMA drops every element of it. Not a branch around the store: ptxas
        13.0 then keeps the key loop's ring arithmetic off the uniform datapath, +68 SASS instructions a key block at
        head dim 128), at byte 64 w x span of the staging tile."""
        b, c = self.b, self.b.const
        wg_row = ctx.values["_wg_row"]
        row0 = self.row0 if self.store_flag is None else b.select(self.store_flag, self.row0, self.args["Sq"])
        return b.add(row0, wg_row), (lambda: b.mul(wg_row, c(tile.span)))

    def _store_lse(self, op: Store, ctx: RoleState) -> None:
        """lse[b, h, row] (float32 [B, Hq, Sq] contiguous) for rows < Sq, by lane 0 of each quad, when the lse
        pointer is not null."""
        b, c = self.b, self.b.const
        a = self.args
        if list(op.tile) != [self.mma_m]:
            self._fail(f"Store tile {list(op.tile)}: lse is one value per row, [{self.mma_m}]")
        rows = self._rows(ctx)
        lse = ctx.values[op.value]
        given = b.cmp("ne", b.ptrtoint(a["lse"], b.i64), c(0, b.i64))
        with b.if_(given):
            first = b.cmp("eq", b.remu(rows["lane"], c(4)), c(0))
            plane = self._lse_plane()
            for h in range(2):
                r = rows["rows"][h]
                ok = b.and_(first, b.cmp("slt", r, a["Sq"]))
                if self.store_flag is not None:         # stream-K: only the piece that merged its tile stores
                    ok = b.and_(ok, self.store_flag)
                with b.if_(ok):
                    idx = b.add(plane, b.ext64(r))
                    b.store(lse[h], b.gep(a["lse"], idx, b.f32), alignment=4)
