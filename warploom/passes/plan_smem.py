"""wl-plan-smem: byte offsets of every shared-memory region of a kernel, as one table.

The plan is data (`SmemPlan`): the pass writes each row's offset, size and
alignment onto the `wl.buffer` ops, the lowering reads them from there, and
`warploom explain` prints the same table. A tile region is aligned as its
`SmemTile` says: 128-byte-swizzled tiles to the swizzle repeat (1024 B: 8 rows of
128 B), so MMA descriptors can use base offset 0. The kernel rounds its dynamic
smem base up to the target's `smem_base_align` at run time, so it asks for the
plan's total plus that slack. The limit, the slack and the mbarrier size come
from the kernel's target.
"""
from __future__ import annotations

from dataclasses import dataclass

from mlir import ir

from warploom import targets
from warploom.dialect.kernel_ir import children, kernel_ops, make_op, read_kernel, set_attrs
from warploom.layout import SWIZZLE_128B, SWIZZLE_NONE, SmemTile, Swizzle

from .plan_barriers import barrier_rings, buffer_stage_bytes
from .registry import PassError, register


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
    base_align_slack: int              # the target's smem_base_align: the run-time round-up of the smem base

    @property
    def used(self) -> int:
        return max(r.offset + r.bytes for r in self.regions)

    @property
    def requested(self) -> int:        # dynamic smem the launch asks for
        return self.used + self.base_align_slack

    def table(self) -> str:
        lines = [f"smem (limit {self.limit} B)      offset     bytes   align  notes"]
        for r in self.regions:
            lines.append(f"  {r.name:<22} {r.offset:>9} {r.bytes:>9} {r.align:>7}  {r.notes}")
        lines.append(f"  {'total':<22} {'':>9} {self.requested:>9}          "
                     f"{100 * self.requested / self.limit:.0f}% of the limit (incl. {self.base_align_slack} B base alignment slack)")
        return "\n".join(lines)


def align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def swizzle_for(buf: dict) -> Swizzle:
    """The planner's choice: the 128B swizzle where a row of the contiguous dim fills whole 128-byte spans
    (the MMAs read such tiles without bank conflicts), none otherwise."""
    row_bytes = buf["shape"][-1] * targets.ELEMENT_BITS[buf["elem"]] // 8
    return SWIZZLE_128B if row_bytes % SWIZZLE_128B.span_bytes == 0 else SWIZZLE_NONE


def tile_align(buf: dict, swizzle: Swizzle) -> int:
    """The alignment one stage of a tile region needs, from its layout (`SmemTile.align`)."""
    try:
        return SmemTile(buf["dims"], buf["shape"], buf["elem"], swizzle).align
    except ValueError as e:
        raise PassError(f"smem region {buf['name']!r}: {e}") from None


def plan_smem(program, limit: int | None = None) -> SmemPlan:
    """Place every region of a specialized kernel; `limit` defaults to the target's smem limit."""
    target = targets.of_kernel(program.attrs)
    limit = target.smem_limit if limit is None else limit
    slack, mbarrier_bytes = target.smem_base_align, target.mbarrier_bytes
    regions, offset = [], 0
    for buf in program.buffers.values():
        if buf["name"] == "mbarriers":     # planned below, from the barrier rings
            continue
        swizzle = swizzle_for(buf)
        align = tile_align(buf, swizzle)
        size = buffer_stage_bytes(buf) * buf["stages"]
        offset = align_up(offset, align)
        shape = "x".join(map(str, buf["shape"]))
        regions.append(Region(buf["name"], offset, size, align, swizzle.bytes,
                              f"{buf['stages']} x {shape} {buf['elem']}"
                              + (f", {swizzle} swizzle" if swizzle.swizzled else "")))
        offset += size
    rings = barrier_rings(program)
    count = sum(r.count for r in rings)
    offset = align_up(offset, mbarrier_bytes)
    names = " ".join(f"{r.name}[{r.count}]" for r in rings)
    regions.append(Region("mbarriers", offset, count * mbarrier_bytes, mbarrier_bytes, 0,
                          f"{count} x {mbarrier_bytes}: {names}"))
    plan = SmemPlan(regions, limit, slack)
    if plan.requested > limit:
        stages = program.attrs["stages"]
        per_stage = sum(buffer_stage_bytes(b) for b in program.buffers.values() if b["name"] != "mbarriers")
        fit = (limit - slack - count * mbarrier_bytes) // per_stage
        listing = ", ".join(f"{r.name} {r.bytes} B" for r in regions)
        raise PassError(f"smem plan needs {plan.requested} B ({listing}, + {slack} B alignment slack) "
                        f"for {stages} stages; the limit is {limit} B: use {fit} stages (wl-pipeline{{stages={fit}}}) "
                        f"or a smaller block-n")
    return plan


@register("wl-plan-smem", "Offsets, sizes and alignment of every shared-memory region (the swizzle repeat for "
          "swizzled tiles); limit defaults to the target's", options={"limit": int},
          after=("wl-tile", "wl-pipeline", "wl-specialize"))
def run(module, limit: int | None = None):
    for kernel in kernel_ops(module):
        try:
            plan = plan_smem(read_kernel(kernel), limit)
        except PassError as e:
            raise PassError(str(e), kernel) from None
        buffers = {op.operation.attributes["name"].value: op for op in children(kernel, "buffer")}
        last = list(buffers.values())[-1]
        for r in plan.regions:
            if r.name not in buffers:       # the barrier storage gets its own buffer op, one i64 per mbarrier
                with ir.InsertionPoint.after(last), kernel.operation.location:
                    buffers[r.name] = make_op("buffer", {"name": r.name, "shape": [r.bytes // r.align],
                                                         "elem": "i64", "stages": 1})
            set_attrs(buffers[r.name], offset=r.offset, bytes=r.bytes, align=r.align, swizzle=r.swizzle)
        set_attrs(kernel, smem_bytes=plan.requested)
