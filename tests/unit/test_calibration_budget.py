"""The calibration folder's budget (issue 37, acceptance 6): tests/gpu/calibration holds at most 20 MB, one current
recording per kernel family, compressed, and the replay tests (tests/emulate/test_calibration*.py) read exactly
those. A recording's family is its file name without the run number (tests/emulate/calibration.py: RECORDING,
family); a superseded recording leaves the tree when its successor comes (git history keeps it;
tests/gpu/calibration/README.md says where). Nothing is emulated here."""
import json
import zipfile

import numpy as np
import pytest

from tests.emulate import test_calibration, test_calibration_attention
from tests.emulate.calibration import BUDGET_BYTES, CALIBRATION, family
from tests.emulate.calibration_inputs import case_inputs, digest

FILES = sorted(p for p in CALIBRATION.rglob("*") if p.is_file())
RECORDINGS = [p for p in FILES if p.suffix == ".npz"]


def test_the_folder_is_within_its_budget():
    total = sum(p.stat().st_size for p in FILES)
    assert total <= BUDGET_BYTES, (f"{CALIBRATION} holds {total / 1e6:.1f} MB, over its {BUDGET_BYTES / 1e6:.0f} MB: "
                                   "remove the superseded recordings (git history keeps them)")


def test_one_recording_per_family():
    by_family = {}
    for p in RECORDINGS:
        by_family.setdefault(family(p), []).append(p.name)       # ValueError for a name outside the rule
    twice = {f: names for f, names in by_family.items() if len(names) > 1}
    assert not twice, f"more than one recording of a kernel family (keep the newest; git history keeps the rest): {twice}"
    assert {"run", "attention-run"} <= set(by_family), by_family


def test_the_family_is_the_name_without_the_run_number():
    assert [family(n) for n in ("run26.npz", "run37-cluster.npz", "run49-swap.npz", "attention-run59.npz")] == [
        "run", "run-cluster", "run-swap", "attention-run"]
    assert family("run27.npz") == family("run26.npz") and family("run50-cluster.npz") != family("run26.npz")
    for name in ("run.npz", "run26-old.npy", "superseded run19.npz", "Run26.npz"):
        with pytest.raises(ValueError):
            family(name)


def test_the_replay_tests_read_exactly_the_recordings():
    replayed = list(test_calibration.RUNS) + list(test_calibration_attention.RUNS)
    assert sorted(replayed) == RECORDINGS and len(set(replayed)) == len(replayed)


@pytest.mark.parametrize("npz", RECORDINGS, ids=[p.stem for p in RECORDINGS])
def test_recordings_are_compressed(npz):
    with zipfile.ZipFile(npz) as z:
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in z.infolist()), f"{npz.name}: np.savez_compressed"


@pytest.mark.parametrize("npz", test_calibration.RUNS, ids=[p.stem for p in test_calibration.RUNS])
def test_gemm_recordings_keep_no_inputs(npz):
    """A GEMM recording keeps its outputs as 16-bit patterns and no inputs: tests/emulate/calibration_inputs.py makes
    them again, the ones the GPU was given (each case's hash)."""
    data = np.load(npz)
    manifest = json.loads(str(data["manifest"]))
    assert set(data.files) == {"manifest", "inputs"} | {f"{case['key']}_c" for case in manifest}
    made = case_inputs(manifest, json.loads(str(data["inputs"]))["seed"])
    for case in manifest:
        c = data[f"{case['key']}_c"]
        assert c.dtype == np.uint16 and c.shape == (case["M"], case["N"]), case["key"]
        assert digest(*made[case["key"]]) == case["inputs_sha256"], f"{npz.name} {case['key']}: inputs differ"
