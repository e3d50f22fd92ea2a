"""What a promotion reads and records: manifests (`peagle_deploy.records`) and deployments.

Over the record store and `deploy_peagle`, in what a promotion needs to say: "no
manifest -> deploy the source first", "a manifest that cannot be trusted -> redeploy to
rewrite it" (the store's one-line refusal), and the promotion record: the gate report's
round trip through the manifest's `gate_results` list (one entry per gate, plus one
`level` entry per benchmark level so the next promotion has a throughput baseline).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from peagle_deploy.errors import PeagleError
from peagle_deploy.promote.evaluate import GateReport, GateResult, LevelMeasurement
from peagle_deploy.records import (
    MAX_PARAMETER_BYTES,
    DeploymentManifest,
    RecordError,
    encoded_size,
    find_records,
    manifest_parameter_name,
    read_record,
    write_record,
)

if TYPE_CHECKING:
    from peagle_deploy.plan import Plan

LEVEL_KIND = "level"
"""`kind` of the gate_results entries that carry a benchmark level's measurements."""
META_KIND = "promotion"
"""`kind` of the gate_results entry that names source and target of the promotion."""


@dataclass(frozen=True)
class Clients:
    """The boto3 session and clients a promotion uses (peagle's retry policy, endpoints
    from the environment).

    One session for the whole promotion: botocore caches parsed service models per
    session, and the SageMaker model alone takes a noticeable fraction of a second to
    load; a fresh session per client would pay that again for every call site.
    """

    session: Any
    sagemaker: Any
    ssm: Any
    region: str | None

    @classmethod
    def create(cls, region: str | None) -> Clients:
        from peagle_deploy.aws import make_client, make_session

        session = make_session(region)
        return cls(
            session=session,
            sagemaker=make_client("sagemaker", region=region, boto_session=session),
            ssm=make_client("ssm", region=region, boto_session=session),
            region=region,
        )


def endpoints_in_stage(clients: Clients, stage: str) -> list[str]:
    """Endpoint names that have a manifest under `/peagle-deploy/<stage>/`."""
    return [path.endpoint_name for path in find_records(clients.ssm, "manifest", stage=stage)]


def _existing(clients: Clients, names: list[str]) -> list[str]:
    """The names whose endpoint exists (in any state).

    A delete outside peagle (the console, the API) leaves the manifest behind (`peagle
    delete` removes it); a stage that had two endpoints and deleted one still has only
    one candidate.
    """
    from peagle_deploy.aws import describe_endpoint_or_none

    return [n for n in names if describe_endpoint_or_none(clients.sagemaker, n) is not None]


def _candidates(clients: Clients, stage: str) -> list[str]:
    """Endpoints with a manifest in `stage`; with several, only those that still exist."""
    names = endpoints_in_stage(clients, stage)
    if len(names) > 1:
        return _existing(clients, names) or names
    return names


def find_endpoint_in_stage(clients: Clients, stage: str) -> str | None:
    """The stage's one endpoint, or None when it has none or several."""
    names = _candidates(clients, stage)
    return names[0] if len(names) == 1 else None


def only_endpoint_in_stage(clients: Clients, stage: str) -> str:
    """The stage's endpoint when `--name` was not given; errors say what to pass."""
    names = _candidates(clients, stage)
    if not names:
        raise PeagleError(
            f"no deployment manifest in stage {stage!r} (nothing under "
            f"/peagle-deploy/{stage}/): deploy it first (peagle deploy ... --stage {stage}); "
            "nothing was changed"
        )
    if len(names) > 1:
        raise PeagleError(
            f"stage {stage!r} has {len(names)} endpoints with manifests ({', '.join(names)}); "
            "choose one with --name"
        )
    return names[0]


