"""Score and mask modifiers of an attention, as one small typed expression (issue 34).

A score modifier maps each scaled score s = q·k scale of (batch b, query head h, query row q_idx, key kv_idx) to a
new score; a mask modifier maps (b, h, q_idx, kv_idx) to whether the key is seen. Both are `Expr` trees over those
leaves, named runtime scalars (kernel parameters: changing a value compiles nothing) and constants, with the
operators of `OPS`. One expression is written once and evaluated by the same `evaluate` on numpy arrays (the
reference, `NumpyOps`) or on IR values (the lowering passes its own namespace), the way runtime/rules.py evaluates
its rules. Its canonical text (`Expr.text`, read back by `parse`) is what the IR carries, the cache key hashes and
`warploom explain` prints:

    (mul (scalar cap f32) (tanh (div score (scalar cap f32))))          softcap
    (le (sub q_idx kv_idx) (scalar window i32))                         a sliding window's mask (with causal)

Types: f32, i32 (indices, integer scalars and constants) and bool; arithmetic on an i32 and an f32 converts the
i32 to f32 (as torch promotes), `div` always gives f32, `floordiv` (//) takes and gives i32 (rounding toward
-inf, as Python and torch do), comparisons give bool. Imports nothing but the standard
library (numpy only inside NumpyOps).
"""
from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass

TYPES = ("f32", "i32", "bool")
# the leaves every modifier may read, and their types: the scaled score (score modifiers only) and the indices
LEAVES = {"score": "f32", "b": "i32", "h": "i32", "q_idx": "i32", "kv_idx": "i32"}
MASK_LEAVES = ("b", "h", "q_idx", "kv_idx")

ARITH = ("add", "sub", "mul", "minimum", "maximum")          # (x, y) -> the promoted type
COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")                # (x, y) -> bool
LOGIC = ("and", "or")                                          # (bool, bool) -> bool
UNARY_F32 = ("tanh", "exp2", "log2", "exp", "log")             # (x) -> f32
# every operator: its arity (`where` is (bool, x, y) -> the promoted type of x and y)
OPS = {**{o: 2 for o in ARITH + COMPARE + LOGIC}, "div": 2, "floordiv": 2, "neg": 1, "abs": 1, "not": 1, "f32": 1,
       "where": 3,
       **{o: 1 for o in UNARY_F32}}


class ModError(ValueError):
    """A modifier that cannot be built or read (an unknown operator, a type mismatch, a malformed text)."""


@dataclass(frozen=True)
class Expr:
    op: str                     # a leaf name (LEAVES), "const", "scalar", or an operator of OPS
    args: tuple = ()            # the operands (Expr)
    value: object = None        # const: its Python value; scalar: its name
    type: str = "f32"

    @property
    def text(self) -> str:
        """The canonical S-expression (what `parse` reads back)."""
        if self.op in LEAVES:
            return self.op
        if self.op == "const":
            return f"(const {_const_text(self.value, self.type)} {self.type})"
        if self.op == "scalar":
            return f"(scalar {self.value} {self.type})"
        if self.op == "load":
            return f"(load {self.value} {self.type} {' '.join(a.text for a in self.args)})"
        return f"({self.op} {' '.join(a.text for a in self.args)})"

    def walk(self):
        """Every node, operands before their users (a node shared by value once)."""
        seen: dict = {}

        def visit(e: Expr):
            if e in seen:
                return
            for a in e.args:
                visit(a)
            seen[e] = None
        visit(self)
        return list(seen)

    def scalars(self) -> dict[str, str]:
        return {e.value: e.type for e in self.walk() if e.op == "scalar"}

    def tensors(self) -> dict[str, tuple[str, int]]:
        """The captured tensors it loads from: name -> (element type, rank)."""
        return {e.value: (e.type, len(e.args)) for e in self.walk() if e.op == "load"}

    def leaves(self) -> set[str]:
        return {e.op for e in self.walk() if e.op in LEAVES}


def _const_text(value, type_: str) -> str:
    if type_ == "bool":
        return "true" if value else "false"
    if type_ == "i32":
        return str(int(value))
    return repr(float(value))


def _promote(*types: str) -> str:
    return "f32" if "f32" in types else "i32"


def leaf(name: str) -> Expr:
    return Expr(name, type=LEAVES[name])


