"""The attributes and types that MLIR 22's Python bindings cannot build, made in one place.

Everything else in warploom.lowering is built with the `mlir.dialects` builders.
These five have no Python builder in MLIR 22.1 (no `llvm.ArrayType`, no
`LLVMFunctionType`, no `AttrBuilder` entry for `LinkageAttr`, `NVVM_MMAShapeAttr`
or `NVVMTargetAttr`), so each is parsed from its fixed assembly form by
`parse_no_builder`, the only function here that parses. When a later MLIR adds a
builder, replace the matching helper's body and nothing else changes.
"""
from __future__ import annotations

from mlir import ir


def parse_no_builder(text: str) -> ir.Type | ir.Attribute:
    """Parse one type ('!...') or attribute ('#...') that MLIR 22 has no Python builder for."""
    return ir.Type.parse(text) if text.startswith("!") else ir.Attribute.parse(text)


def llvm_array(count: int, elem: ir.Type) -> ir.Type:
    """!llvm.array<count x elem>."""
    return parse_no_builder(f"!llvm.array<{count} x {elem}>")


def llvm_function_type(args: list[ir.Type]) -> ir.Type:
    """!llvm.func<void (args...)>: a kernel returns nothing."""
    return parse_no_builder(f"!llvm.func<void ({', '.join(str(a) for a in args)})>")


def llvm_linkage(kind: str) -> ir.Attribute:
    """#llvm.linkage<kind>, e.g. 'external'."""
    return parse_no_builder(f"#llvm.linkage<{kind}>")


def nvvm_mma_shape(m: int, n: int, k: int) -> ir.Attribute:
    """#nvvm.shape<m = .., n = .., k = ..>, the shape of an MMA."""
    return parse_no_builder(f"#nvvm.shape<m = {m}, n = {n}, k = {k}>")


def nvvm_target(chip: str, features: str, opt_level: int) -> ir.Attribute:
    """#nvvm.target<...>: the chip, PTX features and LLVM -O level gpu-module-to-binary compiles with."""
    return parse_no_builder(f'#nvvm.target<chip = "{chip}", features = "{features}", O = {opt_level}>')
