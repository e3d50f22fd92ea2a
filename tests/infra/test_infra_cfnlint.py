"""cfn-lint on every synthesized template: zero errors, and only known warnings."""

from __future__ import annotations

import json

import pytest
from cdk_helpers import Synthesized
from cfnlint.api import ManualArgs, lint

pytestmark = pytest.mark.xdist_group(name="cdk")

# W3005 "dependency already enforced": CDK's lambda.Function adds an explicit DependsOn
# on its role (and the role's policy) to the model handler and to the Provider
# framework's function (CDK-generated, harmless).
ALLOWED_WARNINGS = {
    ("W3005", "Resources/EndpointModelOnEvent"),
    ("W3005", "Resources/EndpointModelProviderframeworkonEvent"),
}


def _lint(synth: Synthesized, stack: str) -> list[tuple[str, str, str]]:
    region = synth.stacks[stack].plan.region
    matches = lint(json.dumps(synth.templates[stack]), config=ManualArgs(regions=[region]))
    return [(m.rule.id, "/".join(str(p) for p in m.path), m.message) for m in matches]


def test_cfn_lint_every_template(all_synths: list[Synthesized]) -> None:
    linted = 0
    for synth in all_synths:
        for stack in synth.stacks:
            findings = _lint(synth, stack)
            errors = [f for f in findings if f[0].startswith("E")]
            assert errors == [], f"{stack}: {errors}"
            unexpected = [
                f
                for f in findings
                if not any(f[0] == rule and where in f[1] for rule, where in ALLOWED_WARNINGS)
            ]
            assert unexpected == [], f"{stack}: {unexpected}"
            linted += 1
    assert linted == 5


def test_cfn_lint_catches_what_the_model_resource_avoids(stage_synth: Synthesized) -> None:
    """The reason the model is a custom resource: a native AWS::SageMaker::Model with
    AdditionalModelDataSources fails cfn-lint (docs/platform-facts.md, "SageMaker API and
    CloudFormation"). Proves the linter runs."""
    stack = "PeagleEndpoint-dev"
    template = json.loads(json.dumps(stage_synth.templates[stack]))
    create = stage_synth.stacks[stack].plan.create_model
    template["Resources"]["NativeModel"] = {
        "Type": "AWS::SageMaker::Model",
        "Properties": {
            "ExecutionRoleArn": "arn:aws:iam::123456789012:role/x",
            "PrimaryContainer": {
                "Image": create["PrimaryContainer"]["Image"],
                "AdditionalModelDataSources": create["PrimaryContainer"][
                    "AdditionalModelDataSources"
                ],
            },
        },
    }
    matches = lint(json.dumps(template), config=ManualArgs(regions=["us-east-1"]))
    assert any(m.rule.id == "E3002" and "NativeModel" in str(m.path) for m in matches)
