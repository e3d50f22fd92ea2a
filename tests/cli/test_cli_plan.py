"""`peagle plan` / `peagle models`: flags over files, JSON output, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from start_up_probe import modules_loaded

from peagle_deploy.catalog import INSTANCE_TYPES, MODELS
from peagle_deploy.cli.app import main
from peagle_deploy.cli.spec_options import spec_options
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec

GEMMA_ON_0_18 = (  # vLLM 0.18.0 does not register Gemma-4
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.18.0-gpu-py312-cu129-ubuntu22.04-sagemaker"
)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_json_is_exactly_to_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "plan", "qwen3-coder-30b-a3b-instruct", "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert doc == build_plan(load_spec(model="qwen3-coder-30b-a3b-instruct")).to_json()
    container = doc["create_model"]["PrimaryContainer"]
    assert container["AdditionalModelDataSources"][0]["ChannelName"] == "eagle"
    assert '"parallel_drafting":true' in container["Environment"]["SM_VLLM_SPECULATIVE_CONFIG"]
    variant = doc["create_endpoint_config"]["ProductionVariants"][0]
    assert variant["InstanceType"].startswith("ml.g7e.")


def test_flags_override_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "model: gpt-oss-20b\nstage: staging\ninstance_type: ml.g7e.4xlarge\n"
        "speculative:\n  num_speculative_tokens: 5\nenv:\n  A: '1'\n"
    )
    code, out, _ = _run(
        capsys,
        "plan",
        "--file",
        str(spec),
        "-k",
        "7",
        "--instance-type",
        "ml.g7e.8xlarge",
        "--env",
        "B=2",
        "--tag",
        "team=ml",
        "--routing-strategy",
        "PREFIX_AWARE",
        "--role-arn",
        "arn:aws:iam::123456789012:role/exec",
        "--no-network-isolation",
        "--subnet",
        "subnet-0123abcd",
        "--security-group",
        "sg-0123abcd",
        "--json",
    )
    assert code == 0
    doc = json.loads(out)
    model = doc["create_model"]
    env = model["PrimaryContainer"]["Environment"]
    assert json.loads(env["SM_VLLM_SPECULATIVE_CONFIG"])["num_speculative_tokens"] == 7
    assert env["A"] == "1" and env["B"] == "2"
    assert model["EnableNetworkIsolation"] is False
    assert model["VpcConfig"] == {
        "SecurityGroupIds": ["sg-0123abcd"],
        "Subnets": ["subnet-0123abcd"],
    }
    assert model["ExecutionRoleArn"] == "arn:aws:iam::123456789012:role/exec"
    variant = doc["create_endpoint_config"]["ProductionVariants"][0]
    assert variant["InstanceType"] == "ml.g7e.8xlarge"
    assert variant["RoutingConfig"] == {"RoutingStrategy": "PREFIX_AWARE"}
    assert doc["names"]["endpoint"] == "peagle-gpt-oss-20b-staging"
    assert {"Key": "team", "Value": "ml"} in doc["create_endpoint"]["Tags"]
    assert not any("execution_role_arn" in w for w in doc["warnings"])


def test_human_output_has_tables_requests_and_warnings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "plan", "gpt-oss-20b", "--mode", "eagle3", "--tp", "1")
    assert code == 0
    assert "peagle plan: peagle-gpt-oss-20b-dev" in out
    for title in ("CreateModel", "CreateEndpointConfig", "CreateEndpoint", "UpdateEndpoint"):
        assert title in out
    assert "warning:" in err and "placeholder role" in err


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["plan", "gpt-oss-20b", "-k", "0"], "speculative.num_speculative_tokens"),
        (["plan", "gpt-oss-20b", "--mode", "medusa"], "speculative.mode"),
        (["plan", "gpt-oss-20b", "--env", "NOVALUE"], "--env"),
        (["plan", "gpt-oss-20b", "--tag", "=x"], "--tag"),
        (["plan"], "model"),
        (["plan", "gpt-oss-20b", "--instance-type", "ml.c5.xlarge"], "instance_type"),
        (["plan", "gpt-oss-20b", "--region", "moon-1"], "region"),
        (["plan", "gpt-oss-20b", "--stage", "QA_1"], "stage"),
        (["plan", "gpt-oss-20b", "--tp", "4"], "tensor_parallel_size"),
        (["plan", "gpt-oss-20b", "--kms-key-id", "not a key"], "kms_key_id"),
        (["plan", "gpt-oss-20b", "--subnet", "subnet-0123abcd"], "vpc.security_group_ids"),
        (["plan", "gpt-oss-20b", "--routing-strategy", "FASTEST"], "routing_strategy"),
        (["plan", "gemma-4-31b-it", "--image-uri", GEMMA_ON_0_18], "image_uri"),
        (["plan", "gpt-oss-20b", "--image-uri", "nginx:latest"], "image_uri"),
    ],
)
def test_bad_flags_give_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], field: str
) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: ")
    assert "Traceback" not in err


def test_bad_file_gives_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [gpt-oss-20b\n")
    code, out, err = _run(capsys, "plan", "--file", str(bad))
    assert code == 2 and out == ""
    assert err.startswith("error: --file: ") and len(err.strip().splitlines()) == 1


def test_usage_errors_and_help_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "--help")[0] == 0
    assert _run(capsys, "plan", "--help")[0] == 0
    code, _, err = _run(capsys, "plan", "--bogus")
    assert code == 2 and "No such option" in err and "Traceback" not in err
    code, _, err = _run(capsys, "plan", "gpt-oss-20b", "--tp", "two")
    assert code == 2 and "--tp" in err
    assert _run(capsys, "no-such-command")[0] == 2


def test_models_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "models")
    assert code == 0 and "gpt-oss-20b" in out and "*" in out and "unverified" in out
    code, out, _ = _run(capsys, "models", "--json")
    models = {m["key"]: m for m in json.loads(out)}
    assert set(models) == {
        "gpt-oss-120b",
        "gpt-oss-20b",
        "qwen3-coder-30b-a3b-instruct",
        "gemma-4-31b-it",
    }
    qwen = models["qwen3-coder-30b-a3b-instruct"]
    assert qwen["jumpstart_id"]["verified"] is False and "jumpstart_id" in qwen["unverified"]
    assert models["gpt-oss-20b"]["drafter_parallel_tokens"] == {
        "value": 10,
        "verified": True,
        "source": MODELS["gpt-oss-20b"].drafter_parallel_tokens.source,
    }
    code, out, _ = _run(capsys, "models", "--instances", "--json")
    instances = {i["name"]: i for i in json.loads(out)}
    assert instances["ml.g7e.12xlarge"]["gpu_count"]["value"] == 2
    assert instances["ml.p5e.48xlarge"]["ebs_volume"] == {
        "value": False,
        "verified": True,
        "source": INSTANCE_TYPES["ml.p5e.48xlarge"].ebs_volume.source,
    }
    code, out, _ = _run(capsys, "models", "--instances")
    assert code == 0 and "ml.p6-b200.48xlarge" in out


def test_spec_options_pass_only_given_flags_as_spec_paths() -> None:
    """Any command can take the spec flags; it gets the given ones keyed by spec path."""
    import typer
    from typer.testing import CliRunner

    seen: list[dict[str, object]] = []

    @spec_options
    def probe(*, knobs: dict[str, object] | None = None, extra: int = 0) -> None:
        seen.append({**(knobs or {}), "extra": extra})

    app = typer.Typer()
    app.command()(probe)
    runner = CliRunner()
    assert runner.invoke(app, []).exit_code == 0
    argv = ["--tp", "2", "-e", "A=b=c", "--no-network-isolation", "--alarm", "x", "--extra", "3"]
    assert runner.invoke(app, argv).exit_code == 0
    assert seen == [
        {"extra": 0},
        {
            "tensor_parallel_size": 2,
            "env": {"A": "b=c"},
            "network_isolation": False,
            "rollout.alarms": ["x"],
            "extra": 3,
        },
    ]


def test_plan_of_a_catalog_model_imports_no_aws_sdk() -> None:
    """The cold-start budget: catalog keys never load sagemaker, boto3, botocore or yaml."""

    heavy = ("sagemaker", "aws_cdk", "boto3", "botocore", "yaml")
    assert modules_loaded(["plan", "gpt-oss-20b", "--json"], heavy, top_level=True) == []


def test_human_plan_redacts_secret_env_values(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys, "plan", "gpt-oss-20b", "--env", "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123"
    )
    assert code == 0
    assert "hf_abcdefghijklmnopqrstuvwxyz0123" not in out + err
    assert "<redacted>" in out
    assert "HF_TOKEN" in err  # the warning names the key, not the value


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from peagle_deploy import __version__

    code, out, _ = _run(capsys, "--version")
    assert code == 0 and out.strip() == f"peagle-deploy {__version__}"


def _scaled_spec(tmp_path: Path) -> Path:
    """gpt-oss-20b on 2 instances, autoscaled 2-4 at 30 invocations/instance/minute."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "model: gpt-oss-20b\ninitial_instance_count: 2\n"
        "scaling: {min_instances: 2, max_instances: 4, target_invocations_per_instance: 30}\n"
    )
    return spec


