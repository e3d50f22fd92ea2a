"""aws_cdk.assertions on every construct of the synthesized stacks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template
from cdk_helpers import EDGE_ACCOUNT, EDGE_OVERRIDES, Synthesized
from peagle_serve.contract import (
    ENDPOINT_NAME_ENV,
    METRIC_DIMENSION,
    METRIC_EVENT,
    METRIC_FIELDS,
    METRIC_NAMESPACE,
    VARIANT_NAME_ENV,
    format_metric_line,
    metric_dimension_selector,
    metric_dimensions,
    metric_filter_pattern,
    metric_value_selector,
)

from infra.model import MODEL_RESOURCE_TYPE

pytestmark = pytest.mark.xdist_group(name="cdk")

STAGES = ("PeagleEndpoint-dev", "PeagleEndpoint-staging", "PeagleEndpoint-prod")
EDGE = "PeagleEndpoint-edge"


@pytest.fixture(scope="module")
def prod(stage_synth: Synthesized) -> Template:
    return Template.from_json(stage_synth.templates["PeagleEndpoint-prod"])


@pytest.fixture(scope="module")
def edge(edge_synth: Synthesized) -> Template:
    return Template.from_json(edge_synth.templates[EDGE])


def _statements(synth: Synthesized, stack: str, path_part: str) -> list[dict[str, Any]]:
    """Statements of the IAM policy whose logical id contains `path_part`."""
    policies = synth.resources(stack, "AWS::IAM::Policy")
    (policy,) = [p for lid, p in policies.items() if path_part in lid]
    statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def _by_sid(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in statements if "Sid" in s}


def _text(value: Any) -> str:
    """A resource value with its intrinsic functions flattened to `<...>` markers."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    if "Fn::Join" in value:
        return "".join(_text(p) for p in value["Fn::Join"][1])
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::GetAtt" in value:
        return f"<{value['Fn::GetAtt'][0]}.{value['Fn::GetAtt'][1]}>"
    raise AssertionError(value)


# --- stack composition ----------------------------------------------------------------


@pytest.mark.parametrize("stack", STAGES)
def test_each_stage_has_one_of_each_concern(stage_synth: Synthesized, stack: str) -> None:
    template = Template.from_json(stage_synth.templates[stack])
    template.resource_count_is("AWS::KMS::Key", 1)
    template.resource_count_is(MODEL_RESOURCE_TYPE, 1)
    template.resource_count_is("AWS::SageMaker::EndpointConfig", 1)
    template.resource_count_is("AWS::SageMaker::Endpoint", 1)
    template.resource_count_is("AWS::SageMaker::Model", 0)
    template.resource_count_is("AWS::CloudWatch::Alarm", 2)
    template.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    template.resource_count_is("AWS::Logs::MetricFilter", len(METRIC_FIELDS))
    scales = stack != "PeagleEndpoint-dev"  # dev.yaml has no scaling section
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", int(scales))
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", int(scales))


def test_stack_outputs_endpoint_name_and_role_arn(stage_synth: Synthesized) -> None:
    for stack in STAGES:
        outputs = stage_synth.templates[stack]["Outputs"]
        plan = stage_synth.stacks[stack].plan
        assert outputs["EndpointName"]["Value"] == plan.endpoint_name
        role_ids = list(stage_synth.resources(stack, "AWS::IAM::Role"))
        (exec_role,) = [r for r in role_ids if "ExecutionRole" in r]
        assert outputs["ExecutionRoleArn"]["Value"] == {"Fn::GetAtt": [exec_role, "Arn"]}
        assert outputs["ModelName"]["Value"] == plan.model_name
        assert outputs["SpecHash"]["Value"] == plan.content_hash


def test_stage_stacks_are_bound_to_the_plan_region(all_synths: list[Synthesized]) -> None:
    for synth in all_synths:
        for stack in synth.stacks.values():
            assert stack.region == stack.plan.region
    edge_stack = all_synths[1].stacks[EDGE]
    assert edge_stack.region == "eu-west-1"
    assert edge_stack.account == EDGE_ACCOUNT


