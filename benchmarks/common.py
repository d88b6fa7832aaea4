"""What every benchmark records: the commit it measured (imports nothing but the standard library)."""
from __future__ import annotations

import os
import subprocess


def commit() -> str:
    """WARPLOOM_COMMIT when set (the device machine's copy may carry stale git metadata), else git's HEAD."""
    if os.environ.get("WARPLOOM_COMMIT"):
        return os.environ["WARPLOOM_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(__file__)).stdout.strip() or os.environ.get("WARPLOOM_COMMIT", "?")
    except OSError:
        return os.environ.get("WARPLOOM_COMMIT", "?")
