"""The promotion: source manifest -> source checks -> gates -> deploy (or spec file) -> record.

Order matters for safety. Everything that can refuse the promotion (bad options,
missing or corrupted manifest, source not serving, a gate failing) happens before the
first write to the target; the target manifest is only written after the target
endpoint is InService on the new configuration. So a refused or failed promotion
leaves the target exactly as it was.

Every AWS call goes through boto3 clients built from the environment (the SDK's), so
`AWS_ENDPOINT_URL` pointing at the embedded moto server is the only difference between
the local rehearsal and a real run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field
from rich.console import Console

from peagle_deploy.aws import describe_endpoint_or_none
from peagle_deploy.bench.settings import BenchSettings
from peagle_deploy.errors import DeployError, InputError, PeagleError
from peagle_deploy.promote import store
from peagle_deploy.promote.evaluate import (
    GateReport,
    LevelMeasurement,
    SmokeOutcome,
    baseline_from_measurements,
    evaluate_gates,
)
from peagle_deploy.promote.gates import SmokeGate, StageGates
from peagle_deploy.promote.report import render_report, report_json, verdict
from peagle_deploy.promote.target import (
    STAGE_OWNED_FIELDS,
    STAGES_DIR,
    StageSettings,
    derive_target_endpoint_name,
    target_endpoint_name,
    target_secrets,
    target_stage_settings,
)
from peagle_deploy.records import manifest_parameter_name, running_experiment
from peagle_deploy.sdk.waiter import Interrupted, resume_hint
from peagle_deploy.spec.stage import check_stage_name
from peagle_deploy.terminal import escaped, literal, plain_console
from peagle_deploy.validation.secrets import refuse_plaintext_secrets

if TYPE_CHECKING:
    from peagle_deploy.plan import Plan
    from peagle_deploy.records import DeploymentManifest

PromotionStatus = Literal["promoted", "unchanged", "refused", "dry-run", "spec-written"]
TargetAction = Literal["create", "update", "none"]

SmokeRunner = Callable[[str, SmokeGate], SmokeOutcome]
BenchRunner = Callable[[str, BenchSettings], list[LevelMeasurement]]


@dataclass(frozen=True)
class PromoteOptions:
    """What `peagle promote` was asked to do."""

    source_stage: str
    target_stage: str
    source_endpoint: str | None = None
    """None: the only endpoint of the source stage that has a manifest."""
    target_endpoint: str | None = None
    """None: derived from the source (`-dev` suffix -> `-staging`, or the spec default)."""
    role_arn: str | None = None
    """Execution role of the target; None: the target stage's (see `target_stage_settings`),
    else the source's."""
    secrets: dict[str, str] = field(default_factory=dict)
    """The target's secrets bound explicitly (`--secret NAME=ARN`), over the target stage's
    own (see `target_secrets`)."""
    region: str | None = None
    dry_run: bool = False
    write_spec: Path | None = None
    """CDK users: write the target spec here instead of deploying."""
    stage_file: Path | None = None
    """The target stage's spec file, whose stage settings a first promotion takes."""
    bench_logs_delay_s: float | None = None
    """How long the bench waits for CloudWatch metric lines (None: bench default)."""
    bench_progress: bool = True
    poll_interval_s: float | None = None
    """DescribeEndpoint polling while the target deploys (None: the SDK's default)."""
    doctor: bool = True
    """Run `peagle doctor`'s read-only checks of the target's plan (the caller's
    permissions for the whole promotion included) before any gate."""


class StageState(BaseModel):
    """One side of the promotion as found (source) or as it was before (target)."""

    stage: str
    endpoint_name: str
    status: str | None = None
    """SageMaker EndpointStatus; None when the endpoint does not exist."""
    endpoint_config_name: str | None = None
    content_hash: str | None = None


