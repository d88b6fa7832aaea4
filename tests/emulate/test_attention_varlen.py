"""Packed variable-length batches (issue 34 item 5; warploom.ops.attention_varlen's kernels), emulated on both
targets: q [Tq, Hq, D], k and v [Tk, Hkv, D] hold sequences of mixed lengths one after another (cu_seqlens), read
and written through the ragged tensor maps, each sequence judged alone against the float64 reference of one batch
(causal bottom-right per sequence, GQA with 1 < Hkv < Hq, Sq != Sk, a sequence of one query, a sequence with no
query, one with no key: its rows 0 and LSE -inf). The LSE is [Hq, Tq]; every packed output row is written exactly
once (out starts NaN) and nothing past the packed rows. The sm_100a kernels have never run on hardware here: this,
ptxas and the SASS checks are how they are verified.
"""
import numpy as np
import pytest

from warploom.build import planned_attention_program, planned_sm100_attention
from warploom.emulate import emulate_attention_varlen
from warploom.emulate.judge import judge_attention
from warploom.reference.ops import attention_varlen as reference_varlen
from warploom.reference.ops import round_to
from warploom.score import trace_mods


def window_per_sequence(b, h, q_idx, kv_idx, size):     # a left window; sequence 1 sees only its first 4 keys
    return (q_idx - kv_idx <= size) & ((b != 1) | (kv_idx < 4))


# (target, elem, D, causal, mask, query lengths, key lengths, Hq, Hkv)
CASES = [
    ("sm_90a", "bf16", 64, True, None, [5, 130, 1, 0, 70], [9, 130, 33, 3, 70], 4, 2),
    ("sm_90a", "f16", 128, False, None, [40, 17, 129], [0, 200, 50], 2, 1),
    ("sm_90a", "bf16", 64, True, window_per_sequence, [150, 60, 90], [150, 60, 100], 2, 2),
    ("sm_100a", "bf16", 64, True, None, [5, 130, 1, 0, 70], [9, 130, 33, 3, 70], 4, 2),
    ("sm_100a", "f16", 128, False, None, [40, 17, 129], [0, 200, 50], 2, 1),
    ("sm_100a", "bf16", 64, True, window_per_sequence, [300, 60], [300, 60], 2, 1),
]
IDS = [f"{t}-{e}-d{d}-{'causal' if c else 'full'}{'-window' if m else ''}-{len(lq)}seqs-h{hq}/{hkv}"
       for t, e, d, c, m, lq, lk, hq, hkv in CASES]


def starts(lengths):
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_packed_sequences_match_the_reference(case):
    target, elem, d, causal, mask, lq, lk, hq, hkv = case
    scalars = {"size": 40} if mask else None
    mods = trace_mods(None, mask, scalars)[0] if mask else None
    plan = planned_attention_program if target == "sm_90a" else planned_sm100_attention
    program = plan(elem, d, causal, varlen=True, **({"mods": mods} if mods else {}))
    cu_q, cu_k = starts(lq), starts(lk)
    rng = np.random.default_rng(sum(lq) + sum(lk))
    q = round_to(rng.standard_normal((cu_q[-1], hq, d)) * 1.5, elem)
    k = round_to(rng.standard_normal((cu_k[-1], hkv, d)) * 1.5, elem)
    v = round_to(rng.standard_normal((cu_k[-1], hkv, d)), elem)
    out, lse = emulate_attention_varlen(q, k, v, cu_q, cu_k, causal, program=program, scalars=scalars)
    assert out.shape == q.shape and lse.shape == (hq, cu_q[-1])
    assert not np.isnan(out.astype(np.float64)).any() and not np.isnan(lse).any()
    for i in range(len(lq)):
        rq, rk = slice(cu_q[i], cu_q[i + 1]), slice(cu_k[i], cu_k[i + 1])
        if lq[i] == 0:
            continue
        if lk[i] == 0:                  # no key: exactly 0, LSE -inf
            assert (out[rq] == 0).all() and np.isneginf(lse[:, rq]).all()
            continue
        verdict = judge_attention(out[None, rq], lse[None, :, rq], q[None, rq], k[None, rk], v[None, rk], elem, causal,
                                  "bshd", mods=mods, scalars=scalars, batch0=i)
        assert verdict.ok, (i, verdict.problem)
    # the sequences are kept apart: attending over the whole packed batch as one sequence gives another answer
    ref = reference_varlen(q, k, v, cu_q, cu_k, causal=causal, mods=mods, scalars=scalars)
    whole = reference_varlen(q, k, v, [0, cu_q[-1]], [0, cu_k[-1]], causal=causal, mods=mods, scalars=scalars)
    assert np.abs(ref - whole).max() > 0.05
    assert np.abs(out.astype(np.float64) - ref).max() < 0.05


def test_one_kernel_for_every_batch_composition():
    """The starts are kernel arguments: the same program runs two compositions of the same packed rows."""
    program = planned_attention_program("bf16", 64, True, varlen=True)
    rng = np.random.default_rng(11)
    q, k, v = (round_to(rng.standard_normal((150, 1, 64)), "bf16") for _ in range(3))
    for lengths in ([150], [20, 100, 30]):
        cu = starts(lengths)
        out, lse = emulate_attention_varlen(q, k, v, cu, cu, True, program=program)
        ref = reference_varlen(q, k, v, cu, cu, causal=True)
        assert np.abs(out.astype(np.float64) - ref).max() < 0.03, lengths
