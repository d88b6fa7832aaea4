"""`warploom emulate`: run the kernel warploom.ops would pick (matmul or attention) on the CPU emulator, check it.

    warploom emulate --op matmul --target sm_90a --shape 130x136x328 [--dtype bf16|f16] [--b-layout kn|nk]
                     [--seeds 3] [--exact] [--timeline [--cta 0,0] [--timeline-limit 40]] [--sms 2] [--max-ctas 64]
    warploom emulate --op attention --shape B,Sq,Sk,H,Hkv,D [--causal] [--layout bshd|bhsd] [--dtype] [--seeds 3]

The kernel is the one `warploom.ops.pick_spec` chooses for the problem on an H200 (132 SMs), lowered like
warploom.build lowers it; each seed is one interleaving of warps, TMA landings and wgmma completions, all
on the same inputs, compared with the float64 reference (warploom.reference.ops) as tests/emulate/test_gemm.py
does. Exit status: 0 every seed matches, 1 a seed mismatches, 2 an EmulationError (race, deadlock, ...) or
input the emulator cannot take (with the value, the limit and the way out).
"""
from __future__ import annotations

import re
import sys

import numpy as np

from warploom import targets

TARGETS = tuple(targets.TARGETS)
MAX_CTAS = 64
# a CTA takes about 0.1 s plus 4 ms per k-tile on one core (benchmarks/NOTES.md, emulator speed)
SECONDS_PER_CTA, SECONDS_PER_KTILE = 0.1, 0.004
TMA_ALIGN_ELEMS = 8        # a TMA row stride is a multiple of 16 B: 8 elements of bf16/f16
H200_SMS = targets.get("sm_90a").sm_count      # the launch size a GEMM is picked for (an H200's SMs)
# as tests/emulate/test_gemm.py: f32 accumulation then one rounding to the 16-bit type
RTOL, ATOL, SAME_ROUNDING = 2 ** -7, 1e-3, 0.99


class Refused(Exception):
    """Input the emulator cannot take: the message names the value, the limit and the way out."""


def add_arguments(sp) -> None:
    from .options import OPS, op_name
    sp.add_argument("--op", default="matmul", type=op_name, choices=OPS,
                    help="the kernel family; gemm, its old name, is accepted (default: %(default)s)")
    sp.add_argument("--target", default=targets.DEFAULT, choices=TARGETS)
    sp.add_argument("--shape", required=True, metavar="MxNxK",
                    help="matmul: C[M,N] = A[M,K] @ B, e.g. 130x136x328; attention: B,Sq,Sk,H,Hkv,D, e.g. 1,130,200,4,1,64")
    sp.add_argument("--causal", action="store_true", help="attention: the bottom-right causal mask")
    sp.add_argument("--layout", default="bshd", choices=["bshd", "bhsd"], help="attention: the inputs' layout")
    sp.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    sp.add_argument("--b-layout", default="kn", choices=["kn", "nk"], help="B as [K,N] (kn) or as a [N,K] weight (nk)")
    sp.add_argument("--schedule", choices=["auto", "grid", "persistent", "streamk"],
                    help="warploom.ops.SCHEDULE to pick under (default: the one matmul uses today)")
    sp.add_argument("--seeds", type=int, default=1, metavar="N", help="interleavings to run (seeds 0..N-1)")
    sp.add_argument("--input-seed", type=int, default=0, metavar="S", help="numpy seed of the inputs")
    sp.add_argument("--exact", action="store_true", help="inputs in {-1, 0, 1}: C must equal the rounded reference")
    sp.add_argument("--delay", type=int, default=8, help="most scheduler steps a TMA copy or wgmma group takes")
    sp.add_argument("--sms", type=int, default=2, help="the SM count a persistent kernel's grid takes")
    sp.add_argument("--max-ctas", type=int, default=MAX_CTAS, metavar="N",
                    help=f"refuse problems of more output tiles (CTAs) than this (default {MAX_CTAS})")
    sp.add_argument("--timeline", action="store_true",
                    help="print each warp's waits, arrivals, TMA copies and wgmmas in one CTA")
    sp.add_argument("--cta", default="0,0", metavar="X,Y", help="the CTA --timeline traces (default 0,0)")
    sp.add_argument("--timeline-limit", type=int, default=40, metavar="N", help="events shown per warp (default 40)")


