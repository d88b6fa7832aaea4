"""Rules: the sizes a kernel derives from its runtime arguments (grid, trip counts, tile order), written once.

A rule is a JSON-able tuple over named sizes (M, N, K, SMS, ...):

    ("const", c)                       c
    ("cdiv", S, d)                     ceil(S / d)
    ("mul_cdiv", A, S, d)              A * ceil(S / d)
    ("persistent", M, bm, N, bn, P)    min(ceil(M / bm) * ceil(N / bn), P): one CTA per tile, at most P
                                       (the SM count), each striding over the tiles (see `tile_origin`)
    ("persistent_pairs", M, bm, N, bn, P)
                                       2 * min(ceil(M / bm) * ceil(N / bn), P / 2): one CTA pair (a cluster of 2,
                                       sm_100a's cta_group::2) per tile of bm rows, at most one CTA per SM; the
                                       pairs stride over the tiles as the CTAs of "persistent" do
    ("streamk", M, bm, N, bn, K, bk, P)
                                       min(ceil(M / bm) * ceil(N / bn) * ceil(K / bk), P): one CTA per SM; whole
                                       tiles but the last two waves' (data-parallel), then the rest as equal runs of
                                       (tile, K tile) iterations; a tile whose iterations several CTAs share is summed
                                       by the last to finish (see "stream-K" below)
    ("causal_blocks", Sq, Sk, m, bm, bn)
                                       the key blocks of bn keys that query block m (rows m*bm .. m*bm+bm-1)
                                       sees under the bottom-right causal mask (query i sees key j <= i + Sk - Sq):
                                       min(ceil(Sk / bn), ceil(max(0, (m + 1) * bm + Sk - Sq) / bn)); m is a
                                       size the caller gives (in a kernel, the CTA's query block index)
    ("attention_persistent", Sq, bm, Hq, B, P)
                                       min(ceil(Sq / bm) * Hq * B, P): one CTA per SM (P) walking the attention
                                       tiles (query block, head, batch) in a static order (see `attention_tile`)
    ("attention_streamk", Sq, bm, Sk, bn, Hq, B, P)
                                       min(ceil(Sq / bm) * Hq * B * ceil(Sk / bn), P): one CTA per SM walking
                                       whole tiles but the last two waves', then equal runs of (tile, key block)
                                       iterations, as stream-K does with K tiles (see `attention_streamk_run`)

wl-tile writes rules into the IR as arrays (`grid = [["cdiv", "N", 256], ...]`, `trip = ["cdiv", "K", 64]`);
the runtime (and the emulator, for its launches) evaluates the grid on Python ints; the lowering evaluates
the same rule on IR values, both through `evaluate(rule, sizes, ops)`, where `ops` is an arithmetic namespace
(`INT` here, the IR builder in the lowering). So one formula, in one place, decides each size.
Imports nothing but the standard library and layout/ops.py: the runtime (which never imports MLIR) uses it.
"""
from __future__ import annotations

from warploom.layout.ops import IntOps as LayoutIntOps

ARITY = {"const": 1, "cdiv": 2, "mul_cdiv": 3, "persistent": 5, "persistent_pairs": 5, "streamk": 7,
         "causal_blocks": 5, "attention_persistent": 5, "attention_streamk": 7}
PERSISTENT = ("persistent", "persistent_pairs", "streamk")     # the GEMM tile walks (tile_counts, tile_origin)
STREAMK_INDEX_LIMIT = 1 << 31    # iterations x CTAs of a stream-K launch: the kernel's i32 index arithmetic


class IntOps(LayoutIntOps):
    """The arithmetic namespace of Python ints (unsigned division, as the kernels do it): layout's (layout/ops.py)
    plus what the rules need besides."""

    minu = staticmethod(min)
    maxs = staticmethod(max)          # signed max (the one place a rule's intermediate may go negative)
    select = staticmethod(lambda cond, a, b: a if cond else b)

    @staticmethod
    def cmp(pred: str, a: int, b: int) -> bool:
        return {"ult": a < b, "ne": a != b, "eq": a == b}[pred]


INT = IntOps()


