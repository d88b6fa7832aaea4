"""Which blocks of the score matrix a mask modifier can drop: the mask evaluated over a box of indices (issue 34,
block sparsity).

    may, must = classify(mask, {"q_idx": (q0, q1), "kv_idx": (k0, k1), "b": (b, b), "h": (h, h)}, scalars, ops)

`may` is false where no (q_idx, kv_idx) of the box passes the mask (the block is empty: the kernel skips it), `must`
is true where every one does (the block is full: the kernel applies no mask there). Both are sound for any mask
(where the bounds cannot tell, the block is partial: may true, must false) and exact for the comparisons of sums and
differences of indices that masks are made of (a window's q_idx - kv_idx <= size, a prefix's kv_idx < prefix, a
per-head h < 2): the box's q_idx and kv_idx vary independently, so the interval of q_idx - kv_idx is attained.

It is `evaluate` itself over `IntervalOps`: each i32 value is an interval (lo, hi) of values of the base namespace,
each boolean a pair (may, must), anything of f32 unknown, a captured tensor's element any i32 unless the tensor is
declared non-decreasing (`warploom.score.nondecreasing`: document ids), whose ends bound it; so the same code
classifies a block on numpy arrays (the reference's block table, tests) and on IR values (the kernel's key range,
`ModOps`).
"""
from __future__ import annotations

from .expr import Expr, evaluate

UNKNOWN = None          # a value the bounds do not follow (f32 arithmetic): anything


class IntervalOps:
    """`evaluate`'s namespace over intervals of `base` values: i32 -> (lo, hi), bool -> (may, must), f32 ->
    UNKNOWN. Integer bounds do not model i32 wrapping (an index expression that overflows is a user error)."""

    def __init__(self, base):
        self.o = base

    def _bool(self, may, must):
        return (may, must)

    def _unknown_bool(self):
        return (self.o.const(True, "bool"), self.o.const(False, "bool"))

    def const(self, value, type_):
        if type_ == "f32":
            return UNKNOWN
        v = self.o.const(value, type_)
        return (v, v)

    def to_f32(self, x, type_):
        return UNKNOWN

    def arith(self, op, x, y, type_):
        if type_ != "i32":
            return UNKNOWN
        o = self.o
        (x0, x1), (y0, y1) = x, y
        if op == "add":
            return o.arith("add", x0, y0, "i32"), o.arith("add", x1, y1, "i32")
        if op == "sub":
            return o.arith("sub", x0, y1, "i32"), o.arith("sub", x1, y0, "i32")
        if op in ("minimum", "maximum"):
            return o.arith(op, x0, y0, "i32"), o.arith(op, x1, y1, "i32")
        corners = [o.arith("mul", p, q, "i32") for p in (x0, x1) for q in (y0, y1)]        # mul
        return self._fold("minimum", corners), self._fold("maximum", corners)

    def _fold(self, op, values):
        out = values[0]
        for v in values[1:]:
            out = self.o.arith(op, out, v, "i32")
        return out

    def div(self, x, y):
        return UNKNOWN

    def floordiv(self, x, y):
        """x // y: where the divisor is positive throughout (y0 >= 1), the extremes of the four corners (x // y is
        monotone in each argument there); else any i32."""
        o = self.o
        one = o.const(1, "i32")
        (x0, x1), (y0, y1) = x, (o.arith("maximum", y[0], one, "i32"), o.arith("maximum", y[1], one, "i32"))
        corners = [o.floordiv(p, q) for p in (x0, x1) for q in (y0, y1)]
        positive = o.compare("ge", y[0], one, "i32")
        return (o.where(positive, self._fold("minimum", corners), o.const(-2**31, "i32")),
                o.where(positive, self._fold("maximum", corners), o.const(2**31 - 1, "i32")))

    def neg(self, x, type_):
        if type_ != "i32":
            return UNKNOWN
        zero = self.o.const(0, "i32")
        return self.o.arith("sub", zero, x[1], "i32"), self.o.arith("sub", zero, x[0], "i32")

    def abs(self, x, type_):
        if type_ != "i32":
            return UNKNOWN
        lo_neg, hi_neg = self.neg(x, type_)                     # (-x1, -x0)
        zero = self.o.const(0, "i32")
        return self._fold("maximum", [zero, x[0], lo_neg]), self.o.arith("maximum", hi_neg, x[1], "i32")

    def compare(self, op, x, y, type_):
        if type_ != "i32":
            return self._unknown_bool()
        o = self.o
        (x0, x1), (y0, y1) = x, y
        if op in ("gt", "ge"):                                  # x > y is y < x
            return self.compare({"gt": "lt", "ge": "le"}[op], y, x, type_)
        if op in ("lt", "le"):                                  # may: the smallest x against the largest y
            return o.compare(op, x0, y1, "i32"), o.compare(op, x1, y0, "i32")
        # eq: may where the intervals meet, must where both are one and the same value; ne: the negation
        meet = o.logic("and", o.compare("le", x0, y1, "i32"), o.compare("le", y0, x1, "i32"))
        single = o.logic("and", o.logic("and", o.compare("eq", x0, x1, "i32"), o.compare("eq", y0, y1, "i32")),
                         o.compare("eq", x0, y0, "i32"))
        return (meet, single) if op == "eq" else (o.not_(single), o.not_(meet))

    def logic(self, op, x, y):
        return self.o.logic(op, x[0], y[0]), self.o.logic(op, x[1], y[1])

    def not_(self, x):
        return self.o.not_(x[1]), self.o.not_(x[0])

    def where(self, c, x, y):
        if x is UNKNOWN or y is UNKNOWN:
            return UNKNOWN
        o = self.o
        may, must = c
        hull = (o.arith("minimum", x[0], y[0], "i32"), o.arith("maximum", x[1], y[1], "i32"))
        return tuple(o.where(must, xv, o.where(may, hv, yv)) for xv, hv, yv in zip(x, hull, y))

    def unary(self, op, x):
        return UNKNOWN

    def load(self, tensor, index, type_):
        """A captured tensor's element: any value of its type, or for a tensor declared non-decreasing along its
        last dimension (`Sorted`) the values at the ends of the last index's interval, t[.., lo] and t[.., hi] (the
        other indices read only b, h and scalars: ScoreMods checks that, so each is one value, its lo)."""
        if type_ != "i32":
            return UNKNOWN
        if isinstance(tensor, Known) and all(i is not UNKNOWN for i in index):
            if all(lo is hi for lo, hi in index):       # indexed by b, h and scalars only: one element
                value = self.o.load(tensor.value, [lo for lo, _ in index], type_)
                return value, value
            if tensor.shape is not None:
                return self._known_load(tensor, index, type_)
        if isinstance(tensor, Sorted) and all(i is not UNKNOWN for i in index):
            head = [i[0] for i in index[:-1]]
            lo, hi = index[-1]
            return self.o.load(tensor.value, head + [lo], type_), self.o.load(tensor.value, head + [hi], type_)
        return self.o.const(-2**31, "i32"), self.o.const(2**31 - 1, "i32")


    def _known_load(self, tensor, index, type_):
        """A tensor whose values the namespace holds (`Known`: the host's block table): the element itself where every
        index interval is one value (t[h, q_idx // 64] over a box inside one 64-row block), else any i32; the
        indices clamped into the tensor so that the boxes where they are not one value load something."""
        o = self.o
        point, at = None, []
        for dim, (lo, hi) in enumerate(index):
            same = o.compare("eq", lo, hi, "i32")
            point = same if point is None else o.logic("and", point, same)
            top = o.const(tensor.shape[dim] - 1, "i32")
            at.append(o.arith("minimum", o.arith("maximum", lo, o.const(0, "i32"), "i32"), top, "i32"))
        value = o.load(tensor.value, at, type_)
        return (o.where(point, value, o.const(-2**31, "i32")), o.where(point, value, o.const(2**31 - 1, "i32")))