def const(value) -> Expr:
    """A constant: a Python bool, int (an i32) or float."""
    if isinstance(value, bool):
        return Expr("const", value=bool(value), type="bool")
    if isinstance(value, int):
        if not -2**31 <= value < 2**31:
            raise ModError(f"the integer constant {value} does not fit an i32: use a float")
        return Expr("const", value=int(value), type="i32")
    if isinstance(value, float):
        if math.isnan(value):
            raise ModError("a NaN constant: use a finite value or +/-inf")
        return Expr("const", value=float(value), type="f32")
    raise ModError(f"the constant {value!r} ({type(value).__name__}): only Python bool, int and float constants")


def scalar(name: str, type_: str) -> Expr:
    if not name.isidentifier():
        raise ModError(f"scalar name {name!r} must be an identifier")
    if type_ not in ("f32", "i32"):
        raise ModError(f"scalar {name!r} of type {type_!r}: a scalar is f32 or i32")
    return Expr("scalar", value=name, type=type_)


def apply(op: str, *args: Expr) -> Expr:
    """The operator `op` on `args`, typed; ModError names a wrong operator, arity or operand type."""
    if op not in OPS:
        raise ModError(f"operator {op!r} is not one of {', '.join(sorted(OPS))}")
    if len(args) != OPS[op]:
        raise ModError(f"{op} takes {OPS[op]} operand{'s' * (OPS[op] != 1)}, got {len(args)}")
    types = [a.type for a in args]
    if op in LOGIC or op == "not":
        if any(t != "bool" for t in types):
            raise ModError(f"{op} combines booleans (comparisons), got {', '.join(types)}")
        return Expr(op, args, type="bool")
    if op == "where":
        if types[0] != "bool":
            raise ModError(f"where's condition must be a boolean (a comparison), got {types[0]}")
        if "bool" in types[1:]:
            raise ModError("where chooses between numbers; for booleans combine them with & and |")
        return Expr(op, args, type=_promote(*types[1:]))
    if "bool" in types:
        raise ModError(f"{op} of a boolean: convert it with where(cond, 1.0, 0.0)")
    if op in COMPARE:
        return Expr(op, args, type="bool")
    if op in ARITH:
        return Expr(op, args, type=_promote(*types))
    if op in ("neg", "abs"):
        return Expr(op, args, type=types[0])
    if op == "floordiv":
        if types != ["i32", "i32"]:
            raise ModError(f"// (floor division) divides integers (indices, i32 scalars and tensors), got "
                           f"{', '.join(types)}; for a float quotient use /")
        return Expr(op, args, type="i32")
    return Expr(op, args, type="f32")                # div, f32, the f32 functions


# ---- the canonical text, read back ----------------------------------------------------------------------------

def load(name: str, type_: str, *index: Expr) -> Expr:
    """An element of the captured tensor `name` (f32 or i32) at `index` (one i32 per dimension): the load of a bias
    table, a per-head slope or a document id that a modifier indexes by the scores' indices."""
    if not name.isidentifier():
        raise ModError(f"captured tensor name {name!r} must be an identifier")
    if type_ not in ("f32", "i32"):
        raise ModError(f"captured tensor {name!r} of {type_}: a modifier reads f32 or i32 tensors (convert it with "
                       ".float() or .int())")
    if not index:
        raise ModError(f"captured tensor {name!r}: index it with one value per dimension")
    for i, x in enumerate(index):
        if x.type != "i32":
            raise ModError(f"captured tensor {name!r}: index {i} is {x.type}, not an integer; index with the "
                           "indices, integer scalars and integer arithmetic on them")
    return Expr("load", tuple(index), value=name, type=type_)


def parse(text: str) -> Expr:
    """The Expr whose `text` is `text` (ModError naming the position of anything else)."""
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def fail(why: str):
        raise ModError(f"modifier text {text!r}: {why} at token {pos}")

    def read() -> Expr:
        nonlocal pos
        if pos >= len(tokens):
            fail("unexpected end")
        tok = tokens[pos]
        pos += 1
        if tok in LEAVES:
            return leaf(tok)
        if tok != "(":
            fail(f"unexpected {tok!r}")
        if pos >= len(tokens):
            fail("unexpected end")
        op = tokens[pos]
        pos += 1
        if op == "load":
            if pos + 2 > len(tokens):
                fail("unexpected end")
            name, type_ = tokens[pos], tokens[pos + 1]
            pos += 2
            index = []
            while pos < len(tokens) and tokens[pos] != ")":
                index.append(read())
            if pos >= len(tokens):
                fail("missing ')'")
            pos += 1
            return load(name, type_, *index)
        if op in ("const", "scalar"):
            if pos + 2 > len(tokens):
                fail("unexpected end")
            raw, type_ = tokens[pos], tokens[pos + 1]
            pos += 2
            if tokens[pos:pos + 1] != [")"]:
                fail("expected ')'")
            pos += 1
            if op == "scalar":
                return scalar(raw, type_)
            if type_ == "bool":
                return const(raw == "true")
            return const(int(raw) if type_ == "i32" else float(raw))
        args = []
        while pos < len(tokens) and tokens[pos] != ")":
            args.append(read())
        if pos >= len(tokens):
            fail("missing ')'")
        pos += 1
        return apply(op, *args)

    e = read()
    if pos != len(tokens):
        fail("trailing tokens")
    return e


