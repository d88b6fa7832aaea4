"""warploom.runtime on a real GPU: hand-written PTX -> nvJitLink cubin -> KernelArtifact ->
Launcher, on torch's current stream; TMA descriptors encoded from torch tensors and passed
BY VALUE to a kernel that copies a tile through shared memory.

Run on the GPU machine: python -m pytest -q -m gpu tests/gpu/test_runtime_gpu.py
"""
import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch.cuda is not available", allow_module_level=True)

from cuda.bindings import driver  # noqa: E402

from warploom.runtime import _cuda  # noqa: E402

from warploom.runtime import (DeviceBuffer, KernelArtifact, KernelCache, Launcher, ParamSpec,  # noqa: E402
                              TensorMapSpec, TmaLayoutError, as_device_tensor, current_stream, encode_tiled,
                              empty_like_framework)
from warploom.runtime.launch import TargetMismatchError  # noqa: E402

# out[i] = i for i < n: one thread per element.
IOTA_PTX = r"""
.version 8.0
.target sm_90a
.address_size 64

.visible .entry wl_iota(
    .param .u64 out_ptr,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [out_ptr];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.s32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r5;
DONE:
    ret;
}
"""

# One CTA of 128 threads: TMA-load the 64x64 bf16 box at coordinates (c0, c1) (innermost first)
# into shared memory, wait on an mbarrier, then copy the 8 KiB tile to out, row-major.
TMA_COPY_PTX = r"""
.version 8.0
.target sm_90a
.address_size 64

.visible .entry wl_tma_copy(
    .param .align 64 .b8 tmap[128],
    .param .u64 out_ptr,
    .param .u32 c0,
    .param .u32 c1
)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<12>;
    .shared .align 1024 .b8 tile[8192];
    .shared .align 8 .b64 bar;

    mov.u32 %r1, %tid.x;
    mov.u32 %r2, bar;
    mov.u32 %r3, tile;
    mov.u64 %rd1, tmap;
    cvta.param.u64 %rd2, %rd1;
    setp.eq.u32 %p1, %r1, 0;
    @!%p1 bra SYNC;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    fence.mbarrier_init.release.cluster;
    fence.proxy.async.shared::cta;
SYNC:
    bar.sync 0;
    @!%p1 bra WAIT;
    ld.param.u32 %r4, [c0];
    ld.param.u32 %r5, [c1];
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%r2], 8192;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [%rd2, {%r4, %r5}], [%r2];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
    @!%p2 bra WAIT;

    ld.param.u64 %rd4, [out_ptr];
    cvta.to.global.u64 %rd5, %rd4;
    mov.u32 %r6, %r1;
COPY:
    setp.ge.u32 %p3, %r6, 2048;
    @%p3 bra DONE;
    shl.b32 %r7, %r6, 2;
    add.u32 %r8, %r3, %r7;
    ld.shared.u32 %r9, [%r8];
    mul.wide.u32 %rd6, %r6, 4;
    add.s64 %rd7, %rd5, %rd6;
    st.global.u32 [%rd7], %r9;
    add.u32 %r6, %r6, 128;
    bra COPY;
DONE:
    ret;
}
"""


def ptx_to_cubin(ptx: str, arch: str = "sm_90a") -> bytes:
    from cuda.bindings import nvjitlink as nj
    h = nj.create(2, [f"-arch={arch}", "-O3"])
    try:
        data = ptx.encode()
        try:
            nj.add_data(h, nj.InputType.PTX, data, len(data), "test.ptx")
            nj.complete(h)
        except Exception as e:
            size = nj.get_error_log_size(h)
            log = bytearray(size)
            nj.get_error_log(h, log)
            raise RuntimeError(f"nvJitLink failed: {e}\n{log.decode(errors='replace')}") from e
        cubin = bytearray(nj.get_linked_cubin_size(h))
        nj.get_linked_cubin(h, cubin)
        return bytes(cubin)
    finally:
        nj.destroy(h)


