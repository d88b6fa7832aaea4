"""Registers the `mutation` marker of the mutation tests (see test_mutations.py)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "mutation: applies deliberate bugs to a copy of warploom and runs CPU tests "
                                       "against it (about 5 minutes with 2 jobs, 10 with one: one emulator probe per mutation)")
