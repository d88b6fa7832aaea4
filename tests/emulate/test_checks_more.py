"""More emulator checks, each on a hand-broken kernel (a lowered standard GEMM with ops moved, erased or changed;
tests/emulate/handbuilt.py): wgmma.fence after register accesses, fence.mbarrier_init + barrier before an
mbarrier is used by another warp or by TMA, setmaxnreg against the register file, and wgmma groups left in
flight at exit. Every error names the CTA, the warp, the op and the registers or barrier involved."""
import numpy as np
import pytest
from mlir import ir
from mlir.dialects import llvm

from .handbuilt import lowered, ops, register_a
from warploom.emulate import (AsyncLeakError, EmulatedKernel, MbarrierError, RegisterBudgetError, WgmmaFenceError,
                              emulate_launch)
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.kernels import GemmSpec

SPEC = GemmSpec("bf16", "kn", 128, 4)
M, N, K = 130, 136, 328          # 6 k-tiles: the 4-stage ring is reused


def run(kernel, seed=0, order="random", launch_regs=None):
    rng = np.random.default_rng(0)
    elem = NUMPY_ELEMS[SPEC.elem]
    a = rng.integers(-1, 2, (M, K)).astype(elem)
    b = rng.integers(-1, 2, (K, N)).astype(elem)
    c = np.full((M, N), np.nan, elem)
    emulate_launch(EmulatedKernel.of(kernel), {"a": a, "b": b, "c": c}, {"M": M, "N": N, "K": K}, seed=seed,
                   delay=4, order=order, launch_regs=launch_regs)
    np.testing.assert_array_equal(c.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64))
    return c


def after(op) -> ir.InsertionPoint:
    """The insertion point right after `op` (which is not last in its block)."""
    for region in op.parent.regions:
        for block in region.blocks:
            body = [o.operation for o in block.operations]
            if op.operation in body:
                return ir.InsertionPoint(body[body.index(op.operation) + 1])
    raise AssertionError(f"{op.name} not found in its parent")


# ---- (a) wgmma.fence: PTX ISA 9.7.15.6.1 --------------------------------------------------------------

def test_no_wgmma_fence_at_all():
    # before its first wgmma a warp must fence; here the zeroed accumulator is the last register access
    k = lowered(SPEC)
    for fence in ops(k, "nvvm.wgmma.fence.aligned"):
        fence.erase()
    with pytest.raises(WgmmaFenceError, match=r"CTA \(\d, \d, 0\), warp ([4-9]|1[01]), nvvm.wgmma.mma_async "
                                              r"loc\(\"acc\d+\"\): warp \1 issues a wgmma after llvm.mlir.zero "
                                              r"loc\(\"acc\d+\"\) wrote accumulator registers, with no wgmma.fence"):
        run(k)


def _read_accumulator_in_loop(keep_fence_in_loop: bool):
    """Wait for every group inside the K loop, then read accumulator register 0 there; the loop's
    wgmma.fence moves out of the loop unless `keep_fence_in_loop`."""
    k = lowered(SPEC)
    fence = ops(k, "nvvm.wgmma.fence.aligned")[0]
    loop = fence.parent
    assert loop.name == "scf.for"
    if not keep_fence_in_loop:
        fence.move_before(loop)
    wait = [w for w in ops(k, "nvvm.wgmma.wait.group.sync.aligned") if w.attributes["group"].value == 1][0]
    with k.gpu_module.context, ir.Location.name("peek"):
        wait.attributes["group"] = ir.IntegerAttr.get(wait.attributes["group"].type, 0)
        last = ops(k, "nvvm.wgmma.mma_async")[-1]
        llvm.ExtractValueOp(ir.F32Type.get(), last.results[0], [0], ip=after(wait))
    return k


def test_accumulator_read_between_wgmmas_needs_a_fence():
    with pytest.raises(WgmmaFenceError, match=r"warp (\d+), nvvm.wgmma.mma_async loc\(\"acc\d+\"\): warp \1 issues "
                                              r"a wgmma after llvm.extractvalue loc\(\"peek\"\) read accumulator "
                                              r"registers \(struct position 0\), with no wgmma.fence in between"):
        run(_read_accumulator_in_loop(keep_fence_in_loop=False))


