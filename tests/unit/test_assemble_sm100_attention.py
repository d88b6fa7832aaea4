"""The standard sm_100a attention kernels (FA4-style) from the planned program to SASS (CPU only): PTX, ptxas and
nvJitLink cubins, nvdisasm.

No Blackwell GPU exists here, so this is one of the three ways these kernels are checked (with the emulator,
tests/emulate/test_attention_sm100.py, and the lit tests of tests/lit/attention-sm100): the PTX holds the tcgen05
sequence (per key block and Q tile: D/16 MMAs for S from smem descriptors, BN/16 for P V with A in Tensor Memory,
the commits), the instruction descriptors the layout module encodes; ptxas accepts it with no spill or stack
(nvJitLink too, though it drops setmaxnreg); the SASS holds the tensor-core MMA (UTCHMMA), the TMEM loads and stores (LDTM, STTM), the commits (UTCBAR),
the TMA loads and stores (UTMALDG, UTMASTG), STG only for the LSE, and no local-memory traffic.
"""
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from warploom.build import planned_sm100_attention
from warploom.kernels import FA4_BLOCK_N, STANDARD_ATTENTION_KERNELS
from warploom.layout import Sm100InstrDescriptor
from warploom.lowering.assemble import assemble, disassemble, sass_counts
from warploom.lowering.ptx import gpu_module_to_ptx
from warploom.lowering import kernel_name
from warploom.lowering import lower_program as lower_attention

STANDARD = STANDARD_ATTENTION_KERNELS["sm_100a"]
IDS = [s.kernel_name for s in STANDARD]
SASS = ["UTCHMMA", "LDTM", "STTM", "UTCBAR", "UTMALDG", "UTMASTG", "STG", "LDL", "STL", "MUFU"]


def _build(spec):
    program = planned_sm100_attention(spec.elem, spec.head_dim, spec.causal, varlen=spec.varlen)
    lowered = lower_attention(program, kernel_name(program))       # holds the module its gpu.module lives in
    ptx = gpu_module_to_ptx(lowered.gpu_module)
    a, j = assemble(ptx, "sm_100a", "ptxas"), assemble(ptx, "sm_100a", "nvjitlink")
    return {"program": program, "ptx": ptx, "ptxas": a, "nvjitlink": j, "sass": disassemble(a.cubin)}


@pytest.fixture(scope="module")
def kernels():
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(STANDARD, pool.map(_build, STANDARD)))


def ptx_ops(ptx: str) -> list[str]:
    return re.findall(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.:]*)", ptx, re.M)


def test_the_standard_set():
    """Both dtypes, head dims 64 and 128, causal or not, each for padded batches and for packed sequences (varlen:
    the same kernel reading cu_seqlens and storing through ragged tensor maps)."""
    assert sorted((s.elem, s.head_dim, s.causal, s.varlen) for s in STANDARD) == sorted(
        (e, d, c, vl) for e in ("bf16", "f16") for d in (64, 128) for c in (False, True) for vl in (False, True))
    assert all(s.kernel_name.startswith("wl_fa4_") and s.block_m == 256 for s in STANDARD)


