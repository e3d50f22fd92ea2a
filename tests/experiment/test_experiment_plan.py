"""The experiment's requests: what `peagle plan` shows and `experiment start` sends.

Checked by botocore's own validator and against SageMaker's rules from its model (one
production variant beside a shadow), and the docs' spec block plans as written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import botocore.session
import pytest
import yaml
from botocore.validate import ParamValidator

from peagle_deploy.cli.app import main
from peagle_deploy.errors import InputError
from peagle_deploy.experiment.plan import CANDIDATE_VARIANT, experiment_plan
from peagle_deploy.spec import spec_from_dict

DOC = Path(__file__).resolve().parents[2] / "docs" / "experiments.md"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/peagle-vllm:0.1.0"
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
    xp = experiment_plan(spec_from_dict(yaml.safe_load(block.group(1))))
    _valid("CreateModel", xp.create_candidate_model)
    _valid("CreateEndpointConfig", xp.create_experiment_config)
    _valid("UpdateEndpoint", xp.start_update)
    _valid("UpdateEndpoint", xp.restore_update)


def test_shadow_config_keeps_the_incumbent_and_adds_the_candidate_as_a_shadow() -> None:
    xp = experiment_plan(_spec(mode="shadow", sampling_percent=100))
    config = xp.create_experiment_config
    (production,) = config["ProductionVariants"]
    (shadow,) = config["ShadowProductionVariants"]
    incumbent = xp.incumbent.create_endpoint_config["ProductionVariants"][0]
    assert production == {**incumbent, "InitialVariantWeight": 1.0}  # the same model, unchanged
    assert shadow["VariantName"] == CANDIDATE_VARIANT
    assert shadow["ModelName"] == xp.candidate_model_name != xp.incumbent.model_name
    assert shadow["InitialVariantWeight"] == 1.0
    assert shadow["InitialInstanceCount"] == 2  # the incumbent's load per instance
    env = xp.create_candidate_model["PrimaryContainer"]["Environment"]
    assert env["PEAGLE_VARIANT_NAME"] == CANDIDATE_VARIANT
    assert json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"] == 7
    assert "DeploymentConfig" not in xp.start_update  # see experiment.plan's docstring
    assert xp.restore_update["EndpointConfigName"] == xp.incumbent.endpoint_config_name
    assert xp.candidate.spec.experiment is None
    assert experiment_plan(_spec(mode="shadow", sampling_percent=100)) == xp  # stable names


def test_split_config_weights_the_two_production_variants() -> None:
    xp = experiment_plan(_spec(mode="split", weight_percent=50))
    variants = xp.create_experiment_config["ProductionVariants"]
    assert [v["VariantName"] for v in variants] == ["AllTraffic", CANDIDATE_VARIANT]
    assert [v["InitialVariantWeight"] for v in variants] == [0.5, 0.5]
    assert "ShadowProductionVariants" not in xp.create_experiment_config
    assert variants[1]["InitialInstanceCount"] == 2  # equal fleets


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"mode": "shadow", "sampling_percent": 20}, "experiment.sampling_percent"),
        ({"mode": "split", "weight_percent": 10}, "experiment.weight_percent"),
        ({"mode": "split", "weight_percent": 40}, "experiment.weight_percent"),
        ({"mode": "shadow", "candidate_instance_count": 1}, "experiment.candidate_instance_count"),
        ({"mode": "split", "candidate_instance_count": 3}, "experiment.candidate_instance_count"),
    ],
)
def test_arms_with_unequal_load_per_instance_are_refused(
    change: dict[str, Any], field: str
) -> None:
    """Decode speed depends on load: only shadow 100 % or split 50/50 on equal fleets
    compare like with like (issue 30); everything else is refused, not warned about."""
    with pytest.raises(InputError) as caught:
        experiment_plan(_spec(**change))
    assert caught.value.field == field
    assert "load" in caught.value.problem


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


def test_an_image_without_peagle_serve_is_refused() -> None:
    spec = _spec().model_copy(update={"image_uri": None})
    with pytest.raises(InputError) as caught:
        experiment_plan(spec)
    assert caught.value.field == "image_uri"


def test_peagle_plan_shows_the_experiment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(_spec().model_dump(mode="json", exclude_none=True)))
    assert main(["plan", "--file", str(spec_file), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["experiment"]["create_endpoint_config"]["ShadowProductionVariants"]
    assert main(["plan", "--file", str(spec_file)]) == 0
    assert "experiment: CreateEndpointConfig (both variants)" in capsys.readouterr().out


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