class PromotionResult(BaseModel):
    """Outcome of one `peagle promote`, printed as a table or as JSON."""

    status: PromotionStatus
    action: TargetAction
    """What happened (or, for dry runs and refusals, would have happened) to the target."""
    source: StageState
    target: StageState
    target_names: dict[str, str] = Field(default_factory=dict)
    """Model, endpoint config and endpoint names of the target plan."""
    changes: list[str] = Field(default_factory=list)
    """Human-readable list of what changes in the target."""
    gates_planned: list[str] = Field(default_factory=list)
    report: GateReport | None = None
    manifest_parameter: str | None = None
    spec_file: str | None = None
    message: str = ""

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude={"report"})
        data["report"] = None if self.report is None else report_json(self.report)
        return data


# --------------------------------------------------------------------------- helpers

_BUSY = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack", "Deleting"})
"""Target states in which a promotion must not start (SageMaker is mid-change)."""


def check_spec_destination(path: Path) -> None:
    """`--write-spec` must be writable before the gates run, not after (no AWS call)."""
    if path.is_dir():
        raise InputError("--write-spec", f"{path} is a directory", "a YAML file path")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot create {path.parent}: {exc.strerror or exc}"
        raise InputError("--write-spec", problem, "a YAML file path") from None


def check_bench_dataset(gates: StageGates, target_stage: str) -> None:
    """Load the gates' benchmark prompts now, before any AWS call.

    A missing or malformed JSONL file would otherwise surface only after the smoke chat,
    halfway through a promotion (and never in a dry run), named after `peagle bench`'s
    `--dataset` flag instead of the gates file's field.
    """
    if gates.bench is None:
        return
    from peagle_deploy.bench.datasets import load_dataset

    try:
        load_dataset(gates.bench.dataset)
    except InputError as exc:
        raise InputError(
            f"gates.stages.{target_stage}.bench.dataset", exc.problem, exc.allowed
        ) from None


# --------------------------------------------------------------------------- the steps


@dataclass(frozen=True)
class Source:
    """The source side, checked: its manifest and the endpoint serving exactly that."""

    state: StageState
    manifest: DeploymentManifest


@dataclass(frozen=True)
class Target:
    """The target side: its plan (built once), what it serves now, and where its stage
    settings came from."""

    plan: Plan
    state: StageState
    manifest: DeploymentManifest | None
    settings: StageSettings


def check_stages(source_stage: str, target_stage: str) -> None:
    """--from and --to: stage names, and two different ones."""
    check_stage_name(source_stage, "--from")
    check_stage_name(target_stage, "--to")
    if source_stage == target_stage:
        raise InputError("--to", "is the same stage as --from", "a different stage")


def check_inputs(options: PromoteOptions, gates: StageGates) -> None:
    """Everything that can be refused without AWS: stage and endpoint names, role and
    region shapes, the gates' dataset, and the files (read now, not after the gates)."""
    from peagle_deploy.promote.target import check_stage_files
    from peagle_deploy.secret_refs import parse_secret_ref
    from peagle_deploy.validation.aws_shapes import (
        check_endpoint_name,
        check_region,
        check_role,
    )

    check_stages(options.source_stage, options.target_stage)
    for name, flag in (
        (options.source_endpoint, "--name"),
        (options.target_endpoint, "--target-name"),
    ):
        if name is not None:
            check_endpoint_name(name, flag)
    check_role(options.role_arn, "--role-arn")
    for name, arn in sorted(options.secrets.items()):
        parse_secret_ref(name, arn, "--secret")
    if options.region is not None:
        check_region(options.region, "--region")
    check_bench_dataset(gates, options.target_stage)
    if options.write_spec is not None:
        check_spec_destination(Path(options.write_spec))
    if options.stage_file is not None and not Path(options.stage_file).is_file():
        raise InputError("--stage-file", f"{options.stage_file} does not exist", "a spec file")
    check_stage_files(write_spec=options.write_spec, stage_file=options.stage_file)