@pytest.mark.parametrize("spec", STANDARD, ids=IDS)
def test_ptx_holds_the_fa4_sequence(kernels, spec):
    k = kernels[spec]
    ptx, d, bn = k["ptx"], spec.head_dim, FA4_BLOCK_N
    assert ".target sm_100a" in ptx and f".entry {spec.kernel_name}(" in ptx and ".maxntid 512, 1, 1" in ptx
    assert k["program"].attrs["tmem_columns"] == 512
    ops = ptx_ops(ptx)
    count = lambda prefix: sum(op.startswith(prefix) for op in ops)  # noqa: E731
    assert ops.count("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32") == 1
    assert ops.count("tcgen05.dealloc.cta_group::1.sync.aligned.b32") == 1
    # per key block, for each of the 2 Q tiles: S = Q K^T as D/16 MMAs, P V as BN/16 MMAs with A in TMEM
    mma = "tcgen05.mma.cta_group::1.kind::f16.collector::a::discard"
    assert ops.count(mma) == 2 * (d // 16 + bn // 16)
    a_in_tmem = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16[^\n]*\[%r\d+\], \[%r\d+\], %rd\d+", ptx)
    assert len(a_in_tmem) == 2 * bn // 16
    # commits: s_full and o_full per Q tile, k_empty and v_empty
    assert count("tcgen05.commit.cta_group::1.mbarrier::arrive::one") == 2 * 2 + 2
    # the setmaxnreg budgets: two softmax warpgroups up to 168, the correction and the rest (four roles) down to 88
    assert ops.count("setmaxnreg.inc.sync.aligned.u32") == 2 and ops.count("setmaxnreg.dec.sync.aligned.u32") == 4
    assert ".minnctapersm 1" in ptx
    for regs in (168, 88):
        assert re.search(rf"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+{regs};", ptx)
    # the softmax: S read 32 columns at a time twice (the max, then P), P stored as 16 packed cells a chunk; the
    # correction: O rescaled and read for the store 32 columns at a time; a warp vote before the rescale
    ld32 = ops.count("tcgen05.ld.sync.aligned.32x32b.x32.b32")
    assert ld32 == 2 * 2 * (bn // 32) + 2 * 2 * (d // 32)
    assert ops.count("tcgen05.st.sync.aligned.32x32b.x16.b32") == 2 * (bn // 32)
    assert ops.count("tcgen05.st.sync.aligned.32x32b.x32.b32") == 2 * (d // 32)
    assert count("redux.sync.or") == 2 and count("tcgen05.wait::st") == 2 * 2
    # O through Q's smem: one TMA store per 64 columns of each Q tile; the LSE straight to global
    assert count("cp.async.bulk.tensor.4d.global.shared::cta") == 2 * (d // 64)
    assert count("st.global") == 2
    # packed sequences: each thread reads its sequence's first query and key rows and the next ones (4 starts)
    assert count("ld.global") == (4 if spec.varlen else 0)
    # instruction descriptors (PTX ISA 9.7.16.4.2): S: M 128, N = BN, both K-major; P V: N = D, V MN-major
    s_idesc = Sm100InstrDescriptor(spec.elem, spec.elem, "f32", 128, bn, a_major="K", b_major="K").encode()
    pv_idesc = Sm100InstrDescriptor(spec.elem, spec.elem, "f32", 128, d, a_major="K", b_major="MN").encode()
    for idesc in (s_idesc, pv_idesc):
        assert re.search(rf"\b{idesc}\b", ptx), f"instruction descriptor {idesc:#x} not in the PTX"


@pytest.mark.parametrize("spec", STANDARD, ids=IDS)
def test_ptxas_nvjitlink_and_sass(kernels, spec):
    k = kernels[spec]
    a, j = k["ptxas"], k["nvjitlink"]
    assert (a.spill_stores, a.spill_loads, a.stack_bytes) == (0, 0, 0), a.log
    assert "C7508" not in a.log, a.log          # ptxas honours setmaxnreg (it needs .minnctapersm 1 to here)
    # nvJitLink accepts the PTX too, but compiles relocatably and drops setmaxnreg (it says so: C7504), so its
    # allocation is not the kernel's (at head dim 64 it spills where ptxas uses 99 registers): ptxas builds the cubins
    assert j.cubin[:4] == b"\x7fELF" and ("C7504" in j.log or (j.spill_stores, j.stack_bytes) == (0, 0)), j.log
    n = sass_counts(k["sass"], SASS)
    d, bn = spec.head_dim, FA4_BLOCK_N
    assert n["UTCHMMA"] == 2 * (d // 16 + bn // 16)
    assert n["LDTM"] > 0 and n["STTM"] > 0 and n["UTCBAR"] >= 6
    assert n["UTMALDG"] > 0 and n["UTMASTG"] == 2 * (d // 64)
    assert n["STG"] == 2                        # the LSE of each Q tile's row
    assert n["LDL"] == 0 and n["STL"] == 0
    assert n["MUFU"] > 0                        # ex2 for 3/4 of P (the rest by the FMA polynomial), rcp, lg2


def test_the_shared_kv_kernel_assembles():
    """use_shared_kv (bf16, head dim 128, causal; not in the standard set): the same instruction mix through one
    K/V ring of 3 slots, no spill, no local memory; its entry name says so."""
    from warploom.kernels import AttentionSpec
    spec = AttentionSpec("bf16", 128, True, stages=3, target="sm_100a", shared_kv=True)
    program = planned_sm100_attention("bf16", 128, True, shared_kv=True)
    lowered = lower_attention(program, kernel_name(program))
    assert lowered.name == spec.kernel_name == "wl_fa4_bf16_d128_256x128_s3_causal_skv"
    a = assemble(gpu_module_to_ptx(lowered.gpu_module), "sm_100a", "ptxas")
    assert (a.spill_stores, a.spill_loads, a.stack_bytes) == (0, 0, 0) and "C7508" not in a.log, a.log
    n = sass_counts(disassemble(a.cubin), SASS)
    assert n["UTCHMMA"] == 2 * (128 // 16 + FA4_BLOCK_N // 16) and n["LDL"] == 0 and n["STL"] == 0
    assert n["UTMALDG"] > 0 and n["UTMASTG"] == 2 * 2 and n["UTCBAR"] >= 6
