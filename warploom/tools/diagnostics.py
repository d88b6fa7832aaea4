"""Collecting MLIR diagnostics, printing them like mlir-opt, and checking `expected-error` comments.

`--verify-diagnostics` follows upstream's convention: a comment
`// expected-error @+1 {{text}}` expects an error whose message contains `text`
on the line below (`@-N`, `@above`, `@below`, or no offset for the same line).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from mlir import ir

from warploom.dialect import file_position  # noqa: F401 - also this module's, for its users

SEVERITY = {
    ir.DiagnosticSeverity.ERROR: "error",
    ir.DiagnosticSeverity.WARNING: "warning",
    ir.DiagnosticSeverity.NOTE: "note",
    ir.DiagnosticSeverity.REMARK: "remark",
}


@dataclass
class Diag:
    severity: str
    line: int | None
    col: int | None
    message: str

    def format(self, filename: str) -> str:
        where = f"{filename}:{self.line}:{self.col}: " if self.line is not None else f"{filename}: "
        return f"{where}{self.severity}: {self.message}"


def to_diags(infos) -> list[Diag]:
    """Flatten Diagnostic/DiagnosticInfo objects (and their notes) into `Diag`s."""
    out = []
    for d in infos:
        line, col = file_position(d.location)
        out.append(Diag(SEVERITY.get(d.severity, "error"), line, col, d.message))
        out.extend(to_diags(d.notes))
    return out


# A wl op name where an op name in custom form would be (not inside a string, a type `!wl.`, an attribute `#wl.`).
_CUSTOM_WL_OP = re.compile(r"(?<![\w.!#\"])wl\.([A-Za-z_]\w*)")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')


def parse_failure(text: str) -> list[Diag]:
    """The error for a parse MLIR refused without saying why: the first wl op written in custom form
    (`wl.matmul %a, %b : ...`), which the wl dialect cannot parse (IRDL gives its ops the generic form only, and
    a failing IRDL op parser emits nothing), or, if there is none, a plain statement that the text did not parse."""
    for i, line in enumerate(text.splitlines(), start=1):
        code = _STRING.sub(lambda m: " " * len(m.group()), line).split("//", 1)[0]
        m = _CUSTOM_WL_OP.search(code)
        if m:
            name = m.group(1)
            return [Diag("error", i, m.start() + 1,
                         f"'wl.{name}' is written in custom form, which wl ops do not have: write it in the generic "
                         f"form, the op name quoted, e.g. %0 = \"wl.{name}\"(%x, %y) {{...attributes...}} : "
                         "(operand types) -> result type (see `warploom-opt --help`)")]
    return [Diag("error", None, None, "the input does not parse, and MLIR said nothing about where (the parser of a "
                                      "dynamic dialect op may fail silently); check the wl ops are in generic form")]


class DiagnosticCollector:
    """Attach to a context; every diagnostic emitted while attached lands in `.diags`."""

    def __init__(self, ctx: ir.Context):
        self.diags: list[Diag] = []
        self.handler = ctx.attach_diagnostic_handler(self._handle)

    def _handle(self, d) -> bool:
        self.diags.extend(to_diags([d]))
        return True   # handled: nothing else prints it

    def take(self) -> list[Diag]:
        out, self.diags = self.diags, []
        return out


EXPECTED = re.compile(r"expected-(error|warning|note|remark)\s*(?:@([+-]\d+|above|below))?\s*\{\{(.*?)\}\}")


@dataclass
class Expected:
    severity: str
    line: int
    text: str
    comment_line: int


def expected_diagnostics(text: str, first_line: int = 1) -> list[Expected]:
    out = []
    for i, line in enumerate(text.splitlines(), start=first_line):
        for m in EXPECTED.finditer(line):
            sev, offset, msg = m.groups()
            if offset in (None, ""):
                target = i
            elif offset == "above":
                target = i - 1
            elif offset == "below":
                target = i + 1
            else:
                target = i + int(offset)
            out.append(Expected(sev, target, msg, i))
    return out


def verify_expected(expected: list[Expected], diags: list[Diag], filename: str) -> list[str]:
    """Messages for every unmatched expectation and every unexpected diagnostic (empty = pass)."""
    problems, remaining = [], list(diags)
    for exp in expected:
        match = next((d for d in remaining if d.severity == exp.severity and d.line == exp.line
                      and exp.text in d.message), None)
        if match is None:
            problems.append(f"{filename}:{exp.comment_line}: error: expected {exp.severity} "
                            f"\"{exp.text}\" on line {exp.line} was not produced")
        else:
            remaining.remove(match)
    for d in remaining:
        # mlir-opt turns off printOpOnDiagnostic under --verify-diagnostics; the Python
        # bindings cannot, so drop the "see current operation" notes MLIR attaches instead.
        if d.severity == "note" and d.message.startswith("see current operation"):
            continue
        problems.append(f"{d.format(filename)}  (unexpected {d.severity})")
    return problems