class Known:
    """A captured tensor's value as the base namespace loads it, which the bounds read where an index is one value:
    always where every index interval is one and the same value (`prefix[b]`: the kernel's boxes), and with its
    `shape` (numpy or torch arrays: the host's block table, warploom.score.table) also where the interval's ends are
    equal, box by box."""
    __slots__ = ("value", "shape")

    def __init__(self, value, shape: tuple | None = None):
        self.value, self.shape = value, shape


class Sorted:
    """A captured tensor's value (as the base namespace loads it) that is non-decreasing along its last dimension."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def out_of_order(name: str, values) -> str | None:
    """Why captured tensor `name` (`values`, numpy) is not non-decreasing along its last dimension, naming the first
    pair out of order; None where it is."""
    import numpy as np
    values = np.asarray(values)
    drops = np.argwhere(values[..., 1:] < values[..., :-1])
    if not len(drops):
        return None
    at = tuple(int(i) for i in drops[0])
    nxt = at[:-1] + (at[-1] + 1,)
    return (f"captured tensor {name!r} is declared nondecreasing() but {name}{list(at)} = {values[at]} > "
            f"{name}{list(nxt)} = {values[nxt]}: sort it, or pass it without nondecreasing() (the kernel then walks "
            "every key block)")


def clipped(box: dict, sq, sk, base) -> dict:
    """`box` with its last query row and key at most sq - 1 and sk - 1 (`base` values): the rows and keys a ragged
    tile computes past the ends are dropped, and a sorted tensor's loads at a box's ends must stay inside the index
    range the host checked (ops_attention.index_overrun, over 0 .. Sq - 1 and 0 .. Sk - 1)."""
    one = base.const(1, "i32")
    (q0, q1), (k0, k1) = box["q_idx"], box["kv_idx"]
    return {**box, "q_idx": (q0, base.arith("minimum", q1, base.arith("sub", sq, one, "i32"), "i32")),
            "kv_idx": (k0, base.arith("minimum", k1, base.arith("sub", sk, one, "i32"), "i32"))}


def classify(mask: Expr, box: dict, scalars: dict, base, sorted_tensors: dict | None = None,
             known_tensors: dict | None = None) -> tuple:
    """(may, must) of `mask` over `box` (leaf name -> (lo, hi), both inclusive) with the runtime scalars' values
    (`scalars`, name -> value), computed by `base` (NumpyOps, ModOps): may false where the box holds no kept
    (q_idx, kv_idx), must true where every one is kept. `sorted_tensors`: the captured tensors declared
    non-decreasing (name -> the value base.load takes), whose loads are bounded by their ends (the box must then lie
    within the problem: `clipped`); `known_tensors`: tensors whose elements are read where an index is one value
    (`Known`); every other tensor's element is any value."""
    sorted_tensors, known_tensors = sorted_tensors or {}, known_tensors or {}

    def tensor(name):
        if name in sorted_tensors:
            return Sorted(sorted_tensors[name])
        if name not in known_tensors:
            return None
        value = known_tensors[name]
        return value if isinstance(value, Known) else Known(value, tuple(value.shape))
    env = {**box, **{name: (v, v) for name, v in scalars.items()}, **{name: tensor(name) for name in mask.tensors()}}
    if mask.type != "bool":
        raise ValueError(f"classify: a mask is boolean, got {mask.type}")
    f32_scalars = {n for n, t in mask.scalars().items() if t == "f32"}
    for name in f32_scalars:                          # an f32 scalar's interval is not followed
        env[name] = UNKNOWN
    return evaluate(mask, env, IntervalOps(base))