def check(rule) -> tuple:
    """The rule as a tuple, or ValueError saying what is malformed."""
    rule = tuple(rule)
    if not rule or rule[0] not in ARITY:
        raise ValueError(f"rule {rule!r}: the first entry must be one of {', '.join(ARITY)}")
    op, args = rule[0], rule[1:]
    if len(args) != ARITY[op]:
        raise ValueError(f"rule {rule!r}: {op!r} takes {ARITY[op]} argument(s), got {len(args)}")
    if op == "const" and not (isinstance(args[0], int) and args[0] >= 1):
        raise ValueError(f"rule {rule!r}: the constant must be an integer >= 1")
    if op == "streamk":
        names, steps = args[0:6:2] + args[6:], args[1:6:2]
        if not all(isinstance(n, str) for n in names) or not all(isinstance(d, int) and d >= 1 for d in steps):
            raise ValueError(f"rule {rule!r}: expected (\"streamk\", M, bm, N, bn, K, bk, P) with size names "
                             "and positive tile sizes")
    elif op in PERSISTENT:
        names, steps = args[0::2], args[1::2]
        if not all(isinstance(n, str) for n in names) or not all(isinstance(d, int) and d >= 1 for d in steps):
            raise ValueError(f"rule {rule!r}: expected ({op!r}, M, bm, N, bn, P) with size names "
                             "and positive tile sizes")
    if op == "attention_persistent":
        if not (isinstance(args[0], str) and isinstance(args[1], int) and args[1] >= 1
                and all(isinstance(n, str) for n in args[2:])):
            raise ValueError(f"rule {rule!r}: expected (\"attention_persistent\", Sq, bm, Hq, B, P) with size "
                             "names and a positive block size")
    if op == "attention_streamk":
        if not (all(isinstance(args[i], str) for i in (0, 2, 4, 5, 6))
                and all(isinstance(args[i], int) and args[i] >= 1 for i in (1, 3))):
            raise ValueError(f"rule {rule!r}: expected (\"attention_streamk\", Sq, bm, Sk, bn, Hq, B, P) with size "
                             "names and positive block sizes")
    if op == "causal_blocks":
        names, steps = args[:3], args[3:]
        if not all(isinstance(n, str) for n in names) or not all(isinstance(d, int) and d >= 1 for d in steps):
            raise ValueError(f"rule {rule!r}: expected (\"causal_blocks\", Sq, Sk, m, bm, bn) with size names "
                             "and positive block sizes")
    if op in ("cdiv", "mul_cdiv"):
        *names, d = args
        if not all(isinstance(n, str) for n in names):
            raise ValueError(f"rule {rule!r}: size names must be strings")
        if not (isinstance(d, int) and d >= 1):
            raise ValueError(f"rule {rule!r}: the divisor must be an integer >= 1")
    return rule


def text(rule) -> str:
    """('cdiv', 'N', 256) -> 'cdiv(N, 256)'; ('const', 1) -> '1'."""
    rule = check(rule)
    return str(rule[1]) if rule[0] == "const" else f"{rule[0]}({', '.join(map(str, rule[1:]))})"


def _size(sizes: dict, name: str, rule: tuple, ops):
    if name not in sizes:
        known = ", ".join(sorted(sizes)) or "none"
        raise ValueError(f"rule {text(rule)} needs size {name!r}, which was not given (sizes given: {known})")
    v = sizes[name]
    if ops is INT:
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"size {name}={v!r} must be an int")
        if v < 0:
            raise ValueError(f"size {name}={v} is negative")
    return v


def cdiv(a, d: int, ops=INT):
    """ceil(a / d) for a >= 0: (a + d - 1) / d, the form the kernels compute."""
    return ops.divu(ops.add(a, ops.const(d - 1)), ops.const(d))