def parse_shape(text: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not m or min(int(g) for g in m.groups()) < 1:
        raise Refused(f"--shape {text!r}: give M, N and K as positive integers MxNxK, e.g. --shape 130x136x328")
    return tuple(int(g) for g in m.groups())


def parse_cta(text: str) -> tuple[int, int, int]:
    parts = text.split(",")
    if not 1 <= len(parts) <= 3 or not all(p.strip().isdigit() for p in parts):
        raise Refused(f"--cta {text!r}: give the CTA as X,Y (non-negative integers), e.g. --cta 1,0")
    ids = [int(p) for p in parts] + [0] * (3 - len(parts))
    return ids[0], ids[1], ids[2]


def select(args, m: int, n: int, k: int):
    """The GemmSpec warploom.ops.matmul would run for this problem on an H200 (its own selection function)."""
    from warploom import ops
    from warploom.kernels import STANDARD_KERNELS
    if args.target not in STANDARD_KERNELS:
        raise Refused(f"--target {args.target}: no {args.target} GEMM kernels exist (kernels exist for "
                      f"{', '.join(STANDARD_KERNELS)})")
    saved = ops.SCHEDULE
    try:
        if args.schedule:
            ops.SCHEDULE = args.schedule
        spec = ops.pick_spec(args.dtype, args.b_layout, m, n, H200_SMS, target=args.target, k=k)   # as ops.matmul
    finally:
        ops.SCHEDULE = saved
    return spec


def check_sms(args, spec, picker: str) -> None:
    """--sms sizes a persistent or stream-K grid; given for a kernel of the grid schedule (a CTA per tile), it would
    change nothing: refused, naming the kernel picked."""
    from .options import given
    if "sms" in given(args) and spec.schedule == "grid":
        raise Refused(f"--sms {args.sms}: sets the CTA count of a persistent or stream-K grid, and {picker} picks "
                      f"{spec.kernel_name} here, a grid-schedule kernel (a CTA per tile): drop --sms"
                      + (", or pick another schedule with --schedule" if picker.endswith("matmul") else ""))


def round_up(v: int) -> int:
    return -(-v // TMA_ALIGN_ELEMS) * TMA_ALIGN_ELEMS


def ops_launch(spec, m: int, n: int, k: int) -> tuple[int, tuple[int, int], int]:
    """(K the kernel runs with, B's buffer shape, C's buffer columns): what warploom.ops.matmul launches for
    contiguous operands of an m x n x k problem (ops.py's slower path). TMA reads rows that start on 16-byte
    boundaries: when A's or B's rows do not (K % 8, or N % 8 for B [K,N]), both are copied into zero-padded buffers,
    K rounded up to 8 (and B [K,N]'s N); on sm_100a, where C leaves by TMA too, C is padded likewise and copied back.
    The kernel is told the problem's M and N and the padded K."""
    b_rows = n if spec.b_layout == "kn" else k
    if k % TMA_ALIGN_ELEMS == 0 and b_rows % TMA_ALIGN_ELEMS == 0:
        return k, ((k, n) if spec.b_layout == "kn" else (n, k)), n
    k_run = round_up(k)
    b_shape = (k_run, round_up(n)) if spec.b_layout == "kn" else (n, k_run)
    return k_run, b_shape, round_up(n) if targets.get(spec.target).has_tmem and n % TMA_ALIGN_ELEMS else n


def describe_padding(spec, m: int, n: int, k: int) -> str | None:
    """One line on the zero-padded copies warploom.ops.matmul makes for this problem (None: it makes none)."""
    k_run, b_shape, c_cols = ops_launch(spec, m, n, k)
    b_given = (k, n) if spec.b_layout == "kn" else (n, k)
    if (k_run, b_shape, c_cols) == (k, b_given, n):
        return None
    why = " and ".join(f"{d} = {v}" for d, v in (("K", k), ("N", n if spec.b_layout == "kn" else 0))
                       if v % TMA_ALIGN_ELEMS)
    copies = ([f"A into [{m}, {k_run}]"] if k_run != k else []) + [f"B into {list(b_shape)}"] \
        + ([f"C into [{m}, {c_cols}] (copied back)"] if c_cols != n else [])
    return (f"padding as warploom.ops.matmul does: {why} not a multiple of {TMA_ALIGN_ELEMS} (rows TMA cannot read), "
            f"so it copies {', '.join(copies)}, zero-padded, and runs the kernel with M = {m}, N = {n}, K = {k_run}; "
            "emulated the same way")


def emulate_as_ops(spec, a, b, seed: int, *, sms: int, delay: int, report: list, trace=None) -> np.ndarray:
    """C = A @ B by the emulated kernel, launched as warploom.ops.matmul launches it for these shapes: on the
    operands themselves, or on ops_launch's zero-padded copies with K padded."""
    from warploom.emulate import emulate_gemm, gemm_kernel
    from warploom.emulate.errors import OutOfBoundsError
    from warploom.emulate.launch import emulate_launch
    from warploom.emulate.machine import NUMPY_ELEMS
    from warploom.runtime import rules
    m, k = a.shape
    n = b.shape[1] if spec.b_layout == "kn" else b.shape[0]
    k_run, b_shape, c_cols = ops_launch(spec, m, n, k)
    if (k_run, b_shape, c_cols) == (k, b.shape, n):
        return emulate_gemm(spec, a, b, seed, sms=sms, delay=delay, report=report, trace=trace)
    elem = NUMPY_ELEMS[spec.elem]
    a_run, b_run = np.zeros((m, k_run), elem), np.zeros(b_shape, elem)
    a_run[:, :k] = a.astype(elem)
    b_run[:b.shape[0], :b.shape[1]] = b.astype(elem)
    c = np.full((m, c_cols), np.nan, elem)
    kernel = gemm_kernel(spec)
    sizes = {"M": m, "N": n, "K": k_run, "SMS": sms}
    args = {"a": a_run, "b": b_run, "c": c}
    if spec.schedule == "streamk":
        floats, counts = spec.streamk_buffers(rules.evaluate(kernel.grid[0], sizes), m, n)
        args.update(workspace=np.full(floats, np.nan, np.float32), counters=np.zeros(counts, np.int32))
    report.append(emulate_launch(kernel, args, sizes, seed=seed, delay=delay, trace=trace))
    if spec.schedule == "streamk" and args["counters"].any():
        raise OutOfBoundsError("stream-K counters are not zero after the launch: the next launch would miscount")
    return c[:, :n]


def operands(spec, m: int, n: int, k: int, seed: int, exact: bool):
    from warploom.reference.ops import matmul, round_to
    rng = np.random.default_rng(seed)
    draw = (lambda shape: rng.integers(-1, 2, shape).astype(np.float64)) if exact else rng.standard_normal
    a = round_to(draw((m, k)), spec.elem)
    b = round_to(draw((k, n) if spec.b_layout == "kn" else (n, k)), spec.elem)
    return a, b, matmul(a, b, transpose_b=spec.b_layout == "nk")


def compare(c: np.ndarray, ref: np.ndarray, elem: str, exact: bool) -> tuple[float, bool]:
    """(max |C - reference|, whether C passes): exact inputs must give the reference rounded to elem; random
    ones must lie within RTOL/ATOL and round like it almost everywhere."""
    from warploom.reference.ops import round_to
    c = c.astype(np.float64)
    if np.isnan(c).any():
        return float("nan"), False
    err = float(np.max(np.abs(c - ref))) if c.size else 0.0
    rounded = round_to(ref, elem)
    if exact:
        return err, bool(np.array_equal(c, rounded))
    ok = bool(np.allclose(c, ref, rtol=RTOL, atol=ATOL)) and float(np.mean(c == rounded)) > SAME_ROUNDING
    return err, ok


def run(args, out=None, err=None) -> int:
    if args.op == "attention":
        return run_attention(args, out or sys.stdout, err or sys.stderr)
    from warploom.emulate import EmulationError, gemm_kernel
    from warploom.runtime import rules
    out, err = out or sys.stdout, err or sys.stderr

    def refuse(msg: str) -> int:
        print(f"warploom emulate: {msg}", file=err)
        return 2

    try:
        m, n, k = parse_shape(args.shape)
        cta = parse_cta(args.cta)
        for name in ("seeds", "sms", "max_ctas", "timeline_limit"):
            if getattr(args, name) < 1:
                raise Refused(f"--{name.replace('_', '-')} {getattr(args, name)}: must be at least 1")
        if args.delay < 0:
            raise Refused(f"--delay {args.delay}: must be at least 0")
        spec = select(args, m, n, k)
        check_sms(args, spec, "warploom.ops.matmul")
        kernel = gemm_kernel(spec)
    except Refused as e:
        return refuse(str(e))
    except (ValueError, TypeError) as e:
        return refuse(f"cannot build the kernel: {e}")
    sizes = {"M": m, "N": n, "K": ops_launch(spec, m, n, k)[0], "SMS": args.sms}
    grid = tuple(rules.evaluate(r, sizes) for r in kernel.grid)
    ctas = grid[0] * grid[1] * grid[2]
    tiles = -(-m // spec.block_m) * -(-n // spec.block_n)
    k_tiles = -(-sizes["K"] // spec.block_k)
    estimate = tiles * (SECONDS_PER_CTA + k_tiles * SECONDS_PER_KTILE) * args.seeds
    if tiles > args.max_ctas:
        walk = (f"{ctas} CTAs, grid {grid}" if spec.schedule == "grid" else
                f"walked by the {spec.schedule} grid's {ctas} CTAs (--sms {args.sms})")
        return refuse(f"--shape {args.shape} takes {tiles} output tiles of {spec.block_m}x{spec.block_n} "
                      f"({walk}) x {k_tiles} k-tiles, about {estimate:.0f} s to emulate; that is more than --max-ctas "
                      f"{args.max_ctas}: pass --max-ctas {tiles} to run it anyway, or emulate a smaller shape (ragged "
                      "ones exercise the same code)")
    if args.timeline and not all(c < g for c, g in zip(cta, grid)):
        return refuse(f"--cta {args.cta}: the grid is {grid}; trace a CTA inside it")
    a, b, ref = operands(spec, m, n, k, args.input_seed, args.exact)
    print(f"matmul {m}x{n}x{k} {spec.elem}, B {'[K,N]' if spec.b_layout == 'kn' else '[N,K]'}: warploom.ops.matmul "
          f"picks {spec.kernel_name} ({spec.schedule} schedule, {spec.target}; on an H200"
          + (f", under SCHEDULE = {args.schedule!r})" if args.schedule else ")"), file=out)
    padding = describe_padding(spec, m, n, k)
    if padding:
        print(padding, file=out)
    inputs = "{-1, 0, 1}" if args.exact else "standard normal"
    check = "C == reference rounded to " + spec.elem if args.exact else (
        f"|C - ref| <= {ATOL:g} + 2^-7 |ref| and >= {SAME_ROUNDING:.0%} rounded like the reference")
    print(f"inputs {inputs} in {spec.elem} (numpy seed {args.input_seed}); check {check}; delay {args.delay}", file=out)
    kw = max(36, len(kernel.name))
    print(f"{'seed':>4}  {'kernel':<{kw}} {'grid':<11} {'CTAs':>4} {'seconds':>8}  {'max error':>9}  result", file=out)
    traces, failed = [], None
    for seed in range(args.seeds):
        trace = {cta: []} if args.timeline else None
        traces.append(trace)
        reports = []
        try:
            c = emulate_as_ops(spec, a, b, seed, sms=args.sms, delay=args.delay, report=reports, trace=trace)
        except EmulationError as e:
            print(f"{seed:>4}  {kernel.name:<{kw}} {grid!s:<11} {ctas:>4} {'-':>8}  {'-':>9}  "
                  f"{type(e).__name__}", file=out)
            if args.timeline:
                print_timeline(trace[cta], spec, cta, seed, args.timeline_limit, out)
            print(f"warploom emulate: seed {seed}: {type(e).__name__}: {e}", file=err)
            return 2
        r = reports[0]
        max_err, ok = compare(c, ref, spec.elem, args.exact)
        print(f"{seed:>4}  {r.kernel:<{kw}} {r.grid!s:<11} {r.ctas:>4} {r.seconds:8.2f}  {max_err:9.2e}  "
              f"{'OK' if ok else 'MISMATCH'}", file=out, flush=True)
        if not ok and failed is None:
            failed = seed
    if args.timeline:
        shown = failed if failed is not None else 0
        print_timeline(traces[shown][cta], spec, cta, shown, args.timeline_limit, out)
    if failed is not None:
        print(f"warploom emulate: seed {failed} does not match the float64 reference (see its max error above)",
              file=err)
        return 1
    print(f"all {args.seeds} seed(s) match the float64 reference", file=out)
    return 0


# ---- attention -----------------------------------------------------------------------------------------

ATTENTION_HEAD_DIMS = (64, 128, 256)


def parse_attention_shape(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 6 or not all(p.isdigit() for p in parts):
        raise Refused(f"--shape {text!r}: attention takes B,Sq,Sk,H,Hkv,D (batch, query and key sequence lengths, "
                      "query and kv heads, head dim) as positive integers, e.g. --shape 1,130,200,4,1,64")
    b, sq, sk, h, hkv, d = (int(p) for p in parts)
    if min(b, sq, sk, h, hkv) < 1:
        raise Refused(f"--shape {text!r}: B, Sq, Sk, H and Hkv must be at least 1 (ops.attention answers empty "
                      "problems without a kernel, so there is nothing to emulate)")
    if d not in ATTENTION_HEAD_DIMS:
        raise Refused(f"--shape {text!r}: head dim {d}; the attention kernels take {', '.join(map(str, ATTENTION_HEAD_DIMS))}")
    if h % hkv:
        raise Refused(f"--shape {text!r}: H = {h} query heads is not a multiple of Hkv = {hkv} kv heads (GQA)")
    return b, sq, sk, h, hkv, d


def run_attention(args, out, err) -> int:
    """`--op attention`: the kernel ops.attention picks, emulated on random inputs, judged by warploom.emulate.judge."""
    from warploom.emulate import EmulationError, emulate_attention
    from warploom.emulate.judge import judge_attention
    from warploom.reference.ops import round_to

    def refuse(msg: str) -> int:
        print(f"warploom emulate: {msg}", file=err)
        return 2

    try:
        if args.timeline:
            raise Refused("--timeline: traced for --op matmul only so far; drop --timeline")
        b, sq, sk, h, hkv, d = parse_attention_shape(args.shape)
        if args.seeds < 1 or args.delay < 0:
            raise Refused("--seeds must be at least 1 and --delay at least 0")
        from warploom.build import attention_graph, planned_attention
        from warploom.ops_attention import pick_spec
        spec = pick_spec(args.dtype, d, args.causal, args.target, seqlen_q=sq, seqlen_k=sk, pairs=h * b,
                         sms=targets.get(args.target).sm_count)
        check_sms(args, spec, "warploom.ops.attention")
        program = planned_attention(attention_graph(spec), spec)[0]      # the kernel of that spec, every field
    except Refused as e:
        return refuse(str(e))
    except (ValueError, TypeError) as e:
        return refuse(f"cannot build the kernel: {e}")
    ctas = -(-sq // spec.block_m) * h * b           # tiles: a CTA each, or walked by --sms CTAs (persistent)
    if ctas > args.max_ctas:
        return refuse(f"--shape {args.shape} takes {ctas} CTAs (cdiv(Sq, {spec.block_m}) x H x B); that is more "
                      f"than --max-ctas {args.max_ctas}: pass --max-ctas {ctas} to run it anyway, or emulate fewer "
                      "heads or a shorter Sq (ragged sizes exercise the same code)")
    rng = np.random.default_rng(args.input_seed)
    shape = (lambda s, hh: (b, s, hh, d)) if args.layout == "bshd" else (lambda s, hh: (b, hh, s, d))
    q, k, v = (round_to(rng.standard_normal(shape(s, hh)), spec.elem) for s, hh in ((sq, h), (sk, hkv), (sk, hkv)))
    mask = "causal (bottom-right)" if args.causal else "no mask"
    print(f"attention B={b} Sq={sq} Sk={sk} H={h} Hkv={hkv} D={d} {spec.elem} {args.layout}, {mask}: "
          f"warploom.ops.attention picks {spec.kernel_name} ({spec.target})", file=out)
    if spec.schedule == "persistent" and args.causal and targets.get(args.target).accumulator == "regs":
        print(describe_causal_deal(spec, b, sq, sk, h, hkv, d), file=out)
    print(f"inputs standard normal in {spec.elem} (numpy seed {args.input_seed}); check warploom.emulate.judge "
          f"(|out - ref| <= u max|v| + u |ref| + 1e-4, LSE within 1e-5, rows with no key exactly 0); "
          f"delay {args.delay}", file=out)
    kw = max(36, len(spec.kernel_name))
    print(f"{'seed':>4}  {'kernel':<{kw}} {'CTAs':>4} {'seconds':>8}  {'max error':>9}  {'lse error':>9}  result",
          file=out)
    failed = None
    for seed in range(args.seeds):
        reports = []
        try:
            o, lse = emulate_attention(q, k, v, causal=args.causal, seed=seed, layout=args.layout, program=program,
                                       delay=args.delay, report=reports, sms=args.sms)
        except EmulationError as e:
            print(f"{seed:>4}  {spec.kernel_name:<{kw}} {ctas:>4} {'-':>8}  {'-':>9}  {'-':>9}  {type(e).__name__}",
                  file=out)
            print(f"warploom emulate: seed {seed}: {type(e).__name__}: {e}", file=err)
            return 2
        verdict = judge_attention(o, lse, q, k, v, spec.elem, args.causal, args.layout)
        print(f"{seed:>4}  {spec.kernel_name:<{kw}} {ctas:>4} {reports[0].seconds:8.2f}  {verdict.max_error:9.2e}  "
              f"{verdict.lse_error:9.2e}  {'OK' if verdict.ok else 'MISMATCH: ' + verdict.problem}", file=out,
              flush=True)
        if not verdict.ok and failed is None:
            failed = seed
    if failed is not None:
        print(f"warploom emulate: seed {failed} does not match the float64 reference", file=err)
        return 1
    print(f"all {args.seeds} seed(s) match the float64 reference", file=out)
    return 0


def describe_causal_deal(spec, b: int, sq: int, sk: int, h: int, hkv: int, d: int) -> str:
    """One line on how ops.attention deals a causal persistent kernel's tiles over an H200's SMs (the emulation
    itself runs on --sms CTAs, with the deal the host builds for that many)."""
    from warploom.ops_attention import causal_deal
    from warploom.runtime import rules
    sizes = {"Sq": sq, "Sk": sk, "Hq": h, "Hkv": hkv, "B": b}
    tiles = -(-sq // spec.block_m) * h * b
    ctas = min(H200_SMS, tiles)
    table, group = causal_deal(sizes, spec.block_m, spec.block_n, ctas, d, spec.elem, spec.target)
    loads = rules.deal_loads(table, rules.causal_tile_weights(sizes, spec.block_m, spec.block_n))
    return (f"deal on an H200 ({H200_SMS} SMs): {tiles} tiles over {ctas} CTAs, heads in groups of {group}; work "
            f"(key blocks + {rules.FIXED_COST_BLOCKS} a tile): busiest CTA {max(loads)}, average "
            f"{sum(loads) / ctas:.1f} (rules.causal_tile_table)")


# ---- timeline ----------------------------------------------------------------------------------------

def role_names(spec) -> dict[int, str]:
    """{warp: the role it runs} in the kernel's plan."""
    from warploom.build import planned_program
    return {w: role.name for role in planned_program(spec).roles for w in role.warp_range}


def print_timeline(records: list, spec, cta: tuple, seed: int, limit: int, out) -> None:
    """Each warp's trace records (at most `limit`), its smem addresses named after the kernel's plan."""
    from warploom.emulate import gemm_kernel
    from warploom.emulate.machine import SMEM_BASE
    names, roles = gemm_kernel(spec).names, role_names(spec)

    def named(text: str) -> str:
        return names.annotate(text, SMEM_BASE)

    print(f"\ntimeline of CTA {cta}, seed {seed} (scheduler steps; the first {limit} events of each warp):", file=out)
    by_warp: dict[int, list] = {}
    for rec in records:
        by_warp.setdefault(rec[1], []).append(rec)
    for w in sorted(by_warp):
        recs = by_warp[w]
        print(f"warp {w} ({roles.get(w, '?')}): {len(recs)} event{'s' if len(recs) != 1 else ''}", file=out)
        # past the limit, still show the wait a warp is stuck in (the run stopped on an error)
        stuck = [r for r in recs[limit:] if r[2] in ("wait", "bar") and "  passed" not in r[3]]
        for i, (step, _, kind, text) in enumerate(recs[:limit] + stuck):
            if i == limit:
                print(f"  ... {len(recs) - limit - len(stuck)} more (--timeline-limit), then", file=out)
            if kind in ("wait", "bar") and "  passed" not in text:
                text += "  still waiting when the run stopped"
            print(f"  warp {w:<2} step {step:>5}  {kind:<7} {named(text)}", file=out)
        if len(recs) > limit and not stuck:
            print(f"  ... {len(recs) - limit} more (--timeline-limit)", file=out)
