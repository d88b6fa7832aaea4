"""sm_90a lowering (CPU only): launch contract, code driven by the plan, wl-lower-sm90, errors, PTX."""
import re
from dataclasses import replace

import pytest
from mlir import ir

from warploom.dialect import make_context, op_attrs
from warploom.dialect.kernel_ir import kernel_ops
from warploom.lowering.ptx import SM90_TO_PTX, gpu_module_to_ptx
from warploom import build as wc
from warploom.kernels import STANDARD_KERNELS, GemmSpec
from warploom.kernel import Copy, Loop, Opaque, Wait
from warploom.layout import WgmmaSmemDescriptor
from warploom.lowering.gemm import kernel_name
from warploom.lowering.gemm import lower_gemm as lower_kernel
from warploom.runtime import rules
from warploom.passes import PIPELINES, run_passes


def planned_program(elem="bf16", b_layout="kn", block_n=256, stages=4, schedule="grid"):
    """The typed kernel program of a planned standard GEMM."""
    return wc.planned_program(GemmSpec(elem, b_layout, block_n, stages, "sm_90a", schedule))


def with_role_body(p, role_index, edit):
    """p with role `role_index`'s loop body replaced by edit(list of its ops)."""
    role = p.roles[role_index]
    loop = role.body[0]
    body = list(loop.body)
    edit(body)
    p.roles[role_index] = replace(role, body=(replace(loop, body=tuple(body)),) + role.body[1:])


def build_gemm_module(elem="bf16", b_layout="kn", block_n=256, stages=4, lower=True):
    return wc.build_gemm_module(GemmSpec(elem, b_layout, block_n, stages), lower=lower)


def lower(program):
    return lower_kernel(program, kernel_name(program))


def one_spaced(text):
    """The printed IR with runs of spaces collapsed (MLIR prints `nvvm.setmaxregister  decrease 40`)."""
    return re.sub(" +", " ", text)


def lower_gemm(elem, b_layout, block_n):
    return lower(planned_program(elem, b_layout, block_n))


def test_standard_set():
    specs = STANDARD_KERNELS["sm_90a"]
    assert len(specs) == 24 and len(set(specs)) == 24 and len({s.kernel_name for s in specs}) == 24
    assert {(s.elem, s.b_layout) for s in specs} == {("bf16", "kn"), ("bf16", "nk"), ("f16", "kn"), ("f16", "nk")}
    wide = [s for s in specs if s.block_m == 128]          # 16: two consumer warpgroups, both schedules
    assert {s.block_n for s in wide} == {128, 256} and {s.schedule for s in wide} == {"grid", "persistent"}
    small = [s for s in specs if s.block_m == 64]          # 8: one consumer warpgroup, small M, grid only, 8 stages
    assert len(wide) == 16 and {(s.block_n, s.schedule, s.stages) for s in small} == {(64, "grid", 8), (128, "grid", 8)}
    assert all(s.epilogue == "tma" for s in specs)


@pytest.mark.parametrize("b_layout, block_n", [("kn", 256), ("nk", 128)])
def test_launch_contract(b_layout, block_n):
    program = planned_program("bf16", b_layout, block_n)
    k = lower(program)
    assert k.name == f"wl_gemm_bf16_{b_layout}_128x{block_n}x64_s4"
    assert [(p.name, p.kind) for p in k.params] == [("a", "tensormap"), ("b", "tensormap"), ("c", "tensormap"),
                                                    ("M", "i32"), ("N", "i32"), ("K", "i32")]
    assert k.grid == (("cdiv", "N", block_n), ("cdiv", "M", 128), ("const", 1))
    assert k.block == (384, 1, 1) and k.cluster == (1, 1, 1)
    assert k.smem_bytes == program.smem_bytes
    a, b = k.tensor_maps["a"], k.tensor_maps["b"]
    assert (a.dims, a.box, a.swizzle, a.dtype) == (("K", "M"), (64, 128), 128, "bf16")
    if b_layout == "nk":
        assert (b.dims, b.box) == (("K", "N"), (64, block_n))
    else:   # [K, N] row-major: boxes of 64 N (128 B) x 64 K, block_n / 64 of them per stage
        assert (b.dims, b.box) == (("N", "K"), (64, 64))
        assert k.text.count("nvvm.cp.async.bulk.tensor.shared.cluster.global") == 1 + block_n // 64
    # C leaves by TMA: one 64-column x 64-row box (a warpgroup's rows of one chunk) per store, block_n / 64 stores
    c = k.tensor_maps["c"]
    assert (c.dims, c.box, c.swizzle, c.dtype) == (("N", "M"), (64, 64), 128, "bf16")
    assert k.text.count("nvvm.cp.async.bulk.tensor.global.shared.cta") == block_n // 64
    assert k.text.startswith(f"gpu.module @{k.name}_mod [#nvvm.target<O = 3, chip = \"sm_90a\"")
    with make_context(), ir.Location.unknown():
        parsed = ir.Module.parse(k.text)
        assert parsed.body.operations[0].operation.name == "gpu.module"


