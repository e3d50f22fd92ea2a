"""The experiment's requests: what `peagle plan` shows and `experiment start` sends.

Rendered by the planner (`plan.experiment_requests`), checked by botocore's own
validator; the docs' spec block plans as written.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import yaml
from botocore.validate import ParamValidator

from peagle_deploy.cli.app import main
from peagle_deploy.errors import InputError
from peagle_deploy.experiment.plan import CANDIDATE_VARIANT, experiment_plan
from peagle_deploy.plan.experiment_requests import (
    PLACEHOLDER_EXPERIMENT_ROLE_ARN,
    stop_inference_experiment,
    update_schedule,
)
from peagle_deploy.spec import spec_from_dict

DOC = Path(__file__).resolve().parents[2] / "docs" / "experiments.md"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0"
XROLE = "arn:aws:iam::123456789012:role/peagle-experiment"
SM = botocore.session.get_session().get_service_model("sagemaker")


def _valid(operation: str, request: dict[str, Any]) -> None:
    report = ParamValidator().validate(request, SM.operation_model(operation).input_shape)
    assert not report.has_errors(), report.generate_report()


def _spec(**experiment: Any) -> Any:
    return spec_from_dict(
        {
            "model": "gpt-oss-20b",
            "region": "us-east-1",
            "image_uri": IMAGE,
            "instance_type": "ml.g7e.2xlarge",
            "initial_instance_count": 2,
            "speculative": {"mode": "p-eagle", "num_speculative_tokens": 3},
            "experiment": {"candidate": {"num_speculative_tokens": 7}, **experiment},
        }
    )


def test_the_docs_spec_block_plans_and_every_request_is_valid() -> None:
    block = re.search(r"```yaml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert block is not None
    spec = spec_from_dict(yaml.safe_load(block.group(1)))
    xp = experiment_plan(spec, experiment_role_arn=XROLE)
    _valid("CreateModel", xp.create_candidate_model)
    create = xp.requests.create_inference_experiment
    assert create is not None and xp.experiment_name == create["Name"]
    _valid("CreateInferenceExperiment", create)
    started = datetime(2026, 11, 1, tzinfo=UTC)
    _valid("UpdateInferenceExperiment", update_schedule(create["Name"], started, 1440))
    for state in ("Completed", "Cancelled"):
        stop = stop_inference_experiment(create["Name"], state=state, reason="x" * 2000)
        _valid("StopInferenceExperiment", stop)
    split = experiment_plan(
        spec.model_copy(
            update={
                "experiment": spec.experiment.model_copy(
                    update={"mode": "split", "sampling_percent": None, "weight_percent": 50}
                )
            }
        )  # type: ignore[union-attr]
    )
    _valid("CreateEndpointConfig", split.requests.create_endpoint_config or {})
    _valid("UpdateEndpoint", split.requests.start_update or {})
    _valid("UpdateEndpoint", split.requests.restore_update or {})


def test_shadow_runs_as_an_inference_experiment_with_the_sampling_percentage() -> None:
    xp = experiment_plan(_spec(mode="shadow", sampling_percent=100), experiment_role_arn=XROLE)
    r = xp.requests
    create = r.create_inference_experiment
    assert create is not None
    assert r.create_endpoint_config is None and r.start_update is None  # SageMaker's config
    assert create["Type"] == "ShadowMode" and create["RoleArn"] == XROLE
    assert create["EndpointName"] == xp.incumbent.endpoint_name
    incumbent, candidate = create["ModelVariants"]
    assert (incumbent["VariantName"], incumbent["ModelName"]) == (
        "AllTraffic",
        xp.incumbent.model_name,  # the model the endpoint serves, unchanged
    )
    assert (candidate["VariantName"], candidate["ModelName"]) == (
        CANDIDATE_VARIANT,
        xp.candidate_model_name,
    )
    infra = candidate["InfrastructureConfig"]["RealTimeInferenceConfig"]
    assert infra == {"InstanceType": "ml.g7e.2xlarge", "InstanceCount": 2}  # equal fleets
    assert incumbent["InfrastructureConfig"]["RealTimeInferenceConfig"]["InstanceCount"] == 2
    assert create["ShadowModeConfig"] == {
        "SourceModelVariantName": "AllTraffic",
        "ShadowModelVariants": [
            {"ShadowModelVariantName": CANDIDATE_VARIANT, "SamplingPercentage": 100}
        ],
    }
    assert "InitialVariantWeight" not in json.dumps(create)  # no weight stands for a share
    env = xp.create_candidate_model["PrimaryContainer"]["Environment"]
    assert env["PEAGLE_VARIANT_NAME"] == CANDIDATE_VARIANT
    assert json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"] == 7
    assert xp.candidate.spec.experiment is None
    again = experiment_plan(_spec(mode="shadow", sampling_percent=100), experiment_role_arn=XROLE)
    assert again == xp  # stable names
    other_role = experiment_plan(_spec(mode="shadow", sampling_percent=100))
    assert other_role.experiment_name == xp.experiment_name  # the role is not in the name
    assert other_role.requests.create_inference_experiment["RoleArn"] == (  # type: ignore[index]
        PLACEHOLDER_EXPERIMENT_ROLE_ARN
    )


def test_the_candidate_is_named_by_the_planners_one_rule() -> None:
    """The candidate's model comes from the planner's render step: the same name as any
    model of that content, whatever its execution role."""
    from dataclasses import replace

    from peagle_deploy.plan.render import model_request

    xp = experiment_plan(_spec())
    named = replace(
        xp.candidate.deployment,
        environment={**xp.candidate.deployment.environment, "PEAGLE_VARIANT_NAME": "Candidate"},
    )
    name, request = model_request(
        named, xp.incumbent.endpoint_name, list(xp.incumbent.tags), dict(xp.incumbent.secret_refs)
    )
    assert (name, request) == (xp.candidate_model_name, xp.create_candidate_model)
    roled = experiment_plan(
        _spec().model_copy(update={"execution_role_arn": "arn:aws:iam::123456789012:role/other"})
    )
    assert roled.candidate_model_name == xp.candidate_model_name


def test_split_config_weights_the_two_production_variants() -> None:
    xp = experiment_plan(_spec(mode="split", weight_percent=50))
    config = xp.requests.create_endpoint_config
    assert config is not None and xp.config_name == config["EndpointConfigName"]
    variants = config["ProductionVariants"]
    assert [v["VariantName"] for v in variants] == ["AllTraffic", CANDIDATE_VARIANT]
    assert [v["InitialVariantWeight"] for v in variants] == [0.5, 0.5]
    assert variants[0]["ModelName"] == xp.incumbent.model_name
    assert "ShadowProductionVariants" not in config and "MetricsConfig" not in config
    assert variants[1]["InitialInstanceCount"] == 2  # equal fleets
    assert "DeploymentConfig" not in (xp.requests.start_update or {})
    assert (xp.requests.restore_update or {})["EndpointConfigName"] == (
        xp.incumbent.endpoint_config_name
    )
    assert xp.requests.create_inference_experiment is None


def test_aws_images_are_compared_through_detailed_observability() -> None:
    aws = _spec(mode="split", weight_percent=50).model_copy(update={"image_uri": None})
    xp = experiment_plan(aws)
    assert xp.source == "detailed" and xp.to_json()["observations"] == "detailed"
    config = xp.requests.create_endpoint_config or {}
    assert config["MetricsConfig"] == {"EnableDetailedObservability": True}
    _valid("CreateEndpointConfig", config)
    assert experiment_plan(_spec()).source == "lines"
    off = aws.model_copy(update={"detailed_observability": False})
    with pytest.raises(InputError) as caught:
        experiment_plan(off)
    assert caught.value.field == "detailed_observability"


def test_candidate_findings_name_the_candidates_fields() -> None:
    xp = experiment_plan(_spec(candidate={"num_speculative_tokens": 12}))
    found = [w for w in xp.warnings if "num_speculative_tokens" in w.field]
    assert [w.field for w in found] == ["experiment.candidate.num_speculative_tokens"]
    assert "experiment.candidate.num_speculative_tokens=12" in found[0]
    assert "speculative.num" not in found[0].replace("experiment.candidate.", "")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"mode": "shadow", "sampling_percent": 20}, "experiment.sampling_percent"),
        ({"mode": "split", "weight_percent": 10}, "experiment.weight_percent"),
        ({"mode": "split", "weight_percent": 40}, "experiment.weight_percent"),
        ({"mode": "shadow", "candidate_instance_count": 1}, "experiment.candidate_instance_count"),
        ({"mode": "split", "candidate_instance_count": 3}, "experiment.candidate_instance_count"),
        ({"mode": "shadow", "candidate_instance_count": 3}, "experiment.candidate_instance_count"),
        (
            {"mode": "shadow", "sampling_percent": 50, "candidate_instance_count": 2},
            "experiment.sampling_percent",
        ),
    ],
)
def test_arms_with_unequal_load_per_instance_are_refused(
    change: dict[str, Any], field: str
) -> None:
    """Decode speed depends on load: each candidate instance must carry an incumbent
    instance's load (issues 30 and 35); everything else is refused, not warned about."""
    with pytest.raises(InputError) as caught:
        experiment_plan(_spec(**change))
    assert caught.value.field == field
    assert "load" in caught.value.problem


