"""What `python -m tests.mutation` runs for each mutation (tests/mutation/runner.py): the emulator probe on the kernel
families the mutation names, then the tests of the targets those families reach (selection_for), the control all of
them."""
from tests.emulate.probe import FAMILIES
from tests.mutation import runner
from tests.mutation.mutations import MUTATIONS


def test_every_named_family_is_one_the_probe_runs():
    assert {f for m in MUTATIONS for f in m.families} <= set(FAMILIES)
    assert runner.SM100_FAMILIES <= set(FAMILIES)


def test_a_mutation_runs_the_tests_of_the_targets_its_families_reach():
    by_id = {m.id: m for m in MUTATIONS}
    assert runner.selection_for(by_id["producer-phase-flip"]) == runner.SELECTION              # every family
    assert runner.selection_for(by_id["fa4-shared-kv-slot"]) == runner.SM100_SELECTION         # sm_100a only
    assert runner.selection_for(by_id["attn-gqa-kv-head"]) == runner.SM90_SELECTION            # sm_90a only
    assert runner.selection_for(by_id["fa4-poly-coefficient"]) == runner.SELECTION             # both
    assert set(runner.SELECTION) == set(runner.SM90_SELECTION) | set(runner.SM100_SELECTION)
    for path in runner.SELECTION:
        assert (runner.REPO / path).exists(), path