def evaluate(rule, sizes: dict, ops=INT):
    """The rule's value over `sizes` (ints, or values of `ops`)."""
    rule = check(rule)
    op = rule[0]
    if op == "const":
        return ops.const(rule[1])
    if op == "cdiv":
        return cdiv(_size(sizes, rule[1], rule, ops), rule[2], ops)
    if op == "mul_cdiv":
        return ops.mul(_size(sizes, rule[1], rule, ops), cdiv(_size(sizes, rule[2], rule, ops), rule[3], ops))
    if op == "causal_blocks":
        sq, sk, m = (_size(sizes, n, rule, ops) for n in rule[1:4])
        bm, bn = rule[4:]
        seen = ops.sub(ops.add(ops.mul(ops.add(m, ops.const(1)), ops.const(bm)), sk), sq)
        return ops.minu(cdiv(sk, bn, ops), cdiv(ops.maxs(seen, ops.const(0)), bn, ops))
    if op == "attention_persistent":
        return ops.minu(attention_tiles(rule, sizes, ops), _size(sizes, rule[5], rule, ops))
    if op == "attention_streamk":
        tiles, blocks = attention_tiles(rule, sizes, ops), cdiv(_size(sizes, rule[3], rule, ops), rule[4], ops)
        ctas = ops.minu(ops.mul(tiles, blocks), _size(sizes, rule[7], rule, ops))
        if ops is INT:
            _check_streamk_indices(tiles, blocks, ctas, "use the persistent schedule")
        return ctas
    if op == "streamk":
        tiles, k_tiles = streamk_tiles(rule, sizes, ops)
        ctas = ops.minu(ops.mul(tiles, k_tiles), _size(sizes, rule[7], rule, ops))
        if ops is INT:
            _check_streamk_indices(tiles, k_tiles, ctas, "use the persistent schedule for a problem this large")
        return ctas
    m, bm, n, bn, p = rule[1:]
    tiles = ops.mul(cdiv(_size(sizes, m, rule, ops), bm, ops), cdiv(_size(sizes, n, rule, ops), bn, ops))
    if op == "persistent_pairs":
        return ops.mul(ops.minu(tiles, ops.divu(_size(sizes, p, rule, ops), ops.const(2))), ops.const(2))
    return ops.minu(tiles, _size(sizes, p, rule, ops))


def tile_counts(rule, sizes: dict, ops=INT) -> tuple:
    """(n_tiles, m_tiles): the output tiles of a persistent rule along N and M (N first: the tile order's
    fast dim); a CTA strides over n_tiles * m_tiles tiles."""
    rule = check(rule)
    if rule[0] not in PERSISTENT:
        raise ValueError(f"rule {text(rule)} is not a persistent grid rule")
    m, bm, n, bn = rule[1:5]
    return cdiv(_size(sizes, n, rule, ops), bn, ops), cdiv(_size(sizes, m, rule, ops), bm, ops)


GROUP_M = (1, 2, 4, 8, 16)      # the tile orders a persistent walk may take (see `tile_origin`)


def tile_origin(rule, tile, n_tiles, ops=INT, group: int = 1, m_tiles=None) -> dict:
    """{"M": m0, "N": n0}: the first row and column of output tile `tile` of a persistent rule.

    group 1: tiles are numbered row-major with N fastest: tile t covers rows (t / n_tiles) * bm and columns
    (t % n_tiles) * bn. group G > 1 (an L2-friendly order; `m_tiles` needed): bands of G rows of tiles, one after
    another, each walked column by column (M fastest inside the band; the last band has the rows that are left), so
    the tiles running at once share fewer A rows and B columns. CTA c of P takes tiles c, c + P, c + 2P, ..."""
    rule = check(rule)
    if rule[0] not in PERSISTENT:
        raise ValueError(f"rule {text(rule)} is not a persistent grid rule")
    if group not in GROUP_M:
        raise ValueError(f"tile order group {group}: use one of {', '.join(map(str, GROUP_M))}")
    m, bm, n, bn = rule[1:5]
    if group == 1:      # (row's arithmetic emitted before col's, as before bands existed)
        return {m: ops.mul(ops.divu(tile, n_tiles), ops.const(bm)), n: ops.mul(ops.remu(tile, n_tiles), ops.const(bn))}
    if m_tiles is None:
        raise ValueError("tile_origin with group > 1 needs m_tiles")
    per_band = ops.mul(ops.const(group), n_tiles)
    band = ops.divu(tile, per_band)
    first = ops.mul(band, ops.const(group))                     # the band's first row of tiles
    rows = ops.minu(ops.sub(m_tiles, first), ops.const(group))  # its rows (fewer in the last band)
    local = ops.sub(tile, ops.mul(band, per_band))
    row, col = ops.add(first, ops.remu(local, rows)), ops.divu(local, rows)
    return {m: ops.mul(row, ops.const(bm)), n: ops.mul(col, ops.const(bn))}


