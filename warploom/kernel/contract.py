"""The kernel contract: what a compiled kernel promises and what every reader of it assumes.

One home for the facts that the passes, the lowering, the runtime, the emulator, the cache and the host API all
read: the parameters of each kernel family (names, kinds, launch order), the tensor-map dimensions and boxes, the
defaults (stages, block sizes, Q stages, the exp2 polynomial's share, the FA4 constants), the kernel names (the PTX
entry points) and the kernel specs (`GemmSpec`, `AttentionSpec`: a kernel's identity, plain data).

Imports only targets, runtime.artifact and score (no MLIR): an offline machine reads it to launch cached kernels.
Which kernels are standard, the measured heuristics that pick one and the cache index live in warploom/kernels.py,
which nothing in the compiler core imports.
"""
from __future__ import annotations

from dataclasses import dataclass

from warploom import targets
from warploom.runtime.artifact import KernelArtifact, TensorMapSpec
from warploom.score import NONE as NO_MODS
from warploom.score import ScoreMods

# ---- GEMM ---------------------------------------------------------------------------------
# the GEMM tile and ring when none is asked for (wl-tile, wl-pipeline and GemmSpec all default to these)
GEMM_BLOCK_M = 128
GEMM_BLOCK_N = 256
GEMM_BLOCK_K = 64
GEMM_STAGES = 4
SM90_MMA_M = targets.get("sm_90a").mma_shapes[0].m[0]     # rows of one wgmma: a consumer warpgroup's share
SM90_WARPGROUP_THREADS = targets.get("sm_90a").warpgroup_threads
SMALL_M_STAGES = 8    # the ring of the 64-row (small-M) GEMM kernels: their K loop is bound by the loads in flight


def gemm_kernel_name(elem: str, b_layout: str, tile, stages, schedule: str = "grid", target: str = "sm_90a",
                     epilogue: str = "tma", cluster_m: int = 1, group_m: int = 1, swap_ab: bool = False) -> str:
    """wl_gemm_{elem}_{b_layout}_{BM}x{BN}x{BK}_s{stages}[_persistent][_c2][_g8][_swap][_direct][_sm100a]: the PTX
    entry point of a GEMM kernel (the lowering names the kernel it builds with this; specs name the kernel they ask
    for). `_c2`: 2x1 clusters sharing B by TMA multicast; `_g8`: the persistent walk in bands of 8 rows of tiles
    (rules.tile_origin); `_swap`: C^T = B^T A^T (the MMA's rows along N); `_direct`: C stored from registers
    instead of through smem by TMA."""
    bm, bn, bk = tile
    sched = "" if schedule == "grid" else f"_{schedule}"
    cluster = ("" if cluster_m == 1 else f"_c{cluster_m}") + ("" if group_m == 1 else f"_g{group_m}")
    swap = "_swap" if swap_ab else ""
    epi = "" if epilogue == "tma" else f"_{epilogue}"
    arch = "" if target == targets.DEFAULT else f"_{target.replace('_', '')}"
    return f"wl_gemm_{elem}_{b_layout}_{bm}x{bn}x{bk}_s{stages}{sched}{cluster}{swap}{epi}{arch}"



