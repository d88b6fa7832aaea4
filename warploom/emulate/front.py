"""The emulator's front door: build the kernel warploom.build would build (a GEMM spec, an attention program), compile
it for the emulator once, and run it on numpy arrays as warploom.ops would run it on the GPU.

    c = emulate_gemm(GemmSpec("bf16", "kn", 128), a, b, seed=0)        # compiles like warploom.ops would
    out, lse = emulate_attention(q, k, v, causal=True, program=planned_fa3("bf16", 128, True))

It sits above warploom.build and warploom.lowering (tests/unit/test_layers.py); the emulator below it (launch.py and
the machine) runs a lowered kernel and imports neither.
"""
from __future__ import annotations

import itertools
import random

import numpy as np

from warploom.kernel.contract import ATTENTION_WALKS, attention_streamk_buffers, deals_by_table, walks_table
from warploom.runtime import rules
from warploom.runtime.deal import causal_table, mask_walked
from warploom.score.table import build_table, table_args
from warploom.targets import get as get_target
from warploom.score import ScoreMods
from warploom.score.bounds import out_of_order
from warploom.score.expr import param_name, stride_name
from warploom.score.trace import unwrap

from .errors import OutOfBoundsError
from .launch import EmulatedKernel, emulate_launch
from .machine import NUMPY_ELEMS
from .names import SmemNames

# ---- GEMM convenience -------------------------------------------------------------------------------

_KERNELS: dict = {}


def gemm_kernel(spec) -> EmulatedKernel:
    """The kernel warploom.build would build for `spec` (its planned program, lowered), compiled for the
    emulator once per spec."""
    if spec not in _KERNELS:
        from warploom.build import planned_program
        from warploom.lowering import kernel_name, lower_program
        program = planned_program(spec)
        kernel = EmulatedKernel.of(lower_program(program, kernel_name(program)))
        kernel.names = SmemNames.of_program(program, get_target(spec.target))
        _KERNELS[spec] = kernel
    return _KERNELS[spec]


CTA_ORDERS = ("forward", "reverse", "shuffle")


def emulate_gemm(spec, a, b, seed: int = 0, *, sms: int = 2, delay: int = 4, report: list | None = None,
                 trace: dict | None = None, cta_order: str = "forward", fixup: dict | None = None,
                 order: str = "random", tolerate=()) -> np.ndarray:
    """C = A @ B (B [K, N] for "kn", [N, K] for "nk") by the emulated kernel of `spec`, as spec.elem.

    a and b are cast to spec.elem (round to nearest even) unless they already are; C starts as NaN, so an
    element the kernel never writes stays NaN. `sms` is the SM count a persistent kernel's grid takes; trace as
    emulate_launch's. CTAs run one after another in `cta_order` ("forward", "reverse", or "shuffle" by the seed):
    for stream-K, which CTA finishes a shared tile last. A stream-K kernel gets a NaN-filled workspace and zeroed
    counters, or those of `fixup` ({"workspace": f32 array, "counters": i32 array}, to reuse across launches as
    warploom.ops does); the counters must be zero again afterwards (OutOfBoundsError otherwise). tolerate as
    emulate_launch's."""
    elem = NUMPY_ELEMS[spec.elem]
    a, b = np.ascontiguousarray(np.asarray(a).astype(elem)), np.ascontiguousarray(np.asarray(b).astype(elem))
    m, k = a.shape
    n = b.shape[1] if spec.b_layout == "kn" else b.shape[0]
    if (b.shape[0] if spec.b_layout == "kn" else b.shape[1]) != k:
        raise ValueError(f"emulate_gemm: a is [{m}, {k}] but b {b.shape} ({spec.b_layout}) has another K")
    c = np.full((m, n), np.nan, elem)
    kernel = gemm_kernel(spec)
    sizes = {"M": m, "N": n, "K": k, "SMS": sms}
    args = {"a": a, "b": b, "c": c}
    if spec.schedule == "streamk":
        fixup = _fixup(fixup, *spec.streamk_buffers(rules.evaluate(kernel.grid[0], sizes), m, n), "emulate_gemm")
        args.update(fixup)
    ids = _ordered_ctas(kernel, sizes, cta_order, seed)
    r = emulate_launch(kernel, args, sizes, seed=seed, delay=delay, trace=trace, ctas=ids, order=order,
                       tolerate=tolerate)
    if report is not None:
        report.append(r)
    if spec.schedule == "streamk":
        _check_counters(fixup["counters"])
    return c


