"""warploom.score.bounds: a mask's (may, must) over a box of indices, checked against the mask evaluated at every
point of the box (numpy): sound for every mask of tests/gpu/mod_variants.py and a few odd ones (may is true wherever
some point passes, must only where every point does), and exact for the affine window, prefix and per-head masks."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.gpu.mod_variants import VARIANTS
from warploom.score import trace_mods
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

    return {"modulo-free": (modulo_free, {}), "clamp": (clamp, {"size": 9}), "f32": (f32_scalar, {"frac": 0.5}),
            "equal": (equal, {})}


def cases():
    from tests.gpu.mod_variants import captured_scalars
    rng = np.random.default_rng(3)
    out = {name: (mask, captured_scalars(name, 40, 40, 4, rng, bsz=2)) for name, (_, mask, _, _) in VARIANTS.items()
           if mask is not None}
    out.update(odd_masks())
    return out


EXACT = {"window256-causal", "window1024-causal", "window256-symmetric", "prefix-lm", "per-head", "empty-rows"}


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
        may, must = classify(mods.mask, box, values, NumpyOps)
        q, k = np.meshgrid(np.arange(q0, q1 + 1), np.arange(k0, k1 + 1), indexing="ij")
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
