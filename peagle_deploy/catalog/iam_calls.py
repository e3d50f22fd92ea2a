"""One AWS API call -> what IAM authorizes for it, from the Service Authorization Reference.

`iam_requests(service, operation, params, ...)` turns a botocore call (its service name,
operation and parameters) into the IAM requests AWS evaluates: the action, *every*
resource the reference lists as required (each filled from the reference's own ARN
template with the call's parameters; an action whose resource types are all optional is
evaluated on the one the call names, else on `*`), and the condition keys the reference
lists for the action whose values the call's parameters decide (`aws:RequestTag/*`,
`aws:TagKeys`, `sagemaker:ModelArn`, ...). A role the call hands to a service adds an
`iam:PassRole` request with `iam:PassedToService`.

Which resources and keys an action needs is never written here: it is the vendored
reference (`catalog.iam_reference`). What is written by hand is only how the reference's
names are spelled in botocore's parameters (`VARIABLES`, `_KEY_VALUES`), the few
operations whose IAM action has another name (`ACTION_OF`), the ones that need no
permission, and the parameters that pass a role to a service (`PASSED_ROLES`), each with
the source that says so (docs/platform-facts.md, "IAM"). A call this map cannot resolve
raises `UnmappedCallError`: a new call gets its permissions from here first.

Used by `peagle doctor` (it asks `iam:SimulatePrincipalPolicy` these requests for the
caller) and by the test suite's call ledger (iam-simulate decides them against the
synthesized roles).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from peagle_deploy.catalog.iam_reference import ActionReference, Reference, reference
from peagle_deploy.errors import PeagleError

ContextValue = str | tuple[str, ...]

PREFIX = {"sagemaker-runtime": "sagemaker", "service-quotas": "servicequotas"}
"""botocore service name -> IAM service prefix, where they differ (the reference lists
InvokeEndpoint* under `sagemaker`, Service Quotas under `servicequotas`)."""

ACTION_OF = {
    # botocore's s3 model: HeadObject "you must have the s3:GetObject permission";
    # HeadBucket and ListObjectsV2 "you must have the s3:ListBucket permission".
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
}
HTTP_APIS = {
    # CloudWatch's PromQL API, which detailed observability is read with (an HTTP API that
    # no botocore model holds): the caller needs cloudwatch:GetMetricData and
    # cloudwatch:ListMetrics (docs/platform-facts.md, "Detailed observability").
    ("cloudwatch", "QueryMetrics"): ("cloudwatch:GetMetricData", "cloudwatch:ListMetrics"),
}
"""Requests that are no botocore operation -> the IAM actions AWS documents for them."""
NO_PERMISSION = frozenset({("sts", "GetCallerIdentity")})
"""botocore's sts model: GetCallerIdentity "No permissions are required"."""

PASSED_ROLES = {
    # botocore's sagemaker model: "To be able to pass this role to SageMaker, the caller
    # of this API must have the iam:PassRole permission" (CreateModelInput and
    # CreateEndpointConfigInput ExecutionRoleArn); CloudFormation's handler of
    # AWS::SageMaker::InferenceExperiment lists iam:PassRole for create (RoleArn).
    ("sagemaker", "CreateModel"): ("ExecutionRoleArn", "sagemaker.amazonaws.com"),
    ("sagemaker", "CreateEndpointConfig"): ("ExecutionRoleArn", "sagemaker.amazonaws.com"),
    ("sagemaker", "CreateInferenceExperiment"): ("RoleArn", "sagemaker.amazonaws.com"),
    # CreateTrainingJobRequest.RoleArn: "To be able to pass this role to SageMaker, the
    # caller of this API must have the iam:PassRole permission."
    ("sagemaker", "CreateTrainingJob"): ("RoleArn", "sagemaker.amazonaws.com"),
}

TAG_ON_CREATE = {
    # The reference lists no dependent action for CreateTrainingJob, but sagemaker:AddTags
    # takes `sagemaker:TaggingAction` ("Filters access by the API actions to which a user
    # can apply tags. Uses the name of the API operation that creates a taggable
    # resource"), and AWS's own managed policies grant AddTags on create with it
    # (AmazonSageMakerHyperPodInferenceAccess v3: AddTags with TaggingAction CreateModel,
    # CreateEndpointConfig, CreateEndpoint): a CreateTrainingJob with Tags is also an
    # AddTags of the new job, asked with the operation's name.
    ("sagemaker", "CreateTrainingJob"): "sagemaker:AddTags",
}
"""Create calls whose Tags are also authorized as a tagging of the new resource."""

GENERATED = "peagle-generated-id"
"""What fills a template variable the service generates (a scalable target's id): no
call names it, so the request stands for any such resource."""

