"""An experiment's whole life against the emulator: start, status, conclude or abort.

The incumbent is deployed with `deploy_peagle`; the emulator serves both variants with a
configured truth (`VariantBehaviour`) and traffic is sent through SageMaker's runtime
API. An emulated wall clock (shared by the emulator's reports and the SDK) moves one
window per batch of requests, so an hour of traffic takes seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws
from peagle_local.emulator import MotoExtensions
from peagle_local.emulator.traffic import VariantBehaviour

from peagle_deploy.experiment import common
from peagle_deploy.experiment.lifecycle import (
    ExperimentError,
    abort_experiment,
    conclude_experiment,
    experiment_status,
    start_experiment,
)
from peagle_deploy.experiment.plan import candidate_spec, incumbent_spec
from peagle_deploy.sdk import deploy_peagle, read_manifest, waiter
from peagle_deploy.spec import spec_from_dict
from peagle_deploy.spec.models import DeploymentSpec

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/peagle-experiment-test"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0"
FAST = VariantBehaviour(acceptance_rate=0.6, num_speculative_tokens=3, step_s=0.02)


class Wall:
    """Seconds since the epoch, moved by hand; starts at the real now."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).timestamp()

    def __call__(self) -> float:
        return self.now

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)


def make_spec(**experiment: Any) -> DeploymentSpec:
    return spec_from_dict(
        {
            "model": "gpt-oss-20b",
            "region": REGION,
            "image_uri": IMAGE,
            "instance_type": "ml.g7e.2xlarge",
            "execution_role_arn": ROLE,
            "speculative": {"mode": "p-eagle", "num_speculative_tokens": 3},
            "experiment": {
                "mode": "shadow",
                "candidate": {"num_speculative_tokens": 5},
                # a short cycle for emulated minutes (a real endpoint keeps the day)
                "block_minutes": 4,
                "cycle_minutes": 20,
                "max_duration_minutes": 120,
                **experiment,
            },
        }
    )


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> Wall:
    w = Wall()
    monkeypatch.setattr(common, "now", w.datetime)
    monkeypatch.setattr(waiter, "_sleep", lambda s: None)
    return w


