"""The attention lowering, for every target: what a planned attention `Program` is on any target.

`AttentionLowering` holds what every attention kernel has: its configuration (tile, stages, causal, the exp2
polynomial share, the schedule and its grid rule, the key loop's trip rule), its parameters (docs/attention-sm90.md
"Kernel parameters": q, k, v and out tensor maps, the LSE pointer, Sq, Sk, Hq, Hkv, scale_log2; the persistent
walks' B and tile order or the causal deal's table; the stream-K fix-up's buffers), the 4-D tensor maps (D, S, H,
B), the prologue and the tile walks:

  prologue   grid schedule: the tile (m, h, b) = ctaid (x, y, z); persistent: each role walks its CTA's tiles
             (`_tile_loop`: rules.snake_tile / attention_tile, the order a kernel argument; causal: the host's deal,
             a table), the ring iteration counting on across tiles; stream-K: whole tiles, then this CTA's run of
             (tile, key block) iterations. Per tile: query rows m*BM..; the kv head h / (Hq / Hkv); the key-block
             count from the loop's trip rule (`rules.evaluate` on IR values: cdiv(Sk, BN), or causal_blocks with m
             = the tile's query block), shared by every role so they agree on every stage and phase;
  loads      Q once a tile (a ring outside the key loop: one stage, or two advancing per tile with
             wl-pipeline{q-stages=2}: tile t's stage t % 2 and phase (t / 2) & 1, t counting the CTA's tiles with key
             blocks), then K and V per key block; 4-D TMA boxes (64, rows, 1, 1) at (64j, row0, head, batch).

The key loop (`_op_loop`) is scf.for over the key blocks carrying the MMA accumulators held in registers and the
softmax's row statistics (one value per row a thread holds); a software-pipelined loop (sections first / last: FA3's
intra-warpgroup overlap) becomes `if (n > 0) { first; for 1 .. n-1 { body }; last }`, and ops with a lag use
iteration - lag's stage and phase. The online softmax of one key block (`_softmax_block`: mask, row max, the max rule, exp2 with the polynomial's
share, row sum, P) is written here once, over the score atoms (`warploom.lowering.atoms`: how a thread holds rows
of S, reads them, combines a row across threads and writes P) and a max rule (`ExactMax`, FA3's; `ThresholdMax`,
FA4's conditional rescaling, where the plan gives `rescale_threshold`); so is O's epilogue (`_store_out`: each
thread's rows of O, read by the atoms' `read_rows`, written in runs of a 16-byte granule at most into the 128B-swizzled
staging tile, fenced, synced and stored by TMA), the forms saying only where their rows and staging tiles are.

Where the accumulators live decides the rest (the target's atoms: `atoms.accumulator`; `warploom.lowering`
picks): `warploom.lowering.attention_regs` (FA3-style: consumer warpgroups holding S, P and O in registers) and
`warploom.lowering.attention_tmem` (FA4-style: S, P and O in Tensor Memory, softmax and correction warpgroups).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from mlir import ir
from mlir.dialects import nvvm, scf

from warploom.kernel import Arrive, Copy, Loop, MmaWait, Mma, Program, Store, Wait
from warploom.kernel.contract import (ATTENTION_MAP_DIMS, ATTENTION_VARLEN_MAP_DIMS, ATTENTION_WALKS, deals_by_table, walks_table, EXP2_POLY_GROUP, FA4_EXP2_POLY,
                                      FA4_RESCALE_THRESHOLD, attention_kernel_name, attention_params, check_exp2_poly,
                                      fa4_kernel_name, mods_suffix, varlen_suffix)
from warploom.lowering.core import ELEM_TYPES, KernelLowering, LoopState, RoleState
from warploom.lowering.emit import sync, tma
from warploom.lowering.emit.exp2 import exp2_fma, exp2_fma_x2
from warploom.lowering.emit.score import LOG2E, ModOps
from warploom.lowering.emit.staging import granule_runs
from warploom.runtime import rules
from warploom.runtime.artifact import TensorMapSpec
from warploom.score import ModError, ScoreMods, evaluate
from warploom.score.bounds import Known, classify, clipped
from warploom.score.table import ENTRY_SCALE, FULL_BIT
from warploom.score.expr import param_name, stride_name

LN2 = math.log(2.0)
# loop-carried values other than MMA accumulators (a Q tile's own may end in its index: row_max0): their value before
# the first key block
CARRY_INIT = {"row_max": float("-inf"), "row_sum": 0.0}


class ExactMax:
    """The online softmax's running row max, exact (FA3): in score units, moved to the block's max whenever that is
    larger; O is rescaled by corr = 2^((m_old - m_new) scale_log2), exactly 1 where the max stayed."""

    def update(self, b, m_old: list, block: list, sl2: ir.Value) -> tuple[list, list]:
        """(the new maxima, the exp2 bias -m scale_log2 of each row); a row with every column so far masked has max
        -inf: its bias is 0, so that exp2 gives 0, not NaN."""
        self.b, self.m_old, self.sl2 = b, m_old, sl2
        m_new = [b.maxnumf(old, q) for old, q in zip(m_old, block)]
        self.safe = [b.select(b.cmpf("oeq", mx, b.constf(float("-inf"))), b.constf(0.0), mx) for mx in m_new]
        return m_new, [b.negf(b.mulf(sf, sl2)) for sf in self.safe]

    def correction(self) -> list:
        """Each row's factor for O and the row sum: 2^((m_old - m_new) scale_log2)."""
        b = self.b
        return [b.exp2(b.mulf(b.subf(old, sf), self.sl2)) for old, sf in zip(self.m_old, self.safe)]

    def log2_norm(self, b, m: ir.Value, total: ir.Value, sl2: ir.Value) -> ir.Value:
        """log2 of the row's softmax denominator: m scale_log2 + log2(sum) (m = -inf: 0 + log2(0) = -inf)."""
        safe = b.select(b.cmpf("oeq", m, b.constf(float("-inf"))), b.constf(0.0), m)
        return b.fma(safe, sl2, b.log2(total))


