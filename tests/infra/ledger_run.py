"""The runs the call ledger records, against the emulator (moto in-process with the
endpoint emulator and the account's stand-ins), each as the role that makes it.

The stages are the repository's own (cdk.json's `peagle:stages`, `stages/*.yaml`), and
every stage's CI role is the synthesized PeagleCiRoles role, put into the emulated
account with its policy: its jobs run with that role's session credentials, so
`peagle doctor`'s `caller.permissions` asks the emulator's policy simulator about the
very policy the ledger then gives iam-simulate.

What runs, in order (`run_all`):

- the CDK model provider's handler, loaded from each stage stack's Lambda asset, with
  CloudFormation's Create, Update and Delete events (the stack's handler role);
- dev: the workflow's deploy-dev job (create), an update through `deploy_peagle`,
  `peagle status`, `list`, `invoke` (both ways), `peagle doctor` of a spec and
  `--stage`; experiments through the workflow's experiment job: a shadow one that
  concludes with a promotion, a split one with status and abort, and a shadow one that
  `watch` aborts on a guardrail;
- the workflow's promote-staging and promote-prod jobs (dry run, then the promotion);
- prod (autoscaled, moved to 3 instances): a shadow experiment that SageMaker ends on its
  schedule, then status and abort through the workflow (the incumbent's instances put
  back, its scaling given back); then a deploy onto another instance type, which takes
  the variant's scaling off around the update and puts it back;
- dev: `peagle delete`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import yaml
from call_ledger import Recorder
from cdk_helpers import ROOT, Synthesized, cdk_context
from iam_oracle import ACCOUNT, TemplateRoles

from infra.stages import STAGES_CONTEXT_KEY, stage_configs
from peagle_deploy.naming import EXPERIMENT_STAGE_TAG, STAGE_TAG
from peagle_deploy.stages import stack_name

REGION = "us-east-1"
STAGES = ("dev", "staging", "prod")
WORKFLOW = ROOT / ".github" / "workflows" / "deploy.yml"
GATES = {
    "version": 1,
    "stages": {
        stage: {
            "smoke": {"max_tokens": 8},
            "bench": {"concurrency": [1], "num_prompts": 2, "max_tokens": 8, "warmup": 0},
            "thresholds": {"max_error_rate": 0.0},
        }
        for stage in ("staging", "prod")
    },
}
"""Small gates for the workflow's `PEAGLE_GATES` (the example's floors are a GPU's)."""
QUICK = {"block_minutes": 4, "cycle_minutes": 20, "max_duration_minutes": 120}
"""An experiment that decides in emulated minutes (a real endpoint keeps the day)."""


