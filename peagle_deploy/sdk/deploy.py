"""`deploy_peagle()`: spec -> plan -> SageMaker, like a careful SRE would do it by hand.

What it does, by the endpoint's state when it starts:

| endpoint                         | action                                                  |
|----------------------------------|---------------------------------------------------------|
| absent                           | create model, config, endpoint; wait                    |
| InService on the planned config  | nothing (no mutating call); manifest written if missing |
| InService on another config      | create model + config, UpdateEndpoint blue/green; wait  |
| Creating/Updating to our config  | wait for it (a resumed or concurrent identical deploy)  |
| Failed (not serving)             | delete it, then create                                  |
| busy with another config         | refuse (DeployError): never interleave two deployments  |

Failures leave no orphans and never touch a serving endpoint: a create that ends Failed
removes the endpoint, config and model it made and raises EndpointFailedError with
SageMaker's FailureReason and the container's last log lines; an update that rolls back
removes the new config and model and says the old config still serves. Throttling is
retried by botocore (see `peagle_deploy.aws`). Ctrl-C while waiting leaves SageMaker
working and prints how to resume watching.
"""

from __future__ import annotations

import time
from typing import Any

from peagle_deploy.aws import delete_quietly, describe_endpoint_or_none, endpoint_config_models
from peagle_deploy.errors import DeployError, EndpointFailedError, InputError
from peagle_deploy.naming import STAGE_TAG, derived_name_pattern
from peagle_deploy.plan import PLACEHOLDER_ROLE_ARN, Plan, build_plan
from peagle_deploy.records import (
    DeploymentManifest,
    RecordError,
    find_records,
    read_manifest,
    running_experiment,
    write_manifest,
)
from peagle_deploy.sdk import capacity
from peagle_deploy.sdk.capacity import ScalingSwap
from peagle_deploy.sdk.endpoint import PeagleEndpoint, derived_resources
from peagle_deploy.sdk.existing import ExistingDiffersError, Kind, create_or_adopt
from peagle_deploy.sdk.outcome import Action, DeployOutcome
from peagle_deploy.sdk.waiter import (
    IN_PROGRESS,
    Interrupted,
    WaitResult,
    log_tail,
    resume_hint,
    use_progress,
    wait_for_endpoint,
)
from peagle_deploy.spec import load_spec, spec_with
from peagle_deploy.spec.flags import keyword_overrides
from peagle_deploy.spec.models import DeploymentSpec

REGISTER_AGAIN = (
    "The autoscaling of {name} was taken off for the instance-type change: the same "
    "deploy, run again once the update has settled, registers it again."
)
PROVISIONING_MARGIN_S = 1200
UPDATE_MARGIN_S = 600


def plan_for(
    model: str | None = None,
    *,
    spec: DeploymentSpec | None = None,
    spec_file: str | None = None,
    boto_session: Any = None,
    **knobs: Any,
) -> Plan:
    """The plan `deploy_peagle` would execute for these arguments (no AWS call).

    `knobs` are the flag table's keywords (`instance_type`, `num_speculative_tokens`,
    `role_arn`, `stage`, `alarms`, `rollout_strategy`, ... : `peagle_deploy.spec.flags`,
    the same knobs as `peagle deploy`'s flags) or spec paths, dotted
    (`**{"speculative.mode": "eagle3"}`) or nested (`rollout={...}`); they win over
    `spec` / `spec_file`.
    """
    overrides = keyword_overrides({"model": model, **knobs})
    if spec is not None:
        if spec_file is not None:
            raise InputError("spec", "give either spec= or spec_file=, not both")
        the_spec = spec_with(spec, **overrides)
    else:
        if spec_file is None and "model" not in overrides:
            raise InputError(
                "model", "no model given", "a model argument or spec_file with `model:`"
            )
        the_spec = load_spec(spec_file, **overrides)
    if the_spec.region is None and boto_session is not None and boto_session.region_name:
        the_spec = the_spec.model_copy(update={"region": boto_session.region_name})
    return build_plan(the_spec)