def iota_artifact(cluster=(1, 1, 1), smem_bytes=0, key="test-iota") -> KernelArtifact:
    return KernelArtifact(name="wl_iota", target="sm_90a", cubin=ptx_to_cubin(IOTA_PTX), ptx=IOTA_PTX,
                          smem_bytes=smem_bytes, block=(128, 1, 1), cluster=cluster,
                          grid=(("cdiv", "N", 128), ("const", 1), ("const", 1)),
                          params=[ParamSpec("out", "ptr"), ParamSpec("n", "i32")], tensor_maps={},
                          meta={}, key=key)


@pytest.fixture(scope="module")
def launcher():
    return Launcher()


def test_iota_on_torch_stream(launcher, tmp_path):
    art = iota_artifact()
    # Through the cache too, so what launches is what was loaded from disk.
    cache = KernelCache(tmp_path)
    cache.put(art)
    art = cache.get(art.key)
    n = 1000
    out = torch.full((n + 24,), -1, dtype=torch.int32, device="cuda")
    t = as_device_tensor(out)
    assert t.framework == "torch" and t.dtype == "i32"
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        launcher.launch(art, {"N": n}, {"out": t.ptr, "n": n}, stream=current_stream(t), device=t.device)
    stream.synchronize()
    expect = torch.arange(n, dtype=torch.int32, device="cuda")
    assert torch.equal(out[:n], expect)
    assert (out[n:] == -1).all()  # the guard i < n held


def test_cluster_and_large_smem_paths(launcher):
    # cuLaunchKernelEx with a 2-CTA cluster, and > 48 KiB dynamic smem (cuFuncSetAttribute).
    art = iota_artifact(cluster=(2, 1, 1), smem_bytes=100 * 1024, key="test-iota-cluster")
    n = 4 * 128
    out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    launcher.launch(art, {"N": n}, {"out": out.data_ptr(), "n": n},
                    stream=torch.cuda.current_stream().cuda_stream, device=out.device.index)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.arange(n, dtype=torch.int32, device="cuda"))


def test_device_buffer_and_dlpack(launcher):
    art = iota_artifact()
    buf = DeviceBuffer((256,), "i32", device=torch.cuda.current_device())
    t = as_device_tensor(buf)
    assert t.framework == "cai" and t.dtype == "i32" and t.ptr == buf.ptr
    launcher.launch(art, {"N": 256}, {"out": t, "n": 256}, stream=0, device=t.device)
    back = bytearray(1024)
    with _cuda.on_device(t.device):
        err, = driver.cuMemcpyDtoH(back, buf.ptr, 1024)
    assert err == driver.CUresult.CUDA_SUCCESS
    assert list(memoryview(back).cast("i")) == list(range(256))

    class OnlyDLPack:  # a producer warploom knows only through DLPack
        def __init__(self, x):
            self.x = x

        def __dlpack__(self, **kw):
            return self.x.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.x.__dlpack_device__()

    x = torch.zeros(8, 16, dtype=torch.bfloat16, device="cuda")
    t = as_device_tensor(OnlyDLPack(x))
    assert t.ptr == x.data_ptr() and t.dtype == "bf16" and t.shape == (8, 16) and t.framework == "torch"
    out = empty_like_framework(t, (4, 4), "f32")
    assert out.obj.dtype == torch.float32 and out.obj.is_cuda


def test_cupy_interop(launcher):
    cupy = pytest.importorskip("cupy")
    a = cupy.full((300,), -1, dtype=cupy.int32)
    t = as_device_tensor(a)
    assert t.framework == "cupy" and t.ptr == a.data.ptr and t.dtype == "i32"
    launcher.launch(iota_artifact(), {"N": 300}, {"out": t, "n": 300}, stream=current_stream(t), device=t.device)
    cupy.cuda.get_current_stream().synchronize()
    assert (cupy.asnumpy(a) == list(range(300))).all()
    half = cupy.zeros((4, 6), dtype=cupy.float16)[:, ::2]
    t = as_device_tensor(half)
    assert t.dtype == "f16" and t.strides == (6, 2)


def test_encode_bf16_tensor_map():
    x = torch.randn(256, 512, dtype=torch.bfloat16, device="cuda")
    spec = TensorMapSpec("a_map", "A", "bf16", (64, 128), 128, ("K", "M"))
    tmap = encode_tiled(spec, as_device_tensor(x), [1, 0])
    assert isinstance(tmap, driver.CUtensorMap)
    with pytest.raises(TmaLayoutError, match="16-byte aligned"):
        encode_tiled(spec, as_device_tensor(x[:, 1:]), [1, 0])


