"""The schedule simulator runs the planned GEMMs, matches the reference, and catches broken protocols."""
import copy
from dataclasses import replace

import numpy as np
import pytest

from warploom.compile import planned_program
from warploom.kernel import Arrive, Loop, MmaWait, Wait
from warploom.kernels import GemmSpec
from warploom.reference.ops import round_to
from warploom.reference.simulate import SimulationError, simulate_gemm

SPECS = [GemmSpec("bf16", "kn", 256), GemmSpec("bf16", "nk", 128), GemmSpec("f16", "kn", 128, stages=2),
         GemmSpec("bf16", "kn", 256, schedule="persistent"), GemmSpec("f16", "nk", 128, stages=3, schedule="persistent")]


@pytest.fixture(scope="module")
def programs():
    return {spec: planned_program(spec) for spec in SPECS}


def operands(spec, m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = round_to(rng.standard_normal((m, k)), spec.elem)
    b = round_to(rng.standard_normal((k, n) if spec.b_layout == "kn" else (n, k)), spec.elem)
    return a, b, a @ (b if spec.b_layout == "kn" else b.T)


@pytest.mark.parametrize("spec", SPECS, ids=[s.lookup_id for s in SPECS])
@pytest.mark.parametrize("m,n,k", [(150, 300, 200), (1, 17, 8), (257, 129, 64), (128, 256, 456)])
def test_planned_gemm_matches_reference(programs, spec, m, n, k):
    a, b, ref = operands(spec, m, n, k)
    for seed in range(2):     # two interleavings of roles and copy landings
        c = simulate_gemm(programs[spec], a, b, seed=seed, num_ctas=3)
        assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-2
        np.testing.assert_array_equal(c, round_to(ref, spec.elem))


def edit(program, kind, change, **match):
    """A copy of the program in which every op of type `kind` whose fields equal `match` becomes `change(op)`
    (None drops it), in every role and nested loop."""
    def body(ops):
        out = []
        for op in ops:
            if isinstance(op, Loop):
                op = replace(op, body=body(op.body))
            if isinstance(op, kind) and all(getattr(op, k) == v for k, v in match.items()):
                op = change(op)
            if op is not None:
                out.append(op)
        return tuple(out)

    p = copy.deepcopy(program)
    p.roles = [replace(role, body=body(role.body)) for role in p.roles]
    return p


def mutate(program, kind, match=None, **fields):
    """A copy of the program with every op of `kind` (matching `match`) given `fields`."""
    return edit(program, kind, lambda op: replace(op, **fields), **(match or {}))


def drop(program, kind, **match):
    return edit(program, kind, lambda op: None, **match)


@pytest.mark.parametrize("broken, message", [
    # freeing the stage of this iteration while its MMAs may still read it
    (lambda p: mutate(p, Arrive, {"barrier": "empty"}, lag=0), "race"),
    # announcing fewer bytes than the copies bring: the phase completes before all data landed (a race)
    # or the byte count never balances again (a deadlock), depending on the order the copies land
    (lambda p: mutate(p, Arrive, {"barrier": "full"}, tx_bytes=16384), "race|deadlock"),
    # announcing more bytes than ever arrive: the full barrier never completes
    (lambda p: mutate(p, Arrive, {"barrier": "full"}, tx_bytes=65536), "deadlock"),
    # the producer waiting on the consumers' parity blocks on its first lap
    (lambda p: mutate(p, Wait, parity="phase"), "deadlock"),
    # storing without draining the MMA groups still in flight
    (lambda p: drop(p, MmaWait, pending=0), "in flight"),
])
def test_broken_protocols_are_caught(programs, broken, message):
    spec = GemmSpec("bf16", "kn", 256)
    a, b, _ = operands(spec, 300, 500, 640)
    with pytest.raises(SimulationError, match=message):
        for seed in range(8):
            simulate_gemm(broken(programs[spec]), a, b, seed=seed, num_ctas=2)


def test_too_many_expected_arrivals_deadlock(programs):
    spec = GemmSpec("bf16", "kn", 256)
    p = copy.deepcopy(programs[spec])
    p.barriers["empty"] = replace(p.barriers["empty"], arrivals=3)     # two consumer warpgroups can never complete it
    a, b, _ = operands(spec, 128, 256, 640)
    with pytest.raises(SimulationError, match=r"deadlock: producer\[wg0\]: waits empty"):
        simulate_gemm(p, a, b)