def check_deployable_role(plan: Plan) -> None:
    """Refuse placeholder execution roles before any AWS call."""
    role = plan.execution_role_arn
    if (
        plan.has_placeholder_role
        or role == PLACEHOLDER_ROLE_ARN
        or ":000000000000:" in role
        or any(mark in role.lower() for mark in ("placeholder", "<", "replace-me", "changeme"))
    ):
        raise InputError(
            "execution_role_arn",
            f"{role!r} is a placeholder; deploying needs the SageMaker execution role "
            "that may read the model and drafter from S3",
            "arn:aws:iam::<account>:role/<name> (role_arn=, --role-arn, or the spec)",
        )


def deploy_peagle(
    model: str | None = None,
    *,
    plan: Plan | None = None,
    spec: DeploymentSpec | None = None,
    spec_file: str | None = None,
    wait: bool = True,
    dry_run: bool = False,
    boto_session: Any = None,
    timeout_s: float | None = None,
    poll_interval_s: float = 2.0,
    progress: bool | None = None,
    deployed_by: str | None = None,
    doctor: bool = True,
    **knobs: Any,
) -> PeagleEndpoint:
    """Deploy (create, update blue/green, or confirm) a P-EAGLE endpoint; see module doc.

    What to deploy: `plan` (from `plan_for` or `build_plan`, deployed as it is), or what
    `plan_for` takes: `model` (a catalog key, a JumpStart model id or "custom"),
    `spec` / `spec_file`, and knobs such as `instance_type=`, `num_speculative_tokens=`,
    `role_arn=`, `stage=`, `alarms=` (auto-rollback) or any spec path. `dry_run=True`
    makes only read calls and reports the action in `.deployment`. `timeout_s` bounds
    the wait (default: the spec's download + start-up timeouts + 20 min; for updates the
    rollout's max execution time + 10 min). `progress`: None = only on a terminal.
    `doctor=False` skips `peagle doctor`'s read-only checks, which otherwise run first
    and raise DoctorFailedError before any create call when one fails (with
    `dry_run=True` their failures are only reported, in `.deployment.warnings`).
    """
    if plan is None:
        plan = plan_for(model, spec=spec, spec_file=spec_file, boto_session=boto_session, **knobs)
    elif model is not None or spec is not None or spec_file is not None or knobs:
        raise InputError(
            "plan", "give either plan= or what to plan (model, spec, spec_file, knobs)"
        )
    if not dry_run:
        check_deployable_role(plan)
    doctor_warnings: list[str] = []
    if doctor:  # read-only; a failing check stops here, before any create call
        from peagle_deploy.doctor import require_healthy

        # A dry run is a preview: what doctor finds is reported, never fatal.
        report = require_healthy(plan, boto_session=boto_session, raise_on_failure=not dry_run)
        doctor_warnings = [f"doctor: {r.line()}" for r in report.failures + report.warnings]
    handle = PeagleEndpoint(
        plan.endpoint_name, region=plan.region, boto_session=boto_session, plan=plan
    )
    deployer = _Deployer(
        plan,
        handle,
        wait=wait,
        timeout_s=timeout_s,
        poll_interval_s=poll_interval_s,
        progress=use_progress(progress),
        deployed_by=deployed_by,
    )
    deployer.warnings += doctor_warnings
    with deployer.secret_values:  # any error leaving the run is masked for the values read
        try:
            handle.deployment = deployer.run(dry_run=dry_run)
        except Interrupted:
            raise
        except KeyboardInterrupt:
            raise deployer.interrupted() from None
    return handle


