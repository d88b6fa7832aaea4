"""The `wl` MLIR dialect: load it into a context, and read its ops' types and attributes.

    from warploom.dialect import make_context
    with make_context():
        module = ir.Module.parse(text)       # wl ops parse and print in generic form

The dialect is defined with IRDL (see `definition.py`), so it needs no C++ build.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import irdl

from .definition import GRAPH_OPS, OpDef, irdl_text
from .shapes import ShapeError, TensorType

# The IRDL modules must outlive the contexts that loaded them.
_loaded: dict[int, ir.Module] = {}


def load_dialect(ctx: ir.Context) -> None:
    """Make the `wl` dialect known to `ctx` (once per context)."""
    key = id(ctx)
    if key in _loaded:
        return
    with ctx, ir.Location.unknown():
        defs = ir.Module.parse(irdl_text())
        irdl.load_dialects(defs)
    _loaded[key] = defs


def make_context() -> ir.Context:
    """A context with every upstream dialect registered, `wl` loaded, multithreading off
    (Python passes run under the GIL; a deterministic order also keeps diagnostics stable)."""
    ctx = ir.Context()
    ctx.enable_multithreading(False)
    load_dialect(ctx)
    return ctx


def op_kind(op) -> str | None:
    """'matmul' for a wl.matmul operation, None for ops of other dialects."""
    name = op.operation.name
    return name[3:] if name.startswith("wl.") else None


def tensor_type(t: ir.Type) -> TensorType:
    """Plain description of a ranked tensor type (dynamic dims become None)."""
    rt = ir.RankedTensorType(t)
    shape = tuple(None if rt.is_dynamic_dim(i) else rt.get_dim_size(i) for i in range(rt.rank))
    return TensorType(shape, str(rt.element_type))


def mlir_tensor_type(t: TensorType) -> ir.Type:
    return ir.Type.parse(str(t))


def attr_value(attr: ir.Attribute):
    """Python value of a bool/int/float/string attribute."""
    attr = attr.maybe_downcast()
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr):
        return bool(attr.value) if ir.IntegerType(attr.type).width == 1 else attr.value
    if isinstance(attr, (ir.FloatAttr, ir.StringAttr)):
        return attr.value
    return attr


def op_attrs(op) -> dict:
    attrs = op.operation.attributes
    return {name: attr_value(attrs[name]) for name in attrs}


def make_attr(kind: str, value) -> ir.Attribute:
    if kind == "bool":
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(1), int(bool(value)))
    if kind == "int":
        return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(value))
    if kind == "float":
        return ir.FloatAttr.get(ir.F32Type.get(), float(value))
    if kind == "str":
        return ir.StringAttr.get(str(value))
    raise ValueError(f"unknown attribute kind {kind!r}")


__all__ = ["GRAPH_OPS", "OpDef", "ShapeError", "TensorType", "attr_value", "irdl_text", "load_dialect",
           "make_attr", "make_context", "mlir_tensor_type", "op_attrs", "op_kind", "tensor_type"]