@pytest.mark.parametrize(
    ("count", "block", "candidates"),
    [
        (2, {"mode": "shadow", "sampling_percent": 50}, 1),
        (8, {"mode": "shadow", "sampling_percent": 12}, 1),
        (8, {"mode": "shadow", "sampling_percent": 13}, 1),
        (4, {"mode": "split", "weight_percent": 20}, 1),
        (4, {"mode": "shadow", "sampling_percent": 50, "candidate_instance_count": 2}, 2),
    ],
)
def test_one_candidate_instance_carrying_one_incumbent_instances_load_plans(
    count: int, block: dict[str, Any], candidates: int
) -> None:
    """Shadow 1/N on N+1 (and split 1/(N+1)): one extra instance for any fleet (issue 35);
    the nearest whole percentages are both accepted (SamplingPercentage is an integer)."""
    data = _spec(**block).model_dump(mode="json", exclude_none=True)
    xp = experiment_plan(spec_from_dict({**data, "initial_instance_count": count}))
    assert xp.candidate_instances == candidates


def _with_environment(env: dict[str, str], **experiment: Any) -> Any:
    data = _spec(**experiment).model_dump(mode="json", exclude_none=True)
    return spec_from_dict({**data, "env": env})


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (  # blocks shorter than the container's metric interval
            lambda: _with_environment(
                {"PEAGLE_METRICS_INTERVAL_SECONDS": "600"},
                block_minutes=5,
                cycle_minutes=60,
                max_duration_minutes=120,
            ),
            "experiment.block_minutes",
        ),
        (  # the container's reporter off: no metric line, ever
            lambda: _with_environment({"PEAGLE_METRICS_INTERVAL_SECONDS": "0"}),
            "env.PEAGLE_METRICS_INTERVAL_SECONDS",
        ),
        (  # 4 blocks by the maximum duration; the test needs 5 at alpha 0.05
            lambda: _spec(block_minutes=60, cycle_minutes=240, max_duration_minutes=300),
            "experiment.block_minutes",
        ),
    ],
)
def test_experiments_that_could_never_decide_are_refused(spec: Any, field: str) -> None:
    with pytest.raises(InputError) as caught:
        experiment_plan(spec())
    assert caught.value.field == field
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sampling_percent": True}, "experiment.sampling_percent"),  # YAML `yes`, not 1 %
        ({"mode": "split", "weight_percent": "50"}, "experiment.weight_percent"),
        ({"candidate_instance_count": 2.0}, "experiment.candidate_instance_count"),
        ({"alpha": True}, "experiment.alpha"),
        ({"calibration": "yes"}, "experiment.calibration"),
        ({"max_duration_minutes": 600}, "experiment.max_duration_minutes"),  # < a cycle
        ({"block_minutes": 7}, "experiment.cycle_minutes"),  # 1440 is not whole blocks of 7
        ({"guardrails": {"max_error_rate_percent": False}}, "experiment.guardrails"),
    ],
)
def test_the_spec_refuses_settings_in_one_line(change: dict[str, Any], field: str) -> None:
    data = {
        "model": "gpt-oss-20b",
        "experiment": {"candidate": {"num_speculative_tokens": 7}, **change},
    }
    with pytest.raises(InputError) as caught:
        spec_from_dict(data)
    assert caught.value.field.startswith(field)
    assert "\n" not in str(caught.value)


