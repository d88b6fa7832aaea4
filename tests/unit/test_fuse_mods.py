"""wl-fuse on attentions written out with score and mask ops (issue 34, item 2): the graph ops, their shape rules and
reference semantics, the fused wl.attention's modifiers (the same ScoreMods, so the same kernel, as the Python
functions warploom.score traces), the meaning kept (float64 interpreter before and after), and the reasons a chain is
left alone, as `warploom explain GRAPH` and `warploom compile` print them."""
import numpy as np
import pytest

import warploom as wl
from tests import longform
from warploom.dialect import op_attrs, op_kind
from warploom.dialect.shapes import ShapeError
from warploom.passes import run_pipeline
from warploom.reference.interpret import evaluate
from warploom.score import ScoreMods, trace_mods
from warploom.tools.cli import main


def fused(graph):
    module, _ = run_pipeline(graph, ["wl-verify", "wl-fuse", "wl-verify"])
    found = []

    def visit(op):
        if op_kind(op) in ("attention", "softmax"):
            found.append((op_kind(op), op_attrs(op)))
        return 0

    with module.context:
        for op in module.body.operations[0].regions[0].blocks[0].operations:
            visit(op)
    return module, found


@pytest.mark.parametrize("name", list(longform.VARIANTS))
def test_the_long_form_fuses_into_the_traced_modifiers(name):
    """The written-out variant becomes one wl.attention whose modifiers are exactly what tracing the same Python
    functions gives: one cache key, one kernel, whichever way the user wrote it."""
    g = longform.graph(name, "bf16", 2, 4, 37, 53, 64)
    module, found = fused(g)
    assert [k for k, _ in found] == ["attention"], found
    attrs = found[0][1]
    score_mod, mask_mod, causal = longform.PYTHON[name]
    expected, _ = trace_mods(score_mod, mask_mod, longform.values(name, 2, 37, 53, 4, np.random.default_rng(0)))
    assert ScoreMods.from_attrs(attrs) == expected
    assert attrs["causal"] == causal and attrs["layout"] == "bhsd"
    assert attrs["scale"] == pytest.approx(longform.SCALE.get(name, 0.125))
    text = str(module)
    for op in ("wl.index", "wl.scalar", "wl.gather", "wl.where", "wl.constant", "wl.softmax"):
        assert op not in text          # the chain is gone, the captured tensors stay graph inputs


@pytest.mark.parametrize("name", list(longform.VARIANTS))
@pytest.mark.parametrize("sq, sk", [(37, 53), (40, 40), (61, 29)])
def test_fusing_keeps_the_graph_meaning(name, sq, sk):
    """The float64 interpreter gives the same output before and after wl-fuse, Sq != Sk included (the causal mask
    bottom-right, the indices absolute)."""
    rng = np.random.default_rng(sq * 100 + sk)
    g = longform.graph(name, "bf16", 2, 4, sq, sk, 16)
    module, _ = fused(g)
    extra = longform.values(name, 2, sq, sk, 4, rng)
    inputs = {"q": rng.standard_normal((2, 4, sq, 16)) * 2, "k": rng.standard_normal((2, 4, sk, 16)) * 2,
              "v": rng.standard_normal((2, 4, sk, 16)),
              **{n: x for n, x in extra.items() if isinstance(x, np.ndarray)}}
    scalars = {n: x for n, x in extra.items() if not isinstance(x, np.ndarray)}
    before = evaluate(g.module, inputs, scalars=scalars)[0]
    after = evaluate(module, inputs, scalars=scalars)[0]
    assert not np.isnan(before).any()
    np.testing.assert_allclose(after, before, rtol=1e-12, atol=1e-12)
    # the modifiers matter: the plain attention differs
    plain = wl.reference.attention(inputs["q"], inputs["k"], inputs["v"], scale=0.125, layout="bhsd")
    assert np.abs(before - plain).max() > 1e-3


