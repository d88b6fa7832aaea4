"""The standard sm_100a GEMMs from wl.matmul to SASS (CPU only): PTX, ptxas and nvJitLink cubins, nvdisasm.
(C leaves through smem: 16-byte STS of each chunk, one UTMASTG per 64 columns, no STG.)

No Blackwell GPU exists here, so this is one of the three ways these kernels are checked (with the emulator,
tests/emulate/test_gemm_sm100.py): the PTX holds the tcgen05 sequence with the instruction descriptor the layout
module encodes for the kernel's dtypes, shape and majors; ptxas and nvJitLink accept it without spills; the SASS
holds the tensor-core MMA (UTCHMMA: the tcgen05 f16-kind MMA), the TMEM loads (LDTM), the commits (UTCBAR), the
TMA loads (UTMALDG) and no local-memory traffic.
"""
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from warploom.build import build_gemm_module
from warploom.kernels import STANDARD_KERNELS
from warploom.layout import Sm100InstrDescriptor
from warploom.layout.tmem import alloc_columns
from warploom.lowering.assemble import assemble, disassemble, sass_counts
from warploom.lowering.ptx import gpu_module_to_ptx

STANDARD = STANDARD_KERNELS["sm_100a"]
IDS = [s.kernel_name for s in STANDARD]
SASS = ["UTCHMMA", "LDTM", "UTCBAR", "UTMALDG", "UTMASTG", "UTCATOMSWS", "STS", "STG", "LDL", "STL"]


def _assemble(ptx):
    a, j = assemble(ptx, "sm_100a", "ptxas"), assemble(ptx, "sm_100a", "nvjitlink")
    return a, j, disassemble(a.cubin), disassemble(j.cubin)


@pytest.fixture(scope="module")
def kernels():
    out = {spec: {"ptx": gpu_module_to_ptx(build_gemm_module(spec))} for spec in STANDARD}
    with ThreadPoolExecutor(max_workers=4) as pool:
        for k, res in zip(out, pool.map(_assemble, [v["ptx"] for v in out.values()])):
            out[k].update(zip(("ptxas", "nvjitlink", "sass", "sass_nvjitlink"), res))
    return out


def ptx_ops(ptx: str) -> list[str]:
    return re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.:]*)", ptx, re.M)


@pytest.mark.parametrize("spec", STANDARD, ids=IDS)
def test_ptx_holds_the_tcgen05_sequence(kernels, spec):
    ptx = kernels[spec]["ptx"]
    assert ".target sm_100a" in ptx and f".entry {spec.kernel_name}(" in ptx and ".maxntid 192, 1, 1" in ptx
    ops = ptx_ops(ptx)
    count = lambda prefix: sum(op.startswith(prefix) for op in ops)  # noqa: E731
    g = spec.block_m // 128                 # cta_group: 2 for the CTA pair's 256-row tile
    # one warp allocates the double-buffered accumulator's columns, gives up the permit, frees them at exit (in a
    # pair: warp 1 of each CTA, once, after the cluster barrier that follows both CTAs' epilogues)
    assert ops.count(f"tcgen05.alloc.cta_group::{g}.sync.aligned.shared::cta.b32") == 1
    assert ops.count(f"tcgen05.relinquish_alloc_permit.cta_group::{g}.sync.aligned") == 1
    assert ops.count(f"tcgen05.dealloc.cta_group::{g}.sync.aligned.b32") == 1
    if g == 2:
        dealloc = ops.index(f"tcgen05.dealloc.cta_group::{g}.sync.aligned.b32")
        waits = [i for i, op in enumerate(ops) if op.startswith("barrier.cluster.wait")]
        assert waits and waits[-1] < dealloc, "the pair frees its TMEM before the kernel's last cluster barrier"
    columns = alloc_columns(2 * spec.block_n)        # two f32 accumulator stages of block_n columns
    assert re.search(rf"tcgen05\.alloc[^;]*,\s*{columns};", ptx) or re.search(rf"mov\.b32\s+%r\d+, {columns};", ptx)
    # a K tile of 64 is four K = 16 MMAs (LLVM may peel the first K iteration: then eight)
    mmas = ops.count(f"tcgen05.mma.cta_group::{g}.kind::f16.collector::a::discard")
    assert mmas in (4, 8)
    # the commits: one frees the operand stage per K tile, one hands the accumulator to the epilogue (in a pair:
    # multicast to both CTAs' barriers)
    commit = f"tcgen05.commit.cta_group::{g}.mbarrier::arrive::one.shared::cluster"
    assert count(commit + (".multicast::cluster" if g == 2 else ".b64")) in (2, 3)
    if g == 2:         # the relay's and the epilogue's arrivals on the leader's barriers; the cluster barriers
        assert count("mapa.shared::cluster") == 2 and count("mbarrier.arrive.release.cluster.shared::cluster") == 2
        assert count("barrier.cluster.arrive") == 2 and count("barrier.cluster.wait") == 2
    # the epilogue: one 32-column load per 32 columns of the tile, waited for per 64-column chunk
    assert ops.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == spec.block_n // 32
    assert ops.count("tcgen05.wait::ld.sync.aligned") == spec.block_n // 64
    assert count("tcgen05.fence::before_thread_sync") >= 2 and count("tcgen05.fence::after_thread_sync") >= 3
    # C through smem: one TMA store of a 64-column chunk per 64 columns, each after fence.proxy.async; the last
    # stores waited for (read) before the CTA exits
    chunks = spec.block_n // 64
    assert count("cp.async.bulk.tensor.2d.global.shared::cta") == chunks
    assert count("fence.proxy.async.shared::cta") == chunks and count("cp.async.bulk.commit_group") == chunks
    assert count("cp.async.bulk.wait_group.read") == chunks + 1
    assert count("st.global") == 0
    # the instruction descriptor the layout module encodes (PTX ISA 9.7.16.4.2): the dtypes, f32 D, M = 128,
    # N = block_n, A K-major, B MN-major when it is [K, N]
    idesc = Sm100InstrDescriptor(spec.elem, spec.elem, "f32", spec.block_m, spec.block_n,
                                 b_major="MN" if spec.b_layout == "kn" else "K").encode()
    used = set(re.findall(r"tcgen05\.mma[^;]*,\s*%r(\d+),\s*%p\d+;", ptx))
    values = {reg: int(v) for reg, v in re.findall(r"mov\.b32\s+%r(\d+),\s*(\d+);", ptx)}
    assert used and {values.get(r) for r in used} == {idesc}