# ---- stream-K ------------------------------------------------------------------------------------------------
# A stream-K launch of P CTAs over T tiles of kt K tiles each: the first D = max(T / P - 1, 0) * P tiles (all whole
# waves but the last) are data-parallel, CTA c taking tiles c, c + P, ... whole (D / P each, in the persistent order);
# the other T - D tiles (between one and two waves' worth) are numbered as I = (T - D) kt iterations, tile-major
# (stream-K iteration x is K tile x % kt of tile D + x / kt), and CTA c takes the run [floor(c I / P),
# floor((c + 1) I / P)). A run covers the end of one tile, whole tiles, and the start of another: at most its first
# and its last piece of a tile are partial. Each partial piece is summed into the tile through a workspace
# (warploom/lowering/gemm.py, the stream-K fix-up). With fewer than 2P tiles every tile is stream-K.

def streamk_tiles(rule, sizes: dict, ops=INT) -> tuple:
    """(T, kt): the output tiles ceil(M / bm) * ceil(N / bn) and K tiles ceil(K / bk) of a stream-K rule."""
    rule = check(rule)
    if rule[0] != "streamk":
        raise ValueError(f"rule {text(rule)} is not a stream-K rule")
    m, bm, n, bn, k, bk = rule[1:7]
    tiles = ops.mul(cdiv(_size(sizes, m, rule, ops), bm, ops), cdiv(_size(sizes, n, rule, ops), bn, ops))
    return tiles, cdiv(_size(sizes, k, rule, ops), bk, ops)


def _check_streamk_indices(tiles: int, k_tiles: int, ctas: int, way_out: str) -> None:
    """ValueError when a stream-K launch's iterations x CTAs reach STREAMK_INDEX_LIMIT (the kernel's i32 math)."""
    sk = (tiles - streamk_dp_tiles(tiles, ctas)) * k_tiles
    if sk * ctas >= STREAMK_INDEX_LIMIT:
        raise ValueError(f"stream-K over {sk} iterations (tile, K tile) on {ctas} CTAs: iterations x CTAs must stay "
                         f"below {STREAMK_INDEX_LIMIT} for the kernel's 32-bit index arithmetic; {way_out}")


def streamk_dp_tiles(tiles, ctas, ops=INT):
    """D: the data-parallel tiles, whole waves of `ctas` but the last: max(tiles / ctas, 1) * ctas - ctas."""
    return ops.mul(ops.sub(ops.maxs(ops.divu(tiles, ctas), ops.const(1)), ops.const(1)), ctas)


def streamk_start(cta, ctas, iters, ops=INT):
    """The first stream-K iteration of CTA `cta` of `ctas` over `iters` (its run ends at streamk_start(cta + 1))."""
    return ops.divu(ops.mul(cta, iters), ctas)


def streamk_cta(x, ctas, iters, ops=INT):
    """The CTA whose run holds stream-K iteration x: the largest c with streamk_start(c) <= x, i.e.
    ((x + 1) P - 1) / I."""
    return ops.divu(ops.sub(ops.mul(ops.add(x, ops.const(1)), ctas), ops.const(1)), iters)


def streamk_pieces(ctas: int, tiles: int, k_tiles: int) -> list[list[tuple[int, int, int]]]:
    """Per tile, the (cta, first K tile, end K tile) pieces of a stream-K launch, in K order (Python ints; what the
    kernel computes piece by piece, for tests and for `warploom explain`)."""
    dp = streamk_dp_tiles(tiles, ctas)
    out = [[(t % ctas, 0, k_tiles)] for t in range(dp)] + [[] for _ in range(tiles - dp)]
    iters = (tiles - dp) * k_tiles
    for c in range(ctas):
        lo, hi = streamk_start(c, ctas, iters), streamk_start(c + 1, ctas, iters)
        x = lo
        while x < hi:
            t = x // k_tiles
            end = min(hi, (t + 1) * k_tiles)
            out[dp + t].append((c, x - t * k_tiles, end - t * k_tiles))
            x = end
    return out


