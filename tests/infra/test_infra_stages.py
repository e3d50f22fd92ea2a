"""Stages from cdk.json context, refusals before synthesis, and app.py's own behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cdk_helpers import ROOT, cdk_context

from infra.stages import STAGES_CONTEXT_KEY, StageConfig, stage_configs
from peagle_deploy.errors import InputError

pytestmark = pytest.mark.xdist_group(name="cdk")


def test_cdk_json_defines_dev_staging_prod_from_spec_files() -> None:
    stages = stage_configs(cdk_context()[STAGES_CONTEXT_KEY], ROOT)
    assert [s.name for s in stages] == ["dev", "staging", "prod"]
    for stage in stages:
        assert stage.spec_file is not None and stage.spec_file.is_file()
        assert stage.load_spec().stage == stage.name
    prod = stages[2]
    assert prod.retain and prod.termination_protection
    assert prod.alarms == {
        "errors_5xx_per_minute": 3,
        "model_latency_p90_ms": 45000,
        "evaluation_minutes": 2,
    }


def test_cdk_json_runs_the_app_with_the_venv_python_when_present() -> None:
    app = json.loads((ROOT / "cdk.json").read_text())["app"]
    assert ".venv/bin/python app.py" in app and "python3 app.py" in app


def test_context_given_as_json_text_on_the_command_line() -> None:
    text = json.dumps({"dev": {"overrides": {"model": "gpt-oss-20b", "region": "us-west-2"}}})
    (stage,) = stage_configs(text, ROOT)
    assert stage.spec_file is None
    assert stage.load_spec().region == "us-west-2"


@pytest.mark.parametrize(
    ("context", "field"),
    [
        (None, STAGES_CONTEXT_KEY),
        ({}, STAGES_CONTEXT_KEY),
        ("{not json", STAGES_CONTEXT_KEY),
        ({"Prod": {"spec": "stages/prod.yaml"}}, f"{STAGES_CONTEXT_KEY}.Prod"),
        ({"dev": {"spec": "stages/dev.yaml", "colour": 1}}, f"{STAGES_CONTEXT_KEY}.dev.colour"),
        ({"dev": {}}, f"{STAGES_CONTEXT_KEY}.dev"),
        ({"dev": ["x"]}, f"{STAGES_CONTEXT_KEY}.dev"),
        (
            {"dev": {"spec": "stages/dev.yaml", "alarms": {"p99": 1}}},
            f"{STAGES_CONTEXT_KEY}.dev.alarms.p99",
        ),
        (
            {"dev": {"spec": "stages/dev.yaml", "alarms": {"evaluation_minutes": 0}}},
            f"{STAGES_CONTEXT_KEY}.dev.alarms.evaluation_minutes",
        ),
        (
            {"dev": {"spec": "stages/dev.yaml", "log_retention_days": "long"}},
            f"{STAGES_CONTEXT_KEY}.dev.log_retention_days",
        ),
        (
            {"prod": {"spec": "stages/prod.yaml", "retain": "false"}},
            f"{STAGES_CONTEXT_KEY}.prod.retain",
        ),
        (
            {"prod": {"spec": "stages/prod.yaml", "termination_protection": 1}},
            f"{STAGES_CONTEXT_KEY}.prod.termination_protection",
        ),
        (
            {"prod": {"spec": "stages/prod.yaml", "account": "12345"}},
            f"{STAGES_CONTEXT_KEY}.prod.account",
        ),
        (
            {"prod": {"spec": "stages/prod.yaml", "promote_from": "qa"}},
            f"{STAGES_CONTEXT_KEY}.prod.promote_from",
        ),
        (
            {"prod": {"spec": "stages/prod.yaml", "promote_from": "prod"}},
            f"{STAGES_CONTEXT_KEY}.prod.promote_from",
        ),
    ],
)
def test_bad_stage_context_names_the_key(context: Any, field: str) -> None:
    with pytest.raises(InputError) as err:
        stage_configs(context, ROOT)
    assert err.value.field == field


def test_promotions_come_from_the_stage_before_unless_said() -> None:
    dev, staging, prod = stage_configs(
        {
            "dev": {"spec": "stages/dev.yaml"},
            "staging": {"spec": "stages/staging.yaml"},
            "prod": {"spec": "stages/prod.yaml", "promote_from": "dev"},
        },
        ROOT,
    )
    assert (dev.promote_from, staging.promote_from, prod.promote_from) == (None, "dev", "dev")
    (alone,) = stage_configs({"prod": {"spec": "stages/prod.yaml", "promote_from": None}}, ROOT)
    assert alone.promote_from is None


def test_jumpstart_ids_are_refused_for_synth() -> None:
    stage = StageConfig(
        name="dev", spec_file=None, overrides={"model": "openai-reasoning-gpt-oss-20b"}
    )
    with pytest.raises(InputError) as err:
        stage.load_spec()
    assert err.value.field == "model"
    assert "gpt-oss-20b" in (err.value.allowed or "") and "custom" in (err.value.allowed or "")


_APP_SCRIPT = """
import json, sys
import app
base = json.loads(sys.argv[2])
for stages in json.loads(sys.argv[1]):
    print("BEGIN", flush=True)
    print("BEGIN", file=sys.stderr, flush=True)
    rc = app.main({**base, "peagle:stages": stages})
    leaked = sorted(m for m in sys.modules if m.split(".")[0] == "sagemaker")
    print("RC", rc, "SAGEMAKER", leaked, flush=True)
"""


@pytest.fixture(scope="module")
def app_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[str], Path]:
    """app.py's main(), first with KV_AWARE routing (must be refused), then the dev
    stage (must synthesize). One process for both: starting aws_cdk costs seconds.
    (test_infra_cli_synth runs it through the CDK CLI.)"""
    out = tmp_path_factory.mktemp("app-out")
    runs = [
        {"dev": {"spec": "stages/dev.yaml", "overrides": {"routing_strategy": "KV_AWARE"}}},
        {"dev": {"spec": "stages/dev.yaml"}},
    ]
    env = {
        **os.environ,
        "CDK_OUTDIR": str(out),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    env.pop("CDK_DEFAULT_ACCOUNT", None)
    result = subprocess.run(
        [sys.executable, "-c", _APP_SCRIPT, json.dumps(runs), json.dumps(cdk_context())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    stdout = result.stdout.split("BEGIN\n")[1:]
    stderr = result.stderr.split("BEGIN\n")[1:]
    assert len(stdout) == 2 and len(stderr) == 2, result.stdout + result.stderr
    return stdout, stderr, out


def test_app_refuses_kv_aware_routing_with_one_line(
    app_runs: tuple[list[str], list[str], Path],
) -> None:
    """KV_AWARE is valid for the SDK but not expressible in CloudFormation."""
    stdout, stderr, _ = app_runs
    assert "RC 2 SAGEMAKER []" in stdout[0], stderr[0]
    errors = [line for line in stderr[0].splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[0]
    assert "routing_strategy" in errors[0] and "KV_AWARE" in errors[0]
    assert "peagle deploy" in errors[0]
    assert "Traceback" not in stderr[0]


def test_app_synthesizes_a_stage_without_importing_sagemaker(
    app_runs: tuple[list[str], list[str], Path],
) -> None:
    stdout, stderr, out = app_runs
    assert "RC 0 SAGEMAKER []" in stdout[1], stderr[1]
    template = json.loads((out / "PeagleEndpoint-dev.template.json").read_text())
    assert any(r["Type"] == "Custom::PeagleModel" for r in template["Resources"].values())
