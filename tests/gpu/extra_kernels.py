"""Build into an AOT cache the non-standard kernels the GPU tests and benchmarks launch beside the standard ones: the
grid-schedule attention kernels of head dims 64 and 128, at the grid schedule's own block_n (`benchmarks/attention.py
--compare-grid`) and at the persistent kernels' block_n (the bitwise test), the persistent ones with one Q stage and
with a share of exp2 by the FMA polynomial;
and the direct-epilogue twin of every
standard 128-row sm_90a GEMM (C stored from registers: `benchmarks/gemm.py --compare`), small-M tiles with
deeper rings (the same comparison, for M <= 128), and the 2x1-cluster 128 x 256 kernels walking the tiles in bands
(`GROUPS`: the comparison's `c2/n256/g…` columns), and the one in bands of 2 that `calibrate.py --cluster` records;
and the attention kernels with score/mask modifiers that tests/gpu/test_attention_mods.py runs (mod_variants.py).

    warploom precompile --target sm_90a --cache .wlcache && python3 -m tests.gpu.extra_kernels --cache .wlcache
"""
from __future__ import annotations

import argparse

from dataclasses import replace

from warploom.kernels import STANDARD_KERNELS, AttentionSpec, GemmSpec, default_attention_block_n, get_kernel
from warploom.runtime.cache import KernelCache


def extra_specs() -> list[AttentionSpec]:
    out = []
    for d in (64, 128):
        for bn in sorted({default_attention_block_n(d, "grid"), default_attention_block_n(d, "persistent")}):
            out += [AttentionSpec("bf16", d, causal, bn, schedule="grid") for causal in (False, True)]
    from tests.gpu.mod_variants import gpu_specs, gpu_varlen_specs    # the variants test_attention_mods.py and
    return out + q1_specs() + poly_specs() + gpu_specs() + gpu_varlen_specs()   # test_attention_varlen.py run


def poly_specs() -> list[AttentionSpec]:
    """The persistent kernels with a share of exp2 by the FMA polynomial: test_polynomial_exp2_share_stays_within_
    tolerance, the A/B's builds of the same tiles, and calibrate_attention.py's POLY_CASES."""
    shares = {64: (0.125, 0.25, 1.0), 128: (0.25, 1.0)}
    return [AttentionSpec("bf16", d, causal, exp2_poly=share) for d in shares for share in shares[d]
            for causal in (False, True)] + [AttentionSpec("f16", 128, False, exp2_poly=1.0)]   # calibrate_attention


def q1_specs() -> list[AttentionSpec]:
    """The persistent kernels of head dims 64 and 128 with one Q stage (wl-pipeline{q-stages=1}; the standard ones
    load the next tile's Q during this one): test_two_q_stages_give_the_bits_of_one and the A/B in
    benchmarks/attention_ab.py."""
    return [AttentionSpec(elem, d, causal, q_stages=1) for elem in ("bf16", "f16") for d in (64, 128)
            for causal in (False, True)] + [AttentionSpec("bf16", 64, causal, block_m=192, q_stages=1)
                                            for causal in (False, True)]


# small-M tiles with deeper rings (the benchmark's small-M comparison): a K loop of 128 k-tiles per CTA is bound by
# how many loads are in flight, so more stages should stream B faster
DEEP_SMALL_M = [(64, 64, 8), (64, 128, 8), (128, 128, 6), (128, 64, 8)]
# the persistent walk in bands of this many rows of (pair) tiles (rules.tile_origin), for the 2x1-cluster 128 x 256
# kernels: do fewer A rows and B columns in flight at once help the L2 (benchmarks/NOTES.md, after run 33)?
GROUPS = (4, 8)


def extra_gemm_specs() -> list:
    direct = [replace(s, epilogue="direct") for s in STANDARD_KERNELS["sm_90a"] if s.block_m == 128]
    deep = [GemmSpec(elem, layout, bn, stages, block_m=bm)
            for elem in ("bf16", "f16") for layout in ("kn", "nk") for bm, bn, stages in DEEP_SMALL_M]
    banded = [GemmSpec(elem, layout, 256, 4, "sm_90a", "persistent", cluster_m=2, group_m=g)
              for elem in ("bf16", "f16") for layout in ("kn", "nk") for g in GROUPS]
    # the banded case of tests/gpu/calibrate.py's CLUSTER_CASES walks in bands of 2 (5 x 3 pair tiles: bands of 2, 2, 1)
    calibration = [GemmSpec("bf16", "kn", 256, 4, "sm_90a", "persistent", cluster_m=2, group_m=2)]
    return direct + deep + banded + calibration


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", required=True)
    args = p.parse_args(argv)
    cache = KernelCache(args.cache)
    for spec in extra_specs() + extra_gemm_specs():
        a = get_kernel(spec, cache)
        print(f"  {spec.lookup_id:<52} {a.smem_bytes:>7} B smem")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
