"""The standard attention variants `warploom precompile --variant standard` builds, and how `--variant
module:function` names others (issue 34; docs/attention-variants.md "Precompiling variants").

Each standard variant is a score or mask modifier written as users write them (warploom.score's functions); the
parameters after the indices are runtime scalars, and their defaults are the example values precompiling traces
them with (any value runs the same kernel). A precompiled kernel is the one a call with the same function and
`scalars={...}` naming those parameters uses:

    warploom precompile --target sm_90a --cache DIR --variant standard
    ops.attention(q, k, v, causal=True, mask_mod=warploom.variants.sliding_window, scalars={"size": 512})
"""
from __future__ import annotations

import importlib
import inspect
import os
import sys
from dataclasses import dataclass

import numpy as np

from warploom.score import exp2, nondecreasing, tanh
from warploom.score.trace import MASK_ARGS, SCORE_ARGS


def softcap(score, b, h, q_idx, kv_idx, cap=30.0):
    """Logit soft-capping (Gemma 2, Grok): cap tanh(score / cap)."""
    return cap * tanh(score / cap)


def alibi(score, b, h, q_idx, kv_idx, heads=16):
    """ALiBi: a bias of -slope_h |q_idx - kv_idx|, the slopes 2^(-8 (h + 1) / heads)."""
    return score - exp2(-8.0 * (h + 1) / heads) * abs(q_idx - kv_idx)


def sliding_window(b, h, q_idx, kv_idx, size=1024):
    """With causal: each query sees itself and the `size` keys before it."""
    return q_idx - kv_idx <= size


def symmetric_window(b, h, q_idx, kv_idx, size=256):
    """Without causal: each query sees the keys within `size` of it on either side."""
    return (q_idx - kv_idx <= size) & (kv_idx - q_idx <= size)


def prefix_lm(b, h, q_idx, kv_idx, prefix=1024):
    """Without causal: the first `prefix` keys are seen by every query, the others causally."""
    return (kv_idx <= q_idx) | (kv_idx < prefix)


def document(b, h, q_idx, kv_idx, doc_id=nondecreasing(np.zeros(1, np.int32))):
    """With causal: packed documents, each query sees its own document's keys; doc_id [S] int32 declared sorted
    (pass `nondecreasing(ids)`: the kernel walks only each query tile's documents; any S, the same kernel)."""
    return doc_id[q_idx] == doc_id[kv_idx]


@dataclass(frozen=True)
class Variant:
    name: str
    score_mod: object = None
    mask_mod: object = None
    causal: tuple = (False, True)        # the causal flags to build it for

    def scalars(self) -> dict:
        """The example values of its runtime scalars: the modifiers' parameter defaults."""
        out = {}
        for fn, standard in ((self.score_mod, SCORE_ARGS), (self.mask_mod, MASK_ARGS)):
            if fn is None:
                continue
            params = list(inspect.signature(fn).parameters.values())[len(standard):]
            for p in params:
                if p.default is p.empty:
                    raise ValueError(f"--variant {self.name}: parameter {p.name!r} of {fn.__name__} has no default; "
                                     "give each scalar parameter a default value (an example of its type: 30.0 for "
                                     "an f32, 1024 for an i32) so precompiling can trace it")
                out[p.name] = p.default
        return out


STANDARD = (Variant("softcap", softcap), Variant("alibi", alibi),
            Variant("sliding_window", mask_mod=sliding_window, causal=(True,)),
            Variant("symmetric_window", mask_mod=symmetric_window, causal=(False,)),
            Variant("prefix_lm", mask_mod=prefix_lm, causal=(False,)),
            Variant("document", mask_mod=document, causal=(True,)))


def resolve(text: str) -> list[Variant]:
    """The variants `--variant text` names: "standard", or "module:function" (a score modifier, its first parameter
    `score`, or a mask modifier), or "module:score_fn+mask_fn" for one kernel with both. ValueError says what is
    wrong and the way out."""
    if text == "standard":
        return list(STANDARD)
    module_name, sep, names = text.partition(":")
    if not sep or not module_name or not names:
        raise ValueError(f"--variant {text!r}: use 'standard' or MODULE:FUNCTION (e.g. mymodels.masks:window), "
                         "or MODULE:SCORE_FN+MASK_FN for a kernel with both")
    if os.getcwd() not in sys.path:           # a module of the folder the command runs in
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"--variant {text!r}: cannot import {module_name!r} ({e}); run from the folder that holds "
                         "it or put it on PYTHONPATH") from None
    score_mod = mask_mod = None
    for name in names.split("+"):
        fn = getattr(module, name, None)
        if not callable(fn):
            raise ValueError(f"--variant {text!r}: {module_name} has no function {name!r}")
        first = next(iter(inspect.signature(fn).parameters), None)
        if first == "score":
            if score_mod is not None:
                raise ValueError(f"--variant {text!r}: two score modifiers; give one score and one mask modifier")
            score_mod = fn
        else:
            if mask_mod is not None:
                raise ValueError(f"--variant {text!r}: two mask modifiers; give one score and one mask modifier")
            mask_mod = fn
    return [Variant(text, score_mod, mask_mod)]


def variant_name(score_mod, mask_mod) -> str | None:
    """The `--variant` text that names these modifiers (MODULE:FUNCTION, or MODULE:SCORE_FN+MASK_FN), or None where
    it cannot: a lambda, a nested function, one of __main__, or the two in different modules."""
    names = []
    for fn in (score_mod, mask_mod):
        if fn is None:
            continue
        qualname, module = getattr(fn, "__qualname__", ""), getattr(fn, "__module__", None)
        if not module or not qualname or "<" in qualname or "." in qualname or module == "__main__":
            return None
        names.append((module, qualname))
    if not names or len({m for m, _ in names}) > 1:
        return None
    return f"{names[0][0]}:{'+'.join(q for _, q in names)}"