def test_tma_map_passed_by_value(launcher):
    art = KernelArtifact(
        name="wl_tma_copy", target="sm_90a", cubin=ptx_to_cubin(TMA_COPY_PTX), ptx=TMA_COPY_PTX, smem_bytes=0,
        block=(128, 1, 1), cluster=(1, 1, 1), grid=(("const", 1), ("const", 1), ("const", 1)),
        params=[ParamSpec("src", "tensormap"), ParamSpec("out", "ptr"), ParamSpec("c0", "i32"),
                ParamSpec("c1", "i32")],
        tensor_maps={"src": TensorMapSpec("src", "A", "bf16", (64, 64), 0, ("K", "M"))}, meta={}, key="test-tma")
    src = torch.randn(128, 192, dtype=torch.bfloat16, device="cuda")
    out = torch.zeros(64, 64, dtype=torch.bfloat16, device="cuda")
    tmap = encode_tiled(art.tensor_maps["src"], as_device_tensor(src), [1, 0])
    launcher.launch(art, {}, {"src": tmap, "out": out.data_ptr(), "c0": 128, "c1": 64},
                    stream=torch.cuda.current_stream().cuda_stream, device=0)
    torch.cuda.synchronize()
    assert torch.equal(out, src[64:128, 128:192])


def test_launch_from_thread_without_context():
    # A fresh thread has no current context: the launcher pushes the primary one and pops it.
    import threading
    out = torch.full((128,), -1, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    errors = []

    def work():
        try:
            Launcher().launch(iota_artifact(key="test-iota-thread"), {"N": 128}, {"out": out.data_ptr(), "n": 128},
                              stream=0, device=out.device.index)
            err, ctx = driver.cuCtxGetCurrent()
            assert ctx is None or int(ctx) == 0, "the caller's (empty) context was clobbered"
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert not errors, errors
    torch.cuda.synchronize()
    assert torch.equal(out, torch.arange(128, dtype=torch.int32, device="cuda"))


def test_load_errors_name_the_kernel():
    bad = KernelArtifact(name="wl_iota", target="sm_90a", cubin=b"not a cubin", ptx="", smem_bytes=0,
                         block=(128, 1, 1), cluster=(1, 1, 1), grid=(("const", 1),) * 3,
                         params=[ParamSpec("out", "ptr"), ParamSpec("n", "i32")], tensor_maps={}, key="test-bad")
    with pytest.raises(RuntimeError, match=r"cuModuleLoadData failed for kernel 'wl_iota'.*CUDA_ERROR_"):
        Launcher().launch(bad, {}, {"out": 0, "n": 0}, stream=0, device=0)
    sm100_ptx = IOTA_PTX.replace("sm_90a", "sm_100a").replace(".version 8.0", ".version 8.6")
    blackwell = KernelArtifact(name="wl_iota", target="sm_100a", cubin=ptx_to_cubin(sm100_ptx, "sm_100a"), ptx="",
                               smem_bytes=0, block=(128, 1, 1), cluster=(1, 1, 1), grid=(("const", 1),) * 3,
                               params=[ParamSpec("out", "ptr"), ParamSpec("n", "i32")], tensor_maps={},
                               key="test-sm100")
    # an sm_100a cubin is refused before it is loaded, naming the GPU, its capability and the target
    with pytest.raises(TargetMismatchError, match=r"kernel 'wl_iota' is built for sm_100a \(compute capability "
                                                  r"10\.0\), but device 0 \(NVIDIA H\d+.*\) has compute capability "
                                                  r"9\.0: it cannot run there\. Use the kernel built for sm_90a"):
        Launcher().launch(blackwell, {}, {"out": 0, "n": 0}, stream=0, device=0)
    wrong_name = iota_artifact(key="test-wrong-name")
    wrong_name.name = "wl_missing"
    with pytest.raises(RuntimeError, match=r"cuModuleGetFunction\('wl_missing'\).*CUDA_ERROR_NOT_FOUND"):
        Launcher().launch(wrong_name, {"N": 1}, {"out": 0, "n": 0}, stream=0, device=0)
