"""Every row of docs/errors.md: the user's mistake, the message warploom gives, how it ends.

API rows call warploom directly (tensors are fake DeviceTensors or a stub `torch`: no GPU, no torch here); tool rows
run the installed entry points (`warploom`, `warploom-opt`) in a subprocess and check the exit status, the key words
on stderr and that no Python traceback was printed.
"""
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from warploom import kernels, ops
from warploom import ops_attention as oa
from warploom.dialect.builder import Graph
from warploom.dialect.shapes import ShapeError
from warploom.kernels import AttentionSpec
from warploom.runtime import launch
from warploom.runtime.artifact import KernelArtifact
from warploom.runtime.cache import CacheNotWritableError, KernelCache, MissingKernelError
from warploom.runtime.tensormap import TmaLayoutError
from warploom.runtime.tensors import DeviceTensor, contiguous_strides

BASE = 0x7F00_0000_0000
BIN = Path(sys.executable).parent


def tensor(shape, dtype="bf16", strides=None, ptr=BASE, framework="cai"):
    """A fake GPU tensor: an address, a shape and strides; nothing is allocated."""
    return DeviceTensor(ptr=ptr, shape=tuple(shape), strides=tuple(strides or contiguous_strides(shape)),
                        dtype=dtype, device=0, framework=framework, obj=None)


def qkv(d=128, dtype="bf16"):
    return (tensor((2, 100, 8, d), dtype), tensor((2, 300, 2, d), dtype, ptr=BASE + 2**32),
            tensor((2, 300, 2, d), dtype, ptr=BASE + 2**33))


def tool(name: str) -> list[str]:
    """The venv's entry point of a command line tool, or `python -m` of its module when it is not installed."""
    exe = BIN / name
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", {"warploom": "warploom.tools.cli", "warploom-opt": "warploom.tools.opt"}[name]]


