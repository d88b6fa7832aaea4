"""The planning passes on an attention: wl-tile .. wl-plan-barriers turn a `wl.attention` into exactly the planned
FA3 program of tests/emulate/fa3_plan.py (the contract with the sm_90a attention lowering), from the Python
builder or from the long way (matmul, scale, causal_mask, softmax, matmul) through wl-fuse; and every refusal
names the value, the limit and the way out."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from mlir import ir

import warploom as wl
from warploom.dialect import make_context
from warploom.dialect.kernel_ir import kernel_ops
from warploom.kernel import read_program
from warploom.kernel.write import write_program
from warploom.passes import run_passes, run_pipeline


def _load_fa3_plan():
    path = Path(__file__).resolve().parents[1] / "emulate" / "fa3_plan.py"
    spec = importlib.util.spec_from_file_location("fa3_plan_contract", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fa3_plan = _load_fa3_plan()
planned_fa3 = fa3_plan.planned_fa3

GRAPH = ["wl-verify", "wl-fuse", "wl-verify"]
PLANNING = ["wl-tile", "wl-pipeline", "wl-specialize", "wl-plan-smem", "wl-plan-barriers"]
COMBOS = [(elem, d, causal) for elem in ("bf16", "f16") for d in (64, 128, 256) for causal in (False, True)]


def attention_graph(elem="bf16", d=128, causal=False, layout="bshd", heads=(16, 4), scale=None, dv=None):
    """q [B, S, Hq, D], k and v [B, S, Hkv, D] (GQA), or [B, H, S, D] for layout bhsd."""
    g = wl.Graph("attn")

    def shape(h, dim):
        return ("B", "S", h, dim) if layout == "bshd" else ("B", h, "S", dim)
    q = g.input("q", shape(heads[0], d), elem)
    k = g.input("k", shape(heads[1], d), elem)
    v = g.input("v", shape(heads[1], d if dv is None else dv), elem)
    g.output(g.attention(q, k, v, causal=causal, scale=scale, layout=layout))
    return g


def long_way_graph(elem="bf16", d=128, causal=False, scale=0.125):
    g = wl.Graph("attn")
    q, k, v = (g.input(n, ("B", 8, "S", d), elem) for n in "qkv")
    s = g.scale(g.matmul(q, k, transpose_b=True), scale)
    if causal:
        s = g.causal_mask(s)
    g.output(g.matmul(g.softmax(s), v))
    return g


def program_of(g, passes=PLANNING):
    module, _ = run_pipeline(g, [*GRAPH, *passes])
    with module.context:
        (kernel,) = kernel_ops(module)
        return read_program(kernel)


def fails(g, passes, message: str):
    with pytest.raises(ir.MLIRError, match=re.escape(message)):
        run_pipeline(g, [*GRAPH, *passes])


# ---- the contract ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("elem, d, causal", COMBOS)
def test_planning_passes_produce_the_planned_fa3_program(elem, d, causal):
    assert program_of(attention_graph(elem, d, causal)) == planned_fa3(elem, d, causal)


@pytest.mark.parametrize("overlap", [True, False], ids=["overlap", "serial"])
@pytest.mark.parametrize("elem, d, causal", COMBOS)
def test_persistent_schedule_gives_the_persistent_program(elem, d, causal, overlap):
    """wl-tile{schedule=persistent}: one CTA per SM walking the tiles; Q's ring gains an empty barrier (q_empty,
    one arrival per consumer warpgroup), the producer waits on it before each Q load, the consumers arrive on it
    after the key loop and the closing turn sync; the turns' first and last hand-overs are once per CTA."""
    passes = ["wl-tile{schedule=persistent}", *PLANNING[1:]]
    if not overlap:
        passes = [*passes[:2], "wl-specialize{overlap=false}", *passes[3:]]
    assert program_of(attention_graph(elem, d, causal), passes) == planned_fa3(elem, d, causal, overlap=overlap,
                                                                                schedule="persistent")


@pytest.mark.parametrize("elem, d, causal", [c for c in COMBOS if c[1] in (64, 128)])
def test_q_stages_2_gives_the_prefetching_program(elem, d, causal):
    """wl-pipeline{q-stages=2} on the persistent kernel: Q's ring takes two stages advancing once per tile
    (counts = "tile"), one q_full and one q_empty per stage, O on its own bytes; the protocol's ops are unchanged."""
    passes = ["wl-tile{schedule=persistent}", "wl-pipeline{q-stages=2}", *PLANNING[2:]]
    program = program_of(attention_graph(elem, d, causal), passes)
    assert program == planned_fa3(elem, d, causal, schedule="persistent", q_stages=2)
    assert program.rings["q"].stages == 2 and program.rings["q"].counts == "tile"
    assert program.smem_bytes == {64: 115808, 128: 230496}[d]


