"""warploom.score: tracing Python modifiers, the expression's types and canonical text, evaluation, and the errors a
user meets (each names the operation and the way out)."""
import math

import numpy as np
import pytest

from warploom.kernel.contract import AttentionSpec
from warploom.score import ModError, ScoreMods, evaluate, exp2, parse, tanh, trace_mods, where
from warploom.score.expr import NumpyOps, apply, const, leaf, scalar


def softcap(score, b, h, q_idx, kv_idx, cap):
    return cap * tanh(score / cap)


def window(b, h, q_idx, kv_idx, size):
    return (q_idx - kv_idx <= size) & (kv_idx <= q_idx)


def test_trace_gives_typed_expressions_and_ordered_scalars():
    mods, values = trace_mods(softcap, window, {"size": 7, "cap": 30.0})
    assert mods.score.type == "f32" and mods.mask.type == "bool"
    assert mods.scalars == (("cap", "f32"), ("size", "i32")) and values == (30.0, 7)
    assert mods.params() == (("mod_cap", "f32"), ("mod_size", "i32"))
    assert mods.score.text == "(mul (scalar cap f32) (tanh (div score (scalar cap f32))))"


def test_canonical_text_round_trips_through_the_ir_attributes():
    mods, _ = trace_mods(lambda s, b, h, q, kv: where(q >= kv, s * 0.5 - 1, -math.inf), window, {"size": 3})
    assert ScoreMods.from_attrs(mods.attrs()) == mods
    for e in (mods.score, mods.mask):
        assert parse(e.text) == e
    with pytest.raises(ModError, match="missing"):
        parse("(add score")
    with pytest.raises(ModError, match="takes 2 operands"):
        parse("(add score)")


def test_another_scalar_value_is_the_same_kernel_another_function_is_not():
    a = AttentionSpec("bf16", 128, True, mods=trace_mods(softcap, None, {"cap": 30.0})[0])
    b = AttentionSpec("bf16", 128, True, mods=trace_mods(softcap, None, {"cap": 50.0})[0])
    c = AttentionSpec("bf16", 128, True, mods=trace_mods(lambda s, b, h, q, kv, cap: s / cap, None, {"cap": 3.0})[0])
    plain = AttentionSpec("bf16", 128, True)
    assert a.kernel_name == b.kernel_name != c.kernel_name
    assert plain.kernel_name + "_m" + a.mods.key == a.kernel_name
    assert a.params[-1] == ("mod_cap", "f32") and plain.params == a.params[:-1]


def test_numpy_evaluation_follows_the_python_function():
    mods, _ = trace_mods(lambda s, b, h, q, kv, n: s - exp2(-8.0 * (h + 1) / n) * abs(q - kv), None, {"n": 4})
    h, q, kv = np.arange(4).reshape(-1, 1, 1), np.arange(5).reshape(1, -1, 1), np.arange(6).reshape(1, 1, -1)
    s = np.random.default_rng(0).standard_normal((4, 5, 6))
    got = evaluate(mods.score, {"score": s, "b": 0, "h": h, "q_idx": q, "kv_idx": kv, "n": 4}, NumpyOps)
    assert np.allclose(got, s - 2.0 ** (-8.0 * (h + 1) / 4) * np.abs(q - kv))


