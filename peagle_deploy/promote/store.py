"""Where promotion reads and writes state: SSM manifests (via the SDK) and deployments.

A thin layer over `peagle_deploy.sdk.manifest` and `deploy_peagle` that turns their
results into what a promotion needs to say: "no manifest -> deploy the source first",
"corrupted manifest -> redeploy to rewrite it", and the gate report round trip through
the manifest's `gate_results` list (one entry per gate, plus one `level` entry per
benchmark level so the next promotion has a throughput baseline).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from peagle_deploy.errors import PeagleError
from peagle_deploy.promote.evaluate import GateReport, GateResult, LevelMeasurement

if TYPE_CHECKING:
    from peagle_deploy.plan import Plan
    from peagle_deploy.sdk.manifest import DeploymentManifest
    from peagle_deploy.spec import DeploymentSpec

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


def parameter_name(stage: str, endpoint_name: str) -> str:
    from peagle_deploy.sdk.manifest import manifest_parameter_name

    return manifest_parameter_name(stage, endpoint_name)


def endpoints_in_stage(clients: Clients, stage: str) -> list[str]:
    """Endpoint names that have a manifest under `/peagle-deploy/<stage>/`."""
    from peagle_deploy.sdk.manifest import PARAMETER_ROOT

    prefix = f"{PARAMETER_ROOT}/{stage}/"
    names: list[str] = []
    kwargs: dict[str, Any] = {"Path": prefix, "Recursive": True}
    while True:
        page = clients.ssm.get_parameters_by_path(**kwargs)
        for parameter in page.get("Parameters", []):
            rest = str(parameter["Name"])[len(prefix) :]
            endpoint, _, leaf = rest.partition("/")
            if leaf == "manifest":
                names.append(endpoint)
        token = page.get("NextToken")
        if not token:
            return sorted(set(names))
        kwargs["NextToken"] = token


def find_endpoint_in_stage(clients: Clients, stage: str) -> str | None:
    """The stage's one endpoint, or None when it has none or several."""
    names = endpoints_in_stage(clients, stage)
    return names[0] if len(names) == 1 else None


def only_endpoint_in_stage(clients: Clients, stage: str) -> str:
    """The stage's endpoint when `--name` was not given; errors say what to pass."""
    names = endpoints_in_stage(clients, stage)
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
    """The source's manifest; missing or unreadable -> PeagleError, nothing touched."""
    from peagle_deploy.sdk.manifest import ManifestError, read_manifest

    name = parameter_name(stage, endpoint_name)
    try:
        manifest = read_manifest(stage, endpoint_name, ssm_client=clients.ssm)
    except ManifestError as exc:
        raise PeagleError(
            f"the manifest of {stage}/{endpoint_name} is corrupted ({exc}); redeploy "
            f"{stage} to rewrite it. Nothing was changed."
        ) from None
    if manifest is None:
        raise PeagleError(
            f"no deployment manifest for {stage}/{endpoint_name} (SSM parameter {name} not "
            f"found): was it deployed with peagle (peagle deploy ... --stage {stage})? "
            "Nothing was changed."
        )
    if manifest.stage != stage or manifest.endpoint_name != endpoint_name:
        raise PeagleError(
            f"the manifest at {name} describes {manifest.stage}/{manifest.endpoint_name}, "
            f"not {stage}/{endpoint_name}; redeploy {stage} to rewrite it. Nothing was changed."
        )
    return manifest


def read_optional_manifest(
    clients: Clients, stage: str, endpoint_name: str
) -> DeploymentManifest | None:
    """A manifest that may be absent (the target's); an unreadable one counts as absent.

    The target's manifest only provides the throughput baseline; a damaged one must not
    block a promotion that would rewrite it, so it is treated as "no baseline".
    """
    from peagle_deploy.sdk.manifest import ManifestError, read_manifest

    try:
        return read_manifest(stage, endpoint_name, ssm_client=clients.ssm)
    except ManifestError:
        return None


def report_to_gate_results(report: GateReport, source: str) -> list[dict[str, Any]]:
    """The report in the manifest's `gate_results` form."""
    rows: list[dict[str, Any]] = [
        {
            "kind": META_KIND,
            "name": "promotion",
            "source_stage": report.source_stage,
            "source_endpoint": report.source_endpoint,
            "target_stage": report.target_stage,
            "promoted_from": source,
            "baseline_from": report.baseline_from,
            "passed": report.passed,
        }
    ]
    for result in report.results:
        row = result.model_dump(mode="json")
        row["passed"] = result.passed
        rows.append(row)
    for level in report.measurements:
        rows.append(
            {
                "kind": LEVEL_KIND,
                "name": f"level@c{level.concurrency}",
                **level.model_dump(mode="json"),
            }
        )
    return rows


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
    spec: DeploymentSpec,
    *,
    clients: Clients,
    wait: bool,
    region: str | None,
    deployed_by: str,
    poll_interval_s: float | None = None,
) -> Any:
    """Deploy `spec` through the SDK (create, blue/green update, or no-op).

    The SDK refuses to interleave with another deployment, removes what it created when
    a create fails or an update rolls back, and raises DeployError saying so.
    """
    from peagle_deploy.sdk import deploy_peagle

    extra: dict[str, Any] = {}
    if poll_interval_s is not None:
        extra["poll_interval_s"] = poll_interval_s
    return deploy_peagle(
        spec=spec,
        wait=wait,
        region=region,
        deployed_by=deployed_by,
        boto_session=clients.session,
        **extra,
    )


def record_promotion(
    clients: Clients,
    *,
    spec: DeploymentSpec,
    plan: Plan,
    report: GateReport,
    source: Any,
    previous: DeploymentManifest | None,
) -> str:
    """Write the target's manifest with the promotion's gate report."""
    from peagle_deploy.sdk.manifest import DeploymentManifest, write_manifest

    origin = f"{source.stage}/{source.endpoint_name}"
    manifest = DeploymentManifest.from_plan(
        plan,
        deployed_by=f"peagle promote {source.stage}->{report.target_stage}",
        promoted_from=origin,
        gate_results=report_to_gate_results(report, origin),
    )
    return write_manifest(manifest, ssm_client=clients.ssm, tags=plan.tags)
