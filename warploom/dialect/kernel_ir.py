"""Kernel-level wl IR as plain Python data, and the few MLIR helpers that make and find kernel ops.

`read_kernel` turns a `wl.kernel` op tree into plain dataclasses (`KernelProgram`,
`KOp`: op kinds and attribute dicts), which `warploom.kernel.read` types into the
kernel program; `make_op` and the insertion helpers are what
`warploom.kernel.write` and wl-tile use to print a program back as wl ops.
Nothing else walks MLIR objects of a kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mlir import ir

from . import op_attrs, op_kind, tensor_type, to_attr
from .shapes import TensorType


@dataclass
class KOp:
    kind: str                              # "wait", "async_load", "role", ...
    attrs: dict
    body: list["KOp"] = field(default_factory=list)   # ops of the region, for k_loop and role

    def walk(self):
        yield self
        for op in self.body:
            yield from op.walk()


@dataclass
class KernelProgram:
    attrs: dict                            # tile, stages, threads, smem_bytes, grid, ...
    inputs: list[TensorType]
    input_names: list[str]                 # "a", "b": how ops name the kernel's inputs
    result: TensorType
    body: list[KOp]

    def top(self, kind: str) -> list[KOp]:
        return [op for op in self.body if op.kind == kind]

    @property
    def buffers(self) -> dict[str, dict]:
        return {op.attrs["name"]: op.attrs for op in self.top("buffer")}

    @property
    def barriers(self) -> dict[str, dict]:
        return {op.attrs["name"]: op.attrs for op in self.top("mbarrier")}

    @property
    def roles(self) -> list[KOp]:
        return self.top("role")

    def input_type(self, name: str) -> TensorType:
        return self.inputs[self.input_names.index(name)]


def read_ops(block) -> list[KOp]:
    out = []
    for op in block.operations:
        kind = op_kind(op)
        if kind is None:          # the gpu.yield terminator
            continue
        body = read_ops(op.operation.regions[0].blocks[0]) if len(op.operation.regions) else []
        out.append(KOp(kind, op_attrs(op), body))
    return out


def read_kernel(op) -> KernelProgram:
    operation = op.operation
    attrs = op_attrs(op)
    return KernelProgram(
        attrs=attrs,
        inputs=[tensor_type(v.type) for v in operation.operands],
        input_names=list(attrs.get("input_names", [f"in{i}" for i in range(len(operation.operands))])),
        result=tensor_type(operation.results[0].type),
        body=read_ops(operation.regions[0].blocks[0]))


def make_op(kind: str, attrs: dict, *, operands=(), result_types=(), region: bool = False):
    """Create `wl.<kind>` at the current insertion point; a region gets one block ending in gpu.yield."""
    op = ir.Operation.create(f"wl.{kind}", results=list(result_types), operands=list(operands),
                             attributes={k: to_attr(v) for k, v in attrs.items()},
                             regions=1 if region else 0)
    if region:
        block = op.regions[0].blocks.append()
        with ir.InsertionPoint(block):
            ir.Operation.create("gpu.yield")
    return op


def body_block(op) -> ir.Block:
    return op.operation.regions[0].blocks[0]


def before_terminator(op) -> ir.InsertionPoint:
    """Insertion point at the end of `op`'s region, before its gpu.yield."""
    return ir.InsertionPoint.at_block_terminator(body_block(op))


def set_attrs(op, **attrs) -> None:
    for k, v in attrs.items():
        op.operation.attributes[k] = to_attr(v)


def kernel_ops(module, kind: str = "kernel") -> list:
    found = []

    def visit(op):
        if op_kind(op) == kind:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found
