"""`warploom.ops.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k)`: attention over packed variable-length
sequences, flash_attn_varlen_func's interface (re-exported by warploom.ops).

    o = warploom.ops.attention_varlen(q, k, v, cu_q, cu_k, causal=True)   # q [Tq, Hq, D], k, v [Tk, Hkv, D]
    o, lse = warploom.ops.attention_varlen(q, k, v, cu_q, cu_k, return_lse=True)        # lse float32 [Hq, Tq]

Sequence i is rows cu_seqlens_q[i] .. cu_seqlens_q[i + 1] - 1 of q and rows cu_seqlens_k[i] .. cu_seqlens_k[i + 1]
- 1 of k and v; its queries see only its keys (causal: bottom-right per sequence, query j sees key l iff l <= j +
Sk_i - Sq_i). GQA, score and mask modifiers (b is the sequence, q_idx and kv_idx positions within it), bf16/fp16,
head dims 64, 128 and 256 as warploom.ops.attention. One kernel serves every batch composition: the starts are a
kernel argument (int32 on the GPU, read by each CTA), the grid is (cdiv(max_seqlen_q, 128), Hq, B), and the kernel
reads and writes the packed tensors through ragged tensor maps (docs/attention-variants.md "Packed sequences").

The starts are checked before the launch (int32, B + 1 of them, from 0, never decreasing, the last equal to the
packed rows; max_seqlen_* at least the longest sequence): that reads them on the host, one small copy from the GPU
(a synchronization) when they live there. check=False skips the check and the copy; max_seqlen_q and max_seqlen_k
are then required, and starts that break the rules give undefined results (as flash_attn_varlen_func's do).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from warploom import targets
from warploom.kernel.contract import ATTENTION_ELEMENTS, ATTENTION_HEAD_DIMS, FA4_HEAD_DIMS, AttentionSpec
from warploom.ops_attention import (MAX_GRID_YZ, MAX_I32, AttentionProblem, check_captured, extent, kernel_of,
                                    scale_log2_of, traced_mods)
from warploom.score import NONE as NO_MODS
from warploom.score import ScoreMods
from warploom.runtime import host
from warploom.runtime.launch import default_launcher
from warploom.runtime.tensormap import TmaLayoutError, check_tma_layout, encode_tiled
from warploom.runtime.tensors import DeviceTensor, current_stream, empty_like_framework
from warploom.score.expr import param_name, stride_name

RAGGED_ORDER = [3, 2, 1, 0]     # the ragged view (T, H, R, D): tensor-map dims (D, R, H, T) innermost first
_UPLOADS = host.Lru(64)         # (device, starts given on the host) -> their device copy


def varlen_spec(elem: str, head_dim: int, causal: bool, target: str = "sm_90a", mods: ScoreMods = NO_MODS) -> AttentionSpec:
    """The kernel attention_varlen runs (and `warploom precompile` builds, with mods for `--variant`): the grid
    kernel of (dtype, head dim, causal) reading packed sequences, with the call's modifiers."""
    if targets.get(target).accumulator == "tmem" and head_dim not in FA4_HEAD_DIMS:
        raise ValueError(f"attention_varlen: head dim {head_dim} has no {target} kernel (the FA4-style kernel takes "
                         f"{', '.join(map(str, FA4_HEAD_DIMS))}); pad the head dim to one of them")
    return AttentionSpec(elem, head_dim, causal, target=target, mods=mods, varlen=True)


def _view(x, name: str) -> DeviceTensor:
    return host.view(x, "attention_varlen", name)


def ragged(t: DeviceTensor, rows: int) -> DeviceTensor:
    """The ragged view the kernel's tensor map of `rows`-row boxes reads `t` [T, H, D] through: shape (T + 1, H,
    rows, D), strides (row, head, row, 1), the base moved back by `rows` rows (kernel.contract, "Packed
    variable-length batches"). Only the rows of t are ever touched: the kernel's boxes stay inside them."""
    s_row, s_head, _ = t.strides
    return replace(t, ptr=t.ptr - rows * s_row * t.elem_bytes, shape=(t.shape[0] + 1, t.shape[1], rows, t.shape[2]),
                   strides=(s_row, s_head, s_row, 1))


