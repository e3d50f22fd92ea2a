"""An experiment on SageMaker's own mechanisms, against the emulator.

Shadow experiments run as an InferenceExperiment (its sampling share is what the
candidate sees); a start that fails leaves nothing behind; an interrupted start is
resumed by `start`; stream errors, which SageMaker's 5XX count misses, trip the error
guardrail; an image other than the project's is compared through SageMaker's detailed
observability (PromQL over real HTTP, signed as on AWS).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
from peagle_local.emulator import LocalAWS, MotoExtensions
from peagle_local.emulator.traffic import VariantBehaviour
from test_experiment_lifecycle import FAST, REGION, ROLE, Wall, make_spec, moto_env

from peagle_deploy.experiment import common, shadow
from peagle_deploy.experiment.lifecycle import (
    ExperimentError,
    abort_experiment,
    conclude_experiment,
    experiment_status,
    start_experiment,
)
from peagle_deploy.experiment.plan import experiment_plan, incumbent_spec
from peagle_deploy.records import ExperimentRecord, read_record
from peagle_deploy.sdk import deploy_peagle, waiter
from peagle_deploy.sdk.waiter import Interrupted

AWS_VLLM = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.30.0-gpu-py312-cu130"


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> Wall:
    w = Wall()
    monkeypatch.setattr(common, "now", w.datetime)
    monkeypatch.setattr(waiter, "_sleep", lambda s: None)
    return w


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch, wall: Wall) -> Iterator[MotoExtensions]:
    from moto import mock_aws

    moto_env(monkeypatch)
    with mock_aws(), MotoExtensions(seed=11, wall=wall) as ext:
        yield ext


def _role() -> None:
    boto3.client("iam", region_name=REGION).create_role(
        RoleName=ROLE.rpartition("/")[2], AssumeRolePolicyDocument="{}"
    )


def _send(name: str, wall: Wall, n: int, *, stream: bool = False, every_s: float = 7.5) -> int:
    """Send `n` requests; returns how many streams broke off (ModelStreamError events)."""
    from botocore.exceptions import EventStreamError

    rt = boto3.client("sagemaker-runtime", region_name=REGION)
    broken = 0
    for i in range(n):
        body = json.dumps(
            {
                "messages": [{"role": "user", "content": f"q {i}"}],
                "max_tokens": 48,
                "stream": stream,
            }
        )
        if stream:
            out = rt.invoke_endpoint_with_response_stream(
                EndpointName=name, Body=body, ContentType="application/json"
            )
            try:
                for _ in out["Body"]:  # read it all; a broken stream ends in an error event
                    pass
            except EventStreamError as exc:
                assert exc.response["Error"]["Code"] == "ModelStreamError"
                broken += 1
        else:
            rt.invoke_endpoint(EndpointName=name, Body=body, ContentType="application/json")
        wall.now += every_s
    return broken


def test_a_shadow_candidate_sees_its_sampling_share_and_abort_stops_the_experiment(
    emulator: MotoExtensions, wall: Wall
) -> None:
    """The plan accepts shadow 100 % only (equal load per instance, issue 30); that the
    emulator honours other shares is tests/emulator/test_emulator_experiments.py's."""
    _role()
    spec = make_spec(sampling_percent=100)
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    emulator.set_variant(name, "AllTraffic", FAST)
    emulator.set_variant(name, "Candidate", FAST)
    status = start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    experiment = status.record.inference_experiment
    assert experiment is not None and status.to_json()["inference_experiment"] == experiment
    sm = boto3.client("sagemaker", region_name=REGION)
    assert sm.describe_inference_experiment(Name=experiment)["Status"] == "Running"
    _send(name, wall, 200)
    analysis = experiment_status(name).analysis
    assert analysis is not None
    assert analysis.incumbent.invocations == analysis.candidate.invocations == 200
    outcome = abort_experiment(name, progress=False, reason="on-call")
    assert outcome.action == "aborted"
    ended = sm.describe_inference_experiment(Name=experiment)
    assert (ended["Status"], ended["StatusReason"]) == ("Cancelled", "on-call")
    desc = sm.describe_endpoint(EndpointName=name)
    assert desc["EndpointConfigName"] == experiment_plan(spec).incumbent.endpoint_config_name
    assert not desc.get("ShadowProductionVariants")
    assert f"model:{status.record.candidate_model}" in outcome.removed
    models = {m["ModelName"] for m in sm.list_models()["Models"]}
    assert status.record.candidate_model not in models


