"""The `wl-*` passes: one module per pass, registered by importing it here."""
from . import fuse, lower_sm90, lower_sm100, pipeline, plan_barriers, plan_smem, plan_tmem, specialize, tile, verify  # noqa: F401,E501
from .manager import PassRecord, parse_pipeline, run_passes, run_pipeline
from .registry import PASSES, PIPELINES, PassError, PassFailed, PassInfo, pipeline_for, register

__all__ = ["PASSES", "PIPELINES", "PassError", "PassFailed", "PassInfo", "PassRecord", "parse_pipeline",
           "pipeline_for", "register", "run_passes", "run_pipeline"]
