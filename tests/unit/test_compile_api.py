"""kernel = warploom.compile(graph, target=...): the passes it ran, the IR after any of them, the plan as data, PTX,
SASS and cubin; running it takes a GPU (tests/gpu), the refusals here need none."""
import pytest

import warploom
from warploom.ops import _check_artifact


def gemm_graph(b_shape=("K", "N"), dtype="bf16"):
    g = warploom.Graph("mm")
    a = g.input("a", ("M", "K"), dtype)
    b = g.input("b", b_shape, dtype)
    g.output(g.matmul(a, b, transpose_b=b_shape == ("N", "K")))
    return g


@pytest.mark.parametrize("target, mma, sass", [("sm_90a", "wgmma.mma_async", "HGMMA"),
                                               ("sm_100a", "tcgen05.mma", "UTCHMMA")])
def test_a_gemm_and_everything_the_compiler_decided(target, mma, sass):
    kernel = warploom.compile(gemm_graph(), target=target)
    names = [n for n, _ in kernel.passes]
    assert names[0] == "wl-verify" and names[-1] == "wl-plan-barriers" and all(s >= 0 for _, s in kernel.passes)
    assert '"wl.load_tile"' in kernel.ir(after="wl-tile") and '"wl.async_load"' in kernel.ir(after="wl-pipeline")
    assert '"wl.matmul"' in kernel.ir(after="input")
    res = kernel.resources
    assert res["target"] == target and res["ptxas"]["spill_bytes"] == 0
    assert {r["name"] for r in res["regions"]} >= {"a", "b", "mbarriers"}
    assert (res["tmem_columns"] is not None) == (target == "sm_100a")
    assert mma in kernel.ptx and sass in kernel.sass and kernel.cubin[:4] == b"\x7fELF"


def test_asking_for_a_pass_that_did_not_run_lists_those_that_did():
    kernel = warploom.compile(gemm_graph())
    with pytest.raises(ValueError, match=r"no pass 'wl-plan-tmem' ran; the passes were: input, wl-verify, .*"
                                         r"wl-plan-barriers"):
        kernel.ir(after="wl-plan-tmem")


def test_a_graph_without_a_kernel():
    g = warploom.Graph("add")
    x = g.input("x", (4, 4), "bf16")
    g.output(g.add(x, x))
    # refused at the call (issue 37), not when .ptx is first read
    with pytest.raises(ValueError, match="plans no kernel for sm_90a"):
        warploom.compile(g)


def test_the_operands_must_be_what_the_kernel_reads():
    kernel = warploom.compile(gemm_graph(("N", "K")))
    _check_artifact(kernel.artifact, "bf16", "nk")
    with pytest.raises(ValueError, match=r"multiplies bf16 with B stored as nk; the operands are bf16 with B as kn"):
        _check_artifact(kernel.artifact, "bf16", "kn")
    with pytest.raises(ValueError, match=r"the operands are f16"):
        _check_artifact(kernel.artifact, "f16", "nk")
