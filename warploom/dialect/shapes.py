"""Shape and element-type rules of the graph-level `wl` ops, in plain Python.

One function per op family infers the result type from the operand types and
attributes, or raises `ShapeError` with a message that names the values. The
builder calls these to type its results; the verifier calls them to check IR
that came from text. Nothing here imports MLIR.
"""
from __future__ import annotations

from dataclasses import dataclass

from warploom.runtime.dtypes import ELEMENT_TYPES

from .definition import COMPARE_PREDICATES, INDEX_DIMS, MODIFIER_OPS, SCORE_BINARY

Dim = int | None   # None is a dynamic (`?`) size


class ShapeError(ValueError):
    """An op's operands or attributes break one of its rules."""


@dataclass(frozen=True)
class TensorType:
    shape: tuple[Dim, ...]
    elem: str

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:   # the MLIR spelling, e.g. tensor<?x128xbf16>
        return f"tensor<{'x'.join([dim_str(d) for d in self.shape] + [self.elem])}>"


def dim_str(d: Dim) -> str:
    return "?" if d is None else str(d)


def shape_str(shape) -> str:
    return "x".join(dim_str(d) for d in shape) if shape else "scalar"


def merge_dim(a: Dim, b: Dim, what: str) -> Dim:
    """The dim two operands agree on; a dynamic dim agrees with anything."""
    if a is not None and b is not None and a != b:
        raise ShapeError(f"{what}: {a} vs {b}")
    return a if a is not None else b


def check_elem(t: TensorType, role: str) -> None:
    if t.elem not in ELEMENT_TYPES:
        raise ShapeError(f"{role} has element type {t.elem}; supported: {', '.join(ELEMENT_TYPES)}")


def same_elem(types: dict[str, TensorType]) -> str:
    elems = {t.elem for t in types.values()}
    if len(elems) > 1:
        listing = ", ".join(f"{name} is {t.elem}" for name, t in types.items())
        raise ShapeError(f"element types differ: {listing}")
    return next(iter(elems))


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ShapeError(f"axis {axis} is out of range for a rank-{rank} tensor (allowed {-rank}..{rank - 1})")
    return axis % rank


def infer_matmul(lhs: TensorType, rhs: TensorType, transpose_a: bool, transpose_b: bool) -> TensorType:
    for name, t in (("lhs", lhs), ("rhs", rhs)):
        check_elem(t, name)
        if t.rank < 2:
            raise ShapeError(f"{name} must have rank >= 2, got {t}")
    if lhs.rank != rhs.rank:
        raise ShapeError(f"lhs and rhs ranks differ: {lhs} vs {rhs}")
    same_elem({"lhs": lhs, "rhs": rhs})
    batch = tuple(merge_dim(a, b, f"batch dim {i} differs") for i, (a, b) in enumerate(zip(lhs.shape[:-2], rhs.shape[:-2])))
    m, k_lhs = (lhs.shape[-1], lhs.shape[-2]) if transpose_a else (lhs.shape[-2], lhs.shape[-1])
    k_rhs, n = (rhs.shape[-1], rhs.shape[-2]) if transpose_b else (rhs.shape[-2], rhs.shape[-1])
    if k_lhs is not None and k_rhs is not None and k_lhs != k_rhs:
        raise ShapeError(
            f"contracting dims differ: lhs {shape_str(lhs.shape)}{' (transposed)' if transpose_a else ''} has K = {k_lhs}, "
            f"rhs {shape_str(rhs.shape)}{' (transposed)' if transpose_b else ''} has K = {k_rhs}")
    return TensorType(batch + (m, n), lhs.elem)


ATTENTION_LAYOUTS = {"bhsd": (0, 1, 2, 3), "bshd": (0, 2, 1, 3)}   # positions of (B, H, S, D)