def read_source_manifest(clients: Clients, stage: str, endpoint_name: str) -> DeploymentManifest:
    """The source's manifest; missing or untrusted -> PeagleError, nothing touched."""
    try:
        manifest = read_record(clients.ssm, DeploymentManifest, stage, endpoint_name)
    except RecordError as exc:
        raise PeagleError(
            f"the manifest of {stage}/{endpoint_name} is corrupted: {exc}. Nothing was changed."
        ) from None
    if manifest is None:
        raise PeagleError(
            f"no deployment manifest for {stage}/{endpoint_name} (SSM parameter "
            f"{manifest_parameter_name(stage, endpoint_name)} not found): was it deployed "
            f"with peagle (peagle deploy ... --stage {stage})? Nothing was changed."
        )
    return manifest


def source_difference(
    clients: Clients, manifest: DeploymentManifest, endpoint: dict[str, Any]
) -> str | None:
    """How the source endpoint (its DescribeEndpoint) does not run what its manifest's
    spec plans, re-planned here; None when it does.

    The manifest is read from a parameter the source stage may write, so nothing in it is
    taken on its word: the endpoint's `peagle:stage` tag must be the manifest's stage, and
    the spec, planned again, must name the endpoint config and model the endpoint runs and
    match the config's content (`sdk.existing.serving_difference`: DescribeEndpointConfig).
    The source's models are never described: DescribeModel shows a model's environment,
    with the source stage's resolved secrets, which the target stage may not read; the
    model's content is in its name (a digest of the CreateModel request), and only the
    source stage's own roles may create models of its names. Then the names and hash the
    manifest records must be the plan's.
    """
    from peagle_deploy.naming import STAGE_TAG
    from peagle_deploy.plan import build_plan
    from peagle_deploy.sdk.existing import serving_difference

    tags = clients.sagemaker.list_tags(ResourceArn=endpoint["EndpointArn"]).get("Tags", [])
    tagged = {t.get("Key"): t.get("Value") for t in tags}.get(STAGE_TAG)
    if tagged not in (None, manifest.stage):
        return f"the endpoint is tagged {STAGE_TAG}={tagged}"
    spec = manifest.spec
    if spec.region is None:
        spec = spec.model_copy(update={"region": manifest.region})
    try:
        plan = build_plan(spec)
    except PeagleError as exc:
        return f"its spec does not plan ({exc})"
    problem = serving_difference(clients.sagemaker, plan, endpoint, read_models=False)
    if problem is not None:
        return problem
    for what, recorded, planned in (
        ("endpoint config", manifest.endpoint_config_name, plan.endpoint_config_name),
        ("model", manifest.model_name, plan.model_name),
        ("content hash", manifest.content_hash, plan.content_hash),
    ):
        if recorded != planned:
            return f"it records {what} {recorded}, its spec plans {planned}"
    return None


def read_optional_manifest(
    clients: Clients, stage: str, endpoint_name: str
) -> DeploymentManifest | None:
    """A manifest that may be absent (the target's); an unreadable one counts as absent.

    The target's manifest only provides the throughput baseline; a damaged one must not
    block a promotion that would rewrite it, so it is treated as "no baseline".
    """
    try:
        return read_record(clients.ssm, DeploymentManifest, stage, endpoint_name)
    except RecordError:
        return None


def report_to_gate_results(
    report: GateReport, source: str, *, compact: bool = False
) -> list[dict[str, Any]]:
    """The report in the manifest's `gate_results` form.

    `compact` keeps only the promotion entry (with the gate count) and the per-level
    measurements - what the next promotion's baseline needs - for reports too large for
    one SSM parameter; the full report is in the command's output (`--json`).
    """
    meta: dict[str, Any] = {
        "kind": META_KIND,
        "name": "promotion",
        "source_stage": report.source_stage,
        "source_endpoint": report.source_endpoint,
        "target_stage": report.target_stage,
        "promoted_from": source,
        "passed": report.passed,
        "gates": len(report.results),
    }
    if report.baseline_from:
        meta["baseline_from"] = report.baseline_from
    rows: list[dict[str, Any]] = [meta]
    if compact:
        meta["gate_rows_omitted"] = "the full report did not fit in one SSM parameter"
    else:
        for result in report.results:
            row = result.model_dump(mode="json", exclude_defaults=True)
            row["status"] = result.status
            row["passed"] = result.passed
            rows.append(row)
    for level in report.measurements:
        rows.append(
            {
                "kind": LEVEL_KIND,
                "name": f"level@c{level.concurrency}",
                **level.model_dump(mode="json", exclude_none=True),
            }
        )
    return rows