class _Deployer:
    def __init__(
        self,
        plan: Plan,
        handle: PeagleEndpoint,
        *,
        wait: bool,
        timeout_s: float | None,
        poll_interval_s: float,
        progress: bool,
        deployed_by: str | None,
    ):
        self.plan = plan
        self.handle = handle
        self.sm = handle.sagemaker
        self.wait = wait
        self.timeout_s = timeout_s
        self.poll_interval_s = poll_interval_s
        self.progress = progress
        self.deployed_by = deployed_by
        self.created: list[str] = []
        self.removed: list[str] = []
        self.swap: ScalingSwap | None = None
        """The autoscaling an instance-type change takes off for the update (`sdk.capacity`)."""
        self.warnings: list[str] = list(plan.warnings)
        from peagle_deploy.redaction import SecretValues

        # The values of the plan's secrets, once read: masked in all that leaves `run`
        # (errors, log lines, warnings, progress).
        self.secret_values = SecretValues()
        self.started = time.monotonic()
        self._console: Any = None

    # --- output ---------------------------------------------------------------------
    def say(self, text: str) -> None:
        if not self.progress:
            return
        if self._console is None:
            from peagle_deploy.terminal import plain_console

            self._console = plain_console(stderr=True)
        self._console.print(self.secret_values.text(text), highlight=False)

    def outcome(self, action: Action, status: str, **extra: Any) -> DeployOutcome:
        p = self.plan
        return DeployOutcome(
            action=action,
            endpoint_name=p.endpoint_name,
            endpoint_config_name=p.endpoint_config_name,
            model_name=p.model_name,
            content_hash=p.content_hash,
            region=p.region,
            stage=p.spec.stage,
            status=status,
            created=list(self.created),
            removed=list(self.removed),
            elapsed_s=time.monotonic() - self.started,
            warnings=[self.secret_values.text(w) for w in self.warnings],
            **extra,
        )

    def interrupted(self) -> Interrupted:
        """Ctrl-C outside the wait (a create or update call in flight): what exists now
        is unknown to this run, so it says what was done and how to find out the rest."""
        name = self.plan.endpoint_name
        done = ", ".join(self.created + [f"removed {r}" for r in self.removed])
        return Interrupted(
            name,
            f"interrupted while deploying {name}: watch it with `{resume_hint(name)}`; "
            "running the same deploy again picks up where this one stopped (the names come "
            "from the spec, so nothing is made twice). A request SageMaker accepted carries "
            f"on. Done so far: {done or 'nothing'}.",
        )

    # --- helpers --------------------------------------------------------------------
    def describe(self) -> dict[str, Any] | None:
        return describe_endpoint_or_none(self.sm, self.plan.endpoint_name)

    def create_timeout(self) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        p = self.plan
        return float(
            p.model_data_download_timeout_s
            + p.container_startup_health_check_timeout_s
            + PROVISIONING_MARGIN_S
        )

    def update_timeout(self) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        return float(self.plan.spec.rollout.max_execution_timeout_s + UPDATE_MARGIN_S)

    def _wait(self, timeout_s: float, **kwargs: Any) -> WaitResult:
        return wait_for_endpoint(
            self.sm,
            self.plan.endpoint_name,
            timeout_s=timeout_s,
            poll_interval_s=self.poll_interval_s,
            progress=self.progress,
            **kwargs,
        )

    def _create(self, kind: Kind, request: dict[str, Any], name: str) -> None:
        """Create one resource, or adopt the one of that (content-derived) name when it is
        the same (`sdk.existing`: compared by content, else ExistingDiffersError)."""
        if create_or_adopt(self.sm, kind, request):
            self.created.append(f"{kind}:{name}")
            self.say(f"created {kind} {name}")

    def create_model_and_config(self) -> None:
        from peagle_deploy.aws import make_client
        from peagle_deploy.sdk.secrets import create_model_with_secrets

        p = self.plan
        request = create_model_with_secrets(
            p.create_model,
            p.secret_refs,
            lambda: make_client(
                "secretsmanager", region=p.region, boto_session=self.handle._session
            ),
            self.secret_values,
        )
        try:
            self._create("model", request, p.model_name)
            self._create("endpoint-config", p.create_endpoint_config, p.endpoint_config_name)
        except ExistingDiffersError as exc:
            self.remove_created()
            raise ExistingDiffersError(
                f"{exc}. {p.endpoint_name} was not changed; this deploy removed what it had "
                f"created ({', '.join(self.removed) or 'nothing'})"
            ) from None

    def remove_created(self) -> None:
        """Delete the models and configs this run created (nothing that was there before)."""
        deletes = {
            "model": (self.sm.delete_model, "ModelName"),
            "endpoint-config": (self.sm.delete_endpoint_config, "EndpointConfigName"),
        }
        for item in reversed(self.created):
            kind, _, name = item.partition(":")
            if kind in deletes:
                call, key = deletes[kind]
                if delete_quietly(call, **{key: name}):
                    self.removed.append(item)

    def remove_config_and_model(self, config: str, *, only_derived: bool = True) -> None:
        """Delete an endpoint config and its models (not in use by this endpoint any more).

        With `only_derived`, only names the planner derives for this endpoint are touched:
        resources someone else made are never deleted.
        """
        name = self.plan.endpoint_name
        if only_derived and not derived_name_pattern(name, "c").match(config):
            return
        models = endpoint_config_models(self.sm, config) or []
        if delete_quietly(self.sm.delete_endpoint_config, EndpointConfigName=config):
            self.removed.append(f"endpoint-config:{config}")
        model_pattern = derived_name_pattern(name, "m")
        if config == self.plan.endpoint_config_name:
            models.append(self.plan.model_name)
        for model in dict.fromkeys(models):
            if only_derived and not model_pattern.match(model):
                continue
            if delete_quietly(self.sm.delete_model, ModelName=model):
                self.removed.append(f"model:{model}")

    def remove_stale(self, previous: str | None) -> None:
        """After a successful update: remove the replaced config and model, and any other
        config/model the planner derived for this endpoint that nothing uses any more
        (left behind by `wait=False` updates or interrupted runs)."""
        p = self.plan
        if previous and previous != p.endpoint_config_name:
            if not derived_name_pattern(p.endpoint_name, "c").match(previous):
                # Not a name this endpoint's identity derives (made by hand, or by a
                # version before long names carried a digest): left, and said so.
                self.warnings.append(
                    f"left endpoint config {previous} and its models, which {p.endpoint_name} "
                    "served before: not named by this endpoint's identity, so not removed; "
                    "delete them once nothing uses them"
                )
            self.remove_config_and_model(previous)
        for config in derived_resources(self.sm, p.endpoint_name, "c"):
            if config != p.endpoint_config_name:
                self.remove_config_and_model(config)
        for model in derived_resources(self.sm, p.endpoint_name, "m"):
            if model != p.model_name and delete_quietly(self.sm.delete_model, ModelName=model):
                self.removed.append(f"model:{model}")

    def remove_planned_if_unused(self) -> None:
        """Remove this plan's config and model unless the endpoint serves or targets them."""
        desc = self.describe()
        if desc is not None:
            in_use = {desc.get("EndpointConfigName")}
            pending = (desc.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
            in_use.add(pending)
            if self.plan.endpoint_config_name in in_use:
                return
        self.remove_config_and_model(self.plan.endpoint_config_name)

    def failure(self, desc: dict[str, Any], since_ms: int | None) -> EndpointFailedError:
        from peagle_deploy.aws import make_client

        logs = make_client("logs", region=self.plan.region, boto_session=self.handle._session)
        tail = log_tail(logs, self.plan.endpoint_name, since_ms=since_ms)
        reason = str(desc.get("FailureReason") or "no FailureReason given")
        return EndpointFailedError(self.plan.endpoint_name, reason, tail)

    # --- the run --------------------------------------------------------------------
    def run(self, *, dry_run: bool) -> DeployOutcome:
        p = self.plan
        current = self.describe()
        stage_problem = self.stage_problem(current)
        if stage_problem and not dry_run:
            raise DeployError(stage_problem)
        action, previous = self.decide(current)
        role_problem = self.model_role_problem()
        swap_problem = self.find_swap(current, dry_run) if action == "update" else None
        if dry_run:
            self.warnings += [w for w in (stage_problem, role_problem, swap_problem) if w]
            status = "absent" if current is None else str(current["EndpointStatus"])
            return self.outcome(action, status, dry_run=True, previous_config=previous)
        if role_problem:
            raise DeployError(role_problem)
        self.say(
            f"{action} {p.endpoint_name} ({p.region}, stage {p.spec.stage}) -> config "
            f"{p.endpoint_config_name}"
        )
        if action == "noop":
            return self.finish("noop", previous)
        if action == "resume":
            return self.resume(previous)
        if action == "recreate":
            self.delete_failed_endpoint()
            return self.create("recreate")
        if action == "create":
            return self.create("create")
        return self.update(previous)

    def aas(self) -> Any:
        from peagle_deploy.aws import make_client

        return make_client(
            "application-autoscaling", region=self.plan.region, boto_session=self.handle._session
        )

    def find_swap(self, current: dict[str, Any] | None, dry_run: bool) -> str | None:
        """Whether the update changes the instance type of an autoscaled variant (then its
        scaling comes off for the update: `sdk.capacity`); a dry run gets what the deploy
        would do, or refuse, as a warning."""
        assert current is not None
        try:
            self.swap = capacity.find_swap(self.sm, self.aas(), self.plan, current)
        except (InputError, DeployError) as exc:
            if not dry_run:
                raise
            return str(exc)
        if self.swap is None:
            return None
        return (
            f"{self.plan.endpoint_name} changes from {self.swap.from_type} to "
            f"{self.plan.instance_type} on an autoscaled variant: its scaling policy is deleted "
            "and its target deregistered for the update, then registered again (SageMaker "
            "refuses the change otherwise)"
        )

    def stage_problem(self, current: dict[str, Any] | None) -> str | None:
        """Why this stage may not deploy the endpoint: another stage holds it (its tag
        says so, or, untagged or absent, a record under another stage's path)."""
        p = self.plan
        holder = self.tagged_stage(current) or self.recorded_stage()
        if holder is None or holder[0] == p.spec.stage:
            return None
        stage, evidence, remedy = holder
        return (
            f"endpoint {p.endpoint_name} belongs to stage {stage} ({evidence}), not "
            f"{p.spec.stage}: two stages never share an endpoint. Deploy {p.spec.stage} "
            f"under an endpoint name of its own (endpoint_name), or {remedy}. Nothing was "
            "changed."
        )

    def tagged_stage(self, current: dict[str, Any] | None) -> tuple[str, str, str] | None:
        if current is None:
            return None
        tags = self.sm.list_tags(ResourceArn=current["EndpointArn"]).get("Tags", [])
        stage = {t.get("Key"): t.get("Value") for t in tags}.get(STAGE_TAG)
        if stage is None:
            return None
        remedy = (
            f"delete it first if {stage} is done with it (peagle delete {current['EndpointName']})"
        )
        return str(stage), f"its {STAGE_TAG} tag", remedy

    def recorded_stage(self) -> tuple[str, str, str] | None:
        """A record of this endpoint under another stage's path; None when there is none,
        or when this identity may not list other stages' records (a stage's CI role reads
        only its own: its grants and synth's refusal of shared endpoints cover it)."""
        from botocore.exceptions import ClientError

        from peagle_deploy.aws import error_code, make_client

        p = self.plan
        ssm = make_client("ssm", region=p.region, boto_session=self.handle._session)
        try:
            paths = find_records(ssm, None, endpoint_name=p.endpoint_name)
        except ClientError as exc:
            if error_code(exc) in ("AccessDeniedException", "AccessDenied"):
                return None
            raise
        other = next((path for path in paths if path.stage != p.spec.stage), None)
        if other is None:
            return None
        remedy = f"if {other.stage} no longer has it, remove {other.name}"
        return other.stage, f"its record {other.name}", remedy

    def model_role_problem(self) -> str | None:
        """Why the planned model cannot be used: it exists with another execution role.

        Model names leave the role out (the same spec names the same model through
        `cdk deploy`, whose stack makes its own role, and through the SDK), and a
        model's role cannot be changed; deploying on would keep the old role silently.
        """
        from botocore.exceptions import ClientError

        p = self.plan
        try:
            role = self.sm.describe_model(ModelName=p.model_name).get("ExecutionRoleArn")
        except ClientError:
            return None  # no such model yet (or not readable: CreateModel will say)
        if not role or role == p.execution_role_arn:
            return None
        return (
            f"model {p.model_name} of this spec already exists with execution role {role}, "
            f"not {p.execution_role_arn}; SageMaker cannot change a model's role and the "
            f"model's name does not depend on it (so `cdk deploy` and `peagle deploy` name "
            f"the same model). Deploy with --role-arn {role}, or under another endpoint name "
            "to use the new role."
        )

    def decide(self, current: dict[str, Any] | None) -> tuple[Action, str | None]:
        p = self.plan
        if current is None:
            return "create", None
        status = str(current["EndpointStatus"])
        config = str(current["EndpointConfigName"])
        pending = (current.get("PendingDeploymentSummary") or {}).get("EndpointConfigName")
        if status == "Failed":
            return "recreate", config
        experiment = running_experiment(current)
        if experiment:
            raise DeployError(
                f"endpoint {p.endpoint_name} is in an experiment ({experiment}): end it "
                f"first with `peagle experiment conclude {p.endpoint_name}` or `peagle "
                f"experiment abort {p.endpoint_name}`"
            )
        if status == "Deleting":
            raise DeployError(
                f"endpoint {p.endpoint_name} is being deleted; deploy again once it is gone"
            )
        if config == p.endpoint_config_name and status == "InService":
            return "noop", config
        if status in IN_PROGRESS:
            if pending == p.endpoint_config_name or (
                config == p.endpoint_config_name and status == "Creating"
            ):
                return "resume", config
            raise DeployError(
                f"endpoint {p.endpoint_name} is {status} (another deployment is in progress, "
                f"towards {pending or config}); not interleaving a second one. Wait with "
                f"`{resume_hint(p.endpoint_name)}`, then deploy again."
            )
        if status != "InService":
            raise DeployError(
                f"endpoint {p.endpoint_name} is {status}; only InService endpoints are "
                "updated. Check it with `peagle status`."
            )
        return "update", config

    def delete_failed_endpoint(self) -> None:
        name = self.plan.endpoint_name
        self.say(f"endpoint {name} is Failed (not serving): deleting it to create it again")
        self.warnings.append(f"replaced the Failed endpoint {name}")
        delete_quietly(self.sm.delete_endpoint, EndpointName=name)
        self.removed.append(f"endpoint:{name}")
        deadline = time.monotonic() + 600
        from peagle_deploy.sdk import waiter

        delay = waiter.FIRST_POLL_S
        while self.describe() is not None:
            if time.monotonic() > deadline:
                raise DeployError(f"endpoint {name} is still being deleted after 10 minutes")
            waiter._sleep(delay)
            delay = min(self.poll_interval_s, delay * waiter.BACKOFF)

    def create(self, action: Action) -> DeployOutcome:
        from botocore.exceptions import ClientError

        p = self.plan
        since_ms = int(time.time() * 1000)
        self.create_model_and_config()
        try:
            self.sm.create_endpoint(**p.create_endpoint)
        except ClientError as exc:
            if "already exist" not in str(exc).lower():
                self.remove_planned_if_unused()
                raise
            return self.lost_create_race()
        self.created.append(f"endpoint:{p.endpoint_name}")
        self.say(f"created endpoint {p.endpoint_name}")
        if not self.wait:
            return self.outcome(action, "Creating")
        result = self._wait(self.create_timeout(), label=f"creating {p.endpoint_name}")
        if result.status != "InService":
            error = self.failure(result.description, since_ms)
            # The endpoint never served: remove it with its config and model.
            delete_quietly(self.sm.delete_endpoint, EndpointName=p.endpoint_name)
            self.removed.append(f"endpoint:{p.endpoint_name}")
            self.remove_config_and_model(p.endpoint_config_name)
            error.args = (
                f"{error.args[0]}\nremoved what this deploy created: " + ", ".join(self.removed),
            )
            raise error
        return self.finish(action, None, waited=result)

    def lost_create_race(self) -> DeployOutcome:
        """CreateEndpoint said the endpoint exists: someone created it since we looked."""
        p = self.plan
        current = self.describe()
        config = current.get("EndpointConfigName") if current else None
        if current is not None and config == p.endpoint_config_name:
            self.say(f"{p.endpoint_name} was just created by another deploy of the same spec")
            self.warnings.append("another deploy of the same spec created the endpoint first")
            return self.resume(config)
        self.remove_planned_if_unused()
        raise DeployError(
            f"endpoint {p.endpoint_name} was created concurrently by another deployment "
            f"(config {config}); this deploy changed nothing and removed its own unused "
            f"resources ({', '.join(self.removed) or 'none'}). Deploy again to update it."
        )

    def resume(self, previous: str | None) -> DeployOutcome:
        p = self.plan
        if not self.wait:
            current = self.describe()
            return self.outcome(
                "resume",
                str(current["EndpointStatus"]) if current else "absent",
                previous_config=previous,
            )
        result = self._wait(self.create_timeout(), label=f"waiting for {p.endpoint_name}")
        desc = result.description
        if result.status == "Failed":
            raise self.failure(desc, None)
        if desc.get("EndpointConfigName") != p.endpoint_config_name:
            self.remove_planned_if_unused()
            raise DeployError(
                f"endpoint {p.endpoint_name} settled {result.status} on config "
                f"{desc.get('EndpointConfigName')}, not {p.endpoint_config_name} "
                f"({desc.get('FailureReason') or 'the other deployment did not complete'})"
            )
        if result.status != "InService":
            raise DeployError(f"endpoint {p.endpoint_name} settled {result.status}")
        if previous and previous != p.endpoint_config_name:
            # We joined an update to our config: finish it as `update` would.
            self.sm.add_tags(ResourceArn=desc["EndpointArn"], Tags=p.tags)
            self.remove_stale(previous)
        return self.finish("resume", previous, waited=result)

    def update(self, previous: str | None) -> DeployOutcome:
        from botocore.exceptions import ClientError

        p = self.plan
        since_ms = int(time.time() * 1000)
        self.create_model_and_config()
        self.release_scaling()
        try:
            self.sm.update_endpoint(**p.update_endpoint)
        except ClientError as exc:
            self.remove_planned_if_unused()
            raise DeployError(
                f"UpdateEndpoint of {p.endpoint_name} was refused: {exc}. The endpoint still "
                f"serves {previous}; removed this deploy's unused resources "
                f"({', '.join(self.removed) or 'none'}){self.put_back_scaling()}."
            ) from exc
        self.say(
            f"updating {p.endpoint_name}: {previous} -> {p.endpoint_config_name} "
            f"({p.rollout.strategy} blue/green)"
        )
        if not self.wait:
            if self.swap is not None:
                self.warnings.append(REGISTER_AGAIN.format(name=p.endpoint_name))
            return self.outcome("update", "Updating", previous_config=previous)
        result = self.wait_for_update()
        desc = result.description
        serving = desc.get("EndpointConfigName")
        if result.status == "InService" and serving == p.endpoint_config_name:
            self.sm.add_tags(ResourceArn=desc["EndpointArn"], Tags=p.tags)
            self.remove_stale(previous)
            self.restore_instances(desc)
            return self.finish("update", previous, waited=result)
        raise self.update_failed(result, since_ms)

    def wait_for_update(self) -> WaitResult:
        name = self.plan.endpoint_name
        try:
            return self._wait(
                self.update_timeout(),
                label=f"updating {name}",
                until=lambda d: d.get("EndpointStatus") not in IN_PROGRESS,
            )
        except Interrupted as stopped:
            if self.swap is None:
                raise
            raise Interrupted(name, f"{stopped} {REGISTER_AGAIN.format(name=name)}") from None

    def update_failed(self, result: WaitResult, since_ms: int) -> DeployError:
        """Rolled back (or failed): the endpoint keeps serving what it served before; the
        new config and model are removed, the autoscaling taken off is put back."""
        p = self.plan
        desc = result.description
        tail_error = self.failure(desc, since_ms)
        self.remove_planned_if_unused()
        scaling = self.put_back_scaling()
        if result.status == "Failed":
            if scaling:
                tail_error.args = (f"{tail_error.args[0]}\n{scaling.lstrip('; ')}",)
            return tail_error
        lines = (
            "\nlast log lines:\n  " + "\n  ".join(tail_error.log_tail)
            if tail_error.log_tail
            else ""
        )
        return DeployError(
            f"update of {p.endpoint_name} to {p.endpoint_config_name} rolled back: "
            f"{desc.get('FailureReason') or 'no reason given'}. The endpoint is "
            f"{result.status} and still serves the old config {desc.get('EndpointConfigName')}. "
            f"Removed the unused new resources ({', '.join(self.removed) or 'none'})"
            f"{scaling}.{lines}"
        )

    def release_scaling(self) -> None:
        """An instance-type change of an autoscaled variant: its policy deleted and its
        target deregistered before the update (`sdk.capacity`)."""
        swap = self.swap
        if swap is None:
            return
        try:
            capacity.release(self.aas(), swap)
        except DeployError:
            self.remove_planned_if_unused()
            raise
        self.say(
            f"{self.plan.endpoint_name}: autoscaling deregistered for the change from "
            f"{swap.from_type} to {self.plan.instance_type} (registered again after the update)"
        )

    def put_back_scaling(self) -> str:
        """The autoscaling taken off for this update, registered again as it was ('' when
        none was taken off or it is back; else a clause saying what is missing)."""
        if self.swap is None:
            return ""
        problem = capacity.put_back(self.aas(), self.swap)
        return problem or "; its autoscaling was registered again as it was"

    def restore_instances(self, desc: dict[str, Any]) -> None:
        """After an instance-type change: the variant back on the instances it ran."""
        if self.swap is None:
            return

        def settled() -> dict[str, Any]:
            return self._wait(
                self.update_timeout(),
                label=f"resizing {self.plan.endpoint_name}",
                until=lambda d: d.get("EndpointStatus") not in IN_PROGRESS,
            ).description

        warning = capacity.restore_instances(self.sm, self.plan, self.swap, desc, settled)
        if warning:
            self.warnings.append(warning)
            self.say(f"[yellow]warning:[/] {warning}")

    def finish(
        self, action: Action, previous: str | None, waited: WaitResult | None = None
    ) -> DeployOutcome:
        """Endpoint InService on our config: record the manifest, apply autoscaling."""
        p = self.plan
        if p.autoscaling and (action != "noop" or not self.scaling_registered()):
            self.apply_autoscaling()
        parameter = self.record_manifest(only_if_stale=action == "noop")
        if action == "noop":
            self.say(f"{p.endpoint_name} already serves {p.endpoint_config_name}: nothing to do")
        else:
            self.say(f"[green]{p.endpoint_name} is InService[/] on {p.endpoint_config_name}")
        return self.outcome(
            action, "InService", previous_config=previous, manifest_parameter=parameter
        )

    def scaling_registered(self) -> bool:
        """Whether the variant is a scalable target: an unchanged deploy registers it
        when it is not (a deploy stopped after an instance-type change took it off)."""
        from peagle_deploy.plan.experiment_requests import describe_scaling

        try:
            found = self.aas().describe_scalable_targets(
                **describe_scaling(self.plan.endpoint_name)
            )
        except Exception as exc:  # cannot tell: leave it as it is, and say so
            self.warnings.append(
                f"could not read the autoscaling of {self.plan.endpoint_name} ({exc}); "
                "left as it is"
            )
            return True
        if found.get("ScalableTargets"):
            return True
        self.warnings.append(f"{self.plan.endpoint_name} had no autoscaling: registered it")
        return False

    def apply_autoscaling(self) -> None:
        from peagle_deploy.aws import error_code

        p = self.plan
        requests = p.autoscaling or {}
        aas = self.aas()
        arn = None
        try:
            arn = aas.register_scalable_target(**requests["register_scalable_target"]).get(
                "ScalableTargetARN"
            )
            aas.put_scaling_policy(**requests["put_scaling_policy"])
        except Exception as exc:
            hint = ""
            if arn and error_code(exc) in ("AccessDeniedException", "AccessDenied"):
                # A target registered before targets were tagged keeps no tag (registering
                # tags only a new target), and a stage's CI role changes only its own.
                hint = (
                    f" If the scalable target predates its {STAGE_TAG} tag, tag it once: aws "
                    f"application-autoscaling tag-resource --resource-arn {arn} --tags "
                    f"{STAGE_TAG}={p.spec.stage}"
                )
            raise DeployError(
                f"endpoint {p.endpoint_name} is InService, but its autoscaling could not be "
                f"applied: {exc}.{hint}"
            ) from exc

    def record_manifest(self, *, only_if_stale: bool) -> str | None:
        from peagle_deploy.aws import make_client

        p = self.plan
        try:
            ssm = make_client("ssm", region=p.region, boto_session=self.handle._session)
            if only_if_stale:
                try:
                    existing = read_manifest(p.spec.stage, p.endpoint_name, ssm_client=ssm)
                except RecordError:
                    existing = None  # unreadable: rewrite it from the plan
                if existing is not None and existing.content_hash == p.content_hash:
                    return existing.parameter_name
            manifest = DeploymentManifest.from_plan(p, deployed_by=self.deployed_by)
            return write_manifest(manifest, ssm_client=ssm, tags=p.tags)
        except Exception as exc:
            message = (
                f"endpoint {p.endpoint_name} is serving, but its deployment manifest could not "
                f"be recorded in SSM ({exc}); `peagle promote` needs it"
            )
            self.warnings.append(message)
            self.say(f"[yellow]warning:[/] {message}")
            return None
