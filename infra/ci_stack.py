"""PeagleCiRoles: the GitHub OIDC provider and one deploy role per stage, as code.

Added to the app by `cdk synth -c peagle:github_repo=OWNER/REPO`. Each stage of
`peagle:stages` gets a role that only its GitHub environment can assume, in runs of the
deploy branch (`-c peagle:github_branch`, default main), and that may only change that
stage's resources (infra/deploy_role.py); the stage it is promoted
from (`promote_from`) may be read for the promotion gates. The role ARNs are outputs:
set each as the `AWS_DEPLOY_ROLE_ARN` variable of the GitHub environment of the same name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from aws_cdk import CfnOutput, Environment, Stack
from constructs import Construct

from infra.deploy_role import Arns, StageDeployRole, StageResources
from infra.github_oidc import CREATE, DEFAULT_BRANCH, GitHubOidcProvider, GitHubRepo
from infra.stages import StageConfig, check_distinct_stages
from peagle_deploy.plan import Plan
from peagle_deploy.stage_training import training_vpc

CI_STACK_ID = "PeagleCiRoles"


def stage_resources(stage: StageConfig, plan: Plan) -> StageResources:
    """What the stage's plan names, for its deploy role."""
    return StageResources(
        stage=stage.name,
        region=plan.region,
        endpoint_name=plan.endpoint_name,
        create_model=plan.create_model,
        execution_role_arn=plan.spec.execution_role_arn,
        expected_bucket_owner=plan.spec.expected_bucket_owner,
        secret_refs=plan.secret_refs,
        training=stage.training,
        training_vpc=(
            training_vpc(stage.training, plan.create_model.get("VpcConfig"))
            if stage.training is not None
            else None
        ),
    )


class CiRolesStack(Stack):
    """GitHubOidcProvider -> one StageDeployRole per stage (IAM is global: one stack).

    Two stages that would share an endpoint or a grant are refused first
    (`check_distinct_stages`): their roles could not be kept apart.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        repo: GitHubRepo,
        stages: Sequence[StageConfig],
        plans: Sequence[Plan],
        provider: str = CREATE,
        branch: str = DEFAULT_BRANCH,
        account: str | None = None,
    ) -> None:
        check_distinct_stages(stages, plans)
        super().__init__(
            scope,
            construct_id,
            env=Environment(
                account=account or os.environ.get("CDK_DEFAULT_ACCOUNT"),
                region=plans[0].region if plans else None,
            ),
            description=f"peagle-deploy CI roles for GitHub repository {repo}",
        )
        self.oidc = GitHubOidcProvider(self, "GitHubOidc", choice=provider)
        arns = Arns(partition=self.partition, account=self.account)
        resources = {s.name: stage_resources(s, p) for s, p in zip(stages, plans, strict=True)}
        self.roles: dict[str, StageDeployRole] = {}
        for stage in stages:
            source = resources[stage.promote_from] if stage.promote_from else None
            role = StageDeployRole(
                self,
                f"Deploy-{stage.name}",
                repo=repo,
                branch=branch,
                provider_arn=self.oidc.arn,
                arns=arns,
                own=resources[stage.name],
                source=source,
            )
            self.roles[stage.name] = role
            CfnOutput(
                self,
                f"DeployRoleArn{stage.name.replace('-', '').title()}",
                value=role.role_arn,
                description=(f"AWS_DEPLOY_ROLE_ARN of GitHub environment {stage.name!r} of {repo}"),
            )
