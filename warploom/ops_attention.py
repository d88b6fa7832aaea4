"""`warploom.ops.attention(q, k, v)`: FlashAttention-style forward attention on GPU tensors of any DLPack/CAI
framework (re-exported by warploom.ops).

    o = warploom.ops.attention(q, k, v)                              # q [B, Sq, Hq, D], k, v [B, Sk, Hkv, D]
    o = warploom.ops.attention(q, k, v, causal=True, layout="bhsd")  # q [B, Hq, Sq, D] (torch SDPA's layout)
    o, lse = warploom.ops.attention(q, k, v, return_lse=True)        # lse: float32 [B, Hq, Sq], natural log

bf16 or fp16, head dim 64, 128 or 256, fp32 softmax and accumulation. GQA/MQA: Hkv divides Hq, query head h
reads kv head h // (Hq // Hkv). Sq may differ from Sk; causal masks align to the bottom-right corner (query i
sees key j iff j <= i + Sk - Sq, as FlashAttention >= 2.1); a row that sees no key gives 0 (lse -inf).
scale defaults to 1/sqrt(D); the kernel takes it as scale_log2 = scale * log2(e), an f32 argument.

One kernel per (dtype, head dim, causal, tile): batch, both sequence lengths, both head counts, the strides and
the scale are runtime arguments (docs/attention-sm90.md is the contract). The output has q's layout, dtype and
framework, and is launched on the caller's current stream.

The copy rule. The kernel reads q, k and v through 4-D TMA maps over the caller's own strides, dims (D, S, H, B),
so contiguous tensors of either layout and strided views (q, k, v sliced out of one packed qkv tensor, for
instance) are read without a copy when TMA allows it: the head dim contiguous (stride 1), the base address
16-byte aligned and every other stride a multiple of 16 bytes (8 elements). A tensor that breaks one of these
rules is first copied, like `.contiguous()`, into a fresh buffer of its own shape and layout (torch and cupy
tensors; other frameworks get an error naming the rule). `out=` must have q's layout, shape and dtype, a
contiguous head dim, a 16-byte aligned base and strides that are multiples of 8 elements, and must not overlap
q, k or v; it is never copied.

Empty problems never launch: Sq = 0 (or B = 0, or Hq = 0) gives an empty output; Sk = 0 gives zeros (every row
sees no key) and lse = -inf. Bad input is refused before any launch with the value and the fix.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, replace

import numpy as np

from warploom import targets
from warploom.kernel.contract import (ATTENTION_BLOCK_M, ATTENTION_ELEMENTS, ATTENTION_HEAD_DIMS,
                                      ATTENTION_TALL_BLOCK_M, ATTENTION_WALKS, FA4_HEAD_DIMS, AttentionSpec,
                                      attention_streamk_buffers, check_attention_artifact, deals_by_table,
                                      default_attention_block_n, walks_table)
from warploom.kernels import get_kernel, streamk_attention, tall_attention
from warploom.runtime import host, rules
from warploom.runtime.deal import causal_deal, causal_table, mask_walked  # noqa: F401  (ops_attention.causal_deal: tools, tests)
from warploom.runtime.launch import default_launcher
from warploom.runtime.launch import sm_count as _sm_count
from warploom.runtime.tensormap import TmaLayoutError, check_tma_layout, encode_tiled
from warploom.runtime.tensors import DeviceTensor, current_stream, empty_like_framework
from warploom.score import NONE as NO_MODS
from warploom.score import ModError, ScoreMods, trace_mods
from warploom.score.bounds import out_of_order
from warploom.score.expr import param_name, stride_name
from warploom.score.table import build_table, table_args
from warploom.score.trace import nondecreasing, unwrap
from warploom.runtime.cache import MissingKernelError
from warploom.variants import variant_name

LAYOUTS = ("bshd", "bhsd")
LAYOUT_HELP = {"bshd": "[batch, seqlen, heads, head_dim] as flash_attn_func takes it",
               "bhsd": "[batch, heads, seqlen, head_dim] as torch's scaled_dot_product_attention takes it"}
# where each logical axis sits in a rank-4 tensor of each layout
AXES = {"bshd": {"B": 0, "S": 1, "H": 2, "D": 3}, "bhsd": {"B": 0, "H": 1, "S": 2, "D": 3}}
LOG2E = math.log2(math.e)
OUT_ALIGN_BYTES = 16           # out's base and strides: what the kernel's TMA store (out's tensor map) requires
MAX_I32 = 2**31 - 1            # Sq, Sk, Hq, Hkv are i32 kernel parameters
MAX_GRID_YZ = 65535            # grid (cdiv(Sq, 128), Hq, B): heads along y, batch along z
F32_MAX = float(np.finfo(np.float32).max)


def dims_order(layout: str) -> list[int]:
    """The tensor axes of a `layout` tensor in tensor-map order, innermost first: (D, S, H, B)."""
    a = AXES[layout]
    return [a["D"], a["S"], a["H"], a["B"]]


def _view(x, name: str) -> DeviceTensor:
    return host.view(x, "attention", name)


@dataclass(frozen=True)
class AttentionProblem:
    layout: str
    elem: str
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads_q: int
    heads_kv: int
    head_dim: int
    device: int

    def shape(self, seqlen: int, heads: int) -> tuple[int, int, int, int]:
        s, h = (seqlen, heads)
        return (self.batch, s, h, self.head_dim) if self.layout == "bshd" else (self.batch, h, s, self.head_dim)

    @property
    def out_shape(self) -> tuple[int, int, int, int]:
        return self.shape(self.seqlen_q, self.heads_q)

    @property
    def lse_shape(self) -> tuple[int, int, int]:
        return (self.batch, self.heads_q, self.seqlen_q)

    @property
    def empty_output(self) -> bool:
        return self.batch == 0 or self.heads_q == 0 or self.seqlen_q == 0

    @property
    def sizes(self) -> dict[str, int]:
        """The named sizes the kernel's grid and trip rules read."""
        return {"B": self.batch, "Sq": self.seqlen_q, "Sk": self.seqlen_k, "Hq": self.heads_q, "Hkv": self.heads_kv}