def test_plan_tags_on_every_taggable_resource(stage_synth: Synthesized) -> None:
    stack = "PeagleEndpoint-staging"
    expected = sorted(stage_synth.stacks[stack].plan.tags, key=lambda t: t["Key"])
    for rtype in (
        "AWS::KMS::Key",
        "AWS::IAM::Role",
        "AWS::Logs::LogGroup",
        "AWS::Lambda::Function",
    ):
        for lid, res in stage_synth.resources(stack, rtype).items():
            tags = sorted(res["Properties"]["Tags"], key=lambda t: t["Key"])
            if lid.startswith("TrainingRole"):
                # the training role names its stage with its own tag, never peagle:stage
                # (tests/infra/test_infra_training.py)
                own = {"peagle:role": "training", "peagle:training-stage": "staging"}
                want = [t for t in expected if t["Key"] != "peagle:stage"]
                want += [{"Key": k, "Value": v} for k, v in own.items()]
                assert tags == sorted(want, key=lambda t: t["Key"]), lid
                continue
            assert tags == expected, (rtype, lid)


def test_prod_retains_data_and_is_termination_protected(stage_synth: Synthesized) -> None:
    prod = stage_synth.stacks["PeagleEndpoint-prod"]
    dev = stage_synth.stacks["PeagleEndpoint-dev"]
    assert prod.termination_protection is True
    assert dev.termination_protection is False
    assert stage_synth.one("PeagleEndpoint-prod", "AWS::KMS::Key")["DeletionPolicy"] == "Retain"
    assert stage_synth.one("PeagleEndpoint-dev", "AWS::KMS::Key")["DeletionPolicy"] == "Delete"


# --- EndpointKey ----------------------------------------------------------------------


def test_key_rotates_and_lets_logs_use_it_only_for_the_stacks_log_groups(
    prod: Template, stage_synth: Synthesized
) -> None:
    prod.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    key = stage_synth.one("PeagleEndpoint-prod", "AWS::KMS::Key")
    sids = _by_sid(key["Properties"]["KeyPolicy"]["Statement"])
    logs_use = sids["CloudWatchLogsUseForTheStacksLogGroups"]
    assert logs_use["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    (arns,) = logs_use["Condition"]["ArnEquals"].values()
    prefix = "arn:<AWS::Partition>:logs:us-east-1:<AWS::AccountId>:log-group:"
    assert sorted(_text(a) for a in arns) == [
        prefix + "/aws/sagemaker/Endpoints/peagle-gpt-oss-20b-prod",
        prefix + "/peagle-deploy/peagle-gpt-oss-20b-prod/model-provider",
    ]
    # ...and those are exactly the stack's log groups, all encrypted with this key.
    names = sorted(
        g["Properties"]["LogGroupName"]
        for g in stage_synth.resources("PeagleEndpoint-prod", "AWS::Logs::LogGroup").values()
    )
    assert [prefix + n for n in names] == sorted(_text(a) for a in arns)


def test_log_groups_are_encrypted_with_the_stack_key(all_synths: list[Synthesized]) -> None:
    for synth in all_synths:
        for stack in synth.stacks:
            (key_id,) = synth.resources(stack, "AWS::KMS::Key")
            for lid, group in synth.resources(stack, "AWS::Logs::LogGroup").items():
                assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}, lid


# --- ExecutionRole --------------------------------------------------------------------


def test_execution_role_trusts_sagemaker_and_has_no_managed_policies(
    all_synths: list[Synthesized],
) -> None:
    for synth in all_synths:
        for stack in synth.stacks:
            for lid, role in synth.resources(stack, "AWS::IAM::Role").items():
                assert "ManagedPolicyArns" not in role["Properties"], (stack, lid)
            roles = synth.resources(stack, "AWS::IAM::Role")
            (exec_role,) = [r for lid, r in roles.items() if "ExecutionRole" in lid]
            (trust,) = exec_role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
            assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}


