"""deploy_peagle's lifecycle and fault handling; each test checks the state afterwards."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from sdk_testkit import MODEL, REGION, ROLE, AwsEnv

from peagle_deploy.errors import DeployError, EndpointFailedError, InputError
from peagle_deploy.plan import MANAGED_TAG, SPEC_HASH_TAG, STAGE_TAG
from peagle_deploy.sdk import (
    PeagleEndpoint,
    WaitInterrupted,
    WaitTimeoutError,
    deploy_peagle,
    plan_for,
    read_manifest,
    waiter,
)

NAME = "peagle-qwen3-coder-30b-a3b-instruct-dev"


def _deploy(aws: AwsEnv, **kwargs: Any) -> PeagleEndpoint:
    kwargs.setdefault("role_arn", ROLE)
    kwargs.setdefault("progress", False)
    return deploy_peagle(MODEL, boto_session=aws.session, **kwargs)


def _tags(aws: AwsEnv, arn: str) -> dict[str, str]:
    tags = aws.client("sagemaker").list_tags(ResourceArn=arn)["Tags"]
    return {t["Key"]: t["Value"] for t in tags}


def test_fresh_create_tags_everything_and_records_manifest(aws: AwsEnv) -> None:
    aws.ext.script_endpoint(NAME, creating_s=30.0)
    endpoint = _deploy(aws)
    out = endpoint.deployment
    assert out is not None
    assert (out.action, out.status) == ("create", "InService")
    assert endpoint.status() == "InService"
    names = aws.names()
    assert names == {
        "endpoints": [NAME],
        "configs": [out.endpoint_config_name],
        "models": [out.model_name],
    }
    sm = aws.client("sagemaker")
    arns = [
        sm.describe_endpoint(EndpointName=NAME)["EndpointArn"],
        sm.describe_endpoint_config(EndpointConfigName=out.endpoint_config_name)[
            "EndpointConfigArn"
        ],
        sm.describe_model(ModelName=out.model_name)["ModelArn"],
    ]
    for arn in arns:
        tags = _tags(aws, arn)
        assert tags[MANAGED_TAG] == "true"
        assert tags[STAGE_TAG] == "dev"
        assert tags[SPEC_HASH_TAG] == out.content_hash
    manifest = read_manifest("dev", NAME, region=REGION, boto_session=aws.session)
    assert manifest is not None
    assert manifest.content_hash == out.content_hash
    assert manifest.endpoint_config_name == out.endpoint_config_name
    assert manifest.spec.model == MODEL
    assert out.manifest_parameter == f"/peagle-deploy/dev/{NAME}/manifest"


def test_same_spec_again_makes_no_mutating_call(aws: AwsEnv) -> None:
    _deploy(aws)
    aws.calls.clear()
    again = _deploy(aws)
    assert again.deployment is not None and again.deployment.action == "noop"
    assert aws.mutating_calls() == []
    # ListTags: the endpoint must be this stage's (its peagle:stage tag);
    # DescribeModel: the existing model's role must be the plan's (names leave it out).
    assert aws.calls == ["DescribeEndpoint", "ListTags", "DescribeModel", "GetParameter"]


def test_changed_spec_updates_blue_green_and_removes_old_resources(aws: AwsEnv) -> None:
    first = _deploy(aws).deployment
    assert first is not None
    aws.ext.script_endpoint(NAME, updating_s=12.0)
    second = _deploy(
        aws,
        num_speculative_tokens=5,
        alarms=["peagle-p99-latency"],
        rollout={"strategy": "canary"},
    ).deployment
    assert second is not None
    assert second.action == "update"
    assert second.previous_config == first.endpoint_config_name
    desc = aws.client("sagemaker").describe_endpoint(EndpointName=NAME)
    assert desc["EndpointConfigName"] == second.endpoint_config_name
    deployment = desc["LastDeploymentConfig"]
    routing = deployment["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert routing["Type"] == "CANARY"
    assert deployment["AutoRollbackConfiguration"]["Alarms"] == [
        {"AlarmName": "peagle-p99-latency"}
    ]
    assert aws.names() == {
        "endpoints": [NAME],
        "configs": [second.endpoint_config_name],
        "models": [second.model_name],
    }
    assert _tags(aws, desc["EndpointArn"])[SPEC_HASH_TAG] == second.content_hash
    manifest = read_manifest("dev", NAME, region=REGION, boto_session=aws.session)
    assert manifest is not None and manifest.content_hash == second.content_hash


def test_create_that_fails_is_explained_and_cleaned_up(aws: AwsEnv) -> None:
    reason = (
        "The primary container for production variant AllTraffic did not pass the ping "
        "health check."
    )
    aws.ext.script_endpoint(
        NAME,
        creating_s=60.0,
        fail_reason=reason,
        log_lines=["INFO loading target", "ValueError: drafter has no mask_hidden weight"],
    )
    with pytest.raises(EndpointFailedError) as caught:
        _deploy(aws)
    err = caught.value
    assert err.failure_reason == reason
    assert err.log_tail[-1] == "ValueError: drafter has no mask_hidden weight"
    assert "mask_hidden" in str(err) and "removed what this deploy created" in str(err)
    assert aws.names() == {"endpoints": [], "configs": [], "models": []}


def test_update_that_rolls_back_keeps_old_config_serving(aws: AwsEnv) -> None:
    first = _deploy(aws).deployment
    assert first is not None
    aws.ext.script_endpoint(
        NAME,
        updating_s=60.0,
        rollback_on_update=True,
        rolling_back_s=30.0,
        rollback_reason="Alarm peagle-5xx went into ALARM during the canary",
        log_lines=["ERROR CUDA out of memory while loading drafter"],
    )
    with pytest.raises(DeployError) as caught:
        _deploy(aws, num_speculative_tokens=5)
    message = str(caught.value)
    assert "rolled back" in message and "peagle-5xx" in message
    assert f"still serves the old config {first.endpoint_config_name}" in message
    assert "CUDA out of memory" in message
    desc = aws.client("sagemaker").describe_endpoint(EndpointName=NAME)
    assert (desc["EndpointStatus"], desc["EndpointConfigName"]) == (
        "InService",
        first.endpoint_config_name,
    )
    assert aws.names() == {
        "endpoints": [NAME],
        "configs": [first.endpoint_config_name],
        "models": [first.model_name],
    }
    manifest = read_manifest("dev", NAME, region=REGION, boto_session=aws.session)
    assert manifest is not None and manifest.content_hash == first.content_hash


def test_wait_timeout_leaves_endpoint_going_and_redeploy_resumes(aws: AwsEnv) -> None:
    aws.ext.script_endpoint(NAME, creating_s=40.0)
    with pytest.raises(WaitTimeoutError) as caught:
        _deploy(aws, timeout_s=10.0)
    assert f"peagle status {NAME} --wait" in str(caught.value)
    assert caught.value.status == "Creating"
    names = aws.names()
    assert names["endpoints"] == [NAME] and len(names["configs"]) == 1
    assert len(names["models"]) == 1
    assert read_manifest("dev", NAME, region=REGION, boto_session=aws.session) is None
    resumed = _deploy(aws)
    assert resumed.deployment is not None and resumed.deployment.action == "resume"
    assert resumed.status() == "InService"
    assert read_manifest("dev", NAME, region=REGION, boto_session=aws.session) is not None


def test_ctrl_c_during_wait_leaves_endpoint_and_says_how_to_resume(
    aws: AwsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    aws.ext.script_endpoint(NAME, creating_s=600.0)

    def interrupted_sleep(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(waiter, "_sleep", interrupted_sleep)
    with pytest.raises(WaitInterrupted) as caught:
        _deploy(aws)
    assert isinstance(caught.value, KeyboardInterrupt)
    assert f"peagle status {NAME} --wait" in str(caught.value)
    assert caught.value.status == "Creating"
    assert aws.client("sagemaker").describe_endpoint(EndpointName=NAME)["EndpointStatus"] == (
        "Creating"
    )
    assert len(aws.names()["models"]) == 1  # nothing was cleaned up: it is still going


def test_delete_is_complete_and_tolerates_already_gone(aws: AwsEnv) -> None:
    _deploy(aws)
    _deploy(aws, num_speculative_tokens=5)
    handle = PeagleEndpoint.from_name(NAME, region=REGION, boto_session=aws.session)
    result = handle.delete()
    assert result.endpoint_deleted
    assert len(result.endpoint_configs) == 1 and len(result.models) == 1
    assert aws.names() == {"endpoints": [], "configs": [], "models": []}
    # The manifest goes too: a later promotion must not read a deleted endpoint's record.
    assert result.manifest_parameter == f"/peagle-deploy/dev/{NAME}/manifest"
    assert read_manifest("dev", NAME, region=REGION, boto_session=aws.session) is None
    again = handle.delete()
    assert again.to_json() == {
        "endpoint_name": NAME,
        "endpoint_deleted": False,
        "endpoint_configs_deleted": [],
        "models_deleted": [],
        "scalable_targets_deregistered": [],
        "manifest_deleted": None,
        "manifest_error": None,
    }


def test_delete_finds_the_manifest_of_an_endpoint_deleted_elsewhere(aws: AwsEnv) -> None:
    """Deleted in the console (no stage tag to read any more): the manifest is found by
    its endpoint name among the stages' manifests, and only that one is removed."""
    _deploy(aws)
    _deploy(aws, stage="staging", endpoint_name="other-staging")
    aws.client("sagemaker").delete_endpoint(EndpointName=NAME)
    result = PeagleEndpoint.from_name(NAME, region=REGION, boto_session=aws.session).delete()
    assert not result.endpoint_deleted
    assert result.manifest_parameter == f"/peagle-deploy/dev/{NAME}/manifest"
    assert read_manifest("dev", NAME, region=REGION, boto_session=aws.session) is None
    kept = read_manifest("staging", "other-staging", region=REGION, boto_session=aws.session)
    assert kept is not None