def check_inputs(q: DeviceTensor, k: DeviceTensor, v: DeviceTensor, layout: str) -> AttentionProblem:
    """The problem q, k, v pose in `layout`, or ValueError/TypeError naming the value and the fix."""
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"attention: layout {layout!r} is not one of {', '.join(map(repr, LAYOUTS))}: "
                         f"'bshd' is {LAYOUT_HELP['bshd']}, 'bhsd' is {LAYOUT_HELP['bhsd']}; pass layout='bshd' or "
                         "layout='bhsd'")
    axes = "[B, S, H, D]" if layout == "bshd" else "[B, H, S, D]"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 4:
            raise ValueError(f"attention: {name} must be rank 4, {axes} in layout {layout!r}, got {host.describe(t)}; "
                             "add the missing axes (x.unsqueeze(0) for a batch of one) or pass the right layout")
        if t.dtype not in ATTENTION_ELEMENTS:
            raise TypeError(f"attention: {name} is {t.dtype}; warploom attention takes "
                            f"{' or '.join(ATTENTION_ELEMENTS)}: cast it (x.to(torch.bfloat16))")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"attention: q is {q.dtype}, k is {k.dtype}, v is {v.dtype}; cast them to one dtype")
    if not q.device == k.device == v.device:
        raise ValueError(f"attention: q is on cuda:{q.device}, k on cuda:{k.device}, v on cuda:{v.device}; "
                         "move them to one device")
    a = AXES[layout]

    def dim(t, axis):
        return int(t.shape[a[axis]])

    if not dim(q, "B") == dim(k, "B") == dim(v, "B"):
        raise ValueError(f"attention: batch sizes differ: q has B = {dim(q, 'B')}, k {dim(k, 'B')}, "
                         f"v {dim(v, 'B')} (layout {layout!r}, {axes}); give all three the same batch")
    d = dim(q, "D")
    if dim(k, "D") != d:
        raise ValueError(f"attention: q has head dim {d} but k has {dim(k, 'D')}: q and k must share the "
                         f"head dim (the last axis, {axes})")
    if dim(v, "D") != d:
        raise ValueError(f"attention: v has head dim {dim(v, 'D')} but q and k have {d}; warploom's kernels "
                         "need v's head dim equal to q's: zero-pad v to it and slice the extra columns off the output")
    if (dim(k, "S"), dim(k, "H")) != (dim(v, "S"), dim(v, "H")):
        raise ValueError(f"attention: k is {list(k.shape)} but v is {list(v.shape)} (layout {layout!r}, {axes}); "
                         "k and v must have the same sequence length and heads")
    hq, hkv = dim(q, "H"), dim(k, "H")
    if not (hq == 0 and hkv == 0) and (hkv == 0 or hq % hkv):
        divisors = [x for x in range(1, hq + 1) if hq % x == 0] if 0 < hq <= 4096 else []
        hint = f" (for example {', '.join(map(str, divisors[:8]))})" if divisors else ""
        raise ValueError(f"attention: q has {hq} heads and k, v have {hkv}: the kv heads must divide the query "
                         f"heads (GQA: query head h reads kv head h // (Hq // Hkv)); use a kv head count that "
                         f"divides {hq}{hint}")
    if d not in ATTENTION_HEAD_DIMS:
        larger = [x for x in ATTENTION_HEAD_DIMS if x > d]
        fix = (f"zero-pad q, k and v to head dim {larger[0]}, pass scale=1/sqrt({d}) and slice the output back "
               f"to {d}" if larger else "split the head dim")
        raise ValueError(f"attention: head dim {d} is not supported; warploom attention kernels exist for head dims "
                         f"{', '.join(map(str, ATTENTION_HEAD_DIMS))}: {fix}")
    sq, sk, b = dim(q, "S"), dim(k, "S"), dim(q, "B")
    for what, value, limit, fix in (
            ("seqlen_q", sq, MAX_I32, "split the queries into chunks (attention rows are independent)"),
            ("seqlen_k", sk, MAX_I32, "no kernel takes that many keys"),
            ("query heads", hq, MAX_GRID_YZ, f"split the heads into groups of at most {MAX_GRID_YZ}"),
            ("batch", b, MAX_GRID_YZ, f"split the batch into chunks of at most {MAX_GRID_YZ}")):
        if value > limit:
            raise ValueError(f"attention: {what} = {value} exceeds {limit}, the kernel's limit; {fix}")
    return AttentionProblem(layout, q.dtype, b, sq, sk, hq, hkv, d, q.device)


def scale_log2_of(scale, head_dim: int) -> tuple[float, float]:
    """(scale, scale * log2(e) rounded to f32): the kernel computes exp2(s * scale_log2 - max * scale_log2)."""
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"attention: scale = {scale!r} must be a real number (default 1/sqrt(head_dim))")
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0) or not scale * LOG2E <= F32_MAX:
        raise ValueError(f"attention: scale = {scale!r} must be positive, finite and below {F32_MAX / LOG2E:.3g} "
                         "(the kernel's online softmax subtracts the running row max of the scaled scores, which "
                         "needs scale > 0); leave it out for 1/sqrt(head_dim)")
    return scale, float(np.float32(scale * LOG2E))


