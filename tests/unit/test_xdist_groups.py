"""The suite runs on a worker per core (pytest-xdist, pyproject.toml's addopts); tests/conftest.py keeps the tests
that share work on one worker: a module- or session-scoped fixture is built once, not once per worker (the mutation
batch, the oracle's CUTLASS build), and lit runs once. Shown here on a small suite of its own under the real
tests/conftest.py, with two workers: pytest-xdist's own loadgroup silently stopped grouping under pytest 9.2
(pytest-dev/pytest-xdist#1386), which this would have caught."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist")

TESTS = Path(__file__).resolve().parents[1]

SUITE = '''
import os, time
import pytest

def log(what):
    with open(os.environ["WL_LOG"], "a") as f:
        f.write(f"{what} {os.environ.get('PYTEST_XDIST_WORKER', 'main')}\\n")

@pytest.fixture(scope="module")
def built():
    log("built")

@pytest.mark.parametrize("i", range(6))
def test_shares_the_build(built, i):
    log("shares")
    time.sleep(0.1)

@pytest.mark.parametrize("i", range(6))
def test_alone(i):
    log("alone")
    time.sleep(0.1)
'''


def test_a_module_fixture_is_built_once_under_two_workers(tmp_path):
    shutil.copy(TESTS / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_suite.py").write_text(SUITE)
    log = tmp_path / "log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["WL_LOG"] = str(log)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist",
                           "loadgroup", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [line.split() for line in log.read_text().splitlines()]
    built = [worker for what, worker in runs if what == "built"]
    assert len(built) == 1, runs                                                  # built once
    assert {worker for what, worker in runs if what == "shares"} == set(built), runs   # its users on that worker
    assert {worker for _, worker in runs} == {"gw0", "gw1"}, runs                 # the rest spread
