"""End-to-end promotion over a real moto server on loopback (LocalAWS).

Every test deploys the source stage with the real SDK, runs `promote()` (the function
the CLI calls) with the real smoke chat and benchmark against the streaming endpoint
emulator, and then checks the state of the TARGET afterwards: endpoints, configs,
models and the SSM manifest. "Nothing changed" is asserted, not assumed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from peagle_local.emulator import LocalAWS
from rich.console import Console

from peagle_deploy.errors import DeployError, InputError, PeagleError
from peagle_deploy.promote.gates import GatesFile, parse_gates
from peagle_deploy.promote.runner import PromoteOptions, PromotionResult, promote

ROLE = "arn:aws:iam::123456789012:role/peagle-promote-test"
MODEL = "qwen3-coder-30b-a3b-instruct"
INSTANCE = "ml.g7e.2xlarge"
REGION = "us-east-1"
DEV = "peagle-qwen3-coder-30b-a3b-instruct-dev"
STAGING = "peagle-qwen3-coder-30b-a3b-instruct-staging"
POLL = 0.05
OTHER_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/someone-else:latest"

BENCH = {"concurrency": [1, 2], "num_prompts": 3, "max_tokens": 8, "warmup": 0}


def gates(**thresholds: Any) -> GatesFile:
    return parse_gates(
        {
            "stages": {
                "staging": {
                    "smoke": {"max_tokens": 8},
                    "bench": BENCH,
                    "thresholds": {"max_error_rate": 0.0, **thresholds},
                }
            }
        }
    )


@dataclass
class Env:
    aws: LocalAWS
    session: Any = None
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        # One session for the test: botocore parses each service model once per session.
        if service not in self._clients:
            self._clients[service] = self.session.client(service, region_name=REGION)
        return self._clients[service]

    def sm(self) -> Any:
        return self.client("sagemaker")

    def ssm(self) -> Any:
        return self.client("ssm")

    def deploy(self, stage: str, **overrides: Any) -> Any:
        from peagle_deploy.sdk import deploy_peagle

        return deploy_peagle(
            MODEL,
            boto_session=self.session,
            instance_type=INSTANCE,
            role_arn=ROLE,
            region=REGION,
            stage=stage,
            poll_interval_s=POLL,
            progress=False,
            **overrides,
        )

    def promote(self, stage_gates: GatesFile, **options: Any) -> PromotionResult:
        opts = PromoteOptions(
            source_stage=options.pop("source_stage", "dev"),
            target_stage=options.pop("target_stage", "staging"),
            region=REGION,
            bench_logs_delay_s=0.0,
            bench_progress=False,
            poll_interval_s=POLL,
            **options,
        )
        return promote(opts, stage_gates.for_stage(opts.target_stage), console=Console(quiet=True))

    def state(self, stage: str = "staging") -> dict[str, Any]:
        """Everything of one stage: endpoints, configs, models, manifest text."""
        sm = self.sm()
        endpoints = {
            e["EndpointName"]: sm.describe_endpoint(EndpointName=e["EndpointName"])[
                "EndpointConfigName"
            ]
            for e in sm.list_endpoints()["Endpoints"]
            if e["EndpointName"].endswith(f"-{stage}")
        }
        configs = sorted(
            c["EndpointConfigName"]
            for c in sm.list_endpoint_configs()["EndpointConfigs"]
            if f"-{stage}-" in c["EndpointConfigName"]
        )
        models = sorted(
            m["ModelName"] for m in sm.list_models()["Models"] if f"-{stage}-" in m["ModelName"]
        )
        params = self.ssm().get_parameters_by_path(Path=f"/peagle-deploy/{stage}/", Recursive=True)
        manifests = {p["Name"]: p["Value"] for p in params["Parameters"]}
        return {"endpoints": endpoints, "configs": configs, "models": models, "ssm": manifests}


@pytest.fixture
def env() -> Iterator[Env]:
    aws = LocalAWS(region=REGION)
    # Fast, deterministic pacing: the tests judge behaviour, never speed.
    aws.set_stream(ttft_s=0.002, token_delay_s=0.0005, tokens_per_chunk=2)
    with aws, aws.patched_environ():
        for name in (DEV, STAGING):
            aws.set_acceptance_metrics(name, acceptance_rate=0.5, num_speculative_tokens=3)
        import boto3

        yield Env(aws, session=boto3.Session(region_name=REGION))


def test_gates_pass_then_staging_runs_the_dev_spec_and_records_the_promotion(env: Env) -> None:
    from peagle_deploy.sdk import read_manifest

    dev = env.deploy("dev")
    assert env.aws.invocations == 0
    result = env.promote(
        gates(min_output_throughput=1, max_p99_ttft_ms=60000, min_acceptance_length=1.5)
    )
    assert result.status == "promoted", result.message
    assert result.action == "create"
    assert result.report is not None and result.report.passed
    assert {r.status for r in result.report.results} == {"pass"}
    # smoke + 2 levels x 3 requests, all on the dev endpoint (the emulated container
    # logs one metric line per invocation of the endpoint it serves)
    assert env.aws.invocations == 1 + 2 * 3
    from peagle_serve.contract import parse_metric_line

    def metric_lines(name: str) -> int:
        return sum(parse_metric_line(m) is not None for m in env.aws.log_lines(name))

    assert metric_lines(DEV) == 7 and metric_lines(STAGING) == 0

    staging = env.sm().describe_endpoint(EndpointName=STAGING)
    assert staging["EndpointStatus"] == "InService"
    assert staging["EndpointConfigName"] == result.target_names["endpoint_config"]

    source = read_manifest("dev", DEV, ssm_client=env.ssm())
    target = read_manifest("staging", STAGING, ssm_client=env.ssm())
    assert source is not None and target is not None
    # Same spec, another stage.
    assert target.spec.model_dump(exclude={"stage"}) == source.spec.model_dump(exclude={"stage"})
    assert target.stage == "staging" and target.promoted_from == f"dev/{DEV}"
    kinds = [row["kind"] for row in target.gate_results]
    assert kinds[0] == "promotion" and "smoke" in kinds and kinds.count("level") == 2
    assert dev.endpoint_name == DEV

    # Again, now with a ratio gate: the baseline is what staging recorded just now; the
    # target already runs this configuration, so nothing is deployed.
    again = env.promote(gates(min_throughput_ratio=0.01))
    assert again.status == "unchanged" and again.action == "none"
    assert again.report is not None
    assert again.report.baseline_from == f"staging/{STAGING}"
    ratio = [r for r in again.report.results if r.kind == "throughput_ratio"]
    assert len(ratio) == 2 and all(r.status == "pass" for r in ratio)


def test_failing_gate_refuses_and_changes_nothing_in_the_target(env: Env) -> None:
    env.deploy("dev")
    before = env.state()
    assert before == {"endpoints": {}, "configs": [], "models": [], "ssm": {}}
    result = env.promote(gates(min_output_throughput=10_000_000))
    assert result.status == "refused"
    assert result.report is not None
    failed = {r.name for r in result.report.failures}
    assert failed == {"output_throughput@c1", "output_throughput@c2"}
    assert "10,000,000" in result.report.failures[0].required
    assert env.state() == before


def test_failing_gate_on_an_existing_target_keeps_its_config_and_manifest(env: Env) -> None:
    env.deploy("dev")
    env.deploy("staging", num_speculative_tokens=2)  # staging runs an older config
    before = env.state()
    assert len(before["endpoints"]) == 1 and len(before["ssm"]) == 1
    result = env.promote(gates(max_p99_ttft_ms=0.001))
    assert result.status == "refused" and result.action == "update"
    assert env.state() == before


def test_source_stage_not_deployed(env: Env) -> None:
    with pytest.raises(PeagleError, match="no deployment manifest in stage 'dev'"):
        env.promote(gates())
    # A manifest whose endpoint is gone (deleted by hand) is stale, not a source.
    from peagle_deploy.sdk import PeagleEndpoint

    env.deploy("dev")
    env.sm().delete_endpoint(EndpointName=DEV)
    with pytest.raises(PeagleError, match=f"source endpoint {DEV} \\(dev\\) is not deployed"):
        env.promote(gates(), source_endpoint=DEV)
    assert env.state()["endpoints"] == {}
    PeagleEndpoint.from_name(DEV, region=REGION, boto_session=env.session).delete()


def test_missing_manifest_by_name(env: Env) -> None:
    env.deploy("dev")
    with pytest.raises(PeagleError, match="no deployment manifest for dev/other-dev"):
        env.promote(gates(), source_endpoint="other-dev")
    assert env.state()["endpoints"] == {}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("{not json", "is not JSON"),
        (json.dumps({"schema_version": 1, "endpoint_name": DEV}), "is invalid at"),
        (json.dumps({"schema_version": 99}), "schema_version 99"),
    ],
)
def test_corrupted_manifest(env: Env, value: str, problem: str) -> None:
    env.deploy("dev")
    env.ssm().put_parameter(
        Name=f"/peagle-deploy/dev/{DEV}/manifest", Value=value, Type="String", Overwrite=True
    )
    before = env.state()
    with pytest.raises(PeagleError) as info:
        env.promote(gates())
    assert "corrupted" in str(info.value) and problem in str(info.value)
    assert "redeploy dev" in str(info.value)
    assert env.state() == before


def _rewrite_dev_manifest(aws: Env, spec_changes: dict[str, Any]) -> str:
    """Edit the dev manifest's spec as anyone who may write dev's parameters could,
    keeping its recorded names and hash."""
    from peagle_deploy.records import read_record, write_record
    from peagle_deploy.sdk import DeploymentManifest

    manifest = read_record(aws.ssm(), DeploymentManifest, "dev", DEV)
    assert manifest is not None
    spec = manifest.spec.model_copy(update=spec_changes)
    return write_record(aws.ssm(), manifest.model_copy(update={"spec": spec}))


def test_a_manifest_whose_env_was_edited_is_refused_before_any_gate(env: Env) -> None:
    """Issue 29: the manifest's config name and hash kept, its env edited. The spec is
    planned again and compared with what the source runs: refused before any gate, and
    staging carries nothing of it."""
    env.deploy("dev")
    parameter = _rewrite_dev_manifest(env, {"env": {"VLLM_EXTRA_FLAG": "1"}})
    with pytest.raises(PeagleError) as info:
        env.promote(gates())
    message = str(info.value)
    assert f"the manifest {parameter} cannot be trusted" in message
    # the source's model is not described (its environment holds the source's secrets):
    # the edited env renames the planned model, which is not the one the config serves
    assert "the spec plans" in message
    assert "no gate was run" in message
    assert "\n" not in message
    assert env.aws.invocations == 0
    assert env.state()["endpoints"] == {} and env.state()["ssm"] == {}


def test_the_source_check_never_describes_the_source_model(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34, Low 2: DescribeModel shows a model's environment with the source
    stage's resolved secrets, which the target stage may not read. The source's model is
    proved by its content-derived name in the config it serves (only the source's own
    roles may create models of its names); its content is not read."""
    from botocore.client import BaseClient

    out = env.deploy("dev").deployment
    described: list[str] = []
    original = BaseClient._make_api_call

    def spy(client: Any, operation: str, params: Any) -> Any:
        if operation == "DescribeModel":
            described.append(str(params.get("ModelName")))
        return original(client, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", spy)
    result = env.promote(gates())
    assert result.status == "promoted", result.message
    assert out.model_name not in described


def test_a_precreated_target_config_serving_another_image_is_not_adopted(env: Env) -> None:
    """Issue 29: the target's next config name, made first, serving a model of another
    image. The gates pass, the promotion's deploy refuses it, removes the model it made,
    and records nothing."""
    out = env.deploy("dev").deployment
    names = env.promote(gates(), dry_run=True).target_names
    sm = env.sm()
    container = sm.describe_model(ModelName=out.model_name)["PrimaryContainer"]
    sm.create_model(
        ModelName="theirs",
        ExecutionRoleArn=ROLE,
        PrimaryContainer={**container, "Image": OTHER_IMAGE},
    )
    sm.create_endpoint_config(
        EndpointConfigName=names["endpoint_config"],
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "theirs",
                "InstanceType": INSTANCE,
                "InitialInstanceCount": 1,
            }
        ],
    )
    with pytest.raises(DeployError) as info:
        env.promote(gates())
    message = str(info.value)
    assert f"endpoint config {names['endpoint_config']} already exists with a different" in (
        message
    )
    assert "the promotion was not recorded" in message
    state = env.state()
    assert state["endpoints"] == {} and state["ssm"] == {}
    assert names["model"] not in state["models"]


