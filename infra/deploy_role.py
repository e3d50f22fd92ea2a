"""One stage's CI deploy role: assumable only from that stage's GitHub environment, and
allowed only on that stage's SageMaker resources (plus reads of the stage it is promoted
from). The construct is wiring: the trust conditions are `trust_conditions`, the
permissions `infra.deploy_policy.deploy_statements` (pure, unit-tested alone).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.deploy_policy import (
    Arns,
    StageResources,
    deploy_statements,
    training_statements,
    wildcard_reason,
)
from infra.github_oidc import GITHUB_OIDC_HOST, STS_AUDIENCE, GitHubRepo
from infra.nag import acknowledge, nag_text

MAX_SESSION_HOURS = 4
"""Long enough for the example workflow's longest job (promote-prod, 180 minutes)."""


def trust_conditions(repo: GitHubRepo, stage: str, branch: str) -> dict[str, Any]:
    """Only ID tokens GitHub issued for STS to a job in this repository's `stage`
    environment, in a run of `branch`.

    A job bound to an environment gets `sub` = `repo:OWNER/REPO:environment:NAME`, which
    does not name the branch; the `ref` claim does, and STS offers it as the condition key
    `token.actions.githubusercontent.com:ref` (Service Authorization Reference, AWS STS,
    AssumeRoleWithWebIdentity), so a run of another branch cannot use the role even where
    the environment's deployment-branch rule was left open. With the repository's
    numeric ids known, its `repository_id` and `repository_owner_id` claims (condition
    keys of the same action) are compared too: names can be taken over, ids cannot.
    """
    return {
        "StringEquals": {
            f"{GITHUB_OIDC_HOST}:aud": STS_AUDIENCE,
            f"{GITHUB_OIDC_HOST}:sub": repo.environment_subject(stage),
            f"{GITHUB_OIDC_HOST}:ref": f"refs/heads/{branch}",
            **repo.id_claims(),
        }
    }


class StageDeployRole(Construct):
    """The role one stage's CI jobs assume with GitHub's ID token (OIDC, no stored keys).

    Trust: `sts:AssumeRoleWithWebIdentity` from the account's GitHub OIDC provider when the
    token's `aud` is STS, its `sub` is `repo:OWNER/REPO:environment:<stage>`, its `ref`
    is the deploy branch and (when given) its repository and owner ids are the
    repository's, compared with StringEquals. Permissions: `deploy_statements` as one
    inline policy.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        repo: GitHubRepo,
        branch: str,
        provider_arn: str,
        arns: Arns,
        own: StageResources,
        source: StageResources | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.stage = own.stage
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.FederatedPrincipal(
                provider_arn,
                conditions=trust_conditions(repo, own.stage, branch),
                assume_role_action="sts:AssumeRoleWithWebIdentity",
            ),
            description=(
                f"peagle-deploy CI: deploys stage {own.stage} (endpoint {own.endpoint_name}) "
                f"from {repo} environment {own.stage} on {branch}"
            ),
            max_session_duration=Duration.hours(MAX_SESSION_HOURS),
        )
        self.statements = deploy_statements(arns, own, source, self.role.role_arn)
        # A role's inline policies may hold 10,240 characters in all (IAM quotas): the
        # training grants go into a customer managed policy of their own (6,144).
        training = training_statements(arns, own)
        self.policy = iam.Policy(
            self,
            "Policy",
            roles=[self.role],
            statements=[
                iam.PolicyStatement.from_json(s) for s in self.statements if s not in training
            ],
        )
        self.training_policy: iam.ManagedPolicy | None = None
        if training:
            self.training_policy = iam.ManagedPolicy(
                self,
                "TrainingPolicy",
                description=f"peagle-deploy CI: training jobs of stage {own.stage}",
                roles=[self.role],
                statements=[iam.PolicyStatement.from_json(s) for s in training],
            )
        self._acknowledge(self.policy, [s for s in self.statements if s not in training])
        if self.training_policy is not None:
            self._acknowledge(self.training_policy, training)

    def _acknowledge(
        self, policy: iam.Policy | iam.ManagedPolicy, statements: list[dict[str, Any]]
    ) -> None:
        """Each resource with a `*` acknowledged to cdk-nag with its statement's reason."""
        stack = Stack.of(self)
        for statement in statements:
            resources = statement["Resource"]
            for resource in [resources] if isinstance(resources, str) else resources:
                if "*" in resource:
                    acknowledge(
                        policy,
                        "AwsSolutions-IAM5",
                        wildcard_reason(statement["Sid"]),
                        "Resource::" + nag_text(stack, resource),
                    )

    @property
    def role_arn(self) -> str:
        return self.role.role_arn
