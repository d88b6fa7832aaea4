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
    from warploom.kernels import STANDARD_KERNELS
    assert spec in STANDARD_KERNELS["sm_100a"]
    assert spec.target == "sm_100a" and spec.schedule == "persistent"
    assert pick_spec("bf16", "nk", 4096, 4096, 132) in STANDARD_KERNELS["sm_90a"]
