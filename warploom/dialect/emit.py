"""Emit a `Graph` as an MLIR module: one func.func whose body is wl ops, in a new context."""
from __future__ import annotations

from mlir import ir
from mlir.dialects import func

from . import make_attr, make_context, mlir_tensor_type
from .definition import GRAPH_OPS


def emit_graph(graph) -> ir.Module:
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        inputs = [n for n in graph.nodes if n.op is None]
        arg_types = [mlir_tensor_type(n.type) for n in inputs]
        result_types = [mlir_tensor_type(graph.nodes[i].type) for i in graph.outputs]
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp(graph.name, (arg_types, result_types))
        fn.arg_attrs = ir.ArrayAttr.get([
            ir.DictAttr.get({"wl.name": ir.StringAttr.get(n.name),
                             "wl.dims": ir.ArrayAttr.get([ir.StringAttr.get(d) for d in n.dims]),
                             **({"wl.nondecreasing": ir.UnitAttr.get()} if n.attrs.get("nondecreasing") else {})})
            for n in inputs])
        block = fn.add_entry_block()
        values: dict[int, ir.Value] = {}
        args = iter(block.arguments)
        with ir.InsertionPoint(block):
            for index, node in enumerate(graph.nodes):
                if node.op is None:
                    values[index] = next(args)
                    continue
                opdef = GRAPH_OPS[node.op]
                attrs = {name: make_attr(kind, node.attrs[name]) for name, kind in opdef.attrs.items()}
                attrs.update({name: make_attr(kind, node.attrs[name]) for name, kind in opdef.optional.items()
                              if node.attrs.get(name) is not None})
                with ir.Location.file(node.where[0], node.where[1], 1):
                    op = ir.Operation.create(f"wl.{node.op}", results=[mlir_tensor_type(node.type)],
                                             operands=[values[i] for i in node.operands], attributes=attrs)
                values[index] = op.results[0]
            func.ReturnOp([values[i] for i in graph.outputs])
    return module
