"""The sm_100a attention lowering's own arithmetic and refusals: the polynomial exp2 (its error against float64,
measured here, is what docs/attention-sm100.md quotes) and the plan attributes the lowering insists on."""
import dataclasses

import numpy as np
import pytest

from warploom.build import planned_sm100_attention
from warploom.lowering.sm100_attention import (POLY_DEGREE, exp2_poly_coefficients, exp2_poly_reference, kernel_name,
                                               lower_attention)


def test_the_polynomial_fits_2_to_the_f_within_2e_7():
    f = np.linspace(0.0, 1.0, 200001)
    cs = np.asarray(exp2_poly_coefficients(), np.float64)
    assert len(cs) == POLY_DEGREE + 1 == 6
    rel = np.abs(np.polyval(cs[::-1], f) / np.exp2(f) - 1.0)
    assert rel.max() < 2e-7


def test_exp2_poly_over_the_softmax_range():
    """x = s * scale_log2 - max: from far below (masked: -inf) up to the rescaling threshold (+8). The f32 Horner
    steps and the exponent insertion keep the relative error within 4e-7 where the result is normal; below -126
    the result is 0 (as ex2.approx.ftz flushes), and -inf gives 0."""
    x = np.concatenate([np.linspace(-126.0, 9.0, 400001), [-0.0, 0.0, 1.0, 8.0, -1.0]]).astype(np.float32)
    y = exp2_poly_reference(x).astype(np.float64)
    rel = np.abs(y / np.exp2(x.astype(np.float64)) - 1.0)
    assert rel.max() < 4e-7, float(rel.max())
    assert (exp2_poly_reference(np.array([-126.5, -200.0, -np.inf], np.float32)) == 0).all()


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
