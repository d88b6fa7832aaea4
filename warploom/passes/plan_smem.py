"""wl-plan-smem: byte offsets of every shared-memory region of a kernel, as one table.

The plan is data (`SmemPlan`): the pass writes each row's offset, size and
alignment onto the `wl.buffer` ops, the lowering reads them from there, and
`warploom explain` prints the same table. A region that declares aliases (attention's
O staging tile may alias Q) lands on the first aliased region's bytes when it fits there:
always in the grid schedule (one tile per CTA: Q is dead after the key loop); in a persistent
kernel only when its own bytes do not fit, since the next tile's Q would otherwise load while
O is stored (wl-plan-barriers then frees Q only after O's store). A tile region is aligned as its
`SmemTile` says: 128-byte-swizzled tiles to the swizzle repeat (1024 B: 8 rows of
128 B), so MMA descriptors can use base offset 0. The kernel rounds its dynamic
smem base up to the target's `smem_base_align` at run time, so it asks for the
plan's total plus that slack. The limit, the slack and the mbarrier size come
from the kernel's target.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from warploom import targets
from warploom.dialect.kernel_ir import kernel_ops
from warploom.kernel import Program, Region
from warploom.kernel.program import BARRIER_STORAGE
from warploom.kernel.contract import ATTENTION_WALKS
from warploom.layout import SWIZZLE_128B, SWIZZLE_NONE, SmemTile, Swizzle

from .plan_barriers import barrier_rings
from .registry import PassError, edit_program, register


@dataclass(frozen=True)
class PlanRow:
    """One row of the smem plan: a region (or the barrier storage) and where it lands (on the bytes of `shares`,
    a region it aliases, or on its own)."""
    name: str
    offset: int
    bytes: int
    align: int
    swizzle: int
    notes: str
    shares: str | None = None


@dataclass(frozen=True)
class SmemPlan:
    regions: list[PlanRow]
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


def swizzle_for(region: Region) -> Swizzle:
    """The planner's choice: the 128B swizzle where a row of the contiguous dim fills whole 128-byte spans
    (the MMAs read such tiles without bank conflicts), none otherwise."""
    row_bytes = region.shape[-1] * targets.ELEMENT_BITS[region.elem] // 8
    return SWIZZLE_128B if row_bytes % SWIZZLE_128B.span_bytes == 0 else SWIZZLE_NONE


def tile_align(region: Region, swizzle: Swizzle) -> int:
    """The alignment one stage of a tile region needs, from its layout (`SmemTile.align`)."""
    try:
        return SmemTile(region.dims, region.shape, region.elem, swizzle).align
    except ValueError as e:
        raise PassError(f"smem region {region.name!r}: {e}") from None


def plan_smem(program: Program, limit: int | None = None) -> SmemPlan:
    """Place every region of a specialized kernel, then the barrier storage; `limit` defaults to the target's. A
    persistent kernel gives an aliasing region its own bytes when they fit, else shares them (the barrier planner
    then frees the shared region only after the aliasing one is done with it)."""
    target = targets.get(program.target)
    limit = target.smem_limit if limit is None else limit
    schedule = program.attrs.get("schedule")
    if schedule == "persistent" or (program.kind == "attention" and schedule in ATTENTION_WALKS):
        plan = _plan(program, limit, share=False)
        if plan.requested <= limit:
            return plan
    return _plan(program, limit, share=True, check=True)


def plan_smem_fits(program: Program) -> bool:
    """True when every region of `program` (and its barriers) fits the target's smem on its own bytes, no region
    sharing another's (wl-pipeline asks before it gives a persistent attention's Q a second stage)."""
    limit = targets.get(program.target).smem_limit
    return _plan(program, limit, share=False).requested <= limit


def _plan(program: Program, limit: int, share: bool, check: bool = False) -> SmemPlan:
    target = targets.get(program.target)
    slack, mbarrier_bytes = target.smem_base_align, target.mbarrier_bytes
    rows, offset = [], 0
    data = [r for r in program.regions.values() if r.name != BARRIER_STORAGE and r.space == "smem"]
    for region in data:
        if not region.dims:                 # a word, not a tile (the TMEM address slot): its own size aligns it
            swizzle, align = SWIZZLE_NONE, max(1, targets.ELEMENT_BITS[region.elem] // 8)
        else:
            swizzle = swizzle_for(region)
            align = tile_align(region, swizzle)
        size = region.stage_bytes * region.stages
        shape = "x".join(map(str, region.shape))
        notes = f"{region.stages} x {shape} {region.elem}" + (f", {swizzle} swizzle" if swizzle.swizzled else "")
        host = next((r for r in rows if r.name in region.aliases), None)
        if host is not None and share and size <= host.bytes and host.offset % align == 0:
            rows.append(PlanRow(region.name, host.offset, size, align, swizzle.bytes,
                                f"{notes}, on {host.name}'s bytes", shares=host.name))
            continue
        offset = align_up(offset, align)
        rows.append(PlanRow(region.name, offset, size, align, swizzle.bytes, notes))
        offset += size
    rings = barrier_rings(program)
    count = sum(r.count for r in rings)
    offset = align_up(offset, mbarrier_bytes)
    names = " ".join(f"{r.name}[{r.count}]" for r in rings)
    rows.append(PlanRow(BARRIER_STORAGE, offset, count * mbarrier_bytes, mbarrier_bytes, 0,
                        f"{count} x {mbarrier_bytes}: {names}"))
    plan = SmemPlan(rows, limit, slack)
    if check and plan.requested > limit:
        stages = program.attrs["stages"]
        # what one more pipeline stage costs: a stage of each region its rings cycle through; the rest (Q, O, C's
        # staging chunks) keeps its bytes whatever the stage count (a region on another's bytes costs none)
        piped = {name for ring in program.rings.values() if ring.stages > 1 for name in ring.regions}
        per_stage = sum(r.stage_bytes for r in data if r.name in piped)
        shared = {r.name for r in rows if r.shares}
        once = sum(r.stage_bytes * r.stages for r in data if r.name not in piped and r.name not in shared)
        fit = (limit - slack - count * mbarrier_bytes - once) // per_stage if per_stage else 0
        listing = ", ".join(f"{r.name} {r.bytes} B" + (f" (on {r.shares}'s bytes)" if r.shares else "") for r in rows)
        two = once + 2 * per_stage + count * mbarrier_bytes + slack          # the smallest pipeline of this tile
        fix = (f"use {fit} stages (wl-pipeline{{stages={fit}}}) or a smaller block-n" if fit >= 2 else
               f"no pipeline of 2 or more stages fits: 2 stages of this tile need {two} B; use a smaller block-n "
               f"(a stage's bytes shrink with it)" + (f" or a limit of at least {two} B" if limit < target.smem_limit
                                                      and two <= target.smem_limit else ""))
        raise PassError(f"smem plan needs {plan.requested} B ({listing}, + {slack} B alignment slack) "
                        f"for {stages} stages; the limit is {limit} B: {fix}")
    return plan


def apply_plan(program: Program, plan: SmemPlan) -> None:
    """Write the plan into the program: each region's offset, bytes, alignment and swizzle; the barrier storage as
    a region of one i64 per mbarrier; the launch's dynamic smem."""
    for row in plan.regions:
        region = program.regions.get(row.name) or Region(row.name, "smem", "i64", (row.bytes // row.align,))
        program.regions[row.name] = replace(region, offset=row.offset, size=row.bytes, align=row.align,
                                            swizzle=row.swizzle,
                                            aliases=(row.shares,) if row.shares else ())
    program.smem_bytes = plan.requested


@register("wl-plan-smem", "Offsets, sizes and alignment of every shared-memory region (the swizzle repeat for "
          "swizzled tiles); limit defaults to the target's", options={"limit": int},
          after=("wl-tile", "wl-pipeline", "wl-specialize"))
def run(module, limit: int | None = None):
    for kernel in kernel_ops(module):
        edit_program(kernel, lambda p: apply_plan(p, plan_smem(p, limit)))