def test_artifact_accepts_the_contract():
    from warploom.runtime.artifact import KernelArtifact
    k = lower_gemm("f16", "nk", 128)
    art = KernelArtifact(name=k.name, target="sm_90a", cubin=b"", ptx=".version 8.0", smem_bytes=k.smem_bytes,
                         block=k.block, cluster=k.cluster, grid=k.grid, params=k.params, tensor_maps=k.tensor_maps)
    assert art.grid_for({"M": 1000, "N": 1000, "K": 64}) == (8, 8, 1)
    assert k.tensor_maps["a"].dtype == "f16"


def test_code_follows_the_plan():
    """Change the plan (regs, barrier arrivals and offsets, buffer offsets): the code changes with it."""
    program = planned_program("bf16", "nk", 128)
    base = one_spaced(lower(program).text)
    assert "setmaxregister decrease 40" in base and "setmaxregister increase 232" in base

    p = planned_program("bf16", "nk", 128)
    p.roles[1] = replace(p.roles[1], regs=216)
    p.regions["b"] = replace(p.regions["b"], offset=65536 + 4096)      # B and C moved up by 4 KiB, the barriers
    p.regions["c"] = replace(p.regions["c"], offset=131072 + 4096)     # after them
    p.barriers["full"] = replace(p.barriers["full"], offset=167936)
    p.barriers["empty"] = replace(p.barriers["empty"], offset=167968, arrivals=7)
    p.smem_bytes = 168000 + 1024
    k = lower(p)
    text = one_spaced(k.text)
    assert k.smem_bytes == 169024
    assert "setmaxregister increase 216" in text
    assert re.search(r"nvvm.mbarrier.init %v\d+, %ci32_7 ", text)
    for const in (69632, 135168, 151552, 167936, 167968, 167992):  # B, C's chunks 0 and 1, full[0], empty[0], empty[3]
        assert f"arith.constant {const} : i32" in text
    for const in (65536, 131072, 147456, 163840):
        assert f"arith.constant {const} : i32" not in text


def test_stages_and_barriers_from_the_plan():
    program = planned_program("bf16", "kn", 128, stages=3)
    text = lower(program).text
    assert text.count("nvvm.mbarrier.init") == 6
    assert "arith.remui %kt" in text and "%ci32_3 " in text


def test_descriptor_constants_match_the_prototype():
    # K-major 128B swizzle: LBO 16 B, SBO 1024 B; the high word 0x40000040 and |0x10000 seen in SASS.
    assert WgmmaSmemDescriptor(0, 16, 1024, "128B").static_bits() == 0x4000004000010000
    # MN-major B (kn, BK = 64): LBO = one 64 x 128 B box = 8192 B
    assert WgmmaSmemDescriptor(0, 8192, 1024, "128B").static_bits() == 0x4000004002000000
    text = lower(planned_program("bf16", "kn", 256)).text       # both constants reach the code (as signed i64)
    assert f"arith.constant {0x4000004000010000} : i64" in text
    assert f"arith.constant {0x4000004002000000} : i64" in text


def test_rules_read_from_the_ir():
    assert rules.check(["cdiv", "N", 256]) == ("cdiv", "N", 256)
    assert rules.text(("cdiv", "N", 256)) == "cdiv(N, 256)" and rules.text(("const", 1)) == "1"
    with pytest.raises(ValueError, match="first entry must be one of"):
        rules.check(["N / 2"])
    p = planned_program("bf16", "nk", 128)
    p.attrs["grid"] = [["cdiv", "N", 128], ["cdiv", "M"], ["const", 1]]
    with pytest.raises(ValueError, match=r"'cdiv' takes 2 argument\(s\), got 1"):
        lower(p)


def _set_attrs(p, **attrs):
    p.attrs.update(attrs)


