"""warploom.ops.attention without a GPU: validation, the copy rule, parameter packing, specs and the offline cache.

Tensors are fake DeviceTensors (an address, shape and strides; nothing is allocated); the kernel is a fake
artifact that keeps the runtime contract of docs/attention-sm90.md; encode_tiled is replaced by the Python TMA
check (check_tma_layout) so the tensor-map arguments can be read back; the launcher packs the parameters with
the real pack_params and records them instead of launching.
"""
import ctypes
import math

import numpy as np
import pytest
from cuda.bindings import driver

from warploom import kernels, ops, ops_attention as oa
from warploom.kernels import (ATTENTION_PARAMS, CLUSTER_KERNELS, STANDARD_ATTENTION_KERNELS, STANDARD_KERNELS, STREAMK_KERNELS,
                              SWAP_KERNELS,
                              AttentionSpec, GemmSpec, check_attention_artifact, precompile_set)
from warploom.runtime import host
from warploom.runtime.artifact import KernelArtifact, ParamSpec, TensorMapSpec
from warploom.runtime.cache import KernelCache, MissingKernelError
from warploom.runtime.launch import pack_params
from warploom.runtime.tensormap import check_tma_layout
from warploom.runtime.tensors import DeviceTensor, contiguous_strides

BASE = 0x7F00_0000_0000
LOG2E = math.log2(math.e)
SMS = 132                       # the fake GPU's SM count (an H200's)


def tensor(shape, dtype="bf16", strides=None, ptr=BASE, framework="fake", device=0):
    return DeviceTensor(ptr=ptr, shape=tuple(shape), strides=tuple(strides or contiguous_strides(shape)),
                        dtype=dtype, device=device, framework=framework, obj=None)


def qkv(layout="bshd", b=2, sq=100, sk=300, hq=8, hkv=2, d=128, dtype="bf16"):
    """Three contiguous tensors far apart in (fake) memory."""
    def shape(s, h):
        return (b, s, h, d) if layout == "bshd" else (b, h, s, d)
    return (tensor(shape(sq, hq), dtype, ptr=BASE), tensor(shape(sk, hkv), dtype, ptr=BASE + 2**32),
            tensor(shape(sk, hkv), dtype, ptr=BASE + 2**33))


def fake_artifact(spec: AttentionSpec, **over) -> KernelArtifact:
    fields = dict(name=spec.kernel_name, target=spec.target, cubin=b"fake", ptx="", smem_bytes=164936,
                  block=(384, 1, 1), cluster=(1, 1, 1),
                  grid=((("attention_persistent", "Sq", 128, "Hq", "B", "SMS"), ("const", 1), ("const", 1))
                        if spec.schedule == "persistent" else (("cdiv", "Sq", 128), ("cdiv", "Hq", 1), ("cdiv", "B", 1))),
                  params=[ParamSpec(n, k) for n, k in spec.params], tensor_maps=spec.tensor_map_specs(),
                  key=f"fake-{spec.lookup_id}")
    fields.update(over)
    return KernelArtifact(**fields)


class Recorder:
    """Stands in for the GPU: kernels, tensor maps, allocations, copies, fills and launches are recorded."""

    def __init__(self):
        self.kernels, self.maps, self.copies, self.fills, self.launches, self.prepared = [], [], [], [], [], []
        self.tables = []
        self.next_ptr = BASE + 2**36

    # get_kernel
    def get_kernel(self, spec):
        self.kernels.append(spec)
        return fake_artifact(spec)

    # encode_tiled: the Python check of the same arguments, recorded
    def encode_tiled(self, spec, t, order):
        self.maps.append((spec.name, t, check_tma_layout(spec, t, order)))
        return driver.CUtensorMap()

    def alloc(self, ref, shape, dtype):
        t = tensor(shape, dtype, ptr=self.next_ptr, device=ref.device)
        t.obj = ("allocated", t.ptr)
        self.next_ptr += 2**30
        return t

    def copy(self, t, name, reason):
        self.copies.append((name, reason))
        return self.alloc(t, t.shape, t.dtype)

    def fill(self, t, value):
        self.fills.append((t.ptr, value))

    def upload_i32(self, values, device):
        """A causal persistent kernel's tile table: recorded, at a fresh address."""
        buf = type("Table", (), {"ptr": self.next_ptr, "values": list(values), "device": device})()
        self.tables.append(buf)
        self.next_ptr += 2**30
        return buf

    # default_launcher().prepare(...).launch(stream)
    def __call__(self):
        return self

    def prepare(self, artifact, sizes, args, device=None):
        values, types = pack_params(artifact, args)
        record = {"grid": artifact.grid_for(sizes), "values": values, "types": types, "args": args,
                  "sizes": sizes}
        self.prepared.append(record)
        rec = self

        class Prepared:
            def launch(self, stream):
                rec.launches.append((record, stream))
        return Prepared()


