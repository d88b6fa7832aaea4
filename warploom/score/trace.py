"""Tracing Python score and mask modifiers into `Expr` (issue 34), in the style of FlexAttention:

    def softcap(score, b, h, q_idx, kv_idx, cap):          # scalars: the parameters after the standard ones
        return cap * tanh(score / cap)                     # warploom.score.tanh, or torch.tanh on the traced values

    def window(b, h, q_idx, kv_idx, size):
        return (q_idx - kv_idx <= size) & (kv_idx <= q_idx)

    mods, values = trace_mods(softcap, window, {"cap": 30.0, "size": 256})

Each function runs once on `Traced` stand-ins; plain Python arithmetic, comparisons, `&`, `|`, `~`, the functions
here (where, tanh, exp2, log2, exp, log, minimum, maximum) and their torch namesakes (`torch.where`,
`torch.tanh`, ...: `Traced.__torch_function__`) record operators; anything else (Python `if`/`and`/`min` on a
traced value, indexing, math.* functions) is refused with a ModError naming the operation and the way out. A
scalar's type comes from its value (int: i32, float: f32); its value is a kernel argument, so another value runs
the same kernel.
"""
from __future__ import annotations

import inspect
import math
import numbers

from .expr import LEAVES, MASK_LEAVES, ModError, ScoreMods, apply, const, leaf, load, scalar

SCORE_ARGS = ("score", "b", "h", "q_idx", "kv_idx")
MASK_ARGS = MASK_LEAVES


def _expr(x):
    """An operand as an Expr: a Traced's, or a Python number's constant."""
    if isinstance(x, Traced):
        return x.expr
    if isinstance(x, numbers.Number) and not isinstance(x, complex):
        if isinstance(x, bool):
            return const(bool(x))
        if isinstance(x, numbers.Integral):
            return const(int(x))
        return const(float(x))
    raise ModError(f"a modifier combines a traced value with {type(x).__name__}: only Python numbers, the traced "
                   "values and runtime scalars (scalars=...) can be combined; to read a tensor, pass it in scalars= "
                   "and take it as a parameter of the modifier (bias[h, q_idx - kv_idx])")


def _op(name: str, *xs) -> "Traced":
    return Traced(apply(name, *(_expr(x) for x in xs)))


class Traced:
    """A traced value of a modifier: Python operators record `Expr` nodes."""
    __slots__ = ("expr",)

    def __init__(self, expr):
        self.expr = expr

    def __repr__(self) -> str:
        return f"<traced {self.expr.type} {self.expr.text}>"

    __pos__ = lambda s: s                                           # noqa: E731
    __neg__ = lambda s: _op("neg", s)                               # noqa: E731
    __abs__ = lambda s: _op("abs", s)                               # noqa: E731
    __invert__ = lambda s: _op("not", s)                            # noqa: E731

    def __bool__(self):
        raise ModError("a modifier used a traced value as a Python truth value (if, and, or, not, min(), max(), a "
                       "chained comparison): those run once at tracing time, not per score; write where(cond, x, "
                       "y), & / | / ~, minimum(x, y), maximum(x, y) instead")

    def _unsupported(self, what: str):
        raise ModError(f"a modifier used {what} on a traced value, which warploom cannot trace; the operators it "
                       "records: + - * / // (unary -) abs, comparisons, & | ~, and where, tanh, exp2, log2, exp, log, "
                       "minimum, maximum (warploom.score or torch)")

    def __getitem__(self, _):
        self._unsupported("indexing")

    def __float__(self):
        self._unsupported("float() (math.* functions call it)")

    def __int__(self):
        self._unsupported("int()")

    def __index__(self):
        self._unsupported("an integer conversion")

    def __mod__(self, _):
        self._unsupported("%")

    __rmod__ = __mod__

    def __pow__(self, _):
        self._unsupported("** (write x * x, or exp2(y * log2(x)))")

    __rpow__ = __pow__

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch.where / torch.tanh / ... (and torch.Tensor's operators) on traced values record the operator."""
        name = getattr(func, "__name__", str(func)).strip("_")
        name = {"true_divide": "div", "divide": "div", "multiply": "mul", "subtract": "sub", "truediv": "div",
                "rtruediv": "rdiv", "floor_divide": "floordiv", "negative": "neg", "logical_and": "and_", "logical_or": "or_",
                "logical_not": "not_", "bitwise_and": "and_", "bitwise_or": "or_", "bitwise_not": "not_",
                "and": "and_", "or": "or_", "invert": "not_"}.get(name, name)
        fn = TORCH_FUNCTIONS.get(name)
        if fn is None or kwargs:
            raise ModError(f"a modifier called torch.{name}{' with keyword arguments' if kwargs else ''} on a traced "
                           f"value, which warploom cannot trace; it traces torch.{', torch.'.join(sorted(TORCH_FUNCTIONS))}")
        return fn(*args)


def _library(*xs):
    """The array library of the first operand that is an array (torch or numpy), else None (Python numbers)."""
    for x in xs:
        module = type(x).__module__.split(".")[0]
        if module in ("torch", "numpy"):
            import importlib
            return importlib.import_module(module)
    return None


def _binary(op: str, reflected: bool = False):
    return (lambda s, o: _op(op, o, s)) if reflected else (lambda s, o: _op(op, s, o))


# Python's binary operators on a Traced (and reflected: 1 + t), and the comparisons, record their operator
for _dunder, _name in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"), ("floordiv", "floordiv"),
                       ("and", "and"), ("or", "or")):
    setattr(Traced, f"__{_dunder}__", _binary(_name))
    setattr(Traced, f"__r{_dunder}__", _binary(_name, reflected=True))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Traced, f"__{_name}__", _binary(_name))