@pytest.mark.parametrize("spec", STANDARD, ids=IDS)
def test_ptxas_cubin_and_sass(kernels, spec):
    a, sass = kernels[spec]["ptxas"], kernels[spec]["sass"]
    assert a.cubin[:4] == b"\x7fELF"
    assert (a.spill_stores, a.spill_loads, a.stack_bytes) == (0, 0, 0), a.log
    n = sass_counts(sass, SASS)
    assert n["UTCHMMA"] in (4, 8) and n["UTCBAR"] in (2, 3)
    assert n["LDTM"] == spec.block_n // 32
    g = spec.block_m // 128
    assert n["UTMALDG"] == 1 + (spec.block_n // g // 64 if spec.b_layout == "kn" else 1)   # B: this CTA's columns
    assert n["UTMASTG"] == spec.block_n // 64 and n["STG"] == 0 and n["STS"] >= 8 * spec.block_n // 64
    assert n["LDL"] == 0 and n["STL"] == 0
    assert all(line.startswith("LDTM.x32") for line in re.findall(r"LDTM\S*", sass))
    assert n["UTCATOMSWS"] >= 2          # the TMEM allocator (alloc's find-and-set, dealloc's clear)
    mma = re.findall(r"UTCHMMA\S*", sass)
    assert all(op == ("UTCHMMA.2CTA" if g == 2 else "UTCHMMA") for op in mma), mma
    assert all((".2CTA.MULTICAST" in line) == (g == 2) for line in re.findall(r"UTCBAR[^;]*", sass))


@pytest.mark.parametrize("spec", STANDARD, ids=IDS)
def test_nvjitlink_cubin_and_sass(kernels, spec):
    j, sass = kernels[spec]["nvjitlink"], kernels[spec]["sass_nvjitlink"]
    assert j.tool == "nvjitlink" and j.cubin[:4] == b"\x7fELF"
    assert (j.spill_stores, j.spill_loads, j.stack_bytes) == (0, 0, 0), j.log
    n = sass_counts(sass, SASS)
    assert n["UTCHMMA"] in (4, 8) and n["LDTM"] == spec.block_n // 32 and n["UTCBAR"] in (2, 3)
    assert n["UTMALDG"] >= 2 and n["LDL"] == 0 and n["STL"] == 0
