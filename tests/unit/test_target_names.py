"""No code outside warploom/targets tells targets apart by comparing their names: it asks the Target record's
capabilities (`accumulator`, `has_tmem`, `hardware_here`, `targets.DEFAULT`). Read with `ast`: a comparison
(==, !=, in, not in) with a target's name as a literal on either side, alone or in a tuple, list or set, fails."""
from __future__ import annotations

import ast
from pathlib import Path

from warploom import targets

PACKAGE = Path(__file__).resolve().parents[2] / "warploom"


def _names_in(node) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & set(targets.TARGETS)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names_in(e) for e in node.elts)) if node.elts else set()
    return set()


def comparisons(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if (root / "targets") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Compare):
                names = set().union(*(_names_in(x) for x in [node.left, *node.comparators]))
                if names:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}: compares with {sorted(names)}")
    return found


def test_no_target_name_comparisons_outside_targets():
    found = comparisons()
    assert not found, ("ask the Target record (accumulator, has_tmem, hardware_here, targets.DEFAULT) instead of "
                       "comparing target names:\n  " + "\n  ".join(found))


def test_the_check_sees_a_comparison(tmp_path):
    pkg = tmp_path / "warploom"
    (pkg / "targets").mkdir(parents=True)
    (pkg / "targets" / "x.py").write_text('ok = t == "sm_90a"\n')                  # targets/ may
    (pkg / "a.py").write_text('if target != "sm_100a":\n    pass\nb = t in ("sm_90a", "x")\n')
    assert comparisons(pkg) == ["warploom/a.py:1: compares with ['sm_100a']",
                                "warploom/a.py:3: compares with ['sm_90a']"]
