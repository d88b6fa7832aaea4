"""The sm_100a attention lowering's refusals: the plan attributes it insists on (the polynomial exp2 it shares with
the sm_90a softmax: tests/unit/test_exp2_fma.py)."""
import dataclasses

import pytest

from warploom.build import planned_sm100_attention
from warploom.lowering import kernel_name
from warploom.lowering import lower_program as lower_attention


def _program(**attrs):
    p = planned_sm100_attention("bf16", 64, False)
    return dataclasses.replace(p, attrs={**p.attrs, **attrs})


@pytest.mark.parametrize("attrs, message", [
    ({"exp2_poly": 0.3}, r"exp2_poly = 0\.3.*multiple of 1/8"),
    ({"schedule": "persistent"}, r"grid|persistent"),
    ({"q_tiles": 1}, r"'correction' \[q_tiles = 1, 2, 128\] f32 \(wl-specialize\), found \(2, 2, 128\)"),
])
def test_the_lowering_refuses_what_it_does_not_build(attrs, message):
    program = _program(**attrs)
    with pytest.raises(ValueError, match=message):
        lower_attention(program, kernel_name(program))


def test_the_lowering_needs_the_fa4_attributes():
    program = _program()
    program.attrs.pop("rescale_threshold")
    with pytest.raises(ValueError, match=r"no \['rescale_threshold'\] attributes \(wl-tile\{target=sm_100a\} sets"):
        lower_attention(program, kernel_name(program))