def test_update_promotes_the_configuration_and_keeps_the_stage_settings(env: Env) -> None:
    from peagle_deploy.sdk import read_manifest

    env.deploy("dev")  # K=3 (catalog default), one instance, canary by default
    env.deploy(
        "staging",
        num_speculative_tokens=2,
        initial_instance_count=2,
        rollout={"strategy": "linear", "linear_step_percent": 50},
        tags={"team": "ml-platform"},
    )
    old_config = env.sm().describe_endpoint(EndpointName=STAGING)["EndpointConfigName"]

    dry = env.promote(gates(), dry_run=True)
    assert dry.action == "update"
    assert dry.changes[-1].startswith("stage settings (initial_instance_count, scaling, rollout")
    assert dry.changes[-1].endswith(f"from staging/{STAGING} (its manifest)")

    result = env.promote(gates())
    assert result.status == "promoted" and result.action == "update"
    now = env.sm().describe_endpoint(EndpointName=STAGING)
    assert now["EndpointConfigName"] == result.target_names["endpoint_config"] != old_config
    dev = read_manifest("dev", DEV, ssm_client=env.ssm())
    staging = read_manifest("staging", STAGING, ssm_client=env.ssm())
    assert dev is not None and staging is not None
    # The measured configuration moved ...
    assert staging.spec.speculative == dev.spec.speculative
    assert staging.spec.instance_type == dev.spec.instance_type
    # ... the stage kept its capacity, rollout policy and tags.
    assert staging.spec.initial_instance_count == 2
    assert staging.spec.rollout.strategy == "linear"
    assert staging.spec.tags == {"team": "ml-platform"}
    variants = env.sm().describe_endpoint_config(EndpointConfigName=now["EndpointConfigName"])
    assert variants["ProductionVariants"][0]["InitialInstanceCount"] == 2


