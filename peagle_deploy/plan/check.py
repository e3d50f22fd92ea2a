"""Deployment -> findings: every rule, once, in one list.

A rule takes the resolved Deployment and returns warnings; it raises InputError to
refuse (the first refusal ends the check, so the order below is the order a spec's
problems are reported in). A new check is a function `(Deployment) -> list[PlanWarning]`
in the validation module of its concern, added to `RULES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from peagle_deploy.deployment import Deployment
from peagle_deploy.findings import CdkIncompatibility, PlanWarning
from peagle_deploy.validation import (
    aws_shapes,
    cloudformation,
    engine,
    fit,
    network,
    rollout,
    secrets,
    sources,
    speculative,
    variant,
)

Rule = Callable[[Deployment], list[PlanWarning]]


def _cdk_warnings(dep: Deployment) -> list[PlanWarning]:
    return cloudformation.cdk_warnings(cloudformation.cdk_incompatibilities(dep))


RULES: tuple[Rule, ...] = (
    sources.check_unverified,
    aws_shapes.check_names,
    aws_shapes.check_image,
    sources.check_model_data,
    fit.check_instance,
    sources.check_drafter,
    speculative.check_speculative,
    engine.check_engine,
    engine.check_ami,
    fit.check_fit,
    variant.check_variant,
    _cdk_warnings,
    aws_shapes.check_key_and_vpc,
    network.check_network,
    rollout.check_rollout,
    aws_shapes.check_execution_role,
    aws_shapes.check_tags_and_keys,
    secrets.check_secrets,
    secrets.check_secret_refs,
    secrets.refuse_secret_arguments,
    secrets.check_logged_args,
    aws_shapes.check_environment,
)
"""Every rule a deployment must pass, in the order problems are reported."""


@dataclass(frozen=True)
class Findings:
    """What the checks report besides refusals."""

    warnings: list[PlanWarning]
    cdk_incompatibilities: list[CdkIncompatibility]
    """What CloudFormation cannot express (the CDK path refuses; also warned about)."""


def check(dep: Deployment) -> Findings:
    """Run every rule on `dep`; InputError on the first refusal."""
    warnings: list[PlanWarning] = []
    for rule in RULES:
        warnings += rule(dep)
    return Findings(warnings, cloudformation.cdk_incompatibilities(dep))
