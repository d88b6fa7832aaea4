"""warploom.score.bounds: a mask's (may, must) over a box of indices, checked against the mask evaluated at every
point of the box (numpy): sound for every mask of tests/gpu/mod_variants.py and a few odd ones (may is true wherever
some point passes, must only where every point does), and exact for the affine window, prefix and per-head masks."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.gpu.mod_variants import VARIANTS
from warploom.score import nondecreasing, trace_mods
from warploom.score.bounds import classify
from warploom.score.expr import NumpyOps, evaluate


def odd_masks():
    def modulo_free(b, h, q_idx, kv_idx):        # products and abs: bounded, not always exactly
        return abs(q_idx - kv_idx) * 2 < (h + 1) * 7

    def clamp(b, h, q_idx, kv_idx, size):
        from warploom.score import maximum, minimum
        return minimum(q_idx, size) >= maximum(kv_idx - 3, 0)

    def f32_scalar(b, h, q_idx, kv_idx, frac):    # an f32 comparison: never bounded, always partial
        return kv_idx < q_idx * frac

    def equal(b, h, q_idx, kv_idx):
        return (q_idx == kv_idx) | (kv_idx != 5)

    def block_diagonal(b, h, q_idx, kv_idx, size):  # floor division by a positive scalar: exact
        return (q_idx + 5) // size == (kv_idx - 3) // size

    def negative_divisor(b, h, q_idx, kv_idx):      # a divisor below 1: not followed, always partial
        return (q_idx - 12) // (0 - 3) >= (kv_idx - 9) // 4

    return {"modulo-free": (modulo_free, {}), "clamp": (clamp, {"size": 9}), "f32": (f32_scalar, {"frac": 0.5}),
            "equal": (equal, {}), "block-diagonal": (block_diagonal, {"size": 4}),
            "negative-divisor": (negative_divisor, {})}


def cases():
    from tests.gpu.mod_variants import captured_scalars
    rng = np.random.default_rng(3)
    out = {name: (mask, captured_scalars(name, 40, 40, 4, rng, bsz=2)) for name, (_, mask, _, _) in VARIANTS.items()
           if mask is not None}
    out.update(odd_masks())
    return out


EXACT = {"window256-causal", "window1024-causal", "window256-symmetric", "prefix-lm", "per-head", "empty-rows",
         "block-diagonal"}


@pytest.mark.parametrize("name", sorted(cases()))
def test_bounds_are_sound(name):
    mask_fn, scalars = cases()[name]
    mods, values = trace_mods(None, mask_fn, scalars)[0], dict(scalars)
    if name.startswith("window"):
        values = {**values, "size": 5}                   # a window of a few rows, so the boxes straddle it
    if name == "prefix-lm":
        values = {**values, "prefix": 7}
    if name == "empty-rows":
        values = {**values, "first_row": 6}
    rng = np.random.default_rng(7)
    for _ in range(300):
        q0, k0 = rng.integers(0, 20, 2)
        q1, k1 = q0 + rng.integers(0, 6), k0 + rng.integers(0, 6)
        b, h = int(rng.integers(0, 2)), int(rng.integers(0, 4))
        box = {"q_idx": (q0, q1), "kv_idx": (k0, k1), "b": (b, b), "h": (h, h)}
        ends = {n: np.asarray(values[n]) for n in mods.sorted}           # declared sorted: bounded by their ends
        may, must = classify(mods.mask, box if not ends else {**box, "q_idx": (q0, min(q1, 39)),
                                                              "kv_idx": (k0, min(k1, 39))}, values, NumpyOps, ends)
        q, k = np.meshgrid(np.arange(q0, q1 + 1), np.arange(k0, k1 + 1), indexing="ij")
        if ends:
            q, k = np.meshgrid(np.arange(q0, min(q1, 39) + 1), np.arange(k0, min(k1, 39) + 1), indexing="ij")
        kept = evaluate(mods.mask, {"q_idx": q, "kv_idx": k, "b": b, "h": h, **values}, NumpyOps)
        kept = np.broadcast_to(kept, q.shape)
        assert bool(may) or not kept.any(), (box, "a kept point in a box called empty")
        assert not bool(must) or kept.all(), (box, "a dropped point in a box called full")
        if name in EXACT:
            assert bool(may) == bool(kept.any()) and bool(must) == bool(kept.all()), box


def test_bounds_vectorize_over_blocks():
    """The block table of a window mask at once over every (query block, key block) pair, by numpy broadcasting."""
    values = {"size": 3}
    mods = trace_mods(None, VARIANTS["window256-causal"][1], values)[0]
    q0 = np.arange(0, 32, 8)[:, None]
    k0 = np.arange(0, 32, 8)[None, :]
    may, must = classify(mods.mask, {"q_idx": (q0, q0 + 7), "kv_idx": (k0, k0 + 7), "b": (0, 0), "h": (0, 0)},
                         values, NumpyOps)
    # with causal, blocks above the diagonal hold keys the window keeps (kv - q <= 3 is not the mask; q - kv <= 3 is)
    for i, j in itertools.product(range(4), range(4)):
        q, k = np.meshgrid(np.arange(8 * i, 8 * i + 8), np.arange(8 * j, 8 * j + 8), indexing="ij")
        kept = q - k <= 3
        assert bool(np.broadcast_to(may, (4, 4))[i, j]) == kept.any()
        assert bool(np.broadcast_to(must, (4, 4))[i, j]) == kept.all()


def test_block_table_counts_a_window():
    """block_table's counts for a causal left window, against the mask evaluated at every point."""
    from warploom.score.bounds import block_table
    values = {"size": 100}
    mods = trace_mods(None, VARIANTS["window256-causal"][1], values)[0]
    sq = sk = 640
    t = block_table(mods.mask, values, sq, sk, 128, 128, 2, 3, True)
    q, k = np.meshgrid(np.arange(sq), np.arange(sk), indexing="ij")
    kept = (k <= q) & (q - k <= 100)
    per_tile = [sum(kept[i:i + 128, j:j + 128].any() for j in range(0, sk, 128)) for i in range(0, sq, 128)]
    assert t["blocks"] == sum(per_tile) * 2 * 3 == 9 * 6
    assert t["dense"] == 15 * 6
    full = [sum(kept[i:i + 128, j:j + 128].all() for j in range(0, sk, 128)) for i in range(0, sq, 128)]
    assert t["partial"] == (sum(per_tile) - sum(full)) * 6
    assert t["ranges"][1, 2, 3].tolist() == [2, 4]


