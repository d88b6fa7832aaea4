"""The emit layer (warploom.lowering.emit): each helper builds verified IR; the ones with PTX consequences go
through PTX, and the inline-PTX wgmma (A in registers) through ptxas for sm_90a (CPU only)."""
import re

import pytest
from mlir import ir

from warploom.dialect import make_context
from warploom.lowering.assemble import ToolMissing, assemble, disassemble, sass_counts
from warploom.lowering.emit import Builder, ptr_type, sync, text, tma, wgmma
from warploom.lowering.emit.nobuilder import llvm_array, nvvm_target
from warploom.lowering.ptx import gpu_module_to_ptx


def kernel(args=("ptr3",), names=("s",), threads=128, tmaps=0):
    """A context, module and Builder for `llvm.func @k` in `gpu.module @k_mod` (sm_90a); the caller builds
    the body inside `with b.at_body():` while the returned context is entered."""
    ctx = make_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        types = {"ptr": ptr_type(), "ptr1": ptr_type(1), "ptr3": ptr_type(3), "i32": ir.IntegerType.get_signless(32),
                 "i64": ir.IntegerType.get_signless(64)}
        tmap = {"llvm.byval": ir.TypeAttr.get(llvm_array(128, ir.IntegerType.get_signless(8))),
                "nvvm.grid_constant": ir.UnitAttr.get(),
                "llvm.align": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)}
        b = Builder.kernel_module(module.body, "k_mod", "k", nvvm_target("sm_90a", "+ptx80", 3),
                                  [types[a] for a in args], [tmap] * tmaps + [{}] * (len(args) - tmaps), list(names),
                                  {"nvvm.kernel": ir.UnitAttr.get(),
                                   "nvvm.maxntid": ir.DenseI32ArrayAttr.get([threads, 1, 1])})
    return ctx, module, b


def finish(ctx, module):
    with ctx:
        module.operation.verify()
    return text(module.body.operations[0])


def test_constants_are_uniqued_and_hoisted_in_first_use_order():
    ctx, module, b = kernel(args=("i32",), names=("n",))
    with ctx, ir.Location.unknown(), b.at_body():
        with b.if_(b.cmp("eq", b.args[0], b.const(0))):
            b.add(b.args[0], b.const(7))
        b.mul(b.args[0], b.const(7))
        b.add(b.ext64(b.args[0]), b.const(-8, b.i64))
    out = finish(ctx, module)
    entry = [op.operation.name for op in b.entry.operations]
    assert entry[:3] == ["arith.constant"] * 3 and "arith.constant" not in entry[3:]
    consts = re.findall(r"%(c\w+) = arith.constant", out)
    assert consts == ["ci32_0", "ci32_7", "ci64_m8"]
    assert "arith.addi %n, %ci32_7 : i32" in out and "arith.muli %n, %ci32_7 : i32" in out


def test_structured_control_flow_and_names():
    ctx, module, b = kernel(args=("i32",), names=("n",))
    with ctx, ir.Location.unknown(), b.at_body():
        then, orelse = b.if_else(b.cmp("ult", b.args[0], b.const(4)))
        with then:
            b.add(b.args[0], b.const(1))
        with orelse:
            b.sub(b.args[0], b.const(1))
        iv = b.fresh("kt")
        with b.for_(b.const(0), b.args[0], b.const(1), iter_args=[b.const(0), b.const(5)], iv=iv,
                    args=["x", "y"], results="sum") as loop:
            loop.yield_(b.add(loop.args[0], loop.iv), loop.args[1])
        total = b.add(loop.results[0], loop.results[1])
    out = finish(ctx, module)
    assert re.search(r"scf.if %v\d+ \{.*\} else \{", out, re.S)
    assert f"%sum:2 = scf.for %{iv} = %ci32_0 to %n step %ci32_1 iter_args(%x = %ci32_0, %y = %ci32_5)" in out
    assert "arith.addi %sum#0, %sum#1" in out and total.type == b.i32


def test_roles_set_their_register_budget():
    ctx, module, b = kernel()
    with ctx, ir.Location.unknown(), b.at_body():
        sync.role_registers(40, 168)
        sync.role_registers(232, 168)
        sync.role_registers(168, 168)      # keeps the launch share: nothing
    out = re.sub(" +", " ", finish(ctx, module))
    assert out.count("nvvm.setmaxregister") == 2
    assert "nvvm.setmaxregister decrease 40" in out and "nvvm.setmaxregister increase 232" in out


def test_mbarrier_ring():
    ctx, module, b = kernel(args=("ptr3", "i32"), names=("smem", "it"))
    with ctx, ir.Location.unknown(), b.at_body():
        smem, it = b.args
        ring = sync.MbarrierRing(b, smem, offset=1024, count=3, stride=8, ticks=0x989680)
        ring.init(2)
        stage = b.remu(it, b.const(3))
        bar = ring.at(stage)
        bar.wait(b.const(1))
        ring.arrive_expect_tx(stage, 4096)
        ring.arrive(1)
        ring.wait(0, b.const(0))
    out = finish(ctx, module)
    assert re.findall(r"arith.constant (\d+) : i32", out)[:5] == ["1024", "2", "1032", "1040", "3"]
    assert out.count("nvvm.mbarrier.init") == 3 and "%ci32_2 : !llvm.ptr<3>, i32" in out
    assert re.search(r"nvvm.mbarrier.try_wait.parity %v\d+, %ci32_1, %ci32_10000000 : !llvm.ptr<3>, i32, i32", out)
    assert re.search(r"nvvm.mbarrier.arrive.expect_tx %v\d+, %ci32_4096 : !llvm.ptr<3>, i32 -> i64", out)
    assert "nvvm.mbarrier.arrive %" in out
    ptx = gpu_module_to_ptx(module)
    assert ptx.count("mbarrier.init.shared") == 3 and "mbarrier.try_wait.parity" in ptx
    assert "mbarrier.arrive.expect_tx" in ptx


