"""The package graph of warploom: every import in warploom/ (deferred ones inside functions included), read with
`ast`, must point down the layer order of docs/design.md ("Layers"), form no cycle, and import no private name
(`_x`) of another module.

    targets → layout, runtime, reference (numpy semantics) → kernel.contract → emulate → dialect → kernel
    → passes → lowering → build → ops (kernels.py, ops*.py, tuning, torch.py) → tools (and tuning.search)

Imports inside one layer are allowed (not in a cycle). A failure names the importing file and line, the imported
module and the rule it breaks.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "warploom"

# the layers, bottom first; a module may import its own layer's modules and any layer below
LAYERS = ("targets", "base", "contract", "emulate", "dialect", "kernel", "passes", "lowering", "build", "ops", "tools")

# module (or package: everything under it) -> layer; the longest matching prefix decides
LAYER_OF = {
    "warploom.__init__": "targets",             # the package root: imports nothing (its names load lazily)
    "warploom.targets": "targets",
    "warploom.layout": "base",
    "warploom.runtime": "base",                 # beside layout: numpy + cuda-python, no MLIR
    "warploom.reference": "base",               # the float64 semantics (numpy)...
    "warploom.score": "base",                   # attention score/mask modifiers: the expression, its tracing
    "warploom.variants": "base",                # the standard attention variants (modifiers), --variant names
    "warploom.reference.interpret": "dialect",  # ... and their interpreter of graph-level wl IR
    "warploom.kernel.contract": "contract",     # the kernel ABI: passes, lowering, runtime's users, emulator
    "warploom.emulate": "emulate",              # runs lowered kernels: layout, targets, contract, runtime
    "warploom.emulate.front": "build",          # ... and its front door builds the kernel first (build, lowering)
    "warploom.emulate.__init__": "build",       # the package's names include the front door's
    "warploom.dialect": "dialect",
    "warploom.kernel": "kernel",                # the typed program reads and writes wl IR
    "warploom.passes": "passes",
    # the wl-lower-* passes call the lowering, and the package's __init__ registers every pass (those included)
    "warploom.passes.__init__": "lowering",
    "warploom.passes.lower_sm90": "lowering",
    "warploom.passes.lower_sm100": "lowering",
    "warploom.lowering": "lowering",            # every module of the lowering (core, atoms, emit, per target, ptx)
    "warploom.build": "build",
    "warploom.kernels": "ops",                  # standard sets, heuristics, cache index: the host's, never the core's
    "warploom.ops": "ops",
    "warploom.ops_attention": "ops",
    "warploom.ops_varlen": "ops",
    "warploom.tuning": "ops",                   # the shipped tuning table ops.matmul reads ...
    "warploom.tuning.search": "tools",          # ... and `warploom tune`, which runs kernels through warploom.ops
    "warploom.torch": "ops",
    "warploom.tools": "tools",
}

# Known violations, each (importing file, imported module, rule), allowed only until their owners fix them. A fixed
# one must leave its list (test_the_allow_lists_hold_only_live_violations), so the lists only shrink; an entry whose
# file or imported module is gone (the lowering split deletes sm90*.py and sm100*.py) is ignored: delete it too.
#
ALLOWED: set[tuple[str, str, str]] = set()

# Module cycles (their members, sorted) allowed until their owners break them; ignored once a member is gone.
ALLOWED_CYCLES: set[tuple[str, ...]] = {
}


@dataclass(frozen=True)
class Import:
    file: str           # relative to the repository root
    line: int
    source: str         # the importing module
    target: str         # the imported module (a module of warploom: its file's dotted name)
    names: tuple        # the names imported from it (from-imports), else ()

    def where(self) -> str:
        return f"{self.file}:{self.line}: {self.source} imports {self.target}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def is_package(name: str, mods: dict[str, Path]) -> bool:
    return name in mods and mods[name].name == "__init__.py"


def resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The warploom module `name` names: itself, or its nearest enclosing module (an attribute of a module)."""
    while name:
        if name in mods:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(path: Path, mods: dict[str, Path]) -> list[Import]:
    """Every import of a warploom module in `path`, at any depth of its syntax tree (functions, classes, ifs)."""
    source = module_name(path)
    package = source if path.name == "__init__.py" else source.rpartition(".")[0]
    rel = str(path.relative_to(ROOT))
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = resolve(alias.name, mods)
                if target is not None:
                    found.append(Import(rel, node.lineno, source, target, ()))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                full = ".".join(base + ([node.module] if node.module else []))
            else:
                full = node.module or ""
            if not (full == "warploom" or full.startswith("warploom.")):
                continue
            module = resolve(full, mods)
            if module is None:
                continue
            plain = []
            for alias in node.names:
                sub = f"{full}.{alias.name}"
                if is_package(full, mods) and sub in mods:      # `from pkg import submodule`
                    found.append(Import(rel, node.lineno, source, sub, ()))
                else:
                    plain.append(alias.name)
            if plain:
                found.append(Import(rel, node.lineno, source, module, tuple(plain)))
    return found