def test_the_same_read_with_the_fence_in_the_loop_is_fine():
    run(_read_accumulator_in_loop(keep_fence_in_loop=True))


def test_a_registers_written_after_the_fence():
    # register-A wgmmas whose A registers are computed after the loop's wgmma.fence
    k = register_a(lowered(SPEC), SPEC, where="after_fence")
    with pytest.raises(WgmmaFenceError, match=r"warp (\d+), llvm.inline_asm .*: warp \1 issues a wgmma after "
                                              r".*llvm.bitcast .* wrote A-fragment registers, with no wgmma.fence"):
        run(k)


# ---- (b) fence.mbarrier_init: PTX ISA 9.7.13.15 "mbarrier.init", "membar/fence" -------------------------

def _without_fence_mbarrier_init():
    k = lowered(SPEC)
    (fence,) = ops(k, "nvvm.fence.mbarrier.init")
    fence.erase()
    return k


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mbarrier_used_by_another_warp_without_fence_mbarrier_init(seed):
    with pytest.raises(MbarrierError, match=r"CTA \(\d, \d, 0\), warp (\d+), nvvm\.mbarrier\.try_wait\.parity .*"
                                            r"mbarrier at smem 0x[0-9a-f]+ \(byte \d+ of dynamic smem\) was "
                                            r"initialised by warp 0 and is used by warp \1 before the init is visible "
                                            r"to it: warp 0 never ran fence.mbarrier_init"):
        run(_without_fence_mbarrier_init(), seed=seed)


TMA_KERNEL = """
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %bytes = arith.constant 1024 : i32
    %base = llvm.mlir.addressof @t_smem : !llvm.ptr<3>
    %bar = llvm.getelementptr %base[4096] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %first = arith.cmpi eq, %tid, %c0 : i32
    scf.if %first {
      nvvm.mbarrier.init %bar, %c1 : !llvm.ptr<3>, i32
      FENCE
      %t = nvvm.mbarrier.arrive.expect_tx %bar, %bytes : !llvm.ptr<3>, i32 -> i64
      %dst = llvm.addrspacecast %base : !llvm.ptr<3> to !llvm.ptr<7>
      nvvm.cp.async.bulk.tensor.shared.cluster.global %dst, %tmap, %bar, box[%c0, %c0] : !llvm.ptr<7>, !llvm.ptr
      nvvm.mbarrier.try_wait.parity %bar, %c0, %c1 : !llvm.ptr<3>, i32, i32
    }"""


@pytest.mark.parametrize("fence", [False, True])
def test_tma_signals_an_mbarrier_without_fence_mbarrier_init(fence):
    """One thread initialises an mbarrier and has a TMA load signal it: the async proxy sees the init only after a
    fence.mbarrier_init (no barrier is needed: no other warp uses it)."""
    from warploom.runtime.artifact import ParamSpec, TensorMapSpec
    from .handbuilt import tiny_kernel
    spec = TensorMapSpec("a", "a", "bf16", (16, 32), 0, ("K", "M"))
    k = tiny_kernel(TMA_KERNEL.replace("FENCE", "nvvm.fence.mbarrier.init" if fence else ""), "%tmap: !llvm.ptr",
                    [ParamSpec("a", "tensormap")], {"a": spec})
    a = np.arange(32 * 16).reshape(32, 16).astype(NUMPY_ELEMS["bf16"])
    if fence:
        emulate_launch(k, {"a": a}, {}, smem_base=0x400)
        return
    with pytest.raises(MbarrierError, match=r"CTA \(0, 0, 0\), warp 0, nvvm\.cp\.async\.bulk\.tensor\.shared\."
                                            r"cluster\.global .*TMA load of 'a' signals mbarrier at smem 0x1400 \(byte "
                                            r"4096 of dynamic smem\), initialised by warp 0 with no "
                                            r"fence.mbarrier_init since: the async proxy's complete_tx may not see"):
        emulate_launch(k, {"a": a}, {}, smem_base=0x400)


