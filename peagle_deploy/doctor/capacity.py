"""Capacity: the account may run the instances the endpoint asks for, in its region.

SageMaker limits hosting instances per type with one Service Quotas quota per instance
type, service code `sagemaker`, named `<instance type> for endpoint usage`: CreateEndpoint
over it fails with ResourceLimitExceeded "The account-level service limit 'ml.m4.xlarge
for endpoint usage' is 0 Instances, with current utilization of 0 Instances and a request
delta of 1 Instances" (quoted in aws/amazon-sagemaker-examples#307 and
awsdocs/amazon-sagemaker-developer-guide#70; for a current GPU type, "ml.g6e.2xlarge for
endpoint usage" in https://rasa.com/docs/reference/deployment/deploy-fine-tuned-model/;
no public page names a g7e quota yet); the SageMaker developer guide links its
quotas at servicequotas/home/services/sagemaker/quotas
(https://docs.aws.amazon.com/sagemaker/latest/dg/model-customize-mtrl-quotas.html).
An instance type with no such quota where other endpoint quotas are listed is read as
not offered for hosting in the region.

ListServiceQuotas returns applied values and leaves out quotas whose applied value is
not available (botocore's service-quotas model); those are looked up in
ListAWSDefaultServiceQuotas.

The quota covers every endpoint of the account in the region ("current utilization" in
the error above), so the instances of this type that endpoints already run are counted
(ListEndpoints, DescribeEndpoint, DescribeEndpointConfig): the endpoint's own current
fleet too, because a blue/green update runs the new fleet beside the old one until the
traffic has moved ("SageMaker creates a new fleet during the deployment while maintaining
the old fleet": https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_BlueGreenUpdatePolicy.html;
the blue fleet is terminated after the baking period:
https://docs.aws.amazon.com/sagemaker/latest/dg/deployment-guardrails-blue-green.html).
What the coming run adds is counted from what the endpoint runs now where it exists
(DescribeEndpoint): a stage with `scaling:` keeps its instances through an update, and an
experiment's candidate is sized from the incumbent's (`instances_for`; docs/platform-facts.md,
"Deploying onto an autoscaled endpoint").
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from peagle_deploy.doctor.context import (
    DoctorContext,
    could_not_check,
    error_code,
    short_error,
)
from peagle_deploy.doctor.result import CheckResult, failed, passed, warned
from peagle_deploy.doctor.workers import run_all

if TYPE_CHECKING:
    from peagle_deploy.spec.models import DeploymentSpec

SERVICE_CODE = "sagemaker"
ENDPOINT_USAGE = " for endpoint usage"
PAGE_SIZE = 100  # ListServiceQuotas MaxResults maximum (botocore's service-quotas model)


IDLE_STATES = frozenset({"Failed", "Deleting", "OutOfService"})
"""Endpoint states that hold no instances against the quota."""
MAX_ENDPOINTS = 500
"""Endpoints looked at for usage (two Describe calls each); beyond, usage is a warning."""
MAX_ENDPOINT_PAGES = 20
"""ListEndpoints pages read (100 endpoints each): an account whose pages keep coming
empty with a new NextToken ends here, as a warning, not in an endless loop."""
MAX_QUOTA_PAGES = 50
"""Service Quotas pages read per listing (100 quotas each; SageMaker lists a few
hundred): beyond, the quota is reported as not checked."""


class PagesExhaustedError(RuntimeError):
    """A listing kept paging past its bound."""


DESCRIBE_WORKERS = 8


@dataclass(frozen=True)
class Usage:
    """Instances of one type that the account's endpoints run now."""

    by_endpoint: tuple[tuple[str, int], ...]
    """(endpoint name, instances of the type), only endpoints that run some."""
    listed: frozenset[str] = frozenset()
    """Every endpoint of the region that holds instances (of any type)."""

    @property
    def instances(self) -> int:
        return sum(n for _, n in self.by_endpoint)

    def describe(self, own: str) -> str:
        if not self.by_endpoint:
            return "no endpoint runs one now"
        shown = ", ".join(
            f"{name} {n}"
            + (" (this endpoint, until an update has moved traffic)" if name == own else "")
            for name, n in self.by_endpoint[:5]
        )
        more = len(self.by_endpoint) - 5
        return f"{self.instances} already run: {shown}" + (f" and {more} more" if more > 0 else "")


def _variant_count(summary: Mapping[str, Any] | None, configured: Mapping[str, Any]) -> int:
    """Instances a variant holds: the larger of current and desired (an update or a scale
    in progress), else the configured initial count (an endpoint still creating)."""
    counts = (
        [summary.get(k) for k in ("CurrentInstanceCount", "DesiredInstanceCount")]
        if summary
        else []
    )
    known = [int(c) for c in counts if isinstance(c, int)]
    return max(known) if known else int(configured.get("InitialInstanceCount") or 0)