def layer_of(module: str, path: Path | None = None) -> str:
    key = module + ".__init__" if path is not None and path.name == "__init__.py" else module
    if key in LAYER_OF:
        return LAYER_OF[key]
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYER_OF:
            return LAYER_OF[prefix]
    raise AssertionError(f"{module}: no layer (add it to LAYER_OF in tests/unit/test_layers.py and docs/design.md)")


def all_imports() -> tuple[dict[str, Path], list[Import]]:
    mods = modules()
    return mods, [imp for path in mods.values() for imp in imports_of(path, mods)]


def check_layers(mods, imports) -> list[str]:
    """Rule (b): no import points up the layer order."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    problems = []
    for imp in imports:
        src, dst = layer_of(imp.source, mods[imp.source]), layer_of(imp.target, mods[imp.target])
        if rank[dst] > rank[src] and (imp.file, imp.target, "up") not in ALLOWED:
            problems.append(f"{imp.where()}: layer {src!r} imports layer {dst!r}, above it (rule: imports point "
                            f"down the order {' < '.join(LAYERS)}; docs/design.md, Layers)")
    return problems


def check_private(imports) -> list[str]:
    """Rule (c): no `from X import _name` of another module's private name."""
    problems = []
    for imp in imports:
        private = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        if private and (imp.file, imp.target, "private") not in ALLOWED:
            problems.append(f"{imp.where()}: imports its private name(s) {', '.join(private)} (rule: a module's "
                            "_names are its own; make the name public where it belongs, or move it)")
    return problems


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of `graph` with more than one node, or a node importing itself."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def unit_of(module: str, mods) -> str:
    """The package-level unit of a module: its top-level package under warploom, split where its modules sit in
    different layers (kernel.contract; the lowering passes)."""
    parts = module.split(".")
    top = ".".join(parts[:2])
    return f"{top} [{layer_of(module, mods[module])}]"


def check_cycles(mods, imports) -> list[str]:
    """Rule (a): no cycle between modules, nor between packages."""
    problems = []
    by_edge: dict[tuple[str, str], Import] = {}
    graph: dict[str, set[str]] = {}
    units: dict[str, set[str]] = {}
    unit_edge: dict[tuple[str, str], Import] = {}
    for imp in imports:
        if imp.source == imp.target or (imp.file, imp.target, "up") in ALLOWED:
            continue
        graph.setdefault(imp.source, set()).add(imp.target)
        by_edge.setdefault((imp.source, imp.target), imp)
        a, b = unit_of(imp.source, mods), unit_of(imp.target, mods)
        if a != b:
            units.setdefault(a, set()).add(b)
            unit_edge.setdefault((a, b), imp)
    for comp in strongly_connected(graph):
        if tuple(comp) in ALLOWED_CYCLES:
            continue
        members = set(comp)
        edges = [by_edge[(s, t)] for s in comp for t in sorted(graph[s]) if t in members]
        problems.append("module cycle " + " <-> ".join(comp) + " (rule: no import cycles): "
                        + "; ".join(e.where() for e in edges))
    for comp in strongly_connected(units):
        members = set(comp)
        edges = [unit_edge[(s, t)] for s in comp for t in sorted(units[s]) if t in members]
        problems.append("package cycle " + " <-> ".join(comp) + " (rule: no import cycles between packages): "
                        + "; ".join(e.where() for e in edges))
    return problems


# ---- the tests ----------------------------------------------------------------------------------------------------

def test_every_module_has_a_layer():
    mods = modules()
    for name, path in mods.items():
        assert layer_of(name, path) in LAYERS


def test_imports_point_down_the_layer_order():
    mods, imports = all_imports()
    problems = check_layers(mods, imports)
    assert not problems, "\n".join(problems)


def test_no_private_names_cross_modules():
    _, imports = all_imports()
    problems = check_private(imports)
    assert not problems, "\n".join(problems)


def test_no_import_cycles():
    mods, imports = all_imports()
    problems = check_cycles(mods, imports)
    assert not problems, "\n".join(problems)


