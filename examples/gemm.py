"""A GEMM from a Python graph to a kernel, and what the compiler decided, on any machine (no GPU needed).

    python examples/gemm.py [--target sm_100a]

Builds C = A @ B, compiles it with warploom.compile, prints the passes and the plan (shared memory, Tensor Memory,
barriers, roles, registers), then runs the lowered kernel in the CPU emulator on ragged sizes against numpy.
sm_100a kernels are checked this way (and by ptxas and their SASS) only: they have not run on a Blackwell GPU.
"""
import argparse

import numpy as np

import warploom
from warploom.build import gemm_spec_of
from warploom.emulate import emulate_gemm
from warploom.reference.ops import round_to


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="sm_90a", choices=["sm_90a", "sm_100a"])
    args = ap.parse_args()

    g = warploom.Graph("gemm")
    a = g.input("a", ("M", "K"), "bf16")
    b = g.input("b", ("K", "N"), "bf16")
    g.output(g.matmul(a, b))

    kernel = warploom.compile(g, target=args.target)
    print(kernel)
    for name, seconds in kernel.passes:
        print(f"  {name:<40} {seconds * 1e3:7.2f} ms")
    res = kernel.resources
    print(f"smem {res['smem_bytes']} B, TMEM {res['tmem_columns'] or 0} columns, {res['threads']} threads, "
          f"ptxas {res['ptxas']['registers']} registers / {res['ptxas']['spill_bytes']} B spills")
    for r in res["regions"]:
        print(f"  region {r['name']:<10} {r['space']:<5} offset {r['offset']!s:>7}  size {r['size']!s:>7}  "
              f"x{r['stages']}")
    for role in res["roles"]:
        print(f"  role {role['name']:<9} warps {role['first_warp']}..{role['first_warp'] + role['warps'] - 1}")

    rng = np.random.default_rng(0)
    m, n, k = 200, 264, 136                      # ragged: TMA zero fill and the clipped stores are exercised
    x = round_to(rng.standard_normal((m, k)), "bf16")
    y = round_to(rng.standard_normal((k, n)), "bf16")
    c = emulate_gemm(gemm_spec_of(kernel.program), x, y).astype(np.float64)
    err = np.abs(c - x @ y).max() / np.abs(x @ y).max()
    print(f"emulated {m}x{n}x{k}: max relative error vs float64 {err:.1e}")
    assert err < 1e-2


if __name__ == "__main__":
    main()
