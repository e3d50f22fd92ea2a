"""on_event handler of the SageMaker model custom resource (CDK Provider framework).

Runs in AWS Lambda (the newest Python runtime aws-cdk-lib offers, see infra/model.py)
with the botocore that infra/provider_bundle.py copies next to this file: it knows
CreateModel's PrimaryContainer.AdditionalModelDataSources, which the drafter needs, and
`require_additional_model_data_sources` proves it before any call. The bundle also
carries peagle_deploy/redaction.py (standard library only): the masking below.

The Provider framework's contract (aws-cdk-lib 2.275, custom-resources/lib/provider-
framework/runtime/framework.js): `on_event(event, context)` gets CloudFormation's event
(RequestType Create | Update | Delete, ResourceProperties, PhysicalResourceId on Update
and Delete) and returns {"PhysicalResourceId", "Data"}; a raised exception fails the
resource with its message; a Delete must keep the physical id.

- Create: CreateModel with exactly ResourceProperties["CreateModel"] (the renderer's
  request, JSON-encoded so CloudFormation keeps its booleans, with the stack's
  execution role in it). While IAM propagates a role created seconds earlier,
  SageMaker answers ValidationException with one of RETRYABLE_MESSAGES (or, for the
  provider's own fresh policy, RETRYABLE_ACCESS_DENIED); those are retried on
  RETRY_DELAYS_S for at most RETRY_BUDGET_S, then the last message fails the resource.
  A model of that name that already exists with the same request is adopted (a retried
  Create), one that differs (`peagle_deploy.adoption`: every field the request sets, the
  environment by value, what SageMaker never fills, the `peagle:stage` tag) is an error
  naming the field. Secret values read for the request must fit CreateModel's
  environment limits (`peagle_deploy.env_limits`), checked before CreateModel. The
  physical id is the model name.
- Update: only Tags can change in place (every other field is in the name's digest);
  they are added with AddTags. Any other change is an error naming the field.
- Delete: DeleteModel; a model that is already gone is success, so a rollback after a
  failed Create and a second Delete do not stick.

This handler never logs the request, but CDK's Provider framework in front of it does:
framework.js (aws-cdk-lib 2.275) logs the whole CloudFormation event, ResourceProperties
and OldResourceProperties included, into the provider's log group on every Create,
Update and Delete, outside this project's control. So the properties must hold no
secret at all: the CDK path refuses a secret-looking environment value. Every message
the handler returns or logs is masked too (`masked`, the project's one masking,
peagle_deploy/redaction.py, which the bundle carries next to this file): botocore's
parameter validation
and SageMaker's ValidationException both quote the offending value (`Invalid type for
parameter PrimaryContainer.Environment.HF_TOKEN, value: [...]`, `Value '...' at '...'
failed to satisfy constraint`), and that text would become the stack event and the log
line.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Protocol

import botocore
import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError

# Shared with the SDK, bundled with this file (standard library only): the comparison of
# an existing model with the request, CreateModel's environment limits, the one masking
# of secret values.
from peagle_deploy.adoption import MODEL, difference, refusal
from peagle_deploy.env_limits import check_resolved_environment
from peagle_deploy.errors import InputError
from peagle_deploy.redaction import environment_values, masked

PROPERTY: Final = "CreateModel"
SECRETS_PROPERTY: Final = "Secrets"
"""JSON {ENV_NAME: "<secret ARN>[:<json-key>]"}: environment variables given by reference
(peagle_deploy/secret_refs.py). Read with GetSecretValue just before CreateModel, so the
properties (which CDK's Provider framework logs) never hold a value."""
# SageMaker's answers while a just-created execution role (or its inline policy) is not
# visible yet everywhere; each was reported for a role created in the same deployment:
# - "Could not assume role arn:... Please ensure that the role exists and allows
#   principal 'sagemaker.amazonaws.com' to assume the role."
#   (awslabs/predictive-maintenance-using-machine-learning#3)
# - "Could not access model data at s3://... Please ensure that the role "arn:..."
#   exists and that its trust relationship policy allows the action "sts:AssumeRole"
#   ..." (aws/aws-cdk#10064, a CloudFormation CreateModel)
# - "The role '...' does not have BatchGetImage permission for the image: '...'"
#   (aws-samples/generative-ai-sagemaker-cdk-demo#2, inline policy not yet attached)
RETRYABLE_MESSAGES: Final = (
    "Could not assume role",
    "Could not access model data",
    "does not have BatchGetImage permission",
)
# The provider's own policy is attached just before the resource is created and
# propagates the same way: "User: arn:aws:sts::...:assumed-role/... is not authorized to
# perform: sagemaker:... because no identity-based policy allows ..."
# (AccessDeniedException, philschmid/cdk-samples#2).
RETRYABLE_ACCESS_DENIED: Final = ("AccessDeniedException", "is not authorized to perform")
# The time a role needs is usually seconds, rarely a minute (DataDog/stratus-red-team#358
# measured up to a minute); terraform-provider-aws retries CreateModel for 2 minutes
# (internal/service/sagemaker/model.go). Five minutes leaves room for a slow region.
RETRY_BUDGET_S: Final = 300.0
FIRST_DELAY_S: Final = 2.0
MAX_DELAY_S: Final = 60.0
# Time kept for the last call and the answer when deciding whether to wait once more.
CALL_RESERVE_S: Final = 90.0
# The Lambda timeout infra/model.py sets: the whole budget, plus the reserve, plus the
# botocore calls themselves (CONNECT_TIMEOUT_S + READ_TIMEOUT_S each), well under the
# Provider framework's own 15-minute function timeout.
LAMBDA_TIMEOUT_S: Final = 480
CONNECT_TIMEOUT_S: Final = 10
READ_TIMEOUT_S: Final = 60
# SageMaker's messages for a name that is taken (astronomer/astronomer-providers#1055)
# and for one that does not exist (terraform-provider-aws, model.go's DeleteModel).
ALREADY_EXISTS: Final = "Cannot create already existing model"
NOT_FOUND: Final = "Could not find model"
# SageMaker's ModelName pattern (botocore sagemaker/2017-07-24, EntityName).
_MODEL_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")

SLEEP: Callable[[float], None] = time.sleep  # tests record the delays instead of waiting


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


def retry_delays() -> Iterator[float]:
    """Waits before the 2nd, 3rd, ... CreateModel: doubling from FIRST_DELAY_S, capped at
    MAX_DELAY_S, until the next one would take the total past RETRY_BUDGET_S."""
    delay, total = FIRST_DELAY_S, 0.0
    while total + delay <= RETRY_BUDGET_S:
        yield delay
        total += delay
        delay = min(delay * 2, MAX_DELAY_S)


RETRY_DELAYS_S: Final = tuple(retry_delays())


def require_additional_model_data_sources(session: botocore.session.Session) -> None:
    """Fail with one line when this botocore cannot send the drafter."""
    shape = session.get_service_model("sagemaker").shape_for("ContainerDefinition")
    if "AdditionalModelDataSources" not in getattr(shape, "members", {}):
        raise RuntimeError(
            f"botocore {botocore.__version__} at {botocore.__file__} does not know "
            "CreateModel PrimaryContainer.AdditionalModelDataSources; the model provider "
            "must be deployed with the botocore bundled by infra/provider_bundle.py"
        )


_SESSION: list[botocore.session.Session] = []  # one per execution environment


def sagemaker_client() -> Any:
    """A SageMaker client; the session (and its parsed service model) is created once
    per Lambda execution environment, the client once per event."""
    if not _SESSION:
        session = botocore.session.get_session()
        require_additional_model_data_sources(session)
        _SESSION.append(session)
    session = _SESSION[0]
    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"mode": "standard", "max_attempts": 3},
    )
    return session.create_client("sagemaker", config=config)


