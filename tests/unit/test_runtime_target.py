"""Kernels meet GPUs of their own architecture only: warploom.ops picks the device's target, and the launcher
refuses an sm_100a cubin on any GPU but a compute capability 10.0 one before anything is loaded. No Blackwell GPU
exists here, so the device's capability and name are faked."""
import pytest

from warploom import targets
from warploom.ops import pick_spec
from warploom.runtime import launch
from warploom.runtime.artifact import KernelArtifact


@pytest.fixture
def fake_gpu(monkeypatch):
    def install(capability, name):
        monkeypatch.setattr(launch, "device_capability", lambda device: capability)
        monkeypatch.setattr(launch, "device_name", lambda device: name)
    return install


def artifact(target: str) -> KernelArtifact:
    return KernelArtifact(name="wl_gemm_test", target=target, cubin=b"not a cubin", ptx="", smem_bytes=0,
                          block=(192, 1, 1), cluster=(1, 1, 1), grid=(("const", 1),) * 3, params=[],
                          tensor_maps={}, meta={}, key="k")


def test_capabilities_name_their_targets():
    assert targets.for_capability(9, 0).name == "sm_90a"
    assert targets.for_capability(10, 0).name == "sm_100a"
    assert targets.for_capability(8, 0) is None


def test_an_sm100a_cubin_is_refused_on_a_hopper_gpu_before_it_is_loaded(fake_gpu):
    fake_gpu((9, 0), "NVIDIA H200")
    with pytest.raises(launch.TargetMismatchError) as e:
        launch.Launcher().function(artifact("sm_100a"), 0)       # check_target runs before cuModuleLoadData
    msg = str(e.value)
    assert "built for sm_100a (compute capability 10.0)" in msg
    assert "device 0 (NVIDIA H200) has compute capability 9.0" in msg
    assert "built for sm_90a" in msg


def test_an_sm90a_cubin_is_refused_on_a_blackwell_gpu(fake_gpu):
    fake_gpu((10, 0), "NVIDIA B200")
    with pytest.raises(launch.TargetMismatchError, match=r"built for sm_90a .* \(NVIDIA B200\) has compute "
                                                         r"capability 10\.0.*built for sm_100a"):
        launch.check_target(artifact("sm_90a"), 0)


def test_matching_targets_pass(fake_gpu):
    fake_gpu((10, 0), "NVIDIA B200")
    launch.check_target(artifact("sm_100a"), 0)
    assert launch.device_target(0) == "sm_100a"
    fake_gpu((9, 0), "NVIDIA H100")
    launch.check_target(artifact("sm_90a"), 0)
    assert launch.device_target(0) == "sm_90a"


def test_a_gpu_warploom_builds_nothing_for_is_named(fake_gpu):
    fake_gpu((8, 0), "NVIDIA A100")
    with pytest.raises(launch.TargetMismatchError, match=r"device 0 \(NVIDIA A100\) has compute capability 8\.0; "
                                                         r"warploom builds kernels for sm_90a .*sm_100a"):
        launch.device_target(0)
    with pytest.raises(launch.TargetMismatchError, match="cannot run there"):
        launch.check_target(artifact("sm_90a"), 0)


def test_matmul_picks_the_blackwell_kernels_on_a_blackwell_target():
    spec = pick_spec("bf16", "nk", 4096, 4096, 148, target="sm_100a")
    from warploom.kernels import CLUSTER_KERNELS, STANDARD_KERNELS
    assert spec in STANDARD_KERNELS["sm_100a"]
    assert spec.target == "sm_100a" and spec.schedule == "persistent"
    assert pick_spec("bf16", "nk", 4096, 4096, 132) in CLUSTER_KERNELS["sm_90a"]     # large M: the 2x1 cluster
    assert pick_spec("bf16", "nk", 128, 4096, 132) in STANDARD_KERNELS["sm_90a"]


def test_attention_picks_the_fa4_kernel_on_a_blackwell_gpu(fake_gpu, monkeypatch):
    """ops.attention asks the device's target and plans the sm_100a (FA4-style) kernel there: a 256-row CTA tile,
    the same parameters as on Hopper, one Q tile (128 rows) per TMA box; head dim 256 is refused by name."""
    import numpy as np

    from warploom import ops_attention
    from warploom.kernels import ATTENTION_PARAMS
    from warploom.runtime import host
    from warploom.runtime.tensors import DeviceTensor

    monkeypatch.setattr(host, "_TARGETS", {})
    fake_gpu((10, 0), "NVIDIA B200")
    assert host.target_of(0) == "sm_100a"

    def tensor(shape, dtype="bf16"):
        strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
        return DeviceTensor(ptr=0x10000, shape=shape, strides=strides, dtype=dtype, device=0, framework="cai", obj=None)

    q, k = tensor((1, 300, 4, 128)), tensor((1, 500, 1, 128))
    p = ops_attention.plan(q, k, k, causal=True, target=host.target_of(0))
    assert p.spec.target == "sm_100a" and p.spec.kernel_name == "wl_fa4_bf16_d128_256x128_s2_causal"
    assert p.spec.params == ATTENTION_PARAMS and p.spec.tensor_map_specs()["q"].box == (64, 128, 1, 1)
    with pytest.raises(ValueError, match=r"head dim 256 has no sm_100a kernel .*64, 128"):
        ops_attention.plan(tensor((1, 300, 4, 256)), tensor((1, 500, 1, 256)), tensor((1, 500, 1, 256)),
                           target="sm_100a")
    # on a Hopper GPU the same call plans the sm_90a kernel
    assert ops_attention.plan(q, k, k, causal=True).spec.target == "sm_90a"