@dataclass(frozen=True)
class AttentionPlan:
    """What a call will do, decided before anything is launched: the problem, the kernel, the scale, and for each
    of q, k, v None (read in place through its own strides) or why it must be copied first."""
    problem: AttentionProblem
    spec: AttentionSpec
    scale: float
    scale_log2: float
    copies: dict

    @property
    def zero_copy(self) -> bool:
        return not any(self.copies.values())


SCHEDULE = None     # None: each head dim's standard schedule; "grid", "persistent" or "streamk" (non-causal
#                     problems only; a causal one keeps its standard kernel) forces one (to compare them)
TILE_ORDER = None   # None: the standard deal (non-causal: the snake deal in order 0; causal: rules.causal_tile_table's
#                     greedy deal); 0 or 1 forces the snake deal in that tile order (rules.TILE_ORDERS), to compare


def pick_spec(elem: str, head_dim: int, causal: bool, target: str = "sm_90a",
              seqlen_q: int | None = None, seqlen_k: int | None = None, pairs: int | None = None,
              sms: int | None = None) -> AttentionSpec:
    """The kernel ops.attention runs on a GPU of `target`: the standard one of (dtype, head dim, causal), with the
    tall 192-row tile where `seqlen_q` calls for it (warploom.kernels.tall_attention), the stream-K schedule where
    the persistent walk of the 128-row tiles (ceil(seqlen_q / 128) x `pairs` = heads x batch of them, each of
    ceil(seqlen_k / block_n) key blocks) would leave `sms` SMs idle too long (warploom.kernels.streamk_attention),
    or with SCHEDULE set (sm_90a), that schedule's
    default tile. On sm_100a: the FA4-style kernel (head dims 64 and 128)."""
    if targets.get(target).accumulator == "tmem":
        if head_dim not in FA4_HEAD_DIMS:
            raise ValueError(f"attention: head dim {head_dim} has no sm_100a kernel (the FA4-style kernel takes "
                             f"{', '.join(map(str, FA4_HEAD_DIMS))}); pad the head dim to one of them")
        return AttentionSpec(elem, head_dim, causal, target=target)
    schedule = None if causal and SCHEDULE == "streamk" else SCHEDULE
    if schedule is None and tall_attention(head_dim, causal, seqlen_q):
        return AttentionSpec(elem, head_dim, causal, block_m=ATTENTION_TALL_BLOCK_M)
    if schedule is None and None not in (seqlen_q, seqlen_k, pairs, sms) and streamk_attention(
            head_dim, causal, rules.cdiv(seqlen_q, ATTENTION_BLOCK_M) * pairs,
            rules.cdiv(seqlen_k, default_attention_block_n(head_dim, "streamk")), sms):
        schedule = "streamk"
    return AttentionSpec(elem, head_dim, causal, schedule=schedule)


def modified_spec(elem: str, head_dim: int, causal: bool, target: str, mods: ScoreMods) -> AttentionSpec:
    """The kernel a call with score/mask modifiers runs (and `warploom precompile --variant` builds): the standard
    kernel of (dtype, head dim, causal) with the modifiers, whatever the sequence lengths."""
    return replace(pick_spec(elem, head_dim, causal, target), mods=mods)


_TABLES: dict = {}     # (device, problem sizes, tile, CTAs, order) -> DeviceBuffer of a causal deal's table; kept:
#                       a prepared launch may hold its address (a few KB each: (CTAs + tiles + 2) x 4 bytes)


def causal_tiles(problem: AttentionProblem, spec: AttentionSpec, sms: int, scalars: dict | None = None,
                 table: "BlockTable | None" = None) -> int:
    """The device address of `causal_table` (runtime.deal) for this problem on min(sms, tiles) CTAs (as the kernel's
    grid rule launches), with TILE_ORDER as its order; built and copied to the GPU once per problem size (and, with a
    mask modifier, per value of the scalars it reads: the deal balances the key blocks each tile walks,
    runtime.deal.mask_walked; with a block table, its counts)."""
    sizes = {"Sq": problem.seqlen_q, "Sk": problem.seqlen_k, "Hq": problem.heads_q, "Hkv": problem.heads_kv,
             "B": problem.batch}
    ctas = min(sms, rules.cdiv(problem.seqlen_q, spec.block_m) * problem.heads_q * problem.batch)
    mask = spec.mods.mask
    mask_key = None
    if mask is not None:                      # the values it reads: scalars, and sorted ids' contents
        mask_key = (mask.text, *sorted((n, scalars[n]) for n in mask.scalars()),
                    *((n, scalars[n].tobytes()) for n in spec.mods.sorted if n in (scalars or {})),
                    None if table is None else table.key)
    key = (problem.device, *sizes.values(), problem.head_dim, problem.elem, spec.target, spec.block_m, spec.block_n,
           ctas, TILE_ORDER, mask_key)
    if key not in _TABLES:
        walked = (table.walked if table is not None else
                  mask_walked(spec.mods, scalars or {}, sizes, spec.block_m, spec.block_n, spec.causal)
                  if TILE_ORDER is None else None)
        _TABLES[key] = host.upload_i32(causal_table(sizes, spec.block_m, spec.block_n, ctas, problem.head_dim,
                                                problem.elem, spec.target, TILE_ORDER, walked), problem.device)
    return _TABLES[key].ptr


def copy_reason(t: DeviceTensor, map_spec, layout: str) -> str | None:
    """None when TMA can read `t` in place through the tensor map `map_spec`, else the rule it breaks."""
    if 0 in t.shape:
        return None      # empty problems never launch
    try:
        check_tma_layout(map_spec, t, dims_order(layout))
    except TmaLayoutError as e:
        return str(e)
    return None


