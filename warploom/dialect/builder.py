"""`Graph`: build a wl graph in a few lines of Python and get its MLIR module.

    g = Graph("attn")
    q = g.input("q", ("B", "S", 16, 128), "bf16")     # names are dynamic (`?`) dims
    k = g.input("k", ("B", "S", 4, 128), "bf16")
    v = g.input("v", ("B", "S", 4, 128), "bf16")
    g.output(g.attention(q, k, v, causal=True))     # GQA: 16 q heads share 4 kv heads
    print(g)                                        # the func.func with wl ops

Each call checks its shape rules at once (`ShapeError` names the values) and
records the caller's file and line as the op's MLIR location.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

from warploom.runtime.dtypes import canonical
from warploom.score import NONE, ScoreMods, trace_mods

from .definition import GRAPH_OPS, operand_names
from .shapes import ShapeError, TensorType, infer


@dataclass(frozen=True)
class Tensor:
    graph: "Graph"
    index: int            # position in graph.nodes
    type: TensorType

    @property
    def shape(self):
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.elem

    def __repr__(self) -> str:
        return f"<wl tensor %{self.index} : {self.type}>"


@dataclass
class Node:
    op: str | None                 # None for a graph input
    operands: tuple[int, ...]
    attrs: dict
    type: TensorType
    where: tuple[str, int]         # caller's file and line
    name: str | None = None        # input name
    dims: tuple[str, ...] = ()     # input dims as written: "B" or "128"


def caller_position() -> tuple[str, int]:
    """The first stack frame outside this file: where the user wrote the call."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame else ("<unknown>", 0)


