"""The block table of a mask its bounds cannot classify (warploom.score.table; issue 34, block sparsity): which masks
take one, and the table's rows against the mask evaluated here at every (row, key) by plain loops over numpy."""
import numpy as np
import pytest

from warploom.kernel.contract import ATTENTION_TABLE_PARAMS, AttentionSpec, walks_table
from warploom.score import nondecreasing, trace_mods
from warploom.score.table import ENTRY_SCALE, FULL_BIT, build_table, needs_table, table_args, walked_blocks


def kept_cells(b, h, q_idx, kv_idx, keep):
    return keep[h, q_idx, kv_idx] != 0


def same_document(b, h, q_idx, kv_idx, doc_id):
    return doc_id[q_idx] == doc_id[kv_idx]


def test_which_masks_take_a_table():
    """A positional load of an unsorted captured tensor takes one; sorted ids, loads indexed by b and h only, masks
    of indices and scalars, and a mask with any f32 value (its rounding could differ from the kernel's) do not."""
    ids = np.array([0, 0, 1, 1], np.int32)
    assert trace_mods(None, same_document, {"doc_id": ids})[0].tabled
    assert not trace_mods(None, same_document, {"doc_id": nondecreasing(ids)})[0].tabled
    assert not trace_mods(None, same_document, {"doc_id": ids.astype(np.float32)})[0].tabled
    assert not trace_mods(None, lambda b, h, q_idx, kv_idx, prefix: kv_idx < prefix[b],
                          {"prefix": np.array([3], np.int32)})[0].tabled
    assert not trace_mods(None, lambda b, h, q_idx, kv_idx, size: q_idx - kv_idx <= size, {"size": 4})[0].tabled
    assert needs_table(None) is False
    mods = trace_mods(None, same_document, {"doc_id": ids})[0]
    spec = AttentionSpec(mods=mods, causal=True)
    assert spec.params[-len(ATTENTION_TABLE_PARAMS):] == ATTENTION_TABLE_PARAMS
    assert walks_table(mods) and not walks_table(mods, varlen=True)        # packed sequences walk no table yet


