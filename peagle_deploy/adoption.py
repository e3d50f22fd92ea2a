"""Whether a SageMaker model or endpoint config that exists is the one a request creates.

Model and config names are derived from the request's content (`plan.render`), so they
are predictable: anyone allowed to create a resource of that name can make it first,
with other content. Whoever meets "already exists" (the SDK's deploy, an experiment's
start, the CDK model provider's handler) describes the resource and adopts it only when
`difference` finds nothing; a promotion uses the same comparison to check that the source
endpoint runs what its manifest's spec plans. One implementation for all of them:
standard library only, so infra/provider_bundle.py copies it into the handler's asset.

The rule (what DescribeModel / DescribeEndpointConfig return against what Create takes):

- Every field the request sets is compared, at every depth; a field the request does not
  set is SageMaker's to fill (`PrimaryContainer.Mode`, `InferenceExecutionConfig`,
  `ProductionVariants[].VolumeSizeInGB` and `InferenceAmiVersion`, an S3 source's `ETag`,
  ...). Numbers compare as numbers (a weight sent as 1 reads back as 1.0).
- Lists of variants or channels match by `VariantName` / `ChannelName`, whatever their
  order, and an extra item is a difference; lists of plain values (subnets, security
  groups) compare as sets.
- An `Environment` is compared whole: each variable by value (a secret's too; the field
  named, never the value) and a variable the request does not set is a difference.
  `ANY_VALUE` in a request stands for a variable that must be there with any value (a
  secret whose value the comparer cannot know).
- `MUST_BE_ABSENT`: fields SageMaker never fills, each of which changes what runs or
  where data goes (a shadow variant, data capture, SSM access into the container, a
  second container, a VPC, another KMS key, ...), must be absent or empty when the
  request does not set them.
- Tags: `peagle:stage` names the stage that made the resource; one that names another
  stage is a difference (the other tags are not identity: the content-derived name is).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from peagle_deploy.naming import STAGE_TAG


class _AnyValue:
    """Placeholder for a value the comparer cannot know (see `ANY_VALUE`)."""

    def __repr__(self) -> str:
        return "ANY_VALUE"


ANY_VALUE: Final = _AnyValue()
"""In a request's Environment: the variable must exist, with any string value."""

EXACT_MAPS: Final = frozenset({"Environment"})
"""Maps compared whole: a key the request does not set is a difference."""
LIST_KEYS: Final = ("VariantName", "ChannelName")
"""What identifies an item of a list of structures (ProductionVariants, channels)."""
MAX_KEY_SHOWN = 64
"""Longest key shown in a field path (a described Environment's keys are anyone's)."""


@dataclass(frozen=True)
class Resource:
    """One kind of resource: its label, its name field, and what must be absent."""

    label: str
    name_field: str
    must_be_absent: tuple[str, ...]
    """Dotted paths (`[*]` for each list item) that must be empty unless requested."""

    def name(self, request: Mapping[str, Any]) -> str:
        return str(request[self.name_field])


MODEL: Final = Resource(
    "model",
    "ModelName",
    (
        "Containers",
        "VpcConfig",
        "PrimaryContainer.ImageConfig",
        "PrimaryContainer.ModelDataUrl",
        "PrimaryContainer.AdditionalModelDataSources",
        "PrimaryContainer.MultiModelConfig",
        "PrimaryContainer.ModelPackageName",
        "PrimaryContainer.InferenceSpecificationName",
    ),
)
ENDPOINT_CONFIG: Final = Resource(
    "endpoint config",
    "EndpointConfigName",
    (
        "ShadowProductionVariants",
        "DataCaptureConfig",
        "AsyncInferenceConfig",
        "ExplainerConfig",
        "KmsKeyId",
        "ExecutionRoleArn",
        "VpcConfig",
        "EnableNetworkIsolation",
        "ProductionVariants[*].CoreDumpConfig",
        "ProductionVariants[*].EnableSSMAccess",
        "ProductionVariants[*].ServerlessConfig",
        "ProductionVariants[*].AcceleratorType",
    ),
)
NOT_CONTENT: Final = frozenset({"ModelName", "EndpointConfigName", "Tags"})
"""Request fields that are not the resource's content (the name is what was looked up;
tags are compared by `tag_difference`)."""


def _kms_key_form(value: str) -> str:
    """A KMS key identifier without its ARN part: `key/<id>` or `alias/<name>`."""
    resource = (
        value.split(":", 5)[5] if value.startswith("arn:") and value.count(":") >= 5 else value
    )
    return resource if resource.startswith(("key/", "alias/")) else f"key/{resource}"


def _same_kms_key(requested: Any, described: Any) -> bool:
    """A key id and its key ARN, an alias and its alias ARN, are one key (CreateEndpointConfig
    takes any of the four forms; which one DescribeEndpointConfig returns is not documented)."""
    if not isinstance(requested, str) or not isinstance(described, str):
        return False
    return requested == described or _kms_key_form(requested) == _kms_key_form(described)