# ---- evaluation, on any arithmetic namespace -------------------------------------------------------------------

def evaluate(e: Expr, env: dict, ops) -> object:
    """The value of `e` with the leaves and scalars of `env` (by name), computed by `ops`: a namespace with
    const(value, type), to_f32(x, type), arith(op, x, y, type), div(x, y), neg(x, type), abs(x, type),
    compare(op, x, y, type), floordiv(x, y), logic(op, x, y), not_(x), where(c, x, y), unary(op, x) (the f32 functions), load(tensor,
    index, type) (a captured tensor: env holds what the namespace reads it through, by name). Operands
    are converted to the operator's type first (i32 -> f32 where the other is f32). Equal subtrees are computed
    once."""
    done: dict = {}
    for node in e.walk():
        if node.op in LEAVES or node.op == "scalar":
            name = node.op if node.op in LEAVES else node.value
            if name not in env:
                raise ModError(f"the modifier reads {name!r}, which this evaluation does not provide")
            done[node] = env[name]
            continue
        if node.op == "const":
            done[node] = ops.const(node.value, node.type)
            continue
        if node.op == "load":
            if node.value not in env:
                raise ModError(f"the modifier reads the captured tensor {node.value!r}, which this evaluation does "
                               "not provide")
            done[node] = ops.load(env[node.value], [done[a] for a in node.args], node.type)
            continue
        vals = [done[a] for a in node.args]
        types = [a.type for a in node.args]

        def widened(v, t, want):
            return ops.to_f32(v, t) if want == "f32" and t != "f32" else v

        op = node.op
        if op in ARITH or op in COMPARE:
            want = _promote(*types)
            x, y = (widened(v, t, want) for v, t in zip(vals, types))
            done[node] = ops.arith(op, x, y, want) if op in ARITH else ops.compare(op, x, y, want)
        elif op in LOGIC:
            done[node] = ops.logic(op, *vals)
        elif op == "not":
            done[node] = ops.not_(vals[0])
        elif op == "where":
            want = node.type
            done[node] = ops.where(vals[0], widened(vals[1], types[1], want), widened(vals[2], types[2], want))
        elif op in ("neg", "abs"):
            done[node] = (ops.neg if op == "neg" else ops.abs)(vals[0], types[0])
        elif op == "div":
            done[node] = ops.div(*(widened(v, t, "f32") for v, t in zip(vals, types)))
        elif op == "floordiv":
            done[node] = ops.floordiv(*vals)
        elif op == "f32":
            done[node] = widened(vals[0], types[0], "f32")
        else:
            done[node] = ops.unary(op, widened(vals[0], types[0], "f32"))
    return done[e]


