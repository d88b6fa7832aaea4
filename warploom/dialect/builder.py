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

from .definition import GRAPH_OPS
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
    def input(self, name: str, shape, dtype) -> Tensor:
        """A graph input; dtype: a name ("bf16", "float16", ...) or a numpy / ml_dtypes dtype (np.float16)."""
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
            elem = canonical(dtype)
        except ValueError as e:
            raise ValueError(f"input {name!r}: {e}") from None
        t = TensorType(tuple(dims), elem)
        return self._add(Node(None, (), {}, t, caller_position(), name, tuple(str(d) for d in shape)))

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

    def cast(self, x: Tensor, dtype) -> Tensor:
        return self._op("cast", (x,), result_elem=canonical(dtype))

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
        for t in operands:
            self._own(t)
        opdef = GRAPH_OPS[op]
        named = {name: t.type for name, t in zip(opdef.operands, operands)}
        try:
            result = infer(op, named, attrs, result_elem=result_elem)
        except ShapeError as e:
            raise ShapeError(f"wl.{op}: {e}") from None
        return self._add(Node(op, tuple(t.index for t in operands), attrs, result, caller_position()))
