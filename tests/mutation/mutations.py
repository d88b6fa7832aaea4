"""The deliberate bugs the CPU tests must catch: each one a short exact-text replacement in one file of `warploom`.

Anchors (`old`) are kept short so they are easy to re-anchor when the code they
point at is rewritten; the description says which behaviour the bug breaks, so a
re-anchored mutation keeps its meaning. The harness refuses an anchor that does
not occur exactly once.
"""
from __future__ import annotations

from typing import NamedTuple


class Mutation(NamedTuple):
    id: str
    description: str
    path: str        # relative to the repository root
    old: str         # must occur exactly once in `path`
    new: str
    families: tuple[str, ...] = ()   # the emulator probe's kernel families that must catch it (empty: all)


CORE = "warploom/lowering/core.py"               # the target-neutral lowering
GEMM = "warploom/lowering/gemm.py"
ATTN = "warploom/lowering/attention.py"           # the attention on any target: walks, coordinates, Q's ring
FA3 = "warploom/lowering/attention_regs.py"       # the attention on register accumulators (sm_90a)
FA4 = "warploom/lowering/attention_tmem.py"       # the attention on Tensor Memory accumulators (sm_100a)
TCGEN05 = "warploom/lowering/atoms/tcgen05.py"
WGMMA = "warploom/lowering/atoms/wgmma.py"
TMEM = "warploom/layout/tmem.py"
FRAGMENTS = "warploom/layout/fragments.py"
TILING = "warploom/layout/tiling.py"
SYNC = "warploom/lowering/emit/sync.py"
DESC = "warploom/layout/descriptors.py"
BARRIERS = "warploom/passes/plan_barriers.py"
EXP2 = "warploom/lowering/emit/exp2.py"
RULES = "warploom/runtime/rules.py"
SPECIALIZE = "warploom/passes/specialize.py"
FUSE = "warploom/passes/fuse.py"

