"""Stages from `cdk.json` context (`peagle:stages`): see `peagle_deploy.stages`, their one
home, which `peagle doctor --stage` reads as well. The CI roles' context keys (the GitHub
repository, its deploy branch and OIDC provider) are the CDK app's own."""

from __future__ import annotations

from peagle_deploy.stages import (
    CUSTOM_MODEL,
    NAG_CONTEXT_KEY,
    STAGES_CONTEXT_KEY,
    StageConfig,
    check_distinct_stages,
    check_stage_experiment,
    check_synthesizable_model,
    stage_configs,
)

GITHUB_REPO_CONTEXT_KEY = "peagle:github_repo"
GITHUB_OIDC_CONTEXT_KEY = "peagle:github_oidc_provider"
GITHUB_BRANCH_CONTEXT_KEY = "peagle:github_branch"
GITHUB_REPOSITORY_ID_CONTEXT_KEY = "peagle:github_repository_id"
GITHUB_OWNER_ID_CONTEXT_KEY = "peagle:github_repository_owner_id"

__all__ = [
    "CUSTOM_MODEL",
    "GITHUB_BRANCH_CONTEXT_KEY",
    "GITHUB_OIDC_CONTEXT_KEY",
    "GITHUB_OWNER_ID_CONTEXT_KEY",
    "GITHUB_REPOSITORY_ID_CONTEXT_KEY",
    "GITHUB_REPO_CONTEXT_KEY",
    "NAG_CONTEXT_KEY",
    "STAGES_CONTEXT_KEY",
    "StageConfig",
    "check_distinct_stages",
    "check_stage_experiment",
    "check_synthesizable_model",
    "stage_configs",
]