def _endpoint_instances(ctx: DoctorContext, name: str, instance_type: str) -> int:
    sm = ctx.client("sagemaker")
    endpoint = sm.describe_endpoint(EndpointName=name)
    if endpoint.get("EndpointStatus") in IDLE_STATES:
        return 0
    config = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    summaries = {v.get("VariantName"): v for v in endpoint.get("ProductionVariants") or []}
    summaries |= {v.get("VariantName"): v for v in endpoint.get("ShadowProductionVariants") or []}
    total = 0
    for variant in (config.get("ProductionVariants") or []) + (
        config.get("ShadowProductionVariants") or []
    ):
        if variant.get("InstanceType") == instance_type:
            total += _variant_count(summaries.get(variant.get("VariantName")), variant)
    pending = (endpoint.get("PendingDeploymentSummary") or {}).get("ProductionVariants") or []
    for variant in pending:  # the new fleet of an update in progress
        if variant.get("InstanceType") == instance_type:
            total += _variant_count(variant, {})
    return total


def endpoint_usage(ctx: DoctorContext, instance_type: str) -> Usage:
    """Instances of `instance_type` that the account's endpoints in the region hold."""
    sm = ctx.client("sagemaker")
    names: list[str] = []
    pages = sm.get_paginator("list_endpoints").paginate(PaginationConfig={"PageSize": 100})
    for number, page in enumerate(pages, start=1):
        names += [
            e["EndpointName"]
            for e in page.get("Endpoints", [])
            if e.get("EndpointStatus") not in IDLE_STATES
        ]
        if len(names) > MAX_ENDPOINTS:
            raise RuntimeError(f"more than {MAX_ENDPOINTS} endpoints to look at")
        if number >= MAX_ENDPOINT_PAGES and page.get("NextToken"):
            raise PagesExhaustedError(f"ListEndpoints still paging after {number} pages")
    counts = run_all(
        [functools.partial(_endpoint_instances, ctx, n, instance_type) for n in names],
        workers=DESCRIBE_WORKERS,
        name="peagle-doctor-usage",
    )
    held = tuple((n, c) for n, c in sorted(zip(names, counts, strict=True)) if c)
    return Usage(held, frozenset(names))


def quota_name(instance_type: str) -> str:
    return f"{instance_type}{ENDPOINT_USAGE}"


def instances_needed(ctx: DoctorContext) -> tuple[int, str]:
    """How many instances the endpoint may run at once, and why (`instances_for`), from
    what its variant runs now when it exists (`running_instances`)."""
    try:
        usage: Usage | None = endpoint_usage(ctx, ctx.plan.instance_type)
    except Exception:
        usage = None
    return instances_for(ctx.plan.spec, running_instances(ctx, usage))


def running_instances(ctx: DoctorContext, usage: Usage | None) -> int | None:
    """The instances the endpoint's variant runs now (DescribeEndpoint; an autoscaled one
    runs what its scaling asked for, not its config's initial count); None when the
    endpoint is not among the region's listed endpoints (it does not exist yet, or the
    listing could not be read), holds no instances or cannot be read (then the spec's
    counts are used; the usage line says when the region's endpoints could not be read).
    Only a listed endpoint is described: the deploy's own look comes after doctor."""
    from peagle_deploy.records import current_instances

    name = ctx.plan.endpoint_name
    if usage is None or name not in usage.listed:
        return None
    try:
        desc = ctx.client("sagemaker").describe_endpoint(EndpointName=name)
    except Exception:
        return None
    if desc.get("EndpointStatus") in IDLE_STATES:
        return None
    return current_instances(desc)


def instances_for(spec: DeploymentSpec, current: int | None = None) -> tuple[int, str]:
    """How many instances a spec's endpoint may run at once, and why.

    `current`: what the endpoint's variant runs now, None when it does not exist. An
    experiment runs the incumbent on those instances, its scaling held, and sizes the
    candidate from them (as `peagle experiment start` does); an update of a stage with
    `scaling:` keeps them (`plan.render.update_endpoint`), and scaling may take the
    fleet up to `scaling.max_instances` after. Without `current`, the spec's counts."""
    if spec.experiment is not None and current is not None:
        extra = spec.experiment.candidate_instances(current)
        return (
            current + extra,
            f"{current} the incumbent runs now + {extra} for the experiment's candidate",
        )
    count, why = spec.initial_instance_count, "initial_instance_count"
    if spec.scaling is not None:
        if current is not None and current > count:
            count, why = current, "the instances it runs now, which an update keeps"
        if spec.scaling.max_instances > count:
            count, why = spec.scaling.max_instances, "scaling.max_instances"
    if spec.experiment is not None:
        extra = spec.experiment.candidate_instances(spec.initial_instance_count)
        return count + extra, f"{count} for {why} + {extra} for the experiment's candidate"
    return count, why