class NumpyOps:
    """The reference's namespace: float64 for f32 values (the reference computes in float64), int64 for i32
    (wrapping is not modelled: an index expression that overflows an i32 is a user error the kernel shares)."""
    import numpy as _np
    np = _np
    _ARITH = {"add": _np.add, "sub": _np.subtract, "mul": _np.multiply, "minimum": _np.minimum,
              "maximum": _np.maximum}
    _COMPARE = {"lt": _np.less, "le": _np.less_equal, "gt": _np.greater, "ge": _np.greater_equal, "eq": _np.equal,
                "ne": _np.not_equal}
    _UNARY = {"tanh": _np.tanh, "exp2": _np.exp2, "log2": _np.log2, "exp": _np.exp, "log": _np.log}

    @classmethod
    def const(cls, value, type_):
        return {"f32": cls.np.float64, "i32": cls.np.int64, "bool": cls.np.bool_}[type_](value)

    @classmethod
    def to_f32(cls, x, type_):
        return cls.np.asarray(x, dtype=cls.np.float64)

    @classmethod
    def arith(cls, op, x, y, type_):
        return cls._ARITH[op](x, y)

    @classmethod
    def div(cls, x, y):
        with cls.np.errstate(divide="ignore", invalid="ignore"):
            return cls.np.divide(x, y)

    @classmethod
    def floordiv(cls, x, y):
        return cls.np.floor_divide(x, y)

    @classmethod
    def neg(cls, x, type_):
        return cls.np.negative(x)

    @classmethod
    def abs(cls, x, type_):
        return cls.np.abs(x)

    @classmethod
    def compare(cls, op, x, y, type_):
        return cls._COMPARE[op](x, y)

    @classmethod
    def logic(cls, op, x, y):
        return cls.np.logical_and(x, y) if op == "and" else cls.np.logical_or(x, y)

    @classmethod
    def not_(cls, x):
        return cls.np.logical_not(x)

    @classmethod
    def where(cls, c, x, y):
        return cls.np.where(c, x, y)

    @classmethod
    def unary(cls, op, x):
        with cls.np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return cls._UNARY[op](x)

    @classmethod
    def load(cls, tensor, index, type_):
        """tensor[index] elementwise (the index arrays broadcast), as float64 or int64."""
        arr = cls.np.asarray(tensor)
        idx = tuple(cls.np.asarray(i, dtype=cls.np.int64) for i in index)
        return arr[idx].astype(cls.np.float64 if type_ == "f32" else cls.np.int64)


