"""wl-plan-tmem's column planner (warploom/passes/plan_tmem.py) on hand-made sm_100a programs: columns per tile
from the element width, stages side by side, an alias on its host's columns, the power-of-two allocation, and
refusals that name every region, the limit and the change that fits."""
import pytest

from warploom.kernel import Program, Region
from warploom.passes.plan_tmem import apply_plan, plan_tmem
from warploom.passes.registry import PassError


def program(*regions, target="sm_100a"):
    return Program(kind="gemm", target=target, inputs={}, outputs={}, regions={r.name: r for r in regions})


def acc(name, n, stages=1, elem="f32", aliases=()):
    return Region(name, "tmem", elem, (128, n), ("M", "N"), stages, aliases=aliases)


def test_double_buffered_accumulators_fill_the_columns():
    p = program(acc("acc", 256, stages=2))
    plan = plan_tmem(p)
    assert [(r.name, r.column, r.columns, r.lanes) for r in plan.rows] == [("acc", 0, 512, 128)]
    assert plan.allocated == 512
    apply_plan(p, plan)
    assert (p.regions["acc"].offset, p.regions["acc"].size, p.attrs["tmem_columns"]) == (0, 512, 512)


def test_allocation_is_the_next_power_of_two():
    plan = plan_tmem(program(acc("s", 128), acc("o", 64)))
    assert [(r.name, r.column, r.columns) for r in plan.rows] == [("s", 0, 128), ("o", 128, 64)]
    assert (plan.used, plan.allocated) == (192, 256)
    assert plan_tmem(program(acc("tiny", 8))).allocated == 32          # tcgen05.alloc's minimum


def test_sixteen_bit_p_aliases_s_and_packs_two_elements_a_column():
    """FA4: P (bf16, 128 x 128) is written over S's columns: 64 columns on S's first ones, nothing added."""
    p = program(acc("s", 128), acc("p", 128, elem="bf16", aliases=("s",)), acc("o", 128))
    plan = plan_tmem(p)
    assert [(r.name, r.column, r.columns, r.shares) for r in plan.rows] == \
        [("s", 0, 128, None), ("p", 0, 64, "s"), ("o", 128, 128, None)]
    assert "on s's columns" in plan.table()
    apply_plan(p, plan)
    assert p.regions["p"].aliases == ("s",) and p.regions["p"].offset == 0


def test_overflow_names_every_region_the_limit_and_one_stage():
    with pytest.raises(PassError, match=r"needs 768 columns \(acc 768\); a CTA has 512: use one stage of acc"):
        plan_tmem(program(acc("acc", 256, stages=3)))


def test_overflow_without_stages_asks_for_a_narrower_tile():
    with pytest.raises(PassError, match=r"needs 640 columns \(s 256, o 384\); a CTA has 512: use a narrower tile"):
        plan_tmem(program(acc("s", 256), acc("o", 384)))


def test_a_target_without_tmem_and_too_many_rows_are_refused():
    with pytest.raises(PassError, match=r"sm_90a has no Tensor Memory, but the kernel declares TMEM regions acc"):
        plan_tmem(program(acc("acc", 64), target="sm_90a"))
    with pytest.raises(PassError, match=r"'big' has 256 rows; TMEM has 128 lanes"):
        plan_tmem(program(Region("big", "tmem", "f32", (256, 64), ("M", "N"))))
    assert plan_tmem(program(Region("x", "smem", "bf16", (128, 64)))).rows == []     # smem only: nothing to plan
