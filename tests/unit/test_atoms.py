"""The target-neutral lowering on a target it has no atoms for: every family stops at the first atom the target
lacks, with the atom's name (docs/design.md, "Adding a target"); and atom sets are picked by capability."""
from __future__ import annotations

import dataclasses

import pytest

from warploom import targets
from warploom.build import planned_attention_program, planned_program
from warploom.kernel.contract import GemmSpec
from warploom.lowering import atoms, kernel_name, lower_program
from warploom.lowering.atoms import ATOM_NAMES, AtomMissing, Atoms, atoms_for


class StubAtoms(Atoms):
    """A third target's atom set as a newcomer starts it: where the accumulator lives, who issues, nothing else."""
    accumulator = "regs"
    issue = "warpgroup"


@pytest.fixture
def stub_target(monkeypatch):
    """`sm_stub`: sm_90a's numbers, its accumulators in a place only StubAtoms claims."""
    stub = dataclasses.replace(targets.get("sm_90a"), name="sm_stub",
                               mma_sources={"a": ("smem",), "b": ("smem",), "acc": ("stub",)})
    monkeypatch.setattr(targets, "TARGETS", {**targets.TARGETS, "sm_stub": stub})
    monkeypatch.setitem(atoms.ATOM_SETS, "stub", StubAtoms)
    return stub


def _on(program, target: str):
    return dataclasses.replace(program, target=target)


@pytest.mark.parametrize("family", ["gemm", "attention"])
def test_neutral_lowering_stops_at_the_first_missing_atom(stub_target, family):
    program = (planned_program(GemmSpec("bf16", "kn", 128, 4)) if family == "gemm"
               else planned_attention_program("bf16", 64))
    program = _on(program, "sm_stub")
    assert isinstance(atoms_for(stub_target), StubAtoms)
    with pytest.raises(AtomMissing) as e:
        lower_program(program, kernel_name(program))
    message = str(e.value)
    atom = message.split("'")[1]
    assert atom in ATOM_NAMES and "sm_stub" in message and "StubAtoms" in message
    assert "not implemented" in message and "warploom/lowering/atoms/" in message


def test_each_missing_atom_names_itself():
    stub = Atoms(targets.get("sm_90a"))
    for name in ATOM_NAMES:
        with pytest.raises(AtomMissing, match=f"atom '{name}' is not implemented for target sm_90a"):
            getattr(stub, name)


def test_a_target_with_no_atom_set_is_refused(monkeypatch):
    bare = dataclasses.replace(targets.get("sm_90a"), name="sm_bare", mma_sources={"acc": ("nowhere",)})
    with pytest.raises(AtomMissing, match=r"sm_bare keeps MMA accumulators in \['nowhere'\].*register it in ATOM_SETS"):
        atoms_for(bare)


@pytest.mark.parametrize("target, placement", [("sm_90a", "regs"), ("sm_100a", "tmem")])
def test_atoms_are_picked_by_where_the_accumulator_lives(target, placement):
    t = targets.get(target)
    assert placement in t.mma_sources["acc"]
    assert atoms_for(t).accumulator == placement