def test_a_refused_start_leaves_nothing_and_the_incumbent_serving(
    emulator: MotoExtensions, wall: Wall
) -> None:
    spec = make_spec()
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    sm = boto3.client("sagemaker", region_name=REGION)
    before = {m["ModelName"] for m in sm.list_models()["Models"]}
    with pytest.raises(ExperimentError, match="Could not assume role") as caught:
        start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)  # no such role
    assert "still serves" in str(caught.value)
    assert {m["ModelName"] for m in sm.list_models()["Models"]} == before
    assert sm.list_inference_experiments()["InferenceExperiments"] == []
    desc = sm.describe_endpoint(EndpointName=name)
    assert desc["EndpointStatus"] == "InService" and not desc.get("ShadowProductionVariants")
    record = read_record(boto3.client("ssm", region_name=REGION), ExperimentRecord, "dev", name)
    assert record is not None and record.state == "failed"
    _role()
    assert start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE).record.state == (
        "running"
    )


def test_an_interrupted_start_says_how_to_resume_and_start_resumes_it(
    emulator: MotoExtensions, wall: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    _role()
    spec = make_spec()
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    real_state = shadow.state

    def ctrl_c(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(shadow, "state", ctrl_c)
    with pytest.raises(Interrupted) as caught:
        start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    hint = str(caught.value)
    assert f"peagle experiment start {name} --stage dev --file SPEC" in hint
    assert f"peagle experiment abort {name}" in hint
    monkeypatch.setattr(shadow, "state", real_state)
    # SageMaker finishes on its own; status reads it (and only reads: issue 35, status
    # used to store the start as running, and the resumed start then refused to run)
    ssm = boto3.client("ssm", region_name=REGION)
    parameter = f"/peagle-deploy/dev/{name}/experiment"
    version = ssm.get_parameter(Name=parameter)["Parameter"]["Version"]
    seen = experiment_status(name)
    assert seen.record.state == "running" and seen.record.started_at is not None
    assert ssm.get_parameter(Name=parameter)["Parameter"]["Version"] == version
    sm = boto3.client("sagemaker", region_name=REGION)
    (ie,) = sm.list_inference_experiments()["InferenceExperiments"]
    assert ie["Schedule"]["EndTime"] > wall.datetime() + timedelta(days=6)  # status set none
    resumed = start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    assert resumed.record.state == "running"
    assert len(sm.list_inference_experiments()["InferenceExperiments"]) == 1  # the same one
    stored = read_record(ssm, ExperimentRecord, "dev", name)
    assert stored is not None and stored.state == "running"


def test_errors_after_a_stream_started_trip_the_error_guardrail(
    emulator: MotoExtensions, wall: Wall
) -> None:
    """SageMaker counts no 5XX for a stream that fails after its first bytes (the status
    was 200): the containers' count of engine errors is what catches it."""
    _role()
    spec = make_spec(
        mode="split",
        weight_percent=50,
        guardrails={"max_error_rate_percent": 5},
    )
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    emulator.set_variant(name, "AllTraffic", FAST)
    emulator.set_variant(name, "Candidate", VariantBehaviour(stream_error_rate=0.3))
    start_experiment(spec=spec, progress=False)
    broken = _send(name, wall, 120, stream=True, every_s=2.0)
    assert 5 <= broken <= 35  # the candidate answers half, 30 % of those break off
    status = experiment_status(name)
    analysis = status.analysis
    assert analysis is not None
    cw = boto3.client("cloudwatch", region_name=REGION)
    assert _sagemaker_5xx(cw, name, "Candidate", wall) == 0  # SageMaker saw none
    assert [b.guardrail for b in analysis.breaches] == ["max_error_rate_percent"]
    assert conclude_experiment(name, progress=False).action == "aborted"


def _sagemaker_5xx(cw: Any, endpoint: str, variant: str, wall: Wall) -> float:
    out = cw.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "e",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "AWS/SageMaker",
                        "MetricName": "Invocation5XXErrors",
                        "Dimensions": [
                            {"Name": "EndpointName", "Value": endpoint},
                            {"Name": "VariantName", "Value": variant},
                        ],
                    },
                    "Period": 60,
                    "Stat": "Sum",
                },
            }
        ],
        StartTime=wall.datetime() - timedelta(hours=2),
        EndTime=wall.datetime() + timedelta(minutes=1),
    )
    return float(sum(out["MetricDataResults"][0]["Values"]))


