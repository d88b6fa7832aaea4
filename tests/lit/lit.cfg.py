# lit configuration for warploom: each test is an .mlir file with RUN lines.
import os
import sys

import lit.formats

config.name = "warploom"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["Inputs"]

repo = os.path.dirname(os.path.dirname(config.test_source_root))
python = sys.executable
config.environment["PYTHONPATH"] = repo + os.pathsep + os.environ.get("PYTHONPATH", "")
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
config.substitutions.append(("warploom-opt", f"{python} -m warploom.tools.opt"))
config.substitutions.append(("%warploom", f"{python} -m warploom.tools.cli"))
config.substitutions.append(("%python", python))
# The filecheck package installs `filecheck`; call it through this Python so the venv need not be on PATH.
config.substitutions.append(("FileCheck", f"{python} -m filecheck"))
