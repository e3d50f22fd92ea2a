"""Stages from `cdk.json` context (`peagle:stages`): see `peagle_deploy.stages`, their one
home, which `peagle doctor --stage` reads as well."""

from __future__ import annotations

from peagle_deploy.stages import (
    CUSTOM_MODEL,
    NAG_CONTEXT_KEY,
    STAGES_CONTEXT_KEY,
    StageConfig,
    check_synthesizable_model,
    stage_configs,
)

__all__ = [
    "CUSTOM_MODEL",
    "NAG_CONTEXT_KEY",
    "STAGES_CONTEXT_KEY",
    "StageConfig",
    "check_synthesizable_model",
    "stage_configs",
]