def read_source(clients: store.Clients, options: PromoteOptions, out: Console) -> Source:
    """The source's manifest, and proof that its endpoint serves exactly that."""
    stage = options.source_stage
    name = options.source_endpoint or store.only_endpoint_in_stage(clients, stage)
    manifest = store.read_source_manifest(clients, stage, name)
    instance = manifest.spec.instance_type or "default instance"
    out.print(
        f"[bold]source[/] {escaped(f'{stage}/{name}')}: spec {escaped(manifest.content_hash)} "
        f"(model {escaped(manifest.spec.model)}, {escaped(instance)})",
        highlight=False,
    )
    described = describe_endpoint_or_none(clients.sagemaker, name)
    if described is None:
        raise PeagleError(
            f"source endpoint {name} ({stage}) is not deployed; its manifest "
            f"{manifest_parameter_name(stage, name)} is stale. Deploy {stage} first (peagle "
            f"deploy ... --stage {stage}); nothing was changed."
        )
    status = str(described.get("EndpointStatus"))
    running_config = str(described.get("EndpointConfigName"))
    if status != "InService":
        raise PeagleError(
            f"source endpoint {name} ({stage}) is {status}, not InService; gates can only "
            "run against a serving endpoint. Nothing was changed."
        )
    _refuse_experiment(described, f"source endpoint {name} ({stage})")
    if running_config != manifest.endpoint_config_name:
        raise PeagleError(
            f"source endpoint {name} runs endpoint config {running_config}, but its manifest "
            f"describes {manifest.endpoint_config_name} (spec {manifest.content_hash}); "
            f"redeploy {stage} so the manifest matches what serves. Nothing was changed."
        )
    problem = store.source_difference(clients, manifest, described)
    if problem is not None:
        raise PeagleError(
            f"the manifest {manifest_parameter_name(stage, name)} cannot be trusted: it does "
            f"not describe what source endpoint {name} runs ({problem}). Redeploy {stage} to "
            "rewrite it. Nothing was changed, no gate was run."
        )
    state = StageState(
        stage=stage,
        endpoint_name=name,
        status=status,
        endpoint_config_name=running_config,
        content_hash=manifest.content_hash,
    )
    return Source(state, manifest)


def plan_target(clients: store.Clients, options: PromoteOptions, source: Source) -> Target:
    """The source's serving configuration with the target stage's own settings, planned
    once, and the target's current state (refused while SageMaker is changing it)."""
    from peagle_deploy.plan import build_plan
    from peagle_deploy.spec.loader import spec_from_dict

    stage = options.target_stage
    doc = source.manifest.spec.model_dump(mode="json")
    doc.pop("experiment", None)  # what serves is promoted, never an experiment's candidate
    doc["stage"] = stage
    doc["endpoint_name"] = options.target_endpoint or derive_target_endpoint_name(
        source.state.endpoint_name,
        source.manifest.spec.endpoint_name,
        options.source_stage,
        stage,
    )
    name = target_endpoint_name(spec_from_dict(doc))
    if name == source.state.endpoint_name:
        raise InputError(
            "--target-name",
            f"the target endpoint would be the source endpoint {name}",
            "a name for the target stage",
        )
    manifest = store.read_optional_manifest(clients, stage, name)
    settings = target_stage_settings(
        write_spec=options.write_spec, manifest=manifest, stage_file=options.stage_file
    )
    doc.update(settings.values, stage=stage, endpoint_name=doc["endpoint_name"])
    doc["secrets"] = target_secrets(
        source.manifest.spec, settings, options.secrets, (options.source_stage, stage)
    )
    if options.role_arn:
        doc["execution_role_arn"] = options.role_arn
    if options.region:
        doc["region"] = options.region  # where the clients look is where the target goes
    plan = build_plan(spec_from_dict(doc))
    if options.write_spec is not None:
        # The stage file is meant to be committed and deployed by CDK (template, cdk.out,
        # the provider's log): a plaintext secret is refused before any gate runs.
        refuse_plaintext_secrets(plan.spec.env, f"--write-spec {options.write_spec}")
    described = describe_endpoint_or_none(clients.sagemaker, name)
    state = StageState(
        stage=stage,
        endpoint_name=plan.endpoint_name,
        status=None if described is None else str(described["EndpointStatus"]),
        endpoint_config_name=None if described is None else described.get("EndpointConfigName"),
        content_hash=None if manifest is None else manifest.content_hash,
    )
    _refuse_experiment(described, f"target endpoint {name} ({stage})")
    if state.status in _BUSY:
        # Checked before the gates: their measurements would be wasted, and the SDK
        # refuses to interleave two deployments anyway.
        raise PeagleError(
            f"target endpoint {name} ({stage}) is {state.status}; promote again once it has "
            "settled. Nothing was changed."
        )
    return Target(plan, state, manifest, settings)