VARIABLES: dict[tuple[str, str], tuple[str, ...]] = {
    ("sagemaker", "EndpointName"): ("EndpointName",),
    ("sagemaker", "EndpointConfigName"): ("EndpointConfigName",),
    ("sagemaker", "ModelName"): ("ModelName",),
    ("sagemaker", "InferenceExperimentName"): ("Name",),
    ("sagemaker", "TrainingJobName"): ("TrainingJobName",),
    ("servicequotas", "ServiceCode"): ("ServiceCode",),
    ("servicequotas", "QuotaCode"): ("QuotaCode",),
    ("ssm", "ParameterNameWithoutLeadingSlash"): ("Name", "Path", "ResourceId"),
    ("logs", "LogGroupName"): ("logGroupName",),
    ("logs", "LogStreamName"): ("logStreamName",),
    ("s3", "BucketName"): ("Bucket",),
    ("s3", "ObjectName"): ("Key",),
    ("iam", "RoleNameWithPath"): ("RoleName",),
    ("ecr", "RepositoryName"): ("repositoryName",),
    ("ecr", "Account"): ("registryId",),
    ("kms", "KeyId"): ("KeyId",),
    ("secretsmanager", "SecretId"): ("SecretId",),
    ("cloudwatch", "AlarmName"): ("AlarmName", "AlarmNames"),
    ("lambda", "FunctionName"): ("FunctionName",),
    ("cloudformation", "StackName"): ("StackName",),
}
"""(IAM prefix, the reference's template variable) -> the botocore parameters that hold
it, first present wins; a list parameter makes one request per element. An ARN-valued
parameter (ResourceArn, PolicySourceArn, an ARN given as SecretId or KeyId) is matched
against the templates instead."""

GENERATED_VARIABLES = frozenset(
    {("application-autoscaling", "ResourceId"), ("cloudformation", "Id")}
)
"""Template variables no parameter holds (Application Auto Scaling's target id is made
at registration; its `ResourceId` parameter is the endpoint variant, not the id; a
stack's id is made when it is created, and a call names the stack by its name)."""


class UnmappedCallError(PeagleError):
    """A call the map cannot turn into IAM requests: add it before the code makes it."""


@dataclass(frozen=True)
class Where:
    """Where the call goes: partition, region, the caller's account."""

    region: str
    account: str
    partition: str = "aws"


@dataclass(frozen=True)
class IamRequest:
    """One request IAM authorizes: `action` on `resource` with `context`."""

    action: str
    resource: str
    context: Mapping[str, ContextValue] = field(default_factory=dict, hash=False)
    generated: bool = False
    """The resource's id is made by the service: the request stands for any of them."""

    def key(self) -> tuple[str, str, tuple[tuple[str, ContextValue], ...]]:
        """A value equal for equal requests (for counting distinct ones)."""
        return (self.action, self.resource, tuple(sorted(self.context.items())))


def _tags(params: Mapping[str, Any]) -> dict[str, str]:
    tags = params.get("Tags")
    if isinstance(tags, Mapping):  # Application Auto Scaling: a map
        return {str(k): str(v) for k, v in tags.items()}
    return {str(t["Key"]): str(t.get("Value", "")) for t in tags or []}


def _variants(params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*params.get("ProductionVariants", []), *params.get("ShadowProductionVariants", [])]


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _param(name: str) -> Callable[[Mapping[str, Any], Where], ContextValue | None]:
    def read(params: Mapping[str, Any], _where: Where) -> ContextValue | None:
        return None if params.get(name) is None else _text(params[name])

    return read


def _model_arns(params: Mapping[str, Any], where: Where) -> ContextValue | None:
    template = reference().arn_templates["sagemaker:model"]
    arns = tuple(
        _fill(template, {"ModelName": str(v["ModelName"])}, where)
        for v in _variants(params)
        if v.get("ModelName")
    )
    return arns or None


def _instance_types(params: Mapping[str, Any], _where: Where) -> ContextValue | None:
    """A config's variants' types, or a training job's (ResourceConfig: one type, or the
    instance groups' of a heterogeneous cluster)."""
    resources = params.get("ResourceConfig") or {}
    holders = [*_variants(params), resources, *resources.get("InstanceGroups", [])]
    kinds = tuple(sorted({str(v["InstanceType"]) for v in holders if "InstanceType" in v}))
    return kinds or None


def _nested(*path: str) -> Callable[[Mapping[str, Any], Where], ContextValue | None]:
    """A value inside a structure parameter (ResourceConfig.VolumeKmsKeyId)."""

    def read(params: Mapping[str, Any], _where: Where) -> ContextValue | None:
        node: Any = params
        for name in path:
            node = node.get(name) if isinstance(node, Mapping) else None
        return None if node is None else _text(node)

    return read