def _fixup(fixup: dict | None, floats: int, counts: int, caller: str) -> dict:
    """A stream-K launch's buffers: `fixup`'s (to reuse across launches, as warploom.ops does), else a NaN-filled
    workspace and zeroed counters; ValueError when the given ones are too small."""
    fixup = {} if fixup is None else fixup
    fixup.setdefault("workspace", np.full(floats, np.nan, np.float32))
    fixup.setdefault("counters", np.zeros(counts, np.int32))
    if fixup["workspace"].size < floats or fixup["counters"].size < counts:
        raise ValueError(f"{caller}: the fix-up needs {floats} f32 and {counts} counters, got "
                         f"{fixup['workspace'].size} and {fixup['counters'].size}")
    return fixup


def _ordered_ctas(kernel, sizes: dict, cta_order: str, seed: int) -> list:
    """The launch's CTA ids in `cta_order` (CTA_ORDERS; "shuffle" by the seed)."""
    if cta_order not in CTA_ORDERS:
        raise ValueError(f"cta_order {cta_order!r}: one of {', '.join(CTA_ORDERS)}")
    ids = list(itertools.product(*(range(g) for g in (rules.evaluate(r, sizes) for r in kernel.grid))))
    if cta_order == "reverse":
        ids.reverse()
    elif cta_order == "shuffle":
        random.Random(seed).shuffle(ids)
    return ids


def _check_counters(counters: np.ndarray) -> None:
    """OutOfBoundsError unless a stream-K launch left its counters zero (the next launch counts from there)."""
    if counters.any():
        left = np.flatnonzero(counters)
        raise OutOfBoundsError(f"stream-K counters {left[:8].tolist()} are not zero after the launch (values "
                               f"{counters[left[:8]].tolist()}): the next launch would miscount its pieces")


# ---- attention convenience ---------------------------------------------------------------------------

LAYOUTS = ("bshd", "bhsd")      # [B, S, H, D] or [B, H, S, D]


def attention_kernel(program) -> EmulatedKernel:
    """A planned attention program (sm_90a: planned_fa3's form; sm_100a: the FA4-style one), lowered and compiled
    for the emulator once per kernel name (the name encodes everything the plan depends on: elem, D, tile, stages,
    causal, target)."""
    from warploom.lowering import kernel_name, lower_program
    name = kernel_name(program)
    if name not in _KERNELS:
        kernel = EmulatedKernel.of(lower_program(program, name))
        kernel.names = SmemNames.of_program(program, get_target(program.target))
        _KERNELS[name] = kernel
    return _KERNELS[name]


def _default_attention_program(elem: str, head_dim: int, causal: bool):
    try:
        from warploom.build import planned_attention_program      # the planning passes' program, when built
    except ImportError:
        raise ValueError("emulate_attention: no attention planner in warploom.build yet; pass program= (e.g. "
                         "tests/emulate/fa3_plan.py's planned_fa3(elem, head_dim, causal))") from None
    return planned_attention_program(elem, head_dim, causal)