def _refuse_experiment(described: dict[str, Any] | None, who: str) -> None:
    """No promotion from or onto an endpoint that runs an experiment: its gates would
    measure two variants, and the deploy would end the experiment unrecorded."""
    why = running_experiment(described)
    if why:
        raise PeagleError(
            f"{who} runs an experiment ({why}); conclude or abort it first (peagle "
            "experiment conclude|abort NAME). Nothing was changed."
        )


def describe_promotion(
    options: PromoteOptions, gates: StageGates, target: Target, source: Source
) -> dict[str, Any]:
    """What the promotion would do: the fields every PromotionResult carries."""
    action, changes = _diff(target.state, target.plan)
    origin = target.settings.origin
    changes.append(
        f"stage settings ({', '.join(STAGE_OWNED_FIELDS)}) from {origin}"
        if origin
        else f"stage settings copied from {options.source_stage} (no {options.target_stage} "
        f"configuration recorded yet, and no stage file: neither --stage-file nor "
        f"{STAGES_DIR / (options.target_stage + '.yaml')})"
    )
    if options.secrets:
        changes.append(f"secrets re-bound with --secret: {', '.join(sorted(options.secrets))}")
    if options.dry_run and options.write_spec is not None:
        changes.append(f"write {options.write_spec} (instead of deploying)")
    return {
        "action": action,
        "source": source.state,
        "target": target.state,
        "target_names": target.plan.names,
        "changes": changes,
        "gates_planned": _planned_gates(gates),
        "manifest_parameter": manifest_parameter_name(
            options.target_stage, target.plan.endpoint_name
        ),
    }


def deploy_target(
    clients: store.Clients,
    options: PromoteOptions,
    source: Source,
    target: Target,
    *,
    report: GateReport,
    out: Console,
) -> str:
    """Deploy the target plan through the SDK, then record the promotion (its parameter).

    The manifest is built (and size-checked) before the target is touched, and written
    only once the target serves the new configuration.
    """
    plan = target.plan
    origin = f"{source.state.stage}/{source.state.endpoint_name}"
    store.promotion_manifest(plan, report, origin)  # fits in SSM? (else stop here)
    out.print(
        f"[bold]deploy[/] {escaped(f'{options.target_stage}/{plan.endpoint_name}')}: "
        f"{_diff(target.state, plan)[0]} ({escaped(plan.endpoint_config_name)})",
        highlight=False,
    )
    try:
        store.deploy(
            plan,
            clients=clients,
            deployed_by=f"peagle promote {options.source_stage}->{options.target_stage}",
            poll_interval_s=options.poll_interval_s,
            doctor=False,  # it ran before the gates (`check_before_gates`)
        )
    except PeagleError as exc:
        raise DeployError(_failed_deploy_message(clients, plan, target.state, exc)) from exc
    except KeyboardInterrupt:
        name = plan.endpoint_name
        raise Interrupted(
            name,
            f"interrupted while deploying {options.target_stage}/{name} for the promotion; "
            "the promotion was not recorded. A request SageMaker accepted carries on: watch "
            f"it with `{resume_hint(name)}`, then run the same `peagle promote` again to "
            "record it (the gates run again).",
        ) from None
    return store.record_promotion(clients, plan, report, origin)


# --------------------------------------------------------------------------- the promotion


