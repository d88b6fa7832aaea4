"""Attention written the long way (matmul, scale, causal mask, softmax, matmul): wl-fuse finds it, the sm_90a
pipeline plans the FA3-style kernel, the CPU emulator runs it against float64. No GPU needed.

    python examples/attention.py
"""
import numpy as np

import warploom
from warploom.emulate import emulate_attention
from warploom.emulate.judge import judge_attention
from warploom.reference.ops import round_to

B, H, S, D = 1, 2, 96, 64


def main() -> None:
    g = warploom.Graph("attention")
    q = g.input("q", (B, H, S, D), "bf16")
    k = g.input("k", (B, H, S, D), "bf16")
    v = g.input("v", (B, H, S, D), "bf16")
    s = g.scale(g.matmul(q, k, transpose_b=True), D ** -0.5)
    g.output(g.matmul(g.softmax(g.causal_mask(s)), v))

    kernel = warploom.compile(g, target="sm_90a")
    print(kernel)
    fused = [line.strip() for line in kernel.ir(after="wl-fuse").splitlines() if '"wl.' in line]
    print("after wl-fuse:", fused[0][:100])          # the five ops are one wl.attention
    print("roles:", [(r["name"], r["regs"]) for r in kernel.resources["roles"]])

    rng = np.random.default_rng(1)
    qkv = [round_to(rng.standard_normal((B, H, S, D)), "bf16") for _ in range(3)]
    out, lse = emulate_attention(*qkv, causal=True, layout="bhsd", program=kernel.program)
    verdict = judge_attention(out, lse, *qkv, "bf16", True, "bhsd")
    print("emulated against float64:", "OK" if verdict.ok else verdict.problem)
    assert verdict.ok


if __name__ == "__main__":
    main()
