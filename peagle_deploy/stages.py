"""Stages from `cdk.json` context: which spec each stage deploys, and its stack settings.

The one home of the stage map: the CDK app (`app.py`, `infra/stack.py`, through
`infra.stages`) and `peagle doctor --stage` read it here, so both build a stage's plan
with the same `StageConfig.plan()`.

Context key `peagle:stages` maps a stage name to:
  spec: a spec file (YAML/JSON, relative to the app directory), optional
  overrides: spec fields that win over the file (nested or dotted keys), optional
  account: AWS account to pin the stack to (default: CDK_DEFAULT_ACCOUNT, if any)
  retain: keep the KMS key and log groups when the stack is deleted (default false)
  termination_protection: (default false)
  log_retention_days: endpoint log retention (default 30)
  alarms: errors_5xx_per_minute, model_latency_p90_ms, evaluation_minutes
  promote_from: the stage whose endpoint this stage's promotion gates run against
    (default: the stage listed before it; null for none); the CI roles stack lets this
    stage's deploy role read that stage, nothing more
  training: the stage's training jobs' S3 prefixes, image and job names
    (`peagle_deploy.stage_training`); the stack makes the role SageMaker trains with and
    the CI role may train under those names only
  experiment_state: what the stack asks of the shadow experiment the spec's
    `experiment:` block runs: running (default), completed or cancelled (the stack stops
    it in place, AWS::SageMaker::InferenceExperiment's DesiredState; docs/experiments.md)
Any key can also be given on the command line: `-c peagle:stages='{"dev": {...}}'`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from peagle_deploy.access import grants_overlap
from peagle_deploy.catalog import MODELS
from peagle_deploy.documents import check_tree, parse_document
from peagle_deploy.errors import InputError
from peagle_deploy.plan import Plan, build_plan
from peagle_deploy.spec import DeploymentSpec, load_spec
from peagle_deploy.spec.stage import check_stage_name
from peagle_deploy.stage_training import StageTraining, stage_training, training_overlap
from peagle_deploy.validation.secrets import refuse_plaintext_secrets

STAGES_CONTEXT_KEY = "peagle:stages"
NAG_CONTEXT_KEY = "peagle:nag"
CUSTOM_MODEL = "custom"
_ACCOUNT = re.compile(r"^\d{12}$")
_STAGE_KEYS = {
    "spec",
    "overrides",
    "account",
    "retain",
    "termination_protection",
    "log_retention_days",
    "alarms",
    "promote_from",
    "experiment_state",
    "training",
}
EXPERIMENT_STATES = ("running", "completed", "cancelled")
"""`experiment_state` values: the InferenceExperiment's DesiredState, lower-cased."""
_ALARM_KEYS = {"errors_5xx_per_minute", "model_latency_p90_ms", "evaluation_minutes"}


def stack_name(stage: str) -> str:
    """The CloudFormation stack of stage `stage` (`cdk deploy PeagleEndpoint-prod`)."""
    return f"PeagleEndpoint-{stage}"


@dataclass(frozen=True)
class StageConfig:
    """One stage of the app: the spec to deploy and how its stack is set up."""

    name: str
    spec_file: Path | None
    overrides: dict[str, Any] = field(default_factory=dict)
    account: str | None = None
    retain: bool = False
    termination_protection: bool = False
    log_retention_days: int = 30
    alarms: dict[str, int] = field(default_factory=dict)
    promote_from: str | None = None
    """The stage promotions into this one are gated on (None: none)."""
    experiment_state: str = "running"
    """What the stack asks of the stage's shadow experiment (`EXPERIMENT_STATES`): keep it
    running, or stop it in place (completed, cancelled) before `experiment:` is removed."""
    training: StageTraining | None = None
    """Where the stage's training jobs read and write (`peagle_deploy.stage_training`);
    None: the stage trains nothing (no training role, no training grants)."""

    @property
    def stack_id(self) -> str:
        """The CloudFormation stack name (`cdk deploy PeagleEndpoint-prod`)."""
        return stack_name(self.name)

    def load_spec(self) -> DeploymentSpec:
        """The stage's spec: file, then overrides; the stage name always wins."""
        spec = load_spec(
            self.spec_file,
            file_field=f"{STAGES_CONTEXT_KEY}.{self.name}.spec",
            **{**self.overrides, "stage": self.name},
        )
        check_synthesizable_model(spec, f"{STAGES_CONTEXT_KEY}.{self.name}")
        # The template, cdk.out, the assets bucket and the provider framework's log of the
        # custom resource's properties would all hold the value: refused, by reference only.
        refuse_plaintext_secrets(spec.env, f"the CDK path (cdk synth of stage {self.name})")
        return spec

    def plan(self) -> Plan:
        """Validated, named SageMaker requests for this stage (no AWS call), with the
        stage's experiment set-up checked (`check_stage_experiment`)."""
        plan = build_plan(self.load_spec())
        check_stage_experiment(self, plan)
        return plan