# ---- both modifiers of one attention ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ScoreMods:
    """The score and mask modifiers of one attention kernel and its runtime scalars (name, type), in parameter
    order (sorted by name). The kernel takes each scalar as a parameter `mod_<name>` after the standard ones."""
    score: Expr | None = None
    mask: Expr | None = None
    scalars: tuple[tuple[str, str], ...] = ()
    tensors: tuple[tuple[str, str, int], ...] = ()    # captured tensors (name, element type, rank), by name
    # captured i32 tensors declared non-decreasing along their last dimension (`warploom.score.nondecreasing`: sorted
    # document ids), by name: the block bounds read their ends (warploom.score.bounds), the host checks the order
    sorted: tuple[str, ...] = ()

    def __post_init__(self):
        if self.score is not None:
            if self.score.type == "bool":
                raise ModError("a score modifier returns a number (the new score), not a boolean: a boolean is a "
                               "mask, pass it as mask_mod")
        if self.mask is not None:
            if self.mask.type != "bool":
                raise ModError(f"a mask modifier returns a boolean (whether the key is seen), got {self.mask.type}")
            if "score" in self.mask.leaves():
                raise ModError("a mask modifier reads (b, h, q_idx, kv_idx), not the score: use a score modifier "
                               "returning -inf where a score should drop")
        used: dict[str, str] = {}
        for e in (self.score, self.mask):
            for name, type_ in (e.scalars() if e is not None else {}).items():
                if used.setdefault(name, type_) != type_:
                    raise ModError(f"scalar {name!r} is used as {used[name]} and as {type_}")
        declared = dict(self.scalars)
        if list(declared) != sorted(declared) or len(declared) != len(self.scalars):
            raise ModError(f"scalars {self.scalars}: one entry per name, sorted by name")
        for name, type_ in used.items():
            if declared.get(name) != type_:
                raise ModError(f"the modifiers read scalar {name!r} ({type_}), which the scalars {self.scalars} do "
                               "not declare so")
        loaded: dict = {}
        for e in (self.score, self.mask):
            for name, kind in (e.tensors() if e is not None else {}).items():
                if loaded.setdefault(name, kind) != kind:
                    raise ModError(f"captured tensor {name!r} is read as {loaded[name]} and as {kind}")
        tensors = {n: (t, r) for n, t, r in self.tensors}
        if list(tensors) != sorted(tensors) or len(tensors) != len(self.tensors) or set(tensors) & set(declared):
            raise ModError(f"tensors {self.tensors}: one entry per name, sorted by name, none named as a scalar")
        if loaded != tensors:
            raise ModError(f"the modifiers read the captured tensors {loaded}; declared: {tensors}")
        if list(self.sorted) != sorted(set(self.sorted)):
            raise ModError(f"sorted {self.sorted}: one entry per name, sorted by name")
        for name in self.sorted:
            if tensors.get(name, ("",))[0] != "i32":
                raise ModError(f"captured tensor {name!r} is declared non-decreasing, which only an int32 tensor the "
                               f"modifiers read can be (read: {sorted(tensors) or 'none'})")
            for e in (self.score, self.mask):
                for node in (x for x in (e.walk() if e is not None else ()) if x.op == "load" and x.value == name):
                    for dim, index in enumerate(node.args[:-1]):
                        moving = index.leaves() & {"q_idx", "kv_idx"}
                        if moving:
                            raise ModError(
                                f"captured tensor {name!r} is declared non-decreasing along its last dimension but "
                                f"dimension {dim} is indexed by {index.text}, which reads {', '.join(sorted(moving))}: "
                                "index its last dimension by the positions and the others by b, h and scalars, or "
                                "pass it without nondecreasing()")

    def __bool__(self) -> bool:
        return self.score is not None or self.mask is not None

    @functools.cached_property
    def tabled(self) -> bool:
        """Whether the mask's key blocks come from a block table built on the host (warploom.score.table: a mask
        reading an unsorted captured tensor at a position) rather than from its bounds."""
        return needs_table(self.mask, self.sorted)

    @property
    def text(self) -> str:
        parts = [f"score {self.score.text}" if self.score is not None else "",
                 f"mask {self.mask.text}" if self.mask is not None else "",
                 " ".join(f"{n}:{t}" for n, t in self.scalars),
                 " ".join(f"{n}:{t}:{r}" for n, t, r in self.tensors),
                 f"sorted {' '.join(self.sorted)}" if self.sorted else ""]
        return "; ".join(p for p in parts if p)

    @property
    def key(self) -> str:
        """8 hex digits of the canonical text: the kernel name's suffix (what changes when the graph changes)."""
        return hashlib.sha256(self.text.encode()).hexdigest()[:8]

    def params(self) -> tuple[tuple[str, str], ...]:
        """The kernel parameters of the scalars, then of each captured tensor its address and its strides (in
        elements, i32), in launch order."""
        out = [(param_name(n), t) for n, t in self.scalars]
        for name, _, rank in self.tensors:
            out += [(param_name(name), "ptr")] + [(stride_name(name, i), "i32") for i in range(rank)]
        return tuple(out)

    def attrs(self) -> dict:
        """As the IR carries them (string attributes of wl.attention and wl.kernel)."""
        out = {}
        if self.score is not None:
            out["score_mod"] = self.score.text
        if self.mask is not None:
            out["mask_mod"] = self.mask.text
        if self.scalars:
            out["mod_scalars"] = " ".join(f"{n}:{t}" for n, t in self.scalars)
        if self.tensors:
            out["mod_tensors"] = " ".join(f"{n}:{t}:{r}" for n, t, r in self.tensors)
        if self.sorted:
            out["mod_sorted"] = " ".join(self.sorted)
        return out

    @classmethod
    def from_attrs(cls, attrs: dict) -> "ScoreMods":
        """Read back from an op's attributes (`attrs`); an empty ScoreMods where it has none."""
        scalars = tuple(tuple(item.split(":")) for item in str(attrs.get("mod_scalars", "")).split())
        tensors = tuple((n, t, int(r)) for n, t, r in (item.split(":") for item in
                                                       str(attrs.get("mod_tensors", "")).split()))
        score, mask = attrs.get("score_mod"), attrs.get("mask_mod")
        return cls(parse(str(score)) if score else None, parse(str(mask)) if mask else None, scalars, tensors,
                   tuple(str(attrs.get("mod_sorted", "")).split()))


# ---- which masks walk a block table (warploom.score.table) ----------------------------------------------------

def positional_loads(mask: Expr, sorted_tensors=()) -> list[str]:
    """The captured tensors `mask` reads at an index that moves with q_idx or kv_idx, other than those declared
    non-decreasing (`sorted_tensors`), in first-read order."""
    out = []
    for node in mask.walk():
        if node.op == "load" and node.value not in sorted_tensors and node.value not in out:
            if any(i.leaves() & {"q_idx", "kv_idx"} for i in node.args):
                out.append(node.value)
    return out


def needs_table(mask: Expr | None, sorted_tensors=()) -> bool:
    """Whether the kernel of `mask` walks a block table (warploom.score.table: the mask evaluated per element
    instead of bounded): a positional load of an unsorted captured tensor, and no f32 value anywhere in the mask."""
    if mask is None or not positional_loads(mask, sorted_tensors):
        return False
    return all(node.type != "f32" for node in mask.walk())


def param_name(scalar_name: str) -> str:
    return f"mod_{scalar_name}"


def stride_name(tensor_name: str, dim: int) -> str:
    """The kernel parameter of a captured tensor's stride along `dim` (elements)."""
    return f"mod_{tensor_name}_s{dim}"


NONE = ScoreMods()