def _mod_args(program, scalars: dict | None, args: dict, caller: str) -> ScoreMods:
    """The program's modifiers; their runtime scalars and captured tensors (with their strides) put into `args`."""
    mods = ScoreMods.from_attrs(program.attrs)
    missing = sorted(n for n in [n for n, _ in mods.scalars] + [n for n, _, _ in mods.tensors] if n not in (scalars or {}))
    if missing:
        raise ValueError(f"{caller}: the program's modifiers read the runtime scalars {missing}: pass "
                         "scalars={name: value}")
    for name, type_ in mods.scalars:
        args[param_name(name)] = (np.float32 if type_ == "f32" else np.int32)(scalars[name])
    for name, type_, rank in mods.tensors:      # a captured tensor: its elements in global memory, its strides
        arr = np.ascontiguousarray(unwrap(scalars[name]), dtype=np.float32 if type_ == "f32" else np.int32)
        if arr.ndim != rank:
            raise ValueError(f"{caller}: captured tensor {name!r} has rank {arr.ndim}; the program's {rank}")
        if name in mods.sorted:                 # as ops.attention refuses it: the kernel would skip kept blocks
            why = out_of_order(name, arr)
            if why:
                raise ValueError(f"{caller}: {why}")
        args[param_name(name)] = arr
        for i, stride in enumerate(arr.strides):
            args[stride_name(name, i)] = np.int32(stride // arr.itemsize)
    return mods


def ragged_view(buffer: np.ndarray, rows: int) -> np.ndarray:
    """The ragged tensor map's view (numpy order T, H, R, D: kernel.contract.ATTENTION_VARLEN_MAP_DIMS reversed) of
    `buffer`, [rows + T, H, D] holding the packed rows from row `rows` on: element (t, h, r, d) is packed row
    t + r - rows, as the GPU map's base address moved back by `rows` rows makes it."""
    t, h, d = buffer.shape[0] - rows, buffer.shape[1], buffer.shape[2]
    s_row, s_head, s_elem = buffer.strides
    return np.lib.stride_tricks.as_strided(buffer, shape=(t + 1, h, rows, d), strides=(s_row, s_head, s_row, s_elem))


def emulate_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, causal: bool = False, scale: float | None = None,
                             seed: int = 0, *, program=None, elem: str | None = None, with_lse: bool = True,
                             delay: int = 4, ctas=None, order: str = "random", scalars: dict | None = None,
                             report: list | None = None):
    """(out [Tq, Hq, D], lse float32 [Hq, Tq] or None) of the emulated packed variable-length attention: q [Tq, Hq,
    D], k and v [Tk, Hkv, D] hold B sequences one after another, sequence i at rows cu_seqlens_q[i] ..
    cu_seqlens_q[i + 1] - 1 (and cu_seqlens_k's for k, v); each attends within itself (causal: bottom-right per
    sequence), as flash_attn_varlen_func computes. The grid is (cdiv(longest query sequence, BM), Hq, B); the
    tensor maps are the ragged views the GPU's maps give (`ragged_view`); out starts NaN. program: a varlen
    attention program (default: the planner's for (elem, D, causal)); the rest as emulate_attention's."""
    cu_q, cu_k = (np.asarray(x, np.int32) for x in (cu_seqlens_q, cu_seqlens_k))
    if elem is None:
        elem = program.inputs["q"].elem if program is not None else next(
            (e for e in ("bf16", "f16") if np.asarray(q).dtype == NUMPY_ELEMS[e]), "bf16")
    dt = NUMPY_ELEMS[elem]
    q, k, v = (np.asarray(x).astype(dt, copy=False) for x in (q, k, v))
    if q.ndim != 3 or k.ndim != 3 or k.shape != v.shape or q.shape[2] != k.shape[2] or q.shape[1] % k.shape[1]:
        raise ValueError(f"emulate_attention_varlen: q {q.shape}, k {k.shape}, v {v.shape}: [T, H, D], k and v alike, "
                         "one head dim, Hkv dividing Hq")
    if cu_q.ndim != 1 or cu_q.shape != cu_k.shape or len(cu_q) < 2 or cu_q[-1] != q.shape[0] or cu_k[-1] != k.shape[0]:
        raise ValueError(f"emulate_attention_varlen: cu_seqlens_q {cu_q.tolist()}, cu_seqlens_k {cu_k.tolist()}: B + 1 "
                         f"starts each, the last = the packed rows ({q.shape[0]}, {k.shape[0]})")
    d = q.shape[2]
    if program is None:
        from warploom.build import planned_attention_program
        program = planned_attention_program(elem, d, causal, varlen=True)
    kernel = attention_kernel(program)
    if not program.attrs.get("varlen") or bool(program.attrs.get("causal")) != bool(causal):
        raise ValueError(f"emulate_attention_varlen: program {kernel.name} is not the varlen kernel of causal={causal}")
    scale = 1.0 / np.sqrt(d) if scale is None else float(scale)
    bufs, views = {}, {}
    for name, x in (("q", q), ("k", k), ("v", v), ("out", q)):
        rows = kernel.tensor_maps[name].box[1]
        buf = np.full((rows + x.shape[0],) + x.shape[1:], np.nan if name == "out" else 0, dt)
        if name != "out":
            buf[rows:] = x
        bufs[name], views[name] = buf, ragged_view(buf, rows)
    lse = np.full((q.shape[1], q.shape[0]), np.nan, np.float32) if with_lse else None
    lens_q, lens_k = np.diff(cu_q), np.diff(cu_k)
    args = {**views, "lse": lse, "scale_log2": np.float32(scale * np.log2(np.e)), "cu_seqlens_q": cu_q,
            "cu_seqlens_k": cu_k}
    sizes = {"Sq": int(lens_q.max()), "Sk": int(lens_k.max()), "Hq": q.shape[1], "Hkv": k.shape[1],
             "B": len(cu_q) - 1, "Tq": q.shape[0]}
    _mod_args(program, scalars, args, "emulate_attention_varlen")
    r = emulate_launch(kernel, args, sizes, seed=seed, delay=delay, ctas=ctas, order=order)
    if report is not None:
        report.append(r)
    return bufs["out"][kernel.tensor_maps["out"].box[1]:], lse


