"""The pass manager side of warploom: parse pipelines, run wl-* and upstream passes, keep the IR after each.

`run_passes(module, ["wl-fuse", "canonicalize"], dump_dir="ir/")` runs each pass
in turn, times it, and records the IR it left: as `PassRecord`s, as numbered
files `00-input.mlir`, `01-wl-fuse.mlir`, ... in `dump_dir`, and through an
`on_ir(record)` callback. A textual pipeline (`builtin.module(wl-fuse,cse)`) is
parsed by `parse_pipeline`.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from mlir import ir, passmanager

from .registry import PASSES, PassError, PassFailed, pipeline_for


@dataclass
class PassRecord:
    index: int
    name: str          # the pipeline element, e.g. "wl-fuse" or "func.func(cse)"
    seconds: float
    ir: str


def split_top_level(text: str) -> list[str]:
    """Split at commas that are not inside (), {} or []."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def parse_pipeline(text: str) -> list[str]:
    """`builtin.module(wl-fuse,func.func(cse))` or `wl-fuse,cse` -> ["wl-fuse", "func.func(cse)"]."""
    text = text.strip()
    m = re.fullmatch(r"builtin\.module\((.*)\)", text, re.S)
    if m:
        text = m.group(1)
    return split_top_level(text)


def parse_options(element: str) -> tuple[str, dict[str, str]]:
    """`wl-tile{block-m=128 stages=4}` -> ("wl-tile", {"block-m": "128", "stages": "4"})."""
    m = re.fullmatch(r"([\w.-]+)(?:\{(.*)\})?", element.strip(), re.S)
    if not m:
        return element, {}
    opts = {}
    for item in (m.group(2) or "").split():
        key, _, value = item.partition("=")
        opts[key] = value
    return m.group(1), opts


def convert_options(info, raw: dict[str, str]) -> dict:
    out = {}
    for key, value in raw.items():
        if key not in info.options:
            known = ", ".join(info.options) or "none"
            raise PassError(f"pass {info.argument} has no option {key!r} (options: {known})")
        typ = info.options[key]
        try:
            out[key.replace("-", "_")] = (value.lower() in ("1", "true")) if typ is bool else typ(value)
        except ValueError:
            raise PassError(f"option {key}={value!r} of {info.argument} must be {typ.__name__}") from None
    return out


def add_element(pm: passmanager.PassManager, element: str) -> None:
    """Add one pipeline element: a registered wl pass (Python) or an upstream pass/pipeline."""
    name, raw = parse_options(element)
    info = PASSES.get(name)
    if info is None:
        if name.startswith("wl-"):
            known = ", ".join(sorted(PASSES))
            raise PassError(f"unknown pass {name!r}; warploom passes: {known}")
        try:
            pm.add(element)
        except ValueError as e:
            raise PassError(f"cannot add pipeline element {element!r}: {e}") from None
        return
    options = convert_options(info, raw)

    def run(op, pass_):
        try:
            if info.kernel_pass:
                check_order(op, info)
            info.run(op, **options)
            if info.kernel_pass:
                record_and_verify(op, info)
        except PassFailed:
            pass_.signal_pass_failure()
        except PassError as e:
            (e.op.operation.location if e.op is not None else op.location).emit_error(str(e))
            pass_.signal_pass_failure()

    pm.add(run, name=info.name, argument=info.argument, description=info.description)


PLANNED = "planned"        # kernel attribute: the kernel passes a wl.kernel has been through, in order
# Set to "1", the kernel program is not verified after each kernel pass: only for proving that the emulator
# catches, on its own, a plan the verifier would have refused (tests/emulate/probe.py); never in normal use.
NO_KERNEL_VERIFY = "WARPLOOM_NO_KERNEL_VERIFY"


def check_order(op, info) -> None:
    """Refuse a kernel that has not been through `info.after`, or has been through `info` already."""
    from warploom.dialect import op_attrs
    from warploom.dialect.kernel_ir import kernel_ops
    for kernel in kernel_ops(op):
        planned = list(op_attrs(kernel).get(PLANNED, []))
        missing = [name for name in info.after if name not in planned]
        if missing:
            done = ", ".join(planned) or "no kernel pass"
            raise PassError(f"{info.argument} needs {', '.join(missing)} to run first (this kernel has been "
                            f"through {done}): run {missing[0]} before {info.argument}", kernel)
        if info.after and info.argument in planned:     # after=() marks a pass that creates kernels
            raise PassError(f"{info.argument} already ran on this kernel (planned: {', '.join(planned)}); "
                            "run each kernel pass once", kernel)


