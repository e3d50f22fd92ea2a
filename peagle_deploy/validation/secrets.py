"""Credentials in the model environment: detection, warnings, and redaction for display."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from peagle_deploy.deployment import Deployment
from peagle_deploy.findings import PlanWarning
from peagle_deploy.redaction import MASK, SECRET_VALUE_RE

_SECRET_KEY_WORDS = frozenset({"TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIAL"})
_SECRET_KEY_WORDS |= {"CREDENTIALS", "PASSPHRASE"}
_SECRET_KEY_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY")})
REDACTED = MASK


def looks_like_secret(key: str, value: str) -> bool:
    """Whether an environment entry looks like a credential (by its name or its value).

    Names are split on `_` so that `SM_VLLM_API_KEY`, `HF_TOKEN` or
    `AWS_SECRET_ACCESS_KEY` match but `SM_VLLM_TOKENIZER` or `..._BATCHED_TOKENS` do not.
    """
    words = key.upper().split("_")
    if _SECRET_KEY_WORDS.intersection(words):
        return True
    if any(pair in _SECRET_KEY_PAIRS for pair in itertools.pairwise(words)):
        return True
    return bool(SECRET_VALUE_RE.search(value))


def secret_env_keys(env: Mapping[str, str]) -> list[str]:
    """The keys of `env` whose entries look like secrets, sorted."""
    return sorted(k for k, v in env.items() if looks_like_secret(k, str(v)))


def check_secrets(dep: Deployment) -> list[PlanWarning]:
    """Warn, naming the key (never the value), about secrets in the model environment.

    CreateModel's Environment is not secret storage: anyone with DescribeModel reads it,
    and the CDK path puts it in the CloudFormation template (the model custom resource's
    properties; its provider never logs them). With network isolation (the default) the
    container cannot reach the Hugging Face Hub or any API anyway.
    """
    spec = dep.spec
    warnings = []
    for key in secret_env_keys(spec.env):
        hint = (
            "; with network_isolation the container has no network, so a hub token is useless"
            if spec.network_isolation
            else ""
        )
        warnings.append(
            PlanWarning(
                f"env.{key}",
                f"env.{key} looks like a secret: SageMaker model environments are readable "
                "with sagemaker:DescribeModel and the CDK path writes them in clear into the "
                "CloudFormation template; keep credentials out "
                f"of env (stage the weights in S3 instead){hint}",
            )
        )
    return warnings


def redact_environment(request: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a CreateModel request with secret-looking environment values replaced.

    For showing a plan (`peagle plan`, logs); the request sent to SageMaker is unchanged.
    """
    redacted = dict(request)
    container = redacted.get("PrimaryContainer")
    if isinstance(container, Mapping) and isinstance(container.get("Environment"), Mapping):
        env = dict(container["Environment"])
        for key in secret_env_keys(env):
            env[key] = REDACTED
        redacted["PrimaryContainer"] = {**container, "Environment": env}
    return redacted
