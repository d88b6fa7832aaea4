"""Every mutation in mutations.py must be caught by the emulator (tests/emulate/probe.py: a check fires or the
output differs from the reference), and the unmutated copy must pass the probe.

The mutations run once per session, two at a time (one a core under pytest-xdist, on one worker: the other workers
run the rest of the suite), in a module fixture (each on its own temporary copy of the repository, probed on the
kernel families its `families` name); each test then reads its outcome. Here only the
emulator's verdict counts, so no lit or unit selection runs per mutant (the main suite runs them on the
unmutated code); `python -m tests.mutation` also runs a test selection (the lit and unit tests of the targets the
mutation's families reach: runner.selection_for) and names the first lit or unit test that fails on each mutant.
The mutations (tests/mutation/mutations.py: the lowering's core and families, the per-target
atoms, the shared layout formulas, the planners and rules) and the control take a few minutes on 2 cores (each
mutation probes the kernel families its bug can reach). Deselect with `-m "not mutation"`.
"""
from __future__ import annotations

import pytest

from .mutations import MUTATIONS
from .runner import control_ok, default_jobs, run_all

# one batch, on one pytest-xdist worker (tests/conftest.py groups the users of the module fixture; named here too)
pytestmark = [pytest.mark.mutation, pytest.mark.xdist_group("tests/mutation/test_mutations.py")]
BY_ID = {m.id: m for m in MUTATIONS}


def test_ids_are_unique():
    assert len(BY_ID) == len(MUTATIONS)


@pytest.fixture(scope="module")
def outcomes(request):
    # only the mutations this session selected (e.g. with -k), all in one parallel batch
    wanted = [item.callspec.params["mutation_id"] for item in request.session.items
              if getattr(item, "callspec", None) and "mutation_id" in item.callspec.params]
    # the emulator's verdict only; two at a time, one under pytest-xdist on 2 cores (the other worker runs the rest)
    control, results = run_all([BY_ID[i] for i in wanted], (), jobs=default_jobs())
    return control, {o.id: o for o in results}


def test_control_passes(outcomes):
    control, _ = outcomes
    assert control.emulator["ok"], f"the emulator fails the unmutated copy: {control.emulator}"


@pytest.mark.parametrize("mutation_id", list(BY_ID))
def test_mutation_is_caught(outcomes, mutation_id):
    control, results = outcomes
    assert control_ok(control), "the control fails, so no mutation result means anything"
    outcome = results[mutation_id]
    assert outcome.emulator_caught, (f"the emulator misses mutation {mutation_id} ({BY_ID[mutation_id].description}): "
                                     f"{outcome.emulator}")
