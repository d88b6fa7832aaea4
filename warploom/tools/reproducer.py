"""Reproducers moved to warploom/passes/reproducer.py (the pass manager and the assembler write them); these names
stay here for the tools and the tests that import them from warploom.tools."""
from warploom.passes.reproducer import (ENV, assembler_reproducer, pass_reproducer, root,  # noqa: F401
                                        write_reproducer)
