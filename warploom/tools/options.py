"""Where each option of `warploom explain`, `compile` and `emulate` applies, and the refusal of one given elsewhere.

An option either changes what a command prints or is refused, before anything compiles, with where it applies and
the options that do apply to what was asked for (tests/unit/test_cli_options.py walks the whole table).

The parser records which options the user typed (`track_given`): an option typed with its default value is still
typed, so `--b-layout kn` on an attention is refused like `--b-layout nk`.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from warploom import targets

# --op: one name per kernel family across explain, compile, emulate and precompile; older spellings still work
OPS = ("matmul", "attention")
OLD_OP_NAMES = {"gemm": "matmul"}
notes: list[str] = []          # what the parser noticed and main() prints (an old --op spelling)


def op_name(text: str) -> str:
    """--op's type: the name, with an old spelling turned into today's (and a note printed once parsing is done)."""
    new = OLD_OP_NAMES.get(text)
    if new is None:
        return text
    notes.append(f"note: --op {text} is spelled --op {new} now (one name across explain, compile, emulate and "
                 f"precompile); running --op {new}")
    return new


@dataclass(frozen=True)
class Kernel:
    """What a command was asked for, as far as options care: the op (None: a file's graph), the target and, for
    emulate, whether a timeline is traced."""
    command: str
    op: str | None
    target: str
    timeline: bool = False

    def describe(self) -> str:
        if self.op is None:
            return f"a graph read from a file (compiled by the {self.target} pipeline as written)"
        return f"the {self.target} {'GEMM' if self.op == 'matmul' else 'attention'} (--op {self.op})"


@dataclass(frozen=True)
class Rule:
    applies: Callable[[Kernel], bool]
    where: str                  # where the option applies, in words a user can act on


def _op(op):
    return lambda k: k.op == op


def _op_on(op, accumulator):
    """The built-in kernel `op` on a target whose MMA keeps its accumulators in `accumulator` ("regs", "tmem")."""
    return lambda k: k.op == op and targets.get(k.target).accumulator == accumulator


# the options that pick or shape a built-in kernel (explain, compile --op): none applies to a file's graph
KERNEL_RULES: dict[str, Rule] = {
    "dtype": Rule(lambda k: k.op is not None, "a built-in kernel (--op matmul or --op attention)"),
    "b_layout": Rule(_op("matmul"), "the GEMM (--op matmul)"),
    "head_dim": Rule(_op("attention"), "the attention (--op attention)"),
    "causal": Rule(_op("attention"), "the attention (--op attention)"),
    "shared_kv": Rule(_op_on("attention", "tmem"), "the sm_100a attention (--op attention --target sm_100a)"),
    "q_stages": Rule(_op_on("attention", "regs"), "the sm_90a attention (--op attention --target sm_90a)"),
    "exp2_poly": Rule(_op("attention"), "the attention (--op attention)"),
    "block_m": Rule(lambda k: k.op == "matmul" or _op_on("attention", "regs")(k),
                    "the GEMM (--op matmul) and the sm_90a attention (128 or 192 query rows a CTA; the sm_100a "
                    "attention's two Q tiles are fixed)"),
    "block_n": Rule(lambda k: k.op is not None, "a built-in kernel (--op matmul or --op attention)"),
    "stages": Rule(lambda k: k.op is not None, "a built-in kernel (--op matmul or --op attention)"),
    "schedule": Rule(lambda k: k.op is not None, "a built-in kernel (--op matmul or --op attention)"),
    "cluster_m": Rule(_op_on("matmul", "regs"), "the sm_90a GEMM (--op matmul --target sm_90a)"),
    "group_m": Rule(_op_on("matmul", "regs"), "the sm_90a GEMM (--op matmul --target sm_90a)"),
    "swap_ab": Rule(_op_on("matmul", "regs"), "the sm_90a GEMM (--op matmul --target sm_90a)"),
    "variant": Rule(_op("attention"), "the attention (--op attention)"),
    "varlen": Rule(_op("attention"), "the attention (--op attention)"),
    "seqlen": Rule(_op("attention"), "the attention with modifiers (--op attention --variant ...)"),
    "shape": Rule(_op("matmul"), "the GEMM (--op matmul), whose kernel warploom.ops.matmul picks by the shape (an "
                                  "attention kernel is chosen by --head-dim, --causal and --dtype)"),
}

EMULATE_RULES: dict[str, Rule] = {
    "b_layout": Rule(_op("matmul"), "--op matmul"),
    "schedule": Rule(_op("matmul"), "--op matmul (warploom.ops.SCHEDULE; ops.attention picks its schedule from the "
                                    "shape)"),
    "exact": Rule(_op("matmul"), "--op matmul (the attention is judged by warploom.emulate.judge's bound)"),
    "timeline": Rule(_op("matmul"), "--op matmul (the timeline is traced for --op matmul only so far)"),
    "cta": Rule(lambda k: k.op == "matmul" and k.timeline, "--op matmul with --timeline (the CTA it traces)"),
    "timeline_limit": Rule(lambda k: k.op == "matmul" and k.timeline, "--op matmul with --timeline"),
    "causal": Rule(_op("attention"), "--op attention"),
    "layout": Rule(_op("attention"), "--op attention"),
}

RULES = {"explain": KERNEL_RULES, "compile": KERNEL_RULES, "emulate": EMULATE_RULES}


def track_given(parser: argparse.ArgumentParser) -> None:
    """Make each optional action of `parser` record its dest in namespace.given when it runs."""
    for action in parser._actions:
        if action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            action.__class__ = _tracking(type(action))


_TRACKING: dict[type, type] = {}


def _tracking(cls: type) -> type:
    if cls not in _TRACKING:
        def __call__(self, parser, namespace, values, option_string=None):
            given = getattr(namespace, "given", None)
            if given is None:
                given = set()
                namespace.given = given
            given.add(self.dest)
            return cls.__call__(self, parser, namespace, values, option_string)
        _TRACKING[cls] = type(f"Tracked{cls.__name__}", (cls,), {"__call__": __call__})
    return _TRACKING[cls]


def given(args) -> set[str]:
    return getattr(args, "given", None) or set()


def flag(parser: argparse.ArgumentParser, dest: str) -> str:
    """The long spelling of the option whose dest is `dest`."""
    for action in parser._actions:
        if action.dest == dest and action.option_strings:
            return max(action.option_strings, key=len)
    return "--" + dest.replace("_", "-")


def refusal(parser: argparse.ArgumentParser, args, kernel: Kernel) -> str | None:
    """The message refusing the first option typed that does not apply to `kernel`, or None when all apply."""
    rules = RULES[kernel.command]
    typed = given(args)
    wrong = [d for d in _dests(parser) if d in typed and d in rules and not rules[d].applies(kernel)]
    if not wrong:
        return None
    applies = [flag(parser, d) for d in _dests(parser) if d not in rules or rules[d].applies(kernel)]
    first = flag(parser, wrong[0])
    others = f" (and {', '.join(flag(parser, d) for d in wrong[1:])})" if wrong[1:] else ""
    return (f"{first}{others} applies to {rules[wrong[0]].where}, not to {kernel.describe()}: drop it. The options "
            f"that apply here: {', '.join(applies)}")


def _dests(parser: argparse.ArgumentParser) -> list[str]:
    return [a.dest for a in parser._actions
            if a.option_strings and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]
