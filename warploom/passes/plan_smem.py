"""wl-plan-smem: byte offsets of every shared-memory region of a kernel, as one table.

The plan is data (`SmemPlan`): the pass writes each row's offset, size and
alignment onto the `wl.buffer` ops, the lowering reads them from there, and
`warploom explain` prints the same table. 128-byte-swizzled tiles are aligned to
1024 bytes (the swizzle repeats every 8 rows of 128 B), so MMA descriptors can
use base offset 0. The kernel rounds its dynamic smem base up to 1024 B at run
time, so it asks for the plan's total plus that slack.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from warploom.dialect.kernel_ir import children, kernel_ops, make_op, read_kernel, set_attrs
from warploom.runtime.dtypes import BITS

from .plan_barriers import MBARRIER_BYTES, barrier_rings, buffer_stage_bytes
from .registry import PassError, register

SMEM_LIMIT = {"sm_90a": 232448, "sm_100a": 232448}   # bytes of dynamic smem one CTA may opt into
BASE_ALIGN_SLACK = 1024                                # runtime round-up of the dynamic smem base


@dataclass(frozen=True)
class Region:
    name: str
    offset: int
    bytes: int
    align: int
    swizzle: int
    notes: str


@dataclass(frozen=True)
class SmemPlan:
    regions: list[Region]
    limit: int

    @property
    def used(self) -> int:
        return max(r.offset + r.bytes for r in self.regions)

    @property
    def requested(self) -> int:        # dynamic smem the launch asks for
        return self.used + BASE_ALIGN_SLACK

    def table(self) -> str:
        lines = [f"smem (limit {self.limit} B)      offset     bytes   align  notes"]
        for r in self.regions:
            lines.append(f"  {r.name:<22} {r.offset:>9} {r.bytes:>9} {r.align:>7}  {r.notes}")
        lines.append(f"  {'total':<22} {'':>9} {self.requested:>9}          "
                     f"{100 * self.requested / self.limit:.0f}% of the limit (incl. {BASE_ALIGN_SLACK} B base alignment slack)")
        return "\n".join(lines)


def align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def swizzle_for(buf: dict) -> int:
    row_bytes = buf["shape"][-1] * BITS[buf["elem"]] // 8
    return 128 if row_bytes % 128 == 0 else 0


def plan_smem(program, limit: int) -> SmemPlan:
    regions, offset = [], 0
    for buf in program.buffers.values():
        if buf["name"] == "mbarriers":     # planned below, from the barrier rings
            continue
        swizzle = swizzle_for(buf)
        align = 1024 if swizzle == 128 else 128
        size = buffer_stage_bytes(buf) * buf["stages"]
        offset = align_up(offset, align)
        shape = "x".join(map(str, buf["shape"]))
        regions.append(Region(buf["name"], offset, size, align, swizzle,
                              f"{buf['stages']} x {shape} {buf['elem']}" + (", 128B swizzle" if swizzle else "")))
        offset += size
    rings = barrier_rings(program)
    count = sum(r.count for r in rings)
    offset = align_up(offset, MBARRIER_BYTES)
    names = " ".join(f"{r.name}[{r.count}]" for r in rings)
    regions.append(Region("mbarriers", offset, count * MBARRIER_BYTES, MBARRIER_BYTES, 0, f"{count} x 8: {names}"))
    plan = SmemPlan(regions, limit)
    if plan.requested > limit:
        stages = program.attrs["stages"]
        per_stage = sum(buffer_stage_bytes(b) for b in program.buffers.values() if b["name"] != "mbarriers")
        fit = (limit - BASE_ALIGN_SLACK - count * MBARRIER_BYTES) // per_stage
        listing = ", ".join(f"{r.name} {r.bytes} B" for r in regions)
        raise PassError(f"smem plan needs {plan.requested} B ({listing}, + {BASE_ALIGN_SLACK} B alignment slack) "
                        f"for {stages} stages; the limit is {limit} B: use {fit} stages (wl-pipeline{{stages={fit}}}) "
                        f"or a smaller block-n")
    return plan


@register("wl-plan-smem", "Offsets, sizes and alignment of every shared-memory region (1024 B for swizzled tiles)",
          options={"limit": int}, after=("wl-tile", "wl-pipeline", "wl-specialize"))
def run(module, limit: int = SMEM_LIMIT["sm_90a"]):
    for kernel in kernel_ops(module):
        try:
            plan = plan_smem(read_kernel(kernel), limit)
        except PassError as e:
            raise PassError(str(e), kernel) from None
        buffers = {op.operation.attributes["name"].value: op for op in children(kernel, "buffer")}
        last = list(buffers.values())[-1]
        for r in plan.regions:
            if r.name not in buffers:       # the barrier storage gets its own buffer op
                with ir.InsertionPoint.after(last), kernel.operation.location:
                    buffers[r.name] = make_op("buffer", {"name": r.name, "shape": [r.bytes // MBARRIER_BYTES],
                                                         "elem": "i64", "stages": 1})
            set_attrs(buffers[r.name], offset=r.offset, bytes=r.bytes, align=r.align, swizzle=r.swizzle)
        set_attrs(kernel, smem_bytes=plan.requested)