def test_the_allow_lists_hold_only_live_violations():
    """An allowed violation that is gone (its owner fixed it) leaves the list too, so the lists only shrink."""
    mods, imports = all_imports()
    rank = {name: i for i, name in enumerate(LAYERS)}
    live = set()
    for imp in imports:
        if rank[layer_of(imp.target, mods[imp.target])] > rank[layer_of(imp.source, mods[imp.source])]:
            live.add((imp.file, imp.target, "up"))
        if any(n.startswith("_") and not n.startswith("__") for n in imp.names):
            live.add((imp.file, imp.target, "private"))
    present = {(f, t, r) for f, t, r in ALLOWED if (ROOT / f).is_file() and t in mods}
    stale = sorted(present - live)
    assert not stale, f"fixed, so remove from the allow-lists of tests/unit/test_layers.py: {stale}"
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.source != imp.target and (imp.file, imp.target, "up") not in ALLOWED:
            graph.setdefault(imp.source, set()).add(imp.target)
    cycles = [set(c) for c in strongly_connected(graph)]
    broken = sorted(c for c in ALLOWED_CYCLES if all(m in mods for m in c) and not any(set(c) <= s for s in cycles))
    assert not broken, f"broken, so remove from ALLOWED_CYCLES: {broken}"


def test_a_broken_import_is_reported_with_file_line_and_rule(tmp_path):
    """The checks themselves: a lowering import in passes/, a private name and a two-module cycle, each caught."""
    mods = {"warploom.passes.tile": Path("warploom/passes/tile.py"), "warploom.lowering.core":
            Path("warploom/lowering/core.py"), "warploom.ops": Path("warploom/ops.py"),
            "warploom.ops_attention": Path("warploom/ops_attention.py")}
    up = Import("warploom/passes/tile.py", 7, "warploom.passes.tile", "warploom.lowering.core", ("emit",))
    private = Import("warploom/ops.py", 9, "warploom.ops", "warploom.ops_attention", ("_kernel",))
    back = Import("warploom/ops_attention.py", 3, "warploom.ops_attention", "warploom.ops", ("torch_stream",))
    (layer_problem,) = check_layers(mods, [up])
    assert "warploom/passes/tile.py:7" in layer_problem and "warploom.lowering.core" in layer_problem
    assert "layer 'passes' imports layer 'lowering'" in layer_problem
    (private_problem,) = check_private([private])
    assert "warploom/ops.py:9" in private_problem and "_kernel" in private_problem
    (cycle,) = [p for p in check_cycles(mods, [private, back]) if p.startswith("module cycle")]
    assert "warploom.ops <-> warploom.ops_attention" in cycle and "warploom/ops_attention.py:3" in cycle


CORE = ("dialect", "passes", "lowering", "kernel", "layout", "targets", "runtime", "emulate")


def test_the_compiler_core_never_imports_the_standard_sets():
    """warploom.kernels (standard sets, measured heuristics, cache index) is the host's: the core reads the kernel
    contract (warploom.kernel.contract) instead."""
    _, imports = all_imports()
    bad = [imp.where() for imp in imports if imp.target == "warploom.kernels" and imp.source.split(".")[1:2]
           and imp.source.split(".")[1] in CORE and (imp.file, imp.target, "up") not in ALLOWED]
    assert not bad, "\n".join(bad)


def test_the_contract_and_the_host_api_import_without_mlir():
    """The kernel contract, the standard sets and the launch API load on a machine without MLIR (a meta-path hook
    refuses any mlir import, as there)."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'mlir' or name.startswith('mlir.'):\n"
            "            raise ImportError('mlir is blocked in this test')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import warploom.kernel.contract, warploom.kernels, warploom.ops, warploom.ops_attention\n"
            "import warploom.runtime.host, warploom.runtime.deal\n"
            "from warploom.kernels import AttentionSpec\n"
            "assert AttentionSpec('bf16', 128).params[0] == ('q', 'tensormap')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", ["warploom.kernel.contract", "warploom.runtime.host", "warploom.runtime.deal"])
def test_low_modules_import_nothing_above_their_layer(name):
    """The modules this layering added, checked by name (the rule above covers them too; this says which)."""
    mods, imports = all_imports()
    rank = {n: i for i, n in enumerate(LAYERS)}
    mine = rank[layer_of(name, mods[name])]
    above = [imp.where() for imp in imports if imp.source == name and rank[layer_of(imp.target, mods[imp.target])] > mine]
    assert not above, above
