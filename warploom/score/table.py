"""The block table of a mask that its interval bounds cannot classify (issue 34, "Block sparsity from the mask"):
the mask evaluated at every (row, key) once per mask, problem size and value of what it reads, each (query block,
key block) classified empty, full or partial, and each query block's walked key blocks listed for the kernel.

Which masks take one (`needs_table`): those reading a captured tensor at a position (an index that moves with q_idx
or kv_idx) that is not declared non-decreasing: `allowed[h, q_idx, kv_idx] != 0`, unsorted document ids
`doc_id[q_idx] == doc_id[kv_idx]`. Their bounds (warploom.score.bounds) know nothing of such an element, so without a
table every block is partial and the walk dense; windows, prefixes and sorted ids are bounded exactly by the
bisection and need none. A mask with any f32 value takes none either: its evaluation here in float64 (or float32 on
the GPU) could round where the kernel's f32 does not, and a block wrongly empty would drop kept keys.

The kernel's layout (lowering/attention.py `_table_row`, `_key_block`): int32 [B', H', M, N + 1], B' the batch (1
where the mask does not read b), H' the query heads (1 where it reads no h), M and N the query and key blocks; row
[b, h, m] holds the count of the key blocks query block m walks, then each of them as kb * 2 + full (full: the mask
keeps every key of it for every row, so it is not applied there), kb increasing. Empty and full are judged over the
problem's rows and keys (< Sq, < Sk) that the causal mask keeps, so the kernel's causal trip and ragged edges hold.

Built with numpy (the emulator, tests: `build_table`) or torch on the GPU (`build_table(..., xp=torch)`), by the
same code over an array namespace, in two steps: the bounds classify every 64 x 64 box (64 x 16 beside 80-key
blocks), reading a tensor's element where its index is one value over the box (a block pattern at q_idx // 64 is
settled there), and only the boxes they leave open are evaluated at every (row, key).
"""
from __future__ import annotations

import math

from .expr import Expr, evaluate, needs_table, positional_loads  # noqa: F401  (the rule: expr.py)

FULL_BIT = 1                # an entry is kb * ENTRY_SCALE + (FULL_BIT if the block is full)
ENTRY_SCALE = 2
TABLE_CHUNK = 1 << 24       # the (row, key) pairs evaluated at once


def table_dims(mask: Expr, batch: int, heads: int) -> tuple[int, int]:
    """(B', H'): the batch and head extents of the table (1 where the mask does not read b, h)."""
    leaves = mask.leaves()
    return (batch if "b" in leaves else 1), (heads if "h" in leaves else 1)


class TorchOps:
    """`evaluate`'s namespace over torch tensors on one device, for i32 (int64) and bool values only (a tabled mask
    has no f32: `needs_table`)."""

    def __init__(self, torch, device):
        self.t, self.device = torch, device

    def const(self, value, type_):
        return self.t.tensor(bool(value) if type_ == "bool" else int(value), device=self.device)

    def arith(self, op, x, y, type_):
        t = self.t
        return {"add": t.add, "sub": t.sub, "mul": t.mul, "minimum": t.minimum, "maximum": t.maximum}[op](x, y)

    def floordiv(self, x, y):
        return self.t.div(x, y, rounding_mode="floor")

    def neg(self, x, type_):
        return self.t.neg(x)

    def abs(self, x, type_):
        return self.t.abs(x)

    def compare(self, op, x, y, type_):
        t = self.t
        return {"lt": t.lt, "le": t.le, "gt": t.gt, "ge": t.ge, "eq": t.eq, "ne": t.ne}[op](x, y)

    def logic(self, op, x, y):
        return self.t.logical_and(x, y) if op == "and" else self.t.logical_or(x, y)

    def not_(self, x):
        return self.t.logical_not(x)

    def where(self, c, x, y):
        return self.t.where(c, x, y)

    def load(self, tensor, index, type_):
        t = self.t
        idx = tuple(i.to(t.int64) if isinstance(i, t.Tensor) else t.tensor(int(i), device=self.device)
                    for i in index)
        return tensor[t.broadcast_tensors(*idx)].to(t.int64)

    def to_f32(self, x, type_):
        raise TypeError("a tabled mask has no f32 value (warploom.score.table.needs_table)")

    div = unary = to_f32


SUB_BOX = 64                # the side of the boxes the bounds classify first (a divisor of the tiles' sides)