def test_a_calibration_runs_a_copy_of_the_incumbent() -> None:
    spec = spec_from_dict(
        {**_spec().model_dump(mode="json", exclude_none=True), "experiment": {"calibration": True}}
    )
    xp = experiment_plan(spec)
    assert xp.candidate.speculative_config == xp.incumbent.speculative_config
    assert xp.candidate_model_name != xp.incumbent.model_name  # its own variant name
    with pytest.raises(InputError) as caught:
        experiment_plan(_spec(calibration=True))  # a candidate that differs
    assert caught.value.field == "experiment.candidate"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"candidate": {"num_speculative_tokens": 3}}, "experiment.candidate"),
        ({"candidate": {}}, "experiment.candidate"),
        ({"candidate": {"mode": "none"}}, "experiment.candidate.mode"),
        (
            {"candidate": {"num_speculative_tokens": 10**9}},
            "experiment.candidate.num_speculative_tokens",
        ),
    ],
)
def test_experiments_that_cannot_decide_are_refused(change: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as caught:
        experiment_plan(_spec(**change))
    assert caught.value.field == field


def test_peagle_plan_shows_the_experiment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(_spec().model_dump(mode="json", exclude_none=True)))
    assert main(["plan", "--file", str(spec_file), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    create = doc["experiment"]["create_inference_experiment"]
    assert create["ShadowModeConfig"]["ShadowModelVariants"][0]["SamplingPercentage"] == 100
    assert (
        doc["experiment"]["create_candidate_model"]["ModelName"]
        == create["ModelVariants"][1]["ModelName"]
    )
    assert main(["plan", "--file", str(spec_file)]) == 0
    assert "experiment: CreateInferenceExperiment (shadow)" in capsys.readouterr().out


def test_the_candidate_is_what_a_promotion_deploys() -> None:
    """The candidate's model (from the incumbent's Deployment, `with_speculative`) and the
    plan of `candidate_spec` (what `conclude` deploys) differ only by the variant's name."""
    from peagle_deploy.experiment.plan import candidate_spec
    from peagle_deploy.plan import build_plan

    spec = _spec()
    xp = experiment_plan(spec)
    promoted = build_plan(candidate_spec(spec)).create_model
    mine = json.loads(json.dumps(xp.create_candidate_model))
    assert mine["PrimaryContainer"]["Environment"].pop("PEAGLE_VARIANT_NAME") == "Candidate"
    assert mine["PrimaryContainer"] == promoted["PrimaryContainer"]
    assert xp.candidate.create_model["PrimaryContainer"] == promoted["PrimaryContainer"]


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ("  sampling_percent: yes\n", "experiment.sampling_percent"),
        ("  block_minutes: 0.5\n  cycle_minutes: 1440\n", "experiment.block_minutes"),
        ("  mode: split\n  weight_percent: 10\n", "experiment.weight_percent"),
    ],
)
def test_peagle_plan_refuses_an_experiment_that_cannot_decide_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], block: str, field: str
) -> None:
    spec = _spec().model_dump(mode="json", exclude_none=True)
    spec.pop("experiment")
    text = yaml.safe_dump(spec) + "experiment:\n  candidate: {num_speculative_tokens: 7}\n" + block
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(text)
    assert main(["plan", "--file", str(spec_file)]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and field in lines[0], err
    assert "Traceback" not in out + err


STORED_BEFORE_ISSUE_30 = {
    # the experiment block of an experiment record peagle-deploy 0.1.0 wrote
    "mode": "shadow",
    "candidate": {"mode": None, "num_speculative_tokens": 5, "drafter_uri": None},
    "sampling_percent": None,
    "weight_percent": None,
    "candidate_instance_count": None,
    "alpha": 0.05,
    "min_duration_minutes": 60.0,
    "max_duration_minutes": 1440.0,
    "min_requests": 1000,
    "window_seconds": 60,
    "guardrails": {
        "max_error_rate_percent": 1.0,
        "max_p99_latency_increase_percent": 50.0,
        "window_minutes": 10.0,
        "min_requests": 200,
    },
}


def test_an_experiment_stored_before_issue_30_reads_without_its_retired_knobs() -> None:
    from peagle_deploy.spec.models import ExperimentSpec, without_retired_fields

    with pytest.raises(InputError, match="unknown field"):  # a spec file may not name them
        spec_from_dict({"model": "gpt-oss-20b", "experiment": STORED_BEFORE_ISSUE_30})
    settings = ExperimentSpec.model_validate(without_retired_fields(STORED_BEFORE_ISSUE_30))
    assert settings.alpha == 0.05 and settings.max_duration_minutes == 1440
    assert settings.cycle_minutes == 1440 and settings.block_minutes == 60
    short = without_retired_fields({**STORED_BEFORE_ISSUE_30, "max_duration_minutes": 120})
    assert ExperimentSpec.model_validate(short).cycle_minutes == 120
    odd = without_retired_fields({**STORED_BEFORE_ISSUE_30, "max_duration_minutes": 45})
    assert ExperimentSpec.model_validate(odd).block_minutes == 45
