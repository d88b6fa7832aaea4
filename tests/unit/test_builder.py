"""The Python graph builder: shapes, errors at the call site, and the MLIR it prints."""
import pytest

import warploom as wl
from warploom.dialect.shapes import ShapeError


def test_attention_graph_prints_wl_ir():
    g = wl.Graph("attn")
    q = g.input("q", ("B", "S", 16, 128), "bf16")
    k = g.input("k", ("B", "S", 4, 128), "bf16")
    v = g.input("v", ("B", "S", 4, 128), "bf16")
    o = g.attention(q, k, v, causal=True)
    assert o.shape == (None, None, 16, 128)
    g.output(o)
    text = str(g)
    assert '"wl.attention"(%arg0, %arg1, %arg2)' in text
    assert 'causal = true, layout = "bshd"' in text
    assert 'wl.dims = ["B", "S", "16", "128"]' in text
    assert "tensor<?x?x16x128xbf16>" in text


def test_ops_infer_result_types():
    g = wl.Graph()
    a = g.input("a", ("M", 64), "f16")
    b = g.input("b", (64, 32), "f16")
    c = g.matmul(a, b)
    assert c.shape == (None, 32) and c.dtype == "f16"
    assert g.reduce_sum(c, axis=0).shape == (32,)
    assert g.cast(c, "e4m3").dtype == "f8E4M3FN"
    assert g.matmul(a, g.input("w", (32, 64), "f16"), transpose_b=True).shape == (None, 32)
    for fn in (g.exp, g.exp2, g.relu, g.gelu, g.silu, g.softmax, g.causal_mask):
        assert fn(c).shape == c.shape


@pytest.mark.parametrize("build, message", [
    (lambda g: g.matmul(g.input("a", (4, 64), "bf16"), g.input("b", (32, 8), "bf16")), "K = 64"),
    (lambda g: g.matmul(g.input("a", (4, 64), "bf16"), g.input("b", (64, 8), "f16")), "lhs is bf16, rhs is f16"),
    (lambda g: g.attention(g.input("q", (1, 8, 6, 64), "bf16"), g.input("k", (1, 8, 4, 64), "bf16"),
                           g.input("v", (1, 8, 4, 64), "bf16")), "q heads (6) must be a multiple of kv heads (4)"),
    (lambda g: g.attention(g.input("q", (1, 8, 4, 64), "bf16"), g.input("k", (1, 8, 4, 128), "bf16"),
                           g.input("v", (1, 8, 4, 64), "bf16")), "head dim of q and k differs: 64 vs 128"),
    (lambda g: g.softmax(g.input("x", (4, 4), "f32"), axis=2), "axis 2 is out of range"),
    (lambda g: g.gelu(g.input("x", (4,), "f32"), approximate="fast"), "'fast'"),
])
def test_shape_errors_name_the_values(build, message):
    with pytest.raises(ShapeError) as e:
        build(wl.Graph())
    assert message in str(e.value)


def test_bad_inputs_are_rejected():
    g = wl.Graph()
    with pytest.raises(ValueError, match="unknown element type 'int7'"):
        g.input("a", (4,), "int7")
    with pytest.raises(ValueError, match="positive int or a symbol"):
        g.input("a", (0, 4), "f32")
    g.input("a", (4,), "f32")
    with pytest.raises(ValueError, match="already has an input named 'a'"):
        g.input("a", (4,), "f32")
    other = wl.Graph().input("x", (4,), "f32")
    with pytest.raises(ValueError, match="is not a tensor of graph"):
        g.exp(other)
    with pytest.raises(ValueError, match="identifier"):
        wl.Graph("not a name")


def test_dynamic_head_dim_needs_explicit_scale():
    g = wl.Graph()
    q = g.input("q", (1, 2, 3, "D"), "bf16")
    with pytest.raises(ShapeError, match="pass scale="):
        g.attention(q, q, q)
    assert g.attention(q, q, q, scale=0.5).shape == (1, 2, 3, None)


def test_ops_carry_the_python_call_site_as_location():
    g = wl.Graph()
    x = g.input("x", (4,), "f32")
    g.output(g.exp(x))
    text = g.module.operation.get_asm(enable_debug_info=True)
    assert "test_builder.py" in text