class ThresholdMax:
    """The running row max with FA4's conditional rescaling: in scaled log2 units (m = max s scale_log2), moved only
    when the block's max exceeds it by more than `threshold`; then corr = 2^(m_old - m_new) for O and the row sum,
    else exactly 1 (P may then exceed 1 by up to 2^threshold, which the final division by the sum cancels)."""

    def __init__(self, threshold: float):
        self.threshold = threshold

    def update(self, b, m_old: list, block: list, sl2: ir.Value) -> tuple[list, list]:
        ninf = b.constf(float("-inf"))
        self.b, self.m_old, self.m_new, self.moved = b, m_old, [], []
        for old, q in zip(m_old, block):
            cand = b.maxnumf(old, b.mulf(q, sl2))
            grow = b.cmpf("ogt", cand, b.addf(old, b.constf(self.threshold)))   # m_old = -inf: any finite max
            self.m_new.append(b.select(grow, cand, old))
            self.moved.append(b.and_(grow, b.cmpf("one", old, ninf)))     # O holds something to rescale only then
        # all masked so far: the bias 0 makes exp2(-inf) = 0
        return self.m_new, [b.negf(b.select(b.cmpf("oeq", m, ninf), b.constf(0.0), m)) for m in self.m_new]

    def correction(self) -> list:
        b = self.b
        return [b.select(mv, b.exp2(b.subf(old, new)), b.constf(1.0))
                for old, new, mv in zip(self.m_old, self.m_new, self.moved)]

    def log2_norm(self, b, m: ir.Value, total: ir.Value, sl2: ir.Value) -> ir.Value:
        """m + log2(sum), m already in scaled log2 units (-inf for a row that saw no key)."""
        safe = b.select(b.cmpf("oeq", m, b.constf(float("-inf"))), b.constf(0.0), m)
        return b.addf(safe, b.log2(total))


@dataclass
class AttentionPiece:
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
    """wl_attn_{elem}_d{D}_{BM}x{BN}_s{stages}[_causal][_ov][_persistent][_q2][_p{eighths}]: the name a register-
    accumulator (FA3-style) attention kernel gets."""
    bm, bn, d = program.attrs["tile"]
    q = program.rings.get("q")
    return attention_kernel_name(program.inputs["q"].elem, d, bm, bn, program.attrs.get("stages", "?"),
                                 bool(program.attrs.get("causal")), overlapped(program),
                                 program.attrs.get("schedule", "grid"), q.stages if q is not None else 1,
                                 float(program.attrs.get("exp2_poly", 0.0))) + _suffixes(program)




def fa4_name(program: Program) -> str:
    """The name a Tensor Memory (FA4-style) attention kernel gets (warploom.kernel.contract.fa4_kernel_name)."""
    bm, bn, d = program.attrs["tile"]
    a = program.attrs
    return fa4_kernel_name(program.inputs["q"].elem, d, bm, bn, a.get("stages", "?"), bool(a.get("causal")),
                           bool(a.get("shared_kv")), float(a.get("rescale_threshold", FA4_RESCALE_THRESHOLD)),
                           float(a.get("exp2_poly", FA4_EXP2_POLY))) + _suffixes(program)


def _suffixes(program: Program) -> str:
    """_varlen (packed sequences), then the modifiers' _m{key}."""
    return varlen_suffix(bool(program.attrs.get("varlen", False))) + mods_suffix(_mods(program))


def _mods(program: Program) -> ScoreMods:
    try:
        return ScoreMods.from_attrs(program.attrs)
    except ModError as e:
        raise ValueError(f"the attention kernel's modifiers: {e}") from None


def flatten(values: dict, names) -> tuple[list, object]:
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