def test_mbarrier_used_without_a_barrier_after_the_fence():
    # fence.mbarrier_init is there, the CTA barrier after it is not: the consumers' waits may not see the init
    k = lowered(SPEC)
    ops(k, "nvvm.barrier")[0].erase()
    with pytest.raises(MbarrierError, match=r"CTA \(0, 0, 0\), warp ([4-9]|1[01]), nvvm.mbarrier.try_wait.parity .*"
                                            r"mbarrier at smem 0x[0-9a-f]+ \(byte \d+ of dynamic smem\) was "
                                            r"initialised by warp 0 and is used by warp \1 before the init is visible "
                                            r"to it: warp 0's fence.mbarrier_init ran, but no CTA barrier"):
        run(k, order="round_robin")


# ---- (c) setmaxnreg: PTX ISA "setmaxnreg" -----------------------------------------------------------------

def _setmaxnreg(k, which: int, count: int | None = None, action: str | None = None):
    op = ops(k, "nvvm.setmaxregister")[which]
    with k.gpu_module.context:
        if count is not None:
            op.attributes["regCount"] = ir.IntegerAttr.get(op.attributes["regCount"].type, count)
        if action is not None:
            op.attributes["action"] = ir.Attribute.parse(f"#nvvm<action {action}>")
    return k


def test_setmaxnreg_beyond_the_register_file():
    # consumers ask for 240: 40 x 128 + 240 x 256 = 66560 registers > the 168 x 384 = 64512 the CTA holds
    k = _setmaxnreg(lowered(SPEC), 1, count=240)
    with pytest.raises(RegisterBudgetError, match=r"CTA \(\d, \d, 0\), warp ([4-9]|1[01]), nvvm.setmaxregister +"
                                                  r"increase 240: setmaxnreg.inc to 240 registers per thread for warp "
                                                  r"\1 \(warpgroup [12]\) is never granted: it needs \d+ registers in "
                                                  r"all, but the CTA holds 64512 \(168 per thread x 384 threads at "
                                                  r"launch, of the 65536-register file\)"):
        run(k)


def test_setmaxnreg_budgets_that_fit_are_granted_in_any_order():
    for seed in range(3):
        run(lowered(SPEC), seed=seed)
    run(lowered(SPEC), order="round_robin")


def test_setmaxnreg_inc_to_fewer_registers():
    k = _setmaxnreg(lowered(SPEC), 0, action="increase")          # the producer's "dec 40" as an inc
    with pytest.raises(RegisterBudgetError, match=r"warp ([0-3]), nvvm.setmaxregister +increase 40: setmaxnreg.inc "
                                                  r"to 40 registers per thread, but warp \1 holds 168: .inc must not "
                                                  r"lower the count"):
        run(k)


def test_setmaxnreg_dec_to_more_registers():
    k = _setmaxnreg(lowered(SPEC), 1, action="decrease")          # the consumers' "inc 232" as a dec
    with pytest.raises(RegisterBudgetError, match=r"warp ([4-9]|1[01]), nvvm.setmaxregister +decrease 232: "
                                                  r"setmaxnreg.dec to 232 registers per thread, but warp \1 holds 168"):
        run(k)


def test_launch_registers_beyond_the_file():
    with pytest.raises(RegisterBudgetError, match=r"256 registers per thread x 384 threads exceed the 65536-register "
                                                  r"file of sm_90a"):
        run(lowered(SPEC), launch_regs=256)


# ---- (d) wgmma groups in flight at exit ----------------------------------------------------------------------

def test_warp_exits_with_a_wgmma_group_not_waited_for():
    # no final wait_group 0, and the epilogue stores the zero accumulator instead of the loop's (so nothing
    # reads the in-flight registers): the last group is still in flight when the consumers exit
    k = lowered(SPEC)
    final = [w for w in ops(k, "nvvm.wgmma.wait.group.sync.aligned") if w.attributes["group"].value == 0][0]
    final.erase()
    loop = [op for op in ops(k, "scf.for") if len(op.results)][0]
    loop.results[0].replace_all_uses_with(loop.operands[3])
    with pytest.raises(AsyncLeakError, match=r"CTA \(\d, \d, 0\), warp ([4-9]|1[01]), nvvm.wgmma.mma_async "
                                             r"loc\(\"acc\d+\"\): warp \1 exits with wgmmas #\d+..\d+ uncommitted and "
                                             r"groups \[5\] not waited for \(wgmma #20 of warpgroup [12] still owns "
                                             r"this warp's accumulator registers\)"):
        run(k)
