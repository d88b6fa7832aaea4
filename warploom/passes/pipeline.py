"""wl-pipeline: give each tile load a shared-memory ring of `stages` buffers, loaded asynchronously.

Each `wl.load_tile` becomes a `wl.async_load` into the current stage of a
`wl.buffer` declared at the top of the kernel; the stage of K tile i is
i % stages, so up to `stages` tiles are in flight ahead of the MMAs. The loads
of one loop advance together: they form one `wl.ring` (its regions share the
stage index and, once wl-plan-barriers runs, one full and one empty barrier).
"""
from __future__ import annotations

from mlir import ir

from warploom.dialect import op_attrs, tensor_type
from warploom.dialect.kernel_ir import body_block, kernel_ops, make_op, set_attrs

from .registry import PassError, register


@register("wl-pipeline", "Multi-stage buffering: each tile load becomes an async copy into a ring of buffers",
          options={"stages": int}, after=("wl-tile",))
def run(module, stages: int = 4):
    if not 2 <= stages <= 8:
        raise PassError(f"wl-pipeline: stages = {stages}; use 2..8 (one stage cannot overlap loads with MMAs)")
    for kernel in kernel_ops(module):
        attrs = op_attrs(kernel)
        names = attrs["input_names"]
        elems = {n: tensor_type(v.type).elem for n, v in zip(names, kernel.operation.operands)}
        if "stages" in attrs:
            raise PassError("wl-pipeline already ran on this kernel (it has stages); run it once", kernel)
        loads = kernel_ops(kernel, "load_tile")
        if not loads:
            raise PassError("wl-pipeline found no wl.load_tile in the kernel: run wl-tile first", kernel)
        regions = [op_attrs(load)["operand"] for load in loads]
        first = list(body_block(kernel).operations)[0]
        for load in loads:
            la = op_attrs(load)
            elem = elems[la["operand"]]
            with ir.InsertionPoint(first), load.operation.location:
                make_op("buffer", {"name": la["operand"], "shape": la["tile"], "elem": elem, "stages": stages,
                                   "dims": la["dims"]})
            with ir.InsertionPoint(load), load.operation.location:
                make_op("async_load", {"operand": la["operand"], "buffer": la["operand"], "tile": la["tile"]})
            load.operation.erase()
        with ir.InsertionPoint(first), kernel.operation.location:
            make_op("ring", {"name": "".join(regions), "stages": stages, "regions": regions})
        set_attrs(kernel, stages=stages)