def test_a_promotion_onto_an_autoscaled_target_keeps_its_instances_and_scaling(
    env: Env,
) -> None:
    """Staging's scaling moved it from 1 instance to 6: the promotion's blue/green update
    keeps the 6, and staging's scalable target and policy act on after it
    (docs/platform-facts.md, "Deploying onto an autoscaled endpoint")."""
    scaling = {"min_instances": 1, "max_instances": 8, "target_invocations_per_instance": 20}
    env.deploy("dev")  # K=3
    env.deploy("staging", num_speculative_tokens=2, scaling=scaling)
    assert env.aws.autoscale(STAGING, 6) == 6
    result = env.promote(gates())
    assert result.status == "promoted" and result.action == "update", result.message
    (variant,) = env.sm().describe_endpoint(EndpointName=STAGING)["ProductionVariants"]
    assert (variant["DesiredInstanceCount"], variant["CurrentInstanceCount"]) == (6, 6)
    resource = f"endpoint/{STAGING}/variant/AllTraffic"
    aas = env.client("application-autoscaling")
    (target,) = aas.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[resource])[
        "ScalableTargets"
    ]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (1, 8)
    policies = aas.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=resource)
    assert [p["PolicyName"] for p in policies["ScalingPolicies"]] == [f"{STAGING}-invocations"]
    assert env.aws.autoscale(STAGING, 7) == 7


