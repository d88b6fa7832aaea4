"""wl-plan-tmem: the Tensor Memory columns of every TMEM region of a kernel (sm_100a), as one table.

TMEM is the target's `tmem` geometry (128 lanes x 512 columns of 32-bit cells per CTA on sm_100a;
`warploom.targets`). A TMEM region holds `stages` tiles of `shape` = (lanes, elements): one tile takes
elements x elem_bits / 32 columns (an fp32 accumulator of N columns is N columns; 16-bit P packs two
elements a column) over its rows as lanes. Regions are placed one after another from column 0, each on
the columns of the region it declares an alias of when it fits there (FA4's P written over S), and the
kernel allocates the next power of two of the columns used (`warploom.layout.tmem.alloc_columns`:
tcgen05.alloc takes 32..512). A plan over the limit is refused with every region's columns, the limit
and the change that fits (fewer accumulator stages, or a narrower tile).

This is the column planner of issue 9's wl-plan-tmem. Not yet here: the sm_100a wl-tile / wl-specialize
that declare TMEM accumulators (so the pass has no place in a pipeline yet), the smem slot for the address
tcgen05.alloc writes, and the alloc / relinquish / dealloc ops of the lowering.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from warploom import targets
from warploom.dialect.kernel_ir import kernel_ops
from warploom.kernel import Program
from warploom.layout.tmem import alloc_columns

from .registry import PassError, edit_program, register


@dataclass(frozen=True)
class TmemRow:
    """One TMEM region and the columns it lands on (on those of `shares`, a region it aliases, or its own)."""
    name: str
    column: int
    columns: int
    lanes: int
    elem: str
    stages: int
    shares: str | None = None


@dataclass(frozen=True)
class TmemPlan:
    rows: list[TmemRow]
    limit: int                  # the target's columns

    @property
    def used(self) -> int:
        return max((r.column + r.columns for r in self.rows), default=0)

    @property
    def allocated(self) -> int:
        """The tcgen05.alloc column count: the next power of two of what the plan uses, at least the minimum."""
        return alloc_columns(self.used) if self.rows else 0

    def table(self) -> str:
        lines = [f"tmem (limit {self.limit} columns)  column  columns  lanes  elem   notes"]
        for r in self.rows:
            notes = f"{r.stages} x {r.columns // r.stages}" + (f", on {r.shares}'s columns" if r.shares else "")
            lines.append(f"  {r.name:<22} {r.column:>8} {r.columns:>8} {r.lanes:>6}  {r.elem:<5}  {notes}")
        lines.append(f"  {'allocated':<22} {'':>8} {self.allocated:>8}          (tcgen05.alloc: a power of two)")
        return "\n".join(lines)


def tile_columns(shape: tuple[int, ...], elem: str, cell_bits: int) -> int:
    """Columns one (lanes, elements) tile takes: elements x elem_bits / cell_bits."""
    bits = shape[-1] * targets.ELEMENT_BITS[elem]
    return -(-bits // cell_bits)


def plan_tmem(program: Program) -> TmemPlan:
    """Place every TMEM region of the program; PassError when the target has no TMEM, a tile has more rows than
    lanes, or the plan needs more columns than the target has."""
    target = targets.get(program.target)
    regions = [r for r in program.regions.values() if r.space == "tmem"]
    if regions and target.tmem is None:
        raise PassError(f"wl-plan-tmem: {program.target} has no Tensor Memory, but the kernel declares TMEM regions "
                        f"{', '.join(r.name for r in regions)}: target sm_100a, or keep them in registers")
    geometry = target.tmem
    if geometry is None:        # no regions either: the pass was put in a pipeline for a target without TMEM
        raise PassError(f"wl-plan-tmem: {program.target} has no Tensor Memory, so there is nothing to plan: "
                        f"wl-plan-tmem belongs to the sm_100a pipeline; leave it out for {program.target}")
    rows, column = [], 0
    for region in regions:
        lanes = region.shape[0]
        if lanes > geometry.lanes:
            raise PassError(f"wl-plan-tmem: TMEM region {region.name!r} has {lanes} rows; TMEM has "
                            f"{geometry.lanes} lanes: split the tile")
        per_tile = tile_columns(region.shape, region.elem, geometry.cell_bits)
        columns = per_tile * region.stages
        host = next((r for r in rows if r.name in region.aliases), None)
        if host is not None and columns <= host.columns:
            rows.append(TmemRow(region.name, host.column, columns, lanes, region.elem, region.stages, host.name))
            continue
        rows.append(TmemRow(region.name, column, columns, lanes, region.elem, region.stages))
        column += columns
    plan = TmemPlan(rows, geometry.columns)
    if plan.used > geometry.alloc_max_columns:
        listing = ", ".join(f"{r.name} {r.columns}" + (f" (on {r.shares})" if r.shares else "") for r in rows)
        staged = [r for r in rows if r.stages > 1 and not r.shares]
        if staged and plan.used - sum(r.columns // r.stages * (r.stages - 1) for r in staged) <= geometry.columns:
            fix = ("use one stage of " + ", ".join(r.name for r in staged)
                   + " (no overlap of one tile's epilogue with the next tile's MMAs)")
        else:
            fix = "use a narrower tile (fewer columns per accumulator)"
        raise PassError(f"wl-plan-tmem: the TMEM plan needs {plan.used} columns ({listing}); a CTA has "
                        f"{geometry.alloc_max_columns}: {fix}")
    return plan


def apply_plan(program: Program, plan: TmemPlan) -> None:
    """Each TMEM region's first column and column count; the kernel's tcgen05.alloc size."""
    for row in plan.rows:
        region = program.regions[row.name]
        program.regions[row.name] = replace(region, offset=row.column, size=row.columns,
                                            aliases=(row.shares,) if row.shares else ())
    if plan.rows:
        program.attrs["tmem_columns"] = plan.allocated


@register("wl-plan-tmem", "Tensor Memory columns of every TMEM region (aliases share columns), the tcgen05.alloc "
          "size; refuses a plan over the target's columns", after=("wl-tile", "wl-pipeline", "wl-specialize"))
def run(module):
    for kernel in kernel_ops(module):
        edit_program(kernel, lambda p: apply_plan(p, plan_tmem(p)))