@dataclass(frozen=True)
class GemmSpec:
    """A GEMM kernel: C[M,N] = A[M,K] @ B with B as [K,N] ("kn") or as [N,K] ("nk", a weight)."""
    elem: str = "bf16"
    b_layout: str = "kn"
    block_n: int = GEMM_BLOCK_N
    stages: int = GEMM_STAGES
    target: str = "sm_90a"
    schedule: str = "grid"          # "grid": a CTA per tile; "persistent": one CTA per SM walks the tiles;
                                    # "streamk": one CTA per SM takes an equal run of (tile, K tile) iterations

    block_m: int = GEMM_BLOCK_M
    block_k: int = GEMM_BLOCK_K
    epilogue: str = "tma"           # "tma": C through smem by TMA stores; "direct" (sm_90a): from registers
    cluster_m: int = 1              # 2 (sm_90a, persistent): 2x1 clusters over tiles of 2 x block_m rows, each CTA
    #                                 loading half of the B tile both read and multicasting it to both
    group_m: int = 1                # (sm_90a, persistent) the walk's tile order: bands of group_m rows of tiles
    swap_ab: bool = False           # (sm_90a, grid, epilogue "direct") C^T = B^T A^T: the wgmma's 64 rows along N
    #                                 (block_n = 64 per consumer warpgroup), M (block_m, 8..256) its n: decode-size M

    @property
    def tile(self) -> tuple[int, int, int]:
        return (self.block_m, self.block_n, self.block_k)

    @property
    def kernel_name(self) -> str:
        return gemm_kernel_name(self.elem, self.b_layout, self.tile, self.stages, self.schedule, self.target,
                                self.epilogue, self.cluster_m, self.group_m, self.swap_ab)

    @property
    def lookup_id(self) -> str:
        return f"{self.kernel_name}-{self.target}"

    @property
    def params(self) -> tuple[tuple[str, str], ...]:
        """The kernel's parameters (name, kind) in launch order: the runtime contract (`gemm_params`)."""
        return gemm_params(self.epilogue, self.schedule)

    def streamk_buffers(self, ctas: int, m: int, n: int) -> tuple[int, int]:
        """A stream-K kernel's fix-up buffers for `ctas` CTAs on an m x n C (see `streamk_buffers`)."""
        return streamk_buffers(self.block_m, self.block_n, ctas, m, n)

    def describe(self) -> str:
        b = "B [K,N]" if self.b_layout == "kn" else "B [N,K] (transposed weight)"
        store = "C through smem by TMA" if self.epilogue == "tma" else "C stored from registers"
        cluster = (", 2x1 clusters sharing B by multicast" if self.cluster_m == 2 else "") + \
            (f", tiles in bands of {self.group_m} rows" if self.group_m > 1 else "") + \
            (", swap-AB (C^T = B^T A^T, the MMA's rows along N)" if self.swap_ab else "")
        return (f"{self.elem} GEMM, {b}, tile {'x'.join(map(str, self.tile))}, {self.stages} stage{'s' if self.stages != 1 else ''}, {self.schedule} "
                f"schedule{cluster}, {store}, {self.target}")



# stream-K (schedule "streamk"): the fix-up's global buffers, kernel parameters after C; partial pieces a CTA
# leaves in the workspace: its run's first and last (the pieces between are whole tiles)
STREAMK_PARAMS = ("workspace", "counters")
STREAMK_SLOTS = 2


GEMM_SIZES = ("M", "N", "K")         # a GEMM's i32 size parameters, last


def gemm_params(epilogue: str = "tma", schedule: str = "grid") -> tuple[tuple[str, str], ...]:
    """A GEMM kernel's parameters (name, kind) in launch order, the runtime contract: A's and B's tensor maps; C's
    tensor map (epilogue "tma": C leaves through smem by TMA stores) or its pointer ("direct"); a stream-K kernel's
    fix-up buffers (STREAMK_PARAMS); then M, N, K."""
    c = ("c", "tensormap" if epilogue == "tma" else "ptr")
    fixup = tuple((name, "ptr") for name in STREAMK_PARAMS) if schedule == "streamk" else ()
    return (("a", "tensormap"), ("b", "tensormap"), c) + fixup + tuple((s, "i32") for s in GEMM_SIZES)