def _starts(x, name: str, device: int, check: bool) -> tuple:
    """(the object holding its device memory (.ptr), host values or None, entries) of a cu_seqlens argument: an int32
    GPU tensor is used in place (its values copied to the host only when `check`), host values (a list or numpy
    array) are uploaded once per value."""
    if isinstance(x, (list, tuple, np.ndarray)):
        values = np.asarray(x)
        if values.ndim != 1 or (values.size and not np.issubdtype(values.dtype, np.integer)):
            raise ValueError(f"attention_varlen: {name} must be a 1-d list of ints (B + 1 sequence starts), got "
                             f"shape {values.shape} {values.dtype}")
        if values.size and (values.min() < -2**31 or values.max() >= 2**31):
            raise ValueError(f"attention_varlen: {name} has values outside int32; the kernel reads int32 starts")
        key = (device, tuple(values.tolist()))
        buf = _UPLOADS.hit(key)
        if buf is None:      # kept: a launch still queued may read it (a few bytes each)
            buf = _UPLOADS.keep(key, host.upload_i32(values.astype(np.int32).tolist(), device))
        return buf, values.astype(np.int64), len(values)
    t = _view(x, name)
    if t.dtype != "i32" or t.ndim != 1:
        raise ValueError(f"attention_varlen: {name} must be a 1-d int32 tensor (B + 1 sequence starts), got "
                         f"{host.describe(t)}; pass x.to(torch.int32)")
    if t.device != device:
        raise ValueError(f"attention_varlen: {name} is on GPU {t.device}, q on GPU {device}: move it with "
                         ".to(q.device)")
    if t.shape[0] > 1 and t.strides[0] != 1:
        raise ValueError(f"attention_varlen: {name} must be contiguous (stride 1), got stride {t.strides[0]}; pass "
                         f"{name}.contiguous()")
    return t, (read_i32(t, name) if check else None), t.shape[0]


def read_i32(t: DeviceTensor, name: str) -> np.ndarray:
    """The values of a GPU int32 tensor on the host (a copy from the GPU: a synchronization)."""
    if t.framework == "torch":
        return np.asarray(t.obj.tolist(), np.int64)
    if t.framework == "cupy":
        return np.asarray(t.obj.get(), np.int64)
    raise ValueError(f"attention_varlen: {name} of framework {t.framework!r} cannot be read for the check; pass "
                     "torch or cupy tensors, or check=False with max_seqlen_q and max_seqlen_k")