class AttentionLowering(KernelLowering):
    """The attention kernel on any target: configuration, parameters, tensor maps, prologue, tile walks, ring
    plumbing of the rings loaded once a tile, TMA coordinates, the key loop and the online softmax of a block."""
    ROW_CHUNK: int | None = None      # columns of S a thread reads at a time where they are streamed (None: a row)

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
        try:
            self.mods = ScoreMods.from_attrs(a)          # score and mask modifiers (`_modified`), or none
        except ModError as e:
            self._fail(f"the attention's modifiers: {e}")
        if self.mods and a.get("schedule") == "streamk":
            self._fail("score/mask modifiers with schedule streamk: the stream-K walk is lowered for the plain "
                       "attention only")
        share = a.get("exp2_poly", 0.0)
        if check_exp2_poly(share):
            self._fail(f"exp2_poly = {share}: {check_exp2_poly(share)}")
        self.poly = round(share * EXP2_POLY_GROUP)      # of each EXP2_POLY_GROUP exp2 of a row, the last `poly`
        # the softmax's running max: FA4's conditional rescaling where the plan gives a threshold, else exact
        self.max_rule = (ThresholdMax(float(a["rescale_threshold"])) if "rescale_threshold" in a else ExactMax())
        if a.get("acc_elem", "f32") != "f32":
            self._fail(f"acc_elem {a.get('acc_elem')!r}: only f32 accumulators are lowered")
        if list(a.get("cluster", [1, 1, 1])) != [1, 1, 1]:
            self._fail(f"cluster {a.get('cluster')}: thread-block clusters are not lowered")
        if self.threads % self.T.warpgroup_threads:
            self._fail(f"threads = {self.threads} is not a whole number of warpgroups")
        if list(p.inputs) != ["q", "k", "v"] or list(p.outputs) != ["out", "lse"]:
            self._fail(f"inputs {list(p.inputs)} -> outputs {list(p.outputs)}: attention takes q, k, v and gives "
                       "out, lse")
        self.elem = p.inputs["q"].elem
        elems = {t.elem for t in p.inputs.values()} | {p.outputs["out"].elem}
        if self.elem not in ELEM_TYPES or elems != {self.elem} or p.outputs["lse"].elem != "f32":
            self._fail(f"element types {sorted(elems)} (lse {p.outputs['lse'].elem}): q, k, v, out one of "
                       f"{ELEM_TYPES}, lse f32")
        self.mma_m = self.T.mma_shapes[0].m[0]
        self.mma_k = self.T.mma_k_of(self.elem)
        schedule = a.get("schedule", "grid")
        self.persistent, self.streamk = schedule in ATTENTION_WALKS, schedule == "streamk"
        self.varlen = bool(a.get("varlen", False))      # packed sequences: `_at_tile` reads the tile's sequence
        self.table = walks_table(self.mods, self.varlen)  # the mask's key blocks from the host's block table
        if self.varlen and schedule != "grid":
            self._fail(f"varlen with schedule {schedule}: packed sequences are lowered for the grid schedule only")
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
                             swizzle=tile.swizzle.bytes, dims=self._map_dims())

    def _map_dims(self) -> tuple[str, ...]:
        """(D, S, H, B); packed sequences: the ragged (D, R, H, T) (kernel.contract.ATTENTION_VARLEN_MAP_DIMS)."""
        return ATTENTION_VARLEN_MAP_DIMS if self.varlen else ATTENTION_MAP_DIMS

    def _param_list(self) -> list[tuple[str, str]]:
        """The contract's parameters of the kernel's schedule (kernel.contract.attention_params), checked against the
        tensor maps the plan's copies and stores need."""
        params = list(attention_params(self.p.attrs.get("schedule", "grid"), self.causal, self.mods, self.varlen))
        maps = [n for n, kind in params if kind == "tensormap"]
        if maps != list(self.tmaps):
            self._fail(f"the plan loads and stores through tensor maps {list(self.tmaps)}; the attention contract's "
                       f"are {maps}")
        return params

    def _store_map(self, op: Store) -> TensorMapSpec:
        """O's 4-D TMA map (D, S, H, B): a box of one swizzle span of D by one warpgroup's 64 rows."""
        if op.output != "out":
            self._fail(f"store of {op.output!r} through smem: attention stages out only")
        tile = self.tiles[self._region(op.region).name]
        return TensorMapSpec(name="out", operand="out", dtype=self.elem, box=(tile.box[0], self.mma_m, 1, 1),
                             swizzle=tile.swizzle.bytes, dims=self._map_dims())

    def _bind_args(self, args: dict) -> None:
        self.args = args
        self.counters = args.get("counters")        # stream-K (KernelLowering._streamk_hand_off)

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
        """The tile (query block, head, batch) the ops act on: its first row, kv head and key-block count. With
        packed sequences (varlen) `batch` is the sequence: its lengths replace the Sq and Sk every rule reads."""
        b, a = self.b, self.args
        self.m_block, self.head, self.batch = m_block, head, batch
        if self.varlen:
            self._at_sequence(batch)
        self.row0 = b.mul(m_block, b.const(self.BM))
        self.trips = rules.evaluate(self.trip, {"Sq": a["Sq"], "Sk": a["Sk"], "m": m_block}, b)
        self.kv_head = b.divu(head, self.group)
        self.kb0 = None                                  # the tile's first key block: 0 unless a mask narrows it
        if self.table:
            self._table_row()
        elif self.mods.mask is not None:
            self._tile_rows()
            self._key_range()

    def _at_sequence(self, seq) -> None:
        """Packed sequences: sequence `seq`'s first query and key rows (cu_seqlens_q/k[seq], kept for the TMA
        coordinates and the LSE) and its lengths, which from here on are the Sq and Sk of every rule, mask and
        bound (the kernel parameters Sq, Sk are the longest sequences', which size the grid only; the grid
        schedule sets the tile once, before any role branches, so the values hold everywhere)."""
        b, c, a = self.b, self.b.const, self.args

        def start(name, i):
            return b.load(b.i32, b.gep(a[name], i, b.i32), 4, name)
        after = b.add(seq, c(1))
        self.seq_q0, self.seq_k0 = start("cu_seqlens_q", seq), start("cu_seqlens_k", seq)
        a["Sq"] = b.sub(start("cu_seqlens_q", after), self.seq_q0)
        a["Sk"] = b.sub(start("cu_seqlens_k", after), self.seq_k0)

    def _ragged(self, row: ir.Value, rows: int, source: str) -> list[ir.Value]:
        """The (R, T) coordinates of a ragged map's box of `rows` rows starting at row `row` of the tile's sequence
        of `source` (q or out: the query sequence; k, v: the key sequence): valid = clamp(length - row, 0, rows)
        rows are the sequence's, at R = rows - valid, T = start + row + valid (kernel.contract, "Packed
        variable-length batches"); the others fall past R's end."""
        b, c, a = self.b, self.b.const, self.args
        length, first = (a["Sq"], self.seq_q0) if source in ("q", "out") else (a["Sk"], self.seq_k0)
        valid = b.mins(b.maxs(b.sub(length, row), c(0)), c(rows))
        return [b.sub(c(rows), valid), b.add(b.add(first, row), valid)]

    def _copy_coords(self, op: Copy, tile, coord: list) -> list:
        """[column, row] of a box, then head and batch; packed sequences: the ragged map's [column, R, head, T]."""
        if not self.varlen:
            return super()._copy_coords(op, tile, coord)
        r, t = self._ragged(coord[1], tile.box[1], op.source)
        return [coord[0], r, self._outer_coords(op)[0], t]

    def _lse_plane(self) -> ir.Value:
        """The LSE's element offset (i64) of the tile's row 0: (b Hq + h) Sq in [B, Hq, Sq]; packed sequences:
        h Tq + the sequence's first row, in [Hq, Tq] (flash_attn_varlen_func's packed LSE)."""
        b, a = self.b, self.args
        if self.varlen:
            return b.add(b.mul(b.ext64(self.head), b.ext64(a["Tq"])), b.ext64(self.seq_q0))
        return b.mul(b.add(b.mul(b.ext64(self.batch), b.ext64(a["Hq"])), b.ext64(self.head)), b.ext64(a["Sq"]))

    # ---- block sparsity: the key blocks a mask modifier keeps ------------------------------------------------------
    def _block_class(self, first: ir.Value, last: ir.Value, rows: tuple | None = None) -> tuple:
        """(may, must) of the mask modifier over key blocks first .. last (inclusive) of the tile's query rows
        (`rows`: (first row, last row), the tile's by default), by warploom.score.bounds: may false where no key
        of those blocks is kept for any of the rows (the blocks are empty), must true where every one is (full)."""
        b, c = self.b, self.b.const
        box = {"q_idx": rows if rows is not None else self.tile_rows,
               "kv_idx": (b.mul(first, c(self.BN)), b.add(b.mul(last, c(self.BN)), c(self.BN - 1)))}
        env = self._mod_env()
        box.update({n: (env[n], env[n]) for n in ("b", "h")})
        ops = ModOps(b, self.tile_loads if rows is None else None)
        ends = self._sorted_ends(env)
        if ends:                                         # the tile's rows are clipped once (`_tile_rows`)
            box = {**clipped(box, self.args["Sq"], self.args["Sk"], ops), **({} if rows else {"q_idx": box["q_idx"]})}
        known = {n: Known(env[n]) for n in self.mods.mask.tensors() if n not in ends}    # read at b, h: one element
        return classify(self.mods.mask, box, {n: env[n] for n, _ in self.mods.scalars}, ops, ends, known)

    def _sorted_ends(self, env: dict) -> dict:
        """The captured tensors declared non-decreasing that the mask reads (bounded by their values at the ends)."""
        return {n: env[n] for n in self.mods.sorted if n in self.mods.mask.tensors()}

    def _tile_rows(self) -> None:
        """The tile's query rows as `_block_class` bounds them, with a memo of the loads at their ends: a mask reading
        sorted ids loads ids[first row] and ids[last row] here, once a tile, and every later classification of the
        tile (the bisection, each key block's must in `_masked`) reuses them (they dominate every role's walk)."""
        b, c = self.b, self.b.const
        rows = (self.row0, b.add(self.row0, c(self.BM - 1)))
        self.tile_loads = {}
        if self._sorted_ends(self._mod_env()):
            rows = clipped({"q_idx": rows, "kv_idx": rows}, self.args["Sq"], self.args["Sk"], ModOps(b))["q_idx"]
        self.tile_rows = rows
        self._block_class(c(0), c(0))                    # the row ends' loads, memoized (the result is unused)

    def _table_row(self) -> None:
        """A tabled mask (contract.walks_table; warploom.score.table's layout): the tile walks the key blocks its row
        [b, h, m] of the host's block table lists, its count of them in the row's first element; `_key_block` reads
        the entry of each (kb * ENTRY_SCALE + full)."""
        b, a = self.b, self.args
        row = b.add(b.add(b.mul(self.batch, a["block_table_sb"]), b.mul(self.head, a["block_table_sh"])),
                    b.mul(self.m_block, a["block_table_sm"]))
        self.table_row = row
        self.trips = b.load(b.i32, b.gep(a["block_table"], row, b.i32), 4, "walked")

    def _table_entry(self, loop: LoopState) -> ir.Value:
        """The table entry of the key block iteration loop.kt works on (one load an iteration)."""
        if "entry" not in loop.cache:
            b = self.b
            at = b.add(b.add(self.table_row, b.const(1)), loop.kt)
            loop.cache["entry"] = b.load(b.i32, b.gep(self.args["block_table"], at, b.i32), 4, "entry")
        return loop.cache["entry"]

    def _mod_env(self) -> dict:
        """The modifiers' leaves that hold over the tile (IR values): its batch and query head, and the runtime
        scalars (kernel parameters mod_<name>)."""
        env = {"b": self.batch, "h": self.head, **{n: self.args[param_name(n)] for n, _ in self.mods.scalars}}
        for name, _, rank in self.mods.tensors:          # captured tensors: (address, strides), ModOps.load
            env[name] = (self.args[param_name(name)], [self.args[stride_name(name, i)] for i in range(rank)])
        return env

    def _key_range(self) -> None:
        """Block sparsity (docs/attention-variants.md "Block sparsity"): the tile walks only key blocks lo .. hi of
        the trip rule's 0 .. trips - 1, every block outside them empty under the mask modifier. Each end is found
        by bisection over boxes of blocks (`_block_class`): the lower end moves right past a half only where the
        half may keep nothing (so every block before lo is empty), the upper end left likewise; ceil(log2(trips))
        steps each, computed by every thread of every role alike (no collective: a one-thread role runs it too),
        so all roles agree on the tile's blocks. A tile whose blocks lo .. hi all may keep nothing walks none."""
        b, c = self.b, self.b.const
        n = self.trips
        steps = b.sub(c(32), b.clz(b.maxs(b.sub(n, c(1)), c(0))))         # ceil(log2(n)); 0 for n <= 1
        ends = []
        for upper in (False, True):
            with b.for_(c(0), steps, c(1), iter_args=[c(0), n], iv=b.fresh("bisect")) as loop:
                lo, hi = loop.args                                          # the end is in lo .. hi - 1
                mid = b.shru(b.add(lo, hi), c(1))
                wide = b.cmp("sgt", b.sub(hi, lo), c(1))
                if upper:                                                   # the end moves right where mid .. may keep
                    may = self._block_class(mid, b.sub(hi, c(1)))[0]
                    go = b.and_(wide, may)
                    loop.yield_(b.select(go, mid, lo), b.select(b.and_(wide, b.xor(may, self._true())), mid, hi))
                else:                                                       # left where lo .. mid - 1 may keep
                    may = self._block_class(lo, b.sub(mid, c(1)))[0]
                    loop.yield_(b.select(b.and_(wide, b.xor(may, self._true())), mid, lo),
                                b.select(b.and_(wide, may), mid, hi))
            ends.append(loop.results[0])
        first, last = ends
        some = b.and_(b.cmp("sle", first, last), self._block_class(first, last)[0])
        self.kb0 = first
        self.trips = b.select(some, b.add(b.sub(last, first), c(1)), c(0))

    def _true(self) -> ir.Value:
        return self.b.const(1, ir.IntegerType.get_signless(1))

    def _tile_loop(self, ops, ctx: RoleState) -> None:
        """The role's ops, once (grid schedule), once per piece of this CTA's stream-K walk (`_streamk_walk`), or
        once per tile of this CTA (persistent): CTA c of P takes the
        tiles of `rules.snake_tile` in the order `tile_order` names; every role walks the same tiles, so the ring
        iteration of a key block is the key blocks of the CTA's earlier tiles (it_base) plus its index, and Q's
        stage and phase come from the count of its earlier tiles with key blocks (q_tiles % stages,
        (q_tiles / stages) & 1)."""
        if not self.persistent:
            self._role_ops(ops, ctx)
            return
        if self.streamk:
            self._streamk_walk(ops, ctx)
            return
        if deals_by_table("persistent", self.causal, self.mods):
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

    def _table_walk(self, ops, ctx: RoleState) -> None:
        """The dealt persistent walk (causal, or with a mask modifier: contract.deals_by_table): CTA c runs the tiles
        the host dealt it, entries tiles[c] .. tiles[c + 1] - 1
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

    def _walk_step(self, ops, ctx: RoleState, loop, units: ir.Value, *extra: ir.Value) -> None:
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
        self._role_ops(ops, ctx)
        ctx.values, self.store_flag = outer, None
        loop.yield_(b.add(self.it_base, self.trips), b.add(q_tiles, b.select(self.has_keys, c(1), c(0))), *extra)

    def _streamk_walk(self, ops, ctx: RoleState) -> None:
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
            self.piece = AttentionPiece(sk_tile, t0, kt, whole, cta, ctas, iters)
            next_x = b.select(whole_tile, x, b.add(t0, end))
            self._walk_step(ops, ctx, loop, units, next_x)
        self.it_base = self.tile_phase = self.tile_stage = self.has_keys = self.tile_first = self.tile_last = None
        self.kb0 = self.piece = None

    def _ops(self, ops, ctx: RoleState) -> None:
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
    def _need_loop(self, op, ctx: RoleState) -> LoopState:
        """Inside the key loop its iteration; outside it, the tile's use of a ring loaded once a tile (Q): the
        tile's stage and phase (stage 0, phase 0 in a grid kernel)."""
        if ctx.loop is not None:
            return ctx.loop
        c = self.b.const
        return LoopState(None, None, self.tile_stage if self.tile_stage is not None else c(0),
                     self.tile_phase if self.tile_phase is not None else c(0), {}, once=True, stages=self.once_stages)

    def _stage_offset(self, region, loop: LoopState) -> ir.Value:
        """A region loaded once a tile (Q) is at the tile's stage wherever it is read, inside the key loop too;
        the others at the loop iteration's."""
        if region.name not in self.once_regions or region.stages == 1:
            return super()._stage_offset(region, loop)
        b, c = self.b, self.b.const
        return b.add(c(region.offset), b.mul(self.tile_stage, c(self._stage_bytes(region))))

    def _key_block(self, loop: LoopState) -> ir.Value:
        """The tile's key block that iteration loop.kt of the key loop works on: kt, after the piece's first block
        in a stream-K piece."""
        if self.table:                                   # a tabled mask: the block its entry names
            return self.b.divu(self._table_entry(loop), self.b.const(ENTRY_SCALE))
        return loop.kt if self.kb0 is None else self.b.add(self.kb0, loop.kt)

    def _coord_origin(self, dim: str, loop: LoopState) -> ir.Value | None:
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

    # ---- O's epilogue, written once: the accumulator's rows through swizzled smem and TMA ------------------------
    def _store_out(self, op: Store, ctx: RoleState) -> None:
        """O through smem and TMA, for both forms. The warpgroup first makes the staging tile free
        (`_before_out_writes`); then, chunk by chunk of its rows (the atoms' `row_chunks`), each thread reads its
        values of O (`_out_values`: the accumulator's load path: fragment registers, or tcgen05.ld) and writes them,
        each run of adjacent columns inside one 16-byte granule as one st.shared of packed 16-bit pairs (a pair: 4
        bytes; a whole granule: 16), at the address the staging tile's 128B-swizzled layout gives its row and
        columns; fence.proxy.async, the warpgroup syncs (with the atoms' fences), and its first thread stores the
        rows box by box (one per 64 columns) at (box column, row, head, batch): rows past Sq fall outside the tensor
        and are dropped. It commits the bulk group, and waits for its reads at once where the staging tile lies on
        bytes another ring frees after the store (`_out_wait_after`)."""
        b, c = self.b, self.b.const
        region, nb, tile = self._out_staging(op)
        bar = self._out_barrier(nb, ctx)
        self._before_out_writes(ctx, region, bar, nb)
        elem_bytes = tile.elem_bits // 8
        rows = None
        for ch in self.atoms.row_chunks(self.D, self.ROW_CHUNK):
            vals = self._out_values(op, ctx, ch)
            if rows is None:
                rows = self._out_rows(ctx)
            row_of, col = rows
            for h, columns in enumerate(ch.rows):
                row_at = b.mul(row_of(h), c(tile.span))
                if col is not None:
                    row_at = b.add(row_at, b.mul(col, c(elem_bytes)))
                for run in granule_runs(columns, elem_bytes):
                    # the run's place: logical byte box * box_bytes + row * span + within; the swizzle moves a
                    # 16-byte granule within its row only, so it applies to the row's first byte plus the run's
                    # offset in its box (the box offset, a multiple of the repeat, passes through)
                    box, within = divmod(run[0][1] * elem_bytes, tile.span)
                    at = tile.swizzle.apply_with(b, b.add(row_at, c(within)))
                    addr = b.add(at, c(region.offset + box * tile.box_bytes))
                    words = [b.bitcast(self._pack(vals[run[k][0]], vals[run[k + 1][0]]), b.i32)
                             for k in range(0, len(run), 2)]
                    value = words[0]
                    if len(words) > 1:
                        value = b.undef(ir.VectorType.get([len(words)], b.i32))
                        for k, w in enumerate(words):
                            value = b.insertelement(value, w, c(k))
                    b.store(value, b.gep(self.base, addr), alignment=4 * len(words))
        sync.fence_proxy_async_smem()                            # the writes, for the TMA store's async reads
        self.atoms.before_sync()
        sync.named_barrier_sync(b, bar, nb.threads)
        self.atoms.after_sync()
        with b.if_(ctx.wg_leader):
            row, rows_at = self._out_box(op, ctx, tile)
            coords = [None, row, self.head, self.batch]
            if self.varlen:                              # the ragged map: rows past the sequence's end are dropped
                r, t = self._ragged(row, self.tmaps["out"].box[1], "out")
                coords = [None, r, self.head, t]
            for j in range(tile.num_boxes):
                src = c(region.offset + tile.box_offset(j))
                if rows_at is not None:
                    src = b.add(src, rows_at())
                coords[0] = c(tile.box_start(j))
                tma.tma_store(b, self.tmap_args["out"], b.gep(self.base, src), list(coords))
            tma.bulk_commit_group()
            if self._out_wait_after(region):
                tma.bulk_wait_group(0, read=True)

    def _out_staging(self, op: Store) -> tuple:
        """(the staging region, its named barrier, its SmemTile), checked against what the form stores."""
        raise NotImplementedError

    def _out_barrier(self, nb, ctx: RoleState):
        """The id of the warpgroup's instance of the staging barrier (an int, or an i32 value picked at run time)."""
        raise NotImplementedError

    def _before_out_writes(self, ctx: RoleState, region, bar, nb) -> None:
        """Whatever makes the staging tile free for this warpgroup's writes."""

    def _out_values(self, op: Store, ctx: RoleState, ch) -> list:
        """The thread's values of O in chunk `ch`, as f32 in the chunk's value order, normalized."""
        raise NotImplementedError

    def _out_rows(self, ctx: RoleState) -> tuple:
        """(row_of(h): the staging tile's row of the thread's h-th row, built when called; the thread's first column,
        or None for the chunk's first)."""
        raise NotImplementedError

    def _out_box(self, op: Store, ctx: RoleState, tile) -> tuple:
        """(the TMA row coordinate of the warpgroup's rows; a function building their byte offset in the staging
        tile, or None for 0)."""
        raise NotImplementedError

    def _out_wait_after(self, region) -> bool:
        """Whether the storing thread waits for the store's smem reads right after it."""
        return False

    def _op_store(self, op: Store, ctx: RoleState) -> None:
        """O (`_store_out`) or the LSE (`_store_lse`) of a warpgroup role, after its key loop; each form writes them
        from where its accumulators are."""
        if ctx.issue != "warpgroup" or ctx.loop is not None:
            self._fail(f"Store in role {ctx.name!r} must follow the key loop of a warpgroup role")
        if op.output == "out":
            self._store_out(op, ctx)
        elif op.output == "lse":
            self._store_lse(op, ctx)
        else:
            self._fail(f"Store to {op.output!r}: attention stores out and lse")

    # ---- the key loop -----------------------------------------------------------------------------------------
    def _op_loop(self, op: Loop, ctx: RoleState) -> None:
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
        flat, unflatten = flatten(ctx.values, outer)
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
            scf.YieldOp(flatten(ctx.values, outer)[0])
        with ir.InsertionPoint(if_op.else_block):
            scf.YieldOp(flat)
        ctx.values.update(unflatten(list(if_op.results)))

    def _for(self, op: Loop, start: ir.Value, ctx: RoleState) -> None:
        """scf.for over blocks start .. trips - 1 running op.body, carrying op.carries."""
        b, c = self.b, self.b.const
        flat, unflatten = flatten(ctx.values, op.carries)
        with b.for_(start, self.trips, c(1), iter_args=flat, iv=b.fresh("kb")) as loop:
            ctx.values.update(unflatten(loop.args))
            ctx.loop = self._loop_state(loop.iv, self._ring_it(loop.iv))
            self._ops(op.body, ctx)
            ctx.loop = None
            loop.yield_(*flatten(ctx.values, op.carries)[0])
        if op.carries:
            ctx.values.update(unflatten(loop.results))

    def _accumulator(self, name: str, loop: Loop) -> Mma | None:
        return next((o for _, ops in loop.sections for o in ops if isinstance(o, Mma) and o.acc.name == name), None)

    def _has_initial(self, name: str, loop: Loop) -> bool:
        return name.rstrip("0123456789") in CARRY_INIT or self._accumulator(name, loop) is not None

    def _initial(self, name: str, loop: Loop):
        """The value of a loop-carried register before the first iteration."""
        b = self.b
        mma = self._accumulator(name, loop)
        if mma is not None:
            return self.atoms.zero_acc(b, mma.shape[1])
        if name.rstrip("0123456789") in CARRY_INIT:           # one per row the thread holds of S
            rows = len(self.atoms.row_chunks(self.BN, self.ROW_CHUNK)[0].rows)
            return [b.constf(CARRY_INIT[name.rstrip("0123456789")])] * rows
        self._fail(f"loop carries {name!r}, which has no initial value (an MMA accumulator, row_max or row_sum)")

    # ---- the online softmax of one key block, written once over the score atoms -----------------------------------
    def _softmax_block(self, ctx: RoleState, tile: int, source, dest, m_old: list, l_old: list,
                       before_write=None) -> tuple[list, list, list, list]:
        """One key block of the online softmax over the rows of S a thread holds (the atoms' `row_chunks`: sm_90a
        two rows of the wgmma fragment, sm_100a one TMEM lane in chunks of ROW_CHUNK columns), in the exp2 domain with
        the scale folded into one FMA:

            pass 1   each chunk of S read (`read_rows`) and masked (`_masked`); each row's max over its values (a
                     pairwise tree, the rows side by side), over the chunks, over the threads sharing the row
                     (`row_reduce`); the max rule (`self.max_rule`) gives the new max and the exp2 bias
            pass 2   P = 2^(s scale_log2 + bias) of each chunk (the scores kept from pass 1 where they stay in
                     registers, `rows_resident`, else read and masked again), a share `poly` by the FMA polynomial;
                     each row's sum; l_new = l_old corr + sum, corr from the max rule
            P        written where the P V MMA reads its A operand (`write_probs`): chunk by chunk as it is made when
                     the scores are streamed, else after `before_write(l_new, corr)` (the register form's hook)

        `source` / `dest` say where S is read and P written (the atoms' business); m_old and l_old are one value per
        row. Returns (m_new, l_new, corr, what write_probs returned per chunk)."""
        b, atoms = self.b, self.atoms
        chunks = atoms.row_chunks(self.BN, self.ROW_CHUNK)
        resident = atoms.rows_resident
        nrows = len(chunks[0].rows)
        sl2 = self._log2_unit()

        def scores(ch):
            return self._masked(atoms.read_rows(b, source, ch), ch, ctx, tile)

        def per_row(values: list, ch, combine) -> list:
            return self._trees([[values[i] for i, _ in row] for row in ch.rows], combine)

        kept, maxima = [], []
        for ch in chunks:
            vals = scores(ch)
            kept.append(vals if resident else None)
            maxima.append(per_row(vals, ch, b.maxnumf))
        block = atoms.row_reduce(b, self._trees([[m[h] for m in maxima] for h in range(nrows)], b.maxnumf), b.maxnumf)
        m_new, bias = self.max_rule.update(b, m_old, block, sl2)
        made, sums, written = [], [], []
        for ch, vals in zip(chunks, kept):
            probs = self._exp2_chunk(vals if resident else scores(ch), ch, sl2, bias)
            if resident:
                made.append(probs)
            else:
                sums.append(per_row(probs, ch, b.addf))
                written.append(atoms.write_probs(b, dest, ch, probs, self._pack))
        corr = self.max_rule.correction()
        if resident:
            sums = [per_row(probs, ch, b.addf) for ch, probs in zip(chunks, made)]
        total = self._trees([[s[h] for s in sums] for h in range(nrows)], b.addf)
        l_new = [b.fma(old, cf, t) for old, cf, t in zip(l_old, corr, total)]
        if before_write is not None:
            before_write(l_new, corr)
        written += [atoms.write_probs(b, dest, ch, probs, self._pack) for ch, probs in zip(chunks, made)]
        return m_new, l_new, corr, written

    def _exp2_chunk(self, vals: list, ch, sl2: ir.Value, bias: list) -> list:
        """2^(v scale_log2 + bias of its row) of a chunk's values. Of each EXP2_POLY_GROUP a row holds, the last `poly`
        by the polynomial on the FMA units (emit.exp2: FA4's unloading of MUFU), the others by ex2.approx
        (MUFU.EX2). Where the target has packed f32x2 FMAs the polynomial's values go two at a time
        (exp2_fma_x2, after every FMA of the chunk; an odd one alone); else value by value, the rows side by side."""
        b = self.b
        order = [(k, h, i) for k, pair in enumerate(zip(*[[i for i, _ in row] for row in ch.rows]))
                 for h, i in enumerate(pair)]

        def poly(k: int) -> bool:
            return k % EXP2_POLY_GROUP >= EXP2_POLY_GROUP - self.poly

        out = list(vals)
        if not self.T.packed_f32x2:
            for k, h, i in order:
                x = b.fma(vals[i], sl2, bias[h])
                out[i] = exp2_fma(b, x) if poly(k) else b.exp2(x)
            return out
        xs = {i: b.fma(vals[i], sl2, bias[h]) for _, h, i in order}
        paired = [i for k, _, i in order if poly(k)]
        for i0, i1 in zip(paired[::2], paired[1::2]):
            out[i0], out[i1] = exp2_fma_x2(b, xs[i0], xs[i1])
        if len(paired) % 2:
            out[paired[-1]] = exp2_fma(b, xs[paired[-1]])
        for _, _, i in order:
            if i not in paired:
                out[i] = b.exp2(xs[i])
        return out

    def _log2_unit(self) -> ir.Value:
        """The factor that takes the softmax's scores to log2 units: scale_log2 for the raw q·k scores, log2(e) where a
        score modifier has already scaled them (`_modified`)."""
        return self.b.constf(LOG2E) if self.mods.score is not None else self.args["scale_log2"]

    def _modified(self, vals: list, ch, ctx: RoleState, tile: int) -> list:
        """A chunk's scores through the attention's score modifier (warploom.score, evaluated on IR values by the same
        code as the reference's): each score is scaled (s scale, scale = scale_log2 ln 2) and replaced by the
        modifier's value at (batch, query head, query row, key). Every block pays."""
        b, c = self.b, self.b.const
        rows, first = self._thread_keys(ctx, tile)
        ops = ModOps(b)
        env = self._mod_env()
        score = self.mods.score
        scale = b.mulf(self.args["scale_log2"], b.constf(LN2))
        out = list(vals)
        for q_row, row_columns in zip(rows, ch.rows):
            q_idx = self._mod_index(q_row, "Sq")
            for i, offset in row_columns:
                at = {**env, "q_idx": q_idx, "kv_idx": self._mod_index(b.add(first, c(offset)), "Sk"),
                      "score": b.mulf(vals[i], scale)}
                s = evaluate(score, at, ops)
                out[i] = ops.to_f32(s, score.type) if score.type != "f32" else s
        return out

    def _mod_index(self, value: ir.Value, size: str) -> ir.Value:
        """A query row or key as the modifiers read it: itself, or where they load from captured tensors, at most
        `size` - 1 (Sq, Sk). A ragged tile computes rows past Sq and keys past Sk, which are dropped afterwards;
        their loads must stay inside the tensors, whose bounds the host checks over 0 .. Sq - 1 and 0 .. Sk - 1."""
        if not self.mods.tensors:
            return value
        return self.b.mins(value, self.b.sub(self.args[size], self.b.const(1)))

    def _thread_keys(self, ctx: RoleState, tile: int, kt: ir.Value | None = None) -> tuple[list, ir.Value]:
        """The thread's query rows (`_thread_rows`) and the key of its first column in key block `kt` (the loop's)."""
        b = self.b
        rows, col = self._thread_rows(ctx, tile)
        first = b.mul(self._key_block(ctx.loop) if kt is None else kt, b.const(self.BN))
        return rows, (first if col is None else b.add(first, col))

    def _masked(self, vals: list, ch, ctx: RoleState, tile: int) -> list:
        """A chunk's scores with the columns no row may see set to -inf: keys >= Sk (the ragged last block, which TMA
        filled with zeros), when causal keys > row + Sk - Sq (bottom-right), and where the mask modifier is false.
        Only a block that may hold such a column pays: the block condition is uniform over the Q tile (its first row
        has the smallest causal limit; the mask modifier's bounds over the tile's rows and the block's keys,
        `_block_class`, or the block table's entry say whether every key is kept: `full`); the thread's rows and keys
        are computed inside that branch only, and a full block there (on the diagonal or the ragged edge) applies
        its limits without evaluating the mask. A score modifier (`_modified`) comes first, where the kernel has
        one."""
        b, c = self.b, self.b.const
        a = self.args
        if self.mods.score is not None:
            vals = self._modified(vals, ch, ctx, tile)
        mask = self.mods.mask
        kt = self._key_block(ctx.loop)
        kv_end = b.mul(b.add(kt, c(1)), c(self.BN))
        may = b.cmp("sgt", kv_end, a["Sk"])
        shift = b.sub(a["Sk"], a["Sq"])                       # the causal diagonal's offset: key <= row + shift
        if self.causal:
            may = b.or_(may, b.cmp("sgt", kv_end, b.add(b.add(self._tile_row0(tile), shift), c(1))))
        full = None                                      # the mask keeps every valid key of the block
        if self.table:                                   # the entry says whether the block is full
            full = b.cmp("ne", b.and_(self._table_entry(ctx.loop), c(FULL_BIT)), c(0))
        elif mask is not None:
            full = self._block_class(kt, kt)[1]
        if full is not None:
            may = b.or_(may, b.xor(full, self._true()))
        op = scf.IfOp(may, [b.f32] * len(vals), has_else=True)
        with ir.InsertionPoint(op.then_block):
            rows, first = self._thread_keys(ctx, tile, kt)
            if full is None:
                scf.YieldOp(self._seen(vals, ch, rows, first, shift, False))
            else:                                        # a full block on an edge: its limits, not the mask
                edge = scf.IfOp(full, [b.f32] * len(vals), has_else=True)
                with ir.InsertionPoint(edge.then_block):
                    scf.YieldOp(self._seen(vals, ch, rows, first, shift, False))
                with ir.InsertionPoint(edge.else_block):
                    scf.YieldOp(self._seen(vals, ch, rows, first, shift, True))
                scf.YieldOp(list(edge.results))
        with ir.InsertionPoint(op.else_block):
            scf.YieldOp(vals)
        return list(op.results)

    def _seen(self, vals: list, ch, rows: list, first: ir.Value, shift: ir.Value, masked: bool) -> list:
        """`vals` with -inf where the thread's column is past Sk, above the causal diagonal, or (`masked`) where the
        mask modifier drops it."""
        b, c, a = self.b, self.b.const, self.args
        ops, env = ModOps(b), self._mod_env()
        out = list(vals)
        for row, columns in zip(rows, ch.rows):
            limit = a["Sk"]                                            # keys < limit are seen
            if self.causal:
                limit = b.mins(limit, b.add(b.add(row, shift), c(1)))
            room = b.sub(limit, first)                                 # column offsets < room are seen
            q_idx = self._mod_index(row, "Sq") if masked else None
            for i, offset in columns:
                seen = b.cmp("slt", c(offset), room)
                if masked:
                    at = {**env, "q_idx": q_idx, "kv_idx": self._mod_index(b.add(first, c(offset)), "Sk")}
                    seen = b.and_(seen, evaluate(self.mods.mask, at, ops))
                out[i] = b.select(seen, vals[i], b.constf(float("-inf")))
        return out

    def _tile_row0(self, tile: int) -> ir.Value:
        """The first query row of Q tile `tile` of the CTA's (the smallest causal limit of the tile)."""
        raise NotImplementedError

    def _thread_rows(self, ctx: RoleState, tile: int) -> tuple[list, ir.Value | None]:
        """The query rows (global in the head) of the scores the thread holds, one per row of its `RowChunk`s, and
        the key column its column offsets count from, past the block's first (None: the block's first)."""
        raise NotImplementedError

    @staticmethod
    def _trees(rows: list, combine) -> list:
        """`combine` over each of `rows` (lists of one length) as a pairwise tree, the rows' trees built level by
        level and op by op side by side: the same tree per row (so the same rounding) with twice the independent
        work at each level, for a softmax that runs on one warp per SM sub-partition: a row at a time leaves its
        max and sum chains waiting on each other's latency (benchmarks/NOTES.md, run 36)."""
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