def check_stage_experiment(stage: StageConfig, plan: Plan) -> None:
    """Refuse, at synth, an experiment set-up CloudFormation cannot run as the stage says.

    - `experiment_state` stops a shadow experiment in place; without `experiment:` there
      is nothing to stop (remove both together, after the stopping deploy), and a split
      experiment has no resource to stop (it ends by removing `experiment:`).
    - With `scaling:`, the experiment's instance counts are the template's (SageMaker
      gives each variant the count the InferenceExperiment names; a split config names
      both), while the endpoint's current count is Application Auto Scaling's, unknown at
      synth: the fleet is pinned first (min = max = initial_instance_count), so starting
      the experiment keeps the capacity the endpoint has, and the stack suspends scaling
      while the experiment runs (docs/experiments.md, "With CDK").

    `StageConfig.plan()` runs it, so `cdk synth` and `peagle doctor --stage` refuse alike.
    """
    where = f"{STAGES_CONTEXT_KEY}.{stage.name}"
    state = stage.experiment_state
    experiment = plan.spec.experiment
    if state != "running" and (experiment is None or experiment.mode != "shadow"):
        raise InputError(
            f"{where}.experiment_state",
            f"{state}, but the stage runs no shadow experiment to stop"
            + (" (a split experiment ends when `experiment:` is removed)" if experiment else ""),
            "running (the default), or completed / cancelled with a shadow `experiment:`",
        )
    target = (plan.autoscaling or {}).get("register_scalable_target")
    if experiment is None or target is None:
        return
    count = plan.spec.initial_instance_count
    if not target["MinCapacity"] == target["MaxCapacity"] == count:
        raise InputError(
            "scaling",
            f"{target['MinCapacity']}-{target['MaxCapacity']} instances with an experiment: "
            f"the experiment's instance counts are fixed at synth ({count}), the endpoint's "
            "current count is autoscaling's; pin the fleet in a deploy before the experiment",
            f"min_instances = max_instances = initial_instance_count ({count})",
        )


def check_synthesizable_model(spec: DeploymentSpec, where: str) -> None:
    """Refuse JumpStart ids: resolving them needs the sagemaker SDK and the network.

    `cdk synth` must run offline and fast, so it only takes catalog keys (whose
    JumpStart locations the catalog knows) or `custom`.
    """
    if spec.model != CUSTOM_MODEL and spec.model not in MODELS:
        raise InputError(
            "model",
            f"{spec.model!r} ({where}) is not a catalog key; JumpStart ids are resolved by "
            "the sagemaker SDK, which `cdk synth` does not load (use `peagle deploy`)",
            [*MODELS, CUSTOM_MODEL],
        )


def _json_if_text(value: Any, where: str) -> Any:
    """Context given with `-c key=value` arrives as text; from cdk.json it arrives parsed.

    Either way it goes through the one loading path's limits (size, depth, duplicate
    keys, NaN), with errors naming the context key.
    """
    if isinstance(value, str):
        return parse_document(value, where, f"-c {where}", "json")
    check_tree(value, where, f"cdk.json context {where}")
    return value


