"""Packed variable-length attention (issue 34 item 5) on the CPU host: the spec and runtime contract of the varlen
kernels (grid schedule, the starts and Tq as parameters, the ragged (D, R, H, T) tensor maps), the ragged view the
runtime encodes, and the sm_90a varlen kernels assembled by ptxas: no spill, and the same tensor-core, TMA and
softmax instruction mix as the padded-batch grid kernel, plus the four loads of the sequence's starts.
"""
import re

import numpy as np
import pytest

from warploom.kernel.contract import ATTENTION_VARLEN_MAP_DIMS, AttentionSpec
from warploom.kernels import STANDARD_ATTENTION_KERNELS
from warploom.ops_varlen import RAGGED_ORDER, ragged, varlen_spec
from warploom.reference.ops import attention, attention_varlen
from warploom.runtime.tensormap import check_tma_layout
from warploom.runtime.tensors import DeviceTensor


def test_the_varlen_spec_and_its_contract():
    spec = AttentionSpec("bf16", 128, True, varlen=True)
    assert spec.schedule == "grid" and spec.block_n == 160 and spec.q_stages == 1      # 176 would spill
    assert spec.kernel_name == "wl_attn_bf16_d128_128x160_s2_causal_ov_varlen"
    assert [n for n, _ in spec.params][-3:] == ["cu_seqlens_q", "cu_seqlens_k", "Tq"]
    assert all(m.dims == ATTENTION_VARLEN_MAP_DIMS for m in spec.tensor_map_specs().values())
    assert "packed variable-length sequences" in spec.describe()
    with pytest.raises(ValueError, match="schedule 'grid' only"):
        AttentionSpec("bf16", 128, True, varlen=True, schedule="persistent")
    for target in ("sm_90a", "sm_100a"):           # what attention_varlen picks is in the standard set
        for s in STANDARD_ATTENTION_KERNELS[target]:
            if s.varlen:
                assert varlen_spec(s.elem, s.head_dim, s.causal, target) == s


def test_the_ragged_view():
    """A [T, H, D] tensor seen through a map of r-row boxes: (T + 1, H, r, D) with the row stride twice, the base r
    rows back; the TMA rules hold (16-byte strides and base) so the map encodes."""
    t = DeviceTensor(0x10000, (300, 8, 128), (8 * 128, 128, 1), "bf16", 0, "fake", None)
    r = ragged(t, 176)
    assert r.shape == (301, 8, 176, 128) and r.strides == (1024, 128, 1024, 1)
    assert r.ptr == 0x10000 - 176 * 1024 * 2
    spec = AttentionSpec("bf16", 128, True, varlen=True).tensor_map_specs()["k"]
    lay = check_tma_layout(spec, r, RAGGED_ORDER)
    assert lay.global_dims == (128, 176, 8, 301) and lay.global_strides == (2048, 256, 2048)


def test_the_reference_is_attention_per_sequence():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((30, 2, 8)), rng.standard_normal((20, 1, 8)), rng.standard_normal((20, 1, 8))
    out, lse = attention_varlen(q, k, v, [0, 10, 30], [0, 15, 20], causal=True, return_lse=True)
    for (q0, q1), (k0, k1) in (((0, 10), (0, 15)), ((10, 30), (15, 20))):
        o, l_ = attention(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], causal=True, layout="bshd", return_lse=True)
        assert np.allclose(out[q0:q1], o[0]) and np.allclose(lse[:, q0:q1], l_[0])


@pytest.mark.parametrize("d", [64, 128, 256])
def test_the_sm90_varlen_kernel_assembles_like_the_grid_kernel(d):
    """ptxas: no spill; the varlen kernel's HGMMAs, TMA loads and stores, shared stores, ex2 and barriers are the
    padded-batch grid kernel's, and it loads four starts (LDG)."""
    from warploom.build import planned_attention_program
    from warploom.lowering import kernel_name, lower_program
    from warploom.lowering.assemble import assemble, disassemble, sass_counts
    from warploom.lowering.ptx import gpu_module_to_ptx
    counts = {}
    names = ["HGMMA", "UTMALDG", "UTMASTG", "STS", "MUFU.EX2", "BAR.SYNC", "STG.E", "LDG.E", "LDL", "STL"]
    for varlen in (False, True):
        bn = AttentionSpec("bf16", d, True, varlen=True).block_n         # the varlen kernel's keys per block, both
        program = planned_attention_program("bf16", d, True, bn, schedule="grid", varlen=varlen)
        lowered = lower_program(program, kernel_name(program))
        a = assemble(gpu_module_to_ptx(lowered.gpu_module), tool="ptxas")
        assert (a.spill_stores, a.spill_loads, a.stack_bytes) == (0, 0, 0), a.log
        sass = disassemble(a.cubin)
        counts[varlen] = sass_counts(sass, names)
        counts[varlen]["LDG.E"] = len(re.findall(r"\bLDG\.E\b", sass))
    assert counts[True]["LDG.E"] == counts[False]["LDG.E"] + 4
    assert {n: c for n, c in counts[True].items() if n != "LDG.E"} == \
        {n: c for n, c in counts[False].items() if n != "LDG.E"}
    assert counts[True]["LDL"] == counts[True]["STL"] == 0