def run(name: str, *args, env=None, stdin: str | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(tool(name) + [str(a) for a in args], input=stdin, capture_output=True, text=True,
                          env=full_env, timeout=timeout)


def assert_refused(proc: subprocess.CompletedProcess, status: int, *words: str) -> None:
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    for w in words:
        assert w in proc.stderr, (w, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


GEMM = """func.func @gemm(%a: tensor<128x128xbf16>, %b: tensor<128x128xbf16>) -> tensor<128x128xbf16> {
  %c = "wl.matmul"(%a, %b) {transpose_a = false, transpose_b = false} : (tensor<128x128xbf16>, tensor<128x128xbf16>) -> tensor<128x128xbf16>
  return %c : tensor<128x128xbf16>
}
"""


@pytest.fixture(autouse=True)
def hopper(monkeypatch):
    """ops.attention asks the inputs' GPU for its target and SM count (after checking the inputs): an H200 here."""
    import warploom.ops_attention as oa
    from warploom.runtime import host
    monkeypatch.setattr(host, "target_of", lambda device: "sm_90a")
    monkeypatch.setattr(oa, "_sm_count", lambda device: 132)


@pytest.fixture
def mlir_file(tmp_path):
    def write(text: str, name: str = "input.mlir") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return write


# ---- warploom.ops.matmul --------------------------------------------------------------------------------------

def test_matmul_wrong_dtype():
    with pytest.raises(TypeError, match=r"^matmul: a is f32; warploom GEMM takes bf16 or f16$"):
        ops.matmul(tensor((128, 64), "f32"), tensor((64, 32), "f32"))
    with pytest.raises(TypeError, match=r"^matmul: a is bf16 but b is f16; cast one so both match$"):
        ops.matmul(tensor((128, 64)), tensor((64, 32), "f16"))


def test_matmul_shape_mismatch():
    with pytest.raises(ValueError, match=r"^matmul: a is \[128, 64\] and b is \[32, 32\]: the contracting dims "
                                         r"differ \(K = 64 vs 32\)$"):
        ops.matmul(tensor((128, 64)), tensor((32, 32)))
    with pytest.raises(ValueError, match=r"^matmul: a must be 2-D, got .*shape \[4, 128, 64\].*flatten batch dims"):
        ops.matmul(tensor((4, 128, 64)), tensor((64, 32)))


def test_matmul_strides_it_cannot_copy(monkeypatch):
    # strides neither row-major nor a transposed row-major view: only torch and cupy tensors are copied
    monkeypatch.setattr(ops, "empty_like_framework",
                        lambda *a: pytest.fail("allocated before refusing"))
    with pytest.raises(TmaLayoutError, match=r"^matmul: the cai tensor of shape \[64, 32\], bf16, strides \[64, 2\] "
                                             r"must be copied to strides TMA can read.*copies only torch and cupy"):
        ops.matmul(tensor((128, 64)), tensor((64, 32), strides=(64, 2)))
    assert issubclass(TmaLayoutError, ValueError)


def test_matmul_out_not_row_major():
    with pytest.raises(ValueError, match=r"^matmul: out must be row-major \(strides \[32, 1\]\), got strides "
                                         r"\[1, 128\]$"):
        ops.matmul(tensor((128, 64)), tensor((64, 32), ptr=BASE + 2**32),
                   out=tensor((128, 32), strides=(1, 128), ptr=BASE + 2**33))


# ---- CPU tensors: a stub `torch` (torch is not installed here) and numpy arrays -------------------------------

@pytest.fixture
def cpu_torch_tensor(monkeypatch):
    torch = types.ModuleType("torch")

    class Tensor:
        def __init__(self, shape):
            self.shape, self.dtype, self.is_cuda = tuple(shape), "bfloat16", False
            self.device = types.SimpleNamespace(type="cpu", index=None)

        def data_ptr(self):
            return 0x1000

        def stride(self):
            return contiguous_strides(self.shape)

    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    monkeypatch.setitem(sys.modules, "torch", torch)
    return Tensor


def test_matmul_cpu_tensor(cpu_torch_tensor):
    with pytest.raises(ValueError, match=r"^matmul: a: tensor is on cpu; warploom kernels need CUDA tensors: move it "
                                         r"with \.cuda\(\)$"):
        ops.matmul(cpu_torch_tensor((128, 64)), tensor((64, 32)))
    with pytest.raises(ValueError, match=r"^matmul: b: numpy arrays are host memory; warploom kernels need CUDA "
                                         r"tensors"):
        ops.matmul(tensor((128, 64)), np.zeros((64, 32), np.float16))


def test_attention_cpu_tensor(cpu_torch_tensor):
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^attention: q: tensor is on cpu; .*move it with \.cuda\(\)$"):
        ops.attention(cpu_torch_tensor(q.shape), k, v)


# ---- warploom.ops.attention -----------------------------------------------------------------------------------

def test_attention_wrong_dtype():
    q, k, v = qkv()
    with pytest.raises(TypeError, match=r"^attention: q is f32; warploom attention takes bf16 or f16: cast it"):
        ops.attention(tensor(q.shape, "f32"), k, v)
    with pytest.raises(TypeError, match=r"^attention: q is bf16, k is f16, v is bf16; cast them to one dtype$"):
        ops.attention(q, tensor(k.shape, "f16", ptr=k.ptr), v)


def test_a_tile_order_not_offered_is_refused(monkeypatch):
    monkeypatch.setattr(oa, "TILE_ORDER", 2)
    with pytest.raises(ValueError, match=r"^ops_attention.TILE_ORDER = 2: use None \(the standard deal\) or one of "
                                         r"the snake deals' tile orders 0, 1$"):
        ops.attention(*qkv(), causal=True)


def test_attention_shape_mismatch():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^attention: k is \[2, 300, 2, 128\] but v is \[2, 301, 2, 128\] .*same "
                                         r"sequence length and heads$"):
        ops.attention(q, k, tensor((2, 301, 2, 128), ptr=v.ptr))
    with pytest.raises(ValueError, match=r"^attention: q must be rank 4, \[B, S, H, D\] in layout 'bshd'"):
        ops.attention(tensor((100, 8, 128)), k, v)


def test_attention_unsupported_head_dim():
    with pytest.raises(ValueError, match=r"^attention: head dim 96 is not supported; warploom attention kernels exist "
                                         r"for head dims 64, 128, 256: zero-pad q, k and v to head dim 128, pass "
                                         r"scale=1/sqrt\(96\)"):
        ops.attention(*qkv(d=96))
    with pytest.raises(ValueError, match=r"head dim 512 is not supported.*: split the head dim$"):
        ops.attention(*qkv(d=512))


def test_attention_strides_it_cannot_copy(monkeypatch):
    # q's head dim is not contiguous and q comes from a framework warploom does not copy
    q, k, v = qkv()
    strided_q = tensor(q.shape, strides=(100 * 8 * 128, 1, 100, 100 * 8))
    monkeypatch.setattr(oa, "kernel_of", lambda spec: types.SimpleNamespace(key="k", name="n", tensor_maps={}))
    monkeypatch.setattr(oa, "empty_like_framework", lambda ref, shape, dtype: tensor(shape, dtype, ptr=BASE + 2**34))
    with pytest.raises(ValueError, match=r"^attention: q cannot be read in place \(.*stride 1.*\) and warploom copies "
                                         r"only torch and cupy tensors; pass a tensor whose head dim is contiguous"):
        ops.attention(strided_q, k, v)


def test_attention_out_not_contiguous():
    q, k, v = qkv()
    out = tensor(q.shape, strides=(100 * 8 * 128, 8 * 128, 1, 8), ptr=BASE + 2**34)
    with pytest.raises(ValueError, match=r"^attention: out's head dim must be contiguous \(stride 1\), got strides "
                                         r"\[102400, 1024, 1, 8\]"):
        ops.attention(q, k, v, out=out)


# ---- graph building -------------------------------------------------------------------------------------------

def test_graph_input_takes_numpy_dtypes():
    g = Graph("g")
    assert g.input("a", (4, 64), np.float16).dtype == "f16"
    assert g.input("b", (64, 8), ml_dtypes.bfloat16).dtype == "bf16"
    assert g.input("c", (4, 8), np.dtype("float32")).dtype == "f32"
    assert g.matmul(g.input("x", (4, 64), np.float16), g.input("w", (64, 8), "f16")).dtype == "f16"


def test_graph_input_unsupported_dtype():
    g = Graph("g")
    with pytest.raises(ValueError, match=r"^input 'a': numpy dtype int64 has no warploom element type; supported: "
                                         r"f32, f16, bf16, f8E4M3FN, f8E5M2, f4E2M1FN \(and i32, for a table a "
                                         r"score modifier reads\)$"):
        g.input("a", (4, 64), np.int64)
    assert g.input("ids", (64,), np.int32).dtype == "i32"        # an index table (wl.gather)
    with pytest.raises(ValueError, match=r"^input 'b': unknown element type 'fp64': warploom supports f32, f16, bf16"):
        g.input("b", (4, 64), "fp64")
    with pytest.raises(ValueError, match=r"^input 'c': element type None is neither a name nor a numpy dtype"):
        g.input("c", (4, 64), None)


def test_graph_score_op_rules():
    g = Graph("g")
    s = g.input("s", (1, 2, 8, 8), "bf16")
    with pytest.raises(ShapeError, match=r"^wl.where: cond is tensor<1x2x8x8xbf16>; where's condition is an i1 "
                                         r"tensor \(a comparison\)$"):
        g.where(s, s, s)
    with pytest.raises(ShapeError, match=r"^wl.gather: table is tensor<4xbf16>; a modifier reads f32 or i32 tables"):
        g.gather(g.input("t", (4,), "bf16"), g.index(s, "h"))
    with pytest.raises(ShapeError, match=r"gather takes one index per dimension \(2\), got 1$"):
        g.gather(g.input("t2", (4, 9), "f32"), g.index(s, "h"))


def test_interpreter_names_a_missing_scalar_and_a_gather_out_of_range():
    from warploom.reference.interpret import evaluate
    g = Graph("g")
    s = g.input("s", (1, 2, 4, 4), "f32")
    g.output(g.mul(s, g.scalar("cap")))
    with pytest.raises(ValueError, match=r"the graph reads the runtime scalar 'cap': pass scalars=\{name: value\}"):
        evaluate(g.module, {"s": np.ones((1, 2, 4, 4))})
    g = Graph("g")
    s, t = g.input("s", (1, 2, 4, 4), "f32"), g.input("t", (3,), "f32")
    g.output(g.add(s, g.gather(t, g.index(s, "kv_idx"))))
    with pytest.raises(ValueError, match=r"gather: index 0 reaches 0..3, outside the table's 0..2 \(shape \(3,\)\)"):
        evaluate(g.module, {"s": np.ones((1, 2, 4, 4)), "t": np.ones(3)})


def _attention_script(tmp_path, body: str) -> Path:
    path = tmp_path / "graph.py"
    path.write_text("import warploom as wl\n"
                    "graph = wl.Graph('g')\n"
                    "q, k, v = (graph.input(n, (1, 4, 64, 64), 'bf16') for n in 'qkv')\n"
                    "s = graph.scale(graph.matmul(q, k, transpose_b=True), 0.125)\n"
                    f"{body}\n"
                    "graph.output(graph.matmul(graph.softmax(s), v))\n")
    return path


def test_explain_graph_refuses_kernel_options(tmp_path):
    assert_refused(run("warploom", "explain", _attention_script(tmp_path, ""), "--causal"), 2,
                   "warploom explain: --causal applies to a built-in kernel (--op), not to a graph file, which is "
                   "explained as written: drop it (a graph file takes --target only)")


def test_compile_says_why_an_attention_was_not_fused(tmp_path):
    path = _attention_script(tmp_path, "s = graph.relu(s)")
    why = ("wl.softmax (graph.py:6): not fused: wl.relu (graph.py:5) between the scores and the softmax is not a "
           "score operation")
    assert_refused(run("warploom", "compile", path), 1, f"note: {why}")
    shown = run("warploom", "explain", path)
    assert shown.returncode == 0 and why in shown.stdout, shown.stderr


def test_graph_matmul_shape_mismatch():
    g = Graph("g")
    with pytest.raises(ShapeError, match=r"^wl\.matmul: contracting dims differ: lhs 4x64 has K = 64, rhs 32x8 has "
                                         r"K = 32$"):
        g.matmul(g.input("a", (4, 64), "bf16"), g.input("b", (32, 8), "bf16"))


# ---- runtime: target, offline cache, cache folder ------------------------------------------------------------

def test_sm100a_kernel_on_an_sm90_gpu(monkeypatch):
    monkeypatch.setattr(launch, "device_capability", lambda device: (9, 0))
    monkeypatch.setattr(launch, "device_name", lambda device: "NVIDIA H200")
    art = KernelArtifact(name="wl_gemm_x", target="sm_100a", cubin=b"not a cubin", ptx="", smem_bytes=0, block=(192, 1, 1),
                         cluster=(1, 1, 1), grid=(("const", 1),) * 3, params=[], tensor_maps={}, meta={}, key="k")
    with pytest.raises(launch.TargetMismatchError, match=r"^kernel 'wl_gemm_x' is built for sm_100a \(compute "
                                                         r"capability 10\.0\), but device 0 \(NVIDIA H200\) has compute "
                                                         r"capability 9\.0: it cannot run there\. Use the kernel built "
                                                         r"for sm_90a"):
        launch.check_target(art, 0)
    monkeypatch.setattr(launch, "device_capability", lambda device: (8, 0))
    with pytest.raises(launch.TargetMismatchError, match=r"cannot run there\. warploom builds kernels for sm_90a, "
                                                         r"sm_100a only: run on a GPU of one of those$"):
        launch.check_target(art, 0)


def test_offline_kernel_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPLOOM_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPLOOM_OFFLINE", "1")
    monkeypatch.setattr(kernels, "_memo", {})
    with pytest.raises(MissingKernelError, match=r"^no compiled kernel for .*head dim 128.*this machine does not "
                                                 r"compile \(WARPLOOM_OFFLINE=1 or no MLIR\)\. Build it where the "
                                                 r"compiler is installed:\n    warploom precompile --target sm_90a "
                                                 rf"--cache {re.escape(str(tmp_path))}\n"):
        kernels.get_kernel(AttentionSpec("bf16", 128))


def test_offline_kernel_missing_cli(tmp_path):
    proc = run("warploom", "explain", env={"WARPLOOM_OFFLINE": "1", "WARPLOOM_CACHE_DIR": str(tmp_path)})
    assert_refused(proc, 1, "warploom explain: no compiled kernel for bf16 GEMM", "this machine does not compile",
                   f"warploom precompile --target sm_90a --cache {tmp_path}")


def test_cache_dir_not_writable(tmp_path):
    (tmp_path / "file").write_text("a file, not a folder")
    root = tmp_path / "file" / "cache"
    with pytest.raises(CacheNotWritableError, match=rf"^cannot write the kernel cache folder {re.escape(str(root))}: "
                                                    r"Not a directory\. Point WARPLOOM_CACHE_DIR at a folder you can "
                                                    r"write"):
        KernelCache(root).check_writable()
    art = KernelArtifact(name="n", target="sm_90a", cubin=b"not a cubin", ptx="", smem_bytes=0, block=(1, 1, 1),
                         cluster=(1, 1, 1), grid=(("const", 1),) * 3, params=[], tensor_maps={}, key="a" * 64)
    with pytest.raises(CacheNotWritableError, match=r"cannot write the kernel cache folder .*WARPLOOM_OFFLINE=1"):
        KernelCache(root).put(art)
    KernelCache(tmp_path / "new" / "cache").check_writable()        # a missing folder is made


def test_cache_dir_not_writable_cli(tmp_path):
    (tmp_path / "file").write_text("a file, not a folder")
    root = tmp_path / "file" / "cache"
    proc = run("warploom", "explain", env={"WARPLOOM_CACHE_DIR": str(root)})
    assert_refused(proc, 1, f"warploom explain: cannot write the kernel cache folder {root}: Not a directory",
                   "Point WARPLOOM_CACHE_DIR at a folder you can write")
    assert "[Errno" not in proc.stderr


# ---- warploom-opt ---------------------------------------------------------------------------------------------

def test_opt_malformed_mlir(mlir_file):
    path = mlir_file('func.func @g(%a: tensor<4x4xbf16>) {\n  %c = "wl.matmul"(%a, %a {\n  return\n}\n')
    assert_refused(run("warploom-opt", path), 1, f"{path}:2:26: error: expected ')' to end operand list")


def test_compile_malformed_mlir(mlir_file):
    path = mlir_file('func.func @g(%a: tensor<4x4xbf16>) {\n  %c = "wl.matmul"(%a, %a {\n  return\n}\n')
    assert_refused(run("warploom", "compile", path), 1, f"{path}:2:26: error: expected ')' to end operand list")


def test_opt_custom_form(mlir_file):
    path = mlir_file("func.func @g(%a: tensor<4x4xbf16>) -> tensor<4x4xbf16> {\n"
                     "  // a comment naming wl.attention is not an op\n"
                     "  %0 = wl.matmul %a, %a : tensor<4x4xbf16>\n"
                     "  return %0 : tensor<4x4xbf16>\n}\n")
    proc = run("warploom-opt", path)
    assert_refused(proc, 1, f"{path}:3:8: error: 'wl.matmul' is written in custom form",
                   'generic form, the op name quoted, e.g. %0 = "wl.matmul"(%x, %y)')


def test_compile_custom_form(mlir_file):
    path = mlir_file("func.func @g(%a: tensor<4x4xbf16>) -> tensor<4x4xbf16> {\n"
                     "  %0 = wl.matmul %a, %a : tensor<4x4xbf16>\n"
                     "  return %0 : tensor<4x4xbf16>\n}\n")
    proc = run("warploom", "compile", path, "--target", "sm_90a")
    assert_refused(proc, 1, f"{path}:2:8: error: 'wl.matmul' is written in custom form")


def test_compile_missing_file(tmp_path):
    proc = run("warploom", "compile", str(tmp_path / "nowhere.mlir"))
    assert_refused(proc, 1, f"warploom compile: cannot read {tmp_path / 'nowhere.mlir'}: No such file or directory")


def test_opt_custom_form_on_stdin_after_split():
    text = GEMM + "// -----\n" + "func.func @h(%a: tensor<4x4xbf16>) {\n  %0 = wl.exp %a : tensor<4x4xbf16>\n}\n"
    proc = run("warploom-opt", "--split-input-file", stdin=text)
    assert_refused(proc, 1, "<stdin>:7:8: error: 'wl.exp' is written in custom form")


def test_opt_transpose_flag_not_bool(mlir_file):
    path = mlir_file(GEMM.replace("transpose_a = false", "transpose_a = 7 : i64"))
    assert_refused(run("warploom-opt", path), 1,
                   f"{path}:2:8: error: 'wl.matmul' op attribute transpose_a must be a bool (true or false), got 7 : i64")
    path = mlir_file(GEMM.replace("transpose_b = false", "transpose_b = 1 : i64"), "one.mlir")
    assert_refused(run("warploom-opt", "--wl-verify", "--no-verify", path), 1,
                   "attribute transpose_b must be a bool (true or false), got 1 : i64")
    ok = run("warploom-opt", mlir_file(GEMM.replace("transpose_b = false", "transpose_b = true"), "ok.mlir"))
    assert ok.returncode == 0, ok.stderr


def test_opt_output_option_without_file(mlir_file):
    path = mlir_file(GEMM)
    proc = run("warploom-opt", path, "-o")
    assert_refused(proc, 2, "warploom-opt: -o needs a file name (or - for stdout) after it, got nothing",
                   "usage: warploom-opt")
    assert proc.stdout == ""
    assert_refused(run("warploom-opt", path, "-o", "--wl-verify"), 2, "-o needs a file name", "got '--wl-verify'")
    assert_refused(run("warploom-opt", path, "--pass-pipeline"), 2, "--pass-pipeline needs a pipeline")


def test_opt_unknown_option_and_pass(mlir_file):
    path = mlir_file(GEMM)
    assert_refused(run("warploom-opt", path, "-x"), 2, "warploom-opt: unknown option '-x'", "usage: warploom-opt")
    assert_refused(run("warploom-opt", path, "--wl-nope"), 2, "warploom-opt: unknown pass 'wl-nope'; warploom passes:")


def test_opt_missing_input(tmp_path):
    assert_refused(run("warploom-opt", tmp_path / "no.mlir"), 1,
                   f"warploom-opt: cannot read {tmp_path / 'no.mlir'}: No such file or directory")


def test_opt_version():
    opt, cli = run("warploom-opt", "--version"), run("warploom", "--version")
    assert opt.returncode == 0 and cli.returncode == 0, (opt.stderr, cli.stderr)
    assert opt.stdout.startswith("warploom ") and opt.stdout == cli.stdout
    assert "--version" in run("warploom-opt", "--help").stdout


def test_opt_smem_limit_overflow(mlir_file):
    path = mlir_file(GEMM.replace("128x128", "?x?"))
    proc = run("warploom-opt", path, "--wl-tile", "--wl-pipeline", "--wl-specialize", "--wl-plan-smem=limit=1000")
    assert_refused(proc, 1, f"{path}:2:8: error: smem plan needs 230464 B (a 65536 B, b 131072 B, c 32768 B, "
                            "mbarriers 64 B, "
                            "+ 1024 B alignment slack) for 4 stages; the limit is 1000 B")
    assert not re.search(r"use -?\d+ stages", proc.stderr), proc.stderr   # no stage count fits 1000 B
    # what does fit: 2 stages of this tile (16384 + 32768 B each, C's staging, the barriers, the slack)
    assert "2 stages of this tile need 132160 B; use a smaller block-n (a stage's bytes shrink with it) or a limit " \
           "of at least 132160 B" in proc.stderr, proc.stderr


TMEM_OVER = """func.func @three_stages(%arg0: tensor<?x?xbf16>, %arg1: tensor<?x?xbf16>) -> tensor<?x?xbf16> {
  %0 = "wl.kernel"(%arg0, %arg1) ({
    "wl.buffer"() {dims = ["M", "N"], elem = "f32", name = "acc", shape = [128, 256], space = "tmem", stages = 3 : i64} : () -> ()
    "wl.ring"() {consumers = [], counts = "tile", name = "acc", regions = ["acc"], stages = 3 : i64} : () -> ()
    gpu.yield
  }) {acc_elem = "f32", cluster = [1, 1, 1], grid = [["const", 1], ["const", 1], ["const", 1]], input_names = ["a", "b"], kind = "gemm", planned = ["wl-tile", "wl-pipeline", "wl-specialize"], schedule = "persistent", stages = 4 : i64, target = "sm_100a", threads = 192 : i64, tile = [128, 256, 64]} : (tensor<?x?xbf16>, tensor<?x?xbf16>) -> tensor<?x?xbf16>
  return %0 : tensor<?x?xbf16>
}
"""


def test_opt_tmem_overflow(mlir_file):
    proc = run("warploom-opt", mlir_file(TMEM_OVER), "--wl-plan-tmem")
    assert_refused(proc, 1, "error: wl-plan-tmem: the TMEM plan needs 768 columns (acc 768); a CTA has 512: use one "
                            "stage of acc")


# ---- warploom explain / precompile ----------------------------------------------------------------------------

def test_explain_smem_overflow_suggests_a_config_that_fits(tmp_path):
    proc = run("warploom", "explain", "--stages", "8", env={"WARPLOOM_CACHE_DIR": str(tmp_path)})
    assert_refused(proc, 2, "warploom explain: cannot build the bf16 GEMM", "smem plan needs 427136 B (a 131072 B, "
                   "b 262144 B, c 32768 B, mbarriers 128 B, + 1024 B alignment slack) for 8 stages; the limit is 232448 B: use")
    stages = int(re.search(r"use (\d+) stages", proc.stderr).group(1))
    assert 2 <= stages < 8
    fits = run("warploom", "explain", "--stages", stages, env={"WARPLOOM_CACHE_DIR": str(tmp_path)})
    assert fits.returncode == 0 and "smem" in fits.stdout, fits.stderr


def test_explain_bad_block_n_and_stages():
    assert_refused(run("warploom", "explain", "--block-n", "100"), 2,
                   "block-n = 100: must be a multiple of 64 up to 256")
    assert_refused(run("warploom", "explain", "--stages", "9"), 2, "wl-pipeline: stages = 9; use 2..8 (8 is the most")
    assert "one stage cannot" not in run("warploom", "explain", "--stages", "9").stderr     # that is the reason for 1
    assert_refused(run("warploom", "explain", "--stages", "1"), 2, ", 1 stage, ", "(one stage cannot overlap loads")
    # 0 is a value, not "not given": refused, not silently replaced by the default
    assert_refused(run("warploom", "explain", "--stages", "0"), 2, "0 stages", "wl-pipeline: stages = 0; use 2..8")
    assert_refused(run("warploom", "explain", "--block-n", "0"), 2, "block-n = 0: must be a multiple of 64")


def test_shared_kv_needs_the_sm100a_attention():
    assert_refused(run("warploom", "explain", "--op", "attention", "--shared-kv"), 2,
                   "--shared-kv applies to the sm_100a attention (--op attention --target sm_100a), not to the sm_90a "
                   "attention (--op attention): drop it. The options that apply here: --op, --dtype, --head-dim")
    with pytest.raises(ValueError, match=r"shared_kv = True: True or False, and True only for the sm_100a attention "
                                         r"\(target='sm_100a'\)"):
        AttentionSpec("bf16", 128, shared_kv=True)
    proc = run("warploom-opt", "-", "--wl-tile=shared-kv=true", stdin=GEMM)
    assert_refused(proc, 1, "wl-tile: shared-kv = true shares one smem ring between an attention's K and V tiles")


def test_streamk_needs_the_sm90a_gemm_with_c_by_tma():
    for opts in ("schedule=streamk,epilogue=direct", "schedule=streamk,target=sm_100a"):
        proc = run("warploom-opt", "-", f"--wl-tile={opts}", stdin=GEMM)
        assert_refused(proc, 1, "schedule = streamk: built for the sm_90a GEMM with C stored by TMA",
                       "use schedule=persistent there")


def test_cluster_and_tile_order_options_say_where_they_apply():
    for opts, words in (("cluster-m=3", "cluster-m = 3: use 1 (no cluster) or 2 (a 2x1 cluster sharing B by TMA "
                                        "multicast)"),
                        ("cluster-m=2", "cluster-m = 2: built for the sm_90a GEMM with schedule=persistent and C "
                                        "stored by TMA (target = sm_90a, schedule = grid, epilogue = tma)"),
                        ("schedule=persistent,group-m=5", "group-m = 5: use one of 1, 2, 4, 8, 16"),
                        ("group-m=8", "group-m = 8: the tile order of the sm_90a persistent GEMM (target = sm_90a, "
                                      "schedule = grid); leave group-m out otherwise")):
        assert_refused(run("warploom-opt", "-", f"--wl-tile={opts}", stdin=GEMM), 1, words)
    assert_refused(run("warploom", "compile", "--op", "matmul", "--group-m", "3"), 2,
                   "argument --group-m: invalid choice: 3 (choose from 1, 2, 4, 8, 16)")


def test_swap_ab_says_where_it_applies():
    """wl-tile{swap-ab=true} (docs/swap-ab.md) outside the sm_90a grid GEMM with C stored from registers, or with a
    tile the swapped MMA cannot take: refused with the fix, no traceback."""
    for opts, words in (("block-m=16,block-n=64,swap-ab=true",
                         "swap-ab = true: built for the sm_90a GEMM with schedule=grid and epilogue=direct"),
                        ("block-m=16,block-n=64,epilogue=direct,schedule=persistent,swap-ab=true",
                         "(got target = sm_90a, schedule = persistent, epilogue = direct"),
                        ("block-m=12,block-n=64,epilogue=direct,swap-ab=true",
                         "block-m = 12: the swap-AB GEMM's rows of C are the wgmma's n"),
                        ("block-m=16,block-n=96,epilogue=direct,swap-ab=true",
                         "block-n = 96: the swap-AB GEMM gives each consumer warpgroup m64 columns of C")):
        assert_refused(run("warploom-opt", "-", f"--wl-tile={opts}", stdin=GEMM), 1, words)


ATTENTION_D = """func.func @attn(%q: tensor<?x?x?x{d}xbf16>, %k: tensor<?x?x?x{d}xbf16>, %v: tensor<?x?x?x{d}xbf16>) -> tensor<?x?x?x{d}xbf16> {{
  %o = "wl.attention"(%q, %k, %v) {{causal = false, scale = 0.1 : f32, layout = "bshd"}} : (tensor<?x?x?x{d}xbf16>, tensor<?x?x?x{d}xbf16>, tensor<?x?x?x{d}xbf16>) -> tensor<?x?x?x{d}xbf16>
  return %o : tensor<?x?x?x{d}xbf16>
}}"""


def test_q_stages_say_where_they_apply():
    """wl-pipeline{q-stages=…}: a value not offered, a kernel with no next tile (the grid schedule, a GEMM), and head
    dim 256, where two Q tiles do not fit: refused with the fix, no traceback."""
    for tile, stages, d, words in (
            ("schedule=persistent", 3, 128, "wl-pipeline: q-stages = 3; use 1 or 2"),
            ("schedule=grid", 2, 128, "q-stages = 2: a second Q stage serves the persistent sm_90a attention"),
            ("schedule=persistent", 2, 256, "q-stages = 2: 2 Q tiles beside the K/V rings and O's staging tile do "
                                            "not fit the 232448 B of smem; use q-stages=1")):
        assert_refused(run("warploom-opt", "-", f"--wl-tile={tile}", f"--wl-pipeline=q-stages={stages}",
                           stdin=ATTENTION_D.format(d=d)), 1, words)
    assert_refused(run("warploom-opt", "-", "--wl-tile", "--wl-pipeline=q-stages=2", stdin=GEMM), 1,
                   "this kernel is a gemm (sm_90a, schedule grid): leave q-stages out")


def test_streamk_index_limit_names_the_way_out():
    from warploom.runtime import rules
    with pytest.raises(ValueError, match="must stay below 2147483648 .* use the persistent schedule"):
        rules.evaluate(("streamk", "M", 128, "N", 256, "K", 64, "SMS"),
                       {"M": 128 * 132, "N": 256, "K": 64 * 200000, "SMS": 132})


def test_cli_unknown_target_and_head_dim(tmp_path):
    assert_refused(run("warploom", "precompile", "--target", "sm_80", "--cache", tmp_path), 2,
                   "argument --target: invalid choice: 'sm_80' (choose from", "sm_90a", "sm_100a")
    assert_refused(run("warploom", "explain", "--target", "sm_89"), 2, "invalid choice: 'sm_89'")
    assert_refused(run("warploom", "explain", "--op", "attention", "--head-dim", "96"), 2,
                   "argument --head-dim: invalid choice: 96 (choose from 64, 128, 256)")


def test_help_lists_targets_and_defaults():
    pre = run("warploom", "precompile", "--help").stdout
    assert "{sm_90a,sm_100a}" in pre and "(default: sm_90a)" in pre and "WARPLOOM_CACHE_DIR" in pre
    exp = " ".join(run("warploom", "explain", "--help").stdout.split())
    for words in ("{sm_90a,sm_100a}", "(default: sm_90a)", "(default: matmul)", "(default: bf16)", "(default: kn)",
                  "attention (default: 128)", "(cta_group::2, a cluster of 2) (default: 128)", "GEMM: 256 by default", "GEMM: 4 by default; attention: 2"):
        assert words in exp, words


def test_every_row_of_the_table_has_its_test():
    table = (Path(__file__).parents[2] / "docs" / "errors.md").read_text()
    named = set(re.findall(r"`(test_\w+)`", table))
    defined = {n for n in globals() if n.startswith("test_")}
    assert named and named <= defined, named - defined
    assert defined - named <= {"test_every_row_of_the_table_has_its_test", "test_graph_input_takes_numpy_dtypes",
                               "test_opt_version", "test_help_lists_targets_and_defaults"}, defined - named


# ---- warploom tune and the tuning table --------------------------------------------------------------------------

@pytest.fixture
def empty_table(tmp_path, monkeypatch):
    from warploom import tuning
    monkeypatch.setattr(tuning, "TABLE_DIR", tmp_path)
    monkeypatch.setattr(tuning, "_TABLES", {})
    return tmp_path / "sm_90a.json"


def test_an_entry_naming_no_candidate_is_refused(empty_table):
    from warploom import tuning
    from warploom.kernels import GemmSpec
    spec = GemmSpec("bf16", "kn", 192, 4, "sm_90a", "grid")
    tuning.write(empty_table, {tuning.entry_key("matmul", "bf16", "kn", (8192, 8192, 8192)):
                               tuning.entry(spec, (8192, 8192, 8192), {spec.kernel_name: 1.0}, 1.0, {})}, {})
    with pytest.raises(ValueError, match="tuning entry names wl_gemm_bf16_kn_128x192x64_s4, which is not a tuning "
                                         "candidate"):
        tuning.lookup("bf16", "kn", 8192, 8192, 8192)


@pytest.mark.parametrize("args, text", [
    (["--shapes", "8192x8192", "--out", "t.json"], "--shapes '8192x8192': give each shape as positive integers"),
    (["--shapes", "0x8x8", "--out", "t.json"], "give each shape as positive integers MxNxK"),
    (["--shapes", "8x8x8", "--iters", "0", "--out", "t.json"], "--iters 0 and --rounds 5 must be at least 1"),
    (["--shapes", "8x8x8", "--out", "t.json"], "no CUDA GPU with torch here"),
])
def test_tune_refuses_with_the_way_out(tmp_path, args, text):
    out = tmp_path / "t.json"
    proc = run("warploom", "tune", *[str(out) if a == "t.json" else a for a in args])
    assert_refused(proc, 2, text)
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("args, text", [
    (["--shape", "16x8192"], "--shape '16x8192': give M, N and K as positive integers MxNxK, e.g. --shape 16x8192x8192"),
    (["--shape", "16x8x8", "--block-n", "128"], "--shape asks which kernel warploom.ops.matmul picks; --block-n "
                                                "would choose it yourself: give one or the other"),
    (["--op", "attention", "--shape", "16x8x8"], "--shape applies to the GEMM (--op matmul), whose kernel "
                                                 "warploom.ops.matmul picks by the shape (an attention kernel is "
                                                 "chosen by --head-dim"),
])
def test_explain_shape_refusals(args, text):
    assert_refused(run("warploom", "explain", *args), 2, f"warploom explain: {text}")



# ---- the command line: options where they do not apply, files, scripts, pipes (issue 37) ---------------------------

def test_options_that_do_not_apply_are_refused():
    """Every case is in tests/unit/test_cli_options.py (the whole table); here, as a user types them."""
    assert_refused(run("warploom", "explain", "--shared-kv"), 2,
                   "warploom explain: --shared-kv applies to the sm_100a attention (--op attention --target sm_100a), "
                   "not to the sm_90a GEMM (--op matmul): drop it. The options that apply here: --op, --dtype, "
                   "--b-layout")
    assert_refused(run("warploom", "compile", "--op", "matmul", "--head-dim", "64"), 2,
                   "warploom compile: --head-dim applies to the attention (--op attention), not to the sm_90a GEMM")
    assert_refused(run("warploom", "compile", "graph.mlir", "--block-n", "128"), 2,
                   "--block-n applies to a built-in kernel (--op matmul or --op attention), not to a graph read from a "
                   "file")
    assert_refused(run("warploom", "explain", "--op", "attention", "--cluster-m", "2"), 2,
                   "--cluster-m applies to the sm_90a GEMM (--op matmul --target sm_90a)")
    assert_refused(run("warploom", "emulate", "--op", "attention", "--shape", "1,130,200,2,1,64", "--exact"), 2,
                   "--exact applies to --op matmul")


def test_the_old_op_name_is_accepted_with_a_note():
    proc = run("warploom", "explain", "--op", "gemm", "--q-stages", "2")
    assert_refused(proc, 2, "warploom explain: note: --op gemm is spelled --op matmul now (one name across explain, "
                            "compile, emulate and precompile); running --op matmul",
                   "--q-stages applies to the sm_90a attention")


def test_file_options_name_the_path_and_the_fix(tmp_path):
    missing = tmp_path / "no" / "dir"
    assert_refused(run("warploom", "explain", "--png", missing / "x.png"), 2,
                   f"warploom explain: --png {missing / 'x.png'}: the folder {missing} does not exist: create it "
                   f"(mkdir -p {missing}) or give a path in a folder that exists")
    assert_refused(run("warploom", "compile", "--op", "matmul", "--emit", "ptx", "-o", missing / "k.ptx"), 2,
                   f"-o {missing / 'k.ptx'}: the folder {missing} does not exist")
    (tmp_path / "file").write_text("a file")
    assert_refused(run("warploom", "compile", "--op", "matmul", "--dump-dir", tmp_path / "file" / "ir"), 2,
                   f"--dump-dir {tmp_path / 'file' / 'ir'}: {tmp_path / 'file'} is a file, not a folder")
    for proc in (run("warploom", "explain", "--png", missing / "x.png"),):
        assert "[Errno" not in proc.stderr


def test_compile_a_script_that_raises(tmp_path):
    script = tmp_path / "g.py"
    script.write_text("import warploom\ngraph = warploom.Graph('g')\na = graph.input('a', (4, 64), 'bf16')\n"
                      "b = graph.input('b', (32, 8), 'bf16')\ngraph.output(graph.matmul(a, b))\n")
    assert_refused(run("warploom", "compile", script), 1,
                   f"warploom compile: {script}:5: ShapeError: wl.matmul: contracting dims differ: lhs 4x64 has K = "
                   "64, rhs 32x8 has K = 32 (at `graph.output(graph.matmul(a, b))`)")
    script.write_text("x = 1\ny = x / 0\n")
    assert_refused(run("warploom", "compile", script), 1, f"{script}:2: ZeroDivisionError: division by zero")
    script.write_text("def f(:\n")
    assert_refused(run("warploom", "compile", script), 1, f"{script}:1: SyntaxError: ")


def test_compile_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin1.mlir"
    path.write_bytes(GEMM.replace("@gemm", "@g\xe9mm").encode("latin-1"))
    assert_refused(run("warploom", "compile", path), 1,
                   f"warploom compile: cannot read {path}: not UTF-8 text (byte offset 12)")
    assert_refused(run("warploom-opt", path), 1, f"warploom-opt: cannot read {path}: not UTF-8 text (byte offset 12)")


def test_an_unknown_option_shows_the_subcommands_usage():
    proc = run("warploom", "explain", "--frobnicate")
    assert_refused(proc, 2, "usage: warploom explain", "warploom explain: error: unrecognized arguments: --frobnicate")
    assert "{passes,compile" not in proc.stderr
    assert_refused(run("warploom", "explain", "--head-dims", "64"), 2, "--head-dims: did you mean --head-dim?")


def test_a_value_that_starts_with_a_dash():
    assert_refused(run("warploom", "emulate", "--shape", "-200x304x136"), 2,
                   "warploom emulate: --shape '-200x304x136': give M, N and K as positive integers MxNxK")
    assert_refused(run("warploom", "explain", "--shape", "-16x8x8"), 2,
                   "warploom explain: --shape '-16x8x8': give M, N and K as positive integers")


def test_compile_a_graph_with_no_kernel():
    import warploom
    g = Graph("g")
    g.output(g.exp(g.input("a", (4, 4), "bf16")))
    with pytest.raises(ValueError, match=r"^graph 'g' plans no kernel for sm_90a: warploom.compile builds one from a "
                                         r"wl.matmul \(2-D\) or a wl.attention .*and the graph has wl.exp; add one, or "
                                         r"evaluate the graph on the CPU with warploom.reference.interpret.evaluate$"):
        warploom.compile(g)                 # at once, not when .ptx is first read


def test_run_pipeline_in_the_wrong_order():
    from warploom.passes import PassError, run_pipeline
    g = Graph("g")
    g.output(g.matmul(g.input("a", ("M", "K"), "bf16"), g.input("b", ("K", "N"), "bf16")))
    with pytest.raises(PassError, match=r"^run_pipeline: wl-specialize needs wl-pipeline to run before it, and the "
                                        r"passes given \(wl-tile, wl-specialize\) do not: put them in the order of a "
                                        r"target's pipeline, e.g. wl-verify, wl-fuse"):
        run_pipeline(g, ["wl-tile", "wl-specialize"])
    with pytest.raises(PassError, match=r"^run_pipeline: wl-pipeline needs wl-tile to run before it"):
        run_pipeline(g, ["wl-pipeline", "wl-tile"])            # ran as a silent no-op before
    from mlir import ir
    with pytest.raises(ir.MLIRError, match=r"wl-plan-tmem: sm_90a has no Tensor Memory, so there is nothing to plan: "
                                           r"wl-plan-tmem belongs to the sm_100a pipeline"):
        run_pipeline(g, ["wl-tile", "wl-pipeline", "wl-specialize", "wl-plan-smem", "wl-plan-barriers",
                         "wl-plan-tmem"])        # an AttributeError before


def test_attention_numpy_input_names_the_argument():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"^attention: k: numpy arrays are host memory; warploom kernels need CUDA"):
        ops.attention(q, np.zeros(k.shape, np.float16), v)
    with pytest.raises(ValueError, match=r"^attention: v: numpy arrays are host memory"):
        ops.attention(q, k, np.zeros(v.shape, np.float16))