def test_autoscaling_applied_and_removed_with_the_endpoint(aws: AwsEnv) -> None:
    endpoint = _deploy(aws, scaling={"min_instances": 1, "max_instances": 3})
    aas = aws.client("application-autoscaling")
    targets = aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    resource = f"endpoint/{NAME}/variant/AllTraffic"
    assert [(t["ResourceId"], t["MaxCapacity"]) for t in targets] == [(resource, 3)]
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    assert [p["PolicyType"] for p in policies] == ["TargetTrackingScaling"]
    result = endpoint.delete()
    assert result.scalable_targets == [resource]
    assert aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"] == []


def test_race_same_spec_joins_the_other_deploy(aws: AwsEnv) -> None:
    """Another deploy of the same spec creates the endpoint between our look and create."""
    other = plan_for(MODEL, role_arn=ROLE)
    sm = aws.client("sagemaker")
    fired: list[bool] = []

    def racer(**_: Any) -> None:
        if fired:
            return
        fired.append(True)
        sm.create_endpoint(**other.create_endpoint)  # the other deploy wins the race

    aws.on("before-call.sagemaker.CreateEndpoint", racer)
    out = _deploy(aws).deployment
    assert out is not None
    assert out.action == "resume"
    assert "another deploy of the same spec" in " ".join(out.warnings)
    assert aws.names()["endpoints"] == [NAME]
    assert len(aws.names()["configs"]) == 1