def streamk_buffers(block_m: int, block_n: int, ctas: int, m: int, n: int) -> tuple[int, int]:
    """A stream-K GEMM's (workspace f32 elements, counters i32 elements) for `ctas` CTAs on an m x n C: STREAMK_SLOTS
    partial tiles per CTA; a counter per tile and consumer warpgroup (one per wgmma's 64 rows), zero before the first
    launch (each launch leaves them zero)."""
    tiles = -(-m // block_m) * -(-n // block_n)
    return ctas * STREAMK_SLOTS * block_m * block_n, tiles * (block_m // SM90_MMA_M)



# ---- attention ----------------------------------------------------------------------------
ATTENTION_BLOCK_M = 128          # query rows per CTA: 64 per consumer warpgroup (docs/attention-sm90.md)
ATTENTION_STAGES = 2             # K and V rings of 2 stages (head dim 256 fills smem with 2)
ATTENTION_ELEMENTS = ("bf16", "f16")            # the sm_90a attention kernels' q, k, v elements
ATTENTION_HEAD_DIMS = (64, 128, 256)            # ... and head dims (docs/attention-sm90.md)
# The runtime contract of every attention kernel (docs/attention-sm90.md, "Kernel parameters"), in launch order.
ATTENTION_PARAMS: tuple[tuple[str, str], ...] = (
    ("q", "tensormap"), ("k", "tensormap"), ("v", "tensormap"), ("out", "tensormap"), ("lse", "ptr"),
    ("Sq", "i32"), ("Sk", "i32"), ("Hq", "i32"), ("Hkv", "i32"), ("scale_log2", "f32"))
# a persistent attention kernel takes two more: the batch (it counts the tiles itself) and the order it walks them
# in (rules.TILE_ORDERS)
ATTENTION_PERSISTENT_PARAMS = ATTENTION_PARAMS + (("B", "i32"), ("tile_order", "i32"))
# a causal persistent kernel, or one with a mask modifier, takes the host's deal of its tiles over the CTAs instead
# (rules.causal_tile_table; deals_by_table)
ATTENTION_CAUSAL_PERSISTENT_PARAMS = ATTENTION_PARAMS + (("B", "i32"), ("tiles", "ptr"))
# and a stream-K one (non-causal: its last waves split over the key blocks) the fix-up's buffers
ATTENTION_STREAMK_PARAMS = ATTENTION_PERSISTENT_PARAMS + tuple((n, "ptr") for n in STREAMK_PARAMS)
ATTENTION_SCHEDULES = ("grid", "persistent", "streamk")
ATTENTION_WALKS = ("persistent", "streamk")     # the schedules of one CTA per SM walking the tiles
ATTENTION_MAP_DIMS = ("D", "S", "H", "B")       # innermost first: the axes of every q/k/v tensor map
# Packed variable-length batches (varlen): q [Tq, Hq, D], k and v [Tk, Hkv, D] hold the sequences one after another
# (cu_seqlens_q/k: the first row of each, then the total), read and written through "ragged" maps (D, R, H, T): R
# counts a box's rows (size: the box's rows) and T the row just past the box's last valid one (size: T + 1), both of
# one row's stride, the base address moved back by a box of rows. A box of r rows at (c, t) covers rows t - r + c ..
# t - 1 with c = r - valid, so the rows past a sequence's end fall outside R: zeros when loaded, dropped when stored
# (docs/attention-variants.md "Packed sequences")
ATTENTION_VARLEN_MAP_DIMS = ("D", "R", "H", "T")
ATTENTION_VARLEN_PARAMS = (("cu_seqlens_q", "ptr"), ("cu_seqlens_k", "ptr"), ("Tq", "i32"))
ATTENTION_BOX_D = 64                            # 64 two-byte elements = one 128-byte swizzle span


def deals_by_table(schedule: str, causal: bool, mods: ScoreMods = NO_MODS) -> bool:
    """Whether a persistent attention walks the host's deal of its tiles (a table: rules.causal_tile_table, the tiles
    weighed by the key blocks each walks) rather than the snake deal of one tile order: where its tiles differ in
    length, under the causal mask or a mask modifier (block sparsity: prefix-LM, windows, documents)."""
    return schedule == "persistent" and (causal or mods.mask is not None)


def attention_params(schedule: str, causal: bool, mods: ScoreMods = NO_MODS,
                     varlen: bool = False) -> tuple[tuple[str, str], ...]:
    """An attention kernel's parameters (name, kind) in launch order, by schedule: the runtime contract; a varlen
    kernel's sequence starts and packed query rows next (ATTENTION_VARLEN_PARAMS; Sq and Sk are then the longest
    sequences', B the sequence count); the runtime scalars of its score/mask modifiers last (`mod_<name>`, f32 or
    i32, sorted by name)."""
    if deals_by_table(schedule, causal, mods):
        base = ATTENTION_CAUSAL_PERSISTENT_PARAMS
    else:
        base = {"persistent": ATTENTION_PERSISTENT_PARAMS, "streamk": ATTENTION_STREAMK_PARAMS}.get(schedule,
                                                                                                    ATTENTION_PARAMS)
    return (base + (ATTENTION_VARLEN_PARAMS if varlen else ()) + mods.params()
            + (ATTENTION_TABLE_PARAMS if walks_table(mods, varlen) else ()))


# a mask's block table (warploom.score.table: int32 [B', H', M, N + 1]): its address and its strides (elements) over
# B', H' and M, 0 where the mask reads no b or h; the last dimension is contiguous
ATTENTION_TABLE_PARAMS = (("block_table", "ptr"), ("block_table_sb", "i32"), ("block_table_sh", "i32"),
                          ("block_table_sm", "i32"))


def walks_table(mods: ScoreMods, varlen: bool = False) -> bool:
    """Whether an attention kernel walks its mask's block table (ScoreMods.tabled) instead of bisecting its key
    range: packed sequences (varlen) have none yet; their mask is applied on every block of the causal walk."""
    return mods.tabled and not varlen


# keys per block, by schedule and head dim, within the consumers' 240 registers (S: block_n / 2, O: head dim / 2,
# P: block_n / 4 a thread) and the smem limit; the fastest measured (benchmarks/NOTES.md, runs 8 and 42). The
# persistent walk keeps a few more registers live across the key loop, so 176 spills there at head dim 128; at head
# dim 256 (O alone is 128 registers) every block_n spills.
ATTENTION_BLOCK_N = {"grid": {64: 128, 128: 176, 256: 80}, "persistent": {64: 128, 128: 128, 256: 80},
                     "streamk": {64: 128, 128: 128, 256: 80}}
# the packed-sequence (varlen) grid kernels: each sequence's starts and lengths live in registers where the padded
# batch's sizes are kernel parameters (read from the constant bank), and at head dim 128 the grid's 176 keys then
# spill 8 bytes (ptxas 13.0); 160 builds without
ATTENTION_VARLEN_BLOCK_N = {64: 128, 128: 160, 256: 80}
# the schedule of the standard kernel (what ops.attention runs) by head dim: persistent where it builds without
# spills, measured ahead of grid on the H200 (benchmarks/NOTES.md, run 13)
ATTENTION_SCHEDULE = {64: "persistent", 128: "persistent", 256: "grid"}
# Tall tiles: 192 query rows, three consumer warpgroups taking turns at the tensor cores (FA3's tile at head dim
# 64); which problems take them: warploom.kernels.tall_attention
ATTENTION_TALL_BLOCK_M = 192


# Q's ring stages of the persistent standard tiles, by head dim: 2 loads the next tile's Q during this one, which
# pays at short sequences (benchmarks/NOTES.md, run 49). Head dim 256 (grid) has no room for a second Q tile; another
# key block or stage count than the standard one keeps 1 unless asked (2 Q tiles may not fit beside its K/V rings).
ATTENTION_Q_STAGES = {64: 2, 128: 2}


# The share of the softmax's exp2 computed by a polynomial on the FMA units instead of MUFU.EX2
# (warploom.lowering.emit.exp2; FA4's trick): the last k of each EXP2_POLY_GROUP columns a thread holds, so a multiple
# of 1 / EXP2_POLY_GROUP. sm_90a standard kernels by head dim (none: 0, every exp2 on the MUFU).
EXP2_POLY_GROUP = 8
ATTENTION_EXP2_POLY: dict[int, float] = {}


def default_attention_exp2_poly(target: str, head_dim: int) -> float:
    """The polynomial's share of exp2 when none is asked for: FA4_EXP2_POLY on sm_100a, ATTENTION_EXP2_POLY (else
    0) on sm_90a."""
    return FA4_EXP2_POLY if targets.get(target).accumulator == "tmem" else ATTENTION_EXP2_POLY.get(head_dim, 0.0)


def check_exp2_poly(share) -> str | None:
    """What is wrong with a polynomial share of exp2 (None: nothing), for the caller to prefix with the share."""
    if (isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0
            or (share * EXP2_POLY_GROUP) % 1):
        return (f"the share of exp2 by the FMA polynomial is the last k of each {EXP2_POLY_GROUP} columns a thread "
                f"holds, a multiple of 1/{EXP2_POLY_GROUP} in 0 .. 1")
    return None


def exp2_poly_suffix(share: float, default: float) -> str:
    """_p{eighths}: a kernel name's mark of a polynomial share other than the target's default."""
    return "" if share == default else f"_p{round(share * EXP2_POLY_GROUP)}"


def default_attention_q_stages(target: str, schedule: str, head_dim: int, block_n: int, stages: int) -> int:
    """Q's ring stages when none are asked for: ATTENTION_Q_STAGES for a persistent sm_90a attention on its
    head dim's standard key block and stages (any block_m: the tall tile too), else 1."""
    standard = block_n == default_attention_block_n(head_dim, schedule) and stages == ATTENTION_STAGES
    if not targets.get(target).accumulator == "regs" or schedule not in ATTENTION_WALKS or not standard:
        return 1
    return ATTENTION_Q_STAGES.get(head_dim, 1)


def attention_streamk_buffers(block_m: int, head_dim: int, ctas: int) -> tuple[int, int]:
    """A stream-K attention's (workspace f32 elements, counters i32 elements) for `ctas` CTAs: STREAMK_SLOTS partial
    tiles per CTA, each thread's O fragment (head_dim / 2 f32 for its 2 rows) and its rows' (max, sum) pairs
    (4 f32); a counter per stream-K tile (under 2 ctas of them) and consumer warpgroup, zero before the first
    launch (each launch leaves them zero)."""
    per_thread = head_dim // 2 + 4
    threads = block_m // SM90_MMA_M * SM90_WARPGROUP_THREADS
    return ctas * STREAMK_SLOTS * threads * per_thread, 2 * ctas * (block_m // SM90_MMA_M)



def default_attention_schedule(head_dim: int) -> str:
    return ATTENTION_SCHEDULE.get(head_dim, "grid")


def default_attention_block_n(head_dim: int, schedule: str | None = None) -> int:
    """Keys per block of the standard kernel of `head_dim` under `schedule` (default: the head dim's standard one);
    128 for a head dim or schedule it has no entry for (wl-tile then refuses what it does not take)."""
    schedule = schedule or default_attention_schedule(head_dim)
    return ATTENTION_BLOCK_N.get(schedule, {}).get(head_dim, 128)


def attention_kernel_name(elem: str, head_dim: int, block_m: int, block_n: int, stages, causal: bool,
                          overlap: bool = False, schedule: str = "grid", q_stages: int = 1,
                          exp2_poly: float = 0.0) -> str:
    """wl_attn_{elem}_d{D}_{BM}x{BN}_s{stages}[_causal][_ov][_persistent|_streamk][_q2][_p{eighths}]: the PTX entry
    point of an attention kernel (_ov: the consumers' intra-warpgroup overlap; _persistent: one CTA per SM walking the
    tiles; _streamk: the same, the last waves' tiles split over their key blocks;
    _q2: two Q stages, the next tile's Q loading during this one; _p: that many of each 8 exp2 by the FMA polynomial;
    docs/attention-sm90.md)."""
    return (f"wl_attn_{elem}_d{head_dim}_{block_m}x{block_n}_s{stages}{'_causal' if causal else ''}"
            f"{'_ov' if overlap else ''}{'' if schedule == 'grid' else '_' + schedule}"
            f"{'' if q_stages == 1 else f'_q{q_stages}'}{exp2_poly_suffix(exp2_poly, 0.0)}")


# The sm_100a attention (FA4-style): Q tiles per CTA, each of 128 rows (the TMEM lanes); keys per block; head dims
FA4_Q_TILES = 2
FA4_TILE_ROWS = 128
FA4_BLOCK_N = 128
FA4_HEAD_DIMS = (64, 128)
FA4_SHARED_KV_SLOTS = 3         # a shared K/V ring's slots (the design's example): K of block j+1 while V of j
FA4_RESCALE_THRESHOLD = 8.0     # O is rescaled only when a row's running max grew by more (log2 units: P <= 2^8)
FA4_EXP2_POLY = 0.25            # share of exp2 computed by a polynomial on the FMA units (of EXP2_POLY_GROUP columns)


def default_attention_stages(shared_kv: bool = False) -> int:
    """The K/V ring's stages when none are asked for: ATTENTION_STAGES each for K and V, or FA4_SHARED_KV_SLOTS for
    the one ring K and V share (sm_100a, shared_kv)."""
    return FA4_SHARED_KV_SLOTS if shared_kv else ATTENTION_STAGES


def mods_suffix(mods: ScoreMods) -> str:
    """_m{8 hex digits of the modifiers' canonical text} for an attention kernel with score/mask modifiers (the
    traced graph is the kernel's identity: another scalar value or size runs the same kernel), else ''."""
    return f"_m{mods.key}" if mods else ""


def varlen_suffix(varlen: bool) -> str:
    """_varlen for a kernel of packed variable-length sequences (cu_seqlens), else ''."""
    return "_varlen" if varlen else ""


def fa4_kernel_name(elem: str, head_dim: int, block_m: int, block_n: int, stages, causal: bool,
                    shared_kv: bool = False, rescale_threshold: float = FA4_RESCALE_THRESHOLD,
                    exp2_poly: float = FA4_EXP2_POLY) -> str:
    """wl_fa4_{elem}_d{D}_{BM}x{BN}_s{stages}[_causal][_skv][_t{threshold}][_p{eighths}]: the PTX entry point of an
    sm_100a (FA4-style) attention kernel (docs/attention-sm100.md); BM is the CTA's query rows (its Q tiles
    together); _skv: K and V share one ring of `stages` slots; _t, _p: a rescaling threshold or polynomial share of
    exp2 other than the defaults (FA4_RESCALE_THRESHOLD, FA4_EXP2_POLY)."""
    extra = "_skv" if shared_kv else ""
    if rescale_threshold != FA4_RESCALE_THRESHOLD:
        extra += f"_t{rescale_threshold:g}".replace(".", "p")
    extra += exp2_poly_suffix(exp2_poly, FA4_EXP2_POLY)
    return f"wl_fa4_{elem}_d{head_dim}_{block_m}x{block_n}_s{stages}{'_causal' if causal else ''}{extra}"


@dataclass(frozen=True)
class AttentionSpec:
    """A forward attention kernel: out = softmax(q kᵀ · scale [+ bottom-right causal mask]) v, with LSE.

    Compiled in: element type, head dim, causal, the key block and the stages. Runtime: batch, both
    sequence lengths, both head counts (GQA), the tensors' strides (either layout) and the scale."""
    elem: str = "bf16"
    head_dim: int = 128
    causal: bool = False
    block_n: int | None = None      # None: default_attention_block_n(head_dim, schedule)
    stages: int = ATTENTION_STAGES
    target: str = "sm_90a"

    block_m: int | None = None      # None: the target's (ATTENTION_BLOCK_M; sm_100a: Q tiles x 128)
    overlap: bool | None = None     # FA3's intra-warpgroup overlap: the softmax of block j runs beside P_{j-1} V_{j-1}
    #                                 (None: on for sm_90a; sm_100a has no such schedule)
    schedule: str | None = None     # "grid": a CTA per (query block, head, batch); "persistent": one per SM;
    #                                 None: default_attention_schedule(head_dim) (sm_100a: grid)
    shared_kv: bool = False         # sm_100a: K and V tiles share one ring of `stages` slots (the seed's use_shared_kv)
    q_stages: int | None = None     # Q's ring stages; 2 (sm_90a persistent only): the next tile's Q loads during this
    #                                 one (wl-pipeline{q-stages=2}). None: default_attention_q_stages
    exp2_poly: float | None = None  # the softmax's share of exp2 by the FMA polynomial (wl-tile{exp2-poly}), a multiple
    #                                 of 1/8; None: default_attention_exp2_poly
    mods: ScoreMods = NO_MODS       # score and mask modifiers (warploom.score): compiled in as expressions, their
    #                                 scalars runtime arguments
    varlen: bool = False            # packed variable-length sequences (cu_seqlens; ATTENTION_VARLEN_MAP_DIMS): one
    #                                 kernel for every batch composition; schedule grid only

    def __post_init__(self):
        fa4 = targets.get(self.target).accumulator == "tmem"
        defaults = {"schedule": "grid" if fa4 or self.varlen is True else default_attention_schedule(self.head_dim),
                    "block_m": FA4_Q_TILES * FA4_TILE_ROWS if fa4 else ATTENTION_BLOCK_M, "overlap": not fa4}
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        if self.block_n is None:
            object.__setattr__(self, "block_n", FA4_BLOCK_N if fa4 else
                               ATTENTION_VARLEN_BLOCK_N.get(self.head_dim, 128) if self.varlen is True else
                               default_attention_block_n(self.head_dim, self.schedule))
        if self.q_stages is None:
            object.__setattr__(self, "q_stages", default_attention_q_stages(
                self.target, self.schedule, self.head_dim, self.block_n, self.stages))
        if self.exp2_poly is None:
            object.__setattr__(self, "exp2_poly", default_attention_exp2_poly(self.target, self.head_dim))
        for name in ("head_dim", "block_n", "stages", "block_m"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"AttentionSpec: {name} = {v!r} must be a positive int")
        for name in ("causal", "overlap"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"AttentionSpec: {name} = {getattr(self, name)!r} must be True or False")
        if not isinstance(self.shared_kv, bool) or (self.shared_kv and not fa4):
            raise ValueError(f"AttentionSpec: shared_kv = {self.shared_kv!r}: True or False, and True only for the "
                             "sm_100a attention (target='sm_100a')")
        if self.schedule not in ATTENTION_SCHEDULES:
            raise ValueError(f"AttentionSpec: schedule = {self.schedule!r}: one of {', '.join(ATTENTION_SCHEDULES)}")
        if self.schedule == "streamk" and (fa4 or self.causal):
            raise ValueError("AttentionSpec: schedule = 'streamk' is built for the non-causal sm_90a attention (its "
                             "tiles all weigh the same, so the last waves split evenly); a causal one takes "
                             "'persistent', which deals its tiles heaviest first")
        if self.q_stages not in (1, 2) or (self.q_stages == 2 and (fa4 or self.schedule not in ATTENTION_WALKS)):
            raise ValueError(f"AttentionSpec: q_stages = {self.q_stages!r}: 1, or 2 for the persistent sm_90a "
                             "attention (the next tile's Q loads during this one)")
        if check_exp2_poly(self.exp2_poly):
            raise ValueError(f"AttentionSpec: exp2_poly = {self.exp2_poly!r}: {check_exp2_poly(self.exp2_poly)}")
        object.__setattr__(self, "exp2_poly", float(self.exp2_poly))
        if not isinstance(self.mods, ScoreMods):
            raise ValueError(f"AttentionSpec: mods = {self.mods!r}: a warploom.score.ScoreMods")
        if self.mods and self.schedule == "streamk":
            raise ValueError("AttentionSpec: score/mask modifiers with schedule = 'streamk': the stream-K walk is "
                             "built for the plain attention; take 'persistent' or 'grid'")
        if not isinstance(self.varlen, bool) or (self.varlen and self.schedule != "grid"):
            raise ValueError(f"AttentionSpec: varlen = {self.varlen!r} with schedule = {self.schedule!r}: True or "
                             "False, and True with schedule 'grid' only (a CTA per query block of the longest "
                             "sequence, head and sequence; the walks count tiles of one length)")

    @property
    def kernel_name(self) -> str:
        if targets.get(self.target).accumulator == "tmem":
            name = fa4_kernel_name(self.elem, self.head_dim, self.block_m, self.block_n, self.stages, self.causal,
                                   self.shared_kv, exp2_poly=self.exp2_poly)
        else:
            name = attention_kernel_name(self.elem, self.head_dim, self.block_m, self.block_n, self.stages,
                                         self.causal, self.overlap, self.schedule, self.q_stages, self.exp2_poly)
        return name + varlen_suffix(self.varlen) + mods_suffix(self.mods)

    @property
    def params(self) -> tuple[tuple[str, str], ...]:
        """The kernel's parameters (name, kind) in launch order: the runtime contract."""
        return attention_params(self.schedule, self.causal, self.mods, self.varlen)

    @property
    def lookup_id(self) -> str:
        return f"{self.kernel_name}-{self.target}"

    def describe(self) -> str:
        mask = "causal" if self.causal else "non-causal"
        return (f"{self.elem} attention forward, head dim {self.head_dim}, {mask}, tile {self.block_m}x{self.block_n} "
                f"(queries x keys), {self.stages} stage{'s' if self.stages != 1 else ''}, {'intra-warpgroup overlap, ' if self.overlap else ''}"
                f"{'persistent (a CTA per SM), ' if self.schedule == 'persistent' else ''}"
                f"{'stream-K (a CTA per SM; the last waves split over the key blocks), ' if self.schedule == 'streamk' else ''}"
                f"{'two Q stages (the next tile prefetched), ' if self.q_stages == 2 else ''}"
                f"{f'{self.exp2_poly:g} of exp2 by the FMA polynomial, ' if self.exp2_poly else ''}"
                f"{'packed variable-length sequences, ' if self.varlen else ''}"
                f"{f'modifiers [{self.mods.text}], ' if self.mods else ''}{self.target}")

    def tensor_map_specs(self) -> dict[str, TensorMapSpec]:
        """The q, k, v and out tensor maps the contract promises: dims (D, S, H, B) innermost first, box (64, rows,
        1, 1), rows = block_m for q, block_n for k and v, and the rows one consumer warpgroup (sm_100a: one Q tile)
        stores for out (each stores its own), 128-byte swizzle, out-of-bounds reads as zero (and stores dropped)."""
        q_rows = FA4_TILE_ROWS if targets.get(self.target).accumulator == "tmem" else self.block_m   # TMEM: one Q tile a box
        out_rows = FA4_TILE_ROWS if targets.get(self.target).accumulator == "tmem" else SM90_MMA_M
        rows = {"q": q_rows, "k": self.block_n, "v": self.block_n, "out": out_rows}
        dims = ATTENTION_VARLEN_MAP_DIMS if self.varlen else ATTENTION_MAP_DIMS
        return {name: TensorMapSpec(name, name, self.elem, (ATTENTION_BOX_D, r, 1, 1), 128, dims)
                for name, r in rows.items()}


def check_attention_artifact(artifact: KernelArtifact, spec: AttentionSpec) -> None:
    """ValueError unless `artifact` keeps the runtime contract of docs/attention-sm90.md for `spec`: its entry
    name, its parameters (names, kinds, order) and its q/k/v tensor maps. ops.attention packs parameters and
    builds tensor maps by this contract, so a kernel that drifted from it must fail here, not compute garbage."""
    where = f"attention kernel {artifact.name!r} ({spec.describe()})"
    problems = []
    if artifact.name != spec.kernel_name:
        problems.append(f"entry name is {artifact.name!r}, the spec names {spec.kernel_name!r}")
    got = tuple((p.name, p.kind) for p in artifact.params)
    if got != spec.params:
        problems.append(f"parameters are {list(got)}, the contract is {list(spec.params)}")
    for name, want in spec.tensor_map_specs().items():
        have = artifact.tensor_maps.get(name)
        if have is None:
            problems.append(f"no tensor map {name!r}")
            continue
        for field_name in ("dtype", "box", "swizzle", "dims", "oob_fill"):
            a, b = getattr(have, field_name), getattr(want, field_name)
            if a != b:
                problems.append(f"tensor map {name!r} has {field_name} {a!r}, the contract says {b!r}")
    if problems:
        raise ValueError(f"{where} breaks the runtime contract: " + "; ".join(problems)
                         + ". Rebuild the cache with this warploom (warploom precompile), or fix the lowering.")