def plan(q: DeviceTensor, k: DeviceTensor, v: DeviceTensor, *, causal: bool = False, scale=None,
         layout: str = "bshd", target: str | None = "sm_90a", spec: AttentionSpec | None = None,
         mods: ScoreMods = NO_MODS) -> AttentionPlan:
    """Check the inputs and decide the kernel for a GPU of `target` (None: the inputs' GPU's, asked after the
    inputs are checked) and the copies (nothing is allocated or launched); `mods`: the call's traced score/mask
    modifiers (the standard kernel's tile and schedule, stream-K excepted, with them compiled in)."""
    if TILE_ORDER is not None and TILE_ORDER not in rules.TILE_ORDERS:
        raise ValueError(f"ops_attention.TILE_ORDER = {TILE_ORDER!r}: use None (the standard deal) or one of the "
                         f"snake deals' tile orders {', '.join(map(str, rules.TILE_ORDERS))}")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"attention: causal = {causal!r} must be True or False")
    problem = check_inputs(q, k, v, layout)
    scale, scale_log2 = scale_log2_of(scale, problem.head_dim)
    if target is None:
        target = host.target_of(problem.device)
        sms = _sm_count(problem.device)
    else:                                            # planning for a GPU not at hand: its arch's largest part
        sms = targets.get(target).sm_count
    if spec is None and mods:
        spec = modified_spec(problem.elem, problem.head_dim, bool(causal), target, mods)
    elif spec is None:
        spec = pick_spec(problem.elem, problem.head_dim, bool(causal), target, seqlen_q=problem.seqlen_q,
                         seqlen_k=problem.seqlen_k, pairs=problem.heads_q * problem.batch, sms=sms)
    elif spec.mods != mods:
        raise ValueError(f"attention: the kernel is a {spec.describe()}; the call's modifiers are "
                         f"[{mods.text or 'none'}]: compile a graph with the call's modifiers")
    elif (spec.elem, spec.head_dim, spec.causal, spec.target) != (problem.elem, problem.head_dim, bool(causal), target):
        raise ValueError(f"attention: the kernel is a {spec.describe()}; the call is {problem.elem}, head dim "
                         f"{problem.head_dim}, {'causal' if causal else 'non-causal'}, on a {target} GPU: compile a "
                         "graph of those (or call warploom.ops.attention, which picks one)")
    tiles = rules.cdiv(problem.seqlen_q, spec.block_m) * problem.heads_q * problem.batch
    if spec.schedule in ATTENTION_WALKS and tiles > MAX_I32:
        raise ValueError(f"attention: {tiles} tiles of {spec.block_m} query rows (batch x heads x query blocks) "
                         f"exceed {MAX_I32}, the persistent kernel's i32 tile count; split the batch")
    maps = spec.tensor_map_specs()
    copies = {name: copy_reason(t, maps[name], layout) for name, t in (("q", q), ("k", k), ("v", v))}
    return AttentionPlan(problem, spec, scale, scale_log2, copies)


def attention_plan(q, k, v, *, causal: bool = False, scale=None, layout: str = "bshd",
                   target: str | None = None) -> AttentionPlan:
    """`plan` on framework tensors: which kernel `attention` would run (on a GPU of `target`; default: the tensors'
    GPU's) and which inputs it would copy."""
    return plan(_view(q, "q"), _view(k, "k"), _view(v, "v"), causal=causal, scale=scale, layout=layout,
                target=target)


def extent(t: DeviceTensor) -> tuple[int, int] | None:
    """[lo, hi) bytes t can touch, or None when it is empty."""
    if 0 in t.shape:
        return None
    lo = hi = 0
    for n, s in zip(t.shape, t.strides):
        span = (n - 1) * s
        lo, hi = lo + min(0, span), hi + max(0, span)
    return t.ptr + lo * t.elem_bytes, t.ptr + (hi + 1) * t.elem_bytes


def check_out(out, problem: AttentionProblem, inputs: dict) -> DeviceTensor:
    """The caller's `out=` as a DeviceTensor, or ValueError/TypeError naming what is wrong and the fix."""
    to = _view(out, "out")
    want = list(problem.out_shape)
    if list(to.shape) != want or to.dtype != problem.elem:
        raise ValueError(f"attention: out must be {want} {problem.elem} (q's layout {problem.layout!r}, heads and "
                         f"dtype), got {host.describe(to)}; leave out= unset to get a new tensor")
    if to.device != problem.device:
        raise ValueError(f"attention: out is on cuda:{to.device} but q on cuda:{problem.device}")
    if to.shape[3] > 1 and to.strides[3] != 1:
        raise ValueError(f"attention: out's head dim must be contiguous (stride 1), got strides {list(to.strides)}; "
                         "pass a tensor from torch.empty(...) or a view whose last axis is contiguous")
    eb = to.elem_bytes
    bad = [(axis, s) for axis, (n, s) in enumerate(zip(to.shape, to.strides))
           if axis != 3 and n > 1 and (s <= 0 or (s * eb) % OUT_ALIGN_BYTES)]
    if to.numel and (to.ptr % OUT_ALIGN_BYTES or bad):
        raise ValueError(f"attention: out must start on a {OUT_ALIGN_BYTES}-byte boundary and have positive strides "
                         f"that are multiples of {OUT_ALIGN_BYTES // eb} elements; got address 0x{to.ptr:x}, strides "
                         f"{list(to.strides)}; pass a fresh tensor (torch.empty) or leave out= unset")
    span = extent(to)
    for name, t in inputs.items():
        other = extent(t)
        if span and other and span[0] < other[1] and other[0] < span[1]:
            raise ValueError(f"attention: out overlaps {name} in memory; attention cannot write its result over "
                             "its inputs: pass a separate out")
    return to