# ---- the persistent attention schedule ----------------------------------------------------------------------
# P CTAs (one per SM) walk the T = ceil(Sq / bm) * Hq * B tiles (query block, head, batch). The tiles are dealt
# round by round, snake-wise: in round r CTA c takes tile r * P + c when r is even and r * P + (P - 1 - c) when
# it is odd, so a CTA that took a heavy tile of a sorted stretch takes a light one in the next round. Two tile
# orders (a kernel argument of the non-causal kernels, `tile_order`; the host passes 0):
#   0  query block fastest (the tiles of one head run side by side and share its K and V in L2); causal blocks
#      heaviest first within each head (query block nb - 1 - i)
#   1  query block slowest, heaviest first (every head's last query block, then the one before ...): balances
#      causal tiles under the snake deal, at the price of K/V reuse in L2 (benchmarks/NOTES.md, run 60)
# Causal kernels read their deal from a table instead (`causal_tile_table`, below).
TILE_ORDERS = (0, 1)


def attention_tiles(rule, sizes: dict, ops=INT):
    """T = ceil(Sq / bm) * Hq * B: the tiles of a persistent (or stream-K) attention rule."""
    rule = check(rule)
    if rule[0] == "attention_streamk":
        rule = ("attention_persistent", *rule[1:3], *rule[5:])
    if rule[0] != "attention_persistent":
        raise ValueError(f"rule {text(rule)} is not a persistent attention rule")
    sq, bm, hq, b = rule[1:5]
    return ops.mul(ops.mul(cdiv(_size(sizes, sq, rule, ops), bm, ops), _size(sizes, hq, rule, ops)),
                   _size(sizes, b, rule, ops))


def _place(r, cta, ctas, ops):
    """CTA `cta`'s place in round r of the snake deal: cta when r is even, ctas - 1 - cta when it is odd."""
    odd = ops.cmp("ne", ops.and_(r, ops.const(1)), ops.const(0))
    return ops.select(odd, ops.sub(ops.sub(ctas, ops.const(1)), cta), cta)


def snake_count(tiles, cta, ctas, ops=INT):
    """How many of `tiles` CTA `cta` of `ctas` takes: the full rounds, plus one when its place in the last,
    partial round is below the tiles left for that round."""
    rounds = ops.divu(tiles, ctas)
    extra = ops.cmp("ult", _place(rounds, cta, ctas, ops), ops.remu(tiles, ctas))
    return ops.add(rounds, ops.select(extra, ops.const(1), ops.const(0)))


def snake_tile(r, cta, ctas, ops=INT):
    """The tile CTA `cta` of `ctas` takes in round r: r * ctas + its place."""
    return ops.add(ops.mul(r, ctas), _place(r, cta, ctas, ops))


def attention_tile(tile, order, blocks, pairs, heads, causal: bool, ops=INT) -> tuple:
    """(query block, head, batch) of tile `tile` in tile order `order` (see TILE_ORDERS) for `blocks` query blocks,
    `pairs` = heads * batch and `heads` query heads; causal query blocks heaviest first (the last one first)."""
    by_block = ops.cmp("ne", order, ops.const(0))           # order 1: query block slowest
    # one division: order 0 splits tile by blocks (i = the remainder), order 1 by pairs (i = the quotient)
    d = ops.select(by_block, pairs, blocks)
    quo = ops.divu(tile, d)
    rem = ops.sub(tile, ops.mul(quo, d))
    i, bh = ops.select(by_block, quo, rem), ops.select(by_block, rem, quo)
    m = ops.sub(ops.sub(blocks, ops.const(1)), i) if causal else i
    return m, ops.remu(bh, heads), ops.divu(bh, heads)


# ---- the stream-K attention schedule (non-causal) -----------------------------------------------------------
# As stream-K splits a GEMM's K loop (above), with the key blocks of a tile in place of its K tiles: CTA c first
# takes whole tiles in the persistent deal's rounds (snake_tile) for the D = streamk_dp_tiles(T, P) data-parallel
# tiles, then the run [streamk_start(c), streamk_start(c + 1)) of the I = (T - D) kt (tile, key block) iterations
# that follow (tile D + x / kt, key block x % kt). A run is a few pieces, each a tile's key blocks [lo, hi): a
# piece with lo = 0 and hi = kt is a whole tile; the partial ones leave O (unnormalized), the row maxima and the
# row sums in a workspace, and the last of a tile's pieces to finish merges them (warploom/lowering/attention_regs.py).