def test_an_aws_vllm_image_is_compared_through_detailed_observability(
    monkeypatch: pytest.MonkeyPatch, wall: Wall
) -> None:
    """AWS's vLLM image writes no peagle lines: the experiment reads vLLM's own metrics
    from SageMaker's detailed observability (the emulator's PromQL route, real HTTP)."""
    moto_env(monkeypatch)
    with LocalAWS(seed=5, wall=wall) as aws:
        for key, value in aws.env().items():
            monkeypatch.setenv(key, value)
        _role()
        spec = make_spec().model_copy(update={"image_uri": AWS_VLLM})
        assert experiment_plan(spec).source == "detailed"
        name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
        aws.set_variant(name, "AllTraffic", FAST)
        aws.set_variant(name, "Candidate", FAST.faster(1.3))
        start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
        _send(name, wall, 320)  # 40 emulated minutes: more than the 30 paired windows needed
        assert aws.log_lines(name) == []  # nothing from peagle-serve
        status = experiment_status(name)
        analysis = status.analysis
        assert analysis is not None and status.note is None
        inc, cand = analysis.incumbent, analysis.candidate
        assert inc.requests == cand.requests > 300
        assert inc.decode_tokens_per_s and cand.decode_tokens_per_s
        assert 1.15 < cand.decode_tokens_per_s / inc.decode_tokens_per_s < 1.45
        assert inc.mean_acceptance_length and inc.ttft_ms["p99"] is not None
        assert analysis.decision.verdict == "candidate", analysis.decision.reason
        assert conclude_experiment(name, progress=False).action == "promoted"


