"""The `wl-*` passes: one module per pass, registered by importing it here."""
from . import fuse, verify  # noqa: F401  (registration side effect)
from .pipeline import PassRecord, parse_pipeline, run_passes
from .registry import PASSES, PIPELINES, PassError, PassFailed, PassInfo, pipeline_for, register

__all__ = ["PASSES", "PIPELINES", "PassError", "PassFailed", "PassInfo", "PassRecord", "parse_pipeline",
           "pipeline_for", "register", "run_passes"]