def promote(
    options: PromoteOptions,
    gates: StageGates,
    *,
    console: Console | None = None,
    smoke_runner: SmokeRunner | None = None,
    bench_runner: BenchRunner | None = None,
) -> PromotionResult:
    """Promote `options.source_stage` to `options.target_stage` through `gates`.

    Everything that can refuse the promotion runs before the first write to the target.
    Returns the result (status `refused` when a gate failed; the caller decides the exit
    code). Raises PeagleError when the promotion cannot even be attempted (source
    missing, manifest unreadable) or when the target deployment fails or rolls back; the
    message then says what the target serves now.
    """
    out = console or plain_console(stderr=True)
    check_inputs(options, gates)
    clients = store.Clients.create(options.region)
    source = read_source(clients, options, out)
    target = plan_target(clients, options, source)
    base = describe_promotion(options, gates, target, source)
    if options.dry_run:
        return PromotionResult(
            status="dry-run", message="no gate was run and nothing was changed", **base
        )
    if options.doctor and options.write_spec is None:
        check_before_gates(clients, options, source, target)
    report = run_gates(
        gates,
        source.state,
        options,
        clients=clients,
        console=out,
        smoke_runner=smoke_runner,
        bench_runner=bench_runner,
        target_manifest=target.manifest,
    )
    if not report.passed:
        failed = ", ".join(r.name for r in report.failures)
        return PromotionResult(
            status="refused",
            report=report,
            message=f"promotion refused by {len(report.failures)} gate(s): {failed}; "
            f"{options.target_stage} was not changed",
            **base,
        )
    if options.write_spec is not None:  # CDK users: write the target spec, deploy nothing
        written = write_stage_spec(options.write_spec, target.plan.spec, source.state, report)
        return PromotionResult(
            status="spec-written",
            report=report,
            spec_file=str(written),
            message=f"gates passed; wrote {written} for `cdk deploy` (nothing deployed)",
            **base,
        )
    parameter = deploy_target(clients, options, source, target, report=report, out=out)
    if base["action"] == "none":
        message = (
            f"{options.target_stage} already ran {target.plan.endpoint_config_name}; "
            "promotion recorded"
        )
    else:
        message = (
            f"promoted {options.source_stage} -> {options.target_stage} "
            f"({target.plan.endpoint_config_name}); recorded in {parameter}"
        )
    status: PromotionStatus = "unchanged" if base["action"] == "none" else "promoted"
    return PromotionResult(status=status, report=report, message=message, **base)


def check_before_gates(
    clients: store.Clients, options: PromoteOptions, source: Source, target: Target
) -> None:
    """`peagle doctor` on the target's plan, before the gates spend their minutes: its
    read-only checks, and whether the caller may make every call of the promotion (the
    source's reads and the gates' requests, then the target's deploy). A failing check
    raises DoctorFailedError; nothing was changed."""
    from peagle_deploy.doctor import require_healthy
    from peagle_deploy.doctor.coming import ComingRun, PromotionSource

    source_side = PromotionSource(
        stage=source.state.stage,
        endpoint_name=source.state.endpoint_name,
        endpoint_config_name=str(source.state.endpoint_config_name),
        region=target.plan.region,
        found_by_listing=options.source_endpoint is None,
    )
    require_healthy(
        target.plan,
        boto_session=clients.session,
        coming=ComingRun("promotion", source=source_side),
    )


def _diff(target: StageState, plan: Any) -> tuple[TargetAction, list[str]]:
    if target.status is None:
        return "create", [
            f"create model {plan.model_name}",
            f"create endpoint config {plan.endpoint_config_name}",
            f"create endpoint {plan.endpoint_name}",
        ]
    if target.endpoint_config_name == plan.endpoint_config_name:
        return "none", [f"endpoint {plan.endpoint_name} already runs {plan.endpoint_config_name}"]
    return "update", [
        f"create model {plan.model_name}",
        f"create endpoint config {plan.endpoint_config_name}",
        f"blue/green update of {plan.endpoint_name}: {target.endpoint_config_name} -> "
        f"{plan.endpoint_config_name}",
    ]