def attention_streamk_run(tiles, blocks, cta, ctas, ops=INT) -> tuple:
    """What CTA `cta` of `ctas` does of `tiles` tiles of `blocks` key blocks each: (D, the data-parallel tiles, D / P
    of them its own; I, the stream-K iterations; the first and the end iteration of its run; the run's pieces)."""
    dp = streamk_dp_tiles(tiles, ctas, ops)
    iters = ops.mul(ops.sub(tiles, dp), blocks)
    lo = streamk_start(cta, ctas, iters, ops)
    hi = streamk_start(ops.add(cta, ops.const(1)), ctas, iters, ops)
    # the tiles the run touches: from lo / kt to (hi - 1) / kt, none when the run is empty
    touched = ops.add(ops.sub(ops.divu(ops.sub(ops.maxs(hi, ops.const(1)), ops.const(1)), blocks),
                              ops.divu(lo, blocks)), ops.const(1))
    return dp, iters, lo, hi, ops.select(ops.cmp("ult", lo, hi), touched, ops.const(0))


def attention_streamk_piece(x, hi, blocks, ops=INT) -> tuple:
    """(stream-K tile index (from 0, after the data-parallel tiles), first key block, end key block) of the piece
    of a run ending at `hi` that starts at iteration x; the next piece starts at tile * blocks + end."""
    t = ops.divu(x, blocks)
    t0 = ops.mul(t, blocks)
    return t, ops.sub(x, t0), ops.minu(ops.sub(hi, t0), blocks)


FIXED_COST_BLOCKS = 1      # a tile's cost beyond its key blocks (Q wait, first softmax, epilogue), in key blocks


# ---- the causal persistent deal: a table the host builds ------------------------------------------------------
# Causal tiles differ in length (query block m has m + 1 key blocks when Sq = Sk), and the snake deal balances them
# only when the tiles are sorted heaviest first across all heads (order 1), so the CTAs running at one time work on
# every head and share little of each head's K and V in L2. The deal below keeps both: the tiles are listed with the
# heads in groups of `group` (query blocks heaviest first within a group, its heads side by side), and handed out in
# that order, each to the CTA with the least work so far (greedy list scheduling, as a dynamic tile counter would do
# on the GPU, but fixed by the host and so the same every launch). The kernel reads CTA c's tiles from a table:
# P + 1 offsets (CTA c's tiles are entries off[c] .. off[c + 1] - 1 of the table), then the tiles (order 0's numbering:
# pair * blocks + i for query block blocks - 1 - i), then one spare entry, so that a CTA may read its next tile one
# ahead without a bound check (`_table`).
TILE_TABLE_GROUPS = (1, 2, 4, 8, 16, 32, 64, 128, 256)    # head groups tried, smallest first (least K/V in flight)
TILE_TABLE_SLACK = 1.01     # a group is taken when its busiest CTA is within 1% of the best deal's
TILE_TABLE_L2_SHARE = 0.5   # and only when its heads' K and V fit in this share of the L2 (more heads in flight
#                             thrash it: benchmarks/NOTES.md, run 61)


def tile_sequence(blocks: int, pairs: int, group: int) -> list[int]:
    """The tiles (order 0 numbering) with heads in groups of `group` pairs: within a group, query blocks heaviest
    first (i = 0, 1, ...), the group's pairs side by side."""
    out = []
    for g0 in range(0, pairs, group):
        members = range(g0, min(pairs, g0 + group))
        out += [bh * blocks + i for i in range(blocks) for bh in members]
    return out


def greedy_deal(tiles: list[int], weights: list[int], ctas: int) -> tuple[list[list[int]], int]:
    """Each tile in turn to the CTA with the least work so far (ties: the lowest CTA); (each CTA's tiles, in the
    order it runs them; the busiest CTA's work). `weights[t]`: tile t's cost."""
    import heapq
    heap = [(0, c) for c in range(ctas)]
    out = [[] for _ in range(ctas)]
    busiest = 0
    for t in tiles:
        load, c = heapq.heappop(heap)
        out[c].append(t)
        load += weights[t]
        busiest = max(busiest, load)
        heapq.heappush(heap, (load, c))
    return out, busiest