def test_emulate_sms_on_a_grid_kernel():
    assert_refused(run("warploom", "emulate", "--shape", "130x136x200", "--schedule", "grid", "--sms", "4"), 2,
                   "warploom emulate: --sms 4: sets the CTA count of a persistent or stream-K grid, and "
                   "warploom.ops.matmul picks wl_gemm_bf16_kn_128x", "a grid-schedule kernel (a CTA per tile): drop "
                   "--sms, or pick another schedule with --schedule")


def _same_document(b, h, q_idx, kv_idx, doc_id):
    return doc_id[q_idx] == doc_id[kv_idx]


def test_ids_declared_sorted_out_of_order_are_refused(monkeypatch):
    """ops.attention's check of ids declared nondecreasing() (host.read_back stubbed: no GPU here; the real read in
    tests/gpu/test_attention_mods.py)."""
    from warploom.runtime import host
    from warploom.score import nondecreasing, trace_mods
    ids = np.array([0, 0, 1, 1, 0, 2], np.int32)
    mods, _ = trace_mods(None, _same_document, {"doc_id": nondecreasing(ids)})
    monkeypatch.setattr(host, "read_back", lambda t: ids)
    problem = oa.AttentionProblem("bshd", "bf16", 1, 6, 6, 1, 1, 64, 0)
    with pytest.raises(ValueError, match=r"^attention: captured tensor 'doc_id' is declared nondecreasing\(\) but "
                                         r"doc_id\[3\] = 1 > doc_id\[4\] = 0: sort it, or pass it without "
                                         r"nondecreasing\(\) \(the kernel then walks every key block\)$"):
        oa.check_captured(mods, (nondecreasing(tensor((6,), "i32")),), problem)


