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
