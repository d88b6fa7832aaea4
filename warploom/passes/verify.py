"""wl-verify: check the shape and element-type rules of every graph-level wl op."""
from warploom.dialect.verify import verify_module

from .registry import PassFailed, register


@register("wl-verify", "Check the shape rules of wl ops (K of matmul, heads of attention, ...)")
def run(module):
    if verify_module(module):   # one diagnostic per bad op, already emitted
        raise PassFailed()