def moto_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials and region for moto, nothing that could route a call past it."""
    # boto3's default session keeps the credentials it first resolved, and a
    # service-specific endpoint variable would send a call past moto to a server.
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    for var in [v for v in os.environ if v.startswith("AWS_ENDPOINT_URL")]:
        monkeypatch.delenv(var)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch, wall: Wall) -> Iterator[MotoExtensions]:
    moto_env(monkeypatch)
    with mock_aws(), MotoExtensions(seed=7, wall=wall) as ext:
        iam = boto3.client("iam", region_name=REGION)
        iam.create_role(RoleName=ROLE.rpartition("/")[2], AssumeRolePolicyDocument="{}")
        yield ext


def traffic(name: str, wall: Wall, *, minutes: int, per_minute: int = 8) -> None:
    """`per_minute` requests in each of `minutes` emulated minutes."""
    rt = boto3.client("sagemaker-runtime", region_name=REGION)
    for i in range(minutes * per_minute):
        body = {"messages": [{"role": "user", "content": f"question {i}"}], "max_tokens": 48}
        rt.invoke_endpoint(EndpointName=name, Body=json.dumps(body), ContentType="application/json")
        wall.now += 60 / per_minute


def started(emulator: MotoExtensions, spec: DeploymentSpec, candidate: VariantBehaviour) -> str:
    endpoint = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    emulator.set_variant(endpoint, "AllTraffic", FAST)
    emulator.set_variant(endpoint, "Candidate", candidate)
    status = start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    assert status.record.state == "running"
    return endpoint


def test_a_faster_shadow_candidate_is_found_and_promoted(
    emulator: MotoExtensions, wall: Wall
) -> None:
    spec = make_spec()
    name = started(emulator, spec, FAST.faster(1.3))
    sm = boto3.client("sagemaker", region_name=REGION)
    desc = sm.describe_endpoint(EndpointName=name)
    assert desc["ShadowProductionVariants"][0]["VariantName"] == "Candidate"

    traffic(name, wall, minutes=10)
    early = experiment_status(name)
    assert early.analysis is not None
    assert early.analysis.decision.verdict == "running"  # before the 20 minutes
    with pytest.raises(ExperimentError, match="too early"):
        conclude_experiment(name, progress=False)

    traffic(name, wall, minutes=30)
    status = experiment_status(name)
    analysis = status.analysis
    assert analysis is not None
    inc, cand = analysis.incumbent, analysis.candidate
    assert inc.requests == cand.requests  # shadow at 100 %: every request copied
    assert inc.decode_tokens_per_s and cand.decode_tokens_per_s
    assert 1.2 < cand.decode_tokens_per_s / inc.decode_tokens_per_s < 1.4
    assert inc.mean_acceptance_length and 2.2 < inc.mean_acceptance_length < 3.4
    assert inc.ttft_ms["p99"] is not None and inc.itl_ms["p50"] is not None
    assert inc.invocations == cand.invocations == 320
    assert analysis.decision.verdict == "candidate"
    result = analysis.decision.result
    assert result is not None and result.ci[0] < 0.3 < result.ci[1]
    json.dumps(status.to_json())  # --json prints exactly this

    outcome = conclude_experiment(name, progress=False)
    assert outcome.action == "promoted"
    desc = sm.describe_endpoint(EndpointName=name)
    assert "ShadowProductionVariants" not in desc or not desc["ShadowProductionVariants"]
    promoted = candidate_spec(spec)
    manifest = read_manifest("dev", name)
    assert manifest is not None
    assert manifest.spec.speculative.num_speculative_tokens == 5
    assert manifest.num_speculative_tokens == promoted.speculative.num_speculative_tokens
    assert manifest.experiment is not None and manifest.experiment["action"] == "promoted"
    configs = [c["EndpointConfigName"] for c in sm.list_endpoint_configs()["EndpointConfigs"]]
    assert configs == [desc["EndpointConfigName"]]  # experiment and old configs removed


def test_no_difference_keeps_the_incumbent(emulator: MotoExtensions, wall: Wall) -> None:
    spec = make_spec(mode="split", weight_percent=50, candidate_instance_count=1)
    name = started(emulator, spec, FAST)
    traffic(name, wall, minutes=40)
    outcome = conclude_experiment(name, progress=False)
    assert outcome.action == "kept"
    manifest = read_manifest("dev", name)
    assert manifest is not None and manifest.spec.speculative.num_speculative_tokens == 3
    assert manifest.experiment is not None and manifest.experiment["action"] == "kept"
    sm = boto3.client("sagemaker", region_name=REGION)
    variants = sm.describe_endpoint(EndpointName=name)["ProductionVariants"]
    assert [v["VariantName"] for v in variants] == ["AllTraffic"]


def test_a_failing_candidate_trips_the_error_guardrail(
    emulator: MotoExtensions, wall: Wall
) -> None:
    spec = make_spec(guardrails={"max_error_rate_percent": 5})
    name = started(emulator, spec, VariantBehaviour(error_rate=0.2))
    traffic(name, wall, minutes=10)
    status = experiment_status(name)
    assert status.analysis is not None
    assert [b.guardrail for b in status.analysis.breaches] == ["max_error_rate_percent"]
    outcome = conclude_experiment(name, progress=False)  # a breach ends it as an abort
    assert outcome.action == "aborted" and "guardrail" in outcome.reason


def test_abort_restores_the_incumbent_and_deploy_refuses_during_an_experiment(
    emulator: MotoExtensions, wall: Wall
) -> None:
    spec = make_spec()
    name = started(emulator, spec, FAST)
    from peagle_deploy.errors import DeployError

    with pytest.raises(DeployError, match="in an experiment"):
        deploy_peagle(spec=incumbent_spec(spec), progress=False)
    again = start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    assert again.record.state == "running"  # the same spec: this experiment, not another
    other = make_spec(candidate={"num_speculative_tokens": 4})
    with pytest.raises(ExperimentError, match="already runs"):
        start_experiment(spec=other, progress=False, experiment_role_arn=ROLE)
    outcome = abort_experiment(name, progress=False)
    assert outcome.action == "aborted"
    assert any(r.startswith("model:") for r in outcome.removed)
    sm = boto3.client("sagemaker", region_name=REGION)
    desc = sm.describe_endpoint(EndpointName=name)
    from peagle_deploy.plan import build_plan

    assert desc["EndpointConfigName"] == build_plan(incumbent_spec(spec)).endpoint_config_name
    assert not desc.get("ShadowProductionVariants")
    with pytest.raises(ExperimentError, match="already ended"):
        abort_experiment(name, progress=False)


def test_a_precreated_experiment_config_of_other_content_is_refused(
    emulator: MotoExtensions, wall: Wall
) -> None:
    """The split's config name is predictable: one made first, whose candidate variant
    serves another model, is not used. The start stops before UpdateEndpoint, removes the
    candidate model it created, and the incumbent keeps serving (issue 29)."""
    from peagle_deploy.experiment.plan import experiment_plan

    spec = make_spec(mode="split", weight_percent=50)
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    xp = experiment_plan(spec)
    theirs = json.loads(json.dumps(xp.requests.create_endpoint_config))
    theirs["ProductionVariants"][1]["ModelName"] = xp.incumbent.model_name
    sm = boto3.client("sagemaker", region_name=REGION)
    sm.create_endpoint_config(**theirs)
    with pytest.raises(ExperimentError) as caught:
        start_experiment(spec=spec, progress=False)
    message = str(caught.value)
    assert (
        f"endpoint config {xp.config_name} already exists with a different "
        "ProductionVariants[Candidate].ModelName" in message
    )
    assert f"removed model:{xp.candidate_model_name}" in message
    desc = sm.describe_endpoint(EndpointName=name)
    assert desc["EndpointConfigName"] == xp.incumbent.endpoint_config_name
    models = [m["ModelName"] for m in sm.list_models()["Models"]]
    assert models == [xp.incumbent.model_name]


def test_a_precreated_candidate_model_of_another_image_is_refused(
    emulator: MotoExtensions, wall: Wall
) -> None:
    """A shadow start adopts a candidate model of its planned name only when it is the
    same: one made first with another image stops the start before the InferenceExperiment
    (issue 29); it is not the start's to delete."""
    from peagle_deploy.experiment.plan import experiment_plan

    spec = make_spec()
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    xp = experiment_plan(spec, experiment_role_arn=ROLE)
    theirs = json.loads(json.dumps(xp.create_candidate_model))
    theirs["PrimaryContainer"]["Image"] = IMAGE.rsplit(":", 1)[0] + ":someone-elses"
    sm = boto3.client("sagemaker", region_name=REGION)
    sm.create_model(**theirs)
    with pytest.raises(ExperimentError) as caught:
        start_experiment(spec=spec, progress=False, experiment_role_arn=ROLE)
    assert (
        f"model {xp.candidate_model_name} already exists with a different "
        "PrimaryContainer.Image" in str(caught.value)
    )
    assert sm.list_inference_experiments()["InferenceExperiments"] == []
    assert sm.describe_endpoint(EndpointName=name)["EndpointConfigName"] == (
        xp.incumbent.endpoint_config_name
    )
    assert xp.candidate_model_name in {m["ModelName"] for m in sm.list_models()["Models"]}


