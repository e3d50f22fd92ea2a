"""boto3 sessions and clients the way every peagle-deploy code path wants them.

- Retries: botocore's retry modes (`adaptive` by default: exponential backoff with
  jitter plus client-side rate limiting when AWS throttles), with a higher attempt count
  than botocore's default because a deployment makes few calls and must not die on a
  transient ThrottlingException. Override with PEAGLE_AWS_RETRY_MODE
  (legacy|standard|adaptive) and PEAGLE_AWS_MAX_ATTEMPTS.
- Endpoints: no endpoint_url is ever baked in. botocore itself reads AWS_ENDPOINT_URL
  and the per-service AWS_ENDPOINT_URL_<SERVICE> variables (e.g.
  AWS_ENDPOINT_URL_SAGEMAKER, AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME), so the same code runs
  against AWS, a moto server or LocalStack.

boto3 is imported inside the functions: the CLI must start without it.
"""

from __future__ import annotations

import os
from typing import Any

from peagle_serve.numeric_env import NumericEnvError, NumericVariable

from peagle_deploy import __version__
from peagle_deploy.errors import InputError
from peagle_deploy.spec.empty import check_not_empty

DEFAULT_REGION = "us-east-1"
DEFAULT_RETRY_MODE = "adaptive"
DEFAULT_MAX_ATTEMPTS = 8  # total attempts (first try included)
_RETRY_MODES = ("legacy", "standard", "adaptive")


MAX_ATTEMPTS_LIMIT = 50
"""Most attempts per call PEAGLE_AWS_MAX_ATTEMPTS may ask for: botocore backs off up to
20 s between attempts (`_MAX_BACKOFF` of botocore/retries/standard.py), so 50 attempts
already wait over a quarter of an hour on one call."""
_MAX_ATTEMPTS = NumericVariable("PEAGLE_AWS_MAX_ATTEMPTS", 1, MAX_ATTEMPTS_LIMIT, False, "attempts")


def retry_settings() -> dict[str, Any]:
    """The `retries` dict for botocore's Config (from the environment, else defaults).

    A bad value is bad input (InputError naming the variable, exit 2), refused before
    any call.
    """
    mode = os.environ.get("PEAGLE_AWS_RETRY_MODE", DEFAULT_RETRY_MODE)
    if mode not in _RETRY_MODES:
        raise InputError(
            "PEAGLE_AWS_RETRY_MODE", f"{mode!r} is not a botocore retry mode", _RETRY_MODES
        )
    raw = os.environ.get(_MAX_ATTEMPTS.name)
    if raw is None:
        return {"mode": mode, "total_max_attempts": DEFAULT_MAX_ATTEMPTS}
    check_not_empty(_MAX_ATTEMPTS.name, raw)
    try:  # the container's rule for numeric variables: ASCII digits, bounded
        attempts = _MAX_ATTEMPTS.parse(raw)
    except NumericEnvError as e:
        raise InputError(e.variable, e.problem, e.allowed) from None
    return {"mode": mode, "total_max_attempts": int(attempts or DEFAULT_MAX_ATTEMPTS)}


def client_config(**overrides: Any) -> Any:
    """botocore Config with peagle's retry policy and user agent; `overrides` win."""
    from botocore.config import Config

    options: dict[str, Any] = {
        "retries": retry_settings(),
        "user_agent_extra": f"peagle-deploy/{__version__}",
    }
    options.update(overrides)
    return Config(**options)


class _Shared:
    loader: Any = None


def _shared_loader() -> Any:
    """One botocore data loader per process: service models are parsed once.

    Credentials, region and endpoint settings stay per session; only the (immutable)
    JSON models are shared, which saves ~0.3 s per new session and service.
    """
    if _Shared.loader is None:
        from botocore.loaders import create_loader

        _Shared.loader = create_loader()
    return _Shared.loader


def make_session(region: str | None = None, boto_session: Any = None) -> Any:
    """The caller's session if given, else a default boto3 Session in `region`."""
    if boto_session is not None:
        return boto_session
    if region is None:
        check_environment_region()
    import boto3
    import botocore.session

    core = botocore.session.get_session()
    core.register_component("data_loader", _shared_loader())
    return boto3.Session(botocore_session=core, region_name=region)


def check_environment_region() -> None:
    """AWS_REGION / AWS_DEFAULT_REGION as the planner reads them: empty or malformed is
    an error naming the variable, before any call (botocore would fall back or fail).
    Every path that lets boto3 take the region from the environment runs this first:
    sessions made here, and the SageMaker benchmark target."""
    from peagle_deploy.catalog.resolve import environment_region
    from peagle_deploy.validation.aws_shapes import check_region

    found = environment_region()
    if found is not None:
        check_region(found[1], found[0])


def make_client(
    service: str, *, region: str | None = None, boto_session: Any = None, **config: Any
) -> Any:
    """A client with peagle's retry policy; endpoint URLs come from the environment.

    Region: `region`, else the session's (AWS_REGION / AWS_DEFAULT_REGION / profile),
    else us-east-1 like the planner (`peagle_deploy.catalog.resolve.resolve_region`).
    """
    session = make_session(region, boto_session)
    region = region or session.region_name or DEFAULT_REGION
    return session.client(service, region_name=region, config=client_config(**config))


def is_not_found(exc: BaseException) -> bool:
    """True for SageMaker's "Could not find ..." ValidationExceptions and similar 404s."""
    from botocore.exceptions import ClientError

    if not isinstance(exc, ClientError):
        return False
    error = exc.response.get("Error", {})
    code = str(error.get("Code", ""))
    message = str(error.get("Message", "")).lower()
    if code in ("ResourceNotFound", "ResourceNotFoundException", "ParameterNotFound"):
        return True
    return code in ("ValidationException", "ValidationError") and (
        "could not find" in message or "not found" in message or "does not exist" in message
    )


def describe_endpoint_or_none(sagemaker: Any, endpoint_name: str) -> dict[str, Any] | None:
    """DescribeEndpoint without ResponseMetadata, or None when there is no such endpoint."""
    try:
        desc = dict(sagemaker.describe_endpoint(EndpointName=endpoint_name))
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    desc.pop("ResponseMetadata", None)
    return desc


def endpoint_config_models(sagemaker: Any, config_name: str) -> list[str] | None:
    """The model names an endpoint config's variants serve; None when it does not exist."""
    try:
        variants = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    except Exception as exc:
        if is_not_found(exc):
            return None
        raise
    return [v["ModelName"] for v in variants["ProductionVariants"] if v.get("ModelName")]


def serving_instance_type(
    sagemaker: Any, config_name: str, variant: str = "AllTraffic"
) -> str | None:
    """The instance type an endpoint config gives `variant` (a peagle endpoint serves
    from `AllTraffic`); None when the config or the variant cannot be read (deleted, or
    not readable)."""
    from botocore.exceptions import ClientError

    try:
        config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    except ClientError:
        return None
    for summary in config.get("ProductionVariants") or []:
        if summary.get("VariantName") == variant:
            return str(summary.get("InstanceType") or "") or None
    return None


def delete_quietly(call: Any, **kwargs: Any) -> bool:
    """Run a Delete* call; False when the resource was already gone."""
    try:
        call(**kwargs)
    except Exception as exc:
        if is_not_found(exc):
            return False
        raise
    return True


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError ('' for anything else)."""
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def error_message(exc: BaseException) -> str:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Message", "")) or str(exc)
    return str(exc)