Traced.__hash__ = None              # == records a comparison, so a Traced is no dict key


def where(cond, x, y):
    """x where cond holds, else y (per score); on torch or numpy arrays, their where (so a modifier also runs
    eagerly, e.g. to build a reference)."""
    if any(isinstance(a, Traced) for a in (cond, x, y)):
        return _op("where", cond, x, y)
    lib = _library(cond, x, y)
    return lib.where(cond, x, y) if lib is not None else (x if cond else y)


def _unary(name: str, on_number):
    def fn(x):
        if isinstance(x, Traced):
            return _op(name, x)
        lib = _library(x)
        return getattr(lib, name)(x) if lib is not None else on_number(x)
    fn.__name__ = name
    fn.__doc__ = f"{name} of a traced value (or at once of a number, a torch or a numpy array)"
    return fn


tanh = _unary("tanh", math.tanh)
exp2 = _unary("exp2", lambda x: 2.0 ** x)
log2 = _unary("log2", math.log2)
exp = _unary("exp", math.exp)
log = _unary("log", math.log)


def minimum(x, y):
    if isinstance(x, Traced) or isinstance(y, Traced):
        return _op("minimum", x, y)
    lib = _library(x, y)
    if lib is not None and lib.__name__ == "torch":
        x, y = lib.as_tensor(x), lib.as_tensor(y)
    return lib.minimum(x, y) if lib is not None else min(x, y)


def maximum(x, y):
    if isinstance(x, Traced) or isinstance(y, Traced):
        return _op("maximum", x, y)
    lib = _library(x, y)
    if lib is not None and lib.__name__ == "torch":
        x, y = lib.as_tensor(x), lib.as_tensor(y)
    return lib.maximum(x, y) if lib is not None else max(x, y)


TORCH_FUNCTIONS = {
    "where": where, "tanh": tanh, "exp2": exp2, "log2": log2, "exp": exp, "log": log,
    "minimum": minimum, "maximum": maximum, "abs": lambda x: _op("abs", x), "neg": lambda x: _op("neg", x),
    "not_": lambda x: _op("not", x),
    **{name: _binary(name) for name in ("add", "sub", "mul", "div", "floordiv", "lt", "le", "gt", "ge", "eq", "ne")},
    **{f"r{name}": _binary(name, reflected=True) for name in ("add", "sub", "mul", "div", "floordiv")},
    "and_": _binary("and"), "or_": _binary("or"),
}


def is_tensor(value) -> bool:
    """A torch or numpy array (a captured tensor, `nondecreasing` or not), not a number."""
    return hasattr(value, "shape") and hasattr(value, "dtype") and len(getattr(value, "shape", ())) > 0