def execution_role(stage: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/peagle-execution-{stage}"


def experiment_role(stage: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/peagle-experiment-{stage}"


def endpoint(stage: str) -> str:
    return f"peagle-gpt-oss-20b-{stage}"


class Wall:
    """The emulated wall clock (seconds since the epoch), moved by hand."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).timestamp()

    def __call__(self) -> float:
        return self.now

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)


@dataclass
class Run:
    """What the runs need: the recorder, the emulator, the CI roles and the files."""

    recorder: Recorder
    ext: Any
    wall: Wall
    ci: TemplateRoles
    tmp: Path
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)
    """stage -> the environment of its CI role's session."""
    outputs: list[tuple[str, int, str]] = field(default_factory=list)
    """(command, exit code, stderr) of every CLI run, for a failure's message."""
    asked: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    """(stage, command) -> the calls `caller.permissions` asked about before it."""

    def ci_role(self, stage: str) -> str:
        return self.ci.role_id(f"Deploy{stage}Role")

    @contextlib.contextmanager
    def as_ci(self, stage: str, command: str) -> Iterator[None]:
        """The block runs with `stage`'s CI role session, its calls recorded as its."""
        saved = {k: os.environ.get(k) for k in self.credentials[stage]}
        os.environ.update(self.credentials[stage])
        boto3.DEFAULT_SESSION = None
        try:
            with self.recorder.on(stage, "ci", command):
                yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            boto3.DEFAULT_SESSION = None

    def cli(self, stage: str, argv: list[str], *, expect: int = 0) -> str:
        """`peagle ARGV` as `stage`'s CI job runs it; returns its stdout."""
        import io
        from contextlib import redirect_stderr, redirect_stdout

        from peagle_deploy.cli.app import main

        out, err = io.StringIO(), io.StringIO()
        label = " ".join(argv[:2]) if argv[0] == "experiment" else argv[0]
        with self.as_ci(stage, label), redirect_stdout(out), redirect_stderr(err):
            code = main(argv)
        self.outputs.append((" ".join(argv), code, err.getvalue()))
        assert code == expect, (
            f"peagle {' '.join(argv)} -> {code}: {err.getvalue()[-2000:]} {out.getvalue()[-3000:]}"
        )
        return out.getvalue()


# --- set-up (not recorded) ---------------------------------------------------------------


def stage_plans() -> dict[str, Any]:
    """cdk.json's stages, planned as `cdk synth` plans them."""
    configs = stage_configs(cdk_context()[STAGES_CONTEXT_KEY], ROOT)
    return {c.name: c.plan() for c in configs}


def _role(iam: Any, arn: str, trust: Mapping[str, Any], tags: Mapping[str, str]) -> None:
    iam.create_role(
        RoleName=arn.rsplit("/", 1)[1],
        AssumeRolePolicyDocument=json.dumps(trust),
        Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
    )


def stage_account(run: Run, plans: Mapping[str, Any], account: Any) -> None:
    """Each stage's world (model data, execution role, image, quota), its experiment
    role, and its CI role with the synthesized policy, assumed for its jobs."""
    from peagle_local.emulator.world import SAGEMAKER_TRUST, stage_world

    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec import spec_with

    session = boto3.Session(region_name=REGION)
    iam = session.client("iam")
    for stage, plan in plans.items():
        with_role = build_plan(spec_with(plan.spec, execution_role_arn=execution_role(stage)))
        stage_world(with_role, session, account, endpoint_quota=64)
        account.set_endpoint_quota(PROD_NEXT_TYPE, 64, region=REGION)
        iam.tag_role(
            RoleName=f"peagle-execution-{stage}", Tags=[{"Key": STAGE_TAG, "Value": stage}]
        )
        _role(iam, experiment_role(stage), SAGEMAKER_TRUST, {EXPERIMENT_STAGE_TAG: stage})
        role_id = run.ci_role(stage)
        iam.create_role(RoleName=role_id, AssumeRolePolicyDocument=json.dumps(SAGEMAKER_TRUST))
        for policy in run.ci.identity_policies(role_id):
            iam.put_role_policy(
                RoleName=role_id,
                PolicyName=policy["name"],
                PolicyDocument=json.dumps(policy["policy"]),
            )
        creds = session.client("sts").assume_role(
            RoleArn=run.ci.role_arn(role_id), RoleSessionName=f"gha-{stage}"
        )["Credentials"]
        run.credentials[stage] = {
            "AWS_ACCESS_KEY_ID": creds["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
            "AWS_SESSION_TOKEN": creds["SessionToken"],
        }


# --- the workflow's commands ----------------------------------------------------------------


def _expression(text: str, values: Mapping[str, str]) -> str:
    """`${{ vars.X }}`, `${{ inputs.X }}`, `${{ env.X }}`, `${{ github.run_id }}`."""

    def value(match: re.Match[str]) -> str:
        return values.get(match.group(1).strip(), "")

    return re.sub(r"\$\{\{\s*([\w.\-]+)\s*\}\}", value, text)


def job_commands(job: str, values: Mapping[str, str]) -> list[tuple[str, list[str]]]:
    """The `peagle` commands of a workflow job's steps that run for `values` (a step's
    `if:` on `inputs.experiment` is honoured), each with its environment expanded."""
    workflow = yaml.safe_load(WORKFLOW.read_text())
    spec = workflow["jobs"][job]
    env = {**workflow.get("env", {}), **spec.get("env", {})}
    out = []
    for step in spec["steps"]:
        condition = str(step.get("if", ""))
        wanted = re.search(r"inputs\.experiment == '(\w+)'", condition)
        if wanted and wanted.group(1) != values.get("inputs.experiment"):
            continue
        text = str(step.get("run", "")).strip()
        if not text.startswith("peagle "):
            continue
        step_env = {
            k: _expression(str(v), {**values, **{f"env.{a}": str(b) for a, b in env.items()}})
            for k, v in {**env, **step.get("env", {})}.items()
        }
        step_env |= {k: v for k, v in values.items() if k.isupper()}
        command = re.sub(r"\s>\s*\S+\s*$", "", " ".join(text.split()))
        argv = [os.path.expandvars(a) for a in shlex.split(_with_env(command, step_env))]
        out.append((str(step.get("name", "")), argv[1:]))
    return out


def _with_env(command: str, env: Mapping[str, str]) -> str:
    """`"$VAR"` replaced by its quoted value (the shell's expansion, for the few we use)."""
    for key, value in env.items():
        command = command.replace(f'"${key}"', shlex.quote(value)).replace(
            f"${key}", shlex.quote(value)
        )
    return command


def run_job(run: Run, job: str, stage: str, values: Mapping[str, str]) -> list[str]:
    """Every `peagle` step of workflow job `job` as `stage`'s CI role; their stdouts."""
    base = {
        "vars.SAGEMAKER_EXECUTION_ROLE_ARN": execution_role(stage),
        "vars.SAGEMAKER_EXPERIMENT_ROLE_ARN": experiment_role(stage),
        "github.run_id": "1",
        "PEAGLE_GATES": str(run.tmp / "gates.yaml"),
    }
    commands = job_commands(job, {**base, **values})
    assert commands, f"job {job} ran no peagle command for {values}"
    return [run.cli(stage, argv) for _, argv in commands]


def experiment_job(run: Run, stage: str, action: str, **inputs: str) -> str:
    """The workflow's experiment job for `stage` with `action` (its one peagle step)."""
    values = {
        "inputs.experiment": action,
        "inputs.stage": stage,
        "inputs.endpoint": endpoint(stage),
        **{f"inputs.{k}": v for k, v in inputs.items()},
    }
    (out,) = run_job(run, "experiment", stage, values)
    return out


# --- traffic (a caller's, not recorded) ----------------------------------------------------


def traffic(run: Run, name: str, *, minutes: int, per_minute: int = 8) -> None:
    with run.recorder.off():
        rt = boto3.client("sagemaker-runtime", region_name=REGION)
        for i in range(minutes * per_minute):
            body = {"messages": [{"role": "user", "content": f"question {i}"}], "max_tokens": 48}
            rt.invoke_endpoint(
                EndpointName=name, Body=json.dumps(body), ContentType="application/json"
            )
            run.wall.now += 60 / per_minute


def experiment_spec(run: Run, stage: str, name: str, **experiment: Any) -> Path:
    """What the stage's endpoint serves (its manifest's spec) with an experiment block."""
    from peagle_deploy.records import read_manifest

    manifest = read_manifest(stage, endpoint(stage), region=REGION)
    assert manifest is not None
    doc = manifest.spec.model_dump(mode="json", exclude_none=True)
    doc["experiment"] = {**QUICK, **experiment}
    path = run.tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


Step = Callable[[Run], None]


def promql(ext: Any) -> Callable[[str, dict[str, str]], Any]:
    """CloudWatch's PromQL query answered by the emulator's store, in-process (moto's
    in-process mock sees botocore's requests only; tests/experiment runs it over HTTP)."""

    def answer(path: str, fields: dict[str, str]) -> Any:
        assert path == "/api/v1/query_range", path
        step = float(fields["step"].removesuffix("s"))
        return ext.detailed.query_range(
            fields["query"], float(fields["start"]), float(fields["end"]), step
        )

    return answer


# --- the runs ---------------------------------------------------------------------------------


def provider_runs(run: Run, synth: Synthesized) -> None:
    """Each stage stack's model handler as Lambda runs it: Create, Update (tags), Delete."""
    from model_provider_kit import (
        FakeContext,
        event,
        execution_role_id,
        handler_asset,
        load_handler,
        model_properties,
    )

    for stage in STAGES:
        stack = stack_name(stage)
        roles = TemplateRoles(synth.templates[stack], REGION, stack=stack)
        props = model_properties(synth, stack, roles.role_arn(execution_role_id(synth, stack)))
        module = load_handler(handler_asset(synth, stack))
        module.SLEEP = lambda _s: None
        request = json.loads(props["CreateModel"])
        retagged = {
            **props,
            "CreateModel": json.dumps({**request, "Tags": [*request["Tags"], _TEAM_TAG]}),
        }
        with run.recorder.on(stage, "provider", "model provider"):
            made = module.on_event(event("Create", props), FakeContext())["PhysicalResourceId"]
            update = event("Update", retagged, physical_id=made)
            update["OldResourceProperties"] = props
            module.on_event(update, FakeContext())
            module.on_event(event("Delete", retagged, physical_id=made), FakeContext())


_TEAM_TAG = {"Key": "cost-centre", "Value": "ledger"}


def dev_lifecycle(run: Run) -> None:
    """The deploy-dev job (create), an update, and the read commands."""
    from peagle_deploy.sdk import deploy_peagle

    name = endpoint("dev")
    run_job(run, "deploy-dev", "dev", {})
    with run.as_ci("dev", "deploy_peagle update"):
        deploy_peagle(
            spec_file="stages/dev.yaml",
            stage="dev",
            role_arn=execution_role("dev"),
            num_speculative_tokens=4,
            progress=False,
            poll_interval_s=0.01,
        )
    run.cli("dev", ["status", name])
    run.cli("dev", ["list", "--stage", "dev"])
    run.cli("dev", ["invoke", name, "Write a haiku."])
    run.cli("dev", ["invoke", name, "Write a haiku.", "--stream"])
    run.cli("dev", ["doctor", "--file", "stages/dev.yaml", "--role-arn", execution_role("dev")])
    run.cli("dev", ["doctor", "--stage", "dev"])


def dev_experiments(run: Run) -> None:
    """Through the workflow's experiment job: a shadow experiment that concludes with a
    promotion, a split one read and aborted; then a shadow one `watch` aborts."""
    from peagle_local.emulator.traffic import VariantBehaviour

    from peagle_deploy.experiment.lifecycle import watch_experiment

    name = endpoint("dev")
    fast = VariantBehaviour(acceptance_rate=0.6, num_speculative_tokens=3, step_s=0.02)
    run.ext.set_variant(name, "AllTraffic", fast)
    run.ext.set_variant(name, "Candidate", fast.faster(1.3))
    spec = experiment_spec(run, "dev", "dev-shadow", candidate={"num_speculative_tokens": 5})
    experiment_job(run, "dev", "start", spec=str(spec))
    traffic(run, name, minutes=40)
    experiment_job(run, "dev", "status")
    assert json.loads(experiment_job(run, "dev", "conclude"))["action"] == "promoted"

    run.ext.set_variant(name, "Candidate", fast)
    spec = experiment_spec(
        run,
        "dev",
        "dev-split",
        mode="split",
        weight_percent=50,
        candidate={"num_speculative_tokens": 6},
    )
    experiment_job(run, "dev", "start", spec=str(spec))
    traffic(run, name, minutes=4)
    experiment_job(run, "dev", "status")
    assert json.loads(experiment_job(run, "dev", "abort", reason="ledger"))["action"] == "aborted"

    run.ext.set_variant(name, "Candidate", VariantBehaviour(error_rate=0.3))
    spec = experiment_spec(
        run,
        "dev",
        "dev-guarded",
        candidate={"num_speculative_tokens": 7},
        guardrails={"max_error_rate_percent": 5},
    )
    experiment_job(run, "dev", "start", spec=str(spec))
    with run.as_ci("dev", "experiment watch"):
        outcome = watch_experiment(
            name,
            stage="dev",
            progress=False,
            sleep=lambda _s: traffic(run, name, minutes=1),
        )
    assert getattr(outcome, "action", None) == "aborted", outcome


@contextlib.contextmanager
def runtime_over_http(run: Run, stage: str) -> Iterator[None]:
    """SageMaker's runtime API over HTTP on loopback, for the promotion gates' benchmark:
    it streams with aiohttp, which moto's in-process mock does not see. The emulator's own
    guarded server (`LocalAWS`'s), accepting the stage's CI session key, in this process,
    so it serves the same emulated account."""
    from peagle_local.emulator.local import _QuietMotoServer
    from peagle_local.emulator.sigv4 import EmulatorCredentials

    creds = run.credentials[stage]
    server = _QuietMotoServer(
        "127.0.0.1",
        0,
        EmulatorCredentials(creds["AWS_ACCESS_KEY_ID"], creds["AWS_SECRET_ACCESS_KEY"]),
    )
    host, port = server.address
    os.environ["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME"] = f"http://{host}:{port}"
    try:
        yield
    finally:
        os.environ.pop("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME", None)
        server.stop()


def promotions(run: Run) -> None:
    """The promote-staging and promote-prod jobs (dry run, then the promotion)."""
    for job, stage in (("promote-staging", "staging"), ("promote-prod", "prod")):
        with runtime_over_http(run, stage):
            run_job(run, job, stage, {})


def prod_experiment(run: Run) -> None:
    """prod, autoscaled to 3 instances: a shadow experiment SageMaker ends on its
    schedule; status and abort put the incumbent back on 3 and give its scaling back."""
    from peagle_local.emulator.traffic import VariantBehaviour

    name = endpoint("prod")
    assert run.ext.autoscale(name, 3) == 3
    fast = VariantBehaviour(acceptance_rate=0.6, num_speculative_tokens=3, step_s=0.02)
    run.ext.set_variant(name, "AllTraffic", fast)
    run.ext.set_variant(name, "Candidate", fast)
    spec = experiment_spec(run, "prod", "prod-shadow", candidate={"num_speculative_tokens": 7})
    experiment_job(run, "prod", "start", spec=str(spec))
    traffic(run, name, minutes=4)
    run.wall.now += 3 * 3600 + 1  # past max_duration_minutes and SageMaker's grace
    experiment_job(run, "prod", "status")
    assert json.loads(experiment_job(run, "prod", "abort", reason="ledger"))["action"] == "aborted"


PROD_NEXT_TYPE = "ml.g7e.4xlarge"
"""The instance type prod moves to while autoscaled (its quota staged with the world)."""


def prod_instance_type(run: Run) -> None:
    """prod, autoscaled: a deploy onto another instance type takes the variant's scaling
    off, updates the endpoint and puts the scaling back (sdk/capacity.py)."""
    from peagle_deploy.sdk import deploy_peagle

    with run.as_ci("prod", "deploy_peagle update"):
        deployed = deploy_peagle(
            spec_file="stages/prod.yaml",
            stage="prod",
            role_arn=execution_role("prod"),
            instance_type=PROD_NEXT_TYPE,
            progress=False,
            poll_interval_s=0.01,
        )
    assert deployed.deployment is not None and deployed.deployment.status == "InService"


def teardown(run: Run) -> None:
    run.cli("dev", ["delete", endpoint("dev"), "--yes"])


RUNS: tuple[Step, ...] = (
    dev_lifecycle,
    dev_experiments,
    promotions,
    prod_experiment,
    prod_instance_type,
    teardown,
)


def _environment(mp: Any, run: Run) -> None:
    """Credentials and region for moto, nothing that routes a call past it; the
    emulated clock for the experiment's windows; no real waits."""
    from peagle_deploy.experiment import common
    from peagle_deploy.sdk import waiter

    mp.setattr(boto3, "DEFAULT_SESSION", None)
    for var in [v for v in os.environ if v.startswith("AWS_ENDPOINT_URL")]:
        mp.delenv(var)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        mp.delenv(var, raising=False)
    mp.setenv("AWS_ACCESS_KEY_ID", "testing")
    mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    mp.setenv("AWS_DEFAULT_REGION", REGION)
    mp.setattr(common, "now", run.wall.datetime)
    mp.setattr(waiter, "_sleep", lambda _s: None)
    mp.chdir(ROOT)


def _watch_the_doctor(mp: Any, run: Run) -> None:
    """The doctor's own calls marked as the doctor's, and the calls `caller.permissions`
    asks about kept with the command they go before."""
    from peagle_deploy import doctor
    from peagle_deploy.doctor import caller, runner

    original_run, original_calls = runner.run_doctor, caller.coming_calls

    def run_doctor(*args: Any, **kwargs: Any) -> Any:
        with run.recorder.doctor():
            return original_run(*args, **kwargs)

    def coming_calls(*args: Any, **kwargs: Any) -> Any:
        calls = original_calls(*args, **kwargs)
        who = run.recorder.who
        if who is not None:
            run.asked.setdefault((who.stage, who.command), []).extend(calls)
        return calls

    mp.setattr(runner, "run_doctor", run_doctor)
    mp.setattr(doctor, "run_doctor", run_doctor)
    mp.setattr(caller, "coming_calls", coming_calls)


def record_all(tmp: Path, ci_template: Mapping[str, Any], stacks: Synthesized) -> Run:
    """Every run above against one emulated account; the recorder holds their calls."""
    import pytest
    from moto import mock_aws
    from peagle_local.emulator import AccountExtensions, MotoExtensions

    run = Run(Recorder(), None, Wall(), TemplateRoles(ci_template, REGION), tmp)
    (tmp / "gates.yaml").write_text(yaml.safe_dump(GATES))
    with pytest.MonkeyPatch.context() as mp:
        _environment(mp, run)
        _watch_the_doctor(mp, run)
        with mock_aws(), MotoExtensions(seed=5, wall=run.wall) as ext, AccountExtensions() as acct:
            run.ext = ext
            run.recorder.promql = promql(ext)
            stage_account(run, stage_plans(), acct)
            with run.recorder.recording():
                provider_runs(run, stacks)
                for step in RUNS:
                    step(run)
    return run