def test_floor_division_of_integers_rounds_toward_minus_infinity():
    """q_idx // size (a block of positions) as Python and torch round it, negative operands included; its bounds
    follow it where the divisor is at least 1."""
    mods, _ = trace_mods(None, lambda b, h, q, kv, size: (q - 7) // size == kv // -size, {"size": 3})
    assert mods.mask.text == ("(eq (floordiv (sub q_idx (const 7 i32)) (scalar size i32)) "
                              "(floordiv kv_idx (neg (scalar size i32))))")
    q, kv = np.meshgrid(np.arange(10), np.arange(10), indexing="ij")
    got = evaluate(mods.mask, {"q_idx": q, "kv_idx": kv, "b": 0, "h": 0, "size": 3}, NumpyOps)
    assert np.array_equal(got, (q - 7) // 3 == kv // -3)
    assert apply("floordiv", leaf("q_idx"), const(2)).type == "i32"


def test_int_and_float_promote_as_torch_does():
    assert apply("add", leaf("q_idx"), leaf("kv_idx")).type == "i32"
    assert apply("add", leaf("q_idx"), const(1.5)).type == "f32"
    assert apply("div", leaf("q_idx"), const(2)).type == "f32"
    assert apply("lt", leaf("q_idx"), scalar("w", "i32")).type == "bool"
    with pytest.raises(ModError, match="boolean"):
        apply("add", apply("lt", leaf("q_idx"), const(1)), const(1))


@pytest.mark.parametrize("fn, text", [
    (lambda s, b, h, q, kv: s if q > kv else 0.0, "truth value"),
    (lambda s, b, h, q, kv: max(s, 0.0), "truth value"),
    (lambda s, b, h, q, kv: math.tanh(s), "float()"),
    (lambda s, b, h, q, kv: s ** 2, r"\*\*"),
    (lambda s, b, h, q, kv: s % 3, "%"),
    (lambda s, b, h, q, kv: s // 3, "// .floor division. divides integers"),
    (lambda s, b, h, q, kv: s[0], "indexing"),
    (lambda s, b, h, q, kv: s + "x", "str"),
    (lambda s, b, h, q, kv: q < kv, "boolean is a mask"),
    (lambda s, b, h: s, "positional arguments"),
])
def test_what_cannot_be_traced_is_named(fn, text):
    with pytest.raises(ModError, match=text):
        trace_mods(fn)


def test_scalar_errors_name_the_scalar_and_the_fix():
    with pytest.raises(ModError, match="'cap'.*scalars="):
        trace_mods(softcap)
    with pytest.raises(ModError, match="neither"):
        trace_mods(softcap, None, {"cap": 1.0, "other": 2.0})
    with pytest.raises(ModError, match="int .i32. or float"):
        trace_mods(softcap, None, {"cap": "30"})
    with pytest.raises(ModError, match="returns a boolean"):
        trace_mods(None, lambda b, h, q, kv: q - kv)
    with pytest.raises(ModError, match="not the score"):
        ScoreMods(mask=apply("lt", leaf("score"), const(0.0)))


def test_identity_modifiers_are_no_modifiers():
    mods, _ = trace_mods(lambda s, b, h, q, kv: s, lambda b, h, q, kv: True)
    assert not mods and AttentionSpec("bf16", 64, mods=mods).kernel_name == AttentionSpec("bf16", 64).kernel_name


def test_torch_style_calls_trace_through_torch_function():
    torch = pytest.importorskip("torch")
    mods, _ = trace_mods(lambda s, b, h, q, kv, cap: torch.where(q >= kv, cap * torch.tanh(s / cap), -math.inf),
                         None, {"cap": 5.0})
    assert mods.score.text == ("(where (ge q_idx kv_idx) (mul (scalar cap f32) (tanh (div score (scalar cap f32)))) "
                               "(const -inf f32))")


def test_the_graph_carries_the_modifiers_into_the_kernel_program():
    from warploom.build import planned_attention_program
    mods, _ = trace_mods(softcap, window, {"cap": 30.0, "size": 9})
    program = planned_attention_program("bf16", 64, True, mods=mods)
    assert ScoreMods.from_attrs(program.attrs) == mods
    from warploom.lowering import kernel_name
    assert kernel_name(program).endswith("_m" + mods.key)


# ---- captured tensors ----------------------------------------------------------------------------------------

def test_captured_tensor_traces_into_loads_and_parses_back():
    import numpy as np

    from warploom.score.expr import ScoreMods, parse

    def rel(score, b, h, q_idx, kv_idx, bias, shift):
        return score + bias[h, q_idx - kv_idx + shift]
    mods, values = trace_mods(rel, None, {"bias": np.zeros((2, 9), np.float32), "shift": 4})
    assert mods.score.text == "(add score (load bias f32 h (add (sub q_idx kv_idx) (scalar shift i32))))"
    assert parse(mods.score.text) == mods.score
    assert mods.tensors == (("bias", "f32", 2),) and mods.scalars == (("shift", "i32"),)
    assert mods.params() == (("mod_shift", "i32"), ("mod_bias", "ptr"), ("mod_bias_s0", "i32"), ("mod_bias_s1", "i32"))
    assert ScoreMods.from_attrs(mods.attrs()) == mods
    assert values[0] == 4 and values[1].shape == (2, 9)


@pytest.mark.parametrize("tensor, index, message", [
    ("float64", "h, kv_idx", "is float64: a modifier reads float32 or int32 tensors; convert it with .float()"),
    ("float32", "h", "has 2 dimensions: index it with 2 values"),
    ("float32", "h, 1:3", "has 2 dimensions: index it with 2 values (no slices)"),
    ("float32", "h, score", "index 1 is f32, not an integer"),
])
def test_captured_tensor_misuse_is_refused(tensor, index, message):
    import numpy as np
    fn = eval(f"lambda score, b, h, q_idx, kv_idx, t: score + t[{index}]")
    with pytest.raises(ModError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        trace_mods(fn, None, {"t": np.zeros((2, 3), dtype=tensor)})


def test_index_overrun_names_the_dimension_and_the_reach():
    import numpy as np

    from warploom.ops_attention import AttentionProblem, index_overrun

    def rel(score, b, h, q_idx, kv_idx, bias, shift):
        return score + bias[h, q_idx - kv_idx + shift]
    bias = np.zeros((8, 199), np.float32)
    mods, values = trace_mods(rel, None, {"bias": bias, "shift": 99})
    problem = AttentionProblem("bshd", "bf16", 1, 100, 100, 8, 8, 64, 0)
    assert index_overrun(mods, (99,), problem, "bias", bias.shape) is None
    why = index_overrun(mods, (98,), problem, "bias", bias.shape)
    assert "dimension 1" in why and "reaches -1..197" in why and "0..198" in why
    wide = AttentionProblem("bshd", "bf16", 1, 100, 100, 9, 9, 64, 0)
    assert "dimension 0 by h, which reaches 0..8" in index_overrun(mods, (99,), wide, "bias", bias.shape)
