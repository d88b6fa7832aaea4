"""Session fixtures of the oracle tests: the standard kernels' cases (lowered once) and the compiled oracle."""
from __future__ import annotations

import pytest

from .compare import Where, instr_sweep, sm90_smem_sweep, sm100_smem_sweep, with_start_addresses
from .cutlass_headers import InstrCase, Oracle, OracleUnavailable, tmem_atoms_in_headers
from .kernel_cases import collect


@pytest.fixture(scope="session")
def kernel_cases():
    return collect()


@pytest.fixture(scope="session")
def instr_cases(kernel_cases):
    """(cases, where): the kernels' instruction descriptors first, then the field sweep."""
    labels: dict = {}
    for values, users in kernel_cases.descriptors["Sm100InstrDescriptor"].items():
        labels.setdefault(InstrCase(**dict(values)), set()).update(users)
    cases = list(labels) + [c for c in instr_sweep() if c not in labels]
    return cases, Where(labels)


def _smem_cases(kernel_cases, cls_name, target, sweep):
    """The kernels' smem descriptors (recorded with start address 0: their static bits), each also at every
    16-byte-aligned offset of its kernel's smem plan; then the field sweep."""
    labels: dict = {}
    for values, users in kernel_cases.descriptors[cls_name].items():
        for case in with_start_addresses([dict(values)], kernel_cases.start_addresses.get(target, ())):
            labels.setdefault(tuple(sorted(case.items())), set()).update(users)
    return [dict(k) for k in labels] + sweep, Where(labels)


@pytest.fixture(scope="session")
def sm100_smem_cases(kernel_cases):
    return _smem_cases(kernel_cases, "Sm100SmemDescriptor", "sm_100a", sm100_smem_sweep())


@pytest.fixture(scope="session")
def sm90_smem_cases(kernel_cases):
    return _smem_cases(kernel_cases, "WgmmaSmemDescriptor", "sm_90a", sm90_smem_sweep())


@pytest.fixture(scope="session")
def oracle(tmp_path_factory, instr_cases, kernel_cases):
    cases, _ = instr_cases
    try:
        atoms = tmem_atoms_in_headers()
        return Oracle(tmp_path_factory.mktemp("cutlass_oracle"), cases, atoms)
    except OracleUnavailable as e:
        # the test extra installs all of it and CI has a C++ compiler: missing is a failure, not a skip
        pytest.fail(f"the CUTLASS oracle cannot be built: {e}")