def _planned_gates(gates: StageGates) -> list[str]:
    planned = ["smoke"] if gates.smoke.enabled else []
    if gates.bench is None:
        return planned
    t = gates.thresholds
    for c in gates.bench.concurrency:
        planned.append(f"error_rate@c{c}")
        if t.level_value("min_output_throughput", c) is not None:
            planned.append(f"output_throughput@c{c}")
        if t.min_throughput_ratio is not None:
            planned.append(f"throughput_ratio@c{c}")
        if t.level_value("max_p99_ttft_ms", c) is not None:
            planned.append(f"p99_ttft_ms@c{c}")
        if t.min_acceptance_length is not None:
            planned.append(f"acceptance_length@c{c}")
    return planned


def run_gates(
    gates: StageGates,
    source: StageState,
    options: PromoteOptions,
    *,
    clients: Any,
    console: Console,
    smoke_runner: SmokeRunner | None = None,
    bench_runner: BenchRunner | None = None,
    target_manifest: Any = None,
) -> GateReport:
    """Smoke first (cheap), then the benchmark unless the smoke test already failed."""
    smoke = _run_smoke(
        gates, source, options, clients=clients, console=console, smoke_runner=smoke_runner
    )
    smoke_failed = smoke is not None and (smoke.error is not None or not smoke.text.strip())
    levels: list[LevelMeasurement] = []
    if gates.bench is not None and not smoke_failed:
        levels = _run_bench(gates, source, options, console, bench_runner)
    baseline, baseline_from = _baseline(gates, options, clients, target_manifest)
    results = evaluate_gates(gates, smoke, levels, baseline, baseline_from)
    if smoke_failed and gates.bench is not None:
        # Say why the benchmark gates have no numbers instead of listing them as failed.
        from peagle_deploy.promote.evaluate import GateResult

        skipped = GateResult(
            name="bench",
            kind="bench",
            measured=None,
            required="smoke gate passes first",
            status="skip",
            detail="not run: the smoke gate failed",
        )
        results = [*results[:1], skipped]
    return GateReport(
        source_stage=source.stage,
        target_stage=options.target_stage,
        source_endpoint=source.endpoint_name,
        results=results,
        measurements=levels,
        baseline_from=baseline_from,
    )


def _run_smoke(
    gates: StageGates,
    source: StageState,
    options: PromoteOptions,
    *,
    clients: Any,
    console: Console,
    smoke_runner: SmokeRunner | None,
) -> SmokeOutcome | None:
    """The smoke chat against the source endpoint (None when the gate is off)."""
    if not gates.smoke.enabled:
        return None
    from peagle_deploy.promote import measure

    console.print(f"[bold]gate[/] smoke chat on {escaped(source.endpoint_name)}", highlight=False)
    runner = smoke_runner or (
        lambda name, gate: measure.run_smoke(
            name, gate, region=options.region, boto_session=clients.session
        )
    )
    return runner(source.endpoint_name, gates.smoke)


def _run_bench(
    gates: StageGates,
    source: StageState,
    options: PromoteOptions,
    console: Console,
    bench_runner: BenchRunner | None,
) -> list[LevelMeasurement]:
    """The benchmark's levels against the source endpoint."""
    from peagle_deploy.promote import measure

    b = gates.bench
    assert b is not None
    per_level = [f"{b.num_prompts} prompts"] if b.num_prompts is not None else []
    if b.duration_s is not None:
        per_level.append(f"{b.duration_s:g} s")
    console.print(
        f"[bold]gate[/] benchmark on {escaped(source.endpoint_name)}: concurrency "
        f"{b.concurrency}, {' or '.join(per_level) or 'max(32, 4 x concurrency) prompts'} "
        "per level",
        highlight=False,
    )
    logs_delay_s = options.bench_logs_delay_s
    if logs_delay_s is None and gates.thresholds.min_acceptance_length is None:
        # Acceptance comes from CloudWatch Logs, which lag; without an acceptance gate
        # there is nothing to wait for (whatever has arrived is still reported).
        logs_delay_s = 0.0
    bench = bench_runner or (
        lambda name, settings: measure.run_bench(
            name,
            settings,
            region=options.region,
            logs_delay_s=logs_delay_s,
            progress=options.bench_progress,
        )
    )
    return bench(source.endpoint_name, b)


