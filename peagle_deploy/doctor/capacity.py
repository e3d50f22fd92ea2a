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
ListAWSDefaultServiceQuotas. Instances that other endpoints of the account already run
count against the same quota and are not looked at here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from peagle_deploy.doctor.context import DoctorContext, error_code, is_access_denied, short_error
from peagle_deploy.doctor.result import CheckResult, failed, passed, warned

SERVICE_CODE = "sagemaker"
ENDPOINT_USAGE = " for endpoint usage"
PAGE_SIZE = 100  # ListServiceQuotas MaxResults maximum (botocore's service-quotas model)


def quota_name(instance_type: str) -> str:
    return f"{instance_type}{ENDPOINT_USAGE}"


def instances_needed(ctx: DoctorContext) -> tuple[int, str]:
    """How many instances the endpoint may run at once, and why."""
    spec = ctx.plan.spec
    count = spec.initial_instance_count
    if spec.scaling is not None and spec.scaling.max_instances > count:
        return spec.scaling.max_instances, "scaling.max_instances"
    return count, "initial_instance_count"


def _quotas(ctx: DoctorContext, operation: str) -> Iterator[dict[str, Any]]:
    client = ctx.client("service-quotas")
    paginator = client.get_paginator(operation)
    for page in paginator.paginate(
        ServiceCode=SERVICE_CODE, PaginationConfig={"PageSize": PAGE_SIZE}
    ):
        yield from page.get("Quotas", [])


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
    instance = ctx.plan.instance_type
    name = quota_name(instance)
    resource = f"{SERVICE_CODE} quota '{name}' ({ctx.region})"
    try:
        quota, listed = _find(ctx, "list_service_quotas", name)
        source = "applied"
        if quota is None:
            quota, listed_defaults = _find(ctx, "list_aws_default_service_quotas", name)
            listed = listed or listed_defaults
            source = "AWS default"
    except Exception as exc:
        if is_access_denied(exc):
            return [
                warned(
                    "capacity.quota",
                    resource,
                    f"could not check: the caller may not read Service Quotas ({short_error(exc)})",
                    "grant the caller servicequotas:ListServiceQuotas and "
                    "servicequotas:ListAWSDefaultServiceQuotas",
                )
            ]
        return [
            warned(
                "capacity.quota",
                resource,
                f"could not check: Service Quotas failed ({error_code(exc) or short_error(exc)})",
            )
        ]
    if quota is None:
        if not listed:
            return [
                warned(
                    "capacity.quota",
                    resource,
                    "could not check: Service Quotas lists no SageMaker endpoint quotas here",
                )
            ]
        return [
            failed(
                "capacity.quota",
                resource,
                f"{instance} is not offered for SageMaker hosting in {ctx.region} "
                "(no endpoint-usage quota for it)",
                "pick an instance type or a region that offers it (peagle models --instances)",
            )
        ]
    value = float(quota.get("Value", 0))
    needed, why = instances_needed(ctx)
    if value < needed:
        code = quota.get("QuotaCode", "<quota code>")
        return [
            failed(
                "capacity.quota",
                resource,
                f"the {source} quota is {value:g} instances; the endpoint needs {needed} ({why})",
                f"aws service-quotas request-service-quota-increase --region {ctx.region} "
                f"--service-code {SERVICE_CODE} --quota-code {code} --desired-value {needed}",
            )
        ]
    return [
        passed(
            "capacity.quota",
            resource,
            f"{source} quota {value:g} covers {needed} instance(s) ({why}); other endpoints' "
            "usage not counted",
        )
    ]
