"""An attention with a softcap and a sliding window, written out as graph ops, fused into one kernel and checked.

    python examples/attention_written_out.py            # fuse, compile (sm_90a), emulate on the CPU, compare
    warploom explain examples/attention_written_out.py  # what wl-fuse made of it

wl-fuse folds the ops between the scores and the softmax into the wl.attention's score and mask modifiers
(docs/attention-variants.md, "Written out as graph ops"); `cap` and `window` are runtime scalars, so other values run
the same kernel. The check runs the kernel on the CPU emulator and compares it with the float64 interpreter of the
graph as written (never fused).
"""
import numpy as np

import warploom as wl

graph = wl.Graph("softcap_window")
q, k, v = (graph.input(n, ("B", 4, "S", 64), "bf16") for n in "qkv")               # [B, H, S, D]
s = graph.scale(graph.matmul(q, k, transpose_b=True), 64 ** -0.5)                 # the attention's scale
cap = graph.scalar("cap")                                                         # a kernel argument (f32)
s = graph.mul(cap, graph.tanh(graph.div(s, cap)))                                 # softcap: the score modifier
qi, ki = graph.index(s, "q_idx"), graph.index(s, "kv_idx")
s = graph.where(graph.le(graph.sub(qi, ki), graph.scalar("window", "i32")), s, float("-inf"))   # the mask
graph.output(graph.matmul(graph.softmax(graph.causal_mask(s)), v))


def main() -> int:
    from warploom.build import compile_graph
    from warploom.emulate import emulate_attention
    from warploom.emulate.judge import judge_attention
    from warploom.reference.interpret import evaluate
    from warploom.reference.ops import round_to

    kernel = compile_graph(graph, "sm_90a")
    print(kernel.ir(after="wl-fuse").split("\n")[2].strip()[:200], "...")
    rng = np.random.default_rng(0)
    bsz, sq, sk = 1, 90, 130
    x = {n: round_to(rng.standard_normal((bsz, 4, length, 64)) * 1.5, "bf16")
         for n, length in (("q", sq), ("k", sk), ("v", sk))}
    for values in ({"cap": 5.0, "window": 40}, {"cap": 30.0, "window": 7}):      # one kernel, other values
        out, _ = emulate_attention(x["q"], x["k"], x["v"], causal=True, scale=kernel.graph_attrs["scale"],
                                   layout="bhsd", program=kernel.program, scalars=values)
        ref = evaluate(graph.module, x, scalars=values)[0]
        verdict = judge_attention(out, None, x["q"], x["k"], x["v"], "bf16", True, "bhsd", reference=ref)
        print(f"{values}: emulated against the float64 interpreter of the graph: "
              f"{'OK' if verdict.ok else 'MISMATCH ' + verdict.problem} (max error {verdict.max_error:.2e})")
        if not verdict.ok:
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
