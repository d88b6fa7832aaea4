"""The `wl` MLIR dialect: load it into a context, and read its ops' types and attributes.

    from warploom.dialect import make_context
    with make_context():
        module = ir.Module.parse(text)       # wl ops parse and print in generic form

The dialect is defined with IRDL (see `definition.py`), so it needs no C++ build.
"""
from __future__ import annotations

from mlir import ir
from mlir.dialects import irdl

from .definition import ALL_OPS, GRAPH_OPS, KERNEL_OPS, OpDef, build_irdl, irdl_text
from .shapes import ShapeError, TensorType

# The IRDL modules must outlive the contexts that loaded them.
_loaded: dict[int, ir.Module] = {}


def load_dialect(ctx: ir.Context) -> None:
    """Make the `wl` dialect known to `ctx` (once per context)."""
    key = id(ctx)
    if key in _loaded:
        return
    with ctx, ir.Location.unknown():
        defs = ir.Module.create()
        build_irdl(defs)
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


# Element type names (as `TensorType.elem` spells them) and the builders of their MLIR types.
_ELEMENT_BUILDERS = {
    "bf16": ir.BF16Type.get,
    "f16": ir.F16Type.get,
    "f32": ir.F32Type.get,
    "f64": ir.F64Type.get,
    "f8E4M3FN": ir.Float8E4M3FNType.get,
    "f8E5M2": ir.Float8E5M2Type.get,
    "f4E2M1FN": ir.Float4E2M1FNType.get,
}


def mlir_element_type(elem: str) -> ir.Type:
    """The MLIR type for an element type name: `bf16`, `f8E4M3FN`, `i32`, ... (needs a context)."""
    if elem in _ELEMENT_BUILDERS:
        return _ELEMENT_BUILDERS[elem]()
    if elem.startswith("i") and elem[1:].isdigit():
        return ir.IntegerType.get_signless(int(elem[1:]))
    raise ValueError(f"no MLIR element type for {elem!r}; known: {', '.join(_ELEMENT_BUILDERS)}, iN")


def mlir_tensor_type(t: TensorType) -> ir.RankedTensorType:
    """The ranked tensor type for `t` (None dims become dynamic `?`), built with `ir.RankedTensorType.get`."""
    shape = [ir.ShapedType.get_dynamic_size() if d is None else d for d in t.shape]
    return ir.RankedTensorType.get(shape, mlir_element_type(t.elem))


def source_of(loc: ir.Location) -> tuple[str | None, int | None, int | None]:
    """(file name, line, column) of a location, looking inside fused, name and callsite locations (the first with a
    file); Nones where it has none."""
    if loc.is_a_file():
        return loc.filename, loc.start_line, loc.start_col
    inner = (list(loc.locations) if loc.is_a_fused() else [loc.child_loc] if loc.is_a_name() else
             [loc.callee] if loc.is_a_callsite() else [])
    for x in inner:
        found = source_of(x)
        if found[1] is not None:
            return found
    return None, None, None


def file_position(loc: ir.Location) -> tuple[int | None, int | None]:
    """Line and column of a location (source_of's)."""
    return source_of(loc)[1:]


def attr_value(attr: ir.Attribute):
    """Python value of a bool/int/float/string attribute."""
    attr = attr.maybe_downcast()
    if isinstance(attr, ir.BoolAttr):
        return attr.value
    if isinstance(attr, ir.IntegerAttr):
        return bool(attr.value) if ir.IntegerType(attr.type).width == 1 else attr.value
    if isinstance(attr, (ir.FloatAttr, ir.StringAttr)):
        return attr.value
    if isinstance(attr, ir.ArrayAttr):
        return [attr_value(a) for a in attr]
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
    if kind == "double":
        return ir.FloatAttr.get(ir.F64Type.get(), float(value))
    if kind == "str":
        return ir.StringAttr.get(str(value))
    if kind == "array":
        return ir.ArrayAttr.get([to_attr(v) for v in value])
    raise ValueError(f"unknown attribute kind {kind!r}")


def to_attr(value) -> ir.Attribute:
    """An attribute for a plain Python value: bool -> i1, int -> i64, float -> f32, str, list -> array."""
    if isinstance(value, ir.Attribute):
        return value
    if isinstance(value, bool):
        return make_attr("bool", value)
    if isinstance(value, int):
        return make_attr("int", value)
    if isinstance(value, float):
        return make_attr("float", value)
    if isinstance(value, str):
        return make_attr("str", value)
    if isinstance(value, (list, tuple)):
        return make_attr("array", value)
    raise TypeError(f"no MLIR attribute for {value!r}")


__all__ = ["ALL_OPS", "GRAPH_OPS", "KERNEL_OPS", "OpDef", "ShapeError", "TensorType", "attr_value", "build_irdl",
           "file_position", "irdl_text", "source_of",
           "load_dialect", "make_attr", "make_context", "to_attr", "mlir_element_type", "mlir_tensor_type", "op_attrs", "op_kind", "tensor_type"]
