"""A mutant's verdict counts only if it came from the mutated copy: the emulator probe runs under `python -v`, and
its own import log must name the copy's warploom files and no others (tests/mutation/runner.py: run_probe,
check_ran_the_copy). Shown here on a copy and a short import, not on a probe."""
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
