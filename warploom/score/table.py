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

Built with numpy (the emulator, tests: `build_table`) or torch on the GPU (`build_table(..., xp=torch)`, chunked
over query blocks), by the same `evaluate` over an array namespace.
"""
from __future__ import annotations

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


def build_table(mask: Expr, scalars: dict, tensors: dict, sq: int, sk: int, bm: int, bn: int, batch: int,
                heads: int, causal: bool, xp=None):
    """The block table (the module's layout) of `mask` with the runtime scalars' values `scalars` and the captured
    tensors `tensors` (name -> numpy array, or torch tensor on the GPU with xp=torch), over an Sq x Sk problem of
    `batch` x `heads` heads and bm x bn tiles, the causal mask (bottom-right) with it where `causal`. Returns an int32
    array of xp (numpy by default)."""
    import numpy as np
    torch = xp if xp is not None and xp.__name__ == "torch" else None
    if torch is not None:
        device = next((v.device for v in tensors.values()), torch.device("cuda"))
        ops = TorchOps(torch, device)
        arange = lambda n: torch.arange(n, device=device)                                      # noqa: E731
    else:
        from .expr import NumpyOps
        ops, arange = NumpyOps, np.arange
    mblocks, nblocks = -(-sq // bm), -(-sk // bn)
    dims = table_dims(mask, batch, heads)
    table = (torch.zeros((*dims, mblocks, nblocks + 1), dtype=torch.int32, device=device) if torch is not None
             else np.zeros((*dims, mblocks, nblocks + 1), np.int32))
    keys = arange(nblocks * bn)[None, :]
    chunk = max(1, TABLE_CHUNK // (bm * nblocks * bn))
    for bi in range(dims[0]):
        for hi in range(dims[1]):
            for m0 in range(0, mblocks, chunk):
                m1 = min(mblocks, m0 + chunk)
                rows = arange(m1 * bm)[m0 * bm:, None]
                valid = (rows < sq) & (keys < sk)
                if causal:
                    valid = valid & (keys <= rows + (sk - sq))
                env = {"b": bi, "h": hi, **scalars}
                if torch is not None:           # torch's functions take a tensor first: 0-d ones for the values
                    env = {n: ops.const(v, "i32") for n, v in env.items()}
                env.update({"q_idx": rows.clip(max=sq - 1) if torch is None else rows.clamp(max=sq - 1),
                            "kv_idx": keys.clip(max=sk - 1) if torch is None else keys.clamp(max=sk - 1), **tensors})
                kept = evaluate(mask, env, ops)
                kept = (kept & valid) if torch is None else torch.logical_and(kept, valid)
                seen = kept | ~valid
                shape = (m1 - m0, bm, nblocks, bn)
                some = kept.reshape(shape).any(axis=1).any(axis=2) if torch is None else \
                    kept.reshape(shape).any(dim=1).any(dim=2)
                every = seen.reshape(shape).all(axis=1).all(axis=2) if torch is None else \
                    seen.reshape(shape).all(dim=1).all(dim=2)
                _fill(table[bi, hi, m0:m1], some, every, torch)
    return table


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