class Graph:
    def __init__(self, name: str = "graph"):
        if not name.isidentifier():
            raise ValueError(f"graph name {name!r} must be an identifier (it becomes the func.func name)")
        self.name = name
        self.nodes: list[Node] = []
        self.outputs: list[int] = []
        self._module = None

    # -- inputs and outputs -------------------------------------------------
    def input(self, name: str, shape, dtype, *, nondecreasing: bool = False) -> Tensor:
        """A graph input; dtype: a name ("bf16", "float16", ...) or a numpy / ml_dtypes dtype (np.float16).
        nondecreasing: an i32 table (document ids) whose values never decrease along its last dimension, as
        warploom.score.nondecreasing declares a captured tensor: the attention's block bounds read its ends
        (docs/attention-variants.md "Document ids declared sorted"); the host checks the order at run time."""
        if any(n.name == name for n in self.nodes if n.op is None):
            raise ValueError(f"graph {self.name} already has an input named {name!r}")
        dims = []
        for d in shape:
            if isinstance(d, str):
                dims.append(None)
            elif isinstance(d, int) and d >= 1:
                dims.append(d)
            else:
                raise ValueError(f"input {name!r}: dim {d!r} must be a positive int or a symbol name like 'S'")
        try:
            elem = self._scalar_elem(dtype, f"input {name!r}")  # a float type, or i32 (a captured index table)
        except ValueError as e:
            raise ValueError(f"{e} (and i32, for a table a score modifier reads)") from None
        t = TensorType(tuple(dims), elem)
        if nondecreasing and elem != "i32":
            raise ValueError(f"input {name!r} is {elem} and declared nondecreasing: only an i32 table (document ids) "
                             "bounds an attention's blocks")
        attrs = {"nondecreasing": True} if nondecreasing else {}
        return self._add(Node(None, (), attrs, t, caller_position(), name, tuple(str(d) for d in shape)))

    def output(self, *tensors: Tensor) -> None:
        for t in tensors:
            self._own(t)
            self.outputs.append(t.index)
        self._module = None

    # -- ops ----------------------------------------------------------------
    def matmul(self, a: Tensor, b: Tensor, *, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
        return self._op("matmul", (a, b), transpose_a=transpose_a, transpose_b=transpose_b)

    def attention(self, q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, scale: float | None = None,
                  layout: str = "bshd", score_mod=None, mask_mod=None, scalars: dict | None = None,
                  mods: ScoreMods | None = None, varlen: bool = False) -> Tensor:
        """softmax(score_mod(scale q kᵀ) [causal] [mask_mod]) v. score_mod(score, b, h, q_idx, kv_idx, *scalars) and
        mask_mod(b, h, q_idx, kv_idx, *scalars) are Python functions traced once (warploom.score); `scalars` names
        their runtime scalars with an example value of each (an int: i32, a float: f32); the values themselves are
        kernel arguments. `mods`: modifiers already traced (warploom.score.ScoreMods), instead of the functions.
        varlen: q, k, v hold sequences packed one after another along S (batch 1); their starts, cu_seqlens_q and
        cu_seqlens_k, are runtime arguments (warploom.ops.attention_varlen), and causal, b, q_idx and kv_idx are
        per sequence."""
        if scale is None:
            d = q.shape[-1]
            if d is None:
                raise ShapeError("attention: the head dim of q is dynamic, so pass scale= explicitly")
            scale = 1.0 / math.sqrt(d)
        if mods is not None and (score_mod is not None or mask_mod is not None or scalars):
            raise ValueError("attention: pass mods= (already traced) or score_mod=/mask_mod=/scalars=, not both")
        if mods is None:
            mods = trace_mods(score_mod, mask_mod, scalars)[0] if (score_mod or mask_mod or scalars) else NONE
        if not isinstance(varlen, bool):
            raise ValueError(f"attention: varlen = {varlen!r}: True (packed sequences) or False")
        return self._op("attention", (q, k, v), causal=causal, scale=scale, layout=layout, **mods.attrs(),
                        **({"varlen": True} if varlen else {}))

    def add(self, a, b): return self._op("add", (a, b))
    def mul(self, a, b): return self._op("mul", (a, b))
    def max(self, a, b): return self._op("max", (a, b))
    def scale(self, x, factor: float): return self._op("scale", (x,), factor=factor)
    def exp(self, x): return self._op("exp", (x,))
    def exp2(self, x): return self._op("exp2", (x,))
    def relu(self, x): return self._op("relu", (x,))
    def gelu(self, x, approximate: str = "none"): return self._op("gelu", (x,), approximate=approximate)
    def silu(self, x): return self._op("silu", (x,))
    def reduce_max(self, x, axis: int = -1): return self._op("reduce_max", (x,), axis=axis)
    def reduce_sum(self, x, axis: int = -1): return self._op("reduce_sum", (x,), axis=axis)
    def softmax(self, x, axis: int = -1): return self._op("softmax", (x,), axis=axis)
    def causal_mask(self, x): return self._op("causal_mask", (x,))

    def repeat(self, x, times: int, axis: int = 1) -> Tensor:
        """Each slice along `axis` repeated `times` times in place (torch's repeat_interleave): k and v [B, Hkv, S,
        D] repeated to Hq heads write grouped-query attention out (wl-fuse gives the attention the Hkv heads)."""
        return self._op("repeat", (x,), axis=axis, times=times)

    def cast(self, x: Tensor, dtype) -> Tensor:
        """x converted to dtype: a float type, or "i32" (from an i32 index only to a float, in a modifier)."""
        return self._op("cast", (x,), result_elem="i32" if dtype == "i32" else canonical(dtype))

    # -- the ops of score and mask modifiers, written out (wl-fuse folds them into the attention) ------------
    # A Python number in place of a tensor becomes a wl.constant (an int: i32, a float: f32, a bool: i1).
    def sub(self, a, b): return self._op("sub", (a, b))
    def div(self, a, b): return self._op("div", (a, b))
    def min(self, a, b): return self._op("min", (a, b))
    def neg(self, x): return self._op("neg", (x,))
    def abs(self, x): return self._op("abs", (x,))
    def tanh(self, x): return self._op("tanh", (x,))
    def log(self, x): return self._op("log", (x,))
    def log2(self, x): return self._op("log2", (x,))

    def compare(self, a, b, predicate: str) -> Tensor:
        """a <predicate> b elementwise (an i1 tensor); predicate: lt, le, gt, ge, eq, ne."""
        return self._op("compare", (a, b), predicate=predicate)

    def lt(self, a, b): return self.compare(a, b, "lt")
    def le(self, a, b): return self.compare(a, b, "le")
    def gt(self, a, b): return self.compare(a, b, "gt")
    def ge(self, a, b): return self.compare(a, b, "ge")
    def eq(self, a, b): return self.compare(a, b, "eq")
    def ne(self, a, b): return self.compare(a, b, "ne")
    def and_(self, a, b): return self._op("and", (a, b))
    def or_(self, a, b): return self._op("or", (a, b))
    def not_(self, x): return self._op("not", (x,))

    def where(self, cond, on_true, on_false) -> Tensor:
        """on_true where cond holds, else on_false; where(keep, s, float("-inf")) is a mask."""
        return self._op("where", (cond, on_true, on_false))

    def index(self, grid: Tensor, dim: str) -> Tensor:
        """The i32 positions along one axis of the [B, H, Sq, Sk] score grid `grid`, shaped like it: dim "b", "h"
        (the query head), "q_idx" or "kv_idx" (positions from 0)."""
        return self._op("index", (grid,), dim=dim)

    def scalar(self, name: str, dtype: str = "f32") -> Tensor:
        """A runtime scalar (f32 or i32): a kernel parameter, its value passed at each call (scalars={name: value});
        another value runs the same compiled kernel."""
        return self._op("scalar", (), result_elem=self._scalar_elem(dtype, f"scalar {name!r}"), name=name)

    def constant(self, value, dtype: str | None = None) -> Tensor:
        """A rank-0 constant: f32 for a float, i32 for an int, i1 for a bool unless dtype says."""
        elem = dtype or ("i1" if isinstance(value, bool) else "i32" if isinstance(value, int) else "f32")
        if elem not in ("i1", "i32"):
            elem = self._scalar_elem(elem, f"constant {value!r}")
        return self._op("constant", (), result_elem=elem, value=float(value))

    def gather(self, table: Tensor, *index) -> Tensor:
        """table[index...] elementwise: a captured tensor (a graph input, f32 or i32) read at one i32 tensor per
        dimension (bias[h, q_idx - kv_idx], slopes[h], doc_id[q_idx])."""
        return self._op("gather", (table, *index))

    @staticmethod
    def _scalar_elem(dtype, what: str) -> str:
        if str(dtype) in ("i32", "int32") or getattr(dtype, "__name__", None) == "int32":
            return "i32"
        try:
            return canonical(dtype)
        except ValueError as e:
            raise ValueError(f"{what}: {e}") from None

    # -- results ------------------------------------------------------------
    @property
    def module(self):
        """The MLIR module (built on first use, in a fresh context with `wl` loaded)."""
        if self._module is None:
            from .emit import emit_graph
            self._module = emit_graph(self)
        return self._module

    def __str__(self) -> str:
        return str(self.module)

    # -- internals ----------------------------------------------------------
    def _own(self, t) -> None:
        if not isinstance(t, Tensor) or t.graph is not self:
            raise ValueError(f"{t!r} is not a tensor of graph {self.name}")

    def _add(self, node: Node) -> Tensor:
        self.nodes.append(node)
        self._module = None
        return Tensor(self, len(self.nodes) - 1, node.type)

    def _op(self, op: str, operands: tuple, result_elem: str | None = None, **attrs) -> Tensor:
        operands = tuple(self.constant(t) if isinstance(t, (bool, int, float)) and not isinstance(t, Tensor) else t
                         for t in operands)
        for t in operands:
            self._own(t)
        opdef = GRAPH_OPS[op]
        named = {name: t.type for name, t in zip(operand_names(opdef, len(operands)), operands)}
        try:
            result = infer(op, named, attrs, result_elem=result_elem)
        except ShapeError as e:
            raise ShapeError(f"wl.{op}: {e}") from None
        return self._add(Node(op, tuple(t.index for t in operands), attrs, result, caller_position()))