def check_starts(cu_q: np.ndarray | None, cu_k: np.ndarray | None, total_q: int, total_k: int,
                 max_q, max_k) -> tuple[int, int]:
    """(max_seqlen_q, max_seqlen_k) after checking the starts (when read: not None) against the packed rows and the
    given maxima; ValueError naming the value, the rule and the fix."""
    for name, cu, total, what in (("cu_seqlens_q", cu_q, total_q, "q"), ("cu_seqlens_k", cu_k, total_k, "k and v")):
        if cu is None:
            continue
        if len(cu) < 1 or cu[0] != 0:
            raise ValueError(f"attention_varlen: {name} must start at 0 (the first sequence's first row), got "
                             f"{cu[:4].tolist()}{'...' if len(cu) > 4 else ''}")
        steps = np.diff(cu)
        if (steps < 0).any():
            i = int(np.argmax(steps < 0))
            raise ValueError(f"attention_varlen: {name} must not decrease: {name}[{i}] = {cu[i]} > {name}[{i + 1}] = "
                             f"{cu[i + 1]}; the starts are cumulative sums of the lengths, cumsum with a 0 in front")
        if cu[-1] != total:
            raise ValueError(f"attention_varlen: {name} ends at {cu[-1]} but {what} hold{'s' if what == 'q' else ''} "
                             f"{total} packed rows; the last entry is the total length")
    if cu_q is not None and cu_k is not None and len(cu_q) != len(cu_k):
        raise ValueError(f"attention_varlen: cu_seqlens_q has {len(cu_q)} entries and cu_seqlens_k {len(cu_k)}: both "
                         "are B + 1 starts of the same B sequences")
    out = []
    for name, cu, given in (("max_seqlen_q", cu_q, max_q), ("max_seqlen_k", cu_k, max_k)):
        longest = int(np.diff(cu).max(initial=0)) if cu is not None else None
        if given is None:
            if longest is None:
                raise ValueError(f"attention_varlen: {name} is required with check=False (the kernel's grid is sized "
                                 "by it)")
            given = longest
        if isinstance(given, bool) or not isinstance(given, (int, np.integer)) or given < 0 or given > MAX_I32:
            raise ValueError(f"attention_varlen: {name} = {given!r} must be an int in 0..{MAX_I32}")
        if longest is not None and given < longest:
            raise ValueError(f"attention_varlen: {name} = {given} but the longest sequence has {longest} rows: its "
                             f"rows past {given} would not be computed; pass {longest} or leave it out")
        out.append(int(given))
    return out[0], out[1]


def _check_tensors(q: DeviceTensor, k: DeviceTensor, v: DeviceTensor) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 3:
            raise ValueError(f"attention_varlen: {name} must be rank 3, [total rows, heads, head_dim], got "
                             f"{host.describe(t)}; pack the sequences along the first axis")
        if t.dtype not in ATTENTION_ELEMENTS:
            raise TypeError(f"attention_varlen: {name} is {t.dtype}; it takes {' or '.join(ATTENTION_ELEMENTS)}")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"attention_varlen: q is {q.dtype}, k is {k.dtype}, v is {v.dtype}; cast them to one dtype")
    if not q.device == k.device == v.device:
        raise ValueError(f"attention_varlen: q is on cuda:{q.device}, k on cuda:{k.device}, v on cuda:{v.device}; "
                         "move them to one device")
    d, hq, hkv = q.shape[2], q.shape[1], k.shape[1]
    if k.shape[2] != d or v.shape[2] != d:
        raise ValueError(f"attention_varlen: head dims q {d}, k {k.shape[2]}, v {v.shape[2]}: one head dim for all "
                         "three (zero-pad v and slice the output)")
    if k.shape[:2] != v.shape[:2]:
        raise ValueError(f"attention_varlen: k is {list(k.shape)} but v is {list(v.shape)}: the same rows and heads")
    if hkv == 0 or hq % hkv:
        raise ValueError(f"attention_varlen: q has {hq} heads and k, v {hkv}: the kv heads must divide the query "
                         "heads (GQA: query head h reads kv head h // (Hq // Hkv))")
    if d not in ATTENTION_HEAD_DIMS:
        raise ValueError(f"attention_varlen: head dim {d} is not supported; kernels exist for head dims "
                         f"{', '.join(map(str, ATTENTION_HEAD_DIMS))}: zero-pad to the next one")
    for what, value, limit in (("packed query rows", q.shape[0], MAX_I32 - 1), ("packed key rows", k.shape[0],
                                                                                MAX_I32 - 1),
                               ("query heads", hq, MAX_GRID_YZ)):
        if value > limit:
            raise ValueError(f"attention_varlen: {what} = {value} exceeds {limit}, the kernel's limit; split the call")