def build_table(mask: Expr, scalars: dict, tensors: dict, sq: int, sk: int, bm: int, bn: int, batch: int,
                heads: int, causal: bool, xp=None, stats: dict | None = None):
    """The block table (the module's layout) of `mask` with the runtime scalars' values `scalars` and the captured
    tensors `tensors` (name -> numpy array, or torch tensor on the GPU with xp=torch), over an Sq x Sk problem of
    `batch` x `heads` heads and bm x bn tiles, the causal mask (bottom-right) with it where `causal`. Returns an int32
    array of xp (numpy by default).

    In two steps: the bounds (warploom.score.bounds, reading a tensor's element where its index is one value over the
    box) classify every gh x gw box (gh = gcd(bm, SUB_BOX), gw = gcd(bn, SUB_BOX)), so a block pattern read at
    q_idx // 64 is settled without evaluating a single score's mask; only the boxes they leave open (partial, or an
    index that is not one value) are evaluated at every (row, key). Both steps go a chunk of TABLE_CHUNK values at a
    time. `stats`, where given, gets the counts of boxes (`boxes`) and of boxes evaluated per element
    (`evaluated`)."""
    a = _Arrays(xp, tensors)
    gh, gw = math.gcd(bm, SUB_BOX), math.gcd(bn, SUB_BOX)
    ms, ns = -(-sq // gh), -(-sk // gw)
    mblocks, nblocks = -(-sq // bm), -(-sk // bn)
    nb, nh = table_dims(mask, batch, heads)
    table = a.zeros((nb, nh, mblocks, nblocks + 1), "i32")
    some, every = a.full((nb, nh, ms, ns), False), a.full((nb, nh, ms, ns), True)
    counts = {"boxes": nb * nh * ms * ns, "evaluated": 0}
    rows_at_once = max(1, TABLE_CHUNK // (nb * nh * ns))
    for m0 in range(0, ms, rows_at_once):
        m1 = min(ms, m0 + rows_at_once)
        counts["evaluated"] += _classify_boxes(a, mask, scalars, tensors, some, every, (m0, m1), (gh, gw), sq, sk,
                                               causal)
    tiles = (nb * nh * mblocks, bm // gh, nblocks, bn // gw)
    _fill(table.reshape(nb * nh * mblocks, nblocks + 1), a.blocks(some.reshape(nb * nh * ms, ns), ms, tiles, False, "any"),
          a.blocks(every.reshape(nb * nh * ms, ns), ms, tiles, True, "all"), a.torch)
    if stats is not None:
        stats.update(counts)
    return table


def _classify_boxes(a, mask, scalars, tensors, some, every, box_rows, box, sq, sk, causal) -> int:
    """Box rows m0 .. m1 - 1 of `some` / `every` ([B', H', box rows, box columns]: a kept (row, key) in the box; every
    valid one kept): the bounds first, then the open boxes per element. Returns how many were evaluated so."""
    from .bounds import classify
    (m0, m1), (gh, gw) = box_rows, box
    nb, nh, _, ns = some.shape
    ops = a.ops
    r0, k0 = a.arange(m1)[m0:, None] * gh, a.arange(ns)[None, :] * gw
    r1, k1 = a.at_most(r0 + (gh - 1), sq - 1), a.at_most(k0 + (gw - 1), sk - 1)
    shift = sk - sq
    seen_may = (k0 <= r1 + shift) if causal else a.full((1, 1), True)        # a (row, key) of the box is valid
    values = a.values(scalars)
    bh = {"b": a.arange(nb)[:, None, None, None], "h": a.arange(nh)[None, :, None, None]}    # every (b, h) at once
    bounds = {"q_idx": (r0, r1), "kv_idx": (k0, k1), **{n: (v, v) for n, v in bh.items()}}
    may, must = classify(mask, bounds, values, ops, known_tensors=tensors)
    shape = (nb, nh, m1 - m0, ns)
    may, must = a.grid(may, shape), a.grid(must, shape)
    chunk_some = must & seen_may                                    # every valid (row, key) kept, and there is one
    chunk_every = must | ~seen_may                                  # vacuous where no (row, key) is valid
    ob, oh, i, j = a.nonzero(may & seen_may & ~must)
    step = max(1, TABLE_CHUNK // (gh * gw))
    for c0 in range(0, int(i.shape[0]), step):                      # the open boxes, per element
        at = (ob[c0:c0 + step], oh[c0:c0 + step], i[c0:c0 + step], j[c0:c0 + step])
        rows = (at[2][:, None, None] + m0) * gh + a.arange(gh)[None, :, None]
        keys = at[3][:, None, None] * gw + a.arange(gw)[None, None, :]
        valid = (rows < sq) & (keys < sk)
        if causal:
            valid = valid & (keys <= rows + shift)
        env = {**values, "b": at[0][:, None, None], "h": at[1][:, None, None], "q_idx": a.at_most(rows, sq - 1),
               "kv_idx": a.at_most(keys, sk - 1), **tensors}
        kept = a.grid(evaluate(mask, env, ops), tuple(valid.shape)) & valid
        chunk_some[at] = a.reduce(kept, "any")
        chunk_every[at] = a.reduce(kept | ~valid, "all")
    some[:, :, m0:m1] = chunk_some
    every[:, :, m0:m1] = chunk_every
    return int(i.shape[0])


class _Arrays:
    """What build_table needs of numpy or torch (on the captured tensors' GPU), the differences kept here."""

    def __init__(self, xp, tensors: dict):
        import numpy as np
        self.np = np
        self.torch = xp if xp is not None and xp.__name__ == "torch" else None
        if self.torch is not None:
            self.device = next((v.device for v in tensors.values()), self.torch.device("cuda"))
            self.ops = TorchOps(self.torch, self.device)
        else:
            from .expr import NumpyOps
            self.ops = NumpyOps

    def arange(self, n):
        t = self.torch
        return t.arange(n, device=self.device) if t is not None else self.np.arange(n)

    def zeros(self, shape, type_):
        t = self.torch
        if t is not None:
            return t.zeros(shape, dtype=t.int32, device=self.device)
        return self.np.zeros(shape, self.np.int32)

    def full(self, shape, value: bool):
        t = self.torch
        return t.full(shape, value, device=self.device) if t is not None else self.np.full(shape, value)

    def at_most(self, x, top: int):
        return x.clamp(max=top) if self.torch is not None else self.np.minimum(x, top)

    def values(self, env: dict) -> dict:
        """Python ints as the namespace takes them (torch's functions take a tensor first: 0-d ones)."""
        return {n: self.ops.const(v, "i32") for n, v in env.items()} if self.torch is not None else env

    def grid(self, x, shape: tuple):
        """x (a scalar or an array that broadcasts) as a writable bool array of `shape`."""
        if self.torch is not None:
            x = x if isinstance(x, self.torch.Tensor) else self.torch.tensor(bool(x), device=self.device)
            return x.to(self.torch.bool).expand(shape).clone()
        return self.np.broadcast_to(self.np.asarray(x, bool), shape).copy()

    def nonzero(self, x) -> tuple:
        return self.torch.nonzero(x, as_tuple=True) if self.torch is not None else self.np.nonzero(x)

    def reduce(self, x, how: str):
        """any / all over a chunk's rows and keys ([boxes, g, g] -> [boxes])."""
        flat = x.reshape(x.shape[0], -1)
        if self.torch is not None:
            return flat.any(dim=1) if how == "any" else flat.all(dim=1)
        return flat.any(axis=1) if how == "any" else flat.all(axis=1)

    def blocks(self, x, ms: int, shape: tuple, pad: bool, how: str):
        """[P * ms, ns] per box (P row sets of ms boxes) -> [P * M, N] per tile block: each row set padded with `pad`
        to whole tiles (shape: (P * M, bm / gh, N, bn / gw)), reduced by any / all."""
        p = x.shape[0] // ms
        rows, cols = shape[0] // p * shape[1], shape[2] * shape[3]
        if self.torch is not None:
            full = self.torch.full((p, rows, cols), pad, device=self.device)
            full[:, :ms, :x.shape[1]] = x.reshape(p, ms, x.shape[1])
            r = full.reshape(shape)
            return r.any(dim=3).any(dim=1) if how == "any" else r.all(dim=3).all(dim=1)
        full = self.np.full((p, rows, cols), pad)
        full[:, :ms, :x.shape[1]] = x.reshape(p, ms, x.shape[1])
        r = full.reshape(shape)
        return r.any(axis=(1, 3)) if how == "any" else r.all(axis=(1, 3))


def _fill(rows, some, every, torch) -> None:
    """Each row of `rows` ([m, N + 1]): the count of `some`'s true blocks, then those blocks' entries, kb increasing."""
    n = some.shape[1]
    if torch is not None:
        kb = torch.arange(n, device=some.device, dtype=torch.int32).expand_as(some)
        entries = kb * ENTRY_SCALE + every.to(torch.int32) * FULL_BIT
        order = torch.argsort((~some).to(torch.int8), dim=1, stable=True)       # the walked blocks first, in order
        rows[:, 1:] = torch.where(torch.gather(some, 1, order), torch.gather(entries, 1, order), 0)
        rows[:, 0] = some.sum(dim=1, dtype=torch.int32)
        return
    for i in range(some.shape[0]):
        walked = some[i].nonzero()[0]
        rows[i, 0] = len(walked)
        rows[i, 1:1 + len(walked)] = walked * ENTRY_SCALE + every[i, walked] * FULL_BIT


def walked_blocks(table) -> list[int]:
    """The key blocks each query block walks (the most over the table's batches and heads): the persistent deal's
    weights (runtime.deal), from a numpy table."""
    return [int(x) for x in table[..., 0].max(axis=(0, 1))]


def table_args(table) -> dict:
    """The kernel arguments of a block table (contract.ATTENTION_TABLE_PARAMS): the array (numpy; or its address
    where the caller passes one) and its strides in elements over B', H' and M, 0 along a dimension of one."""
    torch_strides = getattr(table, "stride", None)
    strides = list(torch_strides()[:3]) if callable(torch_strides) else [s // 4 for s in table.strides[:3]]
    return {"block_table": table, **{f"block_table_s{d}": (s if n > 1 else 0)
                                     for d, s, n in zip("bhm", strides, table.shape[:3])}}