def test_human_plan_shows_scaling_and_rollout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _scaled_spec(tmp_path)
    code, out, _ = _run(capsys, "plan", "-f", str(spec), "--alarm", "p99")
    assert code == 0
    assert "2-4 instances, target 30 invocations/instance/minute" in out
    assert "canary 10%, every 300 s, rollback on p99" in out
    assert "RegisterScalableTarget" in out and "PutScalingPolicy" in out
    code, out, _ = _run(capsys, "plan", "gpt-oss-20b")
    assert "fixed instance count (no autoscaling)" in out and "all-at-once" in out


def test_plan_and_deploy_share_the_spec_flags() -> None:
    """One flag table: every spec flag is an option of both commands, with the same help."""
    from typer.main import get_command

    from peagle_deploy.cli.app import app
    from peagle_deploy.spec.flags import spec_flags

    root: Any = get_command(app)
    for name in ("plan", "deploy"):
        options = {o: p for p in root.commands[name].params for o in p.opts}
        for flag in spec_flags():
            assert options[flag.flag].help == flag.help, (name, flag.flag)


def test_json_plan_carries_the_autoscaling_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _scaled_spec(tmp_path)
    code, out, _ = _run(capsys, "plan", "-f", str(spec), "--json")
    assert code == 0
    scaling = json.loads(out)["autoscaling"]
    target = scaling["register_scalable_target"]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 4)
    assert target["ResourceId"] == "endpoint/peagle-gpt-oss-20b-dev/variant/AllTraffic"
    policy = scaling["put_scaling_policy"]["TargetTrackingScalingPolicyConfiguration"]
    assert policy["TargetValue"] == 30.0
    code, out, _ = _run(capsys, "plan", "gpt-oss-20b", "--json")
    assert json.loads(out)["autoscaling"] is None