def test_execution_role_reads_exactly_the_model_and_drafter_prefixes(
    stage_synth: Synthesized,
) -> None:
    stack = "PeagleEndpoint-dev"
    plan = stage_synth.stacks[stack].plan
    sids = _by_sid(_statements(stage_synth, stack, "ExecutionRolePolicy"))
    bucket = "jumpstart-cache-prod-us-east-1"
    model_key = plan.model_data_uri.removeprefix(f"s3://{bucket}/")
    assert plan.drafter_uri is not None
    drafter_key = plan.drafter_uri.removeprefix(f"s3://{bucket}/")
    # JumpStart's own bucket (AWS owns it): no bucket-owner condition
    get = sids["ReadJumpStartModelData"]
    assert get["Action"] == "s3:GetObject" and "Condition" not in get
    assert "ReadModelAndDrafter" not in sids
    assert sorted(_text(r) for r in get["Resource"]) == sorted(
        f"arn:<AWS::Partition>:s3:::{bucket}/{k}*" for k in (model_key, drafter_key)
    )
    listing = sids["ListModelPrefixes0"]
    assert set(listing["Condition"]) == {"StringLike"}
    assert listing["Action"] == "s3:ListBucket"
    assert _text(listing["Resource"]) == f"arn:<AWS::Partition>:s3:::{bucket}"
    assert sorted(listing["Condition"]["StringLike"]["s3:prefix"]) == sorted(
        [f"{model_key}*", f"{drafter_key}*"]
    )


def test_execution_role_pulls_only_the_image_repository(stage_synth: Synthesized) -> None:
    stack = "PeagleEndpoint-staging"
    sids = _by_sid(_statements(stage_synth, stack, "ExecutionRolePolicy"))
    pull = sids["PullServingImage"]
    assert _text(pull["Resource"]) == (
        "arn:<AWS::Partition>:ecr:us-east-1:763104351884:repository/vllm"
    )
    assert "ecr:GetAuthorizationToken" not in pull["Action"]
    assert sids["EcrAuthToken"] == {
        "Sid": "EcrAuthToken",
        "Action": "ecr:GetAuthorizationToken",
        "Effect": "Allow",
        "Resource": "*",
    }


def test_execution_role_writes_only_its_log_group_and_needs_no_key_on_nvme(
    stage_synth: Synthesized,
) -> None:
    stack = "PeagleEndpoint-prod"
    sids = _by_sid(_statements(stage_synth, stack, "ExecutionRolePolicy"))
    logs = sids["WriteOwnLogGroup"]
    assert _text(logs["Resource"]) == (
        "arn:<AWS::Partition>:logs:us-east-1:<AWS::AccountId>:log-group:"
        "/aws/sagemaker/Endpoints/peagle-gpt-oss-20b-prod:*"
    )
    assert sorted(logs["Action"]) == [
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:DescribeLogStreams",
        "logs:PutLogEvents",
    ]
    metrics = sids["PutInstanceMetrics"]
    assert metrics["Action"] == "cloudwatch:PutMetricData"
    assert metrics["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}
    }
    # g7e: the stack key encrypts only the log groups (CloudWatch Logs uses it through
    # the key policy), so the role gets no KMS permission at all.
    # Nothing else: S3, ECR, logs, instance metrics.
    assert set(sids) == {
        "ReadJumpStartModelData",
        "ListModelPrefixes0",
        "PullServingImage",
        "EcrAuthToken",
        "WriteOwnLogGroup",
        "PutInstanceMetrics",
    }


def test_execution_role_for_custom_model_object_and_vpc(edge_synth: Synthesized) -> None:
    sids = _by_sid(_statements(edge_synth, EDGE, "ExecutionRolePolicy"))
    assert sorted(_text(r) for r in sids["ReadModelAndDrafter"]["Resource"]) == [
        "arn:<AWS::Partition>:s3:::acme-drafters/qwen3-p-eagle/*",
        "arn:<AWS::Partition>:s3:::acme-models/qwen3/model.tar.gz",  # one object, no wildcard
    ]
    # Only the drafter prefix needs listing; the tarball is one object.
    assert (
        _text(sids["ListModelPrefixes0"]["Resource"]) == "arn:<AWS::Partition>:s3:::acme-drafters"
    )
    assert "ListModelPrefixes1" not in sids
    # the account's own buckets: only while the stack's account owns them
    pinned = {"StringEquals": {"s3:ResourceAccount": EDGE_ACCOUNT}}
    assert sids["ReadModelAndDrafter"]["Condition"] == pinned
    assert sids["ListModelPrefixes0"]["Condition"]["StringEquals"] == pinned["StringEquals"]
    assert _text(sids["PullServingImage"]["Resource"]) == (
        f"arn:<AWS::Partition>:ecr:eu-west-1:{EDGE_ACCOUNT}:repository/team/peagle-vllm"
    )
    eni = sids["VpcNetworkInterfaces"]
    assert "ec2:CreateNetworkInterface" in eni["Action"]
    resources = sorted(_text(r) for r in eni["Resource"])
    assert resources == [
        f"arn:<AWS::Partition>:ec2:eu-west-1:{EDGE_ACCOUNT}:network-interface/*",
        f"arn:<AWS::Partition>:ec2:eu-west-1:{EDGE_ACCOUNT}:security-group/sg-0123456789abcdef0",
        f"arn:<AWS::Partition>:ec2:eu-west-1:{EDGE_ACCOUNT}:subnet/subnet-0123456789abcdef0",
        f"arn:<AWS::Partition>:ec2:eu-west-1:{EDGE_ACCOUNT}:subnet/subnet-0fedcba9876543210",
    ]
    assert sids["VpcDescribe"]["Resource"] == "*"
    assert all(a.startswith("ec2:Describe") for a in sids["VpcDescribe"]["Action"])


