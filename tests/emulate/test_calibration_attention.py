"""The emulated attention kernels against the H200 (tests/gpu/calibration/attention-run*.npz, the current one, written
on the GPU by tests/gpu/calibrate_attention.py): every standard kernel's H200 output passes the bound the emulator is held to
(warploom.emulate.judge), and the emulator's output and LSE are the GPU's, bit for bit (the tensor core, MUFU.EX2
and MUFU.LG2 as measured: warploom.emulate.tensorcore, warploom.emulate.mufu). The full table is
`python -m tests.emulate.calibration_attention`; its last output is in tests/gpu/calibration/README.md."""
import pytest

from .calibration import recordings
from .calibration_attention import compare

RUNS = recordings("attention")


@pytest.mark.parametrize("npz", RUNS, ids=[p.stem for p in RUNS])
def test_emulated_attention_stays_close_to_the_h200(npz):
    rows = compare(npz, seeds=1)
    # every standard kernel of the recording's day: 12, the 2 tall (192-row) ones since run 45, 2 polynomial ones
    # since run 53, 2 stream-K ones since run 59
    assert len({r.kernel for r in rows}) >= 12
    for r in rows:
        assert r.h200_within_bound, f"{r.kernel}: the H200's own output breaks the emulator's bound: {r.h200_problem}"
        assert r.differ == 0, f"{r.kernel}: {r.differ} of {r.total} outputs differ from the H200's bits"
        assert r.lse_diff == 0, f"{r.kernel}: LSE differs from the H200's by {r.lse_diff}"