def emulate_attention(q, k, v, causal: bool = False, scale: float | None = None, seed: int = 0, *,
                      layout: str = "bshd", program=None, elem: str | None = None, with_lse: bool = True,
                      delay: int = 4, ctas=None, report: list | None = None, trace: dict | None = None,
                      sms: int = 3, tile_order: int | None = None, order: str = "random",
                      cta_order: str = "forward", fixup: dict | None = None, scalars: dict | None = None):
    """(out, lse) of softmax(q k^T * scale [+ bottom-right causal mask]) v by the emulated sm_90a attention kernel.

    q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D] ("bshd"), or [B, H, S, D] ("bhsd"); cast to `elem` (default: the
    program's, else q's dtype when it is bf16/f16, else bf16) unless they already are. scale defaults to 1/sqrt(D); the kernel takes
    scale * log2(e) as its f32 parameter. The tensor maps see each input through its (D, S, H, B) view, as the
    runtime encodes the caller's strides; out comes back in the input's layout, stored by TMA through its own
    (D, S, H, B) view (start: NaN, so an element never written shows); lse float32 [B, Hq, Sq], or None (and a null lse pointer)
    when with_lse is False. program: the planned program (default: the planner's for (elem, D, causal));
    ctas: the CTA ids (m, h, b) to run (default all; a persistent kernel's are (c, 0, 0)); report, trace as
    emulate_gemm's. A persistent kernel runs on `sms` CTAs (the launch's SM count, small so that each walks several
    tiles) in tile order `tile_order` (default: the runtime's, 0; a causal one reads its deal from a table:
    runtime.deal.causal_table's, or with `tile_order` the snake deal of that order); order: the
    warp interleaving (emulate_launch's). A stream-K kernel (schedule "streamk") runs its CTAs in `cta_order` (as
    emulate_gemm's: which piece of a split tile finishes last) with a NaN-filled workspace and zeroed counters, or
    `fixup`'s; the counters must be zero again afterwards (OutOfBoundsError otherwise). scalars: the values of the
    runtime scalars the program's score/mask modifiers read (warploom.score), by name."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {LAYOUTS}")
    if elem is None:
        elem = program.inputs["q"].elem if program is not None else next(
            (e for e in ("bf16", "f16") if np.asarray(q).dtype == NUMPY_ELEMS[e]), "bf16")
    dt = NUMPY_ELEMS[elem]
    q, k, v = (np.asarray(x).astype(dt, copy=False) for x in (q, k, v))
    if q.ndim != 4 or k.shape != v.shape or k.ndim != 4:
        raise ValueError(f"emulate_attention: q {q.shape}, k {k.shape}, v {v.shape}: 4-d, k and v alike")
    s_ax, h_ax = (1, 2) if layout == "bshd" else (2, 1)
    bsz, sq, hq, d = q.shape[0], q.shape[s_ax], q.shape[h_ax], q.shape[3]
    sk, hkv = k.shape[s_ax], k.shape[h_ax]
    if k.shape[0] != bsz or k.shape[3] != d or hq % hkv:
        raise ValueError(f"emulate_attention: q {q.shape} and k {k.shape} ({layout}) disagree on B or D, or Hq = "
                         f"{hq} is not a multiple of Hkv = {hkv}")
    program = program if program is not None else _default_attention_program(elem, d, causal)
    kernel = attention_kernel(program)
    if bool(program.attrs.get("causal")) != bool(causal) or program.attrs["tile"][2] != d:
        raise ValueError(f"emulate_attention: program {kernel.name} does not take causal={causal}, D={d}")
    scale = 1.0 / np.sqrt(d) if scale is None else float(scale)
    to_bhsd = (lambda x: x) if layout == "bhsd" else (lambda x: x.transpose(0, 2, 1, 3))
    out = np.full(q.shape, np.nan, dt)
    lse = np.full((bsz, hq, sq), np.nan, np.float32) if with_lse else None
    args = {"q": to_bhsd(q), "k": to_bhsd(k), "v": to_bhsd(v), "out": to_bhsd(out), "lse": lse,
            "scale_log2": np.float32(scale * np.log2(np.e))}
    sizes = {"Sq": sq, "Sk": sk, "Hq": hq, "Hkv": hkv, "B": bsz, "SMS": sms}
    if program.attrs.get("varlen"):
        raise ValueError(f"emulate_attention: {kernel.name} takes packed sequences: run it with "
                         "emulate_attention_varlen")
    mods = _mod_args(program, scalars, args, "emulate_attention")
    schedule = program.attrs.get("schedule")
    bm, bn, _ = program.attrs["tile"]
    table = None
    if walks_table(mods):                               # a tabled mask: its block table, built here (on the host)
        table = build_table(mods.mask, {n: int(scalars[n]) for n in mods.mask.scalars()},
                            {n: np.asarray(unwrap(scalars[n])) for n in mods.mask.tensors()}, sq, sk, bm, bn, bsz, hq,
                            causal)
        args.update(table_args(table))
    if schedule in ATTENTION_WALKS:
        if deals_by_table(schedule, causal, mods):      # the host's deal, a table (as ops.attention's)
            launched = rules.evaluate(kernel.grid[0], sizes)
            walked = mask_walked(mods, scalars or {}, sizes, bm, bn, causal, table) if tile_order is None else None
            args["tiles"] = np.asarray(causal_table(sizes, bm, bn, launched, d, elem, order=tile_order,
                                                    walked=walked), np.int32)
        else:
            args["tile_order"] = 0 if tile_order is None else tile_order
    if schedule == "streamk":
        fixup = _fixup(fixup, *attention_streamk_buffers(bm, d, rules.evaluate(kernel.grid[0], sizes)),
                       "emulate_attention")
        args.update(fixup)
        if ctas is None:
            ctas = _ordered_ctas(kernel, sizes, cta_order, seed)
    r = emulate_launch(kernel, args, sizes, seed=seed, delay=delay, ctas=ctas, trace=trace, order=order)
    if report is not None:
        report.append(r)
    if schedule == "streamk":
        _check_counters(fixup["counters"])
    return out, lse