def test_execution_role_decrypts_the_stack_key_only_where_it_encrypts_the_volume(
    edge_synth: Synthesized,
) -> None:
    sids = _by_sid(_statements(edge_synth, EDGE, "ExecutionRolePolicy"))
    (key_id,) = edge_synth.resources(EDGE, "AWS::KMS::Key")
    assert sids["DecryptOwnKey"]["Action"] == "kms:Decrypt"
    assert sids["DecryptOwnKey"]["Resource"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_execution_role_decrypts_sse_kms_weights_only_through_s3(edge_synth: Synthesized) -> None:
    """The spec's model-data keys: Decrypt on exactly those ARNs, only via S3."""
    sids = _by_sid(_statements(edge_synth, EDGE, "ExecutionRolePolicy"))
    decrypt = sids["DecryptModelDataViaS3"]
    assert decrypt["Action"] == "kms:Decrypt"
    assert decrypt["Resource"] == EDGE_OVERRIDES["model_data_kms_key_arns"][0]
    assert decrypt["Condition"] == {"StringLike": {"kms:ViaService": "s3.*.amazonaws.com"}}


def test_stage_roles_have_no_vpc_permissions(stage_synth: Synthesized) -> None:
    for stack in STAGES:
        sids = _by_sid(_statements(stage_synth, stack, "ExecutionRolePolicy"))
        assert not {"VpcDescribe", "VpcNetworkInterfaces"} & set(sids)


# --- PeagleEndpoint -------------------------------------------------------------------


@pytest.mark.parametrize("stack", STAGES)
def test_endpoint_config_without_volume_key_on_nvme_instances(
    stage_synth: Synthesized, stack: str
) -> None:
    props = stage_synth.one(stack, "AWS::SageMaker::EndpointConfig")["Properties"]
    assert props["ProductionVariants"][0]["InstanceType"].startswith("ml.g7e.")
    assert "KmsKeyId" not in props  # g7e has local NVMe only: KmsKeyId would be refused
    assert "VolumeSizeInGB" not in props["ProductionVariants"][0]


def test_endpoint_config_uses_stack_key_where_the_volume_is_ebs(edge_synth: Synthesized) -> None:
    props = edge_synth.one(EDGE, "AWS::SageMaker::EndpointConfig")["Properties"]
    (key_id,) = edge_synth.resources(EDGE, "AWS::KMS::Key")
    assert props["KmsKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}


def test_endpoint_config_carries_routing_and_ami(edge: Template) -> None:
    edge.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {
                        "RoutingConfig": {"RoutingStrategy": "PREFIX_AWARE"},
                        "InferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1",
                        "InstanceType": "ml.g7e.4xlarge",
                    }
                )
            ]
        },
    )


def test_endpoint_is_blue_green_and_rolls_back_on_own_alarms(
    prod: Template, stage_synth: Synthesized
) -> None:
    stack = "PeagleEndpoint-prod"
    alarm_ids = sorted(stage_synth.resources(stack, "AWS::CloudWatch::Alarm"))
    prod.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "EndpointName": "peagle-gpt-oss-20b-prod",
            "DeploymentConfig": {
                "BlueGreenUpdatePolicy": {
                    "TrafficRoutingConfiguration": {
                        "Type": "CANARY",
                        "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 25},
                        "WaitIntervalInSeconds": 600,
                    },
                    "TerminationWaitInSeconds": 600,
                    "MaximumExecutionTimeoutInSeconds": 7200,
                },
                "AutoRollbackConfiguration": {
                    "Alarms": Match.array_equals(
                        [{"AlarmName": {"Ref": alarm_id}} for alarm_id in alarm_ids]
                    )
                },
            },
        },
    )