MUTATIONS: list[Mutation] = [
    # ---- the shared layout formulas and the per-target atoms (issue 33: one lowering, atoms per target) ----
    Mutation("roles-last-unit-dropped",
             "the one role dispatch gives a role of several units (warpgroups or warps) that is not the last role all "
             "but its last unit: that unit runs the next role's code (the FA4 softmax's fourth warp runs the second "
             "softmax's)",
             CORE, 'b.cmp("ule", unit, c(last))', 'b.cmp("ult", unit, c(last))', ("fa4",)),
    Mutation("ring-one-barrier-phase-stuck",
             "a ring of one barrier used every iteration keeps phase 0 instead of flipping with the iteration "
             "(it & 1): from the second key block on its waiters pass before the arrival they wait for",
             CORE, "LoopState(loop.kt, loop.it, 0, self.b.and_(loop.it, self.b.const(1)), {},",
             "LoopState(loop.kt, loop.it, 0, self.b.const(0), {},", ("fa4",)),
    Mutation("drain-from-the-start",
             "the drain after the last iteration waits on the ring's first lap (stages 0.. of iteration 0) instead "
             "of the stages after the CTA's last iteration: the last commits' releases are not waited for",
             CORE, "state = self._loop_state(c(0), b.add(used, c(i)))", "state = self._loop_state(c(0), c(i))",
             ("sm100",)),
    Mutation("cluster-acquire-dropped",
             "every wait acquires at CTA scope, the leader's waits on ab_peer and acc_empty too: the peer's "
             ".release.cluster arrivals (its stage landed, its epilogue done with the accumulator) are not morally "
             "strong with them, so the MMA may read the peer's smem or overwrite its TMEM unordered",
             CORE, 'wait(ph, "cluster" if op.barrier in self._cluster_released else "cta")', 'wait(ph, "cta")',
             ("sm100",)),
    Mutation("atom-wgmma-always-overwrites",
             "the warpgroup MMA atom overwrites at the first k-block of every MMA (scale-d 0), not only where the "
             "program asks: the GEMM's accumulator keeps only the last K tile's product",
             WGMMA, 'scale = "zero" if kk == 0 and overwrite else "one"', 'scale = "zero" if kk == 0 else "one"',
             ("gemm",)),
    Mutation("atom-wgmma-b-layout",
             "the warpgroup MMA atom gives K-major B the MN-major layout (imm-trans-b flipped): the GEMM multiplies "
             "by B's transpose",
             WGMMA, 'B_LAYOUT = {"K": "col", "MN": "row"}', 'B_LAYOUT = {"K": "row", "MN": "col"}', ("gemm",)),
    Mutation("atom-wgmma-regs-a-trans",
             "the register-A MMA atom reads V (MN-major) as K-major: P V multiplies by V's transpose",
             WGMMA, 'trans_b=1 if b_major == "MN" else 0', 'trans_b=0', ("attention",)),
    Mutation("atom-wgmma-wait-one-more",
             "the warpgroup MMA atom's wait lets one more group stay in flight than the program asks: the "
             "accumulator is read before its MMAs finish",
             WGMMA, "        wgmma.wait(pending)\n", "        wgmma.wait(min(pending + 1, 7))\n", ("gemm", "attention")),
    Mutation("atom-tcgen05-first-accumulates",
             "the Tensor Memory MMA atom's first k-block always accumulates: each tile's accumulator starts from "
             "the stale one of two tiles before",
             TCGEN05, "tcgen05.mma(b, d, da, db, idesc, first if kk == 0 else on, group)",
             "tcgen05.mma(b, d, da, db, idesc, on, group)", ("sm100",)),
    Mutation("atom-tcgen05-tmem-a-column",
             "the Tensor Memory MMA atom with A in TMEM reads every k-block of P at the first one's columns",
             TCGEN05, "tcgen05.mma_tmem_a(b, d, a_column(kk), db,", "tcgen05.mma_tmem_a(b, d, a_column(0), db,",
             ("fa4",)),
    Mutation("atom-tcgen05-commit-own-only",
             "the commit atom drops the multicast: a CTA pair's MMA completion reaches the leader's barriers only, "
             "so the peer's epilogue and producer wait forever",
             TCGEN05, "        tcgen05.commit(b, barrier, group, multicast)\n",
             "        tcgen05.commit(b, barrier, group, None)\n", ("sm100",)),
    Mutation("atom-tcgen05-no-fence-after",
             "the Tensor Memory atoms' after_sync fence is empty: tcgen05 work after a wait or barrier is not "
             "ordered after it",
             TCGEN05, "    def after_sync(self) -> None:\n        tcgen05.fence_after()\n",
             "    def after_sync(self) -> None:\n        pass\n", ("sm100", "fa4")),
    Mutation("layout-tmem-lane-offset",
             "layout.tmem.lane_offset moves a TMEM address by half a lane per lane: warps read and write the "
             "wrong (or another quadrant's) lanes",
             TMEM, "return ops.mul(lane, ops.const(1 << LANE_SHIFT))", "return ops.mul(lane, ops.const(1 << (LANE_SHIFT - 1)))",
             ("sm100", "fa4")),
    Mutation("layout-start-address-unit",
             "layout.descriptors.start_address_field counts the smem base in 32-byte units instead of 16: every "
             "MMA descriptor points at half the address of its tile",
             DESC, "ops.and_(addr, ops.const(SHARED_WINDOW_MASK)), ops.const(ADDRESS_UNIT_SHIFT))",
             "ops.and_(addr, ops.const(SHARED_WINDOW_MASK)), ops.const(ADDRESS_UNIT_SHIFT + 1))", ("gemm",)),
    # ---- the seven bugs that once passed every CPU test ----
    Mutation("producer-phase-flip",
             "the producer waits on empty[stage] with the ring phase itself instead of phase ^ 1, so its "
             "first lap blocks on fresh barriers (deadlock)",
             CORE, "ph = b.xor(state.phase, c(1))", "ph = state.phase"),
    Mutation("desc-lbo-sbo-swap",
             "the K-major smem layout gives the descriptor LBO = 1024 B and SBO = 16 B (swapped): the MMA reads "
             "the wrong rows of A (and of B when B is N x K)",
             TILING, 'MmaOperandLayout("K", lbo=lbo, sbo=atom,', 'MmaOperandLayout("K", lbo=atom, sbo=lbo,'),
    Mutation("k-step-doubled",
             "the descriptors' start address moves by twice the bytes between the k-block MMAs of a K tile "
             "(layout.descriptors.descriptor_step, every target): half the K tile is read twice, half never",
             DESC, "return ops.shru(byte_offset, ops.const(ADDRESS_UNIT_SHIFT))",
             "return ops.shru(byte_offset, ops.const(ADDRESS_UNIT_SHIFT - 1))"),
    Mutation("wg-row-offset-zero",
             "every consumer warpgroup's A descriptor starts at row 0 of the tile instead of at its own 64 rows: "
             "warpgroup 1 computes warpgroup 0's rows",
             GEMM, "c(a_tile.sub_tile_offset(a_rows_dim, 1, m))", "c(0)"),
    Mutation("persistent-it-base",
             "a persistent kernel restarts the ring iteration at 0 on each tile instead of counting on "
             "(it = (tile - first) / step * trips + kt): stage and phase disagree with the barriers' state",
             GEMM, "            it = kt if self.it_base is None else b.add(self.it_base, kt)\n            ctx.loop = self._loop_state(kt, it)\n            self._ops(op.body, ctx)\n            ctx.loop = None\n            loop.yield_(", "            it = kt\n            ctx.loop = self._loop_state(kt, it)\n            self._ops(op.body, ctx)\n            ctx.loop = None\n            loop.yield_("),
    Mutation("epilogue-row-offset",
             "the staged epilogue writes each thread's second fragment row (r0 + 8) at its first (r0) in the staging "
             "chunk: rows written twice and rows never written",
             GEMM, "row = b.add(wg_row, fragment_row(warp, lane, b, half=h))",
             "row = b.add(wg_row, fragment_row(warp, lane, b, half=0))"),
    Mutation("lag-ignored",
             "the consumer frees the stage of this iteration (it % S) instead of the stage of iteration it - lag "
             "whose MMAs have retired: the producer overwrites smem an in-flight wgmma still reads",
             CORE, "bar = self.rings[op.barrier].at(b.remu(b.add(loop.it, c(self.stages - op.lag)), c(self.stages)))",
             "bar = self.rings[op.barrier].at(loop.stage)"),
    # ---- more of the same kinds ----
    Mutation("lag-guard-dropped",
             "the lagged arrive is issued from iteration 0 on (no it >= lag guard): empty[S - lag] gets an "
             "arrival for an iteration that never used it, releasing the producer a lap early",
             CORE, "ctx.wg_leader if op.lag == 0 else", "ctx.wg_leader if True else"),
    Mutation("lag-stage-wrong",
             "the lagged stage is (it + S + lag) % S instead of (it + S - lag) % S: with 4 stages and lag 1 the "
             "consumers hand back the stage of iteration it + 1, whose data they have not read yet (the producer "
             "cannot overwrite it before they do only because it waits on the other stages in order)",
             CORE, "c(self.stages - op.lag)", "c(self.stages + op.lag)"),
    Mutation("desc-mn-major-lbo-sbo-swap",
             "the MN-major B layout (B given K x N) swaps LBO (the distance between 64-wide N chunks) "
             "and SBO (8 K rows x 128 B)",
             TILING, 'MmaOperandLayout("MN", lbo=self.box_bytes, sbo=atom,',
             'MmaOperandLayout("MN", lbo=atom, sbo=self.box_bytes,'),
    Mutation("k-step-mn-major-doubled",
             "the MN-major layout moves 32 K rows instead of 16 between the k16 wgmmas",
             TILING, "return kk * k * self.span", "return 2 * kk * k * self.span"),
    Mutation("tx-bytes-halved",
             "arrive.expect_tx announces half the bytes of the stage: full[s] completes before all of its "
             "TMA data landed",
             CORE, ".arrive_expect_tx(op.tx_bytes)", ".arrive_expect_tx(op.tx_bytes // 2)"),
    Mutation("arrival-count-one",
             "every mbarrier is initialised with 1 arrival instead of its planned count (empty needs one per "
             "consumer warpgroup): the first consumer to arrive frees a stage the other still reads",
             CORE, ".init(ring.arrivals)", ".init(1)"),
    Mutation("barrier-stage-off-by-one",
             "the mbarrier ring helper addresses the barrier of stage + 1 (and runs past the ring at stage S - 1)",
             SYNC, "b.mul(stage, b.const(self.stride))", "b.mul(b.add(stage, b.const(1)), b.const(self.stride))"),
    Mutation("tma-coords-swapped",
             "every TMA box gets its two coordinates in the wrong order (tensor maps list the contiguous dim "
             "first)",
             CORE, "self.tmap_args[op.source], bar.addr, coord)", "self.tmap_args[op.source], bar.addr, coord[::-1])"),
    Mutation("tma-extra-box-dst",
             "the layout puts the extra TMA boxes of a wide tile 128 B apart instead of one box (rows x 128 B) "
             "apart, overwriting each other",
             TILING, "return j * self.box_bytes", "return j * self.span"),
    Mutation("k-origin-from-ring-iteration",
             "the TMA K origin is taken from the ring iteration (counts on across the tiles of a persistent "
             "kernel) instead of the K tile index",
             GEMM, "self.b.mul(loop.kt, self.b.const(self.BK))", "self.b.mul(loop.it, self.b.const(self.BK))"),
    Mutation("wait-group-depth",
             "the wgmma helper's wait_group waits for one group fewer than asked (pending + 1 in flight)",
             "warploom/lowering/emit/wgmma.py", "nvvm.WgmmaWaitGroupSyncOp(pending)",
             "nvvm.WgmmaWaitGroupSyncOp(pending + 1)"),
    Mutation("fence-mbarrier-init-missing",
             "no fence.mbarrier_init after the barrier inits: the async proxy (TMA) may see uninitialised "
             "barriers",
             CORE, "            sync.fence_mbarrier_init()", "            pass"),
    Mutation("epilogue-register-order",
             "the staged epilogue packs registers 4j+h and 4j+h+2 instead of 4j+2h and 4j+2h+1: the second row "
             "half and the odd column swap (the epilogue is shared: a TMEM row's values 4g+1 and 4g+2 swap too)",
             GEMM, "[(run[p][0], run[p + 1][0]) for p in range(0, len(run), 2)]",
             "[(v & ~3 | v >> 1 & 1 | (v & 1) << 1, w & ~3 | w >> 1 & 1 | (w & 1) << 1)\n"
             "                             for v, w in ((run[p][0], run[p + 1][0]) for p in range(0, len(run), 2))]"),
    Mutation("epilogue-column",
             "the staged epilogue puts lane l's columns at 8j + (l % 4) instead of 8j + 2 (l % 4)",
             GEMM, "b.mul(fragment_col(lane, b), c(elem_bytes))", "b.mul(b.remu(lane, c(4)), c(elem_bytes))"),
    Mutation("epilogue-staging-reuse",
             "before writing a staging chunk the warpgroup's storer lets two TMA stores stay pending instead of one "
             "(none at a tile's first chunk): the chunk is overwritten while the store of two chunks ago still "
             "reads it",
             GEMM, "return 0 if j == 0 else 1", "return 2"),
    Mutation("epilogue-no-proxy-fence",
             "the consumers write their chunk of C to smem and the TMA store reads it with no fence.proxy.async in "
             "between: the async proxy may read stale bytes",
             GEMM, "            sync.fence_proxy_async_smem()       # the writes, for the TMA store's async reads\n",
             ""),
    Mutation("plan-producer-parity",
             "wl-plan-barriers gives the producer's wait the consumer parity (the plan, not the lowering)",
             BARRIERS, 'out.append(Wait(empty, "phase^1"))\n                out.append(Arrive(full, tx_bytes',
             'out.append(Wait(empty, "phase"))\n                out.append(Arrive(full, tx_bytes'),
    Mutation("swizzle-code",
             "the 128B swizzle gets the Hopper descriptor code of 64B (2 instead of 1): the wgmma reads smem with "
             "the wrong XOR pattern",
             "warploom/layout/swizzle.py", 'Swizzle("128B", 128, 3, 4, 3, hopper_code=1,',
             'Swizzle("128B", 128, 3, 4, 3, hopper_code=2,'),
    Mutation("persistent-tile-order",
             "the persistent tile order walks M fastest in the rule the runtime and the lowering share "
             "(tile t at row t % n_tiles): tiles past the first row are computed at the wrong place",
             "warploom/runtime/rules.py", "{m: ops.mul(ops.divu(tile, n_tiles), ops.const(bm)), "
             "n: ops.mul(ops.remu(tile, n_tiles), ops.const(bn))}",
             "{m: ops.mul(ops.remu(tile, n_tiles), ops.const(bm)), n: ops.mul(ops.divu(tile, n_tiles), ops.const(bn))}"),
    # ---- the sm_90a attention kernel ----
    Mutation("attn-mask-row-swap",
             "the causal mask of each thread's first row uses its second row's limit (r0 + 8) and vice versa: "
             "keys past the diagonal leak into one row, keys before it vanish from the other",
             ATTN, "for row, columns in zip(rows, ch.rows):", "for row, columns in zip(rows[::-1], ch.rows):", ("attention",)),
    Mutation("attn-scale-not-folded",
             "p = exp2(s - max * scale_log2) instead of exp2(s * scale_log2 - max * scale_log2): the scores are not "
             "scaled (the FMA lost its multiplier)",
             ATTN, "x = b.fma(vals[i], sl2, bias[h])", "x = b.addf(vals[i], bias[h])", ("attention",)),
    Mutation("attn-gqa-kv-head",
             "K and V are read at the query head h instead of the kv head h / (Hq / Hkv): GQA heads read another "
             "head's keys, or none (out of bounds: zeros)",
             ATTN, "self.kv_head = b.divu(head, self.group)", "self.kv_head = head", ("attention",)),
    Mutation("attn-kv-head-modulo",
             "GQA's kv head is q_head % Hkv instead of q_head / (Hq / Hkv): with 1 < Hkv < Hq (4 query heads on 2 kv "
             "heads) query heads 1 and 2 read each other's keys and values",
             ATTN, "self.kv_head = b.divu(head, self.group)", 'self.kv_head = b.remu(head, a["Hkv"])',
             ("attention", "fa4")),
    Mutation("attn-quad-half",
             "the row max and row sum are reduced over 2 of the 4 lanes that hold a row (shfl.bfly xor 1 only)",
             WGMMA, "while lane_xor < FRAGMENT_QUAD:", "while lane_xor < FRAGMENT_QUAD // 2:", ("attention",)),
    Mutation("attn-blind-row-nan",
             "a row whose keys so far are all masked keeps max = -inf in exp2(s * scale - max * scale): "
             "-inf - -inf = NaN instead of 0",
             ATTN, 'self.safe = [b.select(b.cmpf("oeq", mx, b.constf(float("-inf"))), b.constf(0.0), mx) for mx in m_new]',
             "self.safe = list(m_new)", ("attention",)),
    Mutation("attn-lse-units",
             "the LSE is left in log2 units (no final * ln 2)",
             FA3, "total, sl2), b.constf(LN2)))", "total, sl2), b.constf(1.0)))", ("attention",)),
    Mutation("attn-pingpong-own-only",
             "both the sync and the hand-over use this warpgroup's own named barrier: the turns no longer alternate",
             CORE, 'idx = w if op.slot == "own" else (w + 1) % nb.count', "idx = w", ("attention",)),
    Mutation("attn-rescale-skip-one-row",
             "the warp skips O *= corr unless both rows of a thread moved their max (and instead of or): a block "
             "where only one of them moved leaves that row's O at the old max's scale",
             FA3, 'b.or_(b.cmpf("une", corr[0], one)', 'b.and_(b.cmpf("une", corr[0], one)', ("attention",)),
    # three consumer warpgroups (block_m 192): the turns go round all of them
    Mutation("attn-turn-ring-of-two",
             "a consumer warpgroup hands the tensor cores to warpgroup (w + 1) % 2 instead of (w + 1) % consumers: "
             "with three, warpgroup 1 wakes warpgroup 0 and warpgroup 2 never gets a turn (deadlock)",
             CORE, "b.remu(b.add(ctx.wg_index, c(1)), c(nb.count))", "b.remu(b.add(ctx.wg_index, c(1)), c(2))",
             ("attention",)),
    Mutation("attn-turn-threads-all-consumers",
             "the turn barrier counts every consumer thread instead of two warpgroups (the one whose turn it is and "
             "the one handing it over): with three warpgroups no turn ever completes",
             SPECIALIZE, "NamedBarrier(TURN, first, 2 * target.warpgroup_threads",
             "NamedBarrier(TURN, first, consumers * target.warpgroup_threads", ("attention",)),
    # the persistent schedule: what carries from one tile of a CTA to the next
    Mutation("attn-persistent-q-phase",
             "every tile waits for phase 0 of Q's barriers: the second tile of a CTA reads Q before it landed "
             "(and the producer overwrites it while the first tile's MMAs may still read it)",
             ATTN, "self.tile_phase = b.and_(b.divu(q_tiles, c(self.once_stages)) if self.once_stages > 1 else q_tiles, c(1))",
             "self.tile_phase = c(0)", ("attention",)),
    Mutation("attn-persistent-q-stage",
             "every tile of a persistent attention uses Q's stage 0: the producer loads the next tile's Q over the "
             "tile the consumers are still reading (its barriers alternate, its bytes do not)",
             ATTN, "return b.add(c(region.offset), b.mul(self.tile_stage, c(self._stage_bytes(region))))",
             "return c(region.offset)", ("attention",)),
    Mutation("attn-persistent-ring-restart",
             "each tile starts the K/V rings over at iteration 0 instead of counting on from the CTA's earlier "
             "tiles: stage and phase disagree with the barriers' state",
             ATTN, "return kt if self.it_base is None else self.b.add(self.it_base, kt)", "return kt", ("attention",)),
    Mutation("attn-store-wait-dropped",
             "a persistent attention's O store never waits for the previous tile's TMA store to read the staging "
             "tile: the next tile's writes land in smem the store is still reading",
             FA3, "        if not region.aliases:\n            with self.b.if_(ctx.wg_leader):", "        if False:\n            with self.b.if_(ctx.wg_leader):", ("attention",)),
    Mutation("attn-persistent-turns-per-tile",
             "the turns' first and last hand-overs run at every tile, not once per CTA: warpgroup 1 may hand over "
             "twice before warpgroup 0 took the first",
             CORE, 'if op.tiles != "each" and self.tile_first is not None:', "if False:", ("attention",)),
    Mutation("attn-causal-table-skip",
             "a causal persistent CTA starts at the second entry of its share of the host's tile table: it skips its "
             "first tile and runs the next CTA's first one (twice computed, one never)",
             ATTN, "iter_args=[c(0), c(0), entry(first)]", "iter_args=[c(0), c(0), entry(b.add(first, c(1)))]",
             ("attention",)),
    # ---- sm_100a (tcgen05, Tensor Memory): caught by the emulator on the sm_100a probe kernels ----
    Mutation("sm100-idesc-n",
             "the instruction descriptor says N = block_n / 2: each MMA writes half the accumulator's columns",
             TCGEN05, '"f32", m, n, a_major=a_major,', '"f32", m, n // 2, a_major=a_major,', ("sm100",)),
    Mutation("sm100-idesc-b-major",
             "the instruction descriptor's transpose-B bit says K-major for every B: a [K, N] B is read as [N, K]",
             TCGEN05, "b_major=b_major).encode()", 'b_major="K").encode()', ("sm100",)),
    Mutation("sm100-desc-version",
             "the tcgen05 smem descriptor leaves bits 46-48 (the fixed version 0b001) at 0",
             DESC, "| _SM100_VERSION << 46", "| 0 << 46", ("sm100",)),
    Mutation("sm100-no-wait-ld",
             "the epilogue converts the registers of a tcgen05.ld without tcgen05.wait::ld: they may not hold the "
             "accumulator yet (the Tensor Memory atoms' read_rows, which the GEMM epilogue reads its chunks with)",
             TCGEN05, "        self.tmem_wait_load()\n", "", ("sm100",)),
    Mutation("sm100-commit-to-full",
             "the MMA thread commits a finished operand stage to ab_full instead of ab_empty: the TMA warp never "
             "gets the stage back, and ab_full gets an arrival nobody expects",
             BARRIERS, 'Arrive(empty, lag=free_at[1], per="commit" if commit', 'Arrive(full if commit else empty, '
             'lag=free_at[1], per="commit" if commit', ("sm100",)),
    Mutation("sm100-acc-stage-columns",
             "both TMEM accumulator stages start at column 0: the MMAs of tile i + 1 overwrite the accumulator the "
             "epilogue is still reading for tile i",
             GEMM, "b.mul(state.stage, c(per_stage))", "c(0)", ("sm100",)),
    Mutation("sm100-lane-quadrant",
             "epilogue warp w reads TMEM lanes 32 ((w + 1) % 4): a warp may only reach the quadrant of w % 4",
             GEMM, "quadrant = b.remu(self.warp, c(quadrants))", "quadrant = b.remu(b.add(self.warp, c(1)), c(quadrants))",
             ("sm100",)),
    Mutation("sm100-accumulate-first",
             "the first MMA of a tile accumulates into the TMEM stage (enable-input-d on): it adds the stage's old "
             "contents (nothing, or tile i - 2's result)",
             GEMM, "idesc, first_k, self.cta_group)", 'idesc, b.cmp("eq", c(0), c(0)), self.cta_group)', ("sm100",)),
    Mutation("sm100-no-fence-after-wait",
             "no tcgen05.fence::after_thread_sync after an mbarrier wait: the epilogue's tcgen05.ld (and the MMA "
             "thread's next tcgen05.mma) are not ordered after the tcgen05 work the barrier published",
             CORE, 'else "cta")\n        if ctx.fenced:\n            self.atoms.after_sync()',
             'else "cta")', ("sm100",)),
    Mutation("sm100-no-fence-before-sync",
             "the epilogue warps sync on the staging barrier after their tcgen05.ld with no tcgen05.fence::before_"
             "thread_sync: the loads are not ordered before what the barrier releases (ending with acc_empty)",
             GEMM, "        def sync_role():\n            self.atoms.before_sync()\n", "        def sync_role():\n",
             ("sm100",)),
    Mutation("sm100-store-no-proxy-fence",
             "the epilogue writes its chunk of C to smem and the TMA store reads it with no fence.proxy.async in "
             "between: the async proxy may read stale bytes (the staged epilogue both forms share, on the sm_100a "
             "probe: epilogue-no-proxy-fence is the same bug on sm_90a's)",
             GEMM, "            sync.fence_proxy_async_smem()       # the writes, for the TMA store's async reads\n"
             "            sync_role()\n", "            sync_role()\n", ("sm100",)),
    Mutation("sm100-staging-reuse",
             "the storing thread does not wait for the store of two chunks ago before the warps rewrite its buffer "
             "(wait_group.read 2: two stores may stay pending, that one among them)",
             GEMM, "return 0 if j == 0 and count % 2 else 1", "return 2", ("sm100",)),
    Mutation("staged-run-unswizzled",
             "C's staging writes (the staged epilogue both GEMM forms share) skip the swizzle of their run while the "
             "TMA store reads the chunk as 128B-swizzled: rows other than every eighth come out with their 16-byte "
             "granules permuted",
             GEMM, "at = tile.swizzle.apply_with(b, b.add(row_at, c(within)))", "at = b.add(row_at, c(within))",
             ("sm100",)),
    Mutation("staged-chunk-column",
             "the staged epilogue TMA-stores every chunk at the tile's first column (n0 instead of n0 + the chunk's "
             "first column): the later chunks overwrite the first one's columns and the tile's other columns are "
             "never written",
             GEMM, "[b.add(n0, c(lo)), m0 if", "[n0, m0 if", ("sm100",)),
    Mutation("staged-one-buffer",
             "the staged epilogue writes every chunk into the staging region's first buffer, while the wait before "
             "it still lets the previous chunk's TMA store read that buffer: the store may read the next chunk's "
             "values",
             GEMM, "base = staging.offset + (j % staging.stages) * chunk_bytes", "base = staging.offset",
             ("sm100",)),
    Mutation("sm100-no-drain",
             "the producer exits without waiting for the operand ring's last releases: the MMA thread's last "
             "tcgen05.commit arrivals may land in the smem of a CTA that has exited",
             CORE, "            self._drain(drained, ctx)\n", "", ("sm100",)),
    Mutation("sm100-pair-multicast-mask",
             "the CTA pair's leader commits to its own barriers only (multicast mask 0b01 instead of 0b11): the other "
             "CTA's producer never gets its stage back and its epilogue never sees the accumulator",
             CORE, "(1 << self.cta_group) - 1 if op.cta == \"pair\" else None", "1 if op.cta == \"pair\" else None",
             ("sm100",)),
    Mutation("sm100-pair-b-half",
             "both CTAs of a pair load the same half of B (the other CTA's columns offset dropped): the pair's MMA "
             "multiplies A by half of B twice",
             GEMM, "self.b.mul(self.rank, self.b.const(self.BN // self.cta_group))", "self.b.const(0)", ("sm100",)),
    # ---- the sm_100a attention (FA4-style): caught by the emulator on the fa4 probe kernels ----
    Mutation("fa4-p-alias-offset",
             "the softmax writes P into the upper half of S's columns while the P V MMA reads it from P's planned "
             "offset (the lower half): the MMA multiplies S's leftover bits by V",
             FA4, "(ctx.lane_addr, s.offset), (ctx.lane_addr, p.offset),", "(ctx.lane_addr, s.offset), (ctx.lane_addr, s.offset + self.BN // 2),",
             ("fa4",)),
    Mutation("fa4-correction-phase",
             "the correction warpgroup waits for the phase of o_full the current key block completes (not the one "
             "before): at block 0 it waits for P V 0, which waits for its o_ready",
             BARRIERS, 'Wait(f"o{i}_full", "phase^1"), op,', 'Wait(f"o{i}_full", "phase"), op,', ("fa4",)),
    Mutation("fa4-threshold-inverted",
             "the conditional rescaling's test is inverted: the max moves when it grew by less than the threshold "
             "and stays when it grew by more (P overflows past 2^8, or a first block keeps max -inf)",
             ATTN, 'grow = b.cmpf("ogt", cand,', 'grow = b.cmpf("ole", cand,', ("fa4",)),
    Mutation("fa4-causal-diagonal-block",
             "the causal mask's block test is one key block late: the diagonal block of a Q tile is taken as wholly "
             "visible and its keys past the diagonal leak in",
             ATTN, "b.add(b.add(self._tile_row0(tile), shift), c(1))))", "b.add(b.add(self._tile_row0(tile), shift), c(1 + self.BN))))",
             ("fa4",)),
    # ---- the one online softmax over the score atoms (AttentionLowering._softmax_block) ----
    Mutation("softmax-chunk-max-first-only",
             "the block's row max is taken over the first chunk of the row only (sm_100a reads a row 32 columns at a "
             "time): a larger score in a later chunk gives P > 1 and a wrong sum",
             ATTN, "self._trees([[m[h] for m in maxima] for h in range(nrows)], b.maxnumf)",
             "self._trees([[maxima[0][h]] for h in range(nrows)], b.maxnumf)", ("fa4",)),
    Mutation("p-fragment-halves-swapped",
             "P's register-A fragments take the accumulator's row half from i // 2 and its column group from i % 2 "
             "(swapped): the P V wgmma multiplies the wrong rows' probabilities by V",
             FRAGMENTS, "(accumulator_register(2 * t + i // 2, i % 2, 0), accumulator_register(2 * t + i // 2, i % 2, 1))",
             "(accumulator_register(2 * t + i % 2, i // 2, 0), accumulator_register(2 * t + i % 2, i // 2, 1))",
             ("attention",)),
    Mutation("tmem-probs-unpacked-column",
             "P's chunk is stored at its S column instead of half of it (16-bit P packs two a 32-bit TMEM column): "
             "the later chunks land past P's columns, where the P V MMA does not read",
             TCGEN05, "b.const(column + chunk.first // 2)), packed)", "b.const(column + chunk.first)), packed)", ("fa4",)),
    # ---- score and mask modifiers (warploom.score; the probe's mods family, both targets) ----
    Mutation("mods-key-offset-dropped",
             "a modifier's kv_idx is the thread's first key of the block, not each column's: masks and biases that "
             "read the key position see one key per thread",
             ATTN, '"kv_idx": self._mod_index(b.add(first, c(offset)), "Sk"),\n', '"kv_idx": self._mod_index(first, "Sk"),\n',
             ("mods",)),
    Mutation("mods-score-unscaled",
             "the score modifier reads q·k without the scale (FlexAttention's score is q·k scale): a softcap or bias "
             "acts on scores sqrt(D) times too large",
             ATTN, '"score": b.mulf(vals[i], scale)}', '"score": vals[i]}', ("mods",)),
    Mutation("mods-log2-unit-raw",
             "after a score modifier the softmax still multiplies by scale_log2 (the scale applied twice) instead of "
             "log2(e)",
             ATTN, "return self.b.constf(LOG2E) if self.mods.score is not None else self.args[\"scale_log2\"]",
             "return self.args[\"scale_log2\"]", ("mods",)),
    Mutation("mods-head-is-batch",
             "the modifiers' head index reads the batch index: per-head biases (ALiBi's slopes) are head 0's for "
             "every head",
             ATTN, 'env = {"b": self.batch, "h": self.head,', 'env = {"b": self.batch, "h": self.batch,', ("mods",)),
    Mutation("mask-key-offset-dropped",
             "the mask modifier's kv_idx is the thread's first key of the block, not each column's: a prefix or window "
             "boundary inside a block keeps or drops whole runs of keys",
             ATTN, '"kv_idx": self._mod_index(b.add(first, c(offset)), "Sk")}', '"kv_idx": self._mod_index(first, "Sk")}',
             ("mods",)),
    Mutation("captured-stride-ignored",
             "a captured tensor's load ignores the strides: bias[h, kv] reads element h + kv, every head the first "
             "row's neighbours",
             "warploom/lowering/emit/score.py", "term = b.mul(i, s)", "term = i", ("mods",)),
    Mutation("captured-index-unclamped",
             "the modifiers read a ragged tile's keys past Sk unclamped: their loads of a captured tensor run past "
             "its end (the host checks the indices over 0 .. Sk - 1 only)",
             ATTN, "return self.b.mins(value, self.b.sub(self.args[size], self.b.const(1)))", "return value",
             ("mods",)),
    Mutation("sorted-ids-one-end",
             "a tensor declared non-decreasing is bounded by the id at the low end of the index interval only "
             "(t[lo], t[lo]): a query tile spanning two documents skips key blocks of its second one",
             "warploom/score/bounds.py", "self.o.load(tensor.value, head + [hi], type_)",
             "self.o.load(tensor.value, head + [lo], type_)", ("mods",)),
    Mutation("sorted-box-unclipped",
             "the kernel's key-block boxes are not clipped to Sk before the sorted ids' ends are loaded: the "
             "ragged last key block reads ids past the tensor's end",
             ATTN, 'box = {**clipped(box, self.args["Sq"], self.args["Sk"], ops), **({} if rows else {"q_idx": box["q_idx"]})}',
             "pass", ("mods",)),
    # ---- a mask's block table (warploom.score.table; AttentionLowering._table_row) ----
    Mutation("table-full-bit-ignored",
             "every block a tabled mask's table lists is taken as full: the mask is not applied on its partial "
             "blocks", ATTN, 'full = b.cmp("ne", b.and_(self._table_entry(ctx.loop), c(FULL_BIT)), c(0))',
             "full = self._true()", ("mods",)),
    Mutation("full-block-edge-unlimited",
             "a full block on the causal diagonal or the ragged edge skips its limits along with the mask: keys "
             "above the diagonal or past Sk are seen", ATTN,
             "scf.YieldOp(self._seen(vals, ch, rows, first, shift, False))\n                with",
             "scf.YieldOp(vals)\n                with", ("mods",)),
    Mutation("table-entry-from-the-count",
             "a tile's first key block is read from its row's count (the entries one place early): the walk takes "
             "other blocks than the table lists", ATTN, "at = b.add(b.add(self.table_row, b.const(1)), loop.kt)",
             "at = b.add(self.table_row, loop.kt)", ("mods",)),
    Mutation("table-row-without-head",
             "the table's row ignores the query head (its stride over H'): every head walks head 0's blocks",
             ATTN, 'b.mul(self.head, a["block_table_sh"])', "b.const(0)", ("mods",)),
    Mutation("table-full-judged-on-kept-only",
             "the host judges an evaluated box full where the rows and keys it keeps are all kept, forgetting the "
             "ones the mask drops: every box evaluated per element is full and left unmasked",
             "warploom/score/table.py", 'every[at] = a.reduce(kept | ~valid, "all")',
             'every[at] = a.reduce(kept | valid, "all")', ("mods",)),
    Mutation("known-load-first-element",
             "a captured tensor read at b or h only (prefix[b]) is bounded by its first element whatever the batch "
             "row: a row whose prefix is longer skips key blocks it keeps",
             "warploom/score/bounds.py", "value = self.o.load(tensor.value, [lo for lo, _ in index], type_)",
             'value = self.o.load(tensor.value, [self.o.const(0, "i32") for _ in index], type_)', ("mods",)),
    Mutation("table-known-load-not-one-value",
             "the table's bounds read a captured tensor's element at the low end of an index interval that spans "
             "several values, as if it were the only one: boxes of an element mask are settled from one element",
             "warploom/score/bounds.py", 'same = o.compare("eq", lo, hi, "i32")', 'same = o.compare("le", lo, hi, "i32")',
             ("mods",)),
    # ---- packed variable-length sequences (ops.attention_varlen; the ragged tensor maps) ----
    Mutation("varlen-key-start-from-q",
             "a packed sequence's keys start where its queries do (cu_seqlens_q read for both): every sequence "
             "after one whose key count differs from its query count attends to another's keys",
             ATTN, 'self.seq_q0, self.seq_k0 = start("cu_seqlens_q", seq), start("cu_seqlens_k", seq)',
             'self.seq_q0, self.seq_k0 = start("cu_seqlens_q", seq), start("cu_seqlens_q", seq)', ("varlen",)),
    Mutation("varlen-key-length-not-per-sequence",
             "the key length stays the longest sequence's (the kernel parameter Sk): the causal diagonal moves and "
             "keys past a sequence's end are seen as zero scores instead of masked",
             ATTN, 'a["Sk"] = b.sub(start("cu_seqlens_k", after), self.seq_k0)', 'a["Sk"] = a["Sk"]', ("varlen",)),
    Mutation("varlen-ragged-valid-unbounded",
             "a ragged box's valid rows are not capped at the box: a box wholly inside a long sequence starts at a "
             "negative R, so its first rows fall outside the map (zeros loaded, O rows dropped)",
             ATTN, "valid = b.mins(b.maxs(b.sub(length, row), c(0)), c(rows))", "valid = b.maxs(b.sub(length, row), c(0))",
             ("varlen",)),
    Mutation("varlen-lse-row-offset-dropped",
             "the packed LSE [Hq, Tq] is written without the sequence's first row: every sequence's LSE lands on "
             "the first sequence's rows",
             ATTN, "return b.add(b.mul(b.ext64(self.head), b.ext64(a[\"Tq\"])), b.ext64(self.seq_q0))",
             "return b.mul(b.ext64(self.head), b.ext64(a[\"Tq\"]))", ("varlen",)),
    # ---- block sparsity (the key range a mask modifier keeps; warploom.score.bounds) ----
    Mutation("sparse-range-last-block-dropped",
             "the tile's key range stops one block short of its last non-empty block: the keys a mask keeps there "
             "are never loaded",
             ATTN, "b.select(some, b.add(b.sub(last, first), c(1)), c(0))", "b.select(some, b.sub(last, first), c(0))",
             ("mods",)),
    Mutation("sparse-lower-end-by-must",
             "the lower end of the key range moves right past every half that is not full (must) instead of every "
             "half that may keep nothing: partial blocks at the start of the range are skipped",
             ATTN, "may = self._block_class(lo, b.sub(mid, c(1)))[0]", "may = self._block_class(lo, b.sub(mid, c(1)))[1]",
             ("mods",)),
    Mutation("sparse-partial-block-unmasked",
             "a block that may keep a key is taken as full: the mask modifier is skipped on partial blocks",
             ATTN, "full = self._block_class(kt, kt)[1]", "full = self._block_class(kt, kt)[0]", ("mods",)),
    Mutation("bounds-compare-ends-swapped",
             "the bounds of x <= y over a box compare x's upper end with y's lower for may (and the other two for "
             "must) instead of the reverse: a block whose smallest key is past some row's limit is called empty",
             "warploom/score/bounds.py", 'return o.compare(op, x0, y1, "i32"), o.compare(op, x1, y0, "i32")',
             'return o.compare(op, x1, y0, "i32"), o.compare(op, x0, y1, "i32")', ("mods",)),
    Mutation("mods-tanh-sign-lost",
             "the modifiers' tanh forgets the sign of its argument: tanh(-x) = tanh(x), a softcap maps every score "
             "to a positive one",
             "warploom/lowering/emit/score.py", "return b.select(b.cmpf(\"olt\", x, b.constf(0.0)), b.negf(r), r)",
             "return r", ("mods",)),
    Mutation("epilogue-run-unswizzled",
             "O's staging writes skip the swizzle of their 16-byte granule while the TMA store reads the tile as "
             "128B-swizzled: rows other than every eighth come out with their granules permuted",
             ATTN, "at = tile.swizzle.apply_with(b, b.add(row_at, c(within)))", "at = b.add(row_at, c(within))",
             ("attention", "fa4")),
    Mutation("fa4-lane-quadrant",
             "the softmax (and correction) warp w reads TMEM lanes 32 ((w + 1) % 4): a warp may reach only the "
             "quadrant of w % 4",
             FA4, "quadrant = b.remu(self._warp(), c(", "quadrant = b.remu(b.add(self._warp(), c(1)), c(", ("fa4",)),
    Mutation("fa4-o-into-q-early",
             "the correction normalizes O and writes it over Q's smem without waiting for the last P V (o_full of "
             "the last key block): O is read while the MMA still writes it",
             BARRIERS, 'last=tuple(Wait(f"o{i}_full", "phase^1") for i in tiles)', "last=()", ("fa4",)),
    Mutation("fa4-s-before-pv-done",
             "the MMA thread issues S_i of the next key block without waiting for P_i V of this one (o_full): S_i "
             "overwrites the P_i columns that P V may still read (different accumulators: no implicit order)",
             BARRIERS, '_wait_before(out, Wait(f"o{i}_full", "phase^1"))', "pass", ("fa4",)),
    Mutation("fa4-no-wait-st",
             "the softmax arrives on p_full without tcgen05.wait::st: the P V MMA may read P before it is in TMEM",
             FA4, "        self.atoms.tmem_wait_store()\n        b.store(factor", "        b.store(factor", ("fa4",)),
    Mutation("fa4-shared-kv-slot",
             "the shared K/V ring puts V in the same slot as K of its block (ring position = block * uses, the use "
             "dropped): V's copy overwrites K's slot while the S MMAs may read it, and the phases go out of step",
             CORE, "b.add(b.mul(loop.it, c(ring.uses)), c(use))", "b.mul(loop.it, c(ring.uses))", ("fa4",)),
    Mutation("fa4-poly-coefficient",
             "the polynomial exp2 (emit.exp2, both attention softmaxes) drops its linear term: the P elements it "
             "computes (a quarter in the sm_100a kernel and in the sm_90a probe's exp2_poly = 0.25 case) are wrong",
             EXP2, "    for coef in (*reversed(cs[:-1]), 1.0):\n        p = b.fma",
             "    for coef in (*reversed(cs[1:-1]), 1.0):\n        p = b.fma", ("attention", "fa4")),
    # ---- stream-K fix-up (sm_90a) ----
    Mutation("streamk-slot-overlap",
             "the workspace slots are indexed cta + slot instead of cta * 2 + slot: CTA c's last piece and CTA c + 1's "
             "first piece (often of the same tile) share a slot, and the later write wins",
             GEMM, "index = b.add(b.mul(cta, c(STREAMK_SLOTS)), slot)", "index = b.add(cta, slot)", ("streamk",)),
    Mutation("streamk-pieces-short",
             "the tile's piece count misses its last CTA: the second-to-last piece sums before the last one is in",
             CORE, "first), c(1))\n", "first), c(0))\n", ("streamk", "attention-streamk")),
    Mutation("streamk-counter-not-reset",
             "the summing CTA leaves the tile's counter at its piece count: the next launch on the same buffers "
             "miscounts every shared tile",
             CORE, "                b.store(c(0), counter, alignment=4)\n", "", ("streamk", "attention-streamk")),
    Mutation("streamk-partial-as-whole",
             "a piece that starts the tile but ends before its last K tile is stored as if it were the whole tile",
             GEMM, 'whole = b.and_(b.cmp("eq", pc.lo, c(0)), b.cmp("eq", pc.hi, self.trips))',
             'whole = b.cmp("eq", pc.lo, c(0))', ("streamk",)),
    Mutation("streamk-ring-base",
             "a stream-K CTA starts its stream-K run's ring iterations at 0 instead of after its data-parallel "
             "tiles' iterations: stage and phase disagree with the barriers' state",
             GEMM, "self.it_base = b.add(dp_iters, b.sub(t0, start))", "self.it_base = b.sub(t0, start)",
             ("streamk",)),
    Mutation("streamk-row-bound",
             "the fix-up takes a thread's fragment rows as outside M 8 rows early: at a ragged M the last rows' "
             "partial sums are neither written nor read, and those rows come out as zero",
             GEMM, "row_ok = [b.cmp(\"slt\", b.add(row0, c(8 * h)), self.M) for h in range(2)]",
             "row_ok = [b.cmp(\"slt\", b.add(row0, c(8 * h + 8)), self.M) for h in range(2)]", ("streamk",)),
    # ---- stream-K attention (sm_90a, non-causal; the probe's attention-streamk family: the attention's own code, which
    # the stream-K GEMMs never run) ----
    Mutation("streamk-attn-key-offset",
             "a stream-K piece's key loop starts at the tile's key block 0 instead of the piece's first block: the "
             "pieces of a split tile all read the first keys (and the masking of the ragged last block misses)",
             ATTN, "return loop.kt if self.kb0 is None else self.b.add(self.kb0, loop.kt)", "return loop.kt",
             ("attention-streamk",)),
    Mutation("streamk-attn-merge-weight",
             "the merge adds the pieces' O and row sums unweighted, as if every piece had the tile's row maximum",
             FA3, "w = [b.exp2(b.mulf(b.subf(b.extractelement(stats, h), top[h]), sl2)) for h in range(2)]",
             "w = [b.constf(1.0)] * 2", ("attention-streamk",)),
    Mutation("streamk-attn-stats-slot",
             "a piece writes its (max, sum) vector over the last vector of its O fragment in the workspace slot",
             FA3, "b.store(pack(mx + sm), vector(mine, n_vec), alignment=16)",
             "b.store(pack(mx + sm), vector(mine, n_vec - 1), alignment=16)", ("attention-streamk",)),
    Mutation("streamk-attn-next-piece",
             "a run's next piece starts at x + the piece's end block instead of at the tile's start + its end block: "
             "after a piece that starts mid-tile the run skips iterations",
             ATTN, "next_x = b.select(whole_tile, x, b.add(t0, end))",
             "next_x = b.select(whole_tile, x, b.add(x, end))", ("attention-streamk",)),
    # ---- 2x1 clusters sharing B by TMA multicast (sm_90a) ----
    Mutation("cluster-mask-own",
             "the B copy multicasts into its own CTA only (ctaMask 1): the other CTA's half of B never lands there",
             CORE, "        mask = (1 << self.cluster_m) - 1\n", "        mask = 1\n", ("cluster",)),
    Mutation("cluster-free-own-only",
             "a consumer frees a multicast slot in its own CTA's empty barrier only: the other CTA's producer, "
             "which refills this CTA's slot too, waits for arrivals that never come",
             CORE, "                    for r in range(self.cluster_m):\n",
             "                    for r in range(1):\n", ("cluster",)),
    Mutation("cluster-empty-count",
             "the empty barrier of a multicast ring counts one CTA's consumers: a producer refills both CTAs' slot "
             "while the other CTA's wgmmas may still read it",
             BARRIERS, "    if not any(op.multicast for op in copies):\n        return 1\n    size = 1\n",
             "    if not any(op.multicast for op in copies):\n        return 1\n    size = 1\n    return 1\n",
             ("cluster",)),
    Mutation("cluster-rank-rows",
             "both CTAs of a cluster take the tile's first 128 rows (the rank's row offset dropped): the second "
             "half of every tile is never computed",
             GEMM, 'self.origin["M"] = b.add(self.origin["M"], b.mul(self.rank, c(self.cta_rows)))',
             'self.origin["M"] = b.add(self.origin["M"], b.mul(self.rank, c(0)))', ("cluster", "sm100")),
    Mutation("cluster-box-share",
             "each CTA loads B boxes 0 .. n-1 instead of its own rank * n ..: the other half of B is never loaded",
             CORE, "box = plus(b.mul(self.rank, c(n)), j)", "box = plus(b.mul(self.rank, c(0)), j)", ("cluster",)),
    Mutation("cluster-row-share",
             "a B [N, K] box split by rows: each CTA loads rows 0 .. n-1 instead of rank * n ..",
             CORE, "first_row = b.mul(self.rank, c(n))", "first_row = b.mul(self.rank, c(0))", ("cluster",)),
    Mutation("cluster-no-exit-barrier",
             "no cluster barrier before the CTAs exit: one may exit while the other still arrives on its barriers",
             CORE, "        chain(0)\n        if self.cluster != (1, 1, 1):\n            sync.cluster_barrier()\n",
             "        chain(0)\n        if self.cluster != (1, 1, 1):\n", ("cluster",)),
    # ---- the persistent walk in bands of rows of tiles (group_m) ----
    Mutation("group-last-band-full",
             "the last band of the walk is taken as group_m rows even when fewer are left: its tiles land on rows "
             "past M and some of the real rows are never computed",
             RULES, "rows = ops.minu(ops.sub(m_tiles, first), ops.const(group))",
             "rows = ops.const(group)", ("group",)),
    Mutation("group-rows-off-by-one",
             "the lowering counts one more row of tiles than M has: the last band spreads its tiles over a row "
             "past M, and tiles of the real rows are never computed",
             GEMM, "rules.tile_origin(self.grid[0], tile, n_tiles, b, self.group_m, m_tiles)",
             "rules.tile_origin(self.grid[0], tile, n_tiles, b, self.group_m, b.add(m_tiles, c(1)))", ("group",)),
    # ---- the swap-AB GEMM (C^T = B^T A^T) ----
    Mutation("swap-a-read-k-major",
             "the swap-AB kernel's wgmma reads its A (B's [K, N] tile, MN-major) as K-major: imm-trans-a is left 0, "
             "so the MMA multiplies the wrong elements of B",
             GEMM, "a_major, b_major = a_tile.major(op.k_dim), b_tile.major(op.k_dim)\n        # k-block",
             'a_major, b_major = "K", b_tile.major(op.k_dim)\n        # k-block', ("swap",)),
    Mutation("swap-store-pair-one-row",
             "the transposed store puts both columns q, q + 1 of a fragment pair in C's row q: row q + 1 is never "
             "written and row q takes the wrong value",
             GEMM, "row = b.add(row0, c(8 * j + e))", "row = b.add(row0, c(8 * j))", ("swap",)),
    # ---- wl-fuse: an attention written out with score and mask ops folded into one wl.attention (issue 34) ----
    Mutation("fuse-drop-mask-negation",
             "a mask written where(drop, -inf, s) keeps the keys its condition drops: the negation of the condition "
             "is lost (a document mask sees only the other documents)",
             FUSE, 'return (E.apply("not", keep) if negate else keep), other', "return keep, other", ("fuse",)),
    Mutation("fuse-top-scale-lost",
             "a positive scale over the masks is dropped instead of joining the attention's scale",
             FUSE, 'pending *= float(op_attrs(op)["factor"])', "pending *= 1.0", ("fuse",)),
    Mutation("fuse-index-dims-swapped",
             "wl.index's q_idx and kv_idx are read as each other: relative positions change sign, causal-style masks "
             "flip",
             FUSE, 'return E.leaf(attrs["dim"])',
             'return E.leaf({"q_idx": "kv_idx", "kv_idx": "q_idx"}.get(attrs["dim"], attrs["dim"]))', ("fuse",)),
    Mutation("fuse-gather-indices-reversed",
             "a captured tensor is read at its indices in reverse order (bias[h, d] as bias[d, h])",
             FUSE, "return E.load(name, t, *(self.expr(a) for a in args[1:]))",
             "return E.load(name, t, *reversed([self.expr(a) for a in args[1:]]))", ("fuse",)),
    Mutation("fuse-masks-or-ed",
             "two masks on top of each other are or-ed instead of and-ed: a key either mask drops is seen",
             FUSE, 'mask = keep if mask is None else E.apply("and", mask, keep)',
             'mask = keep if mask is None else E.apply("or", mask, keep)', ("fuse",)),
]