def brute_force(keep, sq, sk, bm, bn, causal):
    """Per head and query block: [(kb, full)] of the blocks holding a kept (row, key) under the causal mask, full
    where every such pair the causal mask and the problem's ends leave is kept."""
    out = []
    for h in range(keep.shape[0]):
        heads = []
        for m in range(-(-sq // bm)):
            listed = []
            for n in range(-(-sk // bn)):
                pairs = [(r, c) for r in range(m * bm, min(sq, (m + 1) * bm)) for c in range(n * bn, min(sk, (n + 1) * bn))
                         if not causal or c <= r + sk - sq]
                if any(keep[h, r, c] for r, c in pairs):
                    listed.append((n, all(keep[h, r, c] for r, c in pairs)))
            heads.append(listed)
        out.append(heads)
    return out


@pytest.mark.parametrize("causal,sq,sk", [(False, 70, 90), (True, 70, 90), (True, 90, 50)])
def test_table_rows_list_the_blocks_the_mask_keeps(causal, sq, sk):
    """Ragged sizes, Sq < Sk and Sq > Sk (the bottom-right diagonal), 16 x 32 tiles, two heads of another pattern
    each: each row holds its count, then kb * 2 + full for each block with a kept pair, kb increasing, zeros after."""
    rng = np.random.default_rng(int(causal) * 10 + sq)
    keep = (rng.random((2, sq, sk)) < 0.02).astype(np.int32)
    keep[0, :, :40] = 1                                                  # full blocks where the keys are all kept
    keep[1, 30:50] = 0                                                   # query rows that keep nothing
    mods = trace_mods(None, kept_cells, {"keep": keep})[0]
    table = build_table(mods.mask, {}, {"keep": keep}, sq, sk, 16, 32, 1, 2, causal)
    assert table.shape == (1, 2, -(-sq // 16), -(-sk // 32) + 1) and table.dtype == np.int32
    want = brute_force(keep, sq, sk, 16, 32, causal)
    for h in range(2):
        for m, listed in enumerate(want[h]):
            row = table[0, h, m]
            assert row[0] == len(listed)
            assert row[1:1 + len(listed)].tolist() == [n * ENTRY_SCALE + (FULL_BIT if full else 0) for n, full in listed]
            assert not row[1 + len(listed):].any()
    assert any(full for heads in want for listed in heads for _, full in listed)      # the case has full blocks
    assert walked_blocks(table) == [max(len(want[h][m]) for h in range(2)) for m in range(len(want[0]))]


def test_table_dims_follow_what_the_mask_reads():
    """A mask reading neither b nor h has one row set for every batch and head (strides 0 for the kernel); one
    reading b has a row set per batch."""
    ids = np.array([[0, 1, 0, 1, 2, 2], [5, 5, 5, 6, 6, 5]], np.int32)
    shared = trace_mods(None, same_document, {"doc_id": ids[0]})[0]
    table = build_table(shared.mask, {}, {"doc_id": ids[0]}, 6, 6, 2, 2, 3, 4, False)
    assert table.shape[:2] == (1, 1)
    args = table_args(table)
    assert (args["block_table_sb"], args["block_table_sh"], args["block_table_sm"]) == (0, 0, table.shape[3])
    per_batch = trace_mods(None, lambda b, h, q_idx, kv_idx, doc_id: doc_id[b, q_idx] == doc_id[b, kv_idx],
                           {"doc_id": ids})[0]
    table = build_table(per_batch.mask, {}, {"doc_id": ids}, 6, 6, 2, 2, 2, 4, False)
    assert table.shape[:2] == (2, 1)
    assert table_args(table)["block_table_sb"] == table.shape[2] * table.shape[3]
    # batch 0, query block 0 (rows 0, 1 of documents 0 and 1) sees key blocks 0 and 1 (keys 0..3), partial both;
    # batch 1's rows 0, 1 (document 5) see keys 0..2 and 5: blocks 0 (full), 1 and 2
    assert table[0, 0, 0, :4].tolist() == [2, 0, 2, 0]
    assert table[1, 0, 0, :4].tolist() == [3, 1, 2, 4]


def block_sparse(b, h, q_idx, kv_idx, pattern, size):
    return pattern[h, q_idx // size, kv_idx // size] != 0


@pytest.mark.parametrize("size,causal", [(64, False), (64, True), (48, True), (128, False)])
def test_a_block_pattern_is_settled_by_the_bounds(size, causal):
    """A pattern of size x size blocks read at q_idx // size: where the tiles' boxes (64 x 64 here) lie inside one
    pattern block, its element is one value and the bounds settle the box without a per-element evaluation; the
    boxes across a pattern edge (size 48) are evaluated per element (the causal diagonal needs none: its bounds are
    exact). The table is the brute force's either way."""
    rng = np.random.default_rng(size)
    sq, sk, bm, bn = 450, 390, 128, 128
    pattern = (rng.random((2, -(-sq // size), -(-sk // size))) < 0.5).astype(np.int32)
    mods = trace_mods(None, block_sparse, {"pattern": pattern, "size": size})[0]
    assert mods.tabled
    stats = {}
    table = build_table(mods.mask, {"size": size}, {"pattern": pattern}, sq, sk, bm, bn, 1, 2, causal, stats=stats)
    rows, keys = np.meshgrid(np.arange(sq), np.arange(sk), indexing="ij")
    keep = pattern[:, rows // size, keys // size]
    want = brute_force(keep, sq, sk, bm, bn, causal)
    for h in range(2):
        for m, listed in enumerate(want[h]):
            assert table[0, h, m, :1 + len(listed)].tolist() == [len(listed)] + [
                n * ENTRY_SCALE + (FULL_BIT if full else 0) for n, full in listed]
    boxes = 2 * -(-sq // 64) * -(-sk // 64)
    assert stats["boxes"] == boxes
    if size % 64 == 0:                      # the causal diagonal is the bounds' too
        assert stats["evaluated"] == 0
    else:
        assert 0 < stats["evaluated"] < boxes


def test_an_element_mask_is_evaluated_per_element():
    """keep[h, q_idx, kv_idx]: no box's index is one value, so every box the causal mask leaves is evaluated."""
    keep = (np.random.default_rng(2).random((1, 130, 130)) < 0.3).astype(np.int32)
    mods = trace_mods(None, kept_cells, {"keep": keep})[0]
    stats = {}
    build_table(mods.mask, {}, {"keep": keep}, 130, 130, 128, 128, 1, 1, False, stats=stats)
    assert stats == {"boxes": 9, "evaluated": 9}


def test_boxes_follow_the_tiles_sides():
    """Head dim 256's 128 x 80 tiles: boxes of 64 rows by 16 keys (gcd with 64 per side), so a pattern of 64 x 16
    blocks is settled by the bounds alone; the table is the brute force's. A table built a few box rows at a time
    (TABLE_CHUNK small) is the same."""
    from warploom.score import table as table_module
    rng = np.random.default_rng(4)
    sq, sk = 300, 250
    pattern = (rng.random((2, -(-sq // 64), -(-sk // 16))) < 0.4).astype(np.int32)
    mods = trace_mods(None, lambda b, h, q_idx, kv_idx, pattern: pattern[h, q_idx // 64, kv_idx // 16] != 0,
                      {"pattern": pattern})[0]
    stats = {}
    table = build_table(mods.mask, {}, {"pattern": pattern}, sq, sk, 128, 80, 1, 2, True, stats=stats)
    assert stats == {"boxes": 2 * 5 * 16, "evaluated": 0}
    rows, keys = np.meshgrid(np.arange(sq), np.arange(sk), indexing="ij")
    want = brute_force(pattern[:, rows // 64, keys // 16], sq, sk, 128, 80, True)
    for h in range(2):
        for m, listed in enumerate(want[h]):
            assert table[0, h, m, :1 + len(listed)].tolist() == [len(listed)] + [
                n * ENTRY_SCALE + (FULL_BIT if full else 0) for n, full in listed]
    old = table_module.TABLE_CHUNK
    try:
        table_module.TABLE_CHUNK = 40                     # 2 box rows a chunk
        assert np.array_equal(build_table(mods.mask, {}, {"pattern": pattern}, sq, sk, 128, 80, 1, 2, True), table)
    finally:
        table_module.TABLE_CHUNK = old