@pytest.mark.parametrize("mutate, message", [
    (lambda p: with_role_body(p, 1, lambda body: body.insert(1, Opaque("load_tile", (("operand", "a"),)))),
     "cannot lower wl.load_tile in role 'consumer'"),
    (lambda p: _set_attrs(p, cluster=[2, 1, 1]), "clusters of [2, 1, 1] that multicast B, persistent only"),
    (lambda p: setattr(p, "kind", "attention"), "kernel kind 'attention'"),
    (lambda p: p.roles.__setitem__(1, replace(p.roles[1], regs=256)), "register budgets need"),
    (lambda p: p.roles.__setitem__(1, replace(p.roles[1], issue="warp")), "issue = 'warp'"),
    (lambda p: with_role_body(p, 1, lambda body: body.__setitem__(0, Wait(body[0].barrier, "both"))),
     "parity 'both'"),
    (lambda p: with_role_body(p, 1, lambda body: body.__setitem__(2, replace(body[2], pending=9))), "pending = 9"),
    (lambda p: p.regions.__setitem__("a", replace(p.regions["a"], offset=512)), "1024-byte aligned"),
    (lambda p: setattr(p, "smem_bytes", None), "run wl-plan-smem"),
    (lambda p: setattr(p, "smem_bytes", p.smem_bytes - 64), "does not cover the plan"),
    (lambda p: with_role_body(p, 0, lambda body: body.pop()), "async loads cover inputs ['a']"),
])
def test_refusals(mutate, message):
    p = planned_program("bf16", "nk", 128)
    assert isinstance(p.roles[1].body[0], Loop) and isinstance(p.roles[0].body[0].body[-1], Copy)
    mutate(p)
    with pytest.raises(ValueError, match=re.escape(message)):
        lower(p)


def test_pass_replaces_kernel_with_launch():
    module = build_gemm_module("bf16", "kn", 256)
    text = str(module)
    assert "gpu.container_module" in text and "wl.kernel" not in text
    with module.context:
        (launch,) = kernel_ops(module, "launch")
        assert op_attrs(launch) == {"kernel": "wl_gemm_bf16_kn_128x256x64_s4",
                                    "grid": [["cdiv", "N", 256], ["cdiv", "M", 128], ["const", 1]],
                                    "block": [384, 1, 1], "cluster": [1, 1, 1], "smem_bytes": 230464}
        mods = [o for o in module.body.operations if o.operation.name == "gpu.module"]
        assert [ir.StringAttr(m.operation.attributes["sym_name"]).value for m in mods] == \
            ["wl_gemm_bf16_kn_128x256x64_s4_mod"]


def test_identical_kernels_share_one_gpu_module():
    t = "tensor<?x?xf16>"
    src = (f"func.func @two(%a: {t}, %b: {t}, %d: {t}) -> ({t}, {t}) {{\n"
           f'  %0 = "wl.matmul"(%a, %b) {{transpose_a = false, transpose_b = true}} : ({t}, {t}) -> {t}\n'
           f'  %1 = "wl.matmul"(%d, %b) {{transpose_a = false, transpose_b = true}} : ({t}, {t}) -> {t}\n'
           f"  return %0, %1 : {t}, {t}\n}}\n")
    with make_context(), ir.Location.unknown():
        module = ir.Module.parse(src)
        run_passes(module, ["wl-tile", "wl-pipeline", "wl-specialize", "wl-plan-smem", "wl-plan-barriers",
                            "wl-lower-sm90"])
        text = str(module)
    assert text.count('"wl.launch"') == 2 and text.count("gpu.module @") == 1


def test_sm90a_pipeline_ends_with_the_lowering():
    assert PIPELINES["sm_90a"][-1] == "wl-lower-sm90"
    assert not any(p.startswith("gpu-module-to-binary") for p in PIPELINES["sm_90a"])


def test_ptx_from_module_and_text():
    module = build_gemm_module("bf16", "nk", 128)
    ptx = gpu_module_to_ptx(module)
    assert ptx == gpu_module_to_ptx(str(module))
    assert ".target sm_90a" in ptx and ".entry wl_gemm_bf16_nk_128x128x64_s4" in ptx
    assert "wl.launch" in str(module)           # the input is left alone
    assert SM90_TO_PTX[-1] == "gpu-module-to-binary{format=isa}"


def test_ptx_needs_a_gpu_module():
    with pytest.raises(ValueError, match="no gpu.module"):
        gpu_module_to_ptx("func.func @f() { return }")
