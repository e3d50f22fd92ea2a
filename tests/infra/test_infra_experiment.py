"""A stage that carries an experiment: the stack sends what `peagle experiment start` sends.

The experiment stage (cdk_helpers.experiment_stage: stages/dev-experiment.yaml with a
candidate drafter of its own) is synthesized with cdk-nag; cfn-lint runs on it with every
other template (test_infra_cfnlint.py). A shadow experiment is an
AWS::SageMaker::InferenceExperiment beside the endpoint; a split one is a two-variant
config.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from cdk_helpers import ROLE_PLACEHOLDER, Synthesized, decode_json_property, experiment_stage

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
        and "ShadowExperiment" not in lid  # the execution role, not the experiment's
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


def test_the_shadow_experiment_is_an_inference_experiment_beside_the_endpoint(
    experiment_synth: Synthesized,
) -> None:
    """The stack's InferenceExperiment is the planner's CreateInferenceExperiment (the
    role is the stack's own); the endpoint keeps the incumbent's config and rollout."""
    xp = _plan()
    request = dict(xp.requests.create_inference_experiment)
    (props,) = [
        copy.deepcopy(r["Properties"])  # the synthesized template is shared: read a copy
        for r in experiment_synth.resources(STACK, "AWS::SageMaker::InferenceExperiment").values()
    ]
    role = _experiment_role(experiment_synth)
    assert props.pop("RoleArn") == {"Fn::GetAtt": [role, "Arn"]}
    assert props.pop("DesiredState") == "Running"
    request.pop("RoleArn")
    tags = sorted(request.pop("Tags"), key=lambda t: t["Key"])
    assert sorted(props.pop("Tags"), key=lambda t: t["Key"]) == tags
    assert props == request  # every other field as the SDK sends it
    sampled = props["ShadowModeConfig"]["ShadowModelVariants"][0]["SamplingPercentage"]
    assert sampled == 100
    config = experiment_synth.one(STACK, "AWS::SageMaker::EndpointConfig")["Properties"]
    assert config["EndpointConfigName"] == xp.incumbent.endpoint_config_name
    assert "ShadowProductionVariants" not in config
    endpoint = experiment_synth.one(STACK, "AWS::SageMaker::Endpoint")["Properties"]
    assert "DeploymentConfig" in endpoint  # the stage's blue/green rollout stays


def _logical_id(synth: Synthesized, rtype: str, stack: str = STACK) -> str:
    (lid,) = synth.resources(stack, rtype)
    return lid


def test_a_running_experiment_is_created_after_the_endpoint_it_names(
    experiment_synth: Synthesized,
) -> None:
    """`EndpointName` is the plan's literal name and the order a DependsOn, so that a
    stop in place can turn the order around (the endpoint after the stop)."""
    experiment = experiment_synth.one(STACK, "AWS::SageMaker::InferenceExperiment")
    endpoint = _logical_id(experiment_synth, "AWS::SageMaker::Endpoint")
    assert experiment["Properties"]["EndpointName"] == _plan().incumbent.endpoint_name
    assert endpoint in experiment["DependsOn"]


def _experiment_role(synth: Synthesized) -> str:
    (lid,) = [
        lid for lid in synth.resources(STACK, "AWS::IAM::Role") if "ShadowExperimentRole" in lid
    ]
    return lid


def test_sagemaker_may_update_only_this_endpoint_with_the_experiment_role(
    experiment_synth: Synthesized,
) -> None:
    from iam_oracle import Ask, TemplateRoles

    roles = TemplateRoles(experiment_synth.templates[STACK], "us-east-1")
    role = _experiment_role(experiment_synth)
    arn = f"arn:aws:sagemaker:us-east-1:{roles.account}"
    endpoint = _plan().incumbent.endpoint_name
    models = _plan().incumbent.model_name, _plan().candidate_model_name
    asks = [
        Ask("sagemaker:UpdateEndpoint", f"{arn}:endpoint/{endpoint}"),
        Ask("sagemaker:CreateEndpointConfig", f"{arn}:endpoint-config/generated-by-sagemaker"),
        Ask("sagemaker:DescribeModel", f"{arn}:model/{models[0]}"),
        Ask("sagemaker:DescribeModel", f"{arn}:model/{models[1]}"),
        Ask("sagemaker:UpdateEndpoint", f"{arn}:endpoint/another-endpoint"),
        Ask("sagemaker:DescribeModel", f"{arn}:model/another-endpoint-m0123abcd"),
        Ask("sagemaker:DeleteEndpoint", f"{arn}:endpoint/{endpoint}"),
        Ask("sagemaker:CreateModel", f"{arn}:model/{models[1]}"),
    ]
    decided = roles.decide(role, asks)
    assert decided == ["Allowed"] * 4 + ["ImplicitlyDenied"] * 4


def test_the_execution_role_reads_the_candidates_drafter(experiment_synth: Synthesized) -> None:
    policies = experiment_synth.resources(STACK, "AWS::IAM::Policy")
    text = json.dumps(policies)
    assert "peagle-candidates/gpt-oss-20b-p-eagle-v2/*" in text
    assert "lmi-eagle-heads/models/gpt-oss-20b-p-eagle/*" in text


def test_no_unacknowledged_cdk_nag_findings(experiment_synth: Synthesized) -> None:
    assert experiment_synth.violations == []
    assert experiment_synth.error is None


@pytest.fixture(scope="module")
def split_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The experiment stage as a split experiment (50/50 on 1 + 1 instances)."""
    from dataclasses import replace

    from cdk_helpers import cdk_context, environ, synthesize

    stage = experiment_stage()
    split = replace(
        stage,
        overrides={
            **stage.overrides,
            "experiment.mode": "split",
            "experiment.weight_percent": 50,
        },
    )
    with environ(CDK_DEFAULT_ACCOUNT=None):
        return synthesize([split], tmp_path_factory.mktemp("split"), context=cdk_context())


def test_a_split_experiment_is_one_config_with_both_production_variants(
    split_synth: Synthesized,
) -> None:
    assert split_synth.violations == [] and split_synth.error is None
    assert not split_synth.resources(STACK, "AWS::SageMaker::InferenceExperiment")
    config = split_synth.one(STACK, "AWS::SageMaker::EndpointConfig")["Properties"]
    variants = config["ProductionVariants"]
    assert [(v["VariantName"], v["InitialVariantWeight"]) for v in variants] == [
        ("AllTraffic", 0.5),
        ("Candidate", 0.5),
    ]
    endpoint = split_synth.one(STACK, "AWS::SageMaker::Endpoint")["Properties"]
    assert "DeploymentConfig" not in endpoint  # a plain, all-at-once blue/green update


def test_cfn_lint_accepts_the_split_template(split_synth: Synthesized) -> None:
    """test_infra_cfnlint.py lints the shadow stage; the split one here, the same way."""
    from test_infra_cfnlint import ALLOWED_WARNINGS, _lint

    findings = [
        f
        for f in _lint(split_synth, STACK)
        if not any(f[0] == rule and where in f[1] for rule, where in ALLOWED_WARNINGS)
    ]
    assert findings == []


@pytest.fixture(scope="module")
def stopping_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The experiment stage with `experiment_state: completed`."""
    from dataclasses import replace

    from cdk_helpers import cdk_context, environ, synthesize

    stage = replace(experiment_stage(), experiment_state="completed")
    with environ(CDK_DEFAULT_ACCOUNT=None):
        return synthesize([stage], tmp_path_factory.mktemp("stopping"), context=cdk_context())


def test_a_stop_in_place_changes_only_what_the_handlers_update_reads(
    experiment_synth: Synthesized, stopping_synth: Synthesized
) -> None:
    """Same resource, same Name (no replacement): DesiredState Completed, the incumbent
    alone in ModelVariants (the handler's stop keeps it and removes the candidate), a
    reason; the endpoint now waits for the experiment."""
    assert stopping_synth.violations == [] and stopping_synth.error is None
    lid = _logical_id(experiment_synth, "AWS::SageMaker::InferenceExperiment")
    assert _logical_id(stopping_synth, "AWS::SageMaker::InferenceExperiment") == lid
    running = copy.deepcopy(experiment_synth.one(STACK, "AWS::SageMaker::InferenceExperiment"))
    stopping = copy.deepcopy(stopping_synth.one(STACK, "AWS::SageMaker::InferenceExperiment"))
    changed = {
        k
        for k in set(running["Properties"]) | set(stopping["Properties"])
        if running["Properties"].get(k) != stopping["Properties"].get(k)
    }
    assert changed == {"DesiredState", "ModelVariants", "StatusReason"}
    props = stopping["Properties"]
    assert props["DesiredState"] == "Completed"
    assert [v["VariantName"] for v in props["ModelVariants"]] == ["AllTraffic"]
    assert props["ModelVariants"][0] == running["Properties"]["ModelVariants"][0]
    endpoint = stopping_synth.one(STACK, "AWS::SageMaker::Endpoint")
    assert lid in endpoint["DependsOn"]
    assert _logical_id(stopping_synth, "AWS::SageMaker::Endpoint") not in stopping.get(
        "DependsOn", []
    )


def test_cfn_lint_accepts_the_stopping_template(stopping_synth: Synthesized) -> None:
    from test_infra_cfnlint import ALLOWED_WARNINGS, _lint

    findings = [
        f
        for f in _lint(stopping_synth, STACK)
        if not any(f[0] == rule and where in f[1] for rule, where in ALLOWED_WARNINGS)
    ]
    assert findings == []


def _stage_with(**changes: Any) -> Any:
    from dataclasses import replace

    stage = experiment_stage()
    overrides = {**stage.overrides, **changes.pop("overrides", {})}
    return replace(stage, overrides=overrides, **changes)


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        (
            {"experiment_state": "completed", "overrides": {"experiment.mode": "split"}},
            "peagle:stages.dev.experiment_state",
            "a split experiment ends when `experiment:` is removed",
        ),
        (
            {"overrides": {"scaling": {"min_instances": 1, "max_instances": 4}}},
            "scaling",
            "min_instances = max_instances = initial_instance_count (1)",
        ),
    ],
    ids=["stop-a-split", "unpinned-scaling"],
)
def test_what_cloudformation_cannot_run_is_refused_at_synth_in_one_line(
    changes: dict[str, Any], field: str, says: str
) -> None:
    from peagle_deploy.errors import InputError

    with pytest.raises(InputError) as refused:
        _stage_with(**changes).plan()
    assert refused.value.field == field
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_a_stop_without_an_experiment_is_refused() -> None:
    from dataclasses import replace

    from infra.stages import StageConfig
    from peagle_deploy.errors import InputError

    stage = StageConfig(
        name="dev", spec_file=None, overrides={"model": "gpt-oss-20b"}, experiment_state="cancelled"
    )
    with pytest.raises(InputError, match="no shadow experiment to stop") as refused:
        replace(stage).plan()
    assert refused.value.field == "peagle:stages.dev.experiment_state"


def test_stage_configs_refuse_an_unknown_experiment_state(tmp_path: Any) -> None:
    from infra.stages import stage_configs
    from peagle_deploy.errors import InputError

    value = {"dev": {"overrides": {"model": "gpt-oss-20b"}, "experiment_state": "stopped"}}
    with pytest.raises(InputError) as refused:
        stage_configs(value, tmp_path)
    assert refused.value.field == "peagle:stages.dev.experiment_state"
    assert "completed" in str(refused.value)


@pytest.fixture(scope="module")
def scaled_synth(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The experiment stage with a pinned fleet (scaling 2-2, two instances), running
    and stopping (two stacks of one app)."""
    from dataclasses import replace

    from cdk_helpers import cdk_context, environ, synthesize

    pinned = {"initial_instance_count": 2, "scaling": {"min_instances": 2, "max_instances": 2}}
    running = _stage_with(overrides=pinned)
    stopping = replace(running, name="stg", experiment_state="completed")
    with environ(CDK_DEFAULT_ACCOUNT=None):
        return synthesize(
            [running, stopping], tmp_path_factory.mktemp("scaled"), context=cdk_context()
        )


def test_scaling_is_suspended_while_the_experiment_runs_and_lifted_by_the_stop(
    scaled_synth: Synthesized,
) -> None:
    assert scaled_synth.violations == [] and scaled_synth.error is None
    states = {}
    for stack in ("PeagleEndpoint-dev", "PeagleEndpoint-stg"):
        target = scaled_synth.one(stack, "AWS::ApplicationAutoScaling::ScalableTarget")
        states[stack] = set(target["Properties"]["SuspendedState"].values())
        assert len(target["Properties"]["SuspendedState"]) == 3
    assert states == {"PeagleEndpoint-dev": {True}, "PeagleEndpoint-stg": {False}}
    target = _logical_id(scaled_synth, "AWS::ApplicationAutoScaling::ScalableTarget")
    experiment = scaled_synth.one(STACK, "AWS::SageMaker::InferenceExperiment")
    assert target in experiment["DependsOn"]  # suspended before the experiment starts
    counts = [
        v["InfrastructureConfig"]["RealTimeInferenceConfig"]["InstanceCount"]
        for v in experiment["Properties"]["ModelVariants"]
    ]
    assert counts == [2, 2]  # the pinned fleet's, for both variants


def test_a_scaled_stage_without_an_experiment_says_its_scaling_is_not_suspended(
    edge_synth: Synthesized,
) -> None:
    """Written out, not left out: RegisterScalableTarget keeps what a call omits."""
    target = edge_synth.one("PeagleEndpoint-edge", "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["Properties"]["SuspendedState"] == {
        "DynamicScalingInSuspended": False,
        "DynamicScalingOutSuspended": False,
        "ScheduledScalingSuspended": False,
    }


def test_the_experiment_role_reaches_no_other_stages_configs(
    experiment_synth: Synthesized,
) -> None:
    """Issue 34, Low 1: the experiment role could create and delete every endpoint config
    of the account. SageMaker's name for its config is in no source read, so configs are
    created only of this endpoint's models and are deleted or served only when not
    tagged for another stage; and the role, tagged as the experiment's and not with the
    stage, is no execution role a stage's CI may pass (those are tagged with its stage):
    only its own stage's CI may pass it, as an experiment's role
    (`peagle:experiment-stage`)."""
    from iam_oracle import Ask, TemplateRoles

    roles = TemplateRoles(experiment_synth.templates[STACK], "us-east-1")
    role = _experiment_role(experiment_synth)
    arn = f"arn:aws:sagemaker:us-east-1:{roles.account}"
    xp = _plan()
    own_model = f"{arn}:model/{xp.candidate_model_name}"
    theirs = {"aws:ResourceTag/peagle:stage": "prod"}
    own = {"aws:ResourceTag/peagle:stage": "dev"}
    asks = [
        Ask(
            "sagemaker:CreateEndpointConfig",
            f"{arn}:endpoint-config/x",
            {"sagemaker:ModelArn": own_model},
        ),
        Ask("sagemaker:DeleteEndpointConfig", f"{arn}:endpoint-config/made-by-sagemaker"),
        Ask("sagemaker:DeleteEndpointConfig", f"{arn}:endpoint-config/peagle-x-dev-c1", own),
        Ask("sagemaker:UpdateEndpoint", f"{arn}:endpoint-config/made-by-sagemaker"),
        Ask(
            "s3:GetObject",
            "arn:aws:s3:::peagle-candidates/gpt-oss-20b-p-eagle-v2/config.json",
            {"s3:ResourceAccount": roles.account},
        ),
        Ask(
            "sagemaker:CreateEndpointConfig",
            f"{arn}:endpoint-config/x",
            {"sagemaker:ModelArn": f"{arn}:model/peagle-gpt-oss-20b-prod-m0123abcd"},
        ),
        Ask("sagemaker:DeleteEndpointConfig", f"{arn}:endpoint-config/peagle-x-prod-c1", theirs),
        Ask("sagemaker:UpdateEndpoint", f"{arn}:endpoint-config/peagle-x-prod-c1", theirs),
    ]
    assert roles.decide(role, asks) == ["Allowed"] * 5 + ["ImplicitlyDenied"] * 3
    tags = {
        t["Key"]: t["Value"]
        for t in experiment_synth.templates[STACK]["Resources"][role]["Properties"]["Tags"]
    }
    assert "peagle:stage" not in tags and tags["peagle:role"] == "experiment"
    assert tags["peagle:experiment-stage"] == "dev"
