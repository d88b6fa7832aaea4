"""TMA stores in the emulator (PTX ISA 9.7.9.25 cp.async.bulk.tensor.global.shared::cta, bulk async-groups 9.7.9.27-28,
proxy fences): a box written to smem by the generic proxy, fenced, barriered and stored through a tensor map lands
in global memory with the elements outside the tensor dropped; each step left out is caught and named."""
import numpy as np
import pytest

from warploom.emulate import SmemRaceError
from warploom.emulate.launch import emulate_launch
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.runtime.artifact import ParamSpec, TensorMapSpec

from .handbuilt import tiny_kernel

# 64 threads each write one i32 (two bf16 elements: tid in the low half, 0x3f80 = 1.0 in the high one) at byte
# 4 tid: a 256-byte box of 8 rows x 16 bf16; thread 0 stores it through tensor map `o` at (0, 0)
KERNEL = """
    %c0 = arith.constant 0 : i32
    %c4 = arith.constant 4 : i32
    %hi = arith.constant 1065353216 : i32
    %base = llvm.mlir.addressof @t_smem : !llvm.ptr<3>
    %tid = nvvm.read.ptx.sreg.tid.x : i32
    %off = arith.muli %tid, %c4 : i32
    %p = llvm.getelementptr %base[%off] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
    %v = arith.ori %tid, %hi : i32
    llvm.store %v, %p {alignment = 4 : i64} : i32, !llvm.ptr<3>
    FENCE
    BARRIER
    %first = arith.cmpi eq, %tid, %c0 : i32
    scf.if %first {
      nvvm.cp.async.bulk.tensor.global.shared.cta %tmap, %base, box[%c0, %c0] : !llvm.ptr, !llvm.ptr<3>
      nvvm.cp.async.bulk.commit.group
      WAIT
      AFTER
    }"""
FENCE = "nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}"
BARRIER = "nvvm.barrier"
WAIT = "nvvm.cp.async.bulk.wait_group 0 {read}"
ROWS = 6                      # the tensor has 6 rows: the box's last 2 are outside it and dropped


def kernel(fence=FENCE, barrier=BARRIER, wait=WAIT, after=""):
    body = KERNEL.replace("FENCE", fence).replace("BARRIER", barrier).replace("WAIT", wait).replace("AFTER", after)
    spec = TensorMapSpec("o", "o", "bf16", (16, 8), 0, ("N", "M"))
    return tiny_kernel(body, "%tmap: !llvm.ptr", [ParamSpec("o", "tensormap")], {"o": spec}, threads=64)


def out_array():
    return np.full((ROWS, 16), np.nan, NUMPY_ELEMS["bf16"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tma_store_lands_and_drops_what_is_outside_the_tensor(seed):
    o = out_array()
    report = emulate_launch(kernel(), {"o": o}, {}, seed=seed, delay=8, smem_base=0x400)
    tid = np.arange(64)
    want = np.stack([tid, np.full(64, 0x3F80)], 1).reshape(8, 16)[:ROWS].astype(np.uint16)
    np.testing.assert_array_equal(o.view(np.uint16), want)
    assert report.stats["tma_stores"] == 1


def test_store_without_the_proxy_fence_is_caught():
    with pytest.raises(SmemRaceError, match=r"TMA store of 'o' box \[0, 0\] from smem 0x400 reads smem 0x400 .*"
                                            r"a generic st.shared by warp 0 wrote with no fence.proxy.async by that "
                                            r"warp since"):
        emulate_launch(kernel(fence=""), {"o": out_array()}, {}, smem_base=0x400)


def test_store_before_every_writer_is_done_is_caught():
    """Without the barrier, thread 0 may store while warp 1 has not written its half: the store reads unwritten
    smem (this interleaving), or warp 1 writes smem the store still reads."""
    with pytest.raises(SmemRaceError, match=r"nothing has written|while a TMA store still reads it"):
        for seed in range(8):
            emulate_launch(kernel(barrier=""), {"o": out_array()}, {}, seed=seed, smem_base=0x400)


def test_overwriting_the_source_before_wait_group_read_is_caught():
    after = ("%z = arith.constant 0 : i32\n      llvm.store %z, %base {alignment = 4 : i64} : i32, !llvm.ptr<3>")
    """(The store's read lands at a random later step: some interleavings catch it, every one with the wait passes.)"""
    with pytest.raises(SmemRaceError, match=r"st.shared::cta of 4 B writes smem 0x400 while a TMA store still reads "
                                            r"it: the thread that issued the store must cp.async.bulk.wait_group.read"):
        for seed in range(8):
            emulate_launch(kernel(wait="", after=after), {"o": out_array()}, {}, seed=seed, delay=16, smem_base=0x400)
    for seed in range(8):
        emulate_launch(kernel(after=after), {"o": out_array()}, {}, seed=seed, delay=16, smem_base=0x400)


def test_exit_before_the_store_read_its_smem_is_caught():
    with pytest.raises(SmemRaceError, match=r"exits while TMA store of 'o' box \[0, 0\] from smem 0x400 has not "
                                            r"read its smem yet: cp.async.bulk.wait_group.read 0 before exit"):
        for seed in range(8):
            emulate_launch(kernel(wait=""), {"o": out_array()}, {}, seed=seed, delay=16, smem_base=0x400)