def attention_args(problem: AttentionProblem, maps: dict, lse_ptr: int, scale_log2: float,
                   spec: AttentionSpec | None = None, sms: int | None = None, scalars: tuple = (),
                   table: "BlockTable | None" = None) -> dict:
    """The kernel's arguments by name (docs/attention-sm90.md, "Kernel parameters"); pack_params orders them. A
    persistent kernel (spec) also takes the batch and its tile order, chosen for `sms` SMs; a kernel with modifiers
    the values of their runtime scalars (`scalars`, in the spec's order), and a tabled mask its block table."""
    args = {"q": maps["q"], "k": maps["k"], "v": maps["v"], "out": maps["out"], "lse": lse_ptr,
            "Sq": problem.seqlen_q, "Sk": problem.seqlen_k, "Hq": problem.heads_q, "Hkv": problem.heads_kv,
            "scale_log2": scale_log2}
    if spec is not None:
        for (name, type_), value in zip(spec.mods.scalars, scalars):
            args[param_name(name)] = float(value) if type_ == "f32" else int(value)
        for (name, _, rank), value in zip(spec.mods.tensors, scalars[len(spec.mods.scalars):]):
            args[param_name(name)] = value.ptr                      # a Captured (check_captured)
            for i in range(rank):
                args[stride_name(name, i)] = int(value.strides[i])
    if spec is not None and deals_by_table(spec.schedule, spec.causal, spec.mods):
        args["B"] = problem.batch
        named = {name: value for (name, _), value in zip(spec.mods.scalars, scalars)}
        captured = zip(spec.mods.tensors, scalars[len(spec.mods.scalars):])
        named.update({name: value.host for (name, _, _), value in captured
                      if value.host is not None})          # sorted ids: the deal counts the blocks they bound
        args["tiles"] = causal_tiles(problem, spec, sms, named, table)
    elif spec is not None and spec.schedule in ATTENTION_WALKS:
        args["B"] = problem.batch
        args["tile_order"] = TILE_ORDER if TILE_ORDER is not None else 0     # tiles of one length: the L2's order
    if table is not None:
        args.update(table.args)
    return args


@dataclass(frozen=True)
class BlockTable:
    """A tabled mask's block table on the GPU (warploom.score.table): its kernel arguments (address, strides), the
    key blocks each query block walks at most (the deal's weights), the cache key it was built for and how long
    building it took (seconds, host clock around the GPU work and the counts' read-back)."""
    args: dict
    walked: list
    key: tuple
    seconds: float
    refs: tuple = ()          # weak references to the captured tensors it read (a dead one: build again)
    tensor: object = None     # the torch tensor holding it


_BLOCK_TABLES = host.Lru(16)
LAST_TABLE: list = []         # the last table built ([BlockTable]): benchmarks report its build time


def block_table(spec: AttentionSpec, problem: AttentionProblem, values: tuple) -> BlockTable | None:
    """The block table of `spec`'s mask for this problem (None where the kernel walks none: contract.walks_table),
    built on the GPU with torch once per problem size, tile, value of the scalars the mask reads and version of each
    captured tensor it reads (torch counts in-place writes; a tensor freed and another at its address is another
    tensor), then kept (16 of them)."""
    if not walks_table(spec.mods, spec.varlen):
        return None
    import time
    import weakref
    mods, mask = spec.mods, spec.mods.mask
    n = len(mods.scalars)
    scalars = {name: int(v) for (name, _), v in zip(mods.scalars, values[:n]) if name in mask.scalars()}
    tensors = {name: unwrap(v) for (name, _, _), v in zip(mods.tensors, values[n:]) if name in mask.tensors()}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
        raise ValueError(f"attention: the mask reads {sorted(tensors)} at the query and key positions, so its key "
                         "blocks come from a block table built with torch on the GPU: pass torch tensors (or declare "
                         "sorted document ids with warploom.score.nondecreasing, whose bounds need no table)")
    key = (problem.device, mask.text, problem.batch, problem.heads_q, problem.seqlen_q, problem.seqlen_k,
           spec.block_m, spec.block_n, spec.causal, tuple(sorted(scalars.items())),
           tuple((name, id(t), t._version) for name, t in sorted(tensors.items())))
    hit = _BLOCK_TABLES.hit(key)
    if hit is not None and all(ref() is tensors[name] for name, ref in hit.refs):
        return hit
    start = time.perf_counter()
    with torch.cuda.device(next(iter(tensors.values())).device):
        table = build_table(mask, scalars, tensors, problem.seqlen_q, problem.seqlen_k, spec.block_m, spec.block_n,
                            problem.batch, problem.heads_q, spec.causal, xp=torch)
        walked = table[..., 0].amax(dim=(0, 1)).tolist()
    args = table_args(table)
    args["block_table"] = table.data_ptr()
    built = BlockTable(args, [int(x) for x in walked], key, time.perf_counter() - start,
                       tuple((name, weakref.ref(t)) for name, t in sorted(tensors.items())), table)
    _BLOCK_TABLES.keep(key, built)
    LAST_TABLE[:] = [built]
    return built


def copy_contiguous(t: DeviceTensor, name: str, reason: str) -> DeviceTensor:
    """A fresh C-contiguous copy of t in its framework (the documented slower path)."""
    if t.framework not in ("torch", "cupy"):
        raise ValueError(f"attention: {name} cannot be read in place ({reason}) and warploom copies only torch and "
                         "cupy tensors; pass a tensor whose head dim is contiguous, whose base is 16-byte aligned and "
                         "whose other strides are multiples of 8 elements")
    c = empty_like_framework(t, t.shape, t.dtype)
    if t.framework == "torch":
        c.obj.copy_(t.obj)
    else:
        c.obj[...] = t.obj
    return c


