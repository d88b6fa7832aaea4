"""Mutation testing of the compiler: deliberate bugs applied to a copy of `warploom`, each of which the CPU tests must catch.

mutations.py lists the bugs, runner.py applies one to a temporary copy and runs
a test selection against it, `python -m tests.mutation` prints the report and
test_mutations.py asserts (under pytest) that every bug is caught.
"""
