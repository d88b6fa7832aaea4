"""The oracle can fail: every field of warploom's descriptor encoders, moved by one bit, is caught.

warploom/layout/descriptors.py is read as source and mutated in memory (the file is never written): in each
descriptor class's encode(), every term of the OR that builds the word is moved one bit up, and one bit down
where it can go down (a term at bit 0 is shifted to bit 1); in each decode(), every field read `_bits(word, lo,
width)` is moved likewise; each (lo, width) of the tables of used bits that the decoders check reserved bits
against is moved likewise. The mutated module is executed under another name and its classes go through the
same comparisons as test_cutlass_oracle.py; each mutant must disagree with CUTLASS somewhere.

If descriptors.py is rewritten so that these sites are gone (no OR of shifted fields in an encode(), no
`_bits` reads in a decode()), `test_mutation_sites_found` fails: re-anchor `mutation_sites` below to the new
shape of the encoders rather than dropping the check.
"""
from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

import pytest

from warploom.layout import descriptors

from .compare import check_all_reserved, check_instr, check_sm90_smem, check_sm100_smem

SOURCE = Path(descriptors.__file__)
CLASSES = ("Sm100InstrDescriptor", "Sm100SmemDescriptor", "WgmmaSmemDescriptor")
FIELD_TABLES = ("_INSTR_FIELDS", "_SM100_FIELDS", "_WGMMA_FIELDS")


def _or_terms(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _or_terms(node.left) + _or_terms(node.right)
    return [node]


def _method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    return None


def _encode_terms(tree, cls):
    """The terms of the OR returned by cls.encode()."""
    fn = _method(tree, cls, "encode")
    if fn is None:
        return []
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.BitOr):
            return _or_terms(node.value)
    return []


def _decode_reads(tree, cls):
    """The `_bits(word, lo, width)` calls of cls.decode(), in source order."""
    fn = _method(tree, cls, "decode")
    if fn is None:
        return []
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "_bits" and len(n.args) == 3 and isinstance(n.args[1], ast.Constant)]
    return sorted(calls, key=lambda n: (n.lineno, n.col_offset))


def _field_table(tree, name):
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, ast.List):
                return [e for e in node.value.elts if isinstance(e, ast.Tuple) and len(e.elts) == 2
                        and isinstance(e.elts[0], ast.Constant)]
    return []


def mutation_sites() -> list[tuple[str, str, int, int]]:
    """(id, where, index, delta): where is 'encode:<cls>', 'decode:<cls>' or 'table:<name>'."""
    tree = ast.parse(SOURCE.read_text())
    sites = []
    for cls in CLASSES:
        for i, term in enumerate(_encode_terms(tree, cls)):
            text = ast.unparse(term)
            shift = term.right.value if (isinstance(term, ast.BinOp) and isinstance(term.op, ast.LShift)
                                         and isinstance(term.right, ast.Constant)) else 0
            for delta in (+1, -1):
                if shift + delta >= 0:
                    sites.append((f"{cls}.encode: {text} at bit {shift + delta}", f"encode:{cls}", i, delta))
        for i, call in enumerate(_decode_reads(tree, cls)):
            lo = call.args[1].value
            for delta in (+1, -1):
                if lo + delta >= 0:
                    sites.append((f"{cls}.decode: {ast.unparse(call)} from bit {lo + delta}", f"decode:{cls}", i,
                                  delta))
    for name in FIELD_TABLES:
        for i, entry in enumerate(_field_table(tree, name)):
            lo = entry.elts[0].value
            for delta in (+1, -1):
                if lo + delta >= 0:
                    sites.append((f"{name}: {ast.unparse(entry)} from bit {lo + delta}", f"table:{name}", i, delta))
    return sites


def mutant_module(where: str, index: int, delta: int) -> types.ModuleType:
    tree = ast.parse(SOURCE.read_text())
    kind, name = where.split(":")
    if kind == "encode":
        term = _encode_terms(tree, name)[index]
        if isinstance(term, ast.BinOp) and isinstance(term.op, ast.LShift) and isinstance(term.right, ast.Constant):
            term.right = ast.Constant(term.right.value + delta)
        else:                                   # a field at bit 0: shift it up
            assert delta == 1
            replacement = ast.BinOp(left=ast.copy_location(ast.parse(ast.unparse(term), mode="eval").body, term),
                                    op=ast.LShift(), right=ast.Constant(1))
            for node in ast.walk(tree):
                for field_name, value in ast.iter_fields(node):
                    if value is term:
                        setattr(node, field_name, replacement)
    elif kind == "decode":
        call = _decode_reads(tree, name)[index]
        call.args[1] = ast.Constant(call.args[1].value + delta)
    else:
        entry = _field_table(tree, name)[index]
        entry.elts[0] = ast.Constant(entry.elts[0].value + delta)
    ast.fix_missing_locations(tree)
    module_name = "warploom.layout._descriptors_mutant"
    module = types.ModuleType(module_name)
    module.__file__ = str(SOURCE)
    sys.modules[module_name] = module           # dataclasses look the module up while building the classes
    try:
        exec(compile(tree, str(SOURCE), "exec"), module.__dict__)
    finally:
        del sys.modules[module_name]
    return module


# Mutants that change nothing a descriptor word can show, with the reason.
EQUIVALENT = {
    "_SM100_FIELDS: (46, 3) from bit 45":
        "bits [46,49) hold the fixed version 0b001, which decode() compares whole: with the entry at [45,48) bit 48 "
        "is still refused (now as reserved), and bit 45 belongs to SBO's entry anyway",
}
ALL_SITES = mutation_sites()
SITES = [s for s in ALL_SITES if s[0] not in EQUIVALENT]


def test_mutation_sites_found():
    """Every class has an encode() OR of fields and a decode() of `_bits` reads to mutate."""
    for cls in CLASSES:
        assert any(w == f"encode:{cls}" for _, w, _, _ in SITES), \
            f"{cls}.encode() no longer returns an OR of shifted fields: re-anchor tests/oracle/test_oracle_mutations.py"
        assert any(w == f"decode:{cls}" for _, w, _, _ in SITES), \
            f"{cls}.decode() no longer reads fields with _bits(): re-anchor tests/oracle/test_oracle_mutations.py"


@pytest.mark.parametrize("where, index, delta", [s[1:] for s in SITES], ids=[s[0] for s in SITES])
def test_moved_field_is_caught(where, index, delta, oracle, instr_cases, sm100_smem_cases, sm90_smem_cases):
    mutant = mutant_module(where, index, delta)
    cases, instr_where = instr_cases
    bad = check_instr(oracle, mutant.Sm100InstrDescriptor, cases, instr_where, mutant.kind_of, limit=1)
    bad += check_sm100_smem(oracle, mutant.Sm100SmemDescriptor, *sm100_smem_cases, limit=1)
    bad += check_sm90_smem(oracle, mutant.WgmmaSmemDescriptor, *sm90_smem_cases, limit=1)
    bad += check_all_reserved(oracle, mutant.Sm100InstrDescriptor, mutant.Sm100SmemDescriptor,
                              mutant.WgmmaSmemDescriptor)
    assert bad, f"mutant {where} #{index} ({delta:+d} bit) agrees with CUTLASS everywhere: the oracle misses it"