def infer_attention(q: TensorType, k: TensorType, v: TensorType, layout: str) -> TensorType:
    if layout not in ATTENTION_LAYOUTS:
        raise ShapeError(f"layout {layout!r} is not one of {', '.join(ATTENTION_LAYOUTS)}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_elem(t, name)
        if t.rank != 4:
            raise ShapeError(f"{name} must have rank 4 ({layout}), got {t}")
    same_elem({"q": q, "k": k, "v": v})
    pos = ATTENTION_LAYOUTS[layout]

    def bhsd(t):
        return tuple(t.shape[p] for p in pos)

    (bq, hq, sq, dq), (bk, hk, sk, dk), (bv, hv, sv, dv) = bhsd(q), bhsd(k), bhsd(v)
    merge_dim(bq, bk, "batch of q and k differs")
    merge_dim(bq, bv, "batch of q and v differs")
    merge_dim(bk, bv, "batch of k and v differs")
    merge_dim(dq, dk, "head dim of q and k differs")
    merge_dim(hk, hv, "head count of k and v differs")
    merge_dim(sk, sv, "sequence length of k and v differs")
    if hq is not None and hk is not None and hq % hk != 0:
        raise ShapeError(f"q heads ({hq}) must be a multiple of kv heads ({hk}) for grouped-query attention")
    out = [None] * 4
    for p, d in zip(pos, (merge_dim(bq, bk, ""), hq, sq, dv)):
        out[p] = d
    return TensorType(tuple(out), q.elem)


def infer_elementwise(operands: dict[str, TensorType]) -> TensorType:
    for name, t in operands.items():
        check_elem(t, name)
    types = list(operands.values())
    if len({t.rank for t in types}) > 1:
        raise ShapeError("shapes differ: " + ", ".join(f"{n} is {t}" for n, t in operands.items()))
    elem = same_elem(operands)
    try:
        shape = tuple(merge_dim(*dims, "") if len(dims) == 2 else dims[0] for dims in zip(*(t.shape for t in types)))
    except ShapeError:
        raise ShapeError("shapes differ: " + ", ".join(f"{n} is {t}" for n, t in operands.items())) from None
    return TensorType(shape, elem)


def infer_reduce(x: TensorType, axis: int) -> TensorType:
    check_elem(x, "input")
    a = normalize_axis(axis, x.rank)
    return TensorType(x.shape[:a] + x.shape[a + 1:], x.elem)


def infer_softmax(x: TensorType, axis: int) -> TensorType:
    check_elem(x, "input")
    normalize_axis(axis, x.rank)
    return x


def infer_repeat(x: TensorType, axis: int, times: int) -> TensorType:
    check_elem(x, "input")
    axis = normalize_axis(axis, x.rank)
    if times < 1:
        raise ShapeError(f"times = {times}: each slice is repeated at least once")
    shape = list(x.shape)
    shape[axis] = None if shape[axis] is None else shape[axis] * times
    return TensorType(tuple(shape), x.elem)


def infer_causal_mask(x: TensorType) -> TensorType:
    check_elem(x, "input")
    if x.rank < 2:
        raise ShapeError(f"input must have rank >= 2 (queries x keys), got {x}")
    return x


def infer_cast(x: TensorType, elem: str) -> TensorType:
    if x.elem == "i32" and elem != "i32":          # an index to a float (a modifier's i32 -> f32)
        check_elem(TensorType(x.shape, elem), "result")
        return TensorType(x.shape, elem)
    check_elem(x, "input")
    check_elem(TensorType(x.shape, elem), "result")
    return TensorType(x.shape, elem)


# ---- the ops of score and mask modifiers (definition.py's SCORE_* tables) ------------------------------------

INT, BOOL = "i32", "i1"        # the element types of indices and of comparisons (score-modifier ops only)


def _numeric(t: TensorType, role: str) -> None:
    if t.elem != INT:
        check_elem(t, role)
        if t.elem.startswith("f8") or t.elem.startswith("f4"):
            raise ShapeError(f"{role} is {t.elem}; score arithmetic takes f32, bf16, f16 or i32")


def broadcast(operands: dict[str, TensorType]) -> tuple:
    """The shape of operands where a rank-0 one (a scalar, a constant) broadcasts to the others', which agree."""
    shaped = {n: t for n, t in operands.items() if t.rank}
    if not shaped:
        return ()
    if len({t.rank for t in shaped.values()}) > 1:
        raise ShapeError("shapes differ: " + ", ".join(f"{n} is {t}" for n, t in operands.items()))
    try:
        dims = zip(*(t.shape for t in shaped.values()))
        return tuple(_merge_all(ds) for ds in dims)
    except ShapeError:
        raise ShapeError("shapes differ: " + ", ".join(f"{n} is {t}" for n, t in operands.items())) from None


def _merge_all(dims) -> Dim:
    out = None
    for d in dims:
        out = merge_dim(out, d, "")
    return out


def promoted(operands: dict[str, TensorType]) -> str:
    """The element type arithmetic on `operands` gives: i32 when all are i32, else their float type. An f32 value
    (a scalar, a constant, a table's element) meets the scores' bf16 or f16 as that type: the graph's types say
    what the attention's scores are, and the kernel computes every modifier in f32 (the reference in float64).
    bf16 with f16 is refused."""
    floats = {t.elem for t in operands.values() if t.elem != INT}
    narrow = floats - {"f32"}
    if len(narrow) > 1:
        raise ShapeError("element types differ: " + ", ".join(f"{n} is {t.elem}" for n, t in operands.items()))
    return next(iter(narrow)) if narrow else ("f32" if floats else INT)


def infer_score_op(op: str, operands: dict[str, TensorType], attrs: dict, result_elem: str | None) -> TensorType:
    """The result type of a score-modifier op (definition.py: SCORE_BINARY, SCORE_UNARY, compare, the logic ops,
    where, index, scalar, constant, gather)."""
    if op in ("and", "or", "not"):
        for n, t in operands.items():
            if t.elem != BOOL:
                raise ShapeError(f"{n} is {t}; {op} combines i1 tensors (comparisons)")
        return TensorType(broadcast(operands), BOOL)
    if op == "where":
        if operands["cond"].elem != BOOL:
            raise ShapeError(f"cond is {operands['cond']}; where's condition is an i1 tensor (a comparison)")
        values = {n: operands[n] for n in ("on_true", "on_false")}
        for n, t in values.items():
            _numeric(t, n)
        return TensorType(broadcast(operands), promoted(values))
    if op == "index":
        grid = operands["grid"]
        if grid.rank != 4:
            raise ShapeError(f"grid is {grid}; an index reads the rank-4 [B, H, Sq, Sk] score grid")
        if attrs["dim"] not in INDEX_DIMS:
            raise ShapeError(f"dim {attrs['dim']!r} is not one of {', '.join(INDEX_DIMS)}")
        return TensorType(grid.shape, INT)
    if op in ("scalar", "constant"):
        elem = result_elem or "f32"
        allowed = ("f32", INT) if op == "scalar" else ("f32", INT, BOOL)
        if elem not in allowed:
            raise ShapeError(f"a {op} is {' or '.join(allowed)}, not {elem}")
        if op == "scalar" and not str(attrs["name"]).isidentifier():
            raise ShapeError(f"scalar name {attrs['name']!r} must be an identifier (it names a kernel parameter)")
        return TensorType((), elem)
    if op == "gather":
        table = operands["table"]
        index = {n: t for n, t in operands.items() if n != "table"}
        if table.elem not in ("f32", INT):
            raise ShapeError(f"table is {table}; a modifier reads f32 or i32 tables (convert it first)")
        if len(index) != table.rank:
            raise ShapeError(f"table is {table}: gather takes one index per dimension ({table.rank}), got {len(index)}")
        for n, t in index.items():
            if t.elem != INT:
                raise ShapeError(f"{n} is {t}; gather indexes with i32 tensors")
        return TensorType(broadcast(index), table.elem)
    for n, t in operands.items():
        _numeric(t, n)
    if op == "compare":
        if attrs["predicate"] not in COMPARE_PREDICATES:
            raise ShapeError(f"predicate {attrs['predicate']!r} is not one of {', '.join(COMPARE_PREDICATES)}")
        promoted(operands)
        return TensorType(broadcast(operands), BOOL)
    elem = promoted(operands)
    if op == "div" or (op not in SCORE_BINARY and op not in ("neg", "abs")):
        elem = "f32" if elem == INT else elem          # div and the float functions give a float
    return TensorType(broadcast(operands), elem)


def infer(op: str, operands: dict[str, TensorType], attrs: dict, result_elem: str | None = None) -> TensorType:
    """Result type of graph op `op` (name without `wl.`)."""
    if op in MODIFIER_OPS or (op in ("add", "mul", "max", "exp", "exp2") and _modifier_operands(operands)):
        return infer_score_op(op, operands, attrs, result_elem)
    if op == "matmul":
        return infer_matmul(operands["lhs"], operands["rhs"], bool(attrs["transpose_a"]), bool(attrs["transpose_b"]))
    if op == "attention":
        return infer_attention(operands["q"], operands["k"], operands["v"], attrs["layout"])
    if op in ("reduce_max", "reduce_sum"):
        return infer_reduce(operands["input"], attrs["axis"])
    if op == "softmax":
        return infer_softmax(operands["input"], attrs["axis"])
    if op == "causal_mask":
        return infer_causal_mask(operands["input"])
    if op == "repeat":
        return infer_repeat(operands["input"], attrs["axis"], attrs["times"])
    if op == "cast":
        return infer_cast(operands["input"], result_elem or operands["input"].elem)
    if op == "gelu" and attrs["approximate"] not in ("none", "tanh"):
        raise ShapeError(f"approximate = {attrs['approximate']!r}; expected \"none\" or \"tanh\"")
    return infer_elementwise(operands)


def _modifier_operands(operands: dict[str, TensorType]) -> bool:
    """Whether an add, mul, max, exp or exp2 takes a modifier's values (an i32, an i1 or a rank-0 operand, or an f32
    table's values beside bf16 scores): then it
    follows the score ops' broadcast and promotion, and otherwise the elementwise rules of the GEMM epilogue."""
    elems = {t.elem for t in operands.values()}
    return (any(t.elem in (INT, BOOL) or t.rank == 0 for t in operands.values())
            or (len(elems) == 2 and "f32" in elems and elems <= {"f32", "bf16", "f16"}))