# ---- captured ids declared non-decreasing (warploom.score.nondecreasing): bounded by the ids at a box's ends ----

def same_document(b, h, q_idx, kv_idx, doc_id):
    return doc_id[q_idx] == doc_id[kv_idx]


def same_document_per_row(b, h, q_idx, kv_idx, doc_id, window):       # ids per batch row, with a window on top
    return (doc_id[b, q_idx] == doc_id[b, kv_idx]) & (q_idx - kv_idx <= window)


def sorted_ids(rng, n, rows=None, steps=(0, 1)):
    """Non-decreasing ids of n tokens (per row of `rows`), each step one of `steps` (consecutive ids by default)."""
    shape = (n,) if rows is None else (rows, n)
    return np.cumsum(rng.choice(steps, size=shape, p=None), axis=-1).astype(np.int32)


@pytest.mark.parametrize("steps", [(0, 1), (0, 0, 0, 2, 5)])
@pytest.mark.parametrize("fn", [same_document, same_document_per_row])
def test_sorted_ids_bound_blocks_soundly(fn, steps):
    """The mask over boxes of indices inside the problem, each box's (may, must) against the mask at every point:
    never a kept point in a box called empty nor a dropped one in a box called full; with consecutive ids (steps
    of 0 and 1: every id between two ends occurs) may is exact, and must is exact always (one id at both ends of
    both intervals)."""
    rng = np.random.default_rng(4)
    n = 40
    ids = sorted_ids(rng, n, None if fn is same_document else 2, steps)
    scalars = {"doc_id": nondecreasing(ids), **({"window": 9} if fn is same_document_per_row else {})}
    mods = trace_mods(None, fn, scalars)[0]
    assert mods.sorted == ("doc_id",)
    values = {k: v for k, v in scalars.items() if k != "doc_id"}
    for _ in range(400):
        q0, k0 = rng.integers(0, n, 2)
        q1, k1 = min(q0 + rng.integers(0, 12), n - 1), min(k0 + rng.integers(0, 12), n - 1)
        b = int(rng.integers(0, 2))
        box = {"q_idx": (q0, q1), "kv_idx": (k0, k1), "b": (b, b), "h": (0, 0)}
        may, must = classify(mods.mask, box, values, NumpyOps, {"doc_id": ids})
        q, k = np.meshgrid(np.arange(q0, q1 + 1), np.arange(k0, k1 + 1), indexing="ij")
        kept = np.broadcast_to(evaluate(mods.mask, {"q_idx": q, "kv_idx": k, "b": b, "h": 0, **values,
                                                    "doc_id": ids}, NumpyOps), q.shape)
        assert bool(may) or not kept.any(), (box, "a kept point in a box called empty")
        assert not bool(must) or kept.all(), (box, "a dropped point in a box called full")
        if fn is same_document:
            assert bool(must) == bool(kept.all()), box
            if steps == (0, 1):
                assert bool(may) == bool(kept.any()), box