def test_a_mask_that_reads_the_score_is_score_arithmetic():
    g = wl.Graph("threshold")
    q, k, v = (g.input(n, (1, 2, 16, 16), "f16") for n in "qkv")
    s = g.scale(g.matmul(q, k, transpose_b=True), 0.5)
    s = g.where(g.gt(s, -1.0), s, float("-inf"))
    g.output(g.matmul(g.softmax(s), v))
    _, found = fused(g)
    mods = ScoreMods.from_attrs(found[0][1])
    assert mods.mask is None and mods.score.text == "(where (gt score (const -1.0 f32)) score (const -inf f32))"


# ---- what is left alone, and why ------------------------------------------------------------------------------

def _unfused(build):
    g = wl.Graph("left")
    q, k, v = (g.input(n, (1, 2, 16, 16), "bf16") for n in "qkv")
    s = g.scale(g.matmul(q, k, transpose_b=True), 0.25)
    g.output(g.matmul(g.softmax(build(g, s)), v))
    _, found = fused(g)
    assert [k for k, _ in found] == ["softmax"]
    return found[0][1]["wl.unfused"]


@pytest.mark.parametrize("build, reason", [
    (lambda g, s: g.relu(s), "wl.relu (test_fuse_mods.py:"),
    (lambda g, s: g.tanh(g.causal_mask(s)), "sits under score arithmetic; the kernel masks after the score modifier"),
    (lambda g, s: g.cast(g.mul(s, 2.0), "bf16"), "rounds the scores to bf16"),
    (lambda g, s: g.add(s, g.scalar("cap", "i32")), None),       # fuses: an i32 scalar meets the scores as a float
])
def test_the_reason_a_chain_is_left_alone(build, reason):
    if reason is None:
        g = wl.Graph("fine")
        q, k, v = (g.input(n, (1, 2, 16, 16), "bf16") for n in "qkv")
        g.output(g.matmul(g.softmax(build(g, g.matmul(q, k, transpose_b=True))), v))
        assert [k for k, _ in fused(g)[1]] == ["attention"]
        return
    assert reason in _unfused(build)


def test_a_scalar_read_as_two_types_is_left_alone_naming_it():
    why = _unfused(lambda g, s: g.add(g.mul(s, g.scalar("w")), g.cast(g.scalar("w", "i32"), "f32")))
    assert "scalar 'w' is used as f32 and as i32" in why


# ---- the builder and the shape rules --------------------------------------------------------------------------

def test_builder_types_and_broadcast():
    g = wl.Graph("types")
    s = g.input("s", (1, 2, 8, 8), "bf16")
    i = g.index(s, "kv_idx")
    assert i.dtype == "i32" and i.shape == (1, 2, 8, 8)
    assert g.scalar("w", "i32").shape == () and g.constant(2).dtype == "i32" and g.constant(True).dtype == "i1"
    assert g.add(s, 1.5).dtype == "bf16"                  # a Python float: an f32 constant, taking the scores' type
    assert g.div(i, 2).dtype == "f32"                      # i32 / i32 is a float
    assert g.sub(i, 1).dtype == "i32" and g.lt(i, 3).dtype == "i1"
    assert g.where(g.lt(i, 3), s, float("-inf")).dtype == "bf16"
    assert g.cast(i, "f32").dtype == "f32"


@pytest.mark.parametrize("build, message", [
    (lambda g, s: g.index(g.input("r3", (2, 8, 8), "bf16"), "q_idx"), "an index reads the rank-4"),
    (lambda g, s: g.index(s, "row"), "dim 'row' is not one of b, h, q_idx, kv_idx"),
    (lambda g, s: g.where(s, s, s), "where's condition is an i1 tensor"),
    (lambda g, s: g.and_(g.index(s, "h"), g.lt(s, 0.0)), "and combines i1 tensors"),
    (lambda g, s: g.gather(g.input("t", (4, 9), "f32"), g.index(s, "h")), "one index per dimension (2), got 1"),
    (lambda g, s: g.gather(g.input("t", (4,), "bf16"), g.index(s, "h")), "a modifier reads f32 or i32 tables"),
    (lambda g, s: g.scalar("soft cap"), "must be an identifier"),
    (lambda g, s: g.compare(s, s, "less"), "predicate 'less' is not one of lt, le, gt, ge, eq, ne"),
    (lambda g, s: g.add(s, g.input("h", (1, 2, 8, 8), "f16")), "element types differ: lhs is bf16, rhs is f16"),
])
def test_builder_refuses_with_the_rule(build, message):
    g = wl.Graph("bad")
    s = g.input("s", (1, 2, 8, 8), "bf16")
    with pytest.raises((ShapeError, ValueError), match=message.replace("(", r"\(").replace(")", r"\)")):
        build(g, s)