def _quotas(ctx: DoctorContext, operation: str) -> Iterator[dict[str, Any]]:
    client = ctx.client("service-quotas")
    paginator = client.get_paginator(operation)
    pages = paginator.paginate(ServiceCode=SERVICE_CODE, PaginationConfig={"PageSize": PAGE_SIZE})
    for number, page in enumerate(pages, start=1):
        yield from page.get("Quotas", [])
        if number >= MAX_QUOTA_PAGES and page.get("NextToken"):
            raise PagesExhaustedError(
                f"Service Quotas ({operation}) still paging after {number} pages"
            )


def _find(ctx: DoctorContext, operation: str, name: str) -> tuple[dict[str, Any] | None, bool]:
    """The quota named `name` (stops paging once found), and whether any endpoint quota
    was listed at all (an empty answer says nothing about the instance type)."""
    seen_endpoint_quotas = False
    for quota in _quotas(ctx, operation):
        quota_name_ = str(quota.get("QuotaName", ""))
        if quota_name_ == name:
            return quota, True
        seen_endpoint_quotas = seen_endpoint_quotas or quota_name_.endswith(ENDPOINT_USAGE)
    return None, seen_endpoint_quotas


def check_quota(ctx: DoctorContext) -> list[CheckResult]:
    """The instance type is offered for hosting and its quota covers the instances."""
    name = quota_name(ctx.plan.instance_type)
    resource = f"{SERVICE_CODE} quota '{name}' ({ctx.region})"
    try:
        quota, listed = _find(ctx, "list_service_quotas", name)
        source = "applied"
        if quota is None:
            quota, listed_defaults = _find(ctx, "list_aws_default_service_quotas", name)
            listed = listed or listed_defaults
            source = "AWS default"
    except Exception as exc:
        return [
            could_not_check(
                "capacity.quota",
                resource,
                exc,
                denied="the caller may not read Service Quotas",
                fix="grant the caller servicequotas:ListServiceQuotas and "
                "servicequotas:ListAWSDefaultServiceQuotas",
                failed=f"Service Quotas in {ctx.region} did not list SageMaker's quotas",
            )
        ]
    if quota is None:
        return [_no_quota(ctx, resource, listed)]
    return [_quota_covers(ctx, resource, quota, source)]


def _no_quota(ctx: DoctorContext, resource: str, listed: bool) -> CheckResult:
    """No quota for the instance type: not offered here, or Service Quotas lists none."""
    if not listed:
        return warned(
            "capacity.quota",
            resource,
            "could not check: Service Quotas lists no SageMaker endpoint quota in "
            f"{ctx.region}, not even as an AWS default",
        )
    return failed(
        "capacity.quota",
        resource,
        f"{ctx.plan.instance_type} is not offered for SageMaker hosting in {ctx.region} "
        "(no endpoint-usage quota for it)",
        "pick an instance type or a region that offers it (peagle models --instances)",
    )


def _quota_covers(
    ctx: DoctorContext, resource: str, quota: dict[str, Any], source: str
) -> CheckResult:
    """Whether the quota covers the instances other endpoints hold plus this plan's."""
    value = float(quota.get("Value", 0))
    try:
        usage: Usage | None = endpoint_usage(ctx, ctx.plan.instance_type)
        usage_problem = ""
    except Exception as exc:
        usage, usage_problem = None, error_code(exc) or short_error(exc)
    needed, why = instances_for(ctx.plan.spec, running_instances(ctx, usage))
    in_use = usage.instances if usage else 0
    if value < in_use + needed:
        code = quota.get("QuotaCode", "<quota code>")
        held = f"; {usage.describe(ctx.plan.endpoint_name)}" if usage and in_use else ""
        return failed(
            "capacity.quota",
            resource,
            f"the {source} quota is {value:g} instances; the endpoint needs {needed} ({why}){held}",
            f"aws service-quotas request-service-quota-increase --region {ctx.region} "
            f"--service-code {SERVICE_CODE} --quota-code {code} "
            f"--desired-value {in_use + needed}",
        )
    if usage is None:
        return warned(
            "capacity.quota",
            resource,
            f"{source} quota {value:g} covers {needed} instance(s) ({why}), but the "
            f"instances other endpoints hold could not be counted ({usage_problem})",
            "grant the caller sagemaker:ListEndpoints, sagemaker:DescribeEndpoint and "
            "sagemaker:DescribeEndpointConfig",
        )
    return passed(
        "capacity.quota",
        resource,
        f"{source} quota {value:g} covers {needed} instance(s) ({why}); "
        f"{usage.describe(ctx.plan.endpoint_name)}",
    )