def _readable(t: DeviceTensor, name: str, spec_map) -> DeviceTensor:
    """t, or a contiguous copy when TMA cannot read it in place (the head dim not contiguous, a row or head stride
    not a multiple of 16 bytes, the base not 16-byte aligned)."""
    if 0 in t.shape:
        return t
    try:
        check_tma_layout(spec_map, ragged(t, spec_map.box[1]), RAGGED_ORDER)
        return t
    except TmaLayoutError as e:
        from warploom.ops_attention import copy_contiguous
        return copy_contiguous(t, name, str(e))


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int | None = None,
                     max_seqlen_k: int | None = None, *, causal: bool = False, scale=None, return_lse: bool = False,
                     out=None, score_mod=None, mask_mod=None, scalars: dict | None = None, check: bool = True):
    """Packed variable-length attention: `out` [Tq, Hq, D] in q's dtype, or (out, lse float32 [Hq, Tq]) with
    return_lse. The module docstring has the rules; score_mod, mask_mod and scalars as warploom.ops.attention's."""
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"attention_varlen: causal = {causal!r} must be True or False")
    if not isinstance(check, bool):
        raise TypeError(f"attention_varlen: check = {check!r} must be True or False")
    mods, mod_values = traced_mods(score_mod, mask_mod, scalars)
    fast_key = _torch_key(q, k, v, out, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                          return_lse, mods, mod_values, check)
    hit = _FAST.hit(fast_key) if fast_key is not None else None
    if hit is not None:
        return _fast(hit, q, out)
    tq, tk, tv = _view(q, "q"), _view(k, "k"), _view(v, "v")
    _check_tensors(tq, tk, tv)
    cu_q, cu_q_host, n_q = _starts(cu_seqlens_q, "cu_seqlens_q", tq.device, check)
    cu_k, cu_k_host, n_k = _starts(cu_seqlens_k, "cu_seqlens_k", tq.device, check)
    if n_q != n_k:
        raise ValueError(f"attention_varlen: cu_seqlens_q has {n_q} entries and cu_seqlens_k {n_k}: both are B + 1 "
                         "starts of the same B sequences")
    max_q, max_k = check_starts(cu_q_host, cu_k_host, tq.shape[0], tk.shape[0], max_seqlen_q, max_seqlen_k)
    batch = n_q - 1
    if batch > MAX_GRID_YZ:
        raise ValueError(f"attention_varlen: {batch} sequences exceed {MAX_GRID_YZ}, the grid's limit; split the call")
    d, hq, hkv = tq.shape[2], tq.shape[1], tk.shape[1]
    scale, scale_log2 = scale_log2_of(scale, d)
    problem = AttentionProblem("bshd", tq.dtype, max(batch, 0), max_q, max_k, hq, hkv, d, tq.device)
    spec = varlen_spec(tq.dtype, d, bool(causal), host.target_of(tq.device), mods)
    launch_values = check_captured(mods, mod_values, problem)
    if out is not None:
        to = _view(out, "out")
        if list(to.shape) != list(tq.shape) or to.dtype != tq.dtype or to.device != tq.device:
            raise ValueError(f"attention_varlen: out must be {list(tq.shape)} {tq.dtype} on cuda:{tq.device} (q's), "
                             f"got {host.describe(to)}; leave out= unset to get a new tensor")
        span = extent(to)
        for name, t in (("q", tq), ("k", tk), ("v", tv)):
            other = extent(t)
            if span and other and span[0] < other[1] and other[0] < span[1]:
                raise ValueError(f"attention_varlen: out overlaps {name} in memory; attention cannot write its result "
                                 "over its inputs: pass a separate out")
    else:
        to = empty_like_framework(tq, tuple(tq.shape), tq.dtype)
    tl = empty_like_framework(tq, (hq, tq.shape[0]), "f32") if return_lse else None
    result = (to.obj, tl.obj) if return_lse else to.obj
    if tq.shape[0] == 0 or batch <= 0 or hq == 0 or max_q == 0:
        return result
    if tk.shape[0] == 0:                 # no sequence has a key: every row 0, lse = log(0)
        host.fill(to, 0.0)
        if tl is not None:
            host.fill(tl, -math.inf)
        return result
    artifact = kernel_of(spec)          # a missing variant: the error names the command that builds it
    maps, keep = {}, []
    for name, t in (("q", tq), ("k", tk), ("v", tv), ("out", to)):
        spec_map = artifact.tensor_maps[name]
        if name == "out":
            try:
                check_tma_layout(spec_map, ragged(t, spec_map.box[1]), RAGGED_ORDER)
            except TmaLayoutError as e:
                raise ValueError(f"attention_varlen: out cannot be written by TMA ({e}); pass a fresh tensor") from None
        else:
            t = _readable(t, name, spec_map)
            keep.append(t)
        maps[name] = encode_tiled(spec_map, ragged(t, spec_map.box[1]), RAGGED_ORDER)
    args = {**maps, "lse": tl.ptr if tl is not None else 0, "Sq": max_q, "Sk": max_k, "Hq": hq, "Hkv": hkv,
            "scale_log2": scale_log2, "cu_seqlens_q": cu_q.ptr, "cu_seqlens_k": cu_k.ptr, "Tq": tq.shape[0]}
    for (name, type_), value in zip(mods.scalars, launch_values):
        args[param_name(name)] = float(value) if type_ == "f32" else int(value)
    for (name, _, rank), value in zip(mods.tensors, launch_values[len(mods.scalars):]):
        args[param_name(name)] = value.ptr
        for i in range(rank):
            args[stride_name(name, i)] = int(value.strides[i])
    sizes = {**problem.sizes, "Tq": tq.shape[0]}
    prepared = default_launcher().prepare(artifact, sizes, args, device=tq.device)
    prepared.launch(current_stream(tq))
    if fast_key is not None and all(t is u for t, u in zip(keep, (tq, tk, tv))):      # read in place: remembered
        index = {param.name: i for i, param in enumerate(artifact.params)}
        back = to.ptr - ragged(to, artifact.tensor_maps["out"].box[1]).ptr
        _FAST.keep(fast_key, (prepared.copy(), tuple(tq.shape), (hq, tq.shape[0]) if return_lse else None,
                              index["out"], index["lse"], back if out is None else None,
                              (cu_seqlens_q, cu_seqlens_k)))
    del keep                           # copies: the framework's allocator orders their reuse after the launch
    return result