_TENSOR_MAPS = host.Lru(256)
_PREPARED = host.Lru(64)        # (kernel, tensors, sizes, scale) -> PreparedLaunch
_CHECKED: set = set()                        # artifact keys whose contract check passed


def _tensor_map(map_spec, t: DeviceTensor, layout: str, memo: bool = True):
    """encode_tiled over (D, S, H, B), memoized on the tensor's address, shape, strides and layout (encoding costs
    more host time than a short attention takes on the GPU). Fresh copies are never memoized."""
    if not memo:
        return encode_tiled(map_spec, t, dims_order(layout))
    key = (map_spec, layout) + host.layout_key(t)
    tmap = _TENSOR_MAPS.hit(key)
    return tmap if tmap is not None else _TENSOR_MAPS.keep(key, encode_tiled(map_spec, t, dims_order(layout)))


_ORIGINS: dict = {}     # ScoreMods -> MODULE:FUNCTION[+FUNCTION] of the functions traced into it (None: not nameable)


def kernel_of(spec: AttentionSpec):
    """The cached artifact of `spec`, its runtime contract checked once; a missing kernel with modifiers: the error
    names the `warploom precompile --variant` command that builds it."""
    try:
        artifact = get_kernel(spec)
    except MissingKernelError as e:
        if not spec.mods:
            raise
        named = _ORIGINS.get(spec.mods)
        command = (f"{e.command} --variant {named}" if named else
                   f"{e.command} --variant MODULE:FUNCTION (define the modifiers at a module's top level, each scalar "
                   "parameter with a default, so the command can import them)")
        raise MissingKernelError(e.key, e.description, command) from None
    ident = (artifact.key, artifact.name, spec)
    if ident not in _CHECKED:
        check_attention_artifact(artifact, spec)
        _CHECKED.add(ident)
    return artifact


_FAST = host.Lru(64)            # a torch call's identity -> (PreparedLaunch, device)


def torch_call_key(q, k, v, out, causal, scale, layout, return_lse, spec=None, mods=NO_MODS,
                    scalars: tuple = ()) -> tuple | None:
    """What every check of a call on torch tensors and its prepared launch depend on: each tensor's address, shape,
    strides, dtype and device (out: None when the call allocates it), the options (the modifiers and their scalars'
    values included) and the target's choice (ops.SCHEDULE, TILE_ORDER). None for tensors of other frameworks (they
    take the checked path)."""
    scalars = tuple((v.tensor, getattr(v.tensor, "_version", None)) if isinstance(v, nondecreasing) else
                    (v, v._version) if mods.tabled and hasattr(v, "_version") else v
                    for v in scalars)     # a sorted tensor written in place since is checked again, a tabled mask's
    #                                       tensor gets its table built again
    try:
        return (causal, scale, layout, return_lse, SCHEDULE, TILE_ORDER, spec, mods, scalars) + tuple(
            None if t is None else (t.data_ptr(), t.shape, t.stride(), t.dtype, t.device) for t in (q, k, v, out))
    except (AttributeError, TypeError):
        return None


def _fast(hit, q, out):
    """A repeated torch call: the remembered launch, with a fresh out (and lse) written into its parameters."""
    prepared, out_shape, lse_shape, out_i, lse_i, only_stream = hit
    stream = host.torch_stream(q)
    if only_stream is not None and stream != only_stream:
        return None                  # a stream-K launch's fix-up buffers belong to another stream: the slow path
    if out is None:
        out = q.new_empty(out_shape)
        prepared.set_tensor_map_address(out_i, out.data_ptr())
    if lse_shape is None:
        prepared.launch(stream)
        return out
    lse = q.new_empty(lse_shape, dtype=_torch_f32())
    prepared.set_pointer(lse_i, lse.data_ptr())
    prepared.launch(stream)
    return out, lse


def _remember(fast_key, prepared, artifact, problem, return_lse: bool, stream: int | None = None) -> None:
    """For torch tensors read in place: the next identical call skips the checks (`_fast`), with its own copy of the
    launch, in which it rewrites the addresses of a fresh out and lse; `stream`: the only stream it may launch on
    (a stream-K kernel's fix-up buffers are that stream's)."""
    if fast_key is None:
        return
    index = {param.name: i for i, param in enumerate(artifact.params)}
    _FAST.keep(fast_key, (prepared.copy(), problem.out_shape, problem.lse_shape if return_lse else None,
                          index["out"], index["lse"], stream))


def _torch_f32():
    import torch
    return torch.float32


_TRACES = host.Lru(64)          # the modifiers' identity -> (ScoreMods, the scalars' names)


def _function_key(fn):
    """What a traced function's result depends on: the function, its code, defaults and the values its closure
    captured; None where one of those cannot be a key (the function is traced at every call then)."""
    if fn is None:
        return ()
    try:
        cells = tuple(c.cell_contents for c in (getattr(fn, "__closure__", None) or ()))
        key = (fn, getattr(fn, "__code__", None), getattr(fn, "__defaults__", None), cells)
        hash(key)
        return key
    except (TypeError, ValueError):
        return None