# ---- the command line -----------------------------------------------------------------------------------------

def _script(tmp_path, body: str):
    path = tmp_path / "graph.py"
    path.write_text("import warploom as wl\n"
                    "graph = wl.Graph('g')\n"
                    "q, k, v = (graph.input(n, (1, 4, 64, 64), 'bf16') for n in 'qkv')\n"
                    "s = graph.scale(graph.matmul(q, k, transpose_b=True), 0.125)\n"
                    f"{body}\n"
                    "graph.output(graph.matmul(graph.softmax(s), v))\n")
    return str(path)


def test_explain_a_graph_file_shows_the_modifiers(tmp_path, capsys):
    path = _script(tmp_path, "cap = graph.scalar('cap')\n"
                             "s = graph.causal_mask(graph.mul(cap, graph.tanh(graph.div(s, cap))))")
    assert main(["explain", path]) == 0
    out = capsys.readouterr().out
    assert "wl.attention (graph.py:4): causal true, scale 0.125, layout bhsd" in out
    assert "modifiers: score (mul (scalar cap f32) (tanh (div score (scalar cap f32)))); cap:f32" in out
    assert "kernel parameters: mod_cap (f32)" in out


# ---- grouped-query attention written out: k and v's heads repeated (wl.repeat) -----------------------------------

@pytest.mark.parametrize("name, heads, kv_heads", [("softcap", 4, 2), ("bias-documents", 4, 1),
                                                   ("alibi-window", 6, 3)])