def test_edge_rollback_includes_the_specs_alarms(edge_synth: Synthesized) -> None:
    props = edge_synth.one(EDGE, "AWS::SageMaker::Endpoint")["Properties"]
    alarms = props["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    assert {"AlarmName": "ops-pager"} in alarms
    assert len(alarms) == 3
    routing = props["DeploymentConfig"]["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert routing["Type"] == "LINEAR"
    assert routing["LinearStepSize"] == {"Type": "CAPACITY_PERCENT", "Value": 25}


@pytest.mark.parametrize("stack", STAGES)
def test_endpoint_and_config_depend_on_the_model(stage_synth: Synthesized, stack: str) -> None:
    (model_id,) = stage_synth.resources(stack, MODEL_RESOURCE_TYPE)
    (log_id,) = [
        lid
        for lid in stage_synth.resources(stack, "AWS::Logs::LogGroup")
        if lid.startswith("EndpointLogs")
    ]
    endpoint = stage_synth.one(stack, "AWS::SageMaker::Endpoint")
    config = stage_synth.one(stack, "AWS::SageMaker::EndpointConfig")
    assert model_id in endpoint["DependsOn"]
    assert log_id in endpoint["DependsOn"]
    assert model_id in config["DependsOn"]
    (config_id,) = stage_synth.resources(stack, "AWS::SageMaker::EndpointConfig")
    assert endpoint["Properties"]["EndpointConfigName"] == {
        "Fn::GetAtt": [config_id, "EndpointConfigName"]
    }


def test_model_waits_for_the_execution_role_policy(stage_synth: Synthesized) -> None:
    stack = "PeagleEndpoint-dev"
    model = stage_synth.one(stack, MODEL_RESOURCE_TYPE)
    (policy_id,) = [
        lid
        for lid in stage_synth.resources(stack, "AWS::IAM::Policy")
        if "ExecutionRolePolicy" in lid
    ]
    assert policy_id in model["DependsOn"]


# --- EndpointAlarms -------------------------------------------------------------------


def test_alarms_watch_5xx_and_model_latency_with_stage_thresholds(prod: Template) -> None:
    dims = Match.array_with([{"Name": "EndpointName", "Value": "peagle-gpt-oss-20b-prod"}])
    prod.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/SageMaker",
            "MetricName": "Invocation5XXErrors",
            "Statistic": "Sum",
            "Threshold": 3,  # cdk.json prod: errors_5xx_per_minute
            "EvaluationPeriods": 2,
            "Dimensions": dims,
            "TreatMissingData": "notBreaching",
        },
    )
    prod.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/SageMaker",
            "MetricName": "ModelLatency",
            "ExtendedStatistic": "p90",
            "Threshold": 45_000_000,  # 45000 ms in microseconds
            "Dimensions": dims,
        },
    )


def test_alarm_defaults_apply_where_the_stage_sets_none(stage_synth: Synthesized) -> None:
    alarms = stage_synth.resources("PeagleEndpoint-dev", "AWS::CloudWatch::Alarm").values()
    thresholds = {a["Properties"]["MetricName"]: a["Properties"]["Threshold"] for a in alarms}
    assert thresholds == {"Invocation5XXErrors": 5, "ModelLatency": 60_000_000}


# --- AcceptanceMetrics ----------------------------------------------------------------