def block_table(mask: Expr | None, scalars: dict, sq: int, sk: int, bm: int, bn: int, batch: int, heads: int,
                causal: bool, sorted_tensors: dict | None = None) -> dict:
    """The key blocks a kernel of tile bm x bn walks under `mask` (numpy, on the host: what `warploom explain` and the
    benchmarks report): for each (batch, head, query block) the first and last key block the mask may keep, within
    the causal trip (keys <= row + sk - sq) where `causal`; every block pair classified at once by broadcasting.
    The kernel finds the same ends by bisection (lowering/attention.py `_key_range`), so the two agree wherever
    the bounds are exact (comparisons of sums and differences of indices). Returns counts: `blocks` walked,
    `partial` (walked, and the mask applied), `dense` (what the kernel walks without the mask), `density`
    (blocks / dense) and `ranges` [batch, heads, query blocks, 2] (first, last + 1; first == last + 1: none). No
    mask (None): the causal or full walk. `sorted_tensors`: the values (numpy) of the captured tensors declared
    non-decreasing that the mask reads; the boxes are then `clipped` to the problem, as the kernel's are."""
    import numpy as np

    from .expr import NumpyOps
    mblocks, nblocks = -(-sq // bm), -(-sk // bn)
    m = np.arange(mblocks)[:, None]
    n = np.arange(nblocks)[None, :]
    rows = (m * bm, m * bm + bm - 1)
    trip = np.minimum(nblocks, -(-np.maximum(m * bm + bm + sk - sq, 0) // bn)) if causal else np.full_like(m, nblocks)
    inside = n < trip
    if mask is None:
        from .expr import const
        mask = const(True)
    leaves = mask.leaves()
    sorted_tensors = {n: v for n, v in (sorted_tensors or {}).items() if n in mask.tensors()}
    bs = range(batch) if "b" in leaves else [0]
    hs = range(heads) if "h" in leaves else [0]
    ranges = np.zeros((batch, heads, mblocks, 2), dtype=np.int64)
    blocks = partial = 0
    for b in bs:
        for h in hs:
            box = {"q_idx": rows, "kv_idx": (n * bn, n * bn + bn - 1), "b": (b, b), "h": (h, h)}
            if sorted_tensors:
                box = clipped(box, sq, sk, NumpyOps)
            may, must = (np.broadcast_to(x, (mblocks, nblocks))
                         for x in classify(mask, box, scalars, NumpyOps, sorted_tensors))
            may = may & inside
            some = may.any(axis=1)
            first = np.where(some, may.argmax(axis=1), 0)
            last = np.where(some, nblocks - 1 - may[:, ::-1].argmax(axis=1), -1)
            walked = (n >= first[:, None]) & (n <= last[:, None])
            copies = (batch if "b" not in leaves else 1) * (heads if "h" not in leaves else 1)
            blocks += int(walked.sum()) * copies
            partial += int((walked & ~must).sum()) * copies
            ranges[b if "b" in leaves else slice(None), h if "h" in leaves else slice(None)] = np.stack(
                [first, last + 1], axis=-1)
    dense = int(inside.sum()) * batch * heads
    return {"blocks": blocks, "partial": partial, "dense": dense, "density": blocks / dense if dense else 0.0,
            "ranges": ranges}
