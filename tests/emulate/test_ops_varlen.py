"""warploom.ops.attention_varlen end to end on the CPU: the real compiled varlen kernel's contract, the runtime's
ragged tensor maps (their address moved back by a box of rows, the overlapping (R, T) strides: the Python TMA check
of exactly what cuTensorMapEncodeTiled gets), the starts' upload, the parameters packed by pack_params, launched on
the emulator from those very arguments (tests/emulate/test_ops_attention.py's HostGPU). The packed tensors sit in
NaN-filled buffers with room before and after them: a box reaching outside the packed rows would read NaN into the
result or write outside out, and both show here.
"""
import numpy as np
import pytest

from warploom import ops_attention as oa
from warploom import ops_varlen as ov
from warploom.build import planned_attention_program
from warploom.emulate.front import attention_kernel
from warploom.emulate.launch import emulate_launch
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.reference.ops import attention_varlen as reference_varlen
from warploom.reference.ops import round_to
from warploom.runtime import host
from warploom.runtime.launch import pack_params
from warploom.score import ScoreMods

from .test_ops_attention import HostGPU

PAD = 256           # rows of NaN before and after each packed tensor


class VarlenGPU(HostGPU):
    def prepare(self, artifact, sizes, args, device=None):
        pack_params(artifact, args)
        spec = next(s for a, s in self.artifacts.values() if a is artifact)
        assert spec.varlen
        kernel = attention_kernel(planned_attention_program(spec.elem, spec.head_dim, spec.causal, varlen=True,
                                                            mods=spec.mods))
        assert kernel.name == artifact.name
        dt = NUMPY_ELEMS[spec.elem]
        eargs = {}
        for name in ("q", "k", "v", "out"):     # each map's view of memory: dims and byte strides as encoded
            lay = self.maps[id(args[name])][1]
            eargs[name] = self.view(lay.address, lay.global_dims[::-1], lay.global_strides[::-1] +
                                    (np.dtype(dt).itemsize,), dt)
        eargs["lse"] = None if args["lse"] == 0 else self.flat_from(args["lse"], np.float32)
        for n in ("cu_seqlens_q", "cu_seqlens_k"):
            eargs[n] = self.flat_from(args[n], np.int32)
        for n, v in args.items():
            if n not in eargs and not hasattr(v, "getPtr"):
                eargs[n] = self.flat_from(v, np.float32) if n in [f"mod_{t}" for t, _, _ in spec.mods.tensors] else v
        gpu = self

        class Prepared:
            def launch(self, stream):
                gpu.launches += 1
                emulate_launch(kernel, eargs, sizes, seed=gpu.launches)
        return Prepared()


@pytest.fixture
def gpu(monkeypatch):
    g = VarlenGPU()
    monkeypatch.setattr(oa, "get_kernel", g.get_kernel)
    monkeypatch.setattr(ov, "encode_tiled", g.encode_tiled)
    monkeypatch.setattr(ov, "empty_like_framework", g.empty_like_framework)
    monkeypatch.setattr(oa, "copy_contiguous", g.copy_contiguous)
    monkeypatch.setattr(host, "fill", g.fill)
    monkeypatch.setattr(ov, "default_launcher", g)
    monkeypatch.setattr(host, "upload_i32", g.upload_i32)
    monkeypatch.setattr(host, "target_of", lambda device: "sm_90a")
    for memo in (oa._CHECKED, ov._UPLOADS):
        memo.clear()
    yield g
    for memo in (oa._CHECKED, ov._UPLOADS):
        memo.clear()


def packed(gpu, rows, heads, d, elem, rng, scale=1.0):
    """A packed [rows, heads, d] tensor inside a NaN buffer with PAD rows before and after it."""
    buf = gpu.alloc((PAD + rows + PAD, heads, d), elem)
    x = buf[PAD:PAD + rows]
    x[...] = round_to(rng.standard_normal(x.shape) * scale, elem)
    return buf, x


