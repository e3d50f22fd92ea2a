"""A stage that carries an experiment: the stack sends what `peagle experiment start` sends.

The experiment stage (conftest.experiment_stage: stages/dev-experiment.yaml with a
candidate drafter of its own) is synthesized with cdk-nag; cfn-lint runs on it with every
other template (test_infra_cfnlint.py).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from cdk_helpers import ROLE_PLACEHOLDER, Synthesized, decode_json_property
from conftest import experiment_stage

from infra.model import MODEL_RESOURCE_TYPE
from infra.model_provider.handler import PROPERTY
from peagle_deploy.experiment.plan import experiment_plan

pytestmark = pytest.mark.xdist_group(name="cdk")

STACK = "PeagleEndpoint-dev"


def _plan() -> Any:
    return experiment_plan(experiment_stage().load_spec())


def _role_id(synth: Synthesized) -> str:
    roles = synth.resources(STACK, "AWS::IAM::Role")
    (lid,) = [
        lid
        for lid, role in roles.items()
        if "sagemaker.amazonaws.com" in json.dumps(role["Properties"]["AssumeRolePolicyDocument"])
    ]
    return lid


def test_both_models_are_created_with_the_sdks_requests(experiment_synth: Synthesized) -> None:
    xp = _plan()
    role = _role_id(experiment_synth)
    models = experiment_synth.resources(STACK, MODEL_RESOURCE_TYPE)
    sent = sorted(
        (
            decode_json_property(m["Properties"][PROPERTY], {role: ROLE_PLACEHOLDER})
            for m in models.values()
        ),
        key=lambda r: r["ModelName"],
    )
    expected = []
    for request in (xp.incumbent.create_model, xp.create_candidate_model):
        one = copy.deepcopy(request)
        one["ExecutionRoleArn"] = ROLE_PLACEHOLDER
        expected.append(one)
    assert sent == sorted(expected, key=lambda r: r["ModelName"])


def test_the_config_carries_the_candidate_as_a_shadow_variant(
    experiment_synth: Synthesized,
) -> None:
    xp = _plan()
    config = experiment_synth.one(STACK, "AWS::SageMaker::EndpointConfig")["Properties"]
    assert config["EndpointConfigName"] == xp.config_name
    (production,) = config["ProductionVariants"]
    (shadow,) = config["ShadowProductionVariants"]
    assert production["ModelName"] == xp.incumbent.model_name
    assert (shadow["VariantName"], shadow["ModelName"]) == ("Candidate", xp.candidate_model_name)
    assert shadow["InitialVariantWeight"] == 1.0  # sampling 100 %
    endpoint = experiment_synth.one(STACK, "AWS::SageMaker::Endpoint")["Properties"]
    assert "DeploymentConfig" not in endpoint  # a plain, all-at-once blue/green update


def test_the_execution_role_reads_the_candidates_drafter(experiment_synth: Synthesized) -> None:
    policies = experiment_synth.resources(STACK, "AWS::IAM::Policy")
    text = json.dumps(policies)
    assert "peagle-candidates/gpt-oss-20b-p-eagle-v2/*" in text
    assert "lmi-eagle-heads/models/gpt-oss-20b-p-eagle/*" in text


def test_no_unacknowledged_cdk_nag_findings(experiment_synth: Synthesized) -> None:
    assert experiment_synth.violations == []
    assert experiment_synth.error is None
