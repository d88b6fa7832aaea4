"""Score and mask modifiers of an attention (issue 34): `warploom.score.expr` is the typed expression the IR
carries and the lowering and the reference evaluate; `warploom.score.trace` turns Python functions into it.

    from warploom.score import tanh, where
    o = warploom.ops.attention(q, k, v, score_mod=lambda s, b, h, qi, ki, cap: cap * tanh(s / cap),
                               scalars={"cap": 30.0})
"""
from .expr import NONE, Expr, ModError, ScoreMods, evaluate, parse
from .trace import Traced, exp, exp2, log, log2, maximum, minimum, nondecreasing, tanh, trace_mods, where

__all__ = ["NONE", "Expr", "ModError", "ScoreMods", "Traced", "evaluate", "exp", "exp2", "log", "log2", "maximum",
           "minimum", "nondecreasing", "parse", "tanh", "trace_mods", "where"]
