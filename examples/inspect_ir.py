"""The IR after each pass of a GEMM, the way a user reads what the compiler decided. No GPU needed.

    python examples/inspect_ir.py [--target sm_100a] [--after wl-plan-smem]

Prints the pass table (name, milliseconds, IR lines), then the IR after the pass named by --after (by default
wl-plan-barriers: every region, barrier and role placed). The same IR is what `warploom-opt` prints for those
passes, and what `warploom compile --dump-dir` writes to numbered files.
"""
import argparse

import warploom


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", default="sm_90a", choices=["sm_90a", "sm_100a"])
    ap.add_argument("--after", default="wl-plan-barriers", help="the pass whose IR to print")
    args = ap.parse_args()
    g = warploom.Graph("gemm")
    a = g.input("a", ("M", "K"), "bf16")
    b = g.input("b", ("N", "K"), "bf16")              # a weight stored [N, K]
    g.output(g.matmul(a, b, transpose_b=True))
    kernel = warploom.compile(g, target=args.target)
    print(f"{'pass':<44} {'ms':>7}  IR lines")
    for name, seconds in kernel.passes:
        print(f"{name:<44} {seconds * 1e3:7.2f}  {kernel.ir(after=name).count(chr(10)):>8}")
    print(f"\n// IR after {args.after}\n{kernel.ir(after=args.after)}")


if __name__ == "__main__":
    main()
