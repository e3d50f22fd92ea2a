"""Reading the values of a plan's `secrets` just before CreateModel (the SDK path).

The deployer's credentials read each referenced secret (secretsmanager:GetSecretValue on
exactly those ARNs); the values go into the CreateModel request and nowhere else: not the
plan, the manifest or any output. Errors name the variable and the ARN, never a value,
and every path that holds the values masks them in what leaves it (`SecretValues`): an
AWS error that quotes the environment, a failure's log lines, a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from peagle_deploy.env_limits import check_resolved_environment
from peagle_deploy.errors import DeployError
from peagle_deploy.plan.render import with_secret_values
from peagle_deploy.redaction import SecretValues
from peagle_deploy.secret_refs import parse_secret_ref, secret_value


def read_secret_values(client: Any, refs: Mapping[str, str]) -> dict[str, str]:
    """NAME -> value for each `NAME: <ARN>[:<json-key>]` reference."""
    from botocore.exceptions import ClientError

    values = {}
    for name, text in sorted(refs.items()):
        ref = parse_secret_ref(name, text)
        try:
            secret = client.get_secret_value(SecretId=ref.arn)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "error")
            raise DeployError(
                f"secrets.{name}: could not read {ref.arn} ({code}); the deploying identity "
                "needs secretsmanager:GetSecretValue on it (and kms:Decrypt if a customer "
                "key encrypts it)"
            ) from None
        string = secret.get("SecretString")
        if not isinstance(string, str):
            raise DeployError(f"secrets.{name}: {ref.arn} has no SecretString (binary secret)")
        values[name] = secret_value(ref, string)
    return values


def create_model_with_secrets(
    create_model: dict[str, Any],
    refs: Mapping[str, str],
    secretsmanager: Callable[[], Any],
    values: SecretValues,
) -> dict[str, Any]:
    """The CreateModel request with the values of `refs` in its Environment, which must
    then fit CreateModel's limits (checked here, naming the variables: SageMaker's
    ValidationException would quote the environment). The values join `values`, whose
    owner masks them in whatever leaves its path. `secretsmanager` makes the client,
    only when there is something to read."""
    if not refs:
        return create_model
    read = read_secret_values(secretsmanager(), refs)
    values.add(read.values())
    request = with_secret_values(create_model, read)
    check_resolved_environment(request["PrimaryContainer"]["Environment"], list(read))
    return request