def traced_mods(score_mod, mask_mod, scalars: dict | None) -> tuple[ScoreMods, tuple]:
    """(ScoreMods, the scalars' values in the kernel's order) of a call's modifiers, traced once per function (and
    scalar types): another value of a scalar, or another problem size, reuses the trace and the kernel."""
    if score_mod is None and mask_mod is None:
        if scalars:
            raise ValueError("attention: scalars= without a score_mod or mask_mod that reads them")
        return NO_MODS, ()
    scalars = dict(scalars or {})
    fkeys = (_function_key(score_mod), _function_key(mask_mod))
    key = None if None in fkeys else fkeys + (tuple(sorted((n, type(v).__name__, str(getattr(v, "dtype", "")),
                                                              len(getattr(v, "shape", ()))) for n, v in scalars.items())),)
    hit = _TRACES.get(key) if key is not None else None
    if hit is None:
        try:
            mods, _ = trace_mods(score_mod, mask_mod, scalars)
        except ModError as e:
            raise ValueError(f"attention: {e}") from None
        hit = (mods, tuple(n for n, _ in mods.scalars) + tuple(n for n, _, _ in mods.tensors))
        if key is not None:
            _TRACES.keep(key, hit)
        _ORIGINS[mods] = variant_name(score_mod, mask_mod)
    mods, names = hit
    for name, type_ in mods.scalars:
        value = scalars[name]
        if type_ == "i32" and not -2**31 <= int(value) < 2**31:
            raise ValueError(f"attention: scalar {name!r} = {value}: outside the i32 range")
    return mods, tuple(scalars[n] for n in names)


@dataclass(frozen=True)
class Captured:
    """A captured tensor as the kernel takes it: its address and its strides in elements; a tensor declared
    non-decreasing also its host copy (`host`, numpy: checked in order, and read by the deal's block counts)."""
    ptr: int
    strides: tuple
    host: object = None


def check_captured(mods: ScoreMods, values: tuple, problem: AttentionProblem) -> tuple:
    """`values` with each captured tensor (after the scalars) checked and replaced by its Captured: on the problem's
    GPU, of the traced element type and rank, fewer than 2^31 elements, and large enough for every index its loads
    can reach (`index_overrun`), and where declared nondecreasing() (warploom.score) in order along its last
    dimension (read back to the host once per version of a torch tensor: runtime.host.read_back). ValueError names
    the tensor, the dimension and the way out."""
    if not mods.tensors:
        return values
    n = len(mods.scalars)
    out = list(values[:n])
    for (name, type_, rank), value in zip(mods.tensors, values[n:]):
        t = _view(unwrap(value), name)
        if t.device != problem.device:
            raise ValueError(f"attention: captured tensor {name!r} is on GPU {t.device}, q on GPU {problem.device}: "
                             f"move it with .to(q.device)")
        if t.dtype != type_ or t.ndim != rank:
            raise ValueError(f"attention: captured tensor {name!r} is {t.dtype} of rank {t.ndim}; the modifiers were "
                             f"traced with {type_} of rank {rank} (another dtype or rank is another kernel: pass one "
                             "of those)")
        if t.numel >= 2**31 or any(abs(st) * max(d - 1, 0) >= 2**31 for st, d in zip(t.strides, t.shape)):
            raise ValueError(f"attention: captured tensor {name!r} spans 2^31 elements or more; the kernel indexes "
                             "it with 32-bit offsets")
        why = index_overrun(mods, values[:n], problem, name, t.shape)
        if why:
            raise ValueError(f"attention: {why}")
        copy = None
        if name in mods.sorted:
            copy = host.read_back(t)
            why = out_of_order(name, copy)
            if why:
                raise ValueError(f"attention: {why}")
        out.append(Captured(t.ptr, t.strides, copy))
    return tuple(out)


def index_overrun(mods: ScoreMods, scalar_values: tuple, problem: AttentionProblem, name: str,
                  shape: tuple) -> str | None:
    """Why captured tensor `name` of `shape` is too small for the problem, or None: each index expression of its
    loads, as an interval over b < B, h < Hq, q_idx < Sq, kv_idx < Sk and the scalars' values (warploom.score.bounds;
    the kernel clamps the indices of a ragged tile's extra rows and keys into that range), must stay in the
    dimension's 0 .. size - 1."""
    from warploom.score import evaluate
    from warploom.score.bounds import IntervalOps
    from warploom.score.expr import NumpyOps
    env = {"b": (0, problem.batch - 1), "h": (0, problem.heads_q - 1), "q_idx": (0, problem.seqlen_q - 1),
           "kv_idx": (0, problem.seqlen_k - 1), **{n: (v, v) for (n, _), v in zip(mods.scalars, scalar_values)},
           **{n: None for n, _, _ in mods.tensors}}
    sizes = f"B={problem.batch}, Hq={problem.heads_q}, Sq={problem.seqlen_q}, Sk={problem.seqlen_k}"
    for e in (mods.score, mods.mask):
        for node in (x for x in (e.walk() if e is not None else ()) if x.op == "load" and x.value == name):
            for dim, index in enumerate(node.args):
                lo, hi = (int(x) for x in evaluate(index, env, IntervalOps(NumpyOps)))
                if lo < 0 or hi >= shape[dim]:
                    return (f"captured tensor {name!r} (shape {list(shape)}) is indexed along dimension {dim} by "
                            f"{index.text}, which reaches {lo}..{hi} for {sizes}; it must stay within "
                            f"0..{shape[dim] - 1}: shift the index or give a larger tensor")
    return None


def scalar_values(mods: ScoreMods, scalars: dict | None) -> tuple:
    """The values of `mods`' runtime scalars from `scalars` (by name), in the kernel's order."""
    scalars = dict(scalars or {})
    names = [n for n, _ in mods.scalars] + [n for n, _, _ in mods.tensors]
    missing = [n for n in names if n not in scalars]
    extra = sorted(set(scalars) - set(names))
    if missing or extra:
        raise ValueError(f"attention: the kernel's modifiers read the scalars {names}; "
                         f"{f'missing {missing}' if missing else ''}{'; ' if missing and extra else ''}"
                         f"{f'not read: {extra}' if extra else ''}: pass scalars={{name: value}} for exactly those")
    for name, type_ in mods.scalars:
        v = scalars[name]
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or (type_ == "i32" and not
                                                                      isinstance(v, numbers.Integral)):
            raise ValueError(f"attention: scalar {name!r} = {v!r}: the kernel takes it as {type_} (a Python "
                             f"{'int' if type_ == 'i32' else 'float'})")
    return tuple(scalars[n] for n in names)