def secretsmanager_client() -> Any:
    """A Secrets Manager client (its service model is bundled next to SageMaker's)."""
    if not _SESSION:
        sagemaker_client()
    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"mode": "standard", "max_attempts": 3},
    )
    return _SESSION[0].create_client("secretsmanager", config=config)


def _secret_refs(properties: Mapping[str, Any]) -> dict[str, str]:
    raw = properties.get(SECRETS_PROPERTY)
    if raw is None:
        return {}
    try:
        refs = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        refs = None
    if not isinstance(refs, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in refs.items()
    ):
        raise ValueError(f"ResourceProperties.{SECRETS_PROPERTY} must be a JSON object of ARNs")
    return dict(refs)


def _secret_value(name: str, ref: str, secret_string: str) -> str:
    """The value `ref` selects: the whole SecretString, or one key of a JSON secret."""
    parts = ref.split(":")
    if len(parts) <= 7:
        return secret_string
    key = ":".join(parts[7:])
    try:
        document = json.loads(secret_string)
    except ValueError:
        document = None
    except RecursionError:  # nested thousands deep: one line, not a traceback
        raise RuntimeError(f"secret of {name} is JSON nested too deeply to read") from None
    if not isinstance(document, dict) or not isinstance(document.get(key), str):
        raise RuntimeError(f"secret of {name} is not a JSON object with a string {key!r}")
    return str(document[key])


