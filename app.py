#!/usr/bin/env python3
"""CDK app: one PeagleStack per stage of cdk.json's `peagle:stages` context.

Only wiring: what each stage deploys is its spec (stages/<stage>.yaml plus context
overrides), validated and rendered by peagle_deploy exactly as `peagle deploy` would.
`-c peagle:github_repo=OWNER/REPO` adds PeagleCiRoles: the GitHub OIDC provider and one
deploy role per stage, for runs of `-c peagle:github_branch` (default main);
`-c peagle:github_oidc_provider=existing|<arn>` imports the account's provider;
`-c peagle:github_repository_id=ID -c peagle:github_repository_owner_id=ID` pins the
repository's numeric ids in the roles' trust.
`-c peagle:nag=true` runs the cdk-nag AwsSolutions checks.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from peagle_deploy.errors import PeagleError
from peagle_deploy.extras import require

if TYPE_CHECKING:
    import aws_cdk as cdk

    from infra.stages import StageConfig
    from peagle_deploy.plan import Plan

CDK_MODULES = ("aws_cdk", "constructs")
"""What the app imports from the `cdk` extra (and cdk_nag with `-c peagle:nag=true`)."""


def main(context: Mapping[str, Any] | None = None) -> int:
    """Synthesize every stage; a bad spec, or a missing `cdk` extra, is one clear line
    and exit code 2.

    The CDK CLI passes cdk.json's context in the environment; `context` adds to it
    (for running the app in-process).
    """
    try:
        for module in CDK_MODULES:
            require(module, "the CDK app (`npx cdk synth`)")
        return _synth(context)
    except PeagleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def add_ci_roles(app: cdk.App, stages: Sequence[StageConfig], plans: Sequence[Plan]) -> None:
    """PeagleCiRoles, when `-c peagle:github_repo` names the repository."""
    from infra.ci_stack import CI_STACK_ID, CiRolesStack
    from infra.github_oidc import GitHubRepo, check_branch, check_provider_choice
    from infra.stages import (
        GITHUB_BRANCH_CONTEXT_KEY,
        GITHUB_OIDC_CONTEXT_KEY,
        GITHUB_OWNER_ID_CONTEXT_KEY,
        GITHUB_REPO_CONTEXT_KEY,
        GITHUB_REPOSITORY_ID_CONTEXT_KEY,
    )

    repo = app.node.try_get_context(GITHUB_REPO_CONTEXT_KEY)
    if repo is None:
        return
    context = app.node.try_get_context
    CiRolesStack(
        app,
        CI_STACK_ID,
        repo=GitHubRepo.parse(repo, f"-c {GITHUB_REPO_CONTEXT_KEY}").with_ids(
            context(GITHUB_REPOSITORY_ID_CONTEXT_KEY),
            context(GITHUB_OWNER_ID_CONTEXT_KEY),
            (f"-c {GITHUB_REPOSITORY_ID_CONTEXT_KEY}", f"-c {GITHUB_OWNER_ID_CONTEXT_KEY}"),
        ),
        stages=stages,
        plans=plans,
        provider=check_provider_choice(
            context(GITHUB_OIDC_CONTEXT_KEY), f"-c {GITHUB_OIDC_CONTEXT_KEY}"
        ),
        branch=check_branch(context(GITHUB_BRANCH_CONTEXT_KEY), f"-c {GITHUB_BRANCH_CONTEXT_KEY}"),
    )


def _synth(context: Mapping[str, Any] | None) -> int:
    import aws_cdk as cdk

    from infra.stack import PeagleStack
    from infra.stages import (
        NAG_CONTEXT_KEY,
        STAGES_CONTEXT_KEY,
        check_distinct_stages,
        stage_configs,
    )

    # Construct stack traces under jsii are frames of its JavaScript runtime, never of this
    # Python code: `cdk synth` printed a useless `.../lib/program.js:1:5591` per warning.
    app = cdk.App(context=dict(context) if context is not None else None, stack_traces=False)
    nag = str(app.node.try_get_context(NAG_CONTEXT_KEY)).lower() == "true"
    if nag:
        require("cdk_nag", f"-c {NAG_CONTEXT_KEY}=true")
    stages = stage_configs(
        app.node.try_get_context(STAGES_CONTEXT_KEY), Path(__file__).resolve().parent
    )
    plans = [stage.plan() for stage in stages]
    check_distinct_stages(stages, plans)
    for stage, plan in zip(stages, plans, strict=True):
        PeagleStack(app, stage.stack_id, stage=stage, plan=plan)
    add_ci_roles(app, stages, plans)
    if nag:
        from cdk_nag import AwsSolutionsChecks

        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
    if nag:
        from infra.nag import nag_summary

        stacks = [c for c in app.node.children if isinstance(c, cdk.Stack)]
        print(nag_summary(app, len(stacks)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