def test_q_stages_2_is_refused_where_it_has_no_meaning_or_no_room():
    """A grid-schedule attention (one tile a CTA) has no next tile; head dim 256 has no room for a second Q tile."""
    grid = ["wl-tile{schedule=grid}", "wl-pipeline{q-stages=2}", *PLANNING[2:]]
    with pytest.raises(Exception, match="q-stages = 2: a second Q stage serves the persistent sm_90a attention"):
        program_of(attention_graph("bf16", 128, False), grid)
    wide = ["wl-tile{schedule=persistent}", "wl-pipeline{q-stages=2}", *PLANNING[2:]]
    with pytest.raises(Exception, match="q-stages = 2: 2 Q tiles beside the K/V rings and O's staging tile do not "
                                        "fit the 232448 B of smem"):
        program_of(attention_graph("f16", 256, False), wide)


@pytest.mark.parametrize("elem, d, causal", COMBOS)
def test_overlap_false_gives_the_serial_program(elem, d, causal):
    """wl-specialize{overlap=false}: the serial schedule (S, softmax, P V per key block, every MMA retired at once)."""
    passes = [*PLANNING[:2], "wl-specialize{overlap=false}", *PLANNING[3:]]
    assert program_of(attention_graph(elem, d, causal), passes) == planned_fa3(elem, d, causal, overlap=False)


def test_overlap_is_refused_for_a_gemm():
    g = wl.Graph("mm")
    a, b = g.input("a", (256, 128), "bf16"), g.input("b", (128, 256), "bf16")
    g.output(g.matmul(a, b))
    fails(g, ["wl-tile", "wl-pipeline", "wl-specialize{overlap=true}"],
          "overlap = true: the intra-warpgroup overlap pipelines a loop with register compute between its MMAs "
          "(attention); this kernel has none (use mma-in-flight for a GEMM)")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_the_long_way_through_wl_fuse_gives_the_same_program(d, causal):
    fused = program_of(long_way_graph("bf16", d, causal))
    assert fused == program_of(attention_graph("bf16", d, causal, layout="bhsd", heads=(8, 8)))
    assert fused == planned_fa3("bf16", d, causal)


def test_layout_static_sizes_and_scale_do_not_change_the_kernel():
    """B, S, H are runtime sizes (the kernel takes `?` dims through tensor.cast), the layout is the TMA strides'
    business and the scale a runtime argument: the program is the same."""
    base = program_of(attention_graph("f16", 64, True))
    assert program_of(attention_graph("f16", 64, True, layout="bhsd", heads=(4, 4), scale=0.3)) == base
    g = wl.Graph("attn")
    q, k, v = (g.input(n, (2, 300, 8, 64), "f16") for n in "qkv")
    g.output(g.attention(q, k, v, causal=True))
    assert program_of(g) == base


def test_kernel_ir_has_two_results_and_keeps_the_graph_types():
    g = attention_graph("bf16", 128, False)
    module, records = run_pipeline(g, [*GRAPH, "wl-tile"])
    text = records[-1].ir
    assert "tensor.cast %arg0 : tensor<?x?x16x128xbf16> to tensor<?x?x?x128xbf16>" in text
    assert '%0:2 = "wl.kernel"(%cast, %cast_0, %cast_1)' in text
    assert "-> (tensor<?x?x?x128xbf16>, tensor<?x?x?xf32>)" in text
    assert "tensor.cast %0#0 : tensor<?x?x?x128xbf16> to tensor<?x?x16x128xbf16>" in text
    assert 'output_names = ["out", "lse"]' in text and 'layout = "bshd"' in text
    with module.context:
        (kernel,) = kernel_ops(module)
        p = read_program(kernel)
    assert set(p.outputs) == {"out", "lse"} and "scale" not in p.attrs and "layout" not in p.attrs


@pytest.mark.parametrize("passes, want", [
    (["wl-tile{block-n=64}", *PLANNING[1:]], dict(head_dim=128, block_n=64)),
    (["wl-tile{block-n=256}", *PLANNING[1:]], dict(head_dim=64, block_n=256)),
    (["wl-tile", "wl-pipeline{stages=3}", *PLANNING[2:]], dict(head_dim=64, stages=3)),
])
def test_block_n_and_stages_options_override_the_defaults(passes, want):
    assert program_of(attention_graph("bf16", want["head_dim"], True), passes) == planned_fa3("bf16", causal=True,
                                                                                             **want)


def test_default_block_n_matches_the_contract():
    from warploom.passes.tile import default_block_n
    for schedule in ("grid", "persistent"):
        assert [default_block_n(d, schedule) for d in (64, 128, 256)] == \
            [fa3_plan.default_block_n(d, schedule) for d in (64, 128, 256)]


@pytest.mark.parametrize("passes", range(1, 6))
def test_write_is_the_inverse_of_read_after_each_pass(passes):
    module, _ = run_pipeline(attention_graph("f16", 256, True), [*GRAPH, *PLANNING[:passes]])
    with module.context:
        (kernel,) = kernel_ops(module)
        before = str(kernel)
        write_program(kernel, read_program(kernel))
        assert str(kernel) == before


# ---- refusals: the value, the limit, the way out ---------------------------------------------------------

