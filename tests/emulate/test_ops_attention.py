"""warploom.ops.attention end to end on the CPU: the real compiled kernel's contract, the runtime's tensor maps and
parameters, launched on the emulator.

"Device memory" is host numpy memory: each input is a DeviceTensor over a numpy buffer (its real address, shape
and strides, views included). ops.attention validates, plans the copies, encodes the tensor maps (here: the
Python TMA check, whose arguments are kept) and packs the parameters with the real pack_params; the launcher
then rebuilds from those very arguments what the GPU would see (each tensor map's (D, S, H, B) view of memory at
its address and byte strides, out and lse as raw memory at their pointers, the scalars) and runs the lowered
kernel on the emulator. So a wrong stride, a swapped layout axis, a wrong out stride or scale_log2, or a
non-null lse pointer where none was asked, shows as a wrong result here, before any GPU run.
Bounds: those of tests/emulate/test_attention.py (check()).
"""
import numpy as np
import pytest
from cuda.bindings import driver

from warploom import ops_attention as oa
from warploom.build import compile_attention, planned_attention_program
from warploom.emulate.judge import judge_attention
from warploom.emulate.front import attention_kernel
from warploom.emulate.launch import emulate_launch
from warploom.emulate.machine import NUMPY_ELEMS
from warploom.reference.ops import attention, round_to
from warploom.runtime import host
from warploom.runtime.launch import pack_params
from warploom.runtime.tensormap import check_tma_layout
from warploom.runtime.tensors import DeviceTensor, contiguous_strides

from .test_attention import check

ALIGN = 256