def test_repeated_kv_heads_fuse_into_a_gqa_attention(name, heads, kv_heads):
    """k and v of Hkv heads repeated to Hq (torch's repeat_interleave) fuse into one wl.attention that reads the Hkv
    heads (GQA, MQA), with the same modifiers as without the repeat; the interpreter gives the same output before
    and after the fusion, and the same as the repeat spelled out on the inputs."""
    g = longform.graph(name, "bf16", 2, heads, 37, 53, 16, kv_heads=kv_heads)
    module, found = fused(g)
    assert [k for k, _ in found] == ["attention"]
    assert "wl.repeat" not in str(module) and f"tensor<2x{kv_heads}x53x16xbf16>" in str(module)
    score_mod, mask_mod, _ = longform.PYTHON[name]
    rng = np.random.default_rng(heads)
    extra = longform.values(name, 2, 37, 53, heads, rng)
    assert ScoreMods.from_attrs(found[0][1]) == trace_mods(score_mod, mask_mod, extra)[0]
    inputs = {"q": rng.standard_normal((2, heads, 37, 16)) * 2, "k": rng.standard_normal((2, kv_heads, 53, 16)) * 2,
              "v": rng.standard_normal((2, kv_heads, 53, 16)),
              **{n: x for n, x in extra.items() if isinstance(x, np.ndarray)}}
    scalars = {n: x for n, x in extra.items() if not isinstance(x, np.ndarray)}
    before = evaluate(g.module, inputs, scalars=scalars)[0]
    after = evaluate(module, inputs, scalars=scalars)[0]
    np.testing.assert_allclose(after, before, rtol=1e-12, atol=1e-12)
    full = longform.graph(name, "bf16", 2, heads, 37, 53, 16)
    spelled = {**inputs, **{n: np.repeat(inputs[n], heads // kv_heads, axis=1) for n in "kv"}}
    np.testing.assert_allclose(evaluate(full.module, spelled, scalars=scalars)[0], before, rtol=1e-12, atol=1e-12)


def _gqa_left(build):
    g = wl.Graph("left")
    q = g.input("q", (1, 4, 16, 16), "bf16")
    k, v = build(g)
    g.output(g.matmul(g.softmax(g.matmul(q, k, transpose_b=True)), v))
    _, found = fused(g)
    assert [k for k, _ in found] == ["softmax"]
    return found[0][1]["wl.unfused"]


def test_a_repeat_that_is_not_gqa_is_left_alone_saying_why():
    def one_side(g):
        return g.repeat(g.input("k", (1, 2, 16, 16), "bf16"), 2), g.input("v", (1, 4, 16, 16), "bf16")

    def two_factors(g):
        return g.repeat(g.input("k", (1, 2, 16, 16), "bf16"), 2), g.repeat(g.input("v", (1, 1, 16, 16), "bf16"), 4)

    def the_keys_axis(g):
        return tuple(g.repeat(g.input(n, (1, 4, 8, 16), "bf16"), 2, axis=2) for n in "kv")
    assert "repeats the heads of k only: repeat both k and v (GQA) or neither" in _gqa_left(one_side)
    assert "k's heads are repeated 2 times and v's 4: one factor for both" in _gqa_left(two_factors)
    assert "repeats axis 2, not the heads (axis 1 of [B, H, S, D])" in _gqa_left(the_keys_axis)


def test_repeat_shape_rules():
    g = wl.Graph("r")
    x = g.input("x", (2, 3, 5), "f16")
    assert g.repeat(x, 4, axis=1).shape == (2, 12, 5) and g.repeat(x, 2, axis=-1).shape == (2, 3, 10)
    with pytest.raises(ShapeError, match="times = 0: each slice is repeated at least once"):
        g.repeat(x, 0)
    with pytest.raises(ShapeError, match="axis 3 is out of range"):
        g.repeat(x, 2, axis=3)


# ---- document ids declared sorted: a graph input with nondecreasing=True ----------------------------------------

def _documents_graph(sorted_ids: bool, elem: str = "i32"):
    g = wl.Graph("docs")
    q, k, v = (g.input(n, (1, 2, 64, 64), "bf16") for n in "qkv")
    doc = g.input("doc_id", ("T",), elem, nondecreasing=sorted_ids)
    s = g.scale(g.matmul(q, k, transpose_b=True), 0.25)
    qi, ki = g.index(s, "q_idx"), g.index(s, "kv_idx")
    s = g.where(g.eq(g.gather(doc, qi), g.gather(doc, ki)), s, float("-inf"))
    g.output(g.matmul(g.softmax(g.causal_mask(s)), v))
    return g


def test_an_input_declared_nondecreasing_fuses_into_sorted_ids():
    """g.input(..., nondecreasing=True) is warploom.score.nondecreasing written as a graph: the fused attention's
    modifiers are the traced ones with the ids declared (the same kernel, block-sparse over documents); undeclared,
    the same graph fuses into the undeclared ids' modifiers."""
    from warploom.score import nondecreasing

    def same_document(b, h, q_idx, kv_idx, doc_id):
        return doc_id[q_idx] == doc_id[kv_idx]
    ids = np.zeros(3, np.int32)
    for declared in (True, False):
        module, found = fused(_documents_graph(declared))
        assert ("wl.nondecreasing" in str(module)) == declared
        expected = trace_mods(None, same_document, {"doc_id": nondecreasing(ids) if declared else ids})[0]
        assert ScoreMods.from_attrs(found[0][1]) == expected


def test_a_sorted_input_is_an_i32_table():
    with pytest.raises(ValueError, match="input 'doc_id' is f32 and declared nondecreasing: only an i32 table"):
        _documents_graph(True, "f32")


def test_the_declared_graph_input_is_checked_when_the_kernel_runs():
    """Compiled from the graph, the kernel refuses ids out of order as ops.attention does (the emulator's check,
    with the graph's declaration carried into the kernel program)."""
    from warploom.build import compile_graph
    from warploom.emulate import emulate_attention
    kernel = compile_graph(_documents_graph(True), "sm_90a")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 64, 64)) for _ in range(3))
    ids = np.repeat(np.arange(4), 16).astype(np.int32)
    ids[20] = 0
    with pytest.raises(ValueError, match=r"doc_id\[19\] = 1 > doc_id\[20\] = 0"):
        emulate_attention(q, k, v, causal=True, scale=0.25, layout="bhsd", program=kernel.program,
                          scalars={"doc_id": ids})