def test_undeclared_ids_bound_nothing():
    """The same mask with the ids undeclared: every box may keep a point and none is full (the ids are any value)."""
    ids = np.repeat(np.arange(4), 10).astype(np.int32)
    mods = trace_mods(None, same_document, {"doc_id": ids})[0]
    assert mods.sorted == ()
    box = {"q_idx": (0, 9), "kv_idx": (30, 39), "b": (0, 0), "h": (0, 0)}
    assert [bool(x) for x in classify(mods.mask, box, {}, NumpyOps)] == [True, False]
    assert [bool(x) for x in classify(mods.mask, box, {}, NumpyOps, {"doc_id": ids})] == [False, False]


def test_block_table_of_sorted_documents():
    """block_table with packed documents of 300, 500, 100 and 124 tokens (ragged: 1024 rows in tiles of 128, the
    last block's rows past Sq clipped, as the kernel clips them), causal: the walked and partial blocks counted from
    the mask at every point, and the walk far below the dense causal one."""
    from warploom.score.bounds import block_table
    ids = np.repeat(np.arange(4), [300, 500, 100, 124]).astype(np.int32)
    s = ids.size
    mods = trace_mods(None, same_document, {"doc_id": nondecreasing(ids)})[0]
    t = block_table(mods.mask, {}, s, s, 128, 128, 1, 2, True, {"doc_id": ids})
    q, k = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
    same = ids[q] == ids[k]
    kept = (k <= q) & same
    walked = full = 0                       # partial: the blocks where the mask (not causal's diagonal) is applied
    for i in range(0, s, 128):
        kinds = [(kept[i:i + 128, j:j + 128].any(), same[i:i + 128, j:j + 128].all()) for j in range(0, s, 128)]
        some = [j for j, (a, _) in enumerate(kinds) if a]
        walked += some[-1] - some[0] + 1
        full += sum(all_ for _, all_ in kinds[some[0]:some[-1] + 1])
    assert t["blocks"] == 2 * walked and t["partial"] == 2 * (walked - full)
    assert t["dense"] == 2 * 36 and t["blocks"] < 0.65 * t["dense"]
    assert block_table(mods.mask, {}, s, s, 128, 128, 1, 2, True)["blocks"] == t["dense"]   # no values: dense


def test_ids_out_of_order_are_named():
    from warploom.score.bounds import out_of_order
    assert out_of_order("doc", np.array([[0, 0, 1], [2, 3, 3]])) is None
    why = out_of_order("doc", np.array([[0, 0, 1], [2, 4, 3]]))
    assert "doc[1, 1] = 4 > doc[1, 2] = 3" in why and "nondecreasing()" in why


def test_nondecreasing_is_refused_where_it_cannot_bound():
    from warploom.score import ModError
    with pytest.raises(ModError, match="int32 ids"):
        trace_mods(None, lambda b, h, q_idx, kv_idx, t: t[q_idx] < t[kv_idx],
                   {"t": nondecreasing(np.zeros(3, np.float32))})
    with pytest.raises(ModError, match="dimension 0 is indexed by q_idx"):
        trace_mods(None, lambda b, h, q_idx, kv_idx, t: t[q_idx, 0] == t[kv_idx, 0],
                   {"t": nondecreasing(np.zeros((3, 3), np.int32))})
    with pytest.raises(ModError, match="takes a captured tensor"):
        nondecreasing(3)


def test_the_declaration_is_part_of_the_kernel_identity():
    """Declared and undeclared ids are two kernels (the bounds differ), and the attrs carry the declaration."""
    from warploom.score import ScoreMods
    ids = np.zeros(4, np.int32)
    plain = trace_mods(None, same_document, {"doc_id": ids})[0]
    declared = trace_mods(None, same_document, {"doc_id": nondecreasing(ids)})[0]
    assert plain.key != declared.key and declared.text.endswith("; sorted doc_id")
    assert ScoreMods.from_attrs(declared.attrs()) == declared and ScoreMods.from_attrs(plain.attrs()) == plain