@pytest.mark.parametrize("graph, passes, message", [
    (lambda: attention_graph(d=96), ["wl-tile"],
     "wl-tile: head dim 96: the sm_90a attention kernels take head dims 64, 128, 256; zero-pad q, k and v to "
     "head dim 128"),
    (lambda: attention_graph(d=512), ["wl-tile"],
     "wl-tile: head dim 512: the sm_90a attention kernels take head dims 64, 128, 256; split the heads into "
     "head dims of 64, 128, 256"),
    (lambda: attention_graph(d="D", scale=0.1), ["wl-tile"],
     "wl-tile: the head dim of q is dynamic (?); attention kernels are compiled per head dim (64, 128, 256): "
     "give q, k, v a static last dim"),
    (lambda: attention_graph(d=128, dv=64), ["wl-tile"],
     "wl-tile: v has head dim 64, q and k 128: the attention kernel computes O with the q/k head dim (Dv = D); "
     "zero-pad v to 128 and slice the output"),
    (lambda: attention_graph("f32", 64), ["wl-tile"],
     "wl-tile: attention kernels take bf16 or f16 q, k, v, got f32, f32, f32: cast them to bf16 or f16"),
    (lambda: attention_graph(scale=-0.5), ["wl-tile"],
     "wl-tile: attention scale = -0.5: the kernel's online softmax takes row maxima of the unscaled scores, "
     "which order like the scaled ones only for scale > 0; for a negative scale negate k and use -scale"),
    (lambda: attention_graph(scale=0.0), ["wl-tile"], "wl-tile: attention scale = 0.0: "),
    (lambda: attention_graph(scale=3e38), ["wl-tile"],
     "as an f32 runtime argument, which must be a positive normal f32 (1.18e-38 .. 3.4e+38); fold part of the "
     "scale into q"),
    (lambda: attention_graph(scale=1e-39), ["wl-tile"], "must be a positive normal f32"),
    (lambda: attention_graph(), ["wl-tile{schedule=stream-k}"],
     "wl-tile: schedule = 'stream-k': use one of persistent, grid"),
    (lambda: attention_graph(), ["wl-tile{block-m=64}"],
     "block-m = 64: the sm_90a attention gives each of its 2 or 3 consumer warpgroups m64 query rows; use "
     "block-m=128 or 192"),
    (lambda: attention_graph(), ["wl-tile{block-n=72}"],
     "block-n = 72: must be a multiple of 16 (O += P V contracts block_n keys, 16 per wgmma) up to 256 (the rows "
     "of one TMA box of K or V)"),
    (lambda: attention_graph(), ["wl-tile{block-n=512}"], "block-n = 512: wgmma.mma_async m64n512"),
    (lambda: attention_graph(), ["wl-tile", "wl-pipeline", "wl-specialize{mma-in-flight=1}"],
     "mma-in-flight = 1: this kernel computes on its MMAs' accumulators in registers between MMAs (the online "
     "softmax reads S and rescales O), so every MMA must retire first; use mma-in-flight=0"),
    (lambda: attention_graph(), ["wl-tile", "wl-pipeline", "wl-specialize{consumer-regs=256}"],
     "register budget 24 + 2 x 256 per thread needs 68608 registers; the register file holds 65536: lower "
     "consumer-regs to 240"),
    (lambda: attention_graph(d=256), ["wl-tile", "wl-pipeline{stages=3}", "wl-specialize", "wl-plan-smem"],
     "smem plan needs 312424 B (q 65536 B, k 122880 B, v 122880 B, o 65536 B (on q's bytes), mbarriers 104 B, + 1024 B alignment slack) "
     "for 3 stages; the limit is 232448 B: use 2 stages (wl-pipeline{stages=2}) or a smaller block-n"),
    (lambda: attention_graph(d=256), ["wl-tile{block-n=256}", "wl-pipeline", "wl-specialize", "wl-plan-smem"],
     "for 2 stages; the limit is 232448 B: no pipeline of 2 or more stages fits: 2 stages of this tile need "
     "590920 B; use a smaller block-n (a stage's bytes shrink with it)"),
])
def test_refusals_name_the_value_the_limit_and_the_way_out(graph, passes, message):
    fails(graph(), passes, message)


def test_rank_is_refused_by_wl_tile_too():
    """wl-verify refuses a rank-3 attention first; wl-tile, run alone on unverified IR, says it too."""
    text = ('func.func @a(%q: tensor<?x?x64xbf16>) -> tensor<?x?x64xbf16> {\n'
            '  %o = "wl.attention"(%q, %q, %q) {causal = false, scale = 1.25e-01 : f32, layout = "bhsd"} : '
            '(tensor<?x?x64xbf16>, tensor<?x?x64xbf16>, tensor<?x?x64xbf16>) -> tensor<?x?x64xbf16>\n'
            '  return %o : tensor<?x?x64xbf16>\n}\n')
    with make_context():
        module = ir.Module.parse(text)
        with pytest.raises(ir.MLIRError, match=re.escape(
                "wl-tile: attention q has rank 3; the attention kernel takes rank-4 q, k, v ([B, S, H, D] or "
                "[B, H, S, D]): add the missing batch or head dim of size 1")):
            run_passes(module, ["wl-tile"])