def test_race_different_spec_backs_off_without_orphans(aws: AwsEnv) -> None:
    other = plan_for(MODEL, role_arn=ROLE, num_speculative_tokens=5)
    sm = aws.client("sagemaker")
    fired: list[bool] = []

    def racer(**_: Any) -> None:
        if fired:
            return
        fired.append(True)
        sm.create_model(**other.create_model)
        sm.create_endpoint_config(**other.create_endpoint_config)
        sm.create_endpoint(**other.create_endpoint)

    aws.on("before-call.sagemaker.CreateEndpoint", racer)
    with pytest.raises(DeployError, match="created concurrently by another deployment"):
        _deploy(aws)
    assert aws.names() == {
        "endpoints": [NAME],
        "configs": [other.endpoint_config_name],
        "models": [other.model_name],
    }


def test_busy_endpoint_with_another_config_is_not_touched(aws: AwsEnv) -> None:
    aws.ext.script_endpoint(NAME, creating_s=10_000.0)
    _deploy(aws, wait=False)
    before = aws.names()
    aws.calls.clear()
    with pytest.raises(DeployError, match="another deployment is in progress"):
        _deploy(aws, num_speculative_tokens=5)
    assert aws.mutating_calls() == []
    assert aws.names() == before


def test_failed_endpoint_is_replaced(aws: AwsEnv) -> None:
    aws.ext.script_endpoint(NAME, creating_s=10.0, fail_reason="capacity")
    first = _deploy(aws, wait=False).deployment
    assert first is not None and first.status == "Creating"
    aws.clock.advance(20.0)
    assert aws.client("sagemaker").describe_endpoint(EndpointName=NAME)["EndpointStatus"] == (
        "Failed"
    )
    aws.ext.script_endpoint(NAME, creating_s=10.0)
    out = _deploy(aws).deployment
    assert out is not None
    assert (out.action, out.status) == ("recreate", "InService")
    assert f"endpoint:{NAME}" in out.removed