def promotion_manifest(
    plan: Plan, report: GateReport, origin: str, git_commit: str | None = None
) -> DeploymentManifest:
    """The target's manifest after this promotion, as small as SSM requires.

    Built (and size-checked) before the target is touched, so a report that cannot be
    recorded stops the promotion instead of leaving an unrecorded deployment.
    """

    def build(compact: bool) -> DeploymentManifest:
        return DeploymentManifest.from_plan(
            plan,
            deployed_by=f"peagle promote {report.source_stage}->{report.target_stage}",
            promoted_from=origin,
            gate_results=report_to_gate_results(report, origin, compact=compact),
            git_commit=git_commit,
        )

    manifest = build(compact=False)
    if encoded_size(manifest) <= MAX_PARAMETER_BYTES:
        return manifest
    manifest = build(compact=True)
    size = encoded_size(manifest)
    if size > MAX_PARAMETER_BYTES:
        raise PeagleError(
            f"the {report.target_stage} manifest would be {size} bytes, over SSM's "
            f"{MAX_PARAMETER_BYTES}-byte parameter limit (a very large spec env?); "
            "nothing was deployed"
        )
    return manifest


def recorded_report(manifest: DeploymentManifest | None) -> GateReport | None:
    """Rebuild the gate report a manifest recorded (None if it recorded none)."""
    if manifest is None or not manifest.gate_results:
        return None
    meta: dict[str, Any] = {}
    results: list[GateResult] = []
    levels: list[LevelMeasurement] = []
    for row in manifest.gate_results:
        kind = row.get("kind")
        try:
            if kind == META_KIND:
                meta = row
            elif kind == LEVEL_KIND:
                levels.append(
                    LevelMeasurement.model_validate(
                        {k: v for k, v in row.items() if k not in ("kind", "name")}
                    )
                )
            else:
                results.append(
                    GateResult.model_validate({k: v for k, v in row.items() if k != "passed"})
                )
        except ValueError:
            continue  # a row written by another version: not a baseline we can trust
    return GateReport(
        source_stage=str(meta.get("source_stage", "")),
        target_stage=str(meta.get("target_stage", manifest.stage)),
        source_endpoint=str(meta.get("source_endpoint", "")),
        results=results,
        measurements=levels,
        baseline_from=meta.get("baseline_from"),
    )


def deploy(
    plan: Plan,
    *,
    clients: Clients,
    deployed_by: str,
    poll_interval_s: float | None = None,
    doctor: bool = True,
) -> Any:
    """Deploy `plan` through the SDK (create, blue/green update, or no-op) and wait.

    The SDK refuses to interleave with another deployment, removes what it created when
    a create fails or an update rolls back, and raises DeployError saying so. `doctor`:
    run `peagle doctor` first (False when the caller already did).
    """
    from peagle_deploy.sdk import deploy_peagle

    extra: dict[str, Any] = {}
    if poll_interval_s is not None:
        extra["poll_interval_s"] = poll_interval_s
    return deploy_peagle(
        plan=plan,
        wait=True,
        deployed_by=deployed_by,
        boto_session=clients.session,
        doctor=doctor,
        **extra,
    )


def record_promotion(clients: Clients, plan: Plan, report: GateReport, origin: str) -> str:
    """Write the target's manifest once the target serves (timestamped now)."""
    manifest = promotion_manifest(plan, report, origin)
    return write_record(clients.ssm, manifest, tags=plan.tags)
