"""An autoscaled stage through CloudFormation's semantics: the CDK stack's templates,
played by the CloudFormation stand-in (cfn_harness.py) against the emulator.

The stage's scaling moved its endpoint from 1 instance to 6; a stack update onto a new
config (another K) keeps the 6, because the endpoint resource retains its variant's
instance count (`RetainAllVariantProperties`, the weights excepted), as the SDK's update
does; the scalable target and its policy are unchanged and act on after it.

Run: `.venv/bin/pytest -q -n 0 tests/infra/test_infra_capacity.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from cdk_helpers import ROOT, cdk_context, environ
from cfn_harness import HarnessStack, stage_players
from model_provider_kit import template_handler
from peagle_local.emulator import LocalAWS

from infra.stages import stage_configs

pytestmark = pytest.mark.xdist_group(name="cdk")

STACK = "PeagleEndpoint-dev"
ENDPOINT = "peagle-gpt-oss-20b-dev"
RESOURCE = f"endpoint/{ENDPOINT}/variant/AllTraffic"
SCALING = {"min_instances": 1, "max_instances": 8, "target_invocations_per_instance": 20}


@dataclass
class Synth:
    templates: dict[str, dict[str, Any]]
    outdir: Path

    def handler(self) -> Any:
        """The model custom resource's handler from the synthesized asset."""
        return template_handler(self.templates["scaled"], self.outdir)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The dev stage with `scaling:` (K=3), and the same stage with another K."""
    import aws_cdk as cdk

    from infra.stack import PeagleStack

    (dev,) = stage_configs({"dev": {"spec": "stages/dev.yaml"}}, ROOT)
    scaled = replace(dev, overrides={**dev.overrides, "scaling": SCALING})
    stages = {
        "scaled": scaled,
        "scaled-k5": replace(
            scaled, overrides={**scaled.overrides, "speculative.num_speculative_tokens": 5}
        ),
        "fixed": dev,
        "fixed-k5": replace(
            dev, overrides={**dev.overrides, "speculative.num_speculative_tokens": 5}
        ),
    }
    outdir = tmp_path_factory.mktemp("capacity")
    with environ(CDK_DEFAULT_ACCOUNT=None):
        app = cdk.App(outdir=str(outdir), context=cdk_context())
        for key, stage in stages.items():
            PeagleStack(app, key, stage=stage)
        app.synth()
    templates = {k: json.loads((outdir / f"{k}.template.json").read_text()) for k in stages}
    return Synth(templates, outdir)


@pytest.fixture
def account(synth: Synth) -> Iterator[tuple[LocalAWS, HarnessStack]]:
    with LocalAWS() as aws:
        yield aws, HarnessStack(STACK, stage_players(aws, STACK, synth.handler()))


def _endpoint(template: dict[str, Any]) -> dict[str, Any]:
    (resource,) = [
        r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Endpoint"
    ]
    return dict(resource["Properties"])


def _instances(aws: LocalAWS) -> int:
    desc = aws.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    (variant,) = desc["ProductionVariants"]
    return int(variant["CurrentInstanceCount"])


def test_a_scaled_stages_endpoint_retains_its_instance_count_and_a_fixed_one_does_not(
    synth: Synth,
) -> None:
    scaled = _endpoint(synth.templates["scaled"])
    assert scaled["RetainAllVariantProperties"] is True
    assert scaled["ExcludeRetainedVariantProperties"] == [{"VariantPropertyType": "DesiredWeight"}]
    assert "RetainDeploymentConfig" not in scaled  # the stage states its DeploymentConfig
    fixed = _endpoint(synth.templates["fixed"])
    assert "RetainAllVariantProperties" not in fixed
    assert "ExcludeRetainedVariantProperties" not in fixed


def test_an_update_of_an_autoscaled_stage_keeps_its_instances_and_scaling(
    synth: Synth, account: tuple[LocalAWS, HarnessStack]
) -> None:
    aws, stack = account
    stack.deploy(synth.templates["scaled"])
    assert _instances(aws) == 1
    assert aws.autoscale(ENDPOINT, 6) == 6
    stack.deploy(synth.templates["scaled-k5"])
    (config,) = [
        r["Properties"]["EndpointConfigName"]
        for r in synth.templates["scaled-k5"]["Resources"].values()
        if r["Type"] == "AWS::SageMaker::EndpointConfig"
    ]
    desc = aws.client("sagemaker").describe_endpoint(EndpointName=ENDPOINT)
    assert desc["EndpointConfigName"] == config  # the update was made
    assert _instances(aws) == 6
    aas = aws.client("application-autoscaling")
    (target,) = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[RESOURCE])[
        "ScalableTargets"
    ]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (1, 8)
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=RESOURCE)
    assert [p["PolicyName"] for p in policies["ScalingPolicies"]] == [f"{ENDPOINT}-invocations"]
    assert aws.autoscale(ENDPOINT, 7) == 7


def test_a_fixed_stage_takes_its_configs_count(
    synth: Synth, account: tuple[LocalAWS, HarnessStack]
) -> None:
    """Without `scaling:` the spec states the count: an update sets it."""
    aws, stack = account
    stack.deploy(synth.templates["fixed"])
    aws.client("sagemaker").update_endpoint_weights_and_capacities(
        EndpointName=ENDPOINT,
        DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 3}],
    )
    stack.deploy(synth.templates["fixed-k5"])
    assert _instances(aws) == 1
