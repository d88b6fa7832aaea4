"""The ops of the `wl` dialect, as tables, and the IRDL definition built from them.

Three levels share the dialect:
- graph ops (`GRAPH_OPS`) on tensors: what users build; the builder, verifier and
  reference interpreter read this table;
- kernel ops (`KERNEL_OPS`): a `wl.kernel` holding tiles, loops and MMAs (made by wl-tile);
- resource ops, also in `KERNEL_OPS`: buffers, mbarriers, warp roles, waits and
  arrives, each naming its smem region, stage ring and barrier (made by the
  planning passes; read by the lowering and the emulator).
IRDL checks structure only (operand counts, required attributes, regions);
planning passes add further attributes (`offset`, `bytes`, ...), which IRDL allows.
Shape rules of graph ops live in `shapes.py`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir
from mlir.dialects import irdl

# IRDL attribute constraints by the kind of value an attribute holds.
# IRDL (MLIR 22) has no optional attributes: every listed attribute is required,
# so flags are i1 integers (`causal = true`) rather than unit attributes.
ATTR_BASES = {
    "bool": "#builtin.integer",
    "int": "#builtin.integer",
    "float": "#builtin.float",
    "double": "#builtin.float",      # an f64 float attribute (a constant that must hold every i32 exactly)
    "str": "#builtin.string",
    "array": "#builtin.array",
}


@dataclass(frozen=True)
class OpDef:
    name: str                      # op name without the `wl.` prefix
    # Operand names, all ranked tensors. "*name" is variadic; IRDL binds one constraint to one type,
    # so a variadic group's tensors must share a type: kernels take their first two inputs apart.
    operands: tuple[str, ...]
    attrs: dict[str, str] = field(default_factory=dict)   # attribute name -> kind (ATTR_BASES key)
    summary: str = ""
    results: int = 1               # 0 or 1 tensor result; -1: one, then any number more (a kernel's further outputs, of one type)
    region: bool = False           # one region, ended by `gpu.yield` (IRDL ops cannot be terminators)
    # attributes that may be absent (IRDL has none: these are not declared to it, which allows extra attributes);
    # name -> kind, emitted when given
    optional: dict[str, str] = field(default_factory=dict)


GRAPH_OPS: dict[str, OpDef] = {d.name: d for d in [
    OpDef("matmul", ("lhs", "rhs"), {"transpose_a": "bool", "transpose_b": "bool"},
          "lhs @ rhs over the last two axes (optional transposes), identical leading batch dims"),
    OpDef("attention", ("q", "k", "v"), {"causal": "bool", "scale": "float", "layout": "str"},
          "softmax(score_mod(scale * q k^T) [causal] [mask_mod]) v; layout bhsd or bshd; GQA when q has more heads "
          "than k/v; the modifiers (warploom.score: the canonical text of each, and the runtime scalars they read) "
          "only when given; varlen: the sequences packed along S (B = 1), cu_seqlens_q/k runtime arguments",
          optional={"score_mod": "str", "mask_mod": "str", "mod_scalars": "str", "mod_tensors": "str",
                    "mod_sorted": "str", "varlen": "bool"}),
    OpDef("add", ("lhs", "rhs"), {}, "elementwise sum"),
    OpDef("mul", ("lhs", "rhs"), {}, "elementwise product"),
    OpDef("max", ("lhs", "rhs"), {}, "elementwise maximum"),
    OpDef("scale", ("input",), {"factor": "float"}, "input * factor"),
    OpDef("exp", ("input",), {}, "e ** input"),
    OpDef("exp2", ("input",), {}, "2 ** input"),
    OpDef("relu", ("input",), {}, "max(input, 0)"),
    OpDef("gelu", ("input",), {"approximate": "str"}, "GELU, approximate = \"none\" (erf) or \"tanh\""),
    OpDef("silu", ("input",), {}, "input * sigmoid(input)"),
    OpDef("cast", ("input",), {}, "convert to the result's element type (round to nearest even)"),
    OpDef("reduce_max", ("input",), {"axis": "int"}, "maximum over one axis, which is removed"),
    OpDef("reduce_sum", ("input",), {"axis": "int"}, "sum over one axis, which is removed"),
    OpDef("softmax", ("input",), {"axis": "int"}, "softmax over one axis"),
    OpDef("causal_mask", ("input",), {}, "-inf where key index > query index over the last two axes"),
    OpDef("repeat", ("input",), {"axis": "int", "times": "int"},
          "each slice along axis repeated `times` times in place (torch's repeat_interleave): k and v's heads "
          "repeated for GQA, which wl-fuse folds into the attention's kv heads"),
    # the ops of a score or mask modifier written out in the graph (issue 34): wl-fuse folds the chain between an
    # attention's scores and its softmax into the wl.attention's score_mod / mask_mod (warploom.score's operators).
    # A rank-0 operand (a scalar, a constant) broadcasts; i32 meets a float as that float; comparisons give i1.
    OpDef("sub", ("lhs", "rhs"), {}, "elementwise difference"),
    OpDef("div", ("lhs", "rhs"), {}, "elementwise quotient (a float: i32 operands are converted)"),
    OpDef("min", ("lhs", "rhs"), {}, "elementwise minimum"),
    OpDef("neg", ("input",), {}, "-input"),
    OpDef("abs", ("input",), {}, "|input|"),
    OpDef("tanh", ("input",), {}, "hyperbolic tangent"),
    OpDef("log", ("input",), {}, "natural logarithm"),
    OpDef("log2", ("input",), {}, "base-2 logarithm"),
    OpDef("compare", ("lhs", "rhs"), {"predicate": "str"},
          "lhs <predicate> rhs elementwise, an i1 tensor; predicate lt, le, gt, ge, eq or ne"),
    OpDef("and", ("lhs", "rhs"), {}, "logical and of two i1 tensors"),
    OpDef("or", ("lhs", "rhs"), {}, "logical or of two i1 tensors"),
    OpDef("not", ("input",), {}, "logical not of an i1 tensor"),
    OpDef("where", ("cond", "on_true", "on_false"), {}, "on_true where cond (i1) holds, else on_false"),
    OpDef("index", ("grid",), {"dim": "str"},
          "the i32 position along one axis of a rank-4 [B, H, Sq, Sk] score grid, shaped like it: dim b (batch), h "
          "(query head), q_idx (query position) or kv_idx (key position), each from 0"),
    OpDef("scalar", (), {"name": "str"},
          "a runtime scalar (rank 0, f32 or i32): a kernel parameter named `name`, its value given at each call"),
    OpDef("constant", (), {"value": "double"}, "a rank-0 constant of the result's element type (f32, i32 or i1)"),
    OpDef("gather", ("table", "*index"), {},
          "table[index...] elementwise: a captured tensor (a graph input, f32 or i32) read at one i32 tensor per "
          "dimension, all of one type; the result has the indices' shape"),
]}

# the ops only modifiers use (the rest of SCORE_BINARY and SCORE_UNARY also serve the GEMM epilogue)
MODIFIER_OPS = ("sub", "div", "min", "neg", "abs", "tanh", "log", "log2", "compare", "and", "or", "not", "where",
                "index", "scalar", "constant", "gather")
# the score-modifier ops by family (the shape rules, the reference interpreter and wl-fuse read these)
SCORE_BINARY = ("add", "sub", "mul", "div", "max", "min")
SCORE_UNARY = ("neg", "abs", "exp", "exp2", "tanh", "log", "log2")
COMPARE_PREDICATES = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_OPS = ("and", "or", "not")
INDEX_DIMS = ("b", "h", "q_idx", "kv_idx")          # the axes of the [B, H, Sq, Sk] score grid, in order

KERNEL_OPS: dict[str, OpDef] = {d.name: d for d in [
    # kernel level (wl-tile, wl-pipeline)
    OpDef("kernel", ("in0", "in1", "*more"), {"kind": "str", "tile": "array", "cluster": "array", "grid": "array"},
          "one GPU kernel computing its results (attention: out and lse) from its inputs; the body is its program",
          results=-1, region=True),
    OpDef("k_loop", (), {"trip": "array"}, "loop over the K tiles (trip: a rule); stage = i % stages, phase = (i / stages) & 1",
          results=0, region=True),
    OpDef("loop_first", (), {}, "a software-pipelined k_loop's iteration 0 (runs instead of the loop body)",
          results=0, region=True),
    OpDef("loop_last", (), {}, "a software-pipelined k_loop's drain, after its last iteration (ops with lag >= 1)",
          results=0, region=True),
    OpDef("load_tile", (), {"operand": "str", "tile": "array"}, "load one tile of an input", results=0),
    OpDef("mma", (), {"a": "str", "b": "str", "acc": "str", "shape": "array"},
          "acc += a @ b on tiles [m, n, k]", results=0),
    OpDef("store_tile", (), {"operand": "str", "acc": "str", "tile": "array"},
          "store the accumulator tile to the output", results=0),
    # resource level (wl-pipeline, wl-specialize, wl-plan-smem, wl-plan-barriers)
    OpDef("buffer", (), {"name": "str", "shape": "array", "elem": "str", "stages": "int"},
          "a shared-memory ring of `stages` tiles", results=0),
    OpDef("ring", (), {"name": "str", "stages": "int", "regions": "array"},
          "a pipeline of `stages` slots over buffers that advance together (wl-plan-barriers adds full/empty)",
          results=0),
    OpDef("async_load", (), {"operand": "str", "buffer": "str", "tile": "array"},
          "asynchronous copy (TMA) of a tile into the current stage of a buffer", results=0),
    OpDef("role", (), {"name": "str"},
          "the program of some warps (`warpgroups = [..]`, or `warps = [first, count]`), with its issue mode and "
          "register budget (`regs`, when it sets one)", results=0, region=True),
    OpDef("mbarrier", (), {"name": "str", "count": "int", "arrivals": "int"},
          "a ring of `count` mbarriers, each completing after `arrivals` arrivals (and its tx bytes)",
          results=0),
    OpDef("wait", (), {"barrier": "str", "parity": "str"},
          "wait for the current stage's barrier phase (parity 'consumer': phase; 'producer': phase ^ 1)",
          results=0),
    OpDef("arrive_expect_tx", (), {"barrier": "str", "bytes": "int"},
          "arrive on the current stage's barrier, expecting `bytes` of async copies", results=0),
    OpDef("arrive", (), {"barrier": "str"}, "arrive on the current stage's barrier", results=0),
    OpDef("mma_wait", (), {"pending": "int"}, "wait until at most `pending` MMA groups are in flight",
          results=0),
    OpDef("compute", (), {"kind": "str", "reads": "array", "writes": "array"},
          "register arithmetic between MMAs (online softmax, normalize): reads and writes named register values",
          results=0),
    OpDef("register", (), {"name": "str", "shape": "array"},
          "a named register tile per issuing unit that no MMA accumulates into (softmax statistics, P, LSE)",
          results=0),
    OpDef("named_barrier", (), {"name": "str", "id": "int", "threads": "int", "count": "int"},
          "hardware named barriers ids id..id+count-1 (one per warpgroup when count > 1), `threads` each",
          results=0),
    OpDef("named_barrier_sync", (), {"barrier": "str", "slot": "str"},
          "bar.sync on a named barrier: this warpgroup's (slot 'own') or the next one's ('next')", results=0),
    OpDef("named_barrier_arrive", (), {"barrier": "str", "slot": "str"},
          "bar.arrive on a named barrier (slot 'own' or 'next'): signal without waiting", results=0),
    # after lowering: the host-side call of a compiled kernel
    OpDef("launch", ("in0", "in1", "*more"), {"kernel": "str"}, "launch a compiled kernel (see the gpu.module)",
          results=-1),
]}

def operand_names(opdef: OpDef, count: int) -> list[str]:
    """The names of an op's `count` operands: a variadic group ("*index") is named index0, index1, ..."""
    names = list(opdef.operands)
    if names and names[-1].startswith("*"):
        stem = names.pop()[1:]
        names += [f"{stem}{i}" for i in range(count - len(names))]
    return names