class HostGPU:
    """numpy buffers as device memory; ops.attention's GPU-facing calls, recorded and run on the emulator."""

    def __init__(self):
        self.buffers, self.maps, self.copies, self.launches, self.artifacts = [], {}, [], 0, {}

    # memory
    def alloc(self, shape, dtype: str, fill=np.nan) -> np.ndarray:
        dt = np.dtype(NUMPY_ELEMS.get(dtype, np.float32))
        n = int(np.prod(shape)) * dt.itemsize
        raw = np.empty(n + ALIGN, np.uint8)
        off = (-raw.ctypes.data) % ALIGN
        arr = raw[off:off + n].view(dt).reshape(shape)
        arr[...] = fill
        self.buffers.append(arr)
        return arr

    def tensor(self, arr: np.ndarray, base: np.ndarray | None = None) -> DeviceTensor:
        """A DeviceTensor of arr (a view into one of our buffers)."""
        eb = arr.itemsize
        dtype = next(k for k, v in NUMPY_ELEMS.items() if np.dtype(v) == arr.dtype) if arr.dtype != np.float32 \
            else "f32"
        return DeviceTensor(arr.ctypes.data, arr.shape, tuple(s // eb for s in arr.strides), dtype, 0, "fake", arr)

    def find(self, addr: int):
        for b in self.buffers:
            lo = b.ctypes.data
            if lo <= addr < lo + b.nbytes:
                return b, addr - lo
        raise AssertionError(f"address 0x{addr:x} is in no buffer")

    def view(self, addr, shape, byte_strides, dt):
        base, off = self.find(addr)
        return np.ndarray(shape, dt, buffer=base.reshape(-1).view(np.uint8), offset=off, strides=byte_strides)

    def flat_from(self, addr, dt):
        base, off = self.find(addr)
        flat = base.reshape(-1).view(np.uint8)[off:]
        return flat[: len(flat) // np.dtype(dt).itemsize * np.dtype(dt).itemsize].view(dt)

    # what ops.attention calls
    def empty_like_framework(self, ref, shape, dtype):
        return self.tensor(self.alloc(shape, dtype))

    def copy_contiguous(self, t, name, reason):
        self.copies.append(name)
        src = self.view(t.ptr, t.shape, tuple(s * t.elem_bytes for s in t.strides), NUMPY_ELEMS[t.dtype])
        dst = self.alloc(t.shape, t.dtype)
        dst[...] = src
        return self.tensor(dst)

    def fill(self, t, value):
        t.obj[...] = value

    def upload_i32(self, values, device):
        """A causal persistent kernel's tile table, in our memory (the launch reads it from its address)."""
        arr = self.alloc((len(values),), "f32", fill=0).view(np.int32)
        arr[...] = values
        return type("Table", (), {"ptr": arr.ctypes.data})()

    def get_kernel(self, spec):
        if spec not in self.artifacts:
            self.artifacts[spec] = (compile_attention(spec), spec)
        return self.artifacts[spec][0]

    def encode_tiled(self, map_spec, t, order):
        tm = driver.CUtensorMap()
        self.maps[id(tm)] = (tm, check_tma_layout(map_spec, t, order))
        return tm

    def __call__(self):
        return self

    def prepare(self, artifact, sizes, args, device=None):
        pack_params(artifact, args)                   # every argument checked as for a real launch
        spec = next(s for a, s in self.artifacts.values() if a is artifact)
        kernel = attention_kernel(planned_attention_program(spec.elem, spec.head_dim, spec.causal, spec.block_n,
                                                            schedule=spec.schedule))
        assert kernel.name == artifact.name
        dt = NUMPY_ELEMS[spec.elem]
        eargs = {}
        for name in ("q", "k", "v", "out"):       # out too: the kernel stores O through its tensor map (a view)
            lay = self.maps[id(args[name])][1]
            d, s, h, b = lay.global_dims
            ss, sh, sb = lay.global_strides
            eargs[name] = self.view(lay.address, (b, h, s, d), (sb, sh, ss, np.dtype(dt).itemsize), dt)
        eargs["lse"] = None if args["lse"] == 0 else self.flat_from(args["lse"], np.float32)
        if "tiles" in args:                           # a causal persistent kernel's deal
            eargs["tiles"] = self.flat_from(args["tiles"], np.int32)
        for n in ("Sq", "Sk", "Hq", "Hkv", "scale_log2", "B", "tile_order"):
            if n in args:                             # B and tile_order: a persistent kernel's
                eargs[n] = args[n]
        gpu = self

        class Prepared:
            def launch(self, stream):
                gpu.launches += 1
                emulate_launch(kernel, eargs, sizes, seed=gpu.launches)
        return Prepared()


SMS = 3     # the host GPU's SM count: a persistent kernel's CTAs each walk several tiles


@pytest.fixture
def gpu(monkeypatch):
    g = HostGPU()
    monkeypatch.setattr(oa, "get_kernel", g.get_kernel)
    monkeypatch.setattr(oa, "encode_tiled", g.encode_tiled)
    monkeypatch.setattr(oa, "empty_like_framework", g.empty_like_framework)
    monkeypatch.setattr(oa, "copy_contiguous", g.copy_contiguous)
    monkeypatch.setattr(host, "fill", g.fill)
    monkeypatch.setattr(oa, "default_launcher", g)
    monkeypatch.setattr(host, "upload_i32", g.upload_i32)
    monkeypatch.setattr(oa, "_sm_count", lambda device: SMS)
    monkeypatch.setattr(host, "target_of", lambda device: "sm_90a")     # the emulated GPU: a Hopper one
    for memo in (oa._PREPARED, oa._TENSOR_MAPS, oa._CHECKED, oa._TABLES):
        memo.clear()
    yield g
    for memo in (oa._PREPARED, oa._TENSOR_MAPS, oa._CHECKED, oa._TABLES):
        memo.clear()


def random_into(gpu, shape, elem, rng):
    arr = gpu.alloc(shape, elem)
    arr[...] = round_to(rng.standard_normal(shape), elem)
    return arr


@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_contiguous_gqa_causal_with_lse(gpu, layout):
    """Sq > Sk (the first rows see no key), 2 query blocks, GQA 2, both layouts."""
    rng = np.random.default_rng(1)
    b, sq, sk, hq, hkv, d = 1, 130, 70, 2, 1, 64
    shape = (lambda s, h: (b, s, h, d)) if layout == "bshd" else (lambda s, h: (b, h, s, d))
    q, k, v = (random_into(gpu, shape(s, h), "bf16", rng) for s, h in ((sq, hq), (sk, hkv), (sk, hkv)))
    out, lse = oa.attention(*(gpu.tensor(x) for x in (q, k, v)), causal=True, return_lse=True, layout=layout)
    assert gpu.launches == 1 and gpu.copies == []
    check(out, lse, q, k, v, "bf16", True, layout)


def test_packed_views_strided_out_no_lse_and_a_scale(gpu):
    """q, k, v as views of a packed [B, S, 3, H, D] tensor (read in place), out a view into a wider buffer, no
    LSE (a null pointer: any store through it would fault in the emulator), an explicit scale, f16."""
    rng = np.random.default_rng(2)
    b, s, h, d = 1, 100, 2, 64
    qkv = random_into(gpu, (b, s, 3, h, d), "f16", rng)
    q, k, v = (qkv[:, :, i] for i in range(3))
    wide = gpu.alloc((b, s, h, d + 64), "f16")
    out_view = wide[..., :d]
    got = oa.attention(*(gpu.tensor(x) for x in (q, k, v)), out=gpu.tensor(out_view), scale=0.3)
    assert gpu.copies == [] and got is out_view
    ref = attention(q, k, v, scale=0.3, layout="bshd")
    assert np.isnan(wide[..., d:].astype(np.float64)).all()            # nothing written outside out
    o = out_view.astype(np.float64)
    assert not np.isnan(o).any()
    vmax = np.abs(v.astype(np.float64)).max()
    u = 2.0 ** -11
    assert (np.abs(o - ref) <= u * vmax + u * np.abs(ref) + 1e-4).all()


def test_misaligned_input_is_copied_then_launched(gpu):
    rng = np.random.default_rng(3)
    b, s, h, d = 1, 65, 1, 128
    q = random_into(gpu, (b, h, s, d), "bf16", rng)
    flat = random_into(gpu, (b * h * s * d + 1,), "bf16", rng)
    k = flat[1:].reshape(b, h, s, d)                                  # 2 bytes off a 16-byte boundary
    v = random_into(gpu, (b, h, s, d), "bf16", rng)
    out, lse = oa.attention(*(gpu.tensor(x) for x in (q, k, v)), layout="bhsd", return_lse=True)
    assert gpu.copies == ["k"]
    check(out, lse, q, k, v, "bf16", False, "bhsd")


def test_sk_zero_launches_nothing(gpu):
    q = gpu.alloc((1, 5, 1, 64), "bf16", fill=1.0)
    k = gpu.alloc((1, 0, 1, 64), "bf16")
    out, lse = oa.attention(gpu.tensor(q), gpu.tensor(k), gpu.tensor(k), return_lse=True)
    assert gpu.launches == 0 and (out.astype(np.float32) == 0).all() and np.isneginf(lse).all()


def test_tensor_strides_of_views():
    """The helper above sees views as the runtime does (element strides, the view's own address)."""
    g = HostGPU()
    a = g.alloc((2, 10, 3, 4, 64), "bf16")
    t = g.tensor(a[:, :, 1])
    assert t.ptr == a.ctypes.data + 4 * 64 * 2 and t.strides == (10 * 3 * 4 * 64, 3 * 4 * 64, 64, 1)
    assert contiguous_strides((2, 3)) == (3, 1)


def test_a_compiled_attention_kernel_runs_on_its_tensors(gpu):
    """warploom.compile(graph)(q, k, v): the attention the graph declares (its layout, mask and scale), through
    ops.attention with the compiled kernel's spec; a call its kernel does not take is refused before any launch."""
    import warploom
    from warploom.build import attention_graph
    from warploom.kernels import AttentionSpec

    spec = AttentionSpec("bf16", 64, True)
    kernel = warploom.compile(attention_graph(spec), target="sm_90a")
    rng = np.random.default_rng(4)
    q, k, v = (random_into(gpu, (1, 2, s, 64), "bf16", rng) for s in (100, 90, 90))     # bhsd, as the graph says
    out = kernel(*(gpu.tensor(x) for x in (q, k, v)))
    assert gpu.launches == 1
    verdict = judge_attention(out, None, q, k, v, "bf16", True, "bhsd")
    assert verdict.ok, verdict.problem
    wide = random_into(gpu, (1, 2, 100, 128), "bf16", rng)
    with pytest.raises(ValueError, match=r"the kernel is a bf16 attention forward, head dim 64, causal.*the call is "
                                         r"bf16, head dim 128"):
        kernel(*(gpu.tensor(x) for x in (wide, wide, wide)))
    assert gpu.launches == 1