def record_and_verify(op, info) -> None:
    """Append the pass to each kernel's `planned` list, then check the kernel program's invariants."""
    from warploom.dialect import op_attrs
    from warploom.dialect.kernel_ir import kernel_ops, set_attrs
    from warploom.kernel import KernelError, read_program, verify
    for kernel in kernel_ops(op):
        planned = list(op_attrs(kernel).get(PLANNED, []))
        if info.argument not in planned:
            set_attrs(kernel, **{PLANNED: planned + [info.argument]})
        if os.environ.get(NO_KERNEL_VERIFY) == "1":
            continue
        try:
            verify(read_program(kernel), kernel=f"after {info.argument}, the kernel program")
        except KernelError as e:
            raise PassError(str(e), kernel) from None


def make_pass_manager(elements: list[str], *, print_after_all: bool = False) -> passmanager.PassManager:
    pm = passmanager.PassManager("builtin.module")
    for element in elements:
        add_element(pm, element)
    if print_after_all:
        pm.enable_ir_printing(print_after_all=True)
    return pm


def run_passes(module: ir.Module, elements: list[str], *, dump_dir: str | Path | None = None,
               on_ir=None) -> list[PassRecord]:
    """Run the pipeline one element at a time, recording the IR after each.

    Raises `ir.MLIRError` (with the diagnostics) when a pass fails; the records
    and dumps of the passes before it are kept, and a reproducer (the failing step's
    input and the warploom-opt call that replays it, warploom.passes.reproducer) is
    written: its folder is the error's `reproducer`, and a note on the error."""
    path = Path(dump_dir) if dump_dir is not None else None
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
    records: list[PassRecord] = []

    def keep(record: PassRecord) -> None:
        records.append(record)
        if path is not None:
            safe = re.sub(r"[^\w.-]+", "_", record.name).strip("_")
            (path / f"{record.index:02d}-{safe}.mlir").write_text(record.ir)
        if on_ir is not None:
            on_ir(record)

    with module.context:
        keep(PassRecord(0, "input", 0.0, str(module)))
        pms = [make_pass_manager([element]) for element in elements]   # bad names fail before anything runs
        for i, (element, pm) in enumerate(zip(elements, pms), start=1):
            t0 = time.perf_counter()
            try:
                pm.run(module.operation)
            except ir.MLIRError as e:     # the step's input and the warploom-opt call that replays it
                from .reproducer import pass_reproducer
                e.reproducer = pass_reproducer(element, records[-1].ir)
                e.add_note(f"reproducer: {e.reproducer}/replay.sh (runs {element} on its input.mlir)")
                raise
            keep(PassRecord(i, element, time.perf_counter() - t0, str(module)))
    return records


def check_pipeline_order(names: list[str]) -> None:
    """From a graph, each kernel pass needs the passes its `after` names earlier in the list (a kernel pass before
    them would find no kernel, or one not planned that far): PassError naming the pass, what it needs and the
    order of a target's pipeline, before anything runs (issue 37)."""
    from .registry import PASSES
    seen: list[str] = []
    for element in names:
        base = element.split("{")[0]
        info = PASSES.get(base)
        missing = [p for p in (info.after or ()) if p not in seen] if info is not None else []
        if missing:
            raise PassError(f"run_pipeline: {base} needs {', '.join(missing)} to run before it, and the passes given "
                            f"({', '.join(names)}) do not: put them in the order of a target's pipeline, e.g. "
                            f"{', '.join(pipeline_for('sm_90a'))} (warploom.pipeline_for('sm_90a'); 'sm_100a' adds "
                            "wl-plan-tmem)")
        seen.append(base)


def run_pipeline(graph, passes, *, dump_dir: str | Path | None = None,
                 on_ir=None) -> tuple[ir.Module, list[PassRecord]]:
    """(module, records): a graph builder's module (warploom.Graph) through a target's pipeline ("sm_90a") or a list
    of pass names, run on a copy of the module (the graph keeps its own)."""
    names = pipeline_for(passes) if isinstance(passes, str) else list(passes)
    check_pipeline_order(names)
    with graph.module.context:
        module = ir.Module.parse(str(graph.module.operation.get_asm(enable_debug_info=True)))
    return module, run_passes(module, names, dump_dir=dump_dir, on_ir=on_ir)