ALL_OPS: dict[str, OpDef] = {**GRAPH_OPS, **KERNEL_OPS}

ELEMENTWISE_BINARY = ("add", "mul", "max")
ELEMENTWISE_UNARY = ("scale", "exp", "exp2", "relu", "gelu", "silu")
REDUCTIONS = ("reduce_max", "reduce_sum")


def build_irdl(module: ir.Module) -> irdl.DialectOp:
    """Append the IRDL definition of the `wl` dialect to `module` (under its context) and return it.

    Built with the `mlir.dialects.irdl` op builders. Each operand, result and
    attribute gets its own constraint value: one `irdl.base` shared by two
    operands would force them to have the same type (gpu-facts.md §8).
    """
    with ir.InsertionPoint(module.body):
        dialect = irdl.DialectOp("wl")
    for op in ALL_OPS.values():
        with ir.InsertionPoint(dialect.body):
            operation = irdl.OperationOp(op.name)
        with ir.InsertionPoint(operation.body):
            operands = [_base("!builtin.tensor") for _ in op.operands]
            results = [_base("!builtin.tensor") for _ in range(2 if op.results < 0 else op.results)]
            attrs = [_base(ATTR_BASES[kind]) for kind in op.attrs.values()]
            body = irdl.region([]) if op.region else None
            irdl.OperandsOp(operands, [name.lstrip("*") for name in op.operands],
                            [irdl.Variadicity.variadic if name.startswith("*") else irdl.Variadicity.single
                             for name in op.operands])
            if results:      # results = -1: a first result, then any number more (one constraint each, see above)
                irdl.ResultsOp(results, ["result", "more"][:len(results)],
                               [irdl.Variadicity.single, irdl.Variadicity.variadic][:len(results)])
            if op.attrs:
                irdl.AttributesOp(attrs, list(op.attrs))
            if body is not None:
                irdl.RegionsOp([body], ["body"])
    return dialect


def _base(name: str) -> ir.Value:
    """An `irdl.base` constraint accepting any type or attribute whose base is `name`."""
    return irdl.BaseOp(base_name=name).output


def irdl_text() -> str:
    """The IRDL module defining the `wl` dialect, printed (for reading; `load_dialect` uses `build_irdl`)."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.create()
        build_irdl(module)
        return str(module)
