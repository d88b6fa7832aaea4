"""Hardware facts as data: one `Target` per GPU architecture warploom compiles for.

Every limit a planner, a layout or a lowering checks against (shared memory,
registers, MMA shapes, TMA box limits, Tensor Memory geometry) is a field here,
so a number is written once and every reader names where it came from.
`get("sm_90a")` returns the Hopper target, `get("sm_100a")` the Blackwell one.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

# the record types, re-exported: `targets.Target`, `targets.MmaShapes` ...
from warploom.targets.record import (ELEMENT_BITS, TMA_LIMITS, MmaShapes, Target, TmaLimits,  # noqa: F401
                                     TmemGeometry)


def get(name: str) -> Target:
    """The target called `name` ("sm_90a", "sm_100a")."""
    if name not in TARGETS:
        raise ValueError(f"unknown target {name!r}; known targets: {', '.join(sorted(TARGETS))}")
    return TARGETS[name]


def for_capability(major: int, minor: int) -> Target | None:
    """The target whose kernels run on a GPU of compute capability major.minor (None: warploom has none)."""
    return next((t for t in TARGETS.values() if t.compute_capability == (major, minor)), None)


def of_kernel(attrs: Mapping) -> Target:
    """The target a `wl.kernel` is planned for, from its attributes: its `target` (wl-tile{target=...} sets it),
    else the default target."""
    return get(attrs.get("target", DEFAULT))


from warploom.targets.sm90 import SM90  # noqa: E402
from warploom.targets.sm100 import SM100  # noqa: E402

TARGETS: Mapping[str, Target] = MappingProxyType({SM90.name: SM90, SM100.name: SM100})
# the target of a kernel planned without one (wl-tile, the CLI, the launch API's spec defaults); its kernels' names
# carry no target suffix
DEFAULT = SM90.name