@pytest.fixture
def gpu(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(oa, "get_kernel", rec.get_kernel)
    monkeypatch.setattr(oa, "encode_tiled", rec.encode_tiled)
    monkeypatch.setattr(oa, "empty_like_framework", rec.alloc)
    monkeypatch.setattr(oa, "copy_contiguous", rec.copy)
    monkeypatch.setattr(host, "fill", rec.fill)
    monkeypatch.setattr(oa, "default_launcher", rec)
    monkeypatch.setattr(host, "upload_i32", rec.upload_i32)
    monkeypatch.setattr(oa, "_sm_count", lambda device: SMS)
    monkeypatch.setattr(host, "target_of", lambda device: "sm_90a")      # a Hopper GPU
    for memo in (oa._PREPARED, oa._TENSOR_MAPS, oa._CHECKED, oa._TABLES):
        memo.clear()
    yield rec
    for memo in (oa._PREPARED, oa._TENSOR_MAPS, oa._CHECKED, oa._TABLES):
        memo.clear()


# ---- specs ---------------------------------------------------------------------------------

def test_spec_names_and_defaults():
    s = AttentionSpec("bf16", 128)
    assert s.block_n == 128 and s.stages == 2 and s.block_m == 128 and not s.causal
    assert s.schedule == "persistent" and s.kernel_name == "wl_attn_bf16_d128_128x128_s2_ov_persistent_q2"
    assert s.lookup_id == "wl_attn_bf16_d128_128x128_s2_ov_persistent_q2-sm_90a"
    assert AttentionSpec("bf16", 128, schedule="grid").block_n == 176     # the grid schedule's measured best
    assert AttentionSpec("bf16", 256).schedule == "grid"                   # persistent spills at head dim 256
    assert AttentionSpec("f16", 256, True, schedule="grid").kernel_name == "wl_attn_f16_d256_128x80_s2_causal_ov"
    assert AttentionSpec("bf16", 64, True, block_n=64, stages=3).kernel_name == \
        "wl_attn_bf16_d64_128x64_s3_causal_ov_persistent"
    assert s.params[-2:] == (("B", "i32"), ("tile_order", "i32"))
    # Q's stages: two (the next tile's Q prefetched) on the persistent standard tiles, tall included; one elsewhere
    assert s.q_stages == 2 and AttentionSpec("f16", 64, True).q_stages == 2
    assert AttentionSpec("bf16", 64, block_m=192).kernel_name == "wl_attn_bf16_d64_192x128_s2_ov_persistent_q2"
    assert AttentionSpec("bf16", 128, q_stages=1).kernel_name == "wl_attn_bf16_d128_128x128_s2_ov_persistent"
    for one in (AttentionSpec("bf16", 128, schedule="grid"), AttentionSpec("bf16", 256),
                AttentionSpec("bf16", 256, schedule="persistent"), AttentionSpec("bf16", 128, block_n=64),
                AttentionSpec("bf16", 128, stages=3), AttentionSpec("bf16", 128, target="sm_100a")):
        assert one.q_stages == 1, one
    with pytest.raises(ValueError, match="q_stages = 2: 1, or 2 for the persistent sm_90a"):
        AttentionSpec("bf16", 128, schedule="grid", q_stages=2)
    assert AttentionSpec("bf16", 128, schedule="grid").params == ATTENTION_PARAMS
    with pytest.raises(ValueError, match="schedule = 'stream-k': one of grid, persistent"):
        AttentionSpec(schedule="stream-k")
    assert AttentionSpec("bf16", 128) == AttentionSpec("bf16", 128, False, 128)     # one cache entry, one memo slot
    assert "head dim 256" in AttentionSpec("f16", 256, True).describe()
    assert "causal" in AttentionSpec("f16", 256, True).describe()
    with pytest.raises(ValueError, match="stages = 0"):
        AttentionSpec(stages=0)
    with pytest.raises(ValueError, match="causal = 1"):
        AttentionSpec(causal=1)
    # the serial consumer schedule (no intra-warpgroup overlap): its own kernel, name and cache entry
    serial = AttentionSpec("bf16", 128, overlap=False)
    assert serial.kernel_name == "wl_attn_bf16_d128_128x128_s2_persistent_q2" and serial != s
    assert "intra-warpgroup overlap" in s.describe() and "overlap" not in serial.describe()
    with pytest.raises(ValueError, match="overlap = 1"):
        AttentionSpec(overlap=1)


def test_standard_sets():
    attn = STANDARD_ATTENTION_KERNELS["sm_90a"]
    assert len(attn) == 30 and len({s.kernel_name for s in attn}) == 30
    assert {(s.elem, s.head_dim, s.causal) for s in attn} == {
        (e, d, c) for e in ("bf16", "f16") for d in (64, 128, 256) for c in (False, True)}
    varlen = [s for s in attn if s.varlen]                # ops.attention_varlen's: grid kernels, every dtype, D, mask
    assert len(varlen) == 12 and all(s.schedule == "grid" and s.kernel_name.endswith("_varlen") for s in varlen)
    streamk = [s for s in attn if s.schedule == "streamk"]   # non-causal, head dims 64 and 128, the 128-row tile
    assert {(s.elem, s.head_dim, s.causal, s.block_m) for s in streamk} == {
        (e, d, False, 128) for e in ("bf16", "f16") for d in (64, 128)}
    tall = [s for s in attn if s.block_m == 192]          # the tall tiles: head dim 64, non-causal
    assert {(s.elem, s.head_dim, s.causal, s.block_n, s.schedule) for s in tall} == {
        (e, 64, False, 128, "persistent") for e in ("bf16", "f16")}
    assert all(isinstance(s, GemmSpec) for s in STANDARD_KERNELS["sm_90a"]) and len(STANDARD_KERNELS["sm_90a"]) == 24
    everything = precompile_set("sm_90a")
    standard = (STANDARD_KERNELS["sm_90a"] + STREAMK_KERNELS["sm_90a"] + CLUSTER_KERNELS["sm_90a"]
                + SWAP_KERNELS["sm_90a"] + attn)
    assert len(SWAP_KERNELS["sm_90a"]) == 16 and all(s.swap_ab and s.epilogue == "direct" for s in SWAP_KERNELS["sm_90a"])
    assert len(CLUSTER_KERNELS["sm_90a"]) == 12 and all(s.cluster_m == 2 for s in CLUSTER_KERNELS["sm_90a"])
    assert sum(s.group_m == 8 for s in CLUSTER_KERNELS["sm_90a"]) == 4     # the 128 x 256 ones in bands too
    assert everything[:len(standard)] == standard       # then the kernels only the tuning table names
    assert all(s not in standard and isinstance(s, GemmSpec) for s in everything[len(standard):])
    fa4 = STANDARD_ATTENTION_KERNELS["sm_100a"]       # the FA4-style kernels: head dims 64 and 128
    assert {(s.elem, s.head_dim, s.causal) for s in fa4} == {
        (e, d, c) for e in ("bf16", "f16") for d in (64, 128) for c in (False, True)} and len(fa4) == 16
    assert precompile_set("sm_100a") == STANDARD_KERNELS["sm_100a"] + fa4 and len(STANDARD_KERNELS["sm_100a"]) == 12


def test_tensor_map_contract():
    maps = AttentionSpec("f16", 256).tensor_map_specs()
    assert maps["q"] == TensorMapSpec("q", "q", "f16", (64, 128, 1, 1), 128, ("D", "S", "H", "B"))
    assert maps["k"].box == maps["v"].box == (64, 80, 1, 1)
    assert AttentionSpec("bf16", 64).tensor_map_specs()["k"].box == (64, 128, 1, 1)


def test_check_attention_artifact():
    spec = AttentionSpec("bf16", 128, True)
    check_attention_artifact(fake_artifact(spec), spec)
    swapped = [ParamSpec(n, k) for n, k in spec.params]
    swapped[5], swapped[6] = swapped[6], swapped[5]
    with pytest.raises(ValueError, match="parameters are .*the contract is"):
        check_attention_artifact(fake_artifact(spec, params=swapped), spec)
    maps = spec.tensor_map_specs()
    maps["k"] = TensorMapSpec("k", "k", "bf16", (64, 64, 1, 1), 128, ("D", "S", "H", "B"))
    with pytest.raises(ValueError, match=r"tensor map 'k' has box \(64, 64, 1, 1\), the contract says \(64, 128, 1, 1\)"):
        check_attention_artifact(fake_artifact(spec, tensor_maps=maps), spec)
    with pytest.raises(ValueError, match="entry name is 'other'"):
        check_attention_artifact(fake_artifact(spec, name="other"), spec)


# ---- the scale -----------------------------------------------------------------------------

def test_scale_log2():
    scale, sl2 = oa.scale_log2_of(None, 128)
    assert scale == 1 / math.sqrt(128) and sl2 == float(np.float32(LOG2E / math.sqrt(128)))
    assert oa.scale_log2_of(0.5, 64) == (0.5, float(np.float32(0.5 * LOG2E)))
    assert oa.scale_log2_of(np.float32(0.25), 64)[0] == 0.25
    for bad in (0, -0.1, float("nan"), float("inf"), 1e39):
        with pytest.raises(ValueError, match="must be positive, finite"):
            oa.scale_log2_of(bad, 64)
    for bad in ("0.1", True, None.__class__):
        with pytest.raises(TypeError, match="must be a real number"):
            oa.scale_log2_of(bad, 64)


# ---- validation ----------------------------------------------------------------------------

def _bad_cases():
    q, k, v = qkv()
    return [
        ("layout 'bsdh'", dict(layout="bsdh"), (q, k, v), ValueError, ["'bsdh'", "flash_attn_func", "scaled_dot_product_attention",
                                                                    "pass layout='bshd'"]),
        ("rank 3", {}, (tensor((100, 8, 128)), k, v), ValueError, ["rank 4", "[100, 8, 128]", "unsqueeze"]),
        ("f32", {}, (tensor(q.shape, "f32"), k, v), TypeError, ["q is f32", "bf16 or f16", "cast"]),
        ("mixed dtypes", {}, (q, tensor(k.shape, "f16", ptr=k.ptr), v), TypeError, ["k is f16", "one dtype"]),
        ("devices", {}, (q, k, tensor(v.shape, ptr=v.ptr, device=1)), ValueError, ["cuda:1", "one device"]),
        ("batch", {}, (q, tensor((3, 300, 2, 128), ptr=k.ptr), v), ValueError, ["B = 2", "k 3", "same batch"]),
        ("qk head dim", {}, (q, tensor((2, 300, 2, 64), ptr=k.ptr), v), ValueError,
         ["q has head dim 128 but k has 64"]),
        ("v head dim", {}, (q, k, tensor((2, 300, 2, 64), ptr=v.ptr)), ValueError,
         ["v has head dim 64", "zero-pad v"]),
        ("k/v seqlen", {}, (q, k, tensor((2, 301, 2, 128), ptr=v.ptr)), ValueError,
         ["[2, 300, 2, 128] but v is [2, 301, 2, 128]", "same sequence length"]),
        ("gqa", {}, (tensor((2, 100, 12, 128)), tensor((2, 300, 5, 128), ptr=k.ptr),
                     tensor((2, 300, 5, 128), ptr=v.ptr)), ValueError,
         ["12 heads", "have 5", "must divide", "1, 2, 3, 4, 6, 12"]),
        ("zero kv heads", {}, (q, tensor((2, 300, 0, 128), ptr=k.ptr), tensor((2, 300, 0, 128), ptr=v.ptr)),
         ValueError, ["have 0", "must divide"]),
        ("head dim 96", {}, qkv(d=96), ValueError, ["head dim 96", "64, 128, 256", "zero-pad", "head dim 128",
                                                    "scale=1/sqrt(96)"]),
        ("head dim 512", {}, qkv(d=512), ValueError, ["head dim 512", "split the head dim"]),
        ("batch too big", {}, qkv(b=70000, sq=1, sk=1, hq=1, hkv=1), ValueError, ["batch = 70000", "65535", "split"]),
        ("scale", dict(scale=-1.0), (q, k, v), ValueError, ["scale = -1.0", "positive"]),
        ("causal", dict(causal="yes"), (q, k, v), TypeError, ["causal = 'yes'", "True or False"]),
        ("host memory", {}, (np.zeros((2, 100, 8, 128), np.float16), k, v), ValueError,
         ["attention: q:", "host memory", "cuda"]),
        ("not a tensor", {}, (q, k, "v"), TypeError, ["attention: v:", "cannot use"]),
    ]


@pytest.mark.parametrize("label, kwargs, tensors, error, words", _bad_cases(), ids=[c[0] for c in _bad_cases()])
def test_bad_input_is_refused_before_any_launch(gpu, label, kwargs, tensors, error, words):
    with pytest.raises(error) as info:
        ops.attention(*tensors, **kwargs)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    assert str(info.value).startswith("attention: ")
    assert gpu.kernels == [] and gpu.launches == [] and gpu.prepared == []


def test_bhsd_axes_in_messages(gpu):
    q, k, v = qkv("bhsd")
    with pytest.raises(ValueError, match=r"q has 8 heads and k, v have 3"):
        ops.attention(q, tensor((2, 3, 300, 128), ptr=k.ptr), tensor((2, 3, 300, 128), ptr=v.ptr), layout="bhsd")
    with pytest.raises(ValueError, match=r"\[B, H, S, D\]"):
        ops.attention(tensor((8, 100, 128)), k, v, layout="bhsd")


# ---- the copy rule -------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_contiguous_inputs_go_zero_copy(gpu, layout):
    q, k, v = qkv(layout, b=2, sq=100, sk=300, hq=8, hkv=2, d=128)
    p = oa.plan(q, k, v, layout=layout)
    assert p.zero_copy and p.spec == AttentionSpec("bf16", 128, False)
    ops.attention(q, k, v, layout=layout)
    assert gpu.copies == []
    lay = {name: l for name, _, l in gpu.maps}
    assert lay["q"].global_dims == (128, 100, 8, 2)          # (D, S, H, B) whatever the layout
    assert lay["k"].global_dims == lay["v"].global_dims == (128, 300, 2, 2)
    if layout == "bshd":                                     # bytes: S, H, B strides
        assert lay["q"].global_strides == (8 * 128 * 2, 128 * 2, 100 * 8 * 128 * 2)
        assert lay["k"].global_strides == (2 * 128 * 2, 128 * 2, 300 * 2 * 128 * 2)
    else:
        assert lay["q"].global_strides == (128 * 2, 100 * 128 * 2, 8 * 100 * 128 * 2)
        assert lay["k"].global_strides == (128 * 2, 300 * 128 * 2, 2 * 300 * 128 * 2)
    assert lay["q"].box == (64, 128, 1, 1) and lay["k"].box == (64, 128, 1, 1)
    assert lay["q"].address == BASE and lay["k"].address == BASE + 2**32


def test_packed_qkv_views_go_zero_copy(gpu):
    # q, k, v = qkv.unbind(2) of a packed [B, S, 3, H, D] tensor: strided views, read in place
    b, s, h, d = 2, 1000, 4, 64
    st = contiguous_strides((b, s, 3, h, d))
    views = [tensor((b, s, h, d), strides=(st[0], st[1], st[3], st[4]), ptr=BASE + i * h * d * 2) for i in range(3)]
    assert oa.plan(*views).zero_copy
    ops.attention(*views, causal=True)
    assert gpu.copies == []
    lay = {name: l for name, _, l in gpu.maps}
    assert lay["k"].address == BASE + h * d * 2
    assert lay["k"].global_strides == (3 * h * d * 2, d * 2, s * 3 * h * d * 2)
    assert gpu.kernels == [AttentionSpec("bf16", 64, True)]


def test_inputs_that_tma_cannot_read_are_copied(gpu):
    b, s, h, d = 1, 77, 2, 128
    q, k, v = qkv(b=b, sq=s, sk=s, hq=h, hkv=h, d=d)
    # head dim not contiguous (a transposed view), base off a 16-byte boundary, a row stride of 136 bytes
    strided_d = tensor((b, s, h, d), strides=(s * h * d, 1, s, s * h))
    misaligned = tensor((b, s, h, d), ptr=BASE + 2**34 + 2)
    padded_rows = tensor((b, s, h, d), strides=(s * h * (d + 4), h * (d + 4), d + 4, 1), ptr=BASE + 2**35)
    for case, args, name, words in (("strided d", (strided_d, k, v), "q", "stride 1"),
                                     ("misaligned", (q, misaligned, v), "k", "16-byte aligned"),
                                     ("row stride", (q, k, padded_rows), "v", "multiple of 16 bytes")):
        gpu.copies.clear()
        gpu.maps.clear()
        p = oa.plan(*args)
        assert [n for n, r in p.copies.items() if r] == [name], case
        assert words in p.copies[name], (case, p.copies[name])
        ops.attention(*args)
        assert [n for n, _ in gpu.copies] == [name], case
        copied = {n: t for n, t, _ in gpu.maps}[name]
        assert copied.strides == contiguous_strides((b, s, h, d)) and copied.ptr >= BASE + 2**36   # the fresh copy


def test_copy_needs_a_framework_that_can_copy():
    t = tensor((1, 10, 1, 64), strides=(640, 1, 64, 10), framework="cai")
    with pytest.raises(ValueError, match="copies only torch and cupy tensors"):
        oa.copy_contiguous(t, "q", "reason")


# ---- parameters ----------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_params_in_contract_order(gpu, layout):
    b, sq, sk, hq, hkv, d = 3, 1000, 4096, 16, 2, 128           # GQA 8
    q, k, v = qkv(layout, b, sq, sk, hq, hkv, d, "f16")
    o = ops.attention(q, k, v, causal=True, layout=layout, scale=0.1)
    (rec, stream), = gpu.launches
    assert stream == 0 and o[0] == "allocated" and isinstance(rec["args"]["out"], driver.CUtensorMap)
    assert rec["grid"] == (min(8 * 16 * 3, SMS), 1, 1)            # persistent: a CTA per SM, at most one per tile
    assert gpu.kernels == [AttentionSpec("f16", 128, True)]
    names = [n for n, _ in AttentionSpec("f16", 128, True).params]
    values = dict(zip(names, rec["values"]))
    assert (values["Sq"], values["Sk"], values["Hq"], values["Hkv"]) == (sq, sk, hq, hkv)
    # out through its own tensor map: (D, S, H, B) over the allocated tensor, a box of one warpgroup's 64 rows
    lay = {name: l for name, _, l in gpu.maps}
    assert lay["out"].global_dims == (d, sq, hq, b) and lay["out"].box == (64, 64, 1, 1)
    assert lay["out"].global_strides == ((hq * d * 2, d * 2, sq * hq * d * 2) if layout == "bshd"
                                         else (d * 2, sq * d * 2, hq * sq * d * 2))
    assert values["lse"] == 0                                     # no LSE asked: a null pointer, no stores
    assert values["scale_log2"] == float(np.float32(0.1 * LOG2E))
    # the causal persistent kernel's own two: the batch, and the table of the host's deal of its tiles over the
    # SMS CTAs (uploaded once for these sizes)
    assert values["B"] == b
    table, = gpu.tables
    assert values["tiles"] == table.ptr
    assert table.values == oa.causal_table({"Sq": sq, "Sk": sk, "Hq": hq, "Hkv": hkv, "B": b}, 128, 128, SMS, d, "f16")
    assert rec["types"] == (None, None, None, None, ctypes.c_void_p) + (ctypes.c_int32,) * 4 + \
        (ctypes.c_float, ctypes.c_int32, ctypes.c_void_p)
    assert all(isinstance(x, driver.CUtensorMap) for x in rec["values"][:4])


def test_return_lse_allocates_float32_b_hq_sq(gpu):
    q, k, v = qkv("bhsd", b=2, sq=63, sk=1, hq=4, hkv=1, d=256)
    o, lse = ops.attention(q, k, v, return_lse=True, layout="bhsd")
    (rec, _), = gpu.launches
    assert lse == ("allocated", rec["args"]["lse"]) and rec["args"]["lse"] != 0
    assert rec["args"]["scale_log2"] == float(np.float32(LOG2E / 16))
    assert gpu.kernels == [AttentionSpec("bf16", 256, False)] and gpu.kernels[0].block_n == 80


def test_out_is_checked_and_stored_through_its_own_tensor_map(gpu):
    b, sq, hq, d = 2, 100, 8, 128
    q, k, v = qkv(b=b, sq=sq, hq=hq, d=d)
    # out as a view into a wider buffer [B, S, H, D + 64]: last dim contiguous, other strides arbitrary
    wide = (b, sq, hq, d + 64)
    ws = contiguous_strides(wide)
    out = tensor((b, sq, hq, d), strides=ws, ptr=BASE + 2**35)
    got = ops.attention(q, k, v, out=out)
    assert got is None                                # the fake out's obj: the caller's object comes back
    lay = {name: l for name, _, l in gpu.maps}["out"]          # TMA writes the view through its strides
    assert lay.address == BASE + 2**35 and lay.global_strides == tuple(2 * x for x in (ws[1], ws[2], ws[0]))
    bad = [
        (tensor((b, sq, hq, 64), ptr=BASE + 2**35), "must be [2, 100, 8, 128] bf16"),
        (tensor((b, sq, hq, d), "f16", ptr=BASE + 2**35), "must be [2, 100, 8, 128] bf16"),
        (tensor((b, hq, sq, d), ptr=BASE + 2**35), "q's layout 'bshd'"),
        (tensor((b, sq, hq, d), strides=(sq * hq * d, hq * d, 1, hq), ptr=BASE + 2**35), "head dim must be contiguous"),
        (tensor((b, sq, hq, d), ptr=BASE + 2**35 + 2), "16-byte boundary"),
        (tensor((b, sq, hq, d), strides=(sq * hq * 132, hq * 132, 132, 1), ptr=BASE + 2**35), "multiples of 8"),
        (tensor((b, sq, hq, d), ptr=BASE + 2**32 + 4096), "out overlaps k"),
        (tensor((b, sq, hq, d), ptr=BASE, device=1), "cuda:1"),
    ]
    gpu.launches.clear()
    for o, words in bad:
        with pytest.raises(ValueError) as info:
            ops.attention(q, k, v, out=o)
        assert words in str(info.value), (words, str(info.value))
    assert gpu.launches == []


# ---- empty problems ------------------------------------------------------------------------

def test_sq_zero_gives_an_empty_output_without_launch(gpu):
    q, k, v = qkv(sq=0)
    o, lse = ops.attention(q, k, v, return_lse=True)
    assert o[0] == "allocated" and lse[0] == "allocated"
    assert gpu.kernels == [] and gpu.launches == [] and gpu.fills == []
    ops.attention(*qkv(b=0))
    ops.attention(*qkv(hq=0, hkv=0))
    assert gpu.launches == []


def test_sk_zero_gives_zeros_and_minus_inf_without_launch(gpu):
    q, k, v = qkv(sk=0)
    o, lse = ops.attention(q, k, v, return_lse=True)
    assert gpu.fills == [(o[1], 0.0), (lse[1], -math.inf)]
    assert gpu.kernels == [] and gpu.launches == []


# ---- memoization ---------------------------------------------------------------------------

def test_repeated_calls_reuse_the_prepared_launch(gpu):
    q, k, v = qkv()
    out = tensor(q.shape, ptr=BASE + 2**35)
    for _ in range(3):
        ops.attention(q, k, v, out=out)
    assert len(gpu.prepared) == 1 and len(gpu.launches) == 3 and len(gpu.maps) == 4
    ops.attention(q, k, v, out=out, scale=0.5)                     # another scale: another launch record
    assert len(gpu.prepared) == 2 and len(gpu.maps) == 4           # same tensors: tensor maps reused
    misaligned = tensor(k.shape, ptr=k.ptr + 2)
    for _ in range(2):
        ops.attention(q, misaligned, v, out=out)                  # copies are fresh each call: never memoized
    assert len(gpu.prepared) == 4 and len(gpu.copies) == 2


# ---- the kernel from an offline cache ------------------------------------------------------

def test_get_kernel_offline_from_the_cache(tmp_path, monkeypatch):
    spec = AttentionSpec("f16", 64, True)
    art = fake_artifact(spec, key="a" * 64)
    cache = KernelCache(tmp_path)
    cache.put(art)
    kernels.write_index(cache, spec, art.key)
    monkeypatch.setenv("WARPLOOM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPLOOM_OFFLINE", "1")
    monkeypatch.setattr(kernels, "_memo", {})
    got = kernels.get_kernel(AttentionSpec("f16", 64, True, block_n=128))
    assert got.name == "wl_attn_f16_d64_128x128_s2_causal_ov_persistent_q2" and got.key == art.key
    assert (tmp_path / "index" / f"{spec.lookup_id}.json").is_file()
    with pytest.raises(MissingKernelError) as info:
        kernels.get_kernel(AttentionSpec("bf16", 256))
    assert "wl_attn_bf16_d256_128x80_s2_ov-sm_90a" in str(info.value)
    assert "warploom precompile --target sm_90a" in str(info.value) and "head dim 256" in str(info.value)


def test_precompile_reports_a_failing_kernel_and_goes_on(tmp_path, monkeypatch, capsys):
    from warploom.tools import cli
    built = []

    def fake_get_kernel(spec, cache=None):
        if isinstance(spec, AttentionSpec) and spec.head_dim == 256:
            raise ValueError("smem plan needs too much\nsecond line")
        built.append(spec)
        return fake_artifact(spec) if isinstance(spec, AttentionSpec) else fake_artifact(
            AttentionSpec(), name=spec.kernel_name)
    monkeypatch.setattr(kernels, "get_kernel", fake_get_kernel)
    assert cli.main(["precompile", "--target", "sm_90a", "--cache", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    total = len(kernels.precompile_set("sm_90a"))      # 24 GEMMs, 30 attention, and what the tuning table adds
    assert len(built) == total - 8 and total >= 54     # the head dim 256 ones: padded and packed, 2 dtypes x 2 masks
    assert "wl_attn_bf16_d256_128x80_s2_ov-sm_90a" in out and "FAILED: smem plan needs too much" in out
    assert "second line" not in out and f"8 of {total} kernels failed" in err and "Traceback" not in err
    built.clear()
    # the 12 tcgen05 GEMMs and the 16 FA4-style attention kernels (padded and packed)
    assert cli.main(["precompile", "--target", "sm_100a", "--cache", str(tmp_path)]) == 0
    assert len(built) == 12 + 16 and all(s.target == "sm_100a" for s in built)


def test_ops_attention_imports_without_mlir():
    """The GPU box runs ops.attention from an AOT cache, with no MLIR installed."""
    import subprocess
    import sys
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'mlir' or name.startswith('mlir.'):\n"
            "            raise ImportError('mlir is blocked in this test')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import warploom.ops as ops\n"
            "from warploom.kernels import STANDARD_ATTENTION_KERNELS\n"
            "assert callable(ops.attention) and callable(ops.attention_varlen)\n"
            "assert len(STANDARD_ATTENTION_KERNELS['sm_90a']) == 30\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_explain_attention(monkeypatch, capsys):
    from warploom.tools import cli
    asked = []

    def fake_get_kernel(spec, cache=None):
        asked.append(spec)
        if spec.head_dim == 64:
            raise MissingKernelError(spec.lookup_id, spec.describe(), "warploom precompile --target sm_90a --cache C")
        return fake_artifact(spec, meta={"smem_plan": "SMEM", "barrier_plan": "BARRIERS", "roles": "ROLES"})
    monkeypatch.setattr(kernels, "get_kernel", fake_get_kernel)
    assert cli.main(["explain", "--op", "attention", "--head-dim", "256", "--causal", "--dtype", "f16"]) == 0
    out = capsys.readouterr().out
    assert asked[-1] == AttentionSpec("f16", 256, True, 80, 2)
    assert "kernel wl_attn_f16_d256_128x80_s2_causal_ov" in out and "SMEM" in out and "ROLES" in out
    assert cli.main(["explain", "--op", "attention", "--head-dim", "64"]) == 1
    err = capsys.readouterr().err
    assert "warploom explain: no compiled kernel" in err and "Traceback" not in err
    with pytest.raises(SystemExit):
        cli.main(["explain", "--op", "attention", "--head-dim", "96"])


@pytest.mark.parametrize("argv, message", [
    (["explain", "--op", "attention", "--head-dim", "128", "--stages", "5"],
     "smem plan needs 361648 B (q 32768 B, k 163840 B, v 163840 B"),
    (["explain", "--op", "attention", "--head-dim", "64", "--block-n", "300"], "block-n = 300"),
    (["explain", "--block-n", "100"], "block-n = 100"),
])
def test_explain_reports_a_refused_config_without_a_traceback(argv, message, capsys, tmp_path, monkeypatch):
    from warploom.tools import cli
    monkeypatch.setenv("WARPLOOM_CACHE_DIR", str(tmp_path))
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("warploom explain: cannot build the ") and message in err, err
    assert "Traceback" not in err and "build.py" not in err


def test_pick_spec_takes_the_tall_tile_for_long_non_causal_head_dim_64():
    """192 query rows (three consumer warpgroups) for head dim 64, non-causal, from Sq 4096 on (run 44); the 128-row
    tile otherwise, and whenever a schedule is forced."""
    import warploom.ops_attention as oa
    assert oa.pick_spec("bf16", 64, False, seqlen_q=4096).kernel_name == "wl_attn_bf16_d64_192x128_s2_ov_persistent_q2"
    assert oa.pick_spec("f16", 64, False, seqlen_q=16384).block_m == 192
    for args in [("bf16", 64, False), ("bf16", 64, True), ("bf16", 128, False), ("bf16", 256, False)]:
        assert oa.pick_spec(*args, seqlen_q=4095 if args[1] == 64 and not args[2] else 16384).block_m == 128
    assert oa.pick_spec("bf16", 64, False).block_m == 128                   # no length given
    old = oa.SCHEDULE
    try:
        oa.SCHEDULE = "persistent"
        assert oa.pick_spec("bf16", 64, False, seqlen_q=8192).block_m == 128
    finally:
        oa.SCHEDULE = old


def test_pick_spec_takes_stream_k_where_the_persistent_deal_idles():
    """The stream-K kernel (non-causal, head dims 64 and 128, 128-row tiles) where the persistent walk would leave
    at least ATTENTION_STREAMK_MIN_IDLE of the SMs' time idle (run 57: 64 tiles on 132 SMs 1.39x, 200 tiles 1.11x)
    and the runs are long enough; the persistent one at a few per cent idle (the grid's 2048 tiles), with short
    keys (runs of a block or two), causal, head dim 256, or with no sizes."""
    import warploom.ops_attention as oa
    from warploom.kernels import ATTENTION_STREAMK_MIN_IDLE, attention_idle_share, streamk_attention
    assert attention_idle_share(64, 132) == pytest.approx(1 - 64 / 132)
    assert attention_idle_share(2048, 132) == pytest.approx(1 - 2048 / (132 * 16))
    assert attention_idle_share(264, 132) == 0.0 and attention_idle_share(0, 132) == 0.0
    assert ATTENTION_STREAMK_MIN_IDLE > attention_idle_share(2048, 132)
    sizes = dict(seqlen_k=16384, sms=132)
    assert oa.pick_spec("bf16", 128, False, seqlen_q=1024, pairs=8, **sizes).schedule == "streamk"       # 64 tiles
    assert oa.pick_spec("f16", 128, False, seqlen_q=3200, pairs=8, seqlen_k=8192, sms=132).schedule == "streamk"
    assert oa.pick_spec("bf16", 64, False, seqlen_q=1024, pairs=8, **sizes).schedule == "streamk"
    for args, sq, sk, pairs in [(("bf16", 128, False), 8192, 8192, 32), (("bf16", 128, True), 1024, 16384, 8),
                                (("bf16", 256, False), 1024, 16384, 8), (("bf16", 128, False), 1024, 16384, 132),
                                (("bf16", 128, False), 100, 300, 16)]:     # 16 tiles of 3 key blocks: runs of 1
        assert oa.pick_spec(*args, seqlen_q=sq, seqlen_k=sk, pairs=pairs, sms=132).schedule != "streamk", (args, sq)
    assert oa.pick_spec("bf16", 128, False, seqlen_q=1024).schedule == "persistent"      # no sizes: persistent
    assert oa.pick_spec("bf16", 64, False, seqlen_q=4096, pairs=1, **sizes).block_m == 192   # the tall tile first
    assert not streamk_attention(128, True, 64, 128, 132) and streamk_attention(128, False, 64, 128, 132)
    assert not streamk_attention(128, False, 64, 2, 132)     # 128 iterations on 128 CTAs: runs of one block
    old = oa.SCHEDULE
    try:
        oa.SCHEDULE = "persistent"
        assert oa.pick_spec("bf16", 128, False, seqlen_q=1024, pairs=8, **sizes).schedule == "persistent"
    finally:
        oa.SCHEDULE = old