class nondecreasing:                      # noqa: N801  (used as a function: scalars={"doc": nondecreasing(doc_id)})
    """A captured int32 tensor declared non-decreasing along its last dimension (document ids of packed documents,
    `doc_id[b, q_idx]`): the mask's block bounds then read the ids at the ends of each block of rows and keys, so
    a document mask walks only the key blocks of the query block's own documents (docs/attention-variants.md,
    "Block sparsity"). Another kernel than the same tensor undeclared (the bounds differ); the host checks the order
    before each launch where the values may have changed and refuses a tensor out of order, since the kernel would
    skip blocks the mask keeps."""
    __slots__ = ("tensor",)

    def __init__(self, tensor):
        if isinstance(tensor, nondecreasing):
            tensor = tensor.tensor
        if not is_tensor(tensor):
            raise ModError(f"nondecreasing() takes a captured tensor (a torch or numpy array of int32), got {tensor!r}")
        self.tensor = tensor

    @property
    def shape(self):
        return self.tensor.shape

    @property
    def dtype(self):
        return self.tensor.dtype

    def __getitem__(self, index):            # evaluated eagerly (a reference calling the modifier on tensors)
        return self.tensor[index]

    def __array__(self, dtype=None, copy=None):     # numpy reads the tensor (the reference, the emulator)
        import numpy as np
        return np.asarray(self.tensor, dtype=dtype)

    def __repr__(self) -> str:
        return f"nondecreasing({self.tensor!r})"


def unwrap(value):
    """The tensor itself of a `nondecreasing` one; anything else as it is."""
    return value.tensor if isinstance(value, nondecreasing) else value


def tensor_kind(name: str, value) -> tuple[str, int]:
    """(element type, rank) of a captured tensor: f32 for float32, i32 for int32 (ModError for others, with the
    conversion that fixes it)."""
    dtype = str(value.dtype).replace("torch.", "")
    kinds = {"float32": "f32", "int32": "i32"}
    if dtype not in kinds:
        way = ".float()" if "float" in dtype or "bfloat" in dtype else ".int() (int32)"
        raise ModError(f"captured tensor {name!r} is {dtype}: a modifier reads float32 or int32 tensors; convert it "
                       f"with {way}")
    return kinds[dtype], len(value.shape)


class TracedTensor:
    """A captured tensor inside a modifier being traced: indexing it with traced indices (and Python ints) records
    a load of one element per score (`bias[h, q_idx - kv_idx + shift]`, `doc_id[q_idx]`)."""
    __slots__ = ("name", "type", "rank")

    def __init__(self, name: str, type_: str, rank: int):
        self.name, self.type, self.rank = name, type_, rank

    def __getitem__(self, index):
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != self.rank or any(isinstance(i, (slice, type(Ellipsis))) or i is None for i in index):
            raise ModError(f"captured tensor {self.name!r} has {self.rank} dimension{'s' * (self.rank != 1)}: index "
                           f"it with {self.rank} value{'s' * (self.rank != 1)} (no slices), got {len(index)}")
        return Traced(load(self.name, self.type, *(_expr(i) for i in index)))

    def __repr__(self) -> str:
        return f"<captured {self.type} tensor {self.name} of rank {self.rank}>"


