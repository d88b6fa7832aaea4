"""The mutation runner keeps a passing control per content of the copied files (issue 37): a second run on the same
files skips the unmutated control (302 of 477 s of `python -m tests.mutation -k swap`); a changed file, a failing
control or WARPLOOM_MUTATION_CACHE=0 runs it again. The probes are stubbed: nothing is emulated here."""
import pytest

from tests.mutation import runner


@pytest.fixture
def stubbed(monkeypatch, tmp_path):
    runs = []

    def run_one(m, selection):
        runs.append(m.id if m else "control")
        return runner.Outcome(m.id if m else "control", True, None, 1.0, "out", {"ok": m is None, "check": "x"})
    monkeypatch.setattr(runner, "run_one", run_one)
    monkeypatch.setattr(runner, "CONTROL_CACHE", tmp_path / "cache")
    monkeypatch.delenv("WARPLOOM_MUTATION_CACHE", raising=False)
    return runs


def test_the_control_runs_once_per_content(stubbed, monkeypatch):
    control, _ = runner.run_all([], ())
    assert stubbed == ["control"] and runner.control_ok(control)
    again, _ = runner.run_all([], ())
    assert stubbed == ["control"] and runner.control_ok(again) and "kept from a run on the same files" in again.output
    monkeypatch.setenv("WARPLOOM_MUTATION_CACHE", "0")
    runner.run_all([], ())
    assert stubbed == ["control", "control"]
    monkeypatch.delenv("WARPLOOM_MUTATION_CACHE")
    monkeypatch.setattr(runner, "copy_key", lambda selection: "another")     # a file changed
    runner.run_all([], ())
    assert stubbed == ["control", "control", "control"]


def test_a_failing_control_is_not_kept(stubbed, monkeypatch):
    monkeypatch.setattr(runner, "control_ok", lambda control: False)
    runner.run_all([], ())
    runner.run_all([], ())
    assert stubbed == ["control", "control"]


def test_the_key_follows_the_files(monkeypatch, tmp_path):
    key = runner.copy_key(())
    assert key == runner.copy_key(()) and key != runner.copy_key(("tests/lit",))
