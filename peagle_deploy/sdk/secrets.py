"""Reading the values of a plan's `secrets` just before CreateModel (the SDK path).

The deployer's credentials read each referenced secret (secretsmanager:GetSecretValue on
exactly those ARNs); the values go into the CreateModel request and nowhere else: not the
plan, the manifest or any output. Errors name the variable and the ARN, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from peagle_deploy.errors import DeployError
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