def test_nondecreasing_where_it_cannot_bound_is_refused():
    from warploom.score import ModError, nondecreasing, trace_mods
    with pytest.raises(ModError, match=r"^captured tensor 'doc_id' is float32 and declared nondecreasing\(\): only "
                                       r"int32 ids \(document ids\) bound blocks; convert it with \.int\(\) or pass "
                                       r"it undeclared$"):
        trace_mods(None, _same_document, {"doc_id": nondecreasing(np.zeros(4, np.float32))})
    with pytest.raises(ModError, match=r"^captured tensor 'doc_id' is declared non-decreasing along its last "
                                       r"dimension but dimension 0 is indexed by q_idx, which reads q_idx: index its "
                                       r"last dimension by the positions"):
        trace_mods(None, lambda b, h, q_idx, kv_idx, doc_id: doc_id[q_idx, b] == doc_id[kv_idx, b],
                   {"doc_id": nondecreasing(np.zeros((4, 2), np.int32))})


def test_floor_division_of_a_float_is_refused():
    from warploom.score import ModError, trace_mods
    with pytest.raises(ModError, match=r"^score_mod <lambda>: // \(floor division\) divides integers \(indices, i32 scalars and tensors\), "
                                       r"got f32, i32; for a float quotient use /$"):
        trace_mods(lambda score, b, h, q_idx, kv_idx: score // 2)


def test_a_block_table_needs_torch_tensors():
    from warploom.kernel.contract import AttentionSpec
    from warploom.ops_attention import block_table
    from warploom.score import trace_mods
    mods, values = trace_mods(None, _same_document, {"doc_id": np.zeros(8, np.int32)})
    with pytest.raises(ValueError, match=r"^attention: the mask reads \['doc_id'\] at the query and key positions, so "
                                         r"its key blocks come from a block table built with torch on the GPU: pass "
                                         r"torch tensors"):
        block_table(AttentionSpec(mods=mods, causal=True), None, values)


def test_graph_input_nondecreasing_is_an_i32_table():
    g = Graph("g")
    with pytest.raises(ValueError, match=r"^input 'doc' is f32 and declared nondecreasing: only an i32 table "
                                         r"\(document ids\) bounds an attention's blocks$"):
        g.input("doc", ("T",), "f32", nondecreasing=True)