def _volume_key(params: Mapping[str, Any], where: Where) -> ContextValue | None:
    """CreateEndpointConfig's KmsKeyId; CreateTrainingJob's ResourceConfig.VolumeKmsKeyId."""
    return _param("KmsKeyId")(params, where) or _nested("ResourceConfig", "VolumeKmsKeyId")(
        params, where
    )


def _vpc(name: str) -> Callable[[Mapping[str, Any], Where], ContextValue | None]:
    def read(params: Mapping[str, Any], _where: Where) -> ContextValue | None:
        values = (params.get("VpcConfig") or {}).get(name)
        return tuple(str(v) for v in values) if values else None

    return read


_KEY_VALUES: dict[str, Callable[[Mapping[str, Any], Where], ContextValue | None]] = {
    "aws:tagkeys": lambda p, _w: tuple(sorted(_tags(p))) or None,
    "sagemaker:modelarn": _model_arns,
    "sagemaker:instancetypes": _instance_types,
    "sagemaker:volumekmskeyarn": _volume_key,
    "sagemaker:outputkmskeyarn": _nested("OutputDataConfig", "KmsKeyId"),
    "sagemaker:networkisolation": _param("EnableNetworkIsolation"),
    "sagemaker:intercontainertrafficencryption": _param("EnableInterContainerTrafficEncryption"),
    "sagemaker:maxruntimeinseconds": _nested("StoppingCondition", "MaxRuntimeInSeconds"),
    "servicequotas:service": _param("ServiceCode"),
    "sagemaker:vpcsubnets": _vpc("Subnets"),
    "sagemaker:vpcsecuritygroupids": _vpc("SecurityGroupIds"),
    "application-autoscaling:service-namespace": _param("ServiceNamespace"),
    "application-autoscaling:scalable-dimension": _param("ScalableDimension"),
    "ssm:overwrite": _param("Overwrite"),
    "ssm:recursive": _param("Recursive"),
    "cloudwatch:namespace": _param("Namespace"),
    "s3:prefix": _param("Prefix"),
    "s3:delimiter": _param("Delimiter"),
    "s3:max-keys": _param("MaxKeys"),
}
"""How a condition key's value is read from the call (the key's name -> its reader).
The reference decides which keys an action takes; a key it lists that no parameter
decides (a resource's own tags, the caller's account) is left to the evaluator."""


def _fill(template: str, values: Mapping[str, str], where: Where) -> str:
    names = {"Partition": where.partition, "Region": where.region, "Account": where.account}
    return re.sub(r"\$\{(\w+)\}", lambda m: {**names, **values}[m.group(1)], template)


def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\$\{\w+\})", template)
    regex = "".join(f"(?P<{p[2:-1]}>.+?)" if p.startswith("${") else re.escape(p) for p in parts)
    return re.compile(f"^{regex}$")


def _arn_values(params: Mapping[str, Any]) -> list[str]:
    return [str(v) for v in params.values() if isinstance(v, str) and v.startswith("arn:")]


def _matched(template: str, params: Mapping[str, Any]) -> str | None:
    """An ARN parameter that is a resource of `template` (ResourceArn, PolicySourceArn)."""
    pattern = _template_regex(template)
    return next((a for a in _arn_values(params) if pattern.match(a)), None)


def _variable_values(prefix: str, var: str, params: Mapping[str, Any]) -> list[str] | None:
    for name in VARIABLES.get((prefix, var), ()):
        value = params.get(name)
        if value is None:
            continue
        values = [str(v) for v in value] if isinstance(value, list) else [str(value)]
        return [v.lstrip("/") if var == "ParameterNameWithoutLeadingSlash" else v for v in values]
    return None


def _resources_of(
    prefix: str, template: str, params: Mapping[str, Any], where: Where
) -> tuple[list[str], bool] | None:
    """The ARNs of one resource type the call names (and whether its id is generated),
    or None when the call does not name one."""
    arn = _matched(template, params)
    if arn is not None:
        return [arn], False
    names = re.findall(r"\$\{(\w+)\}", template)
    choices: dict[str, list[str]] = {}
    generated = False
    for var in names:
        if var in ("Partition", "Region") or (var == "Account" and (prefix, var) not in VARIABLES):
            continue
        if (prefix, var) in GENERATED_VARIABLES:
            choices[var], generated = [GENERATED], True
            continue
        values = _variable_values(prefix, var, params)
        if values is None:
            if var == "Account":
                continue
            return None
        choices[var] = values
    if not choices:
        return None  # a template with no name in it: not the one the call names
    keys = list(choices)
    arns = [
        _fill(template, dict(zip(keys, combo, strict=True)), where)
        for combo in itertools.product(*(choices[k] for k in keys))
    ]
    return arns, generated


