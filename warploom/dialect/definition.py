"""The graph-level ops of the `wl` dialect, as one table, and the IRDL text made from it.

Everything that knows an op's operands or attributes (the IRDL definition, the
Python builder, the verifier, the reference interpreter) reads `GRAPH_OPS`.
Kernel-level and resource-level ops are added to this table by later passes'
issues; IRDL checks structure only, shape rules live in `shapes.py`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# IRDL attribute constraints by the kind of value an attribute holds.
# IRDL (MLIR 22) has no optional attributes: every listed attribute is required,
# so flags are i1 integers (`causal = true`) rather than unit attributes.
ATTR_BASES = {
    "bool": "#builtin.integer",
    "int": "#builtin.integer",
    "float": "#builtin.float",
    "str": "#builtin.string",
}


@dataclass(frozen=True)
class OpDef:
    name: str                      # op name without the `wl.` prefix
    operands: tuple[str, ...]      # operand names, all ranked tensors
    attrs: dict[str, str] = field(default_factory=dict)   # attribute name -> kind (ATTR_BASES key)
    summary: str = ""


GRAPH_OPS: dict[str, OpDef] = {d.name: d for d in [
    OpDef("matmul", ("lhs", "rhs"), {"transpose_a": "bool", "transpose_b": "bool"},
          "lhs @ rhs over the last two axes (optional transposes), identical leading batch dims"),
    OpDef("attention", ("q", "k", "v"), {"causal": "bool", "scale": "float", "layout": "str"},
          "softmax(scale * q k^T [causal]) v; layout bhsd or bshd; GQA when q has more heads than k/v"),
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
]}

ELEMENTWISE_BINARY = ("add", "mul", "max")
ELEMENTWISE_UNARY = ("scale", "exp", "exp2", "relu", "gelu", "silu")
REDUCTIONS = ("reduce_max", "reduce_sum")


def irdl_text() -> str:
    """The IRDL module defining the `wl` dialect."""
    lines = ["irdl.dialect @wl {"]
    for op in GRAPH_OPS.values():
        lines.append(f"  irdl.operation @{op.name} {{")
        # One constraint value per operand: a shared `irdl.base` would force equal types.
        for name in op.operands:
            lines.append(f'    %{name} = irdl.base "!builtin.tensor"')
        lines.append('    %result = irdl.base "!builtin.tensor"')
        for attr, kind in op.attrs.items():
            lines.append(f'    %attr_{attr} = irdl.base "{ATTR_BASES[kind]}"')
        operands = ", ".join(f"{n}: %{n}" for n in op.operands)
        lines.append(f"    irdl.operands({operands})")
        lines.append("    irdl.results(result: %result)")
        if op.attrs:
            attrs = ", ".join(f'"{a}" = %attr_{a}' for a in op.attrs)
            lines.append(f"    irdl.attributes {{{attrs}}}")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"