EQUIVALENT: Final = {"KmsKeyId": _same_kms_key}
"""Fields whose value has several spellings, compared by what they name."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _empty(value: Any) -> bool:
    return value is None or value is False or value in ("", {}, [])


def _key(key: str) -> str:
    return key if len(key) <= MAX_KEY_SHOWN else f"{key[: MAX_KEY_SHOWN - 1]}…"


def _list_key(items: Sequence[Any]) -> str | None:
    for key in LIST_KEYS:
        if items and all(isinstance(i, Mapping) and isinstance(i.get(key), str) for i in items):
            return key
    return None


def _list_differences(requested: Sequence[Any], described: Any, where: str) -> Iterator[str]:
    if not isinstance(described, list):
        yield where
        return
    key = _list_key(requested)
    if key is not None:
        found = {d.get(key): d for d in described if isinstance(d, Mapping)}
        for item in requested:
            yield from differences(item, found.get(item[key]), f"{where}[{_key(item[key])}]")
        extra = sorted(str(n) for n in found if n not in {i[key] for i in requested})
        yield from (f"{where}[{_key(n)}]" for n in extra)
        if len(found) != len(described):
            yield where
    elif all(not isinstance(r, Mapping | list) for r in requested):
        if sorted(map(repr, requested)) != sorted(map(repr, described)):
            yield where
    elif len(requested) != len(described):
        yield where
    else:
        for i, (r, d) in enumerate(zip(requested, described, strict=True)):
            yield from differences(r, d, f"{where}[{i}]")


def differences(requested: Any, described: Any, where: str = "") -> Iterator[str]:
    """The dotted paths where `described` is not what `requested` asks for."""
    prefix = f"{where}." if where else ""
    same = EQUIVALENT.get(where.rpartition(".")[2])
    if same is not None:
        if not same(requested, described):
            yield where
    elif requested is ANY_VALUE:
        if not isinstance(described, str):
            yield where
    elif isinstance(requested, Mapping):
        if not isinstance(described, Mapping):
            yield where
            return
        for key, value in requested.items():
            yield from differences(value, described.get(key), f"{prefix}{_key(key)}")
        if where.rpartition(".")[2] in EXACT_MAPS:
            extra = sorted(str(k) for k in described if k not in requested)
            yield from (f"{prefix}{_key(k)}" for k in extra)
    elif isinstance(requested, list):
        yield from _list_differences(requested, described, where)
    elif _is_number(requested) and _is_number(described):
        if float(requested) != float(described):
            yield where
    elif requested != described or type(requested) is not type(described):
        yield where


def _present(described: Any, path: list[str], where: str) -> Iterator[str]:
    """The paths under `described` along `path` that hold something."""
    if not path:
        if not _empty(described):
            yield where
        return
    head, rest = path[0], path[1:]
    if head.endswith("[*]"):
        items = described.get(head[:-3]) if isinstance(described, Mapping) else None
        for i, item in enumerate(items if isinstance(items, list) else []):
            label = item.get("VariantName", i) if isinstance(item, Mapping) else i
            yield from _present(item, rest, f"{where}{head[:-3]}[{_key(str(label))}].")
    elif isinstance(described, Mapping):
        yield from _present(described.get(head), rest, f"{where}{head}" + ("." if rest else ""))


def _requested(request: Any, path: list[str]) -> bool:
    """Whether the request sets the field at `path` (for any item of a `[*]` list)."""
    if not path:
        return not _empty(request)
    head, rest = path[0], path[1:]
    if head.endswith("[*]"):
        items = request.get(head[:-3]) if isinstance(request, Mapping) else None
        return any(_requested(i, rest) for i in (items if isinstance(items, list) else []))
    return isinstance(request, Mapping) and _requested(request.get(head), rest)


def tag_difference(
    request_tags: Sequence[Mapping[str, str]] | None,
    described_tags: Sequence[Mapping[str, str]] | None,
) -> str | None:
    """`Tags.peagle:stage` when the resource's stage tag names another stage."""
    wanted = {t.get("Key"): t.get("Value") for t in request_tags or []}.get(STAGE_TAG)
    found = {t.get("Key"): t.get("Value") for t in described_tags or []}.get(STAGE_TAG)
    if found is not None and found != wanted:
        return f"Tags.{STAGE_TAG}"
    return None


def difference(
    resource: Resource,
    request: Mapping[str, Any],
    described: Mapping[str, Any],
    tags: Sequence[Mapping[str, str]] | None = None,
) -> str | None:
    """The first field where the existing resource (`described`, and its `tags` when
    given) is not what `request` would create; None when it is."""
    content = {k: v for k, v in request.items() if k not in NOT_CONTENT}
    found = next(differences(content, described), None)
    if found is not None:
        return found
    for path in resource.must_be_absent:
        parts = path.split(".")
        if not _requested(request, parts):
            found = next(_present(described, parts, ""), None)
            if found is not None:
                return found
    return tag_difference(request.get("Tags"), tags) if tags is not None else None


def refusal(resource: Resource, name: str, field: str) -> str:
    """One line: the resource, the field that differs, and what to do (never a value)."""
    return (
        f"{resource.label} {name} already exists with a different {field}; its name comes "
        "from the spec's content, so it was made by something else: find out what, delete "
        "it, and deploy again"
    )