def _resources(
    ref: Reference, action: ActionReference, params: Mapping[str, Any], where: Where
) -> list[tuple[str, bool]]:
    prefix = action.name.split(":", 1)[0]
    required = [r for r in action.resources if r.required]
    if required:
        found: list[tuple[str, bool]] = []
        for use in required:
            named = _resources_of(prefix, ref.arn_templates[use.type], params, where)
            if named is None:
                raise UnmappedCallError(
                    f"{action.name}: the call names no {use.type} (the reference requires it); "
                    "add how its template is read from the parameters to catalog/iam_calls.py"
                )
            found += [(arn, named[1]) for arn in named[0]]
        return found
    for use in action.resources:  # all optional: the one the call names, else `*`
        named = _resources_of(prefix, ref.arn_templates[use.type], params, where)
        if named is not None:
            return [(arn, named[1]) for arn in named[0]]
    return [("*", False)]


def _context(
    ref: Reference, action: ActionReference, params: Mapping[str, Any], where: Where
) -> Iterator[dict[str, ContextValue]]:
    """The condition keys the call decides; a single-valued key with several values (a
    config's models) is one request per value, as IAM evaluates each."""
    fixed: dict[str, ContextValue] = {}
    split: dict[str, tuple[str, ...]] = {}
    for key in action.condition_keys:
        lowered = key.lower()
        if lowered == "aws:requesttag/${tagkey}":
            fixed |= {f"aws:RequestTag/{k}": v for k, v in _tags(params).items()}
            continue
        reader = _KEY_VALUES.get(lowered)
        value = None if reader is None else reader(params, where)
        if value is None:
            continue
        if isinstance(value, tuple) and not ref.key_type(key).startswith("ArrayOf"):
            split[key] = value
        else:
            fixed[key] = value
    keys = list(split)
    for combo in itertools.product(*(split[k] for k in keys)):
        yield {**fixed, **dict(zip(keys, combo, strict=True))}


def _pass_role(service: str, operation: str, params: Mapping[str, Any]) -> list[IamRequest]:
    passed = PASSED_ROLES.get((service, operation))
    if passed is None or not params.get(passed[0]):
        return []
    return [IamRequest("iam:PassRole", str(params[passed[0]]), {"iam:PassedToService": passed[1]})]


def action_name(service: str, operation: str) -> str:
    """The IAM action of a botocore operation."""
    return ACTION_OF.get((service, operation)) or f"{PREFIX.get(service, service)}:{operation}"


def action_names(service: str, operation: str) -> tuple[str, ...]:
    """Every IAM action one call needs (several for an HTTP API, none when free)."""
    if (service, operation) in NO_PERMISSION:
        return ()
    return HTTP_APIS.get((service, operation)) or (action_name(service, operation),)


def iam_requests(
    service: str, operation: str, params: Mapping[str, Any], where: Where
) -> list[IamRequest]:
    """Every IAM request behind one call (none for a call that needs no permission)."""
    ref = reference()
    out: list[IamRequest] = []
    for name in action_names(service, operation):
        action = ref.action(name)
        if action is None:
            raise UnmappedCallError(
                f"{service}.{operation}: {name} is not in the vendored Service "
                "Authorization Reference; add it to scripts/iam_reference.py's list"
            )
        out += [
            IamRequest(action.name, arn, context, generated)
            for arn, generated in _resources(ref, action, params, where)
            for context in _context(ref, action, params, where)
        ]
    return (
        out
        + _tag_on_create(ref, service, operation, params, where)
        + _pass_role(service, operation, params)
    )


def _tag_on_create(
    ref: Reference, service: str, operation: str, params: Mapping[str, Any], where: Where
) -> list[IamRequest]:
    """The AddTags a create with Tags is also authorized as (`TAG_ON_CREATE`)."""
    name = TAG_ON_CREATE.get((service, operation))
    if name is None or not params.get("Tags"):
        return []
    action = ref.action(name)
    if action is None:
        raise UnmappedCallError(f"{service}.{operation}: {name} is not in the vendored reference")
    tagging = {"sagemaker:TaggingAction": operation}
    return [
        IamRequest(action.name, arn, {**context, **tagging}, generated)
        for arn, generated in _resources(ref, action, params, where)
        for context in _context(ref, action, params, where)
    ]


def distinct(requests: Sequence[IamRequest]) -> list[IamRequest]:
    """The requests without repeats, in first-seen order."""
    seen: dict[Any, IamRequest] = {}
    for request in requests:
        seen.setdefault(request.key(), request)
    return list(seen.values())