def test_the_cli_runs_the_same_experiment_with_json_and_a_plot(
    emulator: MotoExtensions,
    wall: Wall,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import yaml

    from peagle_deploy.cli.app import main

    spec = make_spec()
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True)))
    name = deploy_peagle(spec=incumbent_spec(spec), progress=False).endpoint_name
    emulator.set_variant(name, "AllTraffic", FAST)
    emulator.set_variant(name, "Candidate", FAST.faster(1.3))

    def run(*argv: str) -> Any:
        code = main(["experiment", *argv, "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        return json.loads(out)

    started_doc = run("start", name, "--file", str(spec_file), "--experiment-role-arn", ROLE)
    assert started_doc["state"] == "running" and started_doc["mode"] == "shadow"
    traffic(name, wall, minutes=40)
    plot = tmp_path / "experiment.png"
    doc = run("status", name, "--plot", str(plot))
    assert plot.read_bytes().startswith(b"\x89PNG")
    analysis = doc["analysis"]
    assert analysis["decision"]["verdict"] == "candidate"
    assert analysis["difference"]["ci"][0] > 0
    for role in ("incumbent", "candidate"):
        figures = analysis["variants"][role]
        assert figures["decode_tokens_per_s"] > 0 and figures["ttft_ms"]["p99"] is not None
    ended = run("conclude", name)
    assert ended["action"] == "promoted"
    code = main(["experiment", "abort", name])
    assert code == 1
    assert "already ended" in capsys.readouterr().err


def test_status_reads_an_experiment_a_stack_started_from_its_spec(
    emulator: MotoExtensions, wall: Wall
) -> None:
    """A CDK stage carrying a shadow experiment creates the endpoint on the incumbent's
    config and the InferenceExperiment beside it, and writes no record: status reads it
    from the stage's spec."""
    from peagle_deploy.experiment.plan import experiment_plan

    spec = make_spec()
    xp = experiment_plan(spec, experiment_role_arn=ROLE)
    sm = boto3.client("sagemaker", region_name=REGION)
    sm.create_model(**xp.incumbent.create_model)
    sm.create_model(**xp.create_candidate_model)
    sm.create_endpoint_config(**xp.incumbent.create_endpoint_config)
    sm.create_endpoint(**xp.incumbent.create_endpoint)
    name = xp.incumbent.endpoint_name
    sm.create_inference_experiment(**xp.requests.create_inference_experiment)
    emulator.set_variant(name, "AllTraffic", FAST)
    emulator.set_variant(name, "Candidate", FAST.faster(1.3))
    with pytest.raises(ExperimentError, match="no experiment"):
        experiment_status(name)
    assert sm.describe_inference_experiment(Name=xp.experiment_name)["Status"] == "Running"
    traffic(name, wall, minutes=5)
    status = experiment_status(name, spec=spec)
    assert status.record.state == "running"
    assert status.analysis is not None and status.analysis.candidate.requests > 0


def test_a_calibration_runs_a_copy_of_the_incumbent_and_never_promotes(
    emulator: MotoExtensions, wall: Wall, capsys: pytest.CaptureFixture[str]
) -> None:
    """A/A: the candidate is the incumbent's own settings under the candidate's variant;
    status reports the calibration's verdict and conclude keeps the incumbent."""
    from rich.console import Console

    from peagle_deploy.experiment.report import render_status

    spec = make_spec(candidate={}, calibration=True)
    name = started(emulator, spec, FAST)
    traffic(name, wall, minutes=10)
    early = experiment_status(name)
    assert early.analysis is not None and early.analysis.decision.verdict == "running"
    traffic(name, wall, minutes=30)
    status = experiment_status(name)
    assert status.analysis is not None
    decision = status.analysis.decision
    assert decision.calibration and decision.winner is None
    assert decision.verdict in ("calibrated", "running")
    console = Console(record=True, width=200)
    render_status(status, console)
    text = console.export_text()
    assert "calibration (A/A):" in text and "confidence sequence" in text
    outcome = conclude_experiment(name, progress=False)
    assert outcome.action == "kept"
    manifest = read_manifest("dev", name)
    assert manifest is not None and manifest.spec.speculative.num_speculative_tokens == 3


def test_a_plot_soon_after_the_start_draws_what_was_measured_when(
    emulator: MotoExtensions, wall: Wall, tmp_path: Any
) -> None:
    """20 s after the start (one-hour blocks, as on a real endpoint): the one point is at
    20 s, on a minutes axis, and matplotlib has nothing to warn about (issue 35: the
    point was drawn at "1.00 hours", with a warning)."""
    import warnings

    from peagle_deploy.experiment.plot import draw, plot_experiment

    spec = make_spec(block_minutes=60, cycle_minutes=1440, max_duration_minutes=2880)
    name = started(emulator, spec, FAST)
    rt = boto3.client("sagemaker-runtime", region_name=REGION)
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 48}
    for _ in range(4):
        wall.now += 5
        rt.invoke_endpoint(EndpointName=name, Body=json.dumps(body), ContentType="application/json")
    status = experiment_status(name)
    assert status.analysis is not None and status.analysis.elapsed_s == pytest.approx(20, abs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = draw(status)
        plot_experiment(status, tmp_path / "soon.svg")
    speed = fig.axes[0]
    xs = [x for line in speed.lines for x in line.get_xdata()]
    assert xs and max(xs) == pytest.approx(20 / 60, abs=0.02)  # minutes
    assert "minutes" in fig.axes[2].get_xlabel()
    assert (tmp_path / "soon.svg").read_text().lstrip().startswith("<?xml")


def test_the_status_table_has_each_row_once(emulator: MotoExtensions, wall: Wall) -> None:
    """Each figure is shown once (issue 35: invocations was shown twice)."""
    from rich.console import Console

    from peagle_deploy.experiment.report import _rows, render_status

    name = started(emulator, make_spec(), FAST)
    traffic(name, wall, minutes=5)
    status = experiment_status(name)
    assert status.analysis is not None
    labels = [label for label, _, _ in _rows(status.analysis)]
    assert len(labels) == len(set(labels))
    console = Console(record=True, width=200)
    render_status(status, console)
    lines = [
        line.split("│")[1].strip() for line in console.export_text().splitlines() if "│" in line
    ]
    assert len(lines) == len(set(lines)) and not [x for x in lines if x == "invocations"]


def test_an_end_whose_record_write_fails_is_finished_by_the_same_command(
    emulator: MotoExtensions, wall: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint is restored, then SSM refuses the write: one line saying so and what
    finishes it; status says the endpoint left the experiment; the same abort records
    the end (issue 35: the record stayed `running` with nothing saying why)."""
    from botocore.exceptions import ClientError

    from peagle_deploy.experiment import common
    from peagle_deploy.records import ExperimentRecord, read_record

    spec = make_spec(mode="split", weight_percent=50)
    name = started(emulator, spec, FAST)
    real = common.write_record

    def refused(*args: Any, **kwargs: Any) -> None:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow"}}, "Put")

    monkeypatch.setattr(common, "write_record", refused)
    with pytest.raises(ExperimentError) as caught:
        abort_experiment(name, progress=False)
    message = str(caught.value)
    assert "\n" not in message and "ThrottlingException" in message
    assert "Run the same command again" in message
    ssm = boto3.client("ssm", region_name=REGION)
    stored = read_record(ssm, ExperimentRecord, "dev", name)
    assert stored is not None and stored.state == "running"
    note = experiment_status(name).note
    assert note is not None and "no longer serves the experiment" in note
    monkeypatch.setattr(common, "write_record", real)
    assert abort_experiment(name, progress=False).action == "aborted"
    stored = read_record(ssm, ExperimentRecord, "dev", name)
    assert stored is not None and stored.state == "aborted"


def test_an_end_record_too_large_for_ssm_is_measured_before_anything_acts(
    emulator: MotoExtensions, wall: Wall
) -> None:
    """A decision whose detail would not fit SSM's 8 KB is kept as its verdict and reason;
    the record is measured before the endpoint changes."""
    from peagle_deploy.experiment.common import ended_record
    from peagle_deploy.records import (
        MAX_PARAMETER_BYTES,
        ExperimentRecord,
        encoded_size,
        read_record,
    )

    name = started(emulator, make_spec(), FAST)
    record = read_record(boto3.client("ssm", region_name=REGION), ExperimentRecord, "dev", name)
    assert record is not None
    decision = {"decision": {"verdict": "incumbent", "reason": "slower"}, "pairs": ["x" * 100] * 90}
    ended = ended_record(
        record, "concluded", {"action": "kept", "reason": "r", "decision": decision}
    )
    assert encoded_size(ended) <= MAX_PARAMETER_BYTES
    assert ended.outcome is not None
    assert ended.outcome["decision"] == {"verdict": "incumbent", "reason": "slower"}
    assert record.state == "running"  # measured, not written


def test_a_promotion_that_fails_leaves_a_record_saying_the_incumbent_serves(
    emulator: MotoExtensions, wall: Wall, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate wins, the endpoint is back on the incumbent, then the promotion's
    deploy fails: the record says concluded, incumbent kept, the promotion failed (it
    said `promoted` before the deploy was known to have worked)."""
    from peagle_deploy.errors import DeployError
    from peagle_deploy.records import ExperimentRecord, read_record
    from peagle_deploy.sdk import deploy as deploy_module

    spec = make_spec()
    name = started(emulator, spec, FAST.faster(1.3))
    traffic(name, wall, minutes=40)

    def refused(**kwargs: Any) -> None:
        raise DeployError("the candidate's update failed (emulated)")

    monkeypatch.setattr(deploy_module, "deploy_peagle", refused)
    with pytest.raises(DeployError, match="emulated"):
        conclude_experiment(name, progress=False)
    stored = read_record(boto3.client("ssm", region_name=REGION), ExperimentRecord, "dev", name)
    assert stored is not None and stored.state == "concluded" and stored.outcome is not None
    assert stored.outcome["action"] == "kept" and "promotion failed" in stored.outcome["reason"]
    sm = boto3.client("sagemaker", region_name=REGION)
    desc = sm.describe_endpoint(EndpointName=name)
    assert desc["EndpointConfigName"] == stored.incumbent_config