def test_invoke_repeat_sends_traffic_and_counts_broken_streams(
    emulator: MotoExtensions, wall: Wall, capsys: pytest.CaptureFixture[str]
) -> None:
    """`peagle invoke --repeat`, the documented way to send a trial's traffic: one
    summary; a stream that breaks off is a failure it counts (no traceback), exit 1."""
    from peagle_deploy.cli.app import main

    spec = make_spec()
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    assert main(["invoke", name, "hi", "--repeat", "5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["sent"], doc["answered"], doc["failed"]) == (5, 5, 0)
    emulator.set_variant(name, "AllTraffic", VariantBehaviour(stream_error_rate=1.0))
    assert main(["invoke", name, "hi", "--repeat", "3", "--stream"]) == 1
    out, err = capsys.readouterr()
    assert f"{name}: sent 3, answered 0" in out
    assert "3 failed" in err and "broke off" in err and "Traceback" not in out + err


def test_sagemaker_ends_a_forgotten_shadow_experiment_and_status_says_so(
    emulator: MotoExtensions, wall: Wall
) -> None:
    """Once running, the experiment's end is set to max_duration_minutes plus an hour
    (UpdateInferenceExperiment): SageMaker's backstop; status then says how to finish."""
    _role()
    spec = make_spec()  # max_duration_minutes 120
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    record = start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE).record
    sm = boto3.client("sagemaker", region_name=REGION)
    schedule = sm.describe_inference_experiment(Name=record.inference_experiment)["Schedule"]
    span = (schedule["EndTime"] - record.started_at).total_seconds()  # type: ignore[operator]
    assert abs(span - 3 * 3600) < 1  # millisecond timestamps on the wire
    wall.now += 3 * 3600 + 1
    status = experiment_status(name)
    assert status.note is not None and "SageMaker ended the inference experiment" in status.note
    assert not sm.describe_endpoint(EndpointName=name).get("ShadowProductionVariants")
    outcome = abort_experiment(name, progress=False)
    assert outcome.action == "aborted" and any(r.startswith("model:") for r in outcome.removed)


def test_status_says_when_the_endpoint_has_detailed_observability_off() -> None:
    """Verified by content: the endpoint's MetricsConfig, not the image's name alone."""
    from peagle_deploy.experiment.status import _observability_note, new_record

    spec = make_spec().model_copy(update={"image_uri": AWS_VLLM})
    record = new_record(experiment_plan(spec), spec)
    off = {"EndpointConfigName": "c", "MetricsConfig": {"EnableDetailedObservability": False}}
    note = _observability_note(record, off)
    assert note is not None and "detailed observability is off" in note
    assert (
        _observability_note(record, {"MetricsConfig": {"EnableDetailedObservability": True}})
        is None
    )
    assert _observability_note(record, {}) is None  # not said: not assumed either way
    peagle = make_spec()
    assert _observability_note(new_record(experiment_plan(peagle), peagle), off) is None


def test_a_start_interrupted_between_its_create_calls_is_completed_by_start(
    emulator: MotoExtensions, wall: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the candidate's model was created, before the InferenceExperiment:
    the same `start` sends what is missing (the model exists already) and waits."""
    _role()
    spec = make_spec()
    deploy_peagle(spec=incumbent_spec(spec), progress=False)
    real = shadow._replace_stale

    def ctrl_c(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(shadow, "_replace_stale", ctrl_c)
    with pytest.raises(Interrupted, match="--file SPEC"):
        start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    sm = boto3.client("sagemaker", region_name=REGION)
    assert sm.list_inference_experiments()["InferenceExperiments"] == []
    monkeypatch.setattr(shadow, "_replace_stale", real)
    resumed = start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    assert resumed.record.state == "running"
    (found,) = sm.list_inference_experiments()["InferenceExperiments"]
    assert found["Status"] == "Running"


# --- an autoscaled incumbent (issue 34 item 4) ----------------------------------------
SUSPENDED = {
    "DynamicScalingInSuspended": True,
    "DynamicScalingOutSuspended": True,
    "ScheduledScalingSuspended": True,
}
ACTIVE = dict.fromkeys(SUSPENDED, False)


def _autoscaled(emulator: MotoExtensions, **experiment: Any) -> tuple[Any, str]:
    """A stage whose incumbent autoscaling moved from 1 to 6 instances."""
    from peagle_deploy.spec import spec_from_dict

    data = make_spec(**experiment).model_dump(mode="json", exclude_none=True)
    spec = spec_from_dict({**data, "scaling": {"min_instances": 1, "max_instances": 8}})
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    assert emulator.autoscale(name, 6) == 6
    emulator.set_variant(name, "AllTraffic", FAST)
    emulator.set_variant(name, "Candidate", FAST)
    return spec, name


def _counts(name: str) -> dict[str, int]:
    desc = boto3.client("sagemaker", region_name=REGION).describe_endpoint(EndpointName=name)
    variants = (desc.get("ProductionVariants") or []) + (desc.get("ShadowProductionVariants") or [])
    return {v["VariantName"]: v["CurrentInstanceCount"] for v in variants}


def _suspension(name: str) -> dict[str, bool]:
    aas = boto3.client("application-autoscaling", region_name=REGION)
    (target,) = aas.describe_scalable_targets(
        ServiceNamespace="sagemaker", ResourceIds=[f"endpoint/{name}/variant/AllTraffic"]
    )["ScalableTargets"]
    return {k: bool(v) for k, v in (target.get("SuspendedState") or ACTIVE).items()}


@pytest.mark.parametrize(
    "experiment",
    [{"mode": "shadow"}, {"mode": "split", "weight_percent": 50}],
    ids=["shadow", "split"],
)
def test_an_autoscaled_incumbent_keeps_its_instances_and_its_scaling_is_held(
    emulator: MotoExtensions, wall: Wall, experiment: dict[str, Any]
) -> None:
    """At 6 instances (its config says 1) it stays at 6 through the start and the end;
    the candidate gets 6 too (equal fleets); the incumbent's scaling is suspended during
    the test (a scale-out does nothing) and given back its own state after."""
    _role()
    spec, name = _autoscaled(emulator, **experiment)
    status = start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    assert status.record.incumbent_instances == 6
    assert status.record.scaling_suspended_before == ACTIVE
    assert _counts(name) == {"AllTraffic": 6, "Candidate": 6}
    assert _suspension(name) == SUSPENDED
    assert emulator.autoscale(name, 8) == 6  # held: the fleets stay equal
    _send(name, wall, 20)
    outcome = abort_experiment(name, progress=False)
    assert outcome.action == "aborted"
    assert _counts(name) == {"AllTraffic": 6}
    assert _suspension(name) == ACTIVE
    assert emulator.autoscale(name, 7) == 7  # scaling acts again


def test_an_interrupted_end_gives_the_scaling_back_on_the_next_command(
    emulator: MotoExtensions, wall: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the endpoint was restored, before the scaling was given back: the
    record still says running and what to restore; the next abort finishes the end."""
    from peagle_deploy.experiment import scaling

    _role()
    spec, name = _autoscaled(emulator, mode="split", weight_percent=50)
    start_experiment(spec=spec, progress=False)
    real = scaling._set_suspension

    def ctrl_c(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(scaling, "_set_suspension", ctrl_c)
    with pytest.raises(Interrupted, match="Run the same command again"):
        abort_experiment(name, progress=False)
    ssm = boto3.client("ssm", region_name=REGION)
    record = read_record(ssm, ExperimentRecord, "dev", name)
    assert record is not None and record.state == "running"
    assert _suspension(name) == SUSPENDED and _counts(name) == {"AllTraffic": 6}
    status = experiment_status(name)
    assert status.note is not None and "no longer serves the experiment" in status.note
    monkeypatch.setattr(scaling, "_set_suspension", real)
    assert abort_experiment(name, progress=False).action == "aborted"
    assert _suspension(name) == ACTIVE and _counts(name) == {"AllTraffic": 6}
    record = read_record(ssm, ExperimentRecord, "dev", name)
    assert record is not None and record.state == "aborted"


def test_sagemakers_own_end_is_given_back_by_the_next_command(
    emulator: MotoExtensions, wall: Wall
) -> None:
    """SageMaker's scheduled end reverts the endpoint to its config from before (the
    emulator: to its initial count); the next conclude or abort puts the incumbent back
    on its 6 instances and gives the scaling back."""
    _role()
    spec, name = _autoscaled(emulator)
    start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    wall.now += 3 * 3600 + 1  # past max_duration_minutes + SageMaker's grace
    status = experiment_status(name)
    assert status.note is not None and "SageMaker ended" in status.note
    assert "autoscaling, held until then" in status.note
    assert _suspension(name) == SUSPENDED  # status reads only
    assert abort_experiment(name, progress=False).action == "aborted"
    assert _counts(name) == {"AllTraffic": 6} and _suspension(name) == ACTIVE


def test_a_failed_start_gives_the_scaling_back(emulator: MotoExtensions, wall: Wall) -> None:
    """A start SageMaker refuses (no experiment role in the account) after the scaling
    was held: the incumbent keeps its 6 instances and its scaling, the start is failed."""
    spec, name = _autoscaled(emulator)
    with pytest.raises(ExperimentError, match="still serves"):
        start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    assert _counts(name) == {"AllTraffic": 6} and _suspension(name) == ACTIVE
    record = read_record(boto3.client("ssm", region_name=REGION), ExperimentRecord, "dev", name)
    assert record is not None and record.state == "failed"


def test_a_start_stopped_before_it_held_the_scaling_holds_it_when_resumed(
    emulator: MotoExtensions, wall: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after the record was written, before the scaling was suspended: the same
    start run again suspends it, then creates and waits."""
    from peagle_deploy.experiment import scaling

    _role()
    spec, name = _autoscaled(emulator)
    real = scaling.hold

    def ctrl_c(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(scaling, "hold", ctrl_c)
    with pytest.raises(Interrupted, match="--file SPEC"):
        start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    assert _suspension(name) == ACTIVE
    monkeypatch.setattr(scaling, "hold", real)
    status = start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    assert status.record.state == "running" and _suspension(name) == SUSPENDED
    assert _counts(name) == {"AllTraffic": 6, "Candidate": 6}


def test_the_promotion_after_conclude_keeps_the_autoscaled_instances_and_scaling(
    emulator: MotoExtensions, wall: Wall
) -> None:
    """The incumbent ran 6 instances (its config says 1) and the candidate wins: the
    promotion's blue/green deploy keeps the 6, and the stage's scaling target and policy
    act on after it (docs/platform-facts.md, "Deploying onto an autoscaled endpoint")."""
    from test_experiment_lifecycle import traffic

    _role()
    spec, name = _autoscaled(emulator)
    emulator.set_variant(name, "Candidate", FAST.faster(1.3))
    start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    traffic(name, wall, minutes=40)
    assert conclude_experiment(name, progress=False).action == "promoted"
    assert _counts(name) == {"AllTraffic": 6}
    assert _suspension(name) == ACTIVE
    aas = boto3.client("application-autoscaling", region_name=REGION)
    policies = aas.describe_scaling_policies(
        ServiceNamespace="sagemaker", ResourceId=f"endpoint/{name}/variant/AllTraffic"
    )["ScalingPolicies"]
    assert [p["PolicyName"] for p in policies] == [f"{name}-invocations"]
    assert emulator.autoscale(name, 7) == 7


@pytest.mark.parametrize(
    ("experiment", "steps"),
    [
        (
            {"mode": "shadow"},
            "in two deploys: set the stage's `experiment_state: completed` (`cancelled` to "
            "abort) and `npx cdk deploy`, which stops it; then remove the `experiment:` block "
            "from the spec and `experiment_state` from the stage",
        ),
        (
            {"mode": "split", "weight_percent": 50},
            "in one deploy: remove `experiment:` from the stage's spec",
        ),
    ],
    ids=["shadow", "split"],
)
def test_a_stacks_experiment_is_ended_by_the_stack_in_the_documented_steps(
    emulator: MotoExtensions, wall: Wall, experiment: dict[str, Any], steps: str
) -> None:
    """conclude and abort refuse an endpoint of a CloudFormation stack, in one line giving
    docs/experiments.md's steps ("With CDK"): a shadow experiment is stopped by
    `experiment_state` first, a split one ends with the removal of `experiment:`."""
    _role()
    spec = make_spec(**experiment)
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    emulator.set_variant(name, "AllTraffic", FAST)
    emulator.set_variant(name, "Candidate", FAST)
    start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    _send(name, wall, 4)
    sm = boto3.client("sagemaker", region_name=REGION)
    arn = sm.describe_endpoint(EndpointName=name)["EndpointArn"]
    sm.add_tags(
        ResourceArn=arn,
        Tags=[{"Key": "aws:cloudformation:stack-name", "Value": "PeagleEndpoint-dev"}],
    )
    for end in (abort_experiment, lambda n, **kw: conclude_experiment(n, force=True, **kw)):
        with pytest.raises(ExperimentError) as caught:
            end(name, progress=False)
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith(f"{name} belongs to CloudFormation stack PeagleEndpoint-dev")
        assert steps in message
        assert "candidate's settings in `speculative:`" in message
        assert 'docs/experiments.md, "With CDK"' in message
    assert experiment_status(name).record.state == "running"  # nothing was ended here
