"""What already exists under a planned name, compared by content (`peagle_deploy.adoption`).

- `create_or_adopt`: CreateModel / CreateEndpointConfig; on "already exists", the existing
  resource is described (with its tags) and used only when it is what the request would
  create, else `ExistingDiffersError` names the resource and the field. The SDK's deploy and an
  experiment's start call it; the CDK model provider's handler applies the same
  comparison.
- `serving_difference`: what an endpoint runs (its endpoint config, that config's model)
  against a plan, names and content; a promotion checks its source with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from peagle_deploy.adoption import (
    ANY_VALUE,
    ENDPOINT_CONFIG,
    MODEL,
    Resource,
    difference,
    refusal,
)
from peagle_deploy.errors import DeployError

if TYPE_CHECKING:
    from peagle_deploy.plan import Plan

Kind = Literal["model", "endpoint-config"]

_RESOURCES: dict[str, Resource] = {"model": MODEL, "endpoint-config": ENDPOINT_CONFIG}


class ExistingDiffersError(DeployError):
    """A resource of a planned name exists with other content: it is not used."""


def _describe(sm: Any, kind: Kind, name: str) -> dict[str, Any]:
    if kind == "model":
        described: dict[str, Any] = sm.describe_model(ModelName=name)
    else:
        described = sm.describe_endpoint_config(EndpointConfigName=name)
    return described


def _tags(sm: Any, described: Mapping[str, Any]) -> list[dict[str, str]]:
    arn = described.get("ModelArn") or described.get("EndpointConfigArn")
    if not arn:
        return []
    return list(sm.list_tags(ResourceArn=arn).get("Tags", []))


def check_existing(sm: Any, kind: Kind, request: Mapping[str, Any]) -> None:
    """Raise ExistingDiffersError unless the existing resource named by `request` is what the
    request would create (its content and its stage tag)."""
    resource = _RESOURCES[kind]
    name = resource.name(request)
    described = _describe(sm, kind, name)
    field = difference(resource, request, described, _tags(sm, described))
    if field is not None:
        raise ExistingDiffersError(refusal(resource, name, field))


def create_or_adopt(sm: Any, kind: Kind, request: Mapping[str, Any]) -> bool:
    """Create the model or endpoint config of `request`; False when one of that name
    already exists and is the same (adopted), ExistingDiffersError when it is not."""
    from botocore.exceptions import ClientError

    call = sm.create_model if kind == "model" else sm.create_endpoint_config
    try:
        call(**request)
    except ClientError as exc:
        if "already exist" not in str(exc).lower():
            raise
        check_existing(sm, kind, request)
        return False
    return True


def expected_model(plan: Plan) -> dict[str, Any]:
    """The plan's CreateModel as a running model shows it: its secrets present in the
    environment, with values that cannot be compared (only their references are planned;
    a changed reference is a new model name)."""
    request = dict(plan.create_model)
    if plan.secret_refs:
        container = dict(request["PrimaryContainer"])
        secrets = dict.fromkeys(plan.secret_refs, ANY_VALUE)
        container["Environment"] = {**container.get("Environment", {}), **secrets}
        request["PrimaryContainer"] = container
    return request


def serving_difference(
    sm: Any, plan: Plan, endpoint: Mapping[str, Any], *, read_models: bool = True
) -> str | None:
    """How the endpoint (a DescribeEndpoint response) does not run `plan`: another endpoint
    config name, or a config or model whose content differs; None when it runs it.

    `read_models=False` (a promotion reading another stage): the models are not described,
    since DescribeModel shows a model's environment with its resolved secrets; the model's
    content is then proved by its content-derived name in the config, which only the
    stage's own roles may create (docs/ci.md)."""
    running = str(endpoint.get("EndpointConfigName"))
    config = _describe(sm, "endpoint-config", running)
    if running != plan.endpoint_config_name:
        named = f"it runs endpoint config {running}, the spec plans {plan.endpoint_config_name}"
        where = _where_it_differs(sm, plan, config, read_models)
        return f"{named}: {where}" if where else named
    field = difference(ENDPOINT_CONFIG, plan.create_endpoint_config, config)
    if field is not None:
        return f"its endpoint config {running} differs from the spec's in {field}"
    if not read_models:
        return None
    model = _describe(sm, "model", plan.model_name)
    field = difference(MODEL, expected_model(plan), model)
    if field is not None:
        return f"its model {plan.model_name} differs from the spec's in {field}"
    return None


def _where_it_differs(
    sm: Any, plan: Plan, config: Mapping[str, Any], read_models: bool
) -> str | None:
    """For a config of another name: which field of its model, else of itself, is not
    the plan's (the model first: a changed environment renames both)."""
    variants = config.get("ProductionVariants") or []
    served = variants[0].get("ModelName") if variants else None
    if served and not read_models and served != plan.model_name:
        return f"it serves model {served}, the spec plans {plan.model_name}"
    if served and read_models:
        field = difference(MODEL, expected_model(plan), _describe(sm, "model", str(served)))
        if field is not None:
            return f"its model differs in {field}"
    request = dict(plan.create_endpoint_config)
    if served and len(variants) == 1:  # the model's name aside
        request["ProductionVariants"] = [{**request["ProductionVariants"][0], "ModelName": served}]
    field = difference(ENDPOINT_CONFIG, request, config)
    return None if field is None else f"the config differs in {field}"
