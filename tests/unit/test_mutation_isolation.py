"""A mutant's verdict counts only if it came from the mutated copy: the emulator probe runs in a fresh fork of a server
that has imported numpy, ml_dtypes and MLIR only, and the warploom and tests modules it loaded must all be the copy's
files (tests/mutation/runner.py: run_probe, check_probe_imports); before a test selection runs, `python -v` import logs
show that `import warploom` and warploom-opt load the copy (check_isolation, check_ran_the_copy). Shown here on a copy:
a short import, and the probe of its cheapest family."""
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mutation import runner


def test_an_import_log_must_name_the_copy_only(tmp_path):
    root = runner.make_copy(tmp_path)
    proc = subprocess.run([sys.executable, "-v", "-c", "import warploom.kernels"], cwd=root,
                          env=runner.env_for(root), capture_output=True, text=True, check=True)
    files = runner.warploom_files_in(proc.stderr)
    assert files and all(f.startswith(str(root)) for f in files)
    runner.check_ran_the_copy("the import", proc.stderr, root)
    with pytest.raises(runner.HarnessError, match="does not run the copy"):       # the repository's own files
        runner.check_ran_the_copy("the import", proc.stderr.replace(str(root), str(runner.REPO)), root)
    with pytest.raises(runner.HarnessError, match="no warploom files"):           # no log at all
        runner.check_ran_the_copy("the import", "", Path(root))


def test_the_probe_runs_the_copy_and_says_what_it_loaded(tmp_path):
    root = runner.make_copy(tmp_path)
    verdict = runner.run_probe(root, "the copy", ("swap",))
    assert verdict["ok"], verdict
    (root / "tests" / "emulate" / "probe.py").unlink()        # no probe in the copy: nothing may run instead of it
    with pytest.raises(runner.HarnessError, match="does not run the copy|exited"):
        runner.run_probe(root, "the copy", ("swap",))


def test_a_probe_that_loaded_other_files_does_not_count(tmp_path):
    files = [f"{tmp_path}/warploom/__init__.py", f"{tmp_path}/tests/emulate/probe.py"]
    runner.check_probe_imports("the probe", files, tmp_path)
    with pytest.raises(runner.HarnessError, match="does not run the copy"):                 # the repository's own
        runner.check_probe_imports("the probe", files + [f"{runner.REPO}/warploom/kernels.py"], tmp_path)
    with pytest.raises(runner.HarnessError, match="no warploom files"):                     # nothing loaded
        runner.check_probe_imports("the probe", [], tmp_path)