@pytest.mark.parametrize("causal", [False, True])
def test_packed_sequences_through_the_runtime(gpu, causal):
    """Three sequences (one of a single query, one whose keys outnumber its queries), GQA 2, host starts, LSE."""
    rng = np.random.default_rng(4)
    lq, lk, hq, hkv, d = [70, 1, 140], [70, 30, 100], 2, 1, 64
    cu_q, cu_k = (np.concatenate([[0], np.cumsum(x)]).tolist() for x in (lq, lk))
    (_, q), (kb, k), (vb, v) = (packed(gpu, n, h, d, "bf16", rng, 1.5) for n, h in ((sum(lq), hq), (sum(lk), hkv),
                                                                                     (sum(lk), hkv)))
    obuf = gpu.alloc((PAD + sum(lq) + PAD, hq, d), "bf16")
    out = obuf[PAD:PAD + sum(lq)]
    o, lse = ov.attention_varlen(*(gpu.tensor(x) for x in (q, k, v)), cu_q, cu_k, causal=causal, return_lse=True,
                                 out=gpu.tensor(out))
    assert gpu.launches == 1 and gpu.copies == [] and o is out
    assert np.isnan(obuf[:PAD].astype(np.float64)).all() and np.isnan(obuf[PAD + sum(lq):].astype(np.float64)).all()
    ref, ref_lse = reference_varlen(q, k, v, cu_q, cu_k, causal=causal, return_lse=True)
    got = out.astype(np.float64)
    assert not np.isnan(got).any()
    assert np.abs(got - ref).max() <= 2e-2 * np.abs(ref).max()
    seen = np.isfinite(ref_lse)                     # causal: sequence 2's first 40 rows see no key (-inf)
    assert (np.isneginf(lse) == ~seen).all() and np.abs(lse[seen] - ref_lse[seen]).max() < 1e-3


def test_modifier_per_sequence_and_device_starts(gpu):
    """A mask that reads the sequence index b (sequence 1 sees only its first 3 keys), starts given as int32 "device"
    tensors (read on the host for the check)."""
    def mask(b, h, q_idx, kv_idx):
        return (b != 1) | (kv_idx < 3)
    rng = np.random.default_rng(5)
    cu = np.array([0, 60, 150], np.int32)
    (_, q), (_, k), (_, v) = (packed(gpu, 150, 1, 64, "f16", rng) for _ in range(3))
    starts = gpu.alloc((3,), "f32", fill=0).view(np.int32)
    starts[...] = cu
    t = gpu.tensor(starts.view(np.float32))
    t = type(t)(t.ptr, t.shape, t.strides, "i32", 0, "fake", starts)
    read = []
    ov.read_i32, real = (lambda t, name: read.append(name) or t.obj.astype(np.int64)), ov.read_i32
    try:
        _, out = packed(gpu, 150, 1, 64, "f16", rng)          # the ragged view reaches a box of rows past its end
        o = ov.attention_varlen(*(gpu.tensor(x) for x in (q, k, v)), t, t, mask_mod=mask, out=gpu.tensor(out))
    finally:
        ov.read_i32 = real
    assert read == ["cu_seqlens_q", "cu_seqlens_k"] and gpu.launches == 1
    mods = oa.traced_mods(None, mask, None)[0]
    assert isinstance(mods, ScoreMods)
    ref = reference_varlen(q, k, v, cu, cu, mods=mods)
    assert o is out and np.abs(out.astype(np.float64) - ref).max() <= 2e-2 * np.abs(ref).max()


@pytest.mark.parametrize("cu_q, cu_k, max_q, match", [
    ([0, 5, 3, 10], [0, 5, 7, 10], None, "must not decrease"),
    ([2, 5, 10], [0, 5, 10], None, "must start at 0"),
    ([0, 5, 9], [0, 5, 10], None, "ends at 9"),
    ([0, 5, 10], [0, 10], None, "B \\+ 1 starts of the same B sequences"),
    ([0, 5, 10], [0, 5, 10], 4, "longest sequence has 5"),
])
def test_bad_starts_are_refused_before_anything_runs(gpu, cu_q, cu_k, max_q, match):
    rng = np.random.default_rng(6)
    (_, q), (_, k), (_, v) = (packed(gpu, 10, 1, 64, "bf16", rng) for _ in range(3))
    with pytest.raises(ValueError, match=match):
        ov.attention_varlen(*(gpu.tensor(x) for x in (q, k, v)), cu_q, cu_k, max_q)
    assert gpu.launches == 0


def test_check_false_needs_the_maxima():
    with pytest.raises(ValueError, match="required with check=False"):
        ov.check_starts(None, None, 10, 10, None, 5)
    assert ov.check_starts(None, None, 10, 10, 7, 5) == (7, 5)


def test_out_over_an_input_is_refused(gpu):
    rng = np.random.default_rng(7)
    (_, q), (_, k), (_, v) = (packed(gpu, 10, 1, 64, "bf16", rng) for _ in range(3))
    with pytest.raises(ValueError, match="out overlaps q"):
        ov.attention_varlen(*(gpu.tensor(x) for x in (q, k, v)), [0, 10], [0, 10], out=gpu.tensor(q))
    assert gpu.launches == 0

