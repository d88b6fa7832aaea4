"""sm_90a lowering of the planned FA3-style attention program -> one `gpu.module` of NVVM/LLVM ops, plus launch data.

Input: the kernel program of `tests/emulate/fa3_plan.py::planned_fa3` (what the attention planning passes
produce); docs/attention-sm90.md is the contract (schedule, fragments, parameters). What it shares with the
GEMM comes from `warploom.lowering.sm90._Sm90Lowering`: the plan checks, the kernel function, the dynamic
smem base, mbarrier init, the role dispatch with setmaxnreg, ring stage/phase, waits, arrivals, TMA box loops
and wgmma descriptors. What is attention's own is here:

  prologue   grid schedule: the tile (m, h, b) = ctaid (x, y, z); persistent: each role walks its CTA's tiles
             (`_tile_loop`: rules.snake_tile / attention_tile, the order a kernel argument), the ring iteration
             counting on across tiles; per tile: query rows m*BM..; the kv head h / (Hq / Hkv); the key-block
             count from the loop's trip rule (`rules.evaluate` on IR values: cdiv(Sk, BN), or causal_blocks
             with m = the tile's query block), shared by both roles so they agree on every stage and phase;
  producer   Q once a tile (a ring outside the loop: one stage, or with wl-pipeline{q-stages=2} two advancing per
             tile, tile t's stage t % 2 and phase (t / 2) & 1, t counting the CTA's tiles with key blocks), then K and V
             per key block; 4-D TMA
             boxes (64, rows, 1, 1) at (64j, row0, head, batch);
  consumer   Sync -> bar.sync / bar.arrive on the named barrier turn[w] or turn[(w+1) % 2] (an i32 id picked
             at run time from the warpgroup index); Mma on smem x smem (S = Q K^T, scale-d 0 on the first
             k-block) or registers x smem (O += P V, `emit.wgmma.mma_async_reg_a`); Compute "online_softmax"
             (serial schedule), "softmax" and "rescale" (overlapped schedule) and "normalize" in registers;
             Store of O rows < Sq through the out strides, and of the LSE when its pointer is not null. A
             software-pipelined loop (sections first / last: FA3's intra-warpgroup overlap) becomes
             `if (n > 0) { first; for 1 .. n-1 { body }; last }`; ops with a lag use iteration - lag's stage
             and phase; a softmax run while MMA groups are in flight ends with an anchor load (`_anchor`) that
             keeps it before the wgmma.wait_group ending the overlap.

Register values of the consumer (per thread, the m64nN wgmma fragment: rows r0 = 16*warp + lane/4 and
r0 + 8; register 4c + 2h + e holds (r0 + 8h, 8c + 2(lane % 4) + e)): s (the S accumulator struct), p (the
register-A fragments of P, 4 i32 per k16 block), o_acc (the O accumulator struct), row_max and row_sum
(one f32 per row h: row_sum is the thread's partial sum, reduced over the quad once, in normalize), lse.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from mlir import ir
from mlir.dialects import llvm, nvvm, scf

from warploom.dialect import make_context
from warploom.kernel import Arrive, Compute, Copy, Loop, Mma, MmaWait, Program, Store, Sync, Wait
from warploom.kernels import (ATTENTION_MAP_DIMS, ATTENTION_WALKS, EXP2_POLY_GROUP, STREAMK_SLOTS,
                              attention_kernel_name, check_exp2_poly)
from warploom.lowering.emit import sync, tma, wgmma
from warploom.lowering.emit.exp2 import exp2_fma
from warploom.runtime import rules
from warploom.runtime.artifact import TensorMapSpec

from .sm90 import ELEM_TYPES, T, LoweredKernel, _Loop, _Role, _Sm90Lowering

OPS = {Loop: "loop", Wait: "wait", Arrive: "arrive", Copy: "copy", Mma: "mma", MmaWait: "mma_wait",
       Store: "store", Compute: "compute", Sync: "sync"}
OP_NAMES = ("Loop", "Wait", "Arrive", "Copy", "Mma", "MmaWait", "Store", "Compute", "Sync")
LN2 = math.log(2.0)
# loop-carried values other than MMA accumulators: their value before the first key block
CARRY_INIT = {"row_max": float("-inf"), "row_sum": 0.0}
MOVED = "_moved"        # (corr, its warp vote) from the softmax, for the rescale of the same block


@dataclass
class _StreamkPiece:
    """The unit a stream-K CTA works on now: its stream-K tile (index from 0 after the data-parallel tiles; a
    data-parallel tile has whole = true and the rest unused), that tile's first stream-K iteration t0 and key
    blocks kt, whether the unit is a whole tile, the CTA, the CTA count and the count of stream-K iterations
    (rules.attention_streamk_run)."""
    tile: ir.Value
    t0: ir.Value
    kt: ir.Value
    whole: ir.Value
    cta: ir.Value
    ctas: ir.Value
    iters: ir.Value


def overlapped(program: Program) -> bool:
    """True when the consumers' key loop is software pipelined (FA3's intra-warpgroup overlap: a first section)."""
    return any(isinstance(op, Loop) and bool(op.first) for r in program.roles for op in r.walk())


def kernel_name(program: Program) -> str:
    """wl_attn_{elem}_d{D}_{BM}x{BN}_s{stages}[_causal][_ov][_persistent][_q2][_p{eighths}]: the name the sm_90a
    attention kernel gets."""
    bm, bn, d = program.attrs["tile"]
    q = program.rings.get("q")
    return attention_kernel_name(program.inputs["q"].elem, d, bm, bn, program.attrs.get("stages", "?"),
                                 bool(program.attrs.get("causal")), overlapped(program),
                                 program.attrs.get("schedule", "grid"), q.stages if q is not None else 1,
                                 float(program.attrs.get("exp2_poly", 0.0)))


def lower_attention(program: Program, name: str, context: ir.Context | None = None) -> LoweredKernel:
    """Lower a planned attention kernel (planned_fa3); ValueError names what cannot be lowered and why."""
    return _AttentionLowering(program, name).lower(context or make_context())


def _flatten(values: dict, names) -> tuple[list, object]:
    """The values of `names` as one flat list of IR values (a register value is one value, a list of them, or a
    list of lists: P's register-A fragments), and the function that turns such a list back into {name: value}."""
    flat, shapes = [], []

    def shape_of(v):
        if isinstance(v, list):
            return [shape_of(x) for x in v]
        flat.append(v)
        return None

    for name in names:
        shapes.append((name, shape_of(values[name])))

    def unflatten(items):
        it = iter(items)

        def build(shape):
            return next(it) if shape is None else [build(x) for x in shape]
        return {name: build(shape) for name, shape in shapes}
    return flat, unflatten


class _AttentionLowering(_Sm90Lowering):
    OPS = OPS
    OP_NAMES = OP_NAMES

    # ---- configuration ------------------------------------------------------------------------
    def _read_config(self) -> None:
        p, a = self.p, self.p.attrs
        if p.kind != "attention":
            self._fail(f"kernel kind {p.kind!r}: this is the attention lowering")
        for value, key in ((a.get("stages"), "stages"), (p.threads, "threads"), (p.smem_bytes, "smem_bytes"),
                           (a.get("tile"), "tile")):
            if value is None:
                self._fail(f"the kernel has no {key!r}: plan it first (wl-plan-barriers and the passes before)")
        if not p.barriers:
            self._fail("the kernel has no mbarriers: run wl-plan-barriers first")
        self.BM, self.BN, self.D = a["tile"]
        self.stages, self.threads, self.smem_bytes = a["stages"], p.threads, p.smem_bytes
        self.causal = bool(a.get("causal", False))
        share = a.get("exp2_poly", 0.0)
        if check_exp2_poly(share):
            self._fail(f"exp2_poly = {share}: {check_exp2_poly(share)}")
        self.poly = round(share * EXP2_POLY_GROUP)      # of each EXP2_POLY_GROUP exp2 of a row, the last `poly`
        if a.get("acc_elem", "f32") != "f32":
            self._fail(f"acc_elem {a.get('acc_elem')!r}: only f32 accumulators are lowered")
        if list(a.get("cluster", [1, 1, 1])) != [1, 1, 1]:
            self._fail(f"cluster {a.get('cluster')}: thread-block clusters are not lowered")
        if self.threads % T.warpgroup_threads:
            self._fail(f"threads = {self.threads} is not a whole number of warpgroups")
        if list(p.inputs) != ["q", "k", "v"] or list(p.outputs) != ["out", "lse"]:
            self._fail(f"inputs {list(p.inputs)} -> outputs {list(p.outputs)}: attention takes q, k, v and gives "
                       "out, lse")
        self.elem = p.inputs["q"].elem
        elems = {t.elem for t in p.inputs.values()} | {p.outputs["out"].elem}
        if self.elem not in ELEM_TYPES or elems != {self.elem} or p.outputs["lse"].elem != "f32":
            self._fail(f"element types {sorted(elems)} (lse {p.outputs['lse'].elem}): q, k, v, out one of "
                       f"{ELEM_TYPES}, lse f32")
        self.mma_m = T.mma_shapes[0].m[0]
        self.mma_k = T.mma_k_of(self.elem)
        schedule = a.get("schedule", "grid")
        self.persistent, self.streamk = schedule in ATTENTION_WALKS, schedule == "streamk"
        if self.streamk and self.causal:
            self._fail("schedule streamk with a causal mask: the stream-K walk splits tiles of one length (non-causal)")
        want = {"persistent": (("attention_persistent", "Sq", self.BM, "Hq", "B", "SMS"), ("const", 1), ("const", 1)),
                "streamk": (("attention_streamk", "Sq", self.BM, "Sk", self.BN, "Hq", "B", "SMS"), ("const", 1),
                            ("const", 1))}.get(schedule, (("cdiv", "Sq", self.BM), ("cdiv", "Hq", 1), ("cdiv", "B", 1)))
        try:
            self.grid = tuple(rules.check(g) for g in a["grid"])
        except (KeyError, ValueError) as e:
            self._fail(f"grid {a.get('grid')}: {e}")
        if self.grid != want:
            self._fail(f"grid {[rules.text(g) for g in self.grid]}: expected {[rules.text(g) for g in want]} "
                       f"({'one CTA per SM walking the tiles' if self.persistent else 'query blocks, heads, batch'})")
        self.trip = (("causal_blocks", "Sq", "Sk", "m", self.BM, self.BN) if self.causal
                     else ("cdiv", "Sk", self.BN))
        for loop in (o for r in p.roles for o in r.walk() if isinstance(o, Loop)):
            if tuple(loop.trip) != self.trip:
                self._fail(f"loop trip {list(loop.trip)}: expected {list(self.trip)} (the key blocks)")
        self._check_plan()
        for name, region in self.tiles.items():
            if region.dims[1] != "D" or region.shape[1] != self.D:
                self._fail(f"buffer {name!r} {region.dims} {region.shape}: attention tiles are rows x D (D contiguous)")

    def _tensor_map(self, op: Copy) -> TensorMapSpec:
        """4-D TMA map (D, S, H, B): a box of one swizzle span of D by the tile's rows, one head, one batch."""
        if op.source not in ("q", "k", "v"):
            self._fail(f"async load of {op.source!r}: attention loads q, k and v")
        tile = self.tiles[self._region(op.region).name]
        return TensorMapSpec(name=op.source, operand=op.source, dtype=self.elem, box=tile.box + (1, 1),
                             swizzle=tile.swizzle.bytes, dims=ATTENTION_MAP_DIMS)

    def _param_list(self) -> list[tuple[str, str]]:
        return ([(n, "tensormap") for n in self.tmaps] + [("lse", "ptr")]
                + [(s, "i32") for s in ("Sq", "Sk", "Hq", "Hkv")] + [("scale_log2", "f32")]
                + ([("B", "i32"), ("tiles", "ptr") if self.causal else ("tile_order", "i32")] if self.persistent else [])
                + ([("workspace", "ptr"), ("counters", "ptr")] if self.streamk else []))

    def _store_map(self, op: Store) -> TensorMapSpec:
        """O's 4-D TMA map (D, S, H, B): a box of one swizzle span of D by one warpgroup's 64 rows."""
        if op.output != "out":
            self._fail(f"store of {op.output!r} through smem: attention stages out only")
        tile = self.tiles[self._region(op.region).name]
        return TensorMapSpec(name="out", operand="out", dtype=self.elem, box=(tile.box[0], self.mma_m, 1, 1),
                             swizzle=tile.swizzle.bytes, dims=ATTENTION_MAP_DIMS)

    def _bind_args(self, args: dict) -> None:
        self.args = args
        self.counters = args.get("counters")        # stream-K (_Sm90Lowering._streamk_hand_off)

    # ---- prologue ------------------------------------------------------------------------------
    def _prologue(self) -> None:
        b = self.b
        self.tid = b.sreg("tid", "x", "tid")
        self._smem_base()
        a = self.args
        self.group = b.divu(a["Hq"], a["Hkv"])          # GQA: query head h reads kv head h / (Hq / Hkv)
        self.it_base = self.tile_phase = self.tile_stage = self.has_keys = self.tile_first = self.tile_last = None
        self.kb0 = self.piece = self.store_flag = None      # stream-K: the piece's first key block, the piece
        # the rings loaded once a tile (Q's): their stages (2 where the next tile's Q is prefetched) and regions
        self.once_rings = {name: r for name, r in self.p.rings.items() if r.stages == 1 or r.counts == "tile"}
        self.once_stages = max([r.stages for r in self.once_rings.values()] or [1])
        self.once_regions = {n for r in self.once_rings.values() for n in r.regions}
        if not self.persistent:                          # the CTA's one tile: (ctaid.x, ctaid.y, ctaid.z)
            self._at_tile(b.sreg("ctaid", "x", "mblk"), b.sreg("ctaid", "y", "head"), b.sreg("ctaid", "z", "batch"))
        self._init_barriers()

    def _at_tile(self, m_block, head, batch) -> None:
        """The tile (query block, head, batch) the ops act on: its first row, kv head and key-block count."""
        b, a = self.b, self.args
        self.m_block, self.head, self.batch = m_block, head, batch
        self.row0 = b.mul(m_block, b.const(self.BM))
        self.trips = rules.evaluate(self.trip, {"Sq": a["Sq"], "Sk": a["Sk"], "m": m_block}, b)
        self.kv_head = b.divu(head, self.group)

    def _tile_loop(self, ops, ctx: _Role) -> None:
        """The role's ops, once (grid schedule), once per piece of this CTA's stream-K walk (`_streamk_walk`), or
        once per tile of this CTA (persistent): CTA c of P takes the
        tiles of `rules.snake_tile` in the order `tile_order` names; every role walks the same tiles, so the ring
        iteration of a key block is the key blocks of the CTA's earlier tiles (it_base) plus its index, and Q's
        stage and phase come from the count of its earlier tiles with key blocks (q_tiles % stages,
        (q_tiles / stages) & 1)."""
        if not self.persistent:
            self._ops(ops, ctx)
            return
        if self.streamk:
            self._streamk_walk(ops, ctx)
            return
        if self.causal:
            self._table_walk(ops, ctx)
            return
        b, c, a = self.b, self.b.const, self.args
        cta, ctas = b.sreg("ctaid", "x", "cta"), b.sreg("nctaid", "x", "ncta")
        blocks = rules.cdiv(a["Sq"], self.BM, b)
        pairs = b.mul(a["Hq"], a["B"])
        mine = rules.snake_count(b.mul(blocks, pairs), cta, ctas, b)
        with b.for_(c(0), mine, c(1), iter_args=[c(0), c(0)], iv=b.fresh("round")) as loop:
            tile = rules.snake_tile(loop.iv, cta, ctas, b)
            self._at_tile(*rules.attention_tile(tile, a["tile_order"], blocks, pairs, a["Hq"], self.causal, b))
            self._walk_step(ops, ctx, loop, mine)
        self.it_base = self.tile_phase = self.tile_stage = self.has_keys = self.tile_first = self.tile_last = None

    def _table_walk(self, ops, ctx: _Role) -> None:
        """The causal persistent walk: CTA c runs the tiles the host dealt it, entries tiles[c] .. tiles[c + 1] - 1
        of the table (rules.causal_tile_table), each a tile in order 0's numbering; the entry of the next tile is
        read while this one runs (the table's spare last entry lets the last tile read one past its own)."""
        b, c, a = self.b, self.b.const, self.args
        cta = b.sreg("ctaid", "x", "cta")
        blocks = rules.cdiv(a["Sq"], self.BM, b)
        pairs = b.mul(a["Hq"], a["B"])

        def entry(i):
            return b.load(b.i32, b.gep(a["tiles"], i, b.i32), 4, "tile")
        first = entry(cta)
        mine = b.sub(entry(b.add(cta, c(1))), first)
        with b.for_(c(0), mine, c(1), iter_args=[c(0), c(0), entry(first)], iv=b.fresh("round")) as loop:
            after = entry(b.add(b.add(first, loop.iv), c(1)))
            self._at_tile(*rules.attention_tile(loop.args[2], c(0), blocks, pairs, a["Hq"], True, b))
            self._walk_step(ops, ctx, loop, mine, after)
        self.it_base = self.tile_phase = self.tile_stage = self.has_keys = self.tile_first = self.tile_last = None

    def _walk_step(self, ops, ctx: _Role, loop, units: ir.Value, *extra: ir.Value) -> None:
        """One tile (or piece) of a walk: `loop` carries (it_base, q_tiles, *extra), `units` is its trip count.
        The ops run on the tile `_at_tile` set; the loop yields the next it_base and q_tiles, then `extra`."""
        b, c = self.b, self.b.const
        self.it_base, q_tiles = loop.args[:2]
        self.tile_first = b.cmp("eq", loop.iv, c(0))
        self.tile_last = b.cmp("eq", loop.iv, b.sub(units, c(1)))
        self.tile_stage = b.remu(q_tiles, c(self.once_stages)) if self.once_stages > 1 else c(0)
        self.tile_phase = b.and_(b.divu(q_tiles, c(self.once_stages)) if self.once_stages > 1 else q_tiles, c(1))
        self.has_keys = b.cmp("sgt", self.trips, c(0))
        outer, ctx.values = ctx.values, None           # register values live within one tile
        self._ops(ops, ctx)
        ctx.values, self.store_flag = outer, None
        loop.yield_(b.add(self.it_base, self.trips), b.add(q_tiles, b.select(self.has_keys, c(1), c(0))), *extra)

    def _streamk_walk(self, ops, ctx: _Role) -> None:
        """Stream-K (non-causal; rules, "the stream-K attention schedule"): CTA c's units are first its D / P
        data-parallel tiles (round r: rules.snake_tile, all key blocks), then the pieces of its run [lo, hi) of the
        stream-K (tile, key block) iterations: the piece starting at iteration x is key blocks [x % kt, end) of
        stream-K tile x / kt (tile D + x / kt), and the next starts where it ends. One loop over the units (the
        CTA's first and last unit bracket the consumers' turn protocol, as the persistent walk's first and last
        tile do); every role walks the same units, so the ring iterations (it_base) and Q's stage and phase agree."""
        b, c, a = self.b, self.b.const, self.args
        cta, ctas = b.sreg("ctaid", "x", "cta"), b.sreg("nctaid", "x", "ncta")
        blocks = rules.cdiv(a["Sq"], self.BM, b)
        pairs = b.mul(a["Hq"], a["B"])
        tiles = b.mul(blocks, pairs)
        kt = rules.cdiv(a["Sk"], self.BN, b)
        dp, iters, lo, hi, pieces = rules.attention_streamk_run(tiles, kt, cta, ctas, b)
        rounds = b.divu(dp, ctas)
        units = b.add(rounds, pieces)
        with b.for_(c(0), units, c(1), iter_args=[c(0), c(0), lo], iv=b.fresh("unit")) as loop:
            x = loop.args[2]
            whole_tile = b.cmp("ult", loop.iv, rounds)
            sk_tile, first, end = rules.attention_streamk_piece(x, hi, kt, b)
            tile = b.select(whole_tile, rules.snake_tile(loop.iv, cta, ctas, b), b.add(dp, sk_tile))
            m_block, head, batch = rules.attention_tile(tile, a["tile_order"], blocks, pairs, a["Hq"], False, b)
            self._at_tile(m_block, head, batch)
            self.kb0 = b.select(whole_tile, c(0), first)
            self.trips = b.select(whole_tile, kt, b.sub(end, first))
            whole = b.or_(whole_tile, b.and_(b.cmp("eq", first, c(0)), b.cmp("eq", end, kt)))
            t0 = b.mul(sk_tile, kt)                      # the stream-K tile's first iteration
            self.piece = _StreamkPiece(sk_tile, t0, kt, whole, cta, ctas, iters)
            next_x = b.select(whole_tile, x, b.add(t0, end))
            self._walk_step(ops, ctx, loop, units, next_x)
        self.it_base = self.tile_phase = self.tile_stage = self.has_keys = self.tile_first = self.tile_last = None
        self.kb0 = self.piece = None

    def _ops(self, ops, ctx: _Role) -> None:
        """The ops in order, counting the MMA groups in flight (a loop section starts with none). In a persistent
        kernel a tile with no key block (causal rows before the first key) skips Q's protocol: nothing would read
        the Q tile, so it is not loaded, waited for or freed, and Q's phase counts only tiles with key blocks."""
        self.in_flight = 0
        for op in ops:
            if self.has_keys is not None and ctx.loop is None and self._on_once_ring(op):
                with self.b.if_(self.has_keys):
                    super()._ops([op], ctx)
                continue
            super()._ops([op], ctx)
            if isinstance(op, Mma):
                self.in_flight += 1
            elif isinstance(op, MmaWait):
                self.in_flight = min(self.in_flight, op.pending)

    def _on_once_ring(self, op) -> bool:
        """True for a Wait, Arrive or Copy on the barriers of a ring loaded once a tile (Q's)."""
        bar = op.barrier if isinstance(op, (Wait, Arrive, Copy)) else None
        return any(bar in (r.full, r.empty) for r in self.once_rings.values())

    def _ring_it(self, kt: ir.Value) -> ir.Value:
        """The ring iteration of key block kt of this tile (persistent: after the CTA's earlier tiles' blocks)."""
        return kt if self.it_base is None else self.b.add(self.it_base, kt)

    # ---- ring plumbing --------------------------------------------------------------------------
    def _need_loop(self, op, ctx: _Role) -> _Loop:
        """Inside the key loop its iteration; outside it, the tile's use of a ring loaded once a tile (Q): the
        tile's stage and phase (stage 0, phase 0 in a grid kernel)."""
        if ctx.loop is not None:
            return ctx.loop
        c = self.b.const
        return _Loop(None, None, self.tile_stage if self.tile_stage is not None else c(0),
                     self.tile_phase if self.tile_phase is not None else c(0), {}, once=True, stages=self.once_stages)

    def _stage_offset(self, region, loop: _Loop) -> ir.Value:
        """A region loaded once a tile (Q) is at the tile's stage wherever it is read, inside the key loop too;
        the others at the loop iteration's."""
        if region.name not in self.once_regions or region.stages == 1:
            return super()._stage_offset(region, loop)
        b, c = self.b, self.b.const
        return b.add(c(region.offset), b.mul(self.tile_stage, c(self._stage_bytes(region))))

    def _key_block(self, loop: _Loop) -> ir.Value:
        """The tile's key block that iteration loop.kt of the key loop works on: kt, after the piece's first block
        in a stream-K piece."""
        return loop.kt if self.kb0 is None else self.b.add(self.kb0, loop.kt)

    def _coord_origin(self, dim: str, loop: _Loop) -> ir.Value | None:
        if dim == "D":
            return None
        if dim == "M":
            return self.row0
        if dim == "N":                      # first key of this key block
            if "n0" not in loop.cache:
                loop.cache["n0"] = self.b.mul(self._key_block(loop), self.b.const(self.BN))
            return loop.cache["n0"]
        self._fail(f"TMA tile dim {dim!r}: attention tiles are M x D (Q) or N x D (K, V)")

    def _outer_coords(self, op: Copy) -> list[ir.Value]:
        return [self.head if op.source == "q" else self.kv_head, self.batch]

    # ---- ops ----------------------------------------------------------------------------------
    def _op_loop(self, op: Loop, ctx: _Role) -> None:
        """scf.for over the key blocks. A software-pipelined loop (sections first / last) becomes
        `if (trips > 0) { first at block 0; for blocks 1 ..: body; last at block trips }`: with no key block
        (causal rows before the first key) nothing runs and the carried values keep their initial ones."""
        b, c = self.b, self.b.const
        if ctx.loop is not None:
            self._fail("nested loops")
        if ctx.values is None:
            ctx.values = {}
        if not (op.first or op.last):
            for name in op.carries:
                if name not in ctx.values:
                    ctx.values[name] = self._initial(name, op)
            self._for(op, c(0), ctx)
            return
        # the values that live on after the loop start from their initial values; the others (P) are made by
        # the first section and carried through the body only
        outer = [n for n in op.carries if self._has_initial(n, op)]
        for name in outer:
            if name not in ctx.values:
                ctx.values[name] = self._initial(name, op)
        flat, unflatten = _flatten(ctx.values, outer)
        if_op = scf.IfOp(b.cmp("sgt", self.trips, c(0)), [v.type for v in flat], has_else=True)
        with ir.InsertionPoint(if_op.then_block):
            start = c(0)
            if op.first:
                ctx.loop = self._loop_state(c(0), self._ring_it(c(0)))
                self._ops(op.first, ctx)
                ctx.loop = None
                start = c(1)
            missing = [n for n in op.carries if n not in ctx.values]
            if missing:
                self._fail(f"loop carries {missing}, which no initial value and no first section gives")
            self._for(op, start, ctx)
            if op.last:             # iteration `trips`: its ops carry a lag, acting on the last block's stages
                ctx.loop = self._loop_state(self.trips, self._ring_it(self.trips))
                self._ops(op.last, ctx)
                ctx.loop = None
            scf.YieldOp(_flatten(ctx.values, outer)[0])
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp(flat)
        ctx.values.update(unflatten(list(if_op.results)))

    def _for(self, op: Loop, start: ir.Value, ctx: _Role) -> None:
        """scf.for over blocks start .. trips - 1 running op.body, carrying op.carries."""
        b, c = self.b, self.b.const
        flat, unflatten = _flatten(ctx.values, op.carries)
        with b.for_(start, self.trips, c(1), iter_args=flat, iv=b.fresh("kb")) as loop:
            ctx.values.update(unflatten(loop.args))
            ctx.loop = self._loop_state(loop.iv, self._ring_it(loop.iv))
            self._ops(op.body, ctx)
            ctx.loop = None
            loop.yield_(*_flatten(ctx.values, op.carries)[0])
        if op.carries:
            ctx.values.update(unflatten(loop.results))

    def _accumulator(self, name: str, loop: Loop) -> Mma | None:
        return next((o for _, ops in loop.sections for o in ops if isinstance(o, Mma) and o.acc.name == name), None)

    def _has_initial(self, name: str, loop: Loop) -> bool:
        return name in CARRY_INIT or self._accumulator(name, loop) is not None

    def _initial(self, name: str, loop: Loop):
        """The value of a loop-carried register before the first iteration."""
        b = self.b
        mma = self._accumulator(name, loop)
        if mma is not None:
            return b.zero(wgmma.acc_type(b, mma.shape[1]), "acc")
        if name in CARRY_INIT:
            return [b.constf(CARRY_INIT[name])] * 2       # one per row the thread holds
        self._fail(f"loop carries {name!r}, which has no initial value (an MMA accumulator, row_max or row_sum)")


    def _op_sync(self, op: Sync, ctx: _Role) -> None:
        b, c = self.b, self.b.const
        nb = self.p.named_barriers.get(op.barrier)
        if nb is None:
            self._fail(f"Sync on {op.barrier!r}: no such named barrier")
        if ctx.issue != "warpgroup":
            self._fail(f"Sync in role {ctx.name!r}: named barriers are used by warpgroup roles here")
        n_wgs = ctx.role.warps * T.warp_size // T.warpgroup_threads
        if nb.count not in (1, n_wgs):
            self._fail(f"named barrier {nb.name!r} has {nb.count} instances for {n_wgs} warpgroups")
        emit = sync.named_barrier_arrive if op.arrive_only else sync.named_barrier_sync
        if op.slot not in ("own", "next"):
            self._fail(f"Sync slot {op.slot!r}: 'own' or 'next'")
        if op.tiles not in ("each", "first", "last"):
            self._fail(f"Sync tiles {op.tiles!r}: 'each', 'first' or 'last'")
        if op.tiles != "each" and self.tile_first is not None:      # persistent: the CTA's first / last tile only
            with b.if_(self.tile_first if op.tiles == "first" else self.tile_last):
                self._op_sync(replace(op, tiles="each"), ctx)
            return
        if op.warpgroup is not None:            # one warpgroup only: its barrier is known here
            w = op.warpgroup
            idx = w if op.slot == "own" else (w + 1) % nb.count
            with b.if_(b.cmp("eq", ctx.wg_index, c(w))):
                emit(b, nb.id + idx % nb.count, nb.threads)
            return
        if nb.count == 1:
            bid = nb.id
        elif op.slot == "own":
            bid = b.add(c(nb.id), ctx.wg_index)
        else:
            bid = b.add(c(nb.id), b.remu(b.add(ctx.wg_index, c(1)), c(nb.count)))
        emit(b, bid, nb.threads)

    def _op_mma(self, op: Mma, ctx: _Role) -> None:
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
            b_major = "col" if b_tile.major(op.k_dim) == "K" else "row"
            if op.accumulate:
                acc = ctx.values[op.acc.name]
            else:                               # scale-d 0 on the first k-block: the input is not read
                acc = b.undef(wgmma.acc_type(b, n))
            wgmma.fence()
            for kk in range(kblocks):
                da = desc_a if kk == 0 else b.add(desc_a, c(a_tile.k_block_offset(kk, self.mma_k, op.k_dim) >> 4,
                                                            b.i64))
                db = desc_b if kk == 0 else b.add(desc_b, c(b_tile.k_block_offset(kk, self.mma_k, op.k_dim) >> 4,
                                                            b.i64))
                scale = "zero" if kk == 0 and not op.accumulate else "one"
                acc = wgmma.mma_async(b, acc, da, db, (m, n, self.mma_k), self.elem, b_major, scale_d=scale)
        elif op.a.source == "regs":
            frags = ctx.values.get(op.a.name)
            if not isinstance(frags, list) or len(frags) != kblocks:
                self._fail(f"Mma A from registers {op.a.name!r}: no register-A fragments for {kblocks} k-blocks "
                           "(a Compute must write them first)")
            if not op.accumulate:
                self._fail("Mma with A in registers accumulates here")
            trans_b = 1 if b_tile.major(op.k_dim) == "MN" else 0
            acc = ctx.values[op.acc.name]
            wgmma.fence()
            for kk in range(kblocks):
                db = desc_b if kk == 0 else b.add(desc_b, c(b_tile.k_block_offset(kk, self.mma_k, op.k_dim) >> 4,
                                                            b.i64))
                acc = wgmma.mma_async_reg_a(b, acc, frags[kk], db, n, self.elem, trans_b=trans_b)
        else:
            self._fail(f"Mma A from {op.a.source!r}: smem or registers")
        wgmma.commit()
        ctx.values[op.acc.name] = acc

    # ---- the thread's rows and the fragment ------------------------------------------------------
    def _rows(self, ctx: _Role) -> dict:
        """Per thread: lane, quad column offset, and the two query rows (global index) it holds. Computed where
        they are used (in the key loop: in its masked blocks only, not held in registers across the loop)."""
        if ctx.loop is not None or "_rows" not in ctx.values:
            b, c = self.b, self.b.const
            lane = b.remu(self.tid, c(T.warp_size))
            warp = b.divu(ctx.thread_in_wg, c(T.warp_size))
            r0 = b.add(b.add(self.row0, b.mul(ctx.wg_index, c(self.mma_m))),
                       b.add(b.mul(warp, c(16)), b.divu(lane, c(4))))
            rows = {"lane": lane, "col": b.mul(b.remu(lane, c(4)), c(2)), "rows": [r0, b.add(r0, c(8))]}
            if ctx.loop is not None:
                return rows
            ctx.values["_rows"] = rows
        return ctx.values["_rows"]

    def _quad(self, values: list, combine) -> list:
        """`combine` over the 4 lanes of a quad (one fragment row), for each of `values` (one a row): shfl.bfly
        xor 1, then xor 2, the rows' shuffles side by side so one's latency hides behind the other's."""
        for x in (1, 2):
            values = [combine(v, o) for v, o in zip(values, [sync.shfl_bfly(self.b, v, x) for v in values])]
        return values

    @staticmethod
    def _trees(rows: list, combine) -> list:
        """`combine` over each of `rows` (lists of one length) as a pairwise tree, the rows' trees built level by
        level and op by op side by side: the same tree per row (so the same rounding) with twice the independent
        work at each level, for a softmax that runs on one warp per SM sub-partition (ncu, run 36: a row at a
        time left its max and sum chains waiting on each other's latency)."""
        while len(rows[0]) > 1:
            level = [[] for _ in rows]
            for i in range(0, len(rows[0]), 2):
                for r, out in zip(rows, level):
                    out.append(combine(r[i], r[i + 1]) if i + 1 < len(r) else r[i])
            rows = level
        return [r[0] for r in rows]

    def _pack(self, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """Two f32 -> one b32 of two 16-bit values (cvt.rn.{bf16,f16}x2.f32), `lo` in the low half."""
        b = self.b
        ty = {"bf16": ir.BF16Type, "f16": ir.F16Type}[self.elem].get()
        op = nvvm.ConvertF32x2ToBF16x2Op if self.elem == "bf16" else nvvm.ConvertF32x2ToF16x2Op
        return op(ir.VectorType.get([2], ty), hi, lo, rnd=nvvm.FPRoundingMode.RN, loc=b.loc()).result

    # ---- Compute ----------------------------------------------------------------------------------
    def _op_compute(self, op: Compute, ctx: _Role) -> None:
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

    def _masked(self, vals: list, ctx: _Role) -> list:
        """S with the columns no row may see set to -inf: keys >= Sk (the ragged last block, which TMA filled
        with zeros) and, when causal, keys > row + Sk - Sq. Only a block that may hold such a column pays: the
        block condition is uniform over the CTA (its first row has the smallest causal limit)."""
        b, c = self.b, self.b.const
        a = self.args
        loop = ctx.loop
        n = len(vals) * 2
        kt = self._key_block(loop)
        kv_end = b.mul(b.add(kt, c(1)), c(self.BN))
        may = b.cmp("sgt", kv_end, a["Sk"])
        shift = b.sub(a["Sk"], a["Sq"])                       # the causal diagonal's offset: key <= row + shift
        if self.causal:
            may = b.or_(may, b.cmp("sgt", kv_end, b.add(b.add(self.row0, shift), c(1))))
        op = scf.IfOp(may, [b.f32] * len(vals), has_else=True)
        with ir.InsertionPoint(op.then_block):
            rows = self._rows(ctx)
            first = b.add(b.mul(kt, c(self.BN)), rows["col"])           # key of this lane's column 0
            out = list(vals)
            for h in range(2):
                limit = a["Sk"]                                            # keys < limit are seen
                if self.causal:
                    limit = b.mins(limit, b.add(b.add(rows["rows"][h], shift), c(1)))
                room = b.sub(limit, first)                                 # column offsets < room are seen
                for cc in range(n // 8):
                    for e in range(2):
                        i = 4 * cc + 2 * h + e
                        seen = b.cmp("slt", c(8 * cc + e), room)
                        out[i] = b.select(seen, vals[i], b.constf(float("-inf")))
            scf.YieldOp(out)
        with ir.InsertionPoint(op.else_block):
            scf.YieldOp(vals)
        return list(op.results)

    def _online_softmax(self, op: Compute, ctx: _Role) -> None:
        """online_softmax: S, statistics, O -> P, statistics, O rescaled; softmax (the overlapped schedule): S,
        statistics -> P, statistics, corr (O is rescaled later, by `rescale`, once the P V in flight retired)."""
        b = self.b
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
        s = ctx.values[s_name]
        nreg = self.BN // 2
        vals = [b.extractvalue(s, i, b.f32, "s") for i in range(nreg)]
        vals = self._masked(vals, ctx)
        sl2 = self.args["scale_log2"]
        m_old, l_old = ctx.values[max_name], ctx.values[sum_name]
        # the two rows a thread holds (register 4c + 2h + e is row h), each step for both rows side by side
        idx = [[4 * cc + 2 * h + e for cc in range(nreg // 4) for e in range(2)] for h in range(2)]
        own = self._trees([[vals[i] for i in row] for row in idx], b.maxnumf)     # the thread's own columns
        m_new = [b.maxnumf(m_old[h], q) for h, q in enumerate(self._quad(own, b.maxnumf))]
        # a row with every column so far masked has max -inf: use 0 so that exp2 gives 0, not NaN
        safe = [b.select(b.cmpf("oeq", mx, b.constf(float("-inf"))), b.constf(0.0), mx) for mx in m_new]
        neg = [b.negf(b.mulf(sf, sl2)) for sf in safe]
        p = list(vals)
        for k, pair in enumerate(zip(*idx)):                    # k: the column's place among the thread's of a row
            for h, i in enumerate(pair):
                p[i] = self._exp2(b.fma(vals[i], sl2, neg[h]), k)
        corr = [b.exp2(b.mulf(b.subf(m_old[h], safe[h]), sl2)) for h in range(2)]
        total = self._trees([[p[i] for i in row] for row in idx], b.addf)
        l_new = [b.fma(l_old[h], corr[h], total[h]) for h in range(2)]
        moved = self._moved(corr)
        if self.in_flight:              # MMA groups run beside this softmax: keep it before the wait that ends them
            self._anchor(l_new, moved)
        # P as the register-A fragments of the P V wgmma: k-block t = S columns 16t..16t+15
        frags = []
        for t in range(nreg // 8):
            frags.append([b.bitcast(self._pack(p[8 * t + 2 * q], p[8 * t + 2 * q + 1]), b.i32) for q in range(4)])
        ctx.values.update({"p": frags, max_name: m_new, sum_name: l_new})
        if o_name is None:
            ctx.values[op.writes[-1]] = corr
            ctx.values[MOVED] = (corr, moved)
        else:
            ctx.values[o_name] = self._scaled(ctx.values[o_name], corr, moved)

    def _exp2(self, x: ir.Value, k: int) -> ir.Value:
        """2^x for the k-th score a thread holds of a row: of each EXP2_POLY_GROUP, the last `poly` by the polynomial
        on the FMA units (emit.exp2.exp2_fma: FA4's unloading of MUFU), the others by ex2.approx (MUFU.EX2)."""
        poly = k % EXP2_POLY_GROUP >= EXP2_POLY_GROUP - self.poly
        return exp2_fma(self.b, x) if poly else self.b.exp2(x)

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
        rarely moves, and the D/2 multiplies sit between the wait for the last P V and the next turn (ncu, run 38:
        with the conversion of P, 9% of a consumer warp's loop at head dim 128)."""
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

    def _rescale(self, op: Compute, ctx: _Role) -> None:
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

    def _normalize(self, op: Compute, ctx: _Role) -> None:
        b = self.b
        o_name, max_name, sum_name = op.reads
        if tuple(op.writes) != (o_name, "lse"):
            self._fail(f"Compute normalize writes {list(op.writes)}: expected {o_name}, lse")
        if self.piece is not None:
            self.store_flag = self._streamk_merge(ctx, o_name, max_name, sum_name)
        sl2 = self.args["scale_log2"]
        zero = b.constf(0.0)
        inv, lse = [], []
        totals = self._quad(ctx.values[sum_name], b.addf)
        for h in range(2):
            total = totals[h]
            empty = b.cmpf("oeq", total, zero)                 # the row saw no key: O = 0, lse = -inf
            inv.append(b.select(empty, zero, b.divf(b.constf(1.0), total)))
            m = ctx.values[max_name][h]
            safe = b.select(b.cmpf("oeq", m, b.constf(float("-inf"))), zero, m)
            # lse = max * scale + ln(sum) = (max * scale_log2 + log2(sum)) * ln 2; log2(0) = -inf
            lse.append(b.mulf(b.fma(safe, sl2, b.log2(total)), b.constf(LN2)))
        o = ctx.values[o_name]
        for i in range(self.D // 2):
            o = b.insertvalue(o, b.mulf(b.extractvalue(o, i, b.f32, "o"), inv[(i // 2) % 2]), i)
        ctx.values.update({o_name: o, "lse": lse})

    def _streamk_merge(self, ctx: _Role, o_name: str, max_name: str, sum_name: str) -> ir.Value:
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
        pc, threads = self.piece, T.warpgroup_threads
        n_wgs = self.BM // self.mma_m
        n_vec = self.D // 8                                   # the O fragment: D / 2 f32 a thread, 4 a vector
        f32x4 = ir.VectorType.get([4], b.f32)
        sl2 = self.args["scale_log2"]
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
    def _op_store(self, op: Store, ctx: _Role) -> None:
        if ctx.issue != "warpgroup" or ctx.loop is not None:
            self._fail(f"Store in role {ctx.name!r} must follow the key loop of a warpgroup role")
        if op.output == "out":
            self._store_out(op, ctx)
        elif op.output == "lse":
            self._store_lse(op, ctx)
        else:
            self._fail(f"Store to {op.output!r}: attention stores out and lse")

    def _store_out(self, op: Store, ctx: _Role) -> None:
        """O through smem and TMA: the warpgroup syncs on its epilogue barrier (the previous tile's store, waited for
        with wait_group.read by its issuing thread, has read the staging tile), each thread writes its fragment
        rows (pairs of columns as one 4-byte st.shared at the 128B-swizzled address of the tile's layout) into the
        warpgroup's 64 rows of the staging region, fences them for the async proxy, syncs again, and the
        warpgroup's first thread stores its rows with one TMA box per 64 columns at (64j, row0 + 64w, head,
        batch): rows past Sq fall outside the tensor and are dropped. It commits the bulk group; it waits until
        the smem has been read (so the region may be written again, and the CTA may exit) before the next store
        writes it, or right away where the region is another's bytes (O over Q's)."""
        b, c = self.b, self.b.const
        if list(op.tile) != [self.mma_m, self.D]:
            self._fail(f"Store tile {list(op.tile)}: the O fragment is [{self.mma_m}, {self.D}]")
        if op.region is None or op.barrier is None:
            self._fail("Store of out: the attention lowering stores O through a staging smem region (wl-pipeline) "
                       "with a named barrier per warpgroup (wl-specialize)")
        region, nb = self._region(op.region), self.p.named_barriers.get(op.barrier)
        n_wgs = self.BM // self.mma_m
        if nb is None or nb.count != n_wgs or nb.threads != T.warpgroup_threads:
            self._fail(f"Store of out syncs on {op.barrier!r}: a named barrier of {T.warpgroup_threads} threads per "
                       f"consumer warpgroup ({n_wgs})")
        tile = self.tiles[region.name]
        if tile.rows != self.BM or tile.shape[1] != self.D:
            self._fail(f"staging region {region.name!r} {tile.shape}: it holds the CTA's [{self.BM}, {self.D}] O")
        bar = b.add(c(nb.id), ctx.wg_index)
        # On its own bytes the staging tile is written only by the next store, so the issuing thread waits for the
        # previous store's reads here, a tile later (and once more before the CTA exits: _Sm90Lowering._role), not
        # right after issuing it: the warpgroup goes on to the next tile meanwhile. On another region's bytes (O
        # over Q's), what follows the store (q_empty's arrival) may free them, so the wait stays at the store.
        deferred = not region.aliases
        if deferred:
            with b.if_(ctx.wg_leader):
                tma.bulk_wait_group(0, read=True)
        sync.named_barrier_sync(b, bar, nb.threads)              # the previous store has read the region
        o = ctx.values[op.value]
        vals = [b.extractvalue(o, i, b.f32, "o") for i in range(self.D // 2)]
        rows = self._rows(ctx)
        lane, wg_row = rows["lane"], b.mul(ctx.wg_index, c(self.mma_m))
        warp = b.divu(ctx.thread_in_wg, c(T.warp_size))
        elem_bytes = tile.elem_bits // 8
        for h in range(2):
            row = b.add(wg_row, b.add(b.add(b.mul(warp, c(16)), b.divu(lane, c(4))), c(8 * h)))
            # the thread's pair of row `row`, columns 8cc + col: logical byte box * box_bytes + row * span + within;
            # the swizzle moves the 16-byte granule within its row only, so it is applied to the row's first
            # byte plus the pair's offset in its box (the box offset, a multiple of the repeat, passes through)
            row_at = b.add(b.mul(row, c(tile.span)), b.mul(rows["col"], c(elem_bytes)))
            for cc in range(self.D // 8):
                box, within = divmod(8 * cc * elem_bytes, tile.span)      # the pair stays in its 16-byte granule
                at = tile.swizzle.apply_with(b, b.add(row_at, c(within)))
                addr = b.add(at, c(region.offset + box * tile.box_bytes))
                pair = self._pack(vals[4 * cc + 2 * h], vals[4 * cc + 2 * h + 1])
                b.store(b.bitcast(pair, b.i32), b.gep(self.base, addr), alignment=4)
        sync.fence_proxy_async_smem()                            # the writes, for the TMA store's async reads
        sync.named_barrier_sync(b, bar, nb.threads)
        with b.if_(ctx.wg_leader):
            # stream-K: a piece that did not merge its tile stores nothing: its box starts at row Sq, past the end,
            # and TMA drops every element of it. (Not a branch around the store: ptxas 13.0 then keeps the key
            # loop's ring arithmetic off the uniform datapath, +68 SASS instructions a key block at head dim 128.)
            row0 = self.row0 if self.store_flag is None else b.select(self.store_flag, self.row0, self.args["Sq"])
            coords = [None, b.add(row0, wg_row), self.head, self.batch]
            for j in range(tile.num_boxes):
                src = b.add(c(region.offset + tile.box_offset(j)), b.mul(wg_row, c(tile.span)))
                coords[0] = c(tile.box_start(j))
                tma.tma_store(b, self.tmap_args["out"], b.gep(self.base, src), list(coords))
            tma.bulk_commit_group()
            if not deferred:
                tma.bulk_wait_group(0, read=True)

    def _store_lse(self, op: Store, ctx: _Role) -> None:
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
            # (b * Hq + h) * Sq, in 64 bits
            plane = b.mul(b.add(b.mul(b.ext64(self.batch), b.ext64(a["Hq"])), b.ext64(self.head)), b.ext64(a["Sq"]))
            for h in range(2):
                r = rows["rows"][h]
                ok = b.and_(first, b.cmp("slt", r, a["Sq"]))
                if self.store_flag is not None:         # stream-K: only the piece that merged its tile stores
                    ok = b.and_(ok, self.store_flag)
                with b.if_(ok):
                    idx = b.add(plane, b.ext64(r))
                    b.store(lse[h], b.gep(a["lse"], idx, b.f32), alignment=4)