def stage_configs(context: Any, base_dir: Path) -> list[StageConfig]:
    """Parse the `peagle:stages` context value; clear errors name the offending key."""
    context = _json_if_text(context, STAGES_CONTEXT_KEY)
    if not isinstance(context, Mapping) or not context:
        raise InputError(
            STAGES_CONTEXT_KEY, "missing or empty in cdk.json context", "a mapping stage -> {spec}"
        )
    configs = []
    names = [str(n) for n in context]
    for index, (name, value) in enumerate(context.items()):
        where = f"{STAGES_CONTEXT_KEY}.{name}"
        check_stage_name(name, where)
        raw = _json_if_text(value, where)
        if not isinstance(raw, Mapping):
            raise InputError(where, f"is {type(raw).__name__}", "a mapping")
        unknown = sorted(set(raw) - _STAGE_KEYS)
        if unknown:
            raise InputError(f"{where}.{unknown[0]}", "unknown key", sorted(_STAGE_KEYS))
        alarms = dict(raw.get("alarms") or {})
        bad_alarm = sorted(set(alarms) - _ALARM_KEYS)
        if bad_alarm:
            raise InputError(f"{where}.alarms.{bad_alarm[0]}", "unknown key", sorted(_ALARM_KEYS))
        for key, threshold in alarms.items():
            if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
                raise InputError(f"{where}.alarms.{key}", f"{threshold!r}", "an integer >= 1")
        retention = raw.get("log_retention_days", 30)
        if not isinstance(retention, int) or retention < 1:
            raise InputError(f"{where}.log_retention_days", f"{retention!r}", "an integer >= 1")
        for flag in ("retain", "termination_protection"):
            if not isinstance(raw.get(flag, False), bool):
                # bool("false") is True: a quoted flag must not turn retention on or off
                raise InputError(f"{where}.{flag}", f"{raw[flag]!r}", "true or false (JSON)")
        account = raw.get("account")
        if account is not None and not _ACCOUNT.match(str(account)):
            raise InputError(f"{where}.account", f"{account!r}", "a 12-digit AWS account id")
        spec_file = raw.get("spec")
        overrides = raw.get("overrides") or {}
        if not isinstance(overrides, Mapping):
            raise InputError(f"{where}.overrides", f"is {type(overrides).__name__}", "a mapping")
        if spec_file is None and not overrides:
            raise InputError(where, "names neither a spec file nor overrides", "spec, overrides")
        state = raw.get("experiment_state", "running")
        if state not in EXPERIMENT_STATES:
            raise InputError(f"{where}.experiment_state", f"{state!r}", list(EXPERIMENT_STATES))
        promote_from = raw.get("promote_from", names[index - 1] if index else None)
        if promote_from is not None and (promote_from not in names or promote_from == name):
            raise InputError(
                f"{where}.promote_from",
                f"{promote_from!r} is not another stage of {STAGES_CONTEXT_KEY}",
                [n for n in names if n != name] + ["null"],
            )
        configs.append(
            StageConfig(
                name=str(name),
                spec_file=(base_dir / spec_file) if spec_file else None,
                overrides=dict(overrides),
                account=str(account) if account is not None else None,
                retain=raw.get("retain", False),
                termination_protection=raw.get("termination_protection", False),
                log_retention_days=retention,
                alarms=alarms,
                promote_from=promote_from,
                experiment_state=state,
                training=(
                    stage_training(raw["training"], str(name), f"{where}.training")
                    if raw.get("training") is not None
                    else None
                ),
            )
        )
    return configs


def check_distinct_stages(stages: Sequence[StageConfig], plans: Sequence[Plan]) -> None:
    """Refuse two stages that would share an endpoint or any resource their roles are
    granted by name, in one line naming both.

    Endpoint names are compared case-insensitively (SageMaker takes them so: botocore,
    CreateEndpoint), and whatever the stages' regions and accounts: the CI roles stack
    grants every stage in one account, and a dashboard is named like its endpoint in a
    global namespace.
    """
    seen: list[tuple[str, str]] = []
    for stage, plan in zip(stages, plans, strict=True):
        name = plan.endpoint_name
        where = f"{STAGES_CONTEXT_KEY}.{stage.name}"
        for other, other_name in seen:
            if name.lower() == other_name.lower():
                raise InputError(
                    f"{where}.endpoint_name",
                    f"stages {other} and {stage.name} would both deploy endpoint {name!r} "
                    "(SageMaker endpoint names are case-insensitive)",
                    "an endpoint name of its own for each stage",
                )
            shared = grants_overlap(other_name, name)
            if shared is not None:
                raise InputError(
                    f"{where}.endpoint_name",
                    f"stages {other} and {stage.name} would share IAM grants ({shared}): "
                    f"endpoints {other_name!r} and {name!r}",
                    "endpoint names whose derived names differ (peagle_deploy/naming.py)",
                )
        seen.append((stage.name, name))
    _check_distinct_training(stages)


def _check_distinct_training(stages: Sequence[StageConfig]) -> None:
    """Refuse two stages whose training grants (job names, log streams, S3 prefixes)
    could name one resource: one stage could then read, overwrite or stop the other's."""
    trained = [s for s in stages if s.training is not None]
    for index, stage in enumerate(trained):
        for other in trained[:index]:
            assert stage.training is not None and other.training is not None
            shared = training_overlap(other.training, stage.training)
            if shared is not None:
                raise InputError(
                    f"{STAGES_CONTEXT_KEY}.{stage.name}.training",
                    f"stages {other.name} and {stage.name} would share training grants ({shared})",
                    "a job_prefix and S3 prefixes of its own for each stage",
                )
