"""CreateModel's limits on a container's Environment (botocore `sagemaker/2017-07-24`:
EnvironmentMap, at most 100 entries; EnvironmentKey and EnvironmentValue, at most 1024
characters each; 32 KB in all, the API reference's CreateModel).

Checked twice: by the planner on what it knows (the names of secrets, not their values:
`validation.aws_shapes.check_env`), and, once the values are read from Secrets Manager,
just before CreateModel by every path that reads them (the SDK's deploy, an experiment's
candidate, and the CDK model provider's handler): SageMaker's ValidationException would
quote the environment, values included. Errors name the variables, never a value.

Standard library only (with `errors` and `redaction`): infra/provider_bundle.py copies
this file into the model provider's Lambda asset.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from peagle_deploy.errors import InputError

MAX_ENV_ENTRIES = 100
MAX_ENV_BYTES = 1024
MAX_ENV_TOTAL_BYTES = 32 * 1024


def check_env_size(env: Mapping[str, str], field: str, counted: str) -> None:
    """CreateModel's limits on the whole Environment: entries and total bytes."""
    if len(env) > MAX_ENV_ENTRIES:
        raise InputError(field, f"{len(env)} variables in total {counted}", f"<= {MAX_ENV_ENTRIES}")
    total = sum(len(k.encode()) + len(v.encode()) for k, v in env.items())
    if total > MAX_ENV_TOTAL_BYTES:
        raise InputError(
            field,
            f"{total} bytes in total {counted}",
            f"<= {MAX_ENV_TOTAL_BYTES} bytes (32 KB)",
        )


def check_resolved_environment(
    environment: Mapping[str, str], secret_names: Collection[str]
) -> None:
    """CreateModel's Environment limits once the values of `secret_names` are in it
    (after GetSecretValue, before CreateModel). Errors name the variables, never a value."""
    long = sorted(n for n in secret_names if len(environment[n].encode()) > MAX_ENV_BYTES)
    if long:
        raise InputError(
            f"secrets.{long[0]}" if len(long) == 1 else "secrets",
            f"the secret value of {', '.join(long)} is longer than {MAX_ENV_BYTES} bytes, "
            "SageMaker's limit for one environment value",
            f"a secret value of at most {MAX_ENV_BYTES} bytes",
        )
    names = ", ".join(sorted(secret_names))
    check_env_size(environment, "secrets", f"with the values of {names}")