def test_barriers_fences_elect_through_ptx():
    ctx, module, b = kernel()
    with ctx, ir.Location.unknown(), b.at_body():
        sync.cta_barrier()
        sync.named_barrier_sync(b, 1, 256)
        sync.named_barrier_arrive(b, 2, 128)
        sync.fence_mbarrier_init()
        sync.fence_proxy_async_smem()
        with b.if_(sync.elect_sync(b)):
            sync.named_barrier_arrive(b, 3, 64)
    finish(ctx, module)
    ptx = gpu_module_to_ptx(module)
    assert re.search(r"bar.sync\s+1, 256;", ptx) and re.search(r"bar.arrive\s+2, 128;", ptx)
    assert "fence.mbarrier_init.release.cluster" in ptx and "fence.proxy.async.shared::cta" in ptx
    assert "elect.sync" in ptx


def test_tma_load_store_groups_prefetch():
    ctx, module, b = kernel(args=("ptr", "ptr3", "i32"), names=("tmap", "smem", "x"), tmaps=1)
    with ctx, ir.Location.unknown(), b.at_body():
        tmap, smem, x = b.args
        bar = sync.MbarrierRing(b, smem, offset=8192, count=1, stride=8, ticks=0x989680).at(0)
        tma.prefetch_tensormap(tmap)
        tma.tma_load(b, smem, tmap, bar.addr, [x, b.const(0)])
        sync.fence_proxy_async_smem()
        tma.tma_store(b, tmap, smem, [x, b.const(64)])
        tma.bulk_commit_group()
        tma.bulk_wait_group(0)
    out = finish(ctx, module)
    assert "llvm.addrspacecast %smem : !llvm.ptr<3> to !llvm.ptr<7>" in out
    ptx = gpu_module_to_ptx(module)
    assert "prefetch.tensormap" in ptx
    assert "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes" in ptx
    assert "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group" in ptx
    assert "cp.async.bulk.commit_group" in ptx and re.search(r"cp.async.bulk.wait_group.read\s+0;", ptx)


def _wgmma_kernel(register_a: bool):
    """One m64n16k16 bf16 wgmma into a zero accumulator, stored to global memory (so nothing is dead)."""
    ctx, module, b = kernel(args=("ptr1", "i64", "i64", "i32"), names=("out", "da", "db", "a"))
    with ctx, ir.Location.unknown(), b.at_body():
        out, da, db, a = b.args
        acc = b.zero(wgmma.acc_type(b, 16), "acc")
        wgmma.fence()
        if register_a:
            acc = wgmma.mma_async_reg_a(b, acc, [a, b.add(a, b.const(1)), b.add(a, b.const(2)),
                                                 b.add(a, b.const(3))], db, 16, "bf16")
        else:
            acc = wgmma.mma_async(b, acc, da, db, (64, 16, 16), "bf16", "col")
        wgmma.commit()
        wgmma.wait(0)
        for i in range(8):
            b.store(b.extractvalue(acc, i, b.f32), b.gep(out, i, b.f32), alignment=4)
    return ctx, module


def test_wgmma_on_smem_descriptors():
    ctx, module = _wgmma_kernel(register_a=False)
    out = finish(ctx, module)
    assert "<m = 64, n = 16, k = 16>, D[<f32>, <one>, <wrapped>], A[<bf16>, <one>, <row>], B[<bf16>, <one>, <col>]" \
        in out
    ptx = gpu_module_to_ptx(module)
    assert "wgmma.fence.sync.aligned" in ptx and "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16" in ptx
    assert "wgmma.commit_group.sync.aligned" in ptx and re.search(r"wgmma.wait_group.sync.aligned\s+0;", ptx)


def test_wgmma_with_a_in_registers_assembles_for_sm90a():
    ctx, module = _wgmma_kernel(register_a=True)
    out = finish(ctx, module)
    assert "llvm.inline_asm has_side_effects" in out
    ptx = gpu_module_to_ptx(module)
    assert re.search(r"wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 \{%r\d+(, %r\d+){7}\}, "
                     r"\{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;", ptx)
    try:
        asm = assemble(ptx, "sm_90a", "ptxas")
        sass = disassemble(asm.cubin)
    except ToolMissing as e:          # only a missing tool skips; a rejection fails
        pytest.skip(str(e))
    assert sass_counts(sass, ["HGMMA"])["HGMMA"] == 1


def test_wgmma_with_a_in_registers_checks_its_operands():
    ctx, module, b = kernel(args=("i64", "i32"), names=("db", "a"))
    with ctx, ir.Location.unknown(), b.at_body():
        acc = b.zero(wgmma.acc_type(b, 16))
        with pytest.raises(ValueError, match="4 b32 registers per thread, got 2"):
            wgmma.mma_async_reg_a(b, acc, [b.args[1]] * 2, b.args[0], 16, "bf16")
        with pytest.raises(ValueError, match="n = 12"):
            wgmma.mma_async_reg_a(b, acc, [b.args[1]] * 4, b.args[0], 12, "bf16")