def attention(q, k, v, *, causal: bool = False, scale=None, return_lse: bool = False, out=None,
              layout: str = "bshd", spec: AttentionSpec | None = None, score_mod=None, mask_mod=None,
              scalars: dict | None = None):
    """softmax(q kᵀ · scale [+ causal mask]) v per batch and query head; `out`, or `(out, lse)` with return_lse.

    score_mod(score, b, h, q_idx, kv_idx, *scalars) and mask_mod(b, h, q_idx, kv_idx, *scalars): Python functions
    traced once into the kernel (warploom.score; FlexAttention's convention: the score is q·k scale, h the query
    head, q_idx and kv_idx positions from 0; a key is seen where mask_mod is True and, if causal, under the
    diagonal). `scalars`: {name: value} of the parameters after the standard ones, passed to the kernel at each call:
    another value (a softcap, a window size) runs the same compiled kernel.

    A repeated call on the same torch tensors (same addresses, shapes, strides, dtypes, out= or none, and options)
    launches the kernel prepared by the first call without checking anything again, a fresh out (and lse) put into
    its parameters (cuTensorMapReplaceAddress for out's tensor map): the checks and the tensor-map encoding cost
    ~0.1 ms of host time, as long as a short attention takes on the GPU (benchmarks/NOTES.md). `spec`: run that
    kernel instead of the one this picks (warploom.compile(graph)(q, k, v) passes its own); it must take the call's
    dtype, head dim, mask and GPU (ValueError naming both otherwise)."""
    if spec is not None and spec.mods and score_mod is None and mask_mod is None:   # a compiled graph's modifiers
        mods, mod_values = spec.mods, scalar_values(spec.mods, scalars)
    else:
        mods, mod_values = traced_mods(score_mod, mask_mod, scalars)
    fast_key = torch_call_key(q, k, v, out, causal, scale, layout, return_lse, spec, mods, mod_values)
    hit = _FAST.get(fast_key) if fast_key is not None else None
    if hit is not None:
        done = _fast(hit, q, out)
        if done is not None:
            return done
    tq, tk, tv = _view(q, "q"), _view(k, "k"), _view(v, "v")
    p = plan(tq, tk, tv, causal=causal, scale=scale, layout=layout, target=None, spec=spec, mods=mods)
    problem = p.problem
    launch_values = check_captured(mods, mod_values, problem)
    inputs = {"q": tq, "k": tk, "v": tv}
    to = (check_out(out, problem, inputs) if out is not None
          else empty_like_framework(tq, problem.out_shape, problem.elem))
    tl = empty_like_framework(tq, problem.lse_shape, "f32") if return_lse else None
    result = (to.obj, tl.obj) if return_lse else to.obj
    if problem.empty_output:
        return result
    if problem.seqlen_k == 0:            # every row sees no key: 0, and lse = log(0)
        host.fill(to, 0.0)
        if tl is not None:
            host.fill(tl, -math.inf)
        return result
    artifact = kernel_of(p.spec)
    lse_ptr = tl.ptr if tl is not None else 0
    stream = current_stream(tq)
    streamk = p.spec.schedule == "streamk"
    only_stream = stream if streamk else None         # its fix-up buffers are this stream's (host.fixup_buffers)
    table = block_table(p.spec, problem, mod_values)       # a tabled mask's (cached; None for the others)
    plan_key = (artifact.key, artifact.name, layout, host.layout_key(tq), host.layout_key(tk), host.layout_key(tv),
                host.layout_key(to), lse_ptr, p.scale_log2, only_stream, TILE_ORDER, mod_values,
                None if table is None else table.key)
    if p.zero_copy:
        prepared = _PREPARED.hit(plan_key)
        if prepared is not None:     # the same kernel on the same tensors: launch without re-checking
            _remember(fast_key, prepared, artifact, problem, return_lse, only_stream)
            prepared.launch(stream)
            return result
    maps, copies = {}, []
    for name, t in inputs.items():
        reason = p.copies[name]
        if reason is not None:       # slower path: a contiguous copy, read through its own (fresh) tensor map
            t = copy_contiguous(t, name, reason)
            # held until the launch is queued: a copy freed earlier lets the framework's allocator hand its memory
            # to the next copy before the kernel has read it (after the launch, stream order keeps it safe)
            copies.append(t)
        maps[name] = _tensor_map(artifact.tensor_maps[name], t, layout, memo=reason is None)
    maps["out"] = _tensor_map(artifact.tensor_maps["out"], to, layout)   # check_out kept it TMA-writable
    sms = _sm_count(problem.device)
    args = attention_args(problem, maps, lse_ptr, p.scale_log2, p.spec, sms, launch_values, table)
    sizes = {**problem.sizes, "SMS": sms}
    if streamk:
        need = attention_streamk_buffers(p.spec.block_m, p.spec.head_dim, rules.evaluate(artifact.grid[0], sizes))
        args["workspace"], args["counters"] = host.fixup_buffers(*need, problem.device, stream)
    prepared = default_launcher().prepare(artifact, sizes, args, device=problem.device)
    if table is not None:
        prepared.hold(table.tensor)
    if p.zero_copy:                  # copies are fresh buffers, freed after the call: never reuse them
        _PREPARED.keep(plan_key, prepared)
        _remember(fast_key, prepared, artifact, problem, return_lse, only_stream)
    prepared.launch(stream)
    del copies
    return result