def _table(per_cta: list[list[int]]) -> list[int]:
    """The table of a deal (each CTA's tiles): P + 1 offsets (absolute: where in the table CTA c's tiles start, and
    where the last one's end), the tiles, and a spare entry (0)."""
    offsets = [len(per_cta) + 1]
    for mine in per_cta:
        offsets.append(offsets[-1] + len(mine))
    return offsets + [t for mine in per_cta for t in mine] + [0]


def snake_tile_table(sizes: dict, bm: int, bn: int, ctas: int, order: int) -> list[int]:
    """The snake deal of tile order `order` (the one a non-causal persistent kernel computes itself) as a causal
    kernel's table: to compare deals."""
    blocks, pairs = cdiv(sizes["Sq"], bm), sizes["Hq"] * sizes["B"]
    tiles = blocks * pairs
    per_cta = []
    for c in range(ctas):
        mine = []
        for r in range(snake_count(tiles, c, ctas)):
            m, h, b = attention_tile(snake_tile(r, c, ctas), order, blocks, pairs, sizes["Hq"], True)
            mine.append((b * sizes["Hq"] + h) * blocks + blocks - 1 - m)       # its number in order 0
        per_cta.append(mine)
    return _table(per_cta)


def causal_tile_weights(sizes: dict, bm: int, bn: int, walked: list[int] | None = None) -> list[int]:
    """Each causal tile's cost (order 0's numbering): its key blocks plus FIXED_COST_BLOCKS, what the deal balances.
    `walked`: the key blocks each query block m walks where a mask narrows the causal walk (block sparsity:
    warploom.score.bounds.block_table), instead of its causal count."""
    blocks, pairs = cdiv(sizes["Sq"], bm), sizes["Hq"] * sizes["B"]
    trip = ("causal_blocks", "Sq", "Sk", "m", bm, bn)
    count = (lambda m: walked[m]) if walked is not None else (lambda m: evaluate(trip, {**sizes, "m": m}))
    per_i = [count(blocks - 1 - i) + FIXED_COST_BLOCKS for i in range(blocks)]
    return [per_i[t % blocks] for t in range(blocks * pairs)]


def deal_loads(table: list[int], weights: list[int]) -> list[int]:
    """Each CTA's work under the deal `table` (as `_table` lays it out), in `weights`' units."""
    ctas = table[0] - 1
    return [sum(weights[t] for t in table[table[c]:table[c + 1]]) for c in range(ctas)]


def causal_tile_table(sizes: dict, bm: int, bn: int, ctas: int, kv_bytes: int = 0, l2_bytes: int = 0,
                      group: int | None = None, walked: list[int] | None = None) -> tuple[list[int], int]:
    """(the table a causal persistent kernel reads, the head group it deals by) for `ctas` CTAs: of the groups of
    TILE_TABLE_GROUPS (or all pairs) whose K and V fit in TILE_TABLE_L2_SHARE of `l2_bytes` (group 1 always; every
    group when l2_bytes is 0), the smallest whose greedy deal is within TILE_TABLE_SLACK of the best; or `group`.
    `kv_bytes`: one kv head's K and V (2 Sk D element bytes), shared by Hq / Hkv query heads of a batch; `walked`:
    as causal_tile_weights'."""
    blocks, pairs = cdiv(sizes["Sq"], bm), sizes["Hq"] * sizes["B"]
    per_kv = sizes["Hq"] // sizes.get("Hkv", sizes["Hq"])
    weights = causal_tile_weights(sizes, bm, bn, walked)
    groups = [group] if group is not None else [g for g in sorted({min(g, pairs) for g in TILE_TABLE_GROUPS} | {pairs})
                                                if g == 1 or not l2_bytes
                                                or cdiv(g, per_kv) * kv_bytes <= TILE_TABLE_L2_SHARE * l2_bytes]
    bound = max(-(-sum(weights) // ctas), max(weights))        # no deal leaves its busiest CTA less
    deals = {}
    for g in groups:                       # smallest first; stop at one within the slack of the bound
        deals[g] = greedy_deal(tile_sequence(blocks, pairs, g), weights, ctas)
        if deals[g][1] <= TILE_TABLE_SLACK * bound:
            break
    best = min(busiest for _, busiest in deals.values())
    pick = next(g for g in deals if deals[g][1] <= TILE_TABLE_SLACK * best)
    return _table(deals[pick][0]), pick