def test_first_promotion_takes_the_stage_settings_from_the_stage_file(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No staging endpoint yet: capacity, rollout and scaling come from the stage's spec
    file (not from dev's one instance), the measured configuration from dev; and each
    side is planned exactly once (the source to check its manifest against what runs)."""
    from peagle_deploy import plan as plan_module
    from peagle_deploy.sdk import read_manifest

    stage_file = tmp_path / "staging.yaml"
    stage_file.write_text(
        "model: gpt-oss-20b\ninitial_instance_count: 2\n"
        "rollout: {strategy: canary, canary_percent: 50}\n"
        "scaling: {min_instances: 2, max_instances: 3}\ntags: {team: ml-platform}\n"
    )
    env.deploy("dev")
    plans: list[str] = []
    build_plan = plan_module.build_plan

    def counting(spec: Any) -> Any:
        plans.append(spec.stage)
        return build_plan(spec)

    monkeypatch.setattr(plan_module, "build_plan", counting)
    result = env.promote(gates(), stage_file=stage_file)
    assert result.status == "promoted" and result.action == "create", result.message
    assert plans == ["dev", "staging"]
    assert result.changes[-1].endswith(f"from {stage_file}")
    staging = read_manifest("staging", STAGING, ssm_client=env.ssm())
    dev = read_manifest("dev", DEV, ssm_client=env.ssm())
    assert staging is not None and dev is not None
    assert staging.spec.model == dev.spec.model == MODEL  # not the stage file's model
    assert staging.spec.speculative == dev.spec.speculative
    assert staging.spec.initial_instance_count == 2
    assert staging.spec.rollout.canary_percent == 50
    assert staging.spec.scaling is not None and staging.spec.scaling.max_instances == 3
    assert staging.spec.execution_role_arn == ROLE  # the file names none: the source's
    config = env.sm().describe_endpoint(EndpointName=STAGING)["EndpointConfigName"]
    variants = env.sm().describe_endpoint_config(EndpointConfigName=config)
    assert variants["ProductionVariants"][0]["InitialInstanceCount"] == 2


def test_target_update_rolls_back_and_old_config_keeps_serving(env: Env) -> None:
    from peagle_deploy.sdk import read_manifest

    env.deploy("dev")
    old = env.deploy("staging", num_speculative_tokens=2)
    old_config = env.sm().describe_endpoint(EndpointName=STAGING)["EndpointConfigName"]
    old_manifest = read_manifest("staging", STAGING, ssm_client=env.ssm())
    env.aws.script_endpoint(STAGING, updating_s=0.1, rollback_on_update=True)

    with pytest.raises(DeployError) as info:
        env.promote(gates())
    message = str(info.value)
    assert "rolled back" in message
    assert f"serves {old_config}" in message and "before the promotion" in message
    assert "not recorded" in message

    now = env.sm().describe_endpoint(EndpointName=STAGING)
    assert now["EndpointStatus"] == "InService" and now["EndpointConfigName"] == old_config
    assert read_manifest("staging", STAGING, ssm_client=env.ssm()) == old_manifest
    # The SDK removed the new config and model it made for the failed update.
    state = env.state()
    assert state["configs"] == [old_config]
    assert len(state["models"]) == 1
    assert old.endpoint_name == STAGING


def test_busy_target_is_refused_before_any_gate(env: Env) -> None:
    env.deploy("dev")
    env.deploy("staging", num_speculative_tokens=2)
    env.aws.script_endpoint(STAGING, updating_s=60.0)
    env.deploy("staging", num_speculative_tokens=1, wait=False)  # now Updating
    invocations = env.aws.invocations
    with pytest.raises(PeagleError, match=f"{STAGING} \\(staging\\) is Updating"):
        env.promote(gates())
    assert env.aws.invocations == invocations


def test_dry_run_runs_no_gate_and_changes_nothing(env: Env) -> None:
    env.deploy("dev")
    before = env.state()
    invocations = env.aws.invocations
    result = env.promote(gates(min_output_throughput=1), dry_run=True)
    assert result.status == "dry-run" and result.action == "create" and result.report is None
    assert f"create endpoint {STAGING}" in result.changes
    assert result.changes[-1] == (
        "stage settings copied from dev (no staging configuration recorded yet, and no "
        "stage file: neither --stage-file nor stages/staging.yaml)"
    )
    assert result.gates_planned[:3] == ["smoke", "error_rate@c1", "output_throughput@c1"]
    assert env.aws.invocations == invocations  # no smoke chat, no benchmark
    assert env.state() == before


def test_write_spec_for_cdk_writes_the_file_and_deploys_nothing(env: Env, tmp_path: Path) -> None:
    from peagle_deploy.spec import load_spec

    env.deploy("dev")
    target = tmp_path / "stages" / "staging.yaml"
    target.parent.mkdir()
    # The CDK stage file as the team keeps it: an older K, and staging's own capacity.
    target.write_text(
        f"model: {MODEL}\ninstance_type: ml.g7e.4xlarge\ninitial_instance_count: 2\n"
        "speculative: {num_speculative_tokens: 2}\nrollout: {strategy: canary, "
        "canary_percent: 50}\n"
    )
    result = env.promote(gates(), write_spec=target)
    assert result.status == "spec-written"
    spec = load_spec(target)
    assert spec.stage == "staging" and spec.model == MODEL and spec.instance_type == INSTANCE
    assert spec.speculative.num_speculative_tokens is None  # dev's: the catalog default
    assert spec.initial_instance_count == 2 and spec.rollout.canary_percent == 50
    assert json.loads(target.with_name("staging.yaml.gates.json").read_text())["passed"]
    assert env.state()["endpoints"] == {}


def test_write_spec_refuses_a_plaintext_secret_before_any_gate(env: Env, tmp_path: Path) -> None:
    """The SDK deployed dev with a token in env (warned, kept only in the SecureString
    manifest); `--write-spec` would put it in a stage file meant to be committed, and
    `cdk deploy` of that file in the template: refused, naming the variable and the
    `secrets` field, before the gates run and before anything is written."""
    token = "hf_" + "W" * 34
    env.deploy("dev", env={"HF_TOKEN": token})
    invocations = env.aws.invocations
    target = tmp_path / "staging.yaml"
    with pytest.raises(InputError) as err:
        env.promote(gates(), write_spec=target)
    assert err.value.field == "env.HF_TOKEN" and "secrets:" in str(err.value)
    assert token not in str(err.value)
    assert not target.exists() and not target.with_name("staging.yaml.gates.json").exists()
    assert env.aws.invocations == invocations  # no smoke chat, no benchmark
    assert env.state()["endpoints"] == {}


def test_write_spec_output_is_a_stage_file_the_cdk_app_synthesizes(
    env: Env, tmp_path: Path
) -> None:
    """Promote into a copy of the repository's own stages/staging.yaml and plan it the
    way the CDK app does (infra.stages.StageConfig): the file must stay usable."""
    import shutil

    from infra.stages import StageConfig

    repo = Path(__file__).resolve().parents[2]
    target = tmp_path / "staging.yaml"
    shutil.copy(repo / "stages" / "staging.yaml", target)
    before = StageConfig(name="staging", spec_file=target).load_spec()

    env.deploy("dev")
    assert env.promote(gates(), write_spec=target).status == "spec-written"
    stage = StageConfig(name="staging", spec_file=target)
    after = stage.load_spec()
    assert after.model == MODEL  # dev's configuration ...
    assert after.initial_instance_count == before.initial_instance_count  # ... staging's
    assert after.scaling == before.scaling and after.rollout == before.rollout
    assert after.tags == before.tags
    plan = stage.plan()
    assert plan.endpoint_name.endswith("-staging")


def test_cli_promote_json_and_refusal_exit_code(
    env: Env, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    from peagle_deploy.cli.app import main

    monkeypatch.chdir(tmp_path)  # no stages/ here: the CLI finds no stage file
    env.deploy("dev")
    gates_file = tmp_path / "gates.yaml"
    doc = {
        "stages": {
            "staging": {
                "smoke": {"max_tokens": 8},
                "bench": BENCH,
                "thresholds": {"min_output_throughput": 10_000_000},
            }
        }
    }
    gates_file.write_text(yaml.safe_dump(doc))
    argv = [
        "promote",
        "--from",
        "dev",
        "--to",
        "staging",
        "--gates",
        str(gates_file),
        "--region",
        REGION,
        "--json",
    ]

    assert main([*argv, "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["status"] == "dry-run" and dry["target_names"]["endpoint"] == STAGING
    assert dry["changes"][-1].startswith("stage settings copied from dev")

    # The repository layout's stages/staging.yaml is the default stage file.
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "staging.yaml").write_text(
        f"model: {MODEL}\ninitial_instance_count: 2\n"
    )
    assert main([*argv, "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["changes"][-1].endswith("from stages/staging.yaml")

    assert main(argv) == 3
    refused = json.loads(capsys.readouterr().out)
    assert refused["status"] == "refused" and refused["report"]["passed"] is False
    assert env.state()["endpoints"] == {}

    # Bad gates: one line naming the field, exit 2, before any AWS call.
    gates_file.write_text("stages:\n  staging:\n    thresholds: {max_eror_rate: 1}\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "gates.stages.staging.thresholds.max_eror_rate" in err and "Traceback" not in err


def test_deleted_endpoint_with_a_leftover_manifest_is_not_a_candidate(env: Env) -> None:
    """Two dev endpoints, one deleted in the console (`peagle delete` would also remove
    its manifest): promote picks the other."""
    env.deploy("dev")
    env.deploy("dev", endpoint_name="coder-b-dev")
    env.client("sagemaker").delete_endpoint(EndpointName="coder-b-dev")
    # The manifest of the deleted endpoint stays in SSM ...
    assert len(env.state("dev")["ssm"]) == 2
    # ... but the source is the endpoint that still exists.
    result = env.promote(gates(), dry_run=True)
    assert result.status == "dry-run"
    assert result.source.endpoint_name == DEV
    assert result.target.endpoint_name == STAGING
