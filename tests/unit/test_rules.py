"""Runtime rules (warploom/runtime/rules.py): the causal key-block count against a brute-force count of the keys
each query block sees, and the malformed forms refused."""
from __future__ import annotations

import math

import pytest

from warploom.runtime import rules

CAUSAL = ("causal_blocks", "Sq", "Sk", "m", 128, 64)


def seen_blocks(sq: int, sk: int, m: int, bm: int, bn: int) -> int:
    """1 + the last key block holding a key that some query row of block m (rows < m*bm + bm) sees."""
    last_key = max((i + sk - sq for i in range(m * bm, (m + 1) * bm)), default=-1)
    return 0 if last_key < 0 else min(math.ceil(sk / bn), last_key // bn + 1)


@pytest.mark.parametrize("sq,sk", [(1, 1), (63, 1), (1, 1000), (100, 100), (128, 1000), (1000, 63), (4096, 4096),
                                   (300, 200), (200, 300)])
def test_causal_blocks_counts_the_blocks_a_query_block_sees(sq, sk):
    for m in range(math.ceil(sq / 128)):
        assert rules.evaluate(CAUSAL, {"Sq": sq, "Sk": sk, "m": m}) == seen_blocks(sq, sk, m, 128, 64), (sq, sk, m)


def test_causal_blocks_rows_before_the_first_key_see_nothing():
    # Sq - Sk = 900 queries see no key: the first query blocks get no key block at all
    assert [rules.evaluate(CAUSAL, {"Sq": 1000, "Sk": 100, "m": m}) for m in range(8)] == [0] * 7 + [2]


@pytest.mark.parametrize("rule,match", [(("causal_blocks", "Sq", "Sk", "m", 128), "takes 5"),
                                        (("causal_blocks", "Sq", "Sk", "m", 0, 64), "positive block sizes"),
                                        (("causal_blocks", "Sq", 3, "m", 128, 64), "size names")])
def test_causal_blocks_malformed(rule, match):
    with pytest.raises(ValueError, match=match):
        rules.check(rule)


@pytest.mark.parametrize("group", rules.GROUP_M)
def test_every_tile_order_visits_each_tile_once(group):
    """tile_origin over tiles 0 .. m_tiles * n_tiles - 1 is a permutation of the tiles, for every band height
    (last bands with fewer rows included); bands of G rows go column by column, M fastest."""
    rule = ("persistent", "M", 128, "N", 256, "SMS")
    for m_tiles in range(1, 12):
        for n_tiles in range(1, 6):
            seen = [tuple(rules.tile_origin(rule, t, n_tiles, group=group, m_tiles=m_tiles).values())
                    for t in range(m_tiles * n_tiles)]
            assert sorted(seen) == [(i * 128, j * 256) for i in range(m_tiles) for j in range(n_tiles)]
    if group == 4:       # 6 x 3 tiles: a band of 4 rows walked column by column, then the last 2 rows
        order = [tuple(rules.tile_origin(rule, t, 3, group=4, m_tiles=6).values()) for t in range(18)]
        assert [(m // 128, n // 256) for m, n in order[:6]] == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]
        assert [(m // 128, n // 256) for m, n in order[12:15]] == [(4, 0), (5, 0), (4, 1)]


def test_tile_order_refusals():
    rule = ("persistent", "M", 128, "N", 256, "SMS")
    with pytest.raises(ValueError, match="tile order group 3: use one of 1, 2, 4, 8, 16"):
        rules.tile_origin(rule, 0, 4, group=3, m_tiles=4)
    with pytest.raises(ValueError, match="needs m_tiles"):
        rules.tile_origin(rule, 0, 4, group=2)


def _deal(table: list[int]) -> list[list[int]]:
    """Each CTA's tiles, read from a causal persistent kernel's table as the kernel reads it."""
    ctas = table[0] - 1
    assert table[-1] == 0 and table[ctas] == len(table) - 1        # the spare entry; the last CTA's end before it
    return [table[table[c]:table[c + 1]] for c in range(ctas)]


@pytest.mark.parametrize("sq,sk,hq,b,ctas", [(300, 300, 3, 2, 4), (1000, 100, 2, 1, 5), (4096, 4096, 16, 4, 132),
                                             (16384, 16384, 16, 1, 132), (200, 300, 1, 1, 7), (130, 130, 1, 1, 1)])
def test_causal_tile_table_deals_every_tile_once_and_balanced(sq, sk, hq, b, ctas):
    """The greedy deal's table: every tile once (order 0's numbering), each CTA's busiest load within the slack of
    the lowest any deal can reach (work / CTAs, or the heaviest tile), and the snake deals' tables read alike."""
    sizes = {"Sq": sq, "Sk": sk, "Hq": hq, "B": b}
    blocks = math.ceil(sq / 128)
    tiles = blocks * hq * b
    weight = [rules.evaluate(("causal_blocks", "Sq", "Sk", "m", 128, 128), {**sizes, "m": blocks - 1 - t % blocks})
              + rules.FIXED_COST_BLOCKS for t in range(tiles)]
    table, group = rules.causal_tile_table(sizes, 128, 128, ctas)
    deal = _deal(table)
    assert sorted(t for mine in deal for t in mine) == list(range(tiles))
    busiest = max(sum(weight[t] for t in mine) for mine in deal)
    bound = max(-(-sum(weight) // ctas), max(weight))
    assert busiest <= math.ceil(rules.TILE_TABLE_SLACK * bound) or group == min(hq * b, max(rules.TILE_TABLE_GROUPS))
    for order in rules.TILE_ORDERS:
        snake = _deal(rules.snake_tile_table(sizes, 128, 128, ctas, order))
        assert sorted(t for mine in snake for t in mine) == list(range(tiles))


def test_causal_tile_table_keeps_heads_together_where_that_costs_nothing():
    """16 heads of 128 query blocks on 132 CTAs: the snake deal of order 0 leaves its busiest CTA ~54% over the
    average, order 1 balances by mixing all heads; the greedy deal balances as well as order 1 with one head at a
    time (group 1), and at 8192 x 2 batches with heads in pairs."""
    sizes = {"Sq": 16384, "Sk": 16384, "Hq": 16, "B": 1}
    table, group = rules.causal_tile_table(sizes, 128, 128, 132)
    assert group == 1
    deal = _deal(table)
    firsts = sorted(mine[0] for mine in deal)                     # the first wave: head 0's tiles, then head 1's
    assert firsts == list(range(128)) + [128, 129, 130, 131]
    assert rules.causal_tile_table({"Sq": 8192, "Sk": 8192, "Hq": 16, "B": 2}, 128, 128, 132)[1] == 2


def test_greedy_deal_gives_each_tile_to_the_least_loaded_cta():
    per_cta, busiest = rules.greedy_deal([0, 1, 2, 3, 4], [5, 4, 3, 2, 1], 2)
    assert per_cta == [[0, 3, 4], [1, 2]] and busiest == 8


def test_causal_tile_table_keeps_the_heads_in_flight_within_the_l2():
    """S = 1024, 16 x 16 heads of head dim 128 (0.5 MiB of K and V each): balance alone takes 64 heads at once (run
    61 dealt all 256 so, 40% slower: the L2 thrashing); within half of a 50 MiB L2 the deal takes 16 (32 would fit,
    64 not, and 16 is within the slack of 32's balance). GQA: heads sharing a kv head count once."""
    sizes = {"Sq": 1024, "Sk": 1024, "Hq": 16, "Hkv": 16, "B": 16}
    kv = 2 * 1024 * 128 * 2
    assert rules.causal_tile_table(sizes, 128, 128, 132)[1] == 64
    assert rules.causal_tile_table(sizes, 128, 128, 132, kv, 50 * 2**20)[1] == 16
    assert rules.causal_tile_table(sizes, 128, 128, 132, kv, 2**20)[1] == 1        # nothing fits: one head at a time
    gqa = {**sizes, "Hkv": 2}                                                      # 8 query heads a kv head
    # half of 16 kv heads' bytes: 8 kv heads fit, 64 query heads with GQA 8, else 8
    assert rules.causal_tile_table(gqa, 128, 128, 132, kv, 16 * kv)[1] == 64
    assert rules.causal_tile_table(sizes, 128, 128, 132, kv, 16 * kv)[1] == 8


def test_a_mask_deal_balances_the_blocks_a_window_walks():
    """With a causal window of 1024 keys at S = 16384 (tiles of 128), every tile walks about 9 key blocks: the deal
    by those counts (runtime.deal.mask_walked) leaves its busiest CTA within 1% of the mean, while the causal deal,
    measured in the blocks the window walks, gives its busiest CTA 6% more than the mean (and its idlest half)."""
    from tests.gpu.mod_variants import traced
    from warploom.runtime.deal import mask_walked
    mods, scalars, _ = traced("window1024-causal")
    sizes = {"Sq": 16384, "Sk": 16384, "Hq": 16, "Hkv": 16, "B": 1}
    walked = mask_walked(mods, scalars, sizes, 128, 128)
    assert len(walked) == 128 and walked[0] == 1 and set(walked[9:]) == {9}
    weights = rules.causal_tile_weights(sizes, 128, 128, walked)
    by_mask, _ = rules.causal_tile_table(sizes, 128, 128, 132, walked=walked)
    by_causal, _ = rules.causal_tile_table(sizes, 128, 128, 132)
    mean = sum(weights) / 132
    assert max(rules.deal_loads(by_mask, weights)) <= 1.02 * mean
    assert max(rules.deal_loads(by_causal, weights)) >= 1.05 * mean


def test_a_prefix_lm_is_dealt_by_the_blocks_it_walks():
    """A prefix-LM (non-causal kernel, mask: the first S / 4 keys for every row, causal after) at S = 16384: a
    persistent kernel with a mask modifier walks the host's deal too (contract.deals_by_table), by the blocks each
    query block walks without the causal mask (32 for the first quarter, then one more per block). The snake deal
    of tile order 0 (in the table's numbering; such a kernel walked a snake deal before) leaves its busiest CTA well
    above the deal's."""
    from warploom.kernel.contract import AttentionSpec, deals_by_table
    from warploom.runtime.deal import mask_walked
    from warploom.variants import prefix_lm
    from warploom.score import trace_mods
    mods, _ = trace_mods(None, prefix_lm, {"prefix": 4096})
    assert deals_by_table("persistent", False, mods) and not deals_by_table("persistent", False)
    assert not deals_by_table("grid", True, mods)
    assert [n for n, _ in AttentionSpec("bf16", 128, False, mods=mods).params][-3:-1] == ["B", "tiles"]
    sizes = {"Sq": 16384, "Sk": 16384, "Hq": 16, "Hkv": 16, "B": 1}
    walked = mask_walked(mods, {"prefix": 4096}, sizes, 128, 128, causal=False)
    assert walked[:32] == [32] * 32 and walked[32:35] == [33, 34, 35] and walked[-1] == 128
    weights = rules.causal_tile_weights(sizes, 128, 128, walked)
    dealt, _ = rules.causal_tile_table(sizes, 128, 128, 132, walked=walked)
    snake = rules.snake_tile_table(sizes, 128, 128, 132, 0)
    mean = sum(weights) / 132
    assert max(rules.deal_loads(dealt, weights)) <= 1.02 * mean
    assert max(rules.deal_loads(snake, weights)) >= 1.05 * mean