def test_metric_filters_come_from_the_container_contract(stage_synth: Synthesized) -> None:
    stack = "PeagleEndpoint-staging"
    (log_id,) = [
        lid
        for lid in stage_synth.resources(stack, "AWS::Logs::LogGroup")
        if lid.startswith("EndpointLogs")
    ]
    filters = stage_synth.resources(stack, "AWS::Logs::MetricFilter").values()
    own = stage_synth.stacks[stack].plan.endpoint_name
    seen = {}
    for f in filters:
        props = f["Properties"]
        assert props["FilterPattern"] == metric_filter_pattern(own)
        assert props["LogGroupName"] == {"Ref": log_id}
        (transform,) = props["MetricTransformations"]
        assert transform["MetricNamespace"] == METRIC_NAMESPACE
        # one metric per endpoint: the dimension comes from the line's EndpointName field,
        # which the pattern pins to the stack's own endpoint
        assert transform["Dimensions"] == [
            {"Key": METRIC_DIMENSION, "Value": metric_dimension_selector()}
        ]
        seen[transform["MetricName"]] = (transform["MetricValue"], transform["Unit"])
    assert seen == {f.metric_name: (metric_value_selector(f), f.unit) for f in METRIC_FIELDS}


def _line(environ: dict[str, str]) -> dict[str, Any]:
    """A metric line as the container prints it with this environment."""
    values = {f.json_key: 1.5 for f in METRIC_FIELDS}
    line = format_metric_line(values, timestamp_ms=0, dimensions=metric_dimensions(environ))
    doc: dict[str, Any] = json.loads(line)
    return doc


@pytest.mark.parametrize("stack", STAGES)
def test_a_stage_metric_filter_publishes_only_lines_naming_its_own_endpoint(
    stage_synth: Synthesized, stack: str
) -> None:
    """A metric filter's dimension value can only be a field of the line, so a container
    naming another stage's endpoint (an `env` override, an image of its own) would have
    published under it (issue 34, Low 3): the pattern now matches only lines naming the
    stack's own endpoint. Judged by LocalStack's CloudWatch Logs JSON filter-pattern
    matcher (aws-json-term-matcher), not by the project's own reading of the syntax."""
    from aws_json_term_matcher.matcher import match

    own = stage_synth.stacks[stack].plan.endpoint_name
    filters = stage_synth.resources(stack, "AWS::Logs::MetricFilter").values()
    (pattern,) = {f["Properties"]["FilterPattern"] for f in filters}
    assert match(_line({ENDPOINT_NAME_ENV: own}), pattern)
    assert match(_line({ENDPOINT_NAME_ENV: own, VARIANT_NAME_ENV: "Candidate"}), pattern)
    assert not match(_line({}), pattern)  # unnamed: no endpoint's
    assert not match({"event": "other", METRIC_DIMENSION: own}, pattern)
    others = [stage_synth.stacks[s].plan.endpoint_name for s in STAGES if s != stack]
    for other in others:
        assert not match(_line({ENDPOINT_NAME_ENV: other}), pattern), other


def test_the_endpoint_pattern_is_what_cdks_filter_pattern_builder_renders() -> None:
    """The pattern is the documented JSON syntax as aws-cdk-lib's own builder writes it
    (`FilterPattern.all` of two `stringValue`s); a name that is no endpoint's is refused
    rather than written into a pattern."""
    from aws_cdk import aws_logs as logs

    name = "peagle-gpt-oss-20b-dev"
    built = logs.FilterPattern.all(
        logs.FilterPattern.string_value("$.event", "=", METRIC_EVENT),
        logs.FilterPattern.string_value(f"$.{METRIC_DIMENSION}", "=", name),
    )
    assert metric_filter_pattern(name) == built.log_pattern_string
    for bad in ('x" || $.event = "peagle.spec_decode', "a b", "", "-x"):
        with pytest.raises(ValueError):
            metric_filter_pattern(bad)


def test_endpoint_log_group_has_the_sagemaker_name_and_stage_retention(
    stage_synth: Synthesized,
) -> None:
    for stack, days in (("PeagleEndpoint-dev", 14), ("PeagleEndpoint-prod", 365)):
        groups = stage_synth.resources(stack, "AWS::Logs::LogGroup")
        (group,) = [g for lid, g in groups.items() if lid.startswith("EndpointLogs")]
        plan = stage_synth.stacks[stack].plan
        assert group["Properties"]["LogGroupName"] == (
            f"/aws/sagemaker/Endpoints/{plan.endpoint_name}"
        )
        assert group["Properties"]["RetentionInDays"] == days


# --- EndpointDashboard ----------------------------------------------------------------