def test_throttled_create_is_retried(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    from types import SimpleNamespace

    import botocore.endpoint
    import botocore.retries.bucket

    # botocore's own backoff sleeps are recorded instead of slept. Standard mode: adaptive
    # (the default) adds a token-bucket rate limiter that waits on a real-time condition.
    monkeypatch.setenv("PEAGLE_AWS_RETRY_MODE", "standard")
    backoff: list[float] = []
    fake_time = SimpleNamespace(sleep=backoff.append, time=time.time, monotonic=time.monotonic)
    monkeypatch.setattr(botocore.endpoint, "time", fake_time)
    monkeypatch.setattr(botocore.retries.bucket, "time", fake_time)
    attempts: list[str] = []

    def throttle(request: Any, **_: Any) -> AWSResponse | None:
        attempts.append("send")
        if len(attempts) > 2:
            return None
        body = json.dumps({"__type": "ThrottlingException", "message": "Rate exceeded"})

        class Raw:
            def stream(self, **_: Any) -> Any:
                yield body.encode()

        headers = HTTPHeaders()
        headers["x-amzn-ErrorType"] = "ThrottlingException"
        return AWSResponse(request.url, 400, headers, Raw())

    aws.on("before-send.sagemaker.CreateModel", throttle)
    out = _deploy(aws).deployment
    assert out is not None and out.status == "InService"
    assert len(attempts) == 3  # two throttled attempts, then the real one
    assert len([d for d in backoff if d > 0]) >= 1  # botocore backed off between them
    assert aws.calls.count("CreateModel") == 1  # one API call, retried inside botocore
    assert len(aws.names()["models"]) == 1


def test_placeholder_role_refused_before_any_call(aws: AwsEnv) -> None:
    with pytest.raises(InputError, match="execution_role_arn") as caught:
        deploy_peagle(MODEL, boto_session=aws.session, progress=False)
    assert "placeholder" in str(caught.value)
    with pytest.raises(InputError, match="placeholder"):
        _deploy(aws, role_arn="arn:aws:iam::000000000000:role/anything")
    assert aws.calls == []


def test_dry_run_only_reads(aws: AwsEnv) -> None:
    out = _deploy(aws, dry_run=True).deployment
    assert out is not None and (out.action, out.status, out.dry_run) == ("create", "absent", True)
    _deploy(aws)
    aws.calls.clear()
    out = _deploy(aws, dry_run=True, num_speculative_tokens=5).deployment
    assert out is not None and out.action == "update"
    assert aws.mutating_calls() == []


def test_chat_and_stream_through_the_handle(aws: AwsEnv) -> None:
    endpoint = _deploy(aws)
    messages = [{"role": "user", "content": "Explain parallel drafting in one line."}]
    answer = endpoint.chat(messages, max_tokens=9, temperature=0.3)
    assert answer.usage is not None and answer.usage["completion_tokens"] == 9
    stream = endpoint.stream(messages, max_tokens=9)
    deltas = list(stream)
    assert "".join(deltas) == answer.text == stream.text
    assert stream.usage == answer.usage
    assert stream.finish_reason == "length"


@pytest.mark.parametrize("aws", ["server"], indirect=True)
def test_two_threads_deploying_the_same_spec_both_succeed(aws: AwsEnv) -> None:
    """Real concurrency over loopback HTTP: one creates, the other joins; one of each."""
    import threading

    aws.ext.script_endpoint(NAME, creating_s=30.0)
    outcomes: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def run() -> None:
        try:
            barrier.wait()
            out = _deploy(aws).deployment
            assert out is not None
            outcomes.append(f"{out.action}:{out.status}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert sorted(outcomes)[-1] in ("create:InService", "resume:InService")
    assert all(o.endswith(":InService") for o in outcomes) and len(outcomes) == 2
    names = aws.names()
    assert names["endpoints"] == [NAME]
    assert len(names["configs"]) == 1 and len(names["models"]) == 1


def test_interrupted_update_is_finished_by_the_next_deploy(
    aws: AwsEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _deploy(aws).deployment
    assert first is not None
    aws.ext.script_endpoint(NAME, updating_s=50.0)

    def interrupted_sleep(seconds: float) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(waiter, "_sleep", interrupted_sleep)
        with pytest.raises(WaitInterrupted):
            _deploy(aws, num_speculative_tokens=5)
    desc = aws.client("sagemaker").describe_endpoint(EndpointName=NAME)
    assert desc["EndpointStatus"] == "Updating"
    assert desc["EndpointConfigName"] == first.endpoint_config_name  # old still serves
    out = _deploy(aws, num_speculative_tokens=5).deployment
    assert out is not None and (out.action, out.status) == ("resume", "InService")
    assert out.previous_config == first.endpoint_config_name
    assert aws.names() == {
        "endpoints": [NAME],
        "configs": [out.endpoint_config_name],
        "models": [out.model_name],
    }
    arn = aws.client("sagemaker").describe_endpoint(EndpointName=NAME)["EndpointArn"]
    assert _tags(aws, arn)[SPEC_HASH_TAG] == out.content_hash


def test_stream_broken_off_by_the_model_is_a_clear_error(aws: AwsEnv) -> None:
    from peagle_deploy.sdk import InvokeError

    endpoint = _deploy(aws)
    aws.ext.set_stream(fail_after_tokens=3)
    stream = endpoint.stream([{"role": "user", "content": "hi"}], max_tokens=20)
    with pytest.raises(InvokeError, match=f"stream from endpoint {NAME} broke off"):
        list(stream)
    assert stream.text  # what arrived before the break is kept
    with pytest.raises(InvokeError, match="not found"):
        PeagleEndpoint.from_name("nope", boto_session=aws.session).chat(
            [{"role": "user", "content": "hi"}]
        )


def test_update_sweeps_leftovers_of_no_wait_updates(aws: AwsEnv) -> None:
    first = _deploy(aws).deployment
    aws.ext.script_endpoint(NAME, updating_s=10.0)
    second = _deploy(aws, num_speculative_tokens=4, wait=False).deployment
    assert first is not None and second is not None and second.status == "Updating"
    aws.clock.advance(20.0)  # the no-wait update finished; nobody removed the old config
    assert len(aws.names()["configs"]) == 2
    third = _deploy(aws, num_speculative_tokens=5).deployment
    assert third is not None and third.action == "update"
    assert aws.names() == {
        "endpoints": [NAME],
        "configs": [third.endpoint_config_name],
        "models": [third.model_name],
    }
    assert f"endpoint-config:{first.endpoint_config_name}" in third.removed


def test_deploy_a_plan_as_built(aws: AwsEnv) -> None:
    """`plan=`: the caller's plan is deployed as it is (no second planning), and mixing it
    with what to plan is refused before any AWS call."""
    plan = plan_for(MODEL, role_arn=ROLE, region=REGION, num_speculative_tokens=4)
    endpoint = deploy_peagle(plan=plan, boto_session=aws.session, progress=False)
    assert endpoint.plan is plan
    assert endpoint.deployment is not None and endpoint.deployment.action == "create"
    config = endpoint.describe()["EndpointConfigName"]
    assert config == plan.endpoint_config_name
    calls = len(aws.calls)
    for extra in ({"model": MODEL}, {"stage": "prod"}, {"spec_file": "spec.yaml"}):
        with pytest.raises(InputError) as caught:
            deploy_peagle(plan=plan, boto_session=aws.session, **extra)
        assert caught.value.field == "plan"
    assert len(aws.calls) == calls


@pytest.mark.parametrize("aws", ["inprocess"], indirect=True)
def test_cli_deploy_plans_once(
    aws: AwsEnv, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from peagle_deploy import plan as plan_module
    from peagle_deploy.cli.app import main

    built: list[str] = []
    build_plan = plan_module.build_plan

    def counting(spec: Any) -> Any:
        built.append(spec.model)
        return build_plan(spec)

    monkeypatch.setattr(plan_module, "build_plan", counting)
    monkeypatch.setattr("peagle_deploy.sdk.deploy.build_plan", counting)
    assert main(["deploy", MODEL, "--role-arn", ROLE, "--no-progress", "--json"]) == 0
    assert built == [MODEL]
    assert '"action": "create"' in capsys.readouterr().out


def test_an_endpoint_whose_config_predates_its_identity_is_updated_and_the_old_one_reported(
    aws: AwsEnv,
) -> None:
    """A long endpoint name deployed before its head carried the name's digest (issue 29)
    served `<first 53 characters>-c...`: the update moves it to the identity's names and
    says what it left (those names may be another endpoint's too: never removed by name)."""
    long = "peagle-" + "a-long-custom-endpoint-name-for-the-identity-test" + "-dev"
    assert len(long) > 53
    plan = plan_for(MODEL, role_arn=ROLE, endpoint_name=long)
    legacy = long[:53].rstrip("-")
    sm = aws.client("sagemaker")
    model = {**plan.create_model, "ModelName": f"{legacy}-m0123abcd"}
    sm.create_model(**model)
    variant = {
        **plan.create_endpoint_config["ProductionVariants"][0],
        "ModelName": model["ModelName"],
    }
    config = f"{legacy}-c0123abcd"
    sm.create_endpoint_config(EndpointConfigName=config, ProductionVariants=[variant])
    aws.ext.script_endpoint(long, creating_s=1.0)
    sm.create_endpoint(EndpointName=long, EndpointConfigName=config)
    aws.clock.advance(5.0)
    assert sm.describe_endpoint(EndpointName=long)["EndpointStatus"] == "InService"

    out = _deploy(aws, endpoint_name=long).deployment
    assert out is not None and out.action == "update" and out.previous_config == config
    assert not out.endpoint_config_name.startswith(legacy)
    (left,) = [w for w in out.warnings if "left endpoint config" in w]
    assert config in left and "delete them once nothing uses them" in left
    names = aws.names()
    assert config in names["configs"] and model["ModelName"] in names["models"]
    assert out.endpoint_config_name in names["configs"]
