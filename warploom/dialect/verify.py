"""Shape verification of graph-level `wl` ops: IRDL checked the structure, this checks the rules.

Errors are emitted as MLIR diagnostics at the op's location, so `warploom-opt`
prints them as `file:line:col: error: ...` and `--verify-diagnostics` can match them.
"""
from __future__ import annotations

from mlir import ir

from . import GRAPH_OPS, op_attrs, op_kind, tensor_type
from .definition import operand_names
from .shapes import ShapeError, infer


def verify_op(op) -> str | None:
    """The error message for one wl graph op, or None when it is well formed."""
    kind = op_kind(op)
    opdef = GRAPH_OPS.get(kind)
    if opdef is None:
        return None
    operation = op.operation
    wrong = attr_kind_error(opdef, operation.attributes)
    if wrong:
        return f"'wl.{kind}' op {wrong}"
    try:
        operands = {}
        for name, value in zip(operand_names(opdef, len(operation.operands)), operation.operands):
            if not isinstance(value.type, ir.RankedTensorType):
                raise ShapeError(f"operand {name} must be a ranked tensor, got {value.type}")
            operands[name] = tensor_type(value.type)
        result_type = operation.results[0].type
        if not isinstance(result_type, ir.RankedTensorType):
            raise ShapeError(f"result must be a ranked tensor, got {result_type}")
        declared = tensor_type(result_type)
        inferred = infer(kind, operands, op_attrs(op), result_elem=declared.elem)
    except ShapeError as e:
        return f"'wl.{kind}' op {e}"
    if declared.rank != inferred.rank or any(
            d is not None and i is not None and d != i for d, i in zip(declared.shape, inferred.shape)):
        return f"'wl.{kind}' op result type {declared} does not match the inferred {inferred}"
    if kind not in ("cast", "matmul", "scalar", "constant") and declared.elem != inferred.elem:
        return f"'wl.{kind}' op result element type {declared.elem} differs from the operands' {inferred.elem}"
    return None


def attr_kind_error(opdef, attributes) -> str | None:
    """What is wrong with a flag attribute of the wrong kind, or None. IRDL checks only that a flag is an
    integer (its base), so `transpose_a = 7 : i64` would otherwise parse and read as true."""
    for name, kind in opdef.attrs.items():
        if kind != "bool" or name not in attributes:
            continue
        attr = attributes[name].maybe_downcast()
        if not (isinstance(attr, ir.BoolAttr) or
                (isinstance(attr, ir.IntegerAttr) and ir.IntegerType(attr.type).width == 1)):
            return f"attribute {name} must be a bool (true or false), got {attr}"
    return None


def verify_module(root) -> int:
    """Emit one error diagnostic per malformed wl op under `root`; return how many."""
    errors = []

    def visit(op):
        msg = verify_op(op)
        if msg:
            errors.append((op, msg))
        return ir.WalkResult.ADVANCE

    root.operation.walk(visit)
    for op, msg in errors:
        op.operation.location.emit_error(msg)
    return len(errors)