def scalar_type(name: str, value) -> str:
    """f32 for a float, i32 for an int (ModError for anything else, naming the scalar)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ModError(f"scalar {name!r} = {value!r}: a runtime scalar is a Python int (i32) or float (f32)")
    if isinstance(value, numbers.Integral):
        if not -2**31 <= int(value) < 2**31:
            raise ModError(f"scalar {name!r} = {value}: outside the i32 range")
        return "i32"
    return "f32"


def _trace_one(fn, kind: str, standard: tuple, scalars: dict, used: set):
    label = f"{kind} {getattr(fn, '__name__', repr(fn))}"
    if not callable(fn):
        raise ModError(f"{kind} must be a function of {', '.join(standard)} (and scalars), got {fn!r}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = None
    extra = {}
    if sig is not None:
        params = list(sig.parameters.values())
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(positional) < len(standard) and not any(p.kind == p.VAR_POSITIONAL for p in params):
            raise ModError(f"{label} takes {len(positional)} positional arguments; a {kind} takes "
                           f"({', '.join(standard)}) and then its scalars")
        for p in positional[len(standard):] + [p for p in params if p.kind == p.KEYWORD_ONLY]:
            if p.name in scalars and is_tensor(scalars[p.name]):
                extra[p.name] = TracedTensor(p.name, *tensor_kind(p.name, scalars[p.name]))
                used.add(p.name)
            elif p.name in scalars:
                extra[p.name] = Traced(scalar(p.name, scalar_type(p.name, scalars[p.name])))
                used.add(p.name)
            elif p.default is p.empty:
                raise ModError(f"{label} has a parameter {p.name!r} that no scalar gives: pass scalars="
                               f"{{{p.name!r}: value}} (given: {sorted(scalars) or 'none'})")
    leaves = [Traced(leaf(n)) for n in standard]
    try:
        out = fn(*leaves, **extra)
    except ModError as e:
        raise ModError(f"{label}: {e}") from None
    except Exception as e:         # the user's code failed on a traced value: say where
        raise ModError(f"{label} raised {type(e).__name__} while being traced: {e} (a modifier must be plain "
                       "arithmetic on its arguments: see warploom.score)") from None
    try:
        return _expr(out)
    except ModError:
        raise ModError(f"{label} returned {out!r}: a {kind} returns a traced value or a Python number") from None


def trace_mods(score_mod=None, mask_mod=None, scalars: dict | None = None) -> tuple[ScoreMods, tuple]:
    """(ScoreMods, the scalars' values in parameter order) of a score modifier (score, b, h, q_idx, kv_idx,
    *scalars) and a mask modifier (b, h, q_idx, kv_idx, *scalars); either may be None. ModError names what
    cannot be traced."""
    scalars = dict(scalars or {})
    for name in scalars:
        if not isinstance(name, str) or not name.isidentifier():
            raise ModError(f"scalar name {name!r} must be an identifier (a parameter name of the modifier)")
        if is_tensor(scalars[name]):
            tensor_kind(name, scalars[name])
        else:
            scalar_type(name, scalars[name])
    used: set = set()
    score = _trace_one(score_mod, "score_mod", SCORE_ARGS, scalars, used) if score_mod is not None else None
    mask = _trace_one(mask_mod, "mask_mod", MASK_ARGS, scalars, used) if mask_mod is not None else None
    unused = sorted(set(scalars) - used)
    if unused:
        raise ModError(f"scalars {unused} are parameters of neither score_mod nor mask_mod")
    if score is not None and score.type == "bool":
        raise ModError("score_mod returned a boolean: a boolean is a mask, pass that function as mask_mod")
    if mask is not None and mask.type != "bool":
        raise ModError(f"mask_mod returned a {mask.type} value: it returns a boolean (a comparison; True keeps the "
                       "key)")
    if score is not None and score.op == "score":
        score = None                 # the identity
    if mask is not None and mask.op == "const" and mask.value is True:
        mask = None                  # keeps everything
    names = tuple(n for n in sorted(used) if not is_tensor(scalars[n]))
    tensors = tuple(n for n in sorted(used) if is_tensor(scalars[n]))
    declared = tuple(n for n in tensors if isinstance(scalars[n], nondecreasing))
    for name in declared:
        if tensor_kind(name, scalars[name])[0] != "i32":
            raise ModError(f"captured tensor {name!r} is {scalars[name].dtype} and declared nondecreasing(): only "
                           "int32 ids (document ids) bound blocks; convert it with .int() or pass it undeclared")
    mods = ScoreMods(score, mask, tuple((n, scalar_type(n, scalars[n])) for n in names),
                     tuple((n, *tensor_kind(n, scalars[n])) for n in tensors), declared)
    return mods, tuple(scalars[n] for n in names + tensors)


__all__ = ["LEAVES", "Traced", "exp", "exp2", "log", "log2", "maximum", "minimum", "nondecreasing", "tanh",
           "trace_mods", "unwrap", "where"]