def resolve_secrets(client: Any, refs: Mapping[str, str]) -> dict[str, str]:
    """GetSecretValue for each reference; errors name the variable and the ARN only."""
    values = {}
    for name, ref in sorted(refs.items()):
        arn = ":".join(ref.split(":")[:7])
        try:
            secret = client.get_secret_value(SecretId=arn)
        except ClientError as e:
            code, _ = _error(e)
            raise RuntimeError(f"GetSecretValue for {name} ({arn}): {code}") from None
        if not isinstance(secret.get("SecretString"), str):
            raise RuntimeError(f"secret of {name} ({arn}) has no SecretString")
        values[name] = _secret_value(name, ref, secret["SecretString"])
    return values


def with_secrets(request: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """The CreateModel request with the secrets' values in the container's Environment."""
    if not values:
        return dict(request)
    container = dict(request["PrimaryContainer"])
    container["Environment"] = {**(container.get("Environment") or {}), **values}
    return {**request, "PrimaryContainer": container}


def _log(**fields: Any) -> None:
    print(json.dumps({"peagle_model_provider": fields.pop("event"), **fields}), flush=True)


def _request(properties: Mapping[str, Any]) -> dict[str, Any]:
    raw = properties.get(PROPERTY)
    try:
        request = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        request = None
    if not isinstance(request, dict) or not isinstance(request.get("ModelName"), str):
        raise ValueError(f"ResourceProperties.{PROPERTY} must be a JSON CreateModel request")
    return request


def _error(e: ClientError) -> tuple[str, str]:
    error = e.response.get("Error", {})
    return str(error.get("Code", "")), str(error.get("Message", ""))


def _retryable(e: ClientError) -> bool:
    code, message = _error(e)
    if code == "ValidationException":
        return any(m in message for m in RETRYABLE_MESSAGES)
    denied_code, denied_text = RETRYABLE_ACCESS_DENIED
    return code == denied_code and denied_text in message


def _describe(client: Any, name: str) -> dict[str, Any] | None:
    try:
        described: dict[str, Any] = client.describe_model(ModelName=name)
        return described
    except ClientError as e:
        if NOT_FOUND in _error(e)[1]:
            return None
        raise


def _adopt(client: Any, request: Mapping[str, Any], described: Mapping[str, Any]) -> str:
    """The ARN of an existing model with the same request (content and stage tag,
    `peagle_deploy.adoption`, the SDK's comparison); raises when it differs."""
    name = request["ModelName"]
    tags = client.list_tags(ResourceArn=described["ModelArn"]).get("Tags", [])
    field = difference(MODEL, request, described, tags)
    if field is not None:
        raise RuntimeError(refusal(MODEL, name, field))
    if request.get("Tags"):
        client.add_tags(ResourceArn=described["ModelArn"], Tags=request["Tags"])
    _log(event="adopted", model=name)
    return str(described["ModelArn"])


def _create_once(client: Any, request: Mapping[str, Any], attempt: int) -> str:
    name = request["ModelName"]
    existing = _describe(client, name)
    if existing is not None:
        return _adopt(client, request, existing)
    try:
        arn = str(client.create_model(**request)["ModelArn"])
    except ClientError as e:
        described = _describe(client, name) if ALREADY_EXISTS in _error(e)[1] else None
        if described is None:
            raise
        return _adopt(client, request, described)  # created by a concurrent attempt
    _log(event="created", model=name, attempts=attempt)
    return arn


def create(client: Any, request: Mapping[str, Any], context: LambdaContext | None) -> str:
    """CreateModel (or adoption of an identical model) with retries on IAM propagation;
    returns the model ARN."""
    name = request["ModelName"]
    delays = iter(RETRY_DELAYS_S)
    attempt = 0
    while True:
        attempt += 1
        try:
            return _create_once(client, request, attempt)
        except ClientError as e:
            code, message = _error(e)
            if not _retryable(e):
                raise RuntimeError(f"CreateModel {name}: {code}: {message}") from None
            delay = next(delays, None)
            left_s = context.get_remaining_time_in_millis() / 1000 if context else float("inf")
            if delay is None or left_s - delay < CALL_RESERVE_S:
                raise RuntimeError(
                    f"CreateModel {name} still failing after {attempt} attempts over the "
                    f"{RETRY_BUDGET_S:g} s IAM-propagation budget: {code}: {message}"
                ) from None
            error = masked(message, environment_values([request]))[:200]
            _log(event="retry", model=name, attempt=attempt, wait_s=delay, error=error)
            SLEEP(delay)


def update(client: Any, old: Mapping[str, Any], new: Mapping[str, Any], name: str) -> str:
    """Only Tags may change in place; returns the model ARN."""
    for field in sorted(set(old) | set(new)):
        if field != "Tags" and old.get(field) != new.get(field):
            raise RuntimeError(
                f"model {name}: {field} changed without a new model name; only Tags can "
                "change in place"
            )
    described = _describe(client, name)
    if described is None:
        raise RuntimeError(f"model {name} is gone; it cannot be updated")
    if new.get("Tags"):
        client.add_tags(ResourceArn=described["ModelArn"], Tags=new["Tags"])
    _log(event="retagged", model=name)
    return str(described["ModelArn"])


def delete(client: Any, name: str) -> None:
    if not _MODEL_NAME.match(name):
        _log(event="nothing-to-delete", physical_id=name[:100])
        return  # never created (e.g. the framework's marker after a failed Create)
    try:
        client.delete_model(ModelName=name)
        _log(event="deleted", model=name)
    except ClientError as e:
        code, message = _error(e)
        if code == "ValidationException" and NOT_FOUND in message:
            _log(event="already-gone", model=name)
            return
        raise RuntimeError(f"DeleteModel {name}: {code}: {message}") from None


def _event_requests(event: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("ResourceProperties", "OldResourceProperties"):
        properties = event.get(key)
        if isinstance(properties, Mapping):
            try:
                yield _request(properties)
            except ValueError:
                continue


def on_event(event: Mapping[str, Any], context: LambdaContext | None) -> dict[str, Any]:
    """The Provider framework's entry point; any failure is re-raised with its message
    masked (the original is dropped: its text and its traceback would be logged)."""
    secrets: dict[str, str] = {}
    try:
        return _on_event(event, context, secrets)
    except Exception as e:
        values = environment_values(
            [*_event_requests(event), {"PrimaryContainer": {"Environment": secrets}}]
        )
        message = masked(str(e), values)
        if type(e) in (RuntimeError, ValueError):
            raise type(e)(message) from None
        raise RuntimeError(f"{type(e).__name__}: {message}") from None


def _on_event(
    event: Mapping[str, Any], context: LambdaContext | None, secrets: dict[str, str]
) -> dict[str, Any]:
    """`secrets` receives the values read, so that on_event can mask them."""
    kind = event["RequestType"]
    client = sagemaker_client()
    if kind == "Delete":
        name = str(event["PhysicalResourceId"])
        delete(client, name)
        return {"PhysicalResourceId": name}
    request = _request(event["ResourceProperties"])
    refs = _secret_refs(event["ResourceProperties"])
    name = request["ModelName"]
    if kind == "Create":
        if refs:
            secrets.update(resolve_secrets(secretsmanager_client(), refs))
            request = with_secrets(request, secrets)
            try:  # SageMaker's ValidationException would quote the environment
                check_resolved_environment(request["PrimaryContainer"]["Environment"], refs)
            except InputError as e:
                raise RuntimeError(str(e)) from None
        arn = create(client, request, context)
    elif kind == "Update":
        if event.get("PhysicalResourceId") != name:
            raise RuntimeError(
                f"model name changed from {event.get('PhysicalResourceId')} to {name} "
                "in place; a new name needs a new resource"
            )
        old = event.get("OldResourceProperties", {})
        if _secret_refs(old) != refs:
            raise RuntimeError(
                f"model {name}: {SECRETS_PROPERTY} changed without a new model name; only "
                "Tags can change in place"
            )
        arn = update(client, _request(old), request, name)
    else:
        raise ValueError(f"unknown RequestType {kind!r}")
    return {"PhysicalResourceId": name, "Data": {"ModelName": name, "ModelArn": arn}}