_FAST = host.Lru(64)     # a torch call's identity -> its prepared launch (ops_attention's fast path, for varlen)


def _torch_key(q, k, v, out, cu_q, cu_k, max_q, max_k, causal, scale, return_lse, mods, mod_values,
               check) -> tuple | None:
    """What every check of a call on torch tensors and its launch depend on (ops_attention.torch_call_key's, with
    the starts): their addresses and shapes, and with `check` the starts' tensors themselves and torch's count of
    writes to them (the check reads their values; the entry keeps the tensors, so neither their ids nor their
    memory are reused while it lives). None for other frameworks and for starts given on the host."""
    from warploom.ops_attention import torch_call_key
    base = torch_call_key(q, k, v, out, causal, scale, "varlen", return_lse, None, mods, mod_values)
    if base is None:
        return None
    try:
        starts = tuple((t.data_ptr(), t.shape, t.stride(), t.dtype, t.device,
                        (id(t), t._version) if check else None) for t in (cu_q, cu_k))
    except AttributeError:
        return None
    return base + starts + (max_q, max_k, check)


def _fast(hit, q, out):
    """A repeated torch call: the remembered launch, a fresh out (its ragged map's base `back` bytes before it) and
    lse written into its parameters."""
    prepared, out_shape, lse_shape, out_i, lse_i, back, _ = hit
    if out is None:
        out = q.new_empty(out_shape)
        prepared.set_tensor_map_address(out_i, out.data_ptr() - back)
    if lse_shape is not None:
        import torch
        lse = q.new_empty(lse_shape, dtype=torch.float32)
        prepared.set_pointer(lse_i, lse.data_ptr())
    prepared.launch(host.torch_stream(q))
    return (out, lse) if lse_shape is not None else out


