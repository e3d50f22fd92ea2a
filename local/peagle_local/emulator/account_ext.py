"""Stand-in extensions for moto's account-level APIs that `peagle doctor` reads: a test double.

moto 5.2.5 implements Service Quotas only for `vpc` (ListAWSDefaultServiceQuotas and
GetServiceQuota) and has no ListServiceQuotas, and it does not implement
iam:SimulatePrincipalPolicy at all. `AccountExtensions` patches moto's response classes
in place (every patch is undone on exit) to add:

- Service Quotas: ListServiceQuotas, ListAWSDefaultServiceQuotas, GetServiceQuota and
  GetAWSDefaultServiceQuota for quotas the test sets (`set_quota`,
  `set_endpoint_quota`), with NextToken paging. Services nobody set keep moto's answers.
- Service Quotas: RequestServiceQuotaIncrease for a quota the test set, approved at once
  (the emulated account's only departure from a real one: no case, no wait), so that a
  shell can stage the account through the same API a user would call
  (`peagle emulator stage`).
- IAM: SimulatePrincipalPolicy for roles, evaluated by `iam_policy.evaluate` over the
  role's inline and attached managed policies (and its permissions boundary) as moto
  stores them, answered in the shape of botocore's iam model: per-resource results in
  `ResourceSpecificResults` (with their `MissingContextValues`) and the boundary's own
  verdict in `PermissionsBoundaryDecisionDetail`.
- KMS: GetKeyPolicy without `PolicyName` (botocore's kms model: optional, `default`),
  answered with the `PolicyName` moto leaves out.

Like `MotoExtensions`, it serves `moto.mock_aws()` in-process and a moto server in this
process (`LocalAWS` installs both); only one can be installed at a time.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from peagle_local.emulator.iam_policy import (
    NamedPolicy,
    UnsupportedPolicyError,
    evaluate,
)
from peagle_local.emulator.patching import Installable, Patches, Slot

SAGEMAKER = "sagemaker"


def endpoint_quota_name(instance_type: str) -> str:
    """The name SageMaker gives the per-instance-type hosting quota (see doctor.capacity)."""
    return f"{instance_type} for endpoint usage"


def fake_quota_code(service_code: str, name: str) -> str:
    """A stable `L-XXXXXXXX` code for an emulated quota (real codes are opaque)."""
    digest = hashlib.sha256(f"{service_code}/{name}".encode()).hexdigest()[:8].upper()
    return f"L-{digest}"


@dataclass
class _Quota:
    service_code: str
    name: str
    code: str
    value: float
    applied: bool

    def shape(self, account_id: str, region: str, *, default: bool = False) -> dict[str, Any]:
        """The ServiceQuota structure of the API (botocore's service-quotas model)."""
        return {
            "ServiceCode": self.service_code,
            "ServiceName": "Amazon SageMaker" if self.service_code == SAGEMAKER else "",
            "QuotaArn": (
                f"arn:aws:servicequotas:{region}:{'' if default else account_id}:"
                f"{self.service_code}/{self.code}"
            ),
            "QuotaCode": self.code,
            "QuotaName": self.name,
            "Value": float(self.value),
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
        }


_SLOT: Slot[AccountExtensions] = Slot("peagle account extensions")


def _active() -> AccountExtensions:
    return _SLOT.get()


@dataclass
class AccountExtensions(Installable):
    """Install with `with AccountExtensions() as account:` (inside or outside `mock_aws`)."""

    default_page_size: int = 100
    """Quotas per page when the caller gives no MaxResults (real default not documented)."""
    _quotas: dict[tuple[str, str, str], dict[str, _Quota]] = field(default_factory=dict, init=False)
    _patches: Patches = field(default_factory=Patches, init=False)
    _lock: threading.RLock = field(default_factory=threading.RLock, init=False)
    _new_account_types: tuple[str, ...] = field(default=(), init=False)
    _slot: ClassVar[Slot[AccountExtensions]] = _SLOT

    # --- control API ------------------------------------------------------------------
    def set_quota(
        self,
        service_code: str,
        name: str,
        value: float,
        *,
        region: str = "us-east-1",
        account_id: str | None = None,
        code: str | None = None,
        applied: bool = True,
    ) -> str:
        """Set one quota; returns its code. `applied=False`: only the AWS default is known
        (ListServiceQuotas and GetServiceQuota leave it out, as the real API may)."""
        account = account_id or _default_account()
        quota = _Quota(
            service_code, name, code or fake_quota_code(service_code, name), value, applied
        )
        with self._lock:
            self.quotas(account, region, service_code)  # a new account's defaults first
            self._quotas.setdefault((account, region, service_code), {})[name] = quota
        return quota.code

    def set_endpoint_quota(
        self, instance_type: str, value: float, *, region: str = "us-east-1", **kwargs: Any
    ) -> str:
        """The SageMaker hosting quota of one instance type (`<type> for endpoint usage`)."""
        return self.set_quota(
            SAGEMAKER, endpoint_quota_name(instance_type), value, region=region, **kwargs
        )

    def new_account_endpoint_quotas(self, instance_types: Iterable[str]) -> None:
        """From now on, in every region, list a hosting quota of 0 for each instance type,
        as AWS defaults only: an account that was granted no instances yet
        (CreateEndpoint's refusal reads "is 0 Instances"), so `peagle doctor` names the
        quota to raise instead of finding none. Quotas set for a region stay as set."""
        with self._lock:
            self._new_account_types = tuple(sorted(instance_types))

    def raise_quota(
        self, account_id: str, region: str, service_code: str, code: str, value: float
    ) -> _Quota | None:
        """Apply `value` to the quota with `code` (None: no such quota)."""
        with self._lock:
            for quota in self.quotas(account_id, region, service_code) or []:
                if quota.code == code:
                    quota.value, quota.applied = value, True
                    return quota
        return None

    def quotas(self, account_id: str, region: str, service_code: str) -> list[_Quota] | None:
        """The quotas set for a service, sorted by name (None: nothing set, use moto's)."""
        with self._lock:
            table = self._quotas.get((account_id, region, service_code))
            if table is None and service_code == SAGEMAKER and self._new_account_types:
                table = self._quotas[(account_id, region, service_code)] = {
                    name: _Quota(service_code, name, fake_quota_code(service_code, name), 0, False)
                    for name in map(endpoint_quota_name, self._new_account_types)
                }
            return None if table is None else [table[k] for k in sorted(table)]

    # --- install (see patching.Installable) -------------------------------------------
    def _install_patches(self) -> None:
        from moto.iam.responses import IamResponse
        from moto.kms.responses import KmsResponse
        from moto.servicequotas.responses import ServiceQuotasResponse

        cls = ServiceQuotasResponse
        orig_defaults = cls.list_aws_default_service_quotas
        orig_get = cls.get_service_quota
        self._patch(cls, "list_service_quotas", _list_quotas(applied_only=True, fallback=None))
        self._patch(
            cls,
            "list_aws_default_service_quotas",
            _list_quotas(applied_only=False, fallback=orig_defaults),
        )
        self._patch(cls, "get_service_quota", _get_quota(applied_only=True, fallback=orig_get))
        self._patch(
            cls, "get_aws_default_service_quota", _get_quota(applied_only=False, fallback=None)
        )
        self._patch(cls, "request_service_quota_increase", _request_increase)
        self._patch(IamResponse, "simulate_principal_policy", _simulate_principal_policy)
        self._patch(KmsResponse, "get_key_policy", _get_key_policy)


def _default_account() -> str:
    from moto.core import DEFAULT_ACCOUNT_ID

    return str(DEFAULT_ACCOUNT_ID)


def _no_such_resource() -> Exception:
    from moto.servicequotas.exceptions import NoSuchResource

    return NoSuchResource()


def _list_quotas(*, applied_only: bool, fallback: Any) -> Any:
    def handler(self: Any) -> str:
        params = json.loads(self.body or "{}")
        service = str(params.get("ServiceCode"))
        quotas = _active().quotas(self.current_account, self.region, service)
        if quotas is None:
            if fallback is not None:
                return str(fallback(self))
            quotas = []
        if applied_only:
            quotas = [q for q in quotas if q.applied]
        if params.get("QuotaCode"):
            quotas = [q for q in quotas if q.code == params["QuotaCode"]]
        size = int(params.get("MaxResults") or _active().default_page_size)
        start = int(params.get("NextToken") or 0)
        page = quotas[start : start + size]
        body: dict[str, Any] = {
            "Quotas": [
                q.shape(self.current_account, self.region, default=not applied_only) for q in page
            ]
        }
        if start + size < len(quotas):
            body["NextToken"] = str(start + size)
        return json.dumps(body)

    return handler


def _get_quota(*, applied_only: bool, fallback: Any) -> Any:
    def handler(self: Any) -> str:
        params = json.loads(self.body or "{}")
        service = str(params.get("ServiceCode"))
        quotas = _active().quotas(self.current_account, self.region, service)
        if quotas is None and fallback is not None:
            return str(fallback(self))
        for quota in quotas or []:
            if quota.code == params.get("QuotaCode") and (quota.applied or not applied_only):
                shape = quota.shape(self.current_account, self.region, default=not applied_only)
                return json.dumps({"Quota": shape})
        raise _no_such_resource()

    return handler


def _request_increase(self: Any) -> str:
    """RequestServiceQuotaIncrease, approved and applied at once (botocore's shape)."""
    params = json.loads(self.body or "{}")
    service = str(params.get("ServiceCode"))
    desired = float(params.get("DesiredValue", 0))
    quota = _active().raise_quota(
        self.current_account, self.region, service, str(params.get("QuotaCode")), desired
    )
    if quota is None:
        raise _no_such_resource()
    requested = {
        "Id": hashlib.sha256(f"{quota.code}/{desired}".encode()).hexdigest()[:32],
        "ServiceCode": service,
        "QuotaCode": quota.code,
        "QuotaName": quota.name,
        "DesiredValue": desired,
        "Status": "APPROVED",
        "QuotaArn": quota.shape(self.current_account, self.region)["QuotaArn"],
        "GlobalQuota": False,
        "Unit": "None",
    }
    return json.dumps({"RequestedQuota": requested})


# --- iam:SimulatePrincipalPolicy ------------------------------------------------------


def _members(value: Any) -> list[Any]:
    """A query-protocol list as moto parses it (a list, or {"member": [...]})."""
    if value is None:
        return []
    if isinstance(value, dict) and "member" in value:
        value = value["member"]
    return list(value) if isinstance(value, list) else [value]


def _document(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    from urllib.parse import unquote

    text = str(raw)
    try:
        value = json.loads(text)
    except ValueError:
        value = json.loads(unquote(text))
    if not isinstance(value, dict):
        raise UnsupportedPolicyError("policy document is not a JSON object")
    return value


def _managed(backend: Any, arn: str) -> NamedPolicy:
    policy = backend.get_policy(arn)
    version = next(v for v in policy.versions if v.is_default)
    kind = "aws-managed" if ":iam::aws:policy/" in arn else "user-managed"
    return NamedPolicy(arn, kind, _document(version.document))


def simulation_result(
    policies: list[NamedPolicy],
    boundary: list[NamedPolicy] | None,
    action: str,
    resource: str,
    context: dict[str, list[str]],
) -> dict[str, Any]:
    """One EvaluationResult of SimulatePrincipalPolicy for one action on one resource.

    Raises UnsupportedPolicyError for what the test double does not evaluate.
    """
    outcome = evaluate(policies, action, resource, context, boundary)
    specific: dict[str, Any] = {
        "EvalResourceName": resource,
        "EvalResourceDecision": outcome.decision,
        "MatchedStatements": [
            {"SourcePolicyId": p.policy_id, "SourcePolicyType": p.policy_type}
            for p in outcome.matched
        ],
        "MissingContextValues": outcome.missing_context,
    }
    result: dict[str, Any] = {
        "EvalActionName": action,
        "EvalResourceName": resource,
        "EvalDecision": outcome.decision,
        "MatchedStatements": specific["MatchedStatements"],
        "MissingContextValues": outcome.missing_context,
        "ResourceSpecificResults": [specific],
    }
    if boundary is not None:
        limit = evaluate(boundary, action, resource, context)
        detail = {"AllowedByPermissionsBoundary": limit.decision == "allowed"}
        result["PermissionsBoundaryDecisionDetail"] = detail
        specific["PermissionsBoundaryDecisionDetail"] = detail
    return result


def _simulate_principal_policy(self: Any) -> Any:
    from moto.core.responses import ActionResult
    from moto.iam.exceptions import InvalidInput

    params = self._get_params()
    source = str(params.get("PolicySourceArn", ""))
    if ":role/" not in source:
        raise InvalidInput(f"emulator: SimulatePrincipalPolicy supports roles only, got {source}")
    role = self.backend.get_role_by_arn(source)
    policies = [
        NamedPolicy(name, "role", _document(doc)) for name, doc in sorted(role.policies.items())
    ]
    policies += [_managed(self.backend, arn) for arn in sorted(role.managed_policies)]
    boundary = (
        [_managed(self.backend, role.permissions_boundary_arn)]
        if role.permissions_boundary_arn
        else None
    )
    context = {
        str(entry["ContextKeyName"]): [str(v) for v in _members(entry.get("ContextKeyValues"))]
        for entry in _members(params.get("ContextEntries"))
    }
    resources = [str(r) for r in _members(params.get("ResourceArns"))] or ["*"]
    results = []
    for action in (str(a) for a in _members(params.get("ActionNames"))):
        for resource in resources:
            try:
                results.append(simulation_result(policies, boundary, action, resource, context))
            except UnsupportedPolicyError as exc:
                raise InvalidInput(f"emulator: unsupported policy construct: {exc}") from exc
    return ActionResult({"EvaluationResults": results, "IsTruncated": False})


# --- kms:GetKeyPolicy -------------------------------------------------------------------


def _get_key_policy(self: Any) -> str:
    """moto's GetKeyPolicy, with the optional PolicyName (default `default`) of the API."""
    from moto.kms.exceptions import NotFoundException

    key_id = self._get_param("KeyId")
    name = self._get_param("PolicyName") or "default"
    if name != "default":
        raise NotFoundException("No such policy exists")
    self._validate_cmk_id(key_id)
    policy = self.kms_backend.get_key_policy(key_id) or "{}"
    return json.dumps({"Policy": policy, "PolicyName": name})
