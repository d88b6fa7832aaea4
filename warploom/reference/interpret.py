"""Evaluate a wl graph (an MLIR module with one func.func of wl ops) with the numpy reference ops.

Every value is float64; only `wl.cast` rounds (to its result's element type).
Used to check that passes such as wl-fuse keep a graph's meaning.
"""
from __future__ import annotations

import numpy as np

from warploom.dialect import GRAPH_OPS, op_attrs, op_kind, tensor_type

from . import ops as ref

# wl op name -> reference function, where the names differ.
RENAMED = {"max": "maximum", "min": "minimum", "abs": "absolute", "and": "logical_and", "or": "logical_or",
           "not": "logical_not"}


def evaluate_op(kind: str, args: list[np.ndarray], attrs: dict, result_elem: str) -> np.ndarray:
    if kind == "matmul":
        return ref.matmul(*args, transpose_a=attrs["transpose_a"], transpose_b=attrs["transpose_b"])
    if kind == "attention":
        from warploom.score import ScoreMods
        return ref.attention(*args, causal=attrs["causal"], scale=attrs["scale"], layout=attrs["layout"],
                             mods=ScoreMods.from_attrs(attrs), scalars=attrs.get("_scalars"))
    if kind == "cast":
        return args[0] if result_elem == "i32" else ref.round_to(args[0], result_elem)
    if kind == "constant":
        return np.float64(attrs["value"]) if result_elem != "i1" else np.bool_(attrs["value"])
    if kind == "scalar":
        values = attrs.get("_scalars") or {}
        if attrs["name"] not in values:
            raise ValueError(f"the graph reads the runtime scalar {attrs['name']!r}: pass scalars={{name: value}}")
        return np.float64(values[attrs["name"]])
    fn = ref.OPS[RENAMED.get(kind, kind)]
    return fn(*args, **{k: v for k, v in attrs.items()})


def evaluate(module, inputs: dict[str, np.ndarray] | list[np.ndarray], func_name: str | None = None,
             scalars: dict | None = None) -> list[np.ndarray]:
    """Run the func.func (the first, or `func_name`) on numpy inputs, by name or position; `scalars`: the values of
    the runtime scalars an attention's modifiers read, by name."""
    funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
    if func_name is not None:
        funcs = [f for f in funcs if f.attributes["sym_name"].value == func_name]
    if not funcs:
        raise ValueError(f"no func.func {func_name or ''} in the module")
    fn = funcs[0]
    block = fn.regions[0].blocks[0]
    args = list(block.arguments)
    if isinstance(inputs, dict):
        names = []
        arg_attrs = fn.attributes["arg_attrs"] if "arg_attrs" in fn.attributes else None
        for i in range(len(args)):
            entry = arg_attrs[i] if arg_attrs is not None else None
            names.append(entry["wl.name"].value if entry is not None and "wl.name" in entry else f"arg{i}")
        missing = [n for n in names if n not in inputs]
        if missing:
            raise ValueError(f"missing inputs {missing}; the graph takes {names}")
        inputs = [inputs[n] for n in names]
    if len(inputs) != len(args):
        raise ValueError(f"the graph takes {len(args)} inputs, got {len(inputs)}")
    env, named = {}, {}
    for i, (arg, value) in enumerate(zip(args, inputs)):
        expected = tensor_type(arg.type).shape
        value = np.asarray(value)
        if len(expected) != value.ndim or any(e is not None and e != s for e, s in zip(expected, value.shape)):
            raise ValueError(f"input of shape {value.shape} does not fit {arg.type}")
        env[arg] = value.astype(np.float64)
        entry = fn.attributes["arg_attrs"][i] if "arg_attrs" in fn.attributes else None
        if entry is not None and "wl.name" in entry:
            named[entry["wl.name"].value] = env[arg]
    for op in block.operations:
        name = op.operation.name
        if name == "func.return":
            return [env[v] for v in op.operation.operands]
        kind = op_kind(op)
        if kind not in GRAPH_OPS:
            raise ValueError(f"the reference interpreter cannot run {name}")
        args_ = [env[v] for v in op.operation.operands]
        result = op.operation.results[0]
        attrs = op_attrs(op)
        if kind == "attention":       # its captured tensors are the graph's inputs of their names
            attrs["_scalars"] = {**named, **(scalars or {})}
        if kind == "scalar":
            attrs["_scalars"] = scalars
        env[result] = evaluate_op(kind, args_, attrs, tensor_type(result.type).elem)
    raise ValueError("func.func has no return")