def _baseline(
    gates: StageGates, options: PromoteOptions, clients: Any, target_manifest: Any
) -> tuple[dict[int, float] | None, str | None]:
    """The throughput baseline (per concurrency) and where it was recorded, when the
    gates compare with one: the baseline stage's last promotion report."""
    if gates.thresholds.min_throughput_ratio is None:
        return None, None
    baseline_stage = gates.baseline_stage or options.target_stage
    if baseline_stage == options.target_stage:
        recorded = target_manifest
    else:
        name = store.find_endpoint_in_stage(clients, baseline_stage)
        recorded = (
            None if name is None else store.read_optional_manifest(clients, baseline_stage, name)
        )
    previous = store.recorded_report(recorded)
    if previous is None or not previous.measurements:
        return None, None
    baseline = baseline_from_measurements(previous.measurements)
    return baseline, f"{previous.target_stage}/{recorded.endpoint_name}"


def _failed_deploy_message(clients: Any, plan: Any, before: StageState, exc: Exception) -> str:
    """Say what the target serves now, after a failed or rolled-back deployment."""
    now = describe_endpoint_or_none(clients.sagemaker, plan.endpoint_name)
    if now is None:
        serving = "the target endpoint does not exist"
    else:
        serving = (
            f"{plan.endpoint_name} is {now.get('EndpointStatus')} and serves "
            f"{now.get('EndpointConfigName')}"
        )
        if before.endpoint_config_name and now.get("EndpointConfigName") == (
            before.endpoint_config_name
        ):
            serving += " (the configuration it had before the promotion)"
    return (
        f"promotion to {before.stage} did not complete: {exc}\n{serving}; the promotion "
        "was not recorded"
    )


def write_stage_spec(path: Path, spec: Any, source: StageState, report: GateReport) -> Path:
    """Write the target spec (YAML, for `cdk deploy`) and its gate report beside it.

    The spec file is what the stage's CDK stack reads; the header says where it came
    from so a reviewer of the pull request sees the evidence without running anything.
    """
    import json

    import yaml

    path = Path(path)
    # Only what differs from the defaults: the file stays as short as a hand-written one.
    body = spec.model_dump(mode="json", exclude_defaults=True)
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    header = (
        f"# Written by `peagle promote --from {source.stage} --to {report.target_stage}` "
        f"at {stamp}.\n"
        f"# Source: {source.stage}/{source.endpoint_name}, spec {source.content_hash}, "
        f"endpoint config {source.endpoint_config_name}.\n"
        f"# Gates: {verdict(report)}; report: {path.name}.gates.json\n"
    )
    report_path = path.with_name(path.name + ".gates.json")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
        report_path.write_text(json.dumps(report_json(report), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise PeagleError(
            f"--write-spec: the gates passed, but {path} could not be written "
            f"({exc.strerror or exc}); nothing was deployed"
        ) from None
    return path


def render_result(result: PromotionResult, console: Console) -> None:
    """The human form: what changes, the gate table, the verdict."""
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    src = result.source
    table.add_row(
        "source",
        literal(f"{src.stage}/{src.endpoint_name} ({src.status}, {src.endpoint_config_name})"),
    )
    tgt = result.target
    state = "absent" if tgt.status is None else f"{tgt.status}, {tgt.endpoint_config_name}"
    table.add_row("target", literal(f"{tgt.stage}/{tgt.endpoint_name} ({state})"))
    table.add_row("action", result.action)
    for change in result.changes:
        table.add_row("", literal(f"- {change}"))
    if result.status == "dry-run":
        table.add_row("gates", literal(", ".join(result.gates_planned) or "(none)"))
    console.print(table)
    if result.report is not None:
        render_report(result.report, console)
    # Each message says what happened in words (`promoted dev -> staging ...`, `promotion
    # refused by ...`): a `status:` label before it only repeated them.
    style = {"refused": "bold red", "dry-run": "yellow"}.get(result.status, "green")
    console.print(f"[{style}]{escaped(result.message)}[/]", highlight=False)
