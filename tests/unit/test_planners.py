"""The smem and barrier planners as tables: offsets, alignment, arrival counts, and the overflow error."""
import pytest

import warploom as wl
from warploom.dialect.kernel_ir import kernel_ops
from warploom.kernel import Region, read_program
from warploom.passes import PassError, run_pipeline
from warploom.passes.plan_barriers import barrier_rings
from warploom.passes.plan_smem import plan_smem, swizzle_for, tile_align
from warploom.layout import SmemTile
from warploom.targets import SM90


def specialized(block_n=256, stages=4, elem="bf16", transpose_b=False):
    g = wl.Graph("gemm")
    a = g.input("a", ("M", "K"), elem)
    b = g.input("b", ("N", "K") if transpose_b else ("K", "N"), elem)
    g.output(g.matmul(a, b, transpose_b=transpose_b))
    module, _ = run_pipeline(g, [f"wl-tile{{block-n={block_n}}}", f"wl-pipeline{{stages={stages}}}", "wl-specialize"])
    with module.context:
        return read_program(kernel_ops(module)[0])


@pytest.mark.parametrize("block_n, stages", [(256, 4), (128, 4), (128, 6), (256, 3), (64, 8)])
def test_smem_plan_is_aligned_and_disjoint(block_n, stages):
    plan = plan_smem(specialized(block_n, stages))
    regions = {r.name: r for r in plan.regions}
    assert regions["a"].bytes == stages * 128 * 64 * 2
    assert regions["b"].bytes == stages * block_n * 64 * 2
    for r in plan.regions:
        assert r.offset % r.align == 0
    spans = sorted((r.offset, r.offset + r.bytes) for r in plan.regions)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))
    assert regions["mbarriers"].bytes == 2 * stages * 8
    assert plan.requested == plan.used + SM90.smem_base_align <= SM90.smem_limit
    assert "a" in plan.table() and "% of the limit" in plan.table()


def test_smem_overflow_names_regions_bytes_limit_and_way_out():
    with pytest.raises(PassError) as e:
        plan_smem(specialized(256, 5))
    msg = str(e.value)
    assert "smem plan needs 279632 B" in msg
    assert "a 81920 B, b 163840 B, c 32768 B, mbarriers 80 B" in msg
    assert "the limit is 232448 B" in msg
    assert "use 4 stages" in msg


def test_smem_limit_option_overrides_the_targets_and_tiles_align_as_their_layout_says():
    program = specialized(128, 4, transpose_b=True)
    plan = plan_smem(program, limit=170000)
    assert plan.limit == 170000 and "170000" in plan.table()
    for r in plan.regions[:-1]:
        region = program.regions[r.name]
        assert r.align == SmemTile(region.dims, region.shape, region.elem, r.swizzle).align == 1024
    with pytest.raises(PassError, match="the limit is 140000 B: use 3 stages"):    # C's staging does not shrink
        plan_smem(program, limit=140000)


def test_a_tile_its_layout_refuses_is_a_pass_error_naming_the_region():
    region = Region("b", "smem", "bf16", (4, 256), ("K", "N"), 2)
    with pytest.raises(PassError, match="smem region 'b': .*4 rows is not a positive multiple of 8"):
        tile_align(region, swizzle_for(region))


def test_register_budget_errors_name_the_target_limits():
    g = wl.Graph("gemm")
    g.output(g.matmul(g.input("a", ("M", "K"), "bf16"), g.input("b", ("K", "N"), "bf16")))
    with pytest.raises(Exception, match="consumer-regs: setmaxnreg 236: takes 24..256 in steps of 8"):
        run_pipeline(g, ["wl-tile", "wl-pipeline", "wl-specialize{consumer-regs=236}"])


def test_barrier_rings_follow_the_config():
    for block_n, stages in ((256, 4), (128, 3)):
        full, empty = barrier_rings(specialized(block_n, stages))
        assert (full.name, full.count, full.arrivals) == ("full", stages, 1)
        assert full.tx_bytes == (128 * 64 + 64 * block_n) * 2
        assert (empty.name, empty.count, empty.arrivals, empty.tx_bytes) == ("empty", stages, 2, 0)


def test_planned_ir_carries_the_table():
    g = wl.Graph("gemm")
    g.output(g.matmul(g.input("a", ("M", "K"), "f16"), g.input("b", ("K", "N"), "f16")))
    module, records = run_pipeline(g, "sm_90a")
    with module.context:
        program = read_program(kernel_ops(module, "kernel")[0]) if kernel_ops(module, "kernel") else None
    text = next(r.ir for r in records if r.name == "wl-plan-barriers")
    assert '"wl.mbarrier"() {arrivals = 1 : i64, count = 4 : i64, name = "full"' in text
    assert "smem_bytes = 230464" in text
    assert program is None or program.smem_bytes == 230464