def test_dashboard_shows_traffic_alarms_and_acceptance(stage_synth: Synthesized) -> None:
    stack = "PeagleEndpoint-prod"
    dashboard = stage_synth.one(stack, "AWS::CloudWatch::Dashboard")["Properties"]
    assert dashboard["DashboardName"] == "peagle-gpt-oss-20b-prod"
    body = _text(dashboard["DashboardBody"])
    for name in ("InvocationsPerInstance", "AcceptanceRate", "MeanAcceptanceLength"):
        assert name in body
    assert METRIC_NAMESPACE in body
    for alarm_id in stage_synth.resources(stack, "AWS::CloudWatch::Alarm"):
        assert f"<{alarm_id}.Arn>" in body


# --- EndpointAutoscaling --------------------------------------------------------------


def test_autoscaling_uses_spec_bounds_and_invocations_per_instance(
    stage_synth: Synthesized,
) -> None:
    stack = "PeagleEndpoint-prod"
    target = stage_synth.one(stack, "AWS::ApplicationAutoScaling::ScalableTarget")
    props = dict(target["Properties"])
    assert sorted(props.pop("Tags"), key=lambda t: t["Key"]) == sorted(
        stage_synth.stacks[stack].plan.tags, key=lambda t: t["Key"]
    )
    assert props == {
        "MaxCapacity": 4,
        "MinCapacity": 2,
        "ResourceId": "endpoint/peagle-gpt-oss-20b-prod/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "ServiceNamespace": "sagemaker",
        "SuspendedState": {  # written out: no experiment runs (infra/scaling.py)
            "DynamicScalingInSuspended": False,
            "DynamicScalingOutSuspended": False,
            "ScheduledScalingSuspended": False,
        },
    }  # no RoleARN: Application Auto Scaling's SageMaker service-linked role
    (endpoint_id,) = stage_synth.resources(stack, "AWS::SageMaker::Endpoint")
    assert endpoint_id in target["DependsOn"]
    policy = stage_synth.one(stack, "AWS::ApplicationAutoScaling::ScalingPolicy")["Properties"]
    tracking = policy["TargetTrackingScalingPolicyConfiguration"]
    assert policy["PolicyType"] == "TargetTrackingScaling"
    assert tracking["TargetValue"] == 20
    assert tracking["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
    }


# --- Template assertions, one per construct (aws_cdk.assertions) ----------------------


def test_template_assertions_per_construct(prod: Template) -> None:
    # ExecutionRole
    prod.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    Match.object_like({"Principal": {"Service": "sagemaker.amazonaws.com"}})
                ]
            },
            "ManagedPolicyArns": Match.absent(),
        },
    )
    # PeagleModel
    prod.has_resource(
        MODEL_RESOURCE_TYPE,
        {
            "Properties": Match.object_like({"CreateModel": Match.any_value()}),
            "DeletionPolicy": "Delete",
        },
    )
    # AcceptanceMetrics
    for field in METRIC_FIELDS:
        prod.has_resource_properties(
            "AWS::Logs::MetricFilter",
            {
                "FilterPattern": metric_filter_pattern("peagle-gpt-oss-20b-prod"),
                "MetricTransformations": [
                    Match.object_like(
                        {
                            "MetricNamespace": METRIC_NAMESPACE,
                            "MetricName": field.metric_name,
                            "MetricValue": metric_value_selector(field),
                        }
                    )
                ],
            },
        )
    # EndpointDashboard
    prod.resource_properties_count_is(
        "AWS::CloudWatch::Dashboard", {"DashboardName": "peagle-gpt-oss-20b-prod"}, 1
    )
    # EndpointAutoscaling
    prod.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"MinCapacity": 2, "MaxCapacity": 4, "RoleARN": Match.absent()},
    )
    prod.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {"PolicyName": "peagle-gpt-oss-20b-prod-invocations"},
    )
    # Outputs
    prod.has_output("EndpointName", {"Value": "peagle-gpt-oss-20b-prod"})
    prod.has_output("ExecutionRoleArn", {"Value": {"Fn::GetAtt": Match.any_value()}})


def test_template_assertions_fail_on_a_wrong_expectation(prod: Template) -> None:
    """The assertions above can fail: a wrong bound is reported."""
    with pytest.raises(Exception, match="ScalableTarget"):
        prod.has_resource_properties(
            "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 3}
        )
