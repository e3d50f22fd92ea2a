"""Credentials in the model environment: detection, warnings, and redaction for display."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

from peagle_deploy.catalog.engines import Engine, capability_table, sensitive_logged_args
from peagle_deploy.deployment import Deployment
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.redaction import MASK, SECRET_VALUE_RE
from peagle_deploy.secret_refs import ARN_EXAMPLE, SECRETS_FIELD

# Words of an environment variable's name (split on `_`, `-`, `.` and camelCase) that
# make its value a credential, wherever they stand.
_SECRET_KEY_WORDS = frozenset(
    {
        "TOKEN",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "AUTHORIZATION",
        "BEARER",
        "COOKIE",
        "PAT",
    }
)
_SECRET_KEY_PAIRS = frozenset({("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY")})
# `<X>_KEY` is a credential (OPENAI_KEY, SIGNING_KEY, MASTER_KEY) unless X names a kind
# of key that is not one.
_NOT_SECRET_KEY_KINDS = frozenset(
    {"CACHE", "SORT", "PARTITION", "PRIMARY", "ROUTING", "LOOKUP", "PUBLIC", "HASH", "S3"}
)
# `PWD` alone is the working directory; as a word of a longer name it is a password.
_SECRET_WORDS_IN_LONGER_NAMES = frozenset({"PWD"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# Values that cannot be a credential even under a credential's name
# (`SM_VLLM_RETURN_TOKENS_AS_TOKEN_IDS=true`, `AUTH_TIMEOUT=30`).
_PLAIN_VALUE = re.compile(
    r"(?i)^\s*(true|false|yes|no|on|off|none|null|[-+]?[0-9]+(\.[0-9]+)?)?\s*$"
)
REDACTED = MASK


def _words(key: str) -> list[str]:
    return [w.upper() for w in _WORD.findall(key)]


def secret_by_name(key: str) -> bool:
    """Whether the variable's name says it holds a credential.

    Names are split into words, so `SM_VLLM_API_KEY`, `HF_TOKEN`, `HF_AUTH`, `OPENAI_KEY`,
    `hfToken` or `AWS_SECRET_ACCESS_KEY` match but `SM_VLLM_TOKENIZER`,
    `..._BATCHED_TOKENS`, `PROMPT_CACHE_KEY` or `PWD` do not.
    """
    words = _words(key)
    if _SECRET_KEY_WORDS.intersection(words):
        return True
    if any(pair in _SECRET_KEY_PAIRS for pair in itertools.pairwise(words)):
        return True
    if len(words) > 1 and _SECRET_WORDS_IN_LONGER_NAMES.intersection(words):
        return True
    return len(words) > 1 and words[-1] == "KEY" and words[-2] not in _NOT_SECRET_KEY_KINDS


def looks_like_secret(key: str, value: str) -> bool:
    """Whether an environment entry looks like a credential: a value that is one
    whatever its name (`hf_...`, `AKIA...`, a private key), or a credential's name on a
    value that could be one (not empty, a number or a boolean)."""
    if SECRET_VALUE_RE.search(value):
        return True
    return secret_by_name(key) and not _PLAIN_VALUE.match(value)


def secret_env_keys(env: Mapping[str, str]) -> list[str]:
    """The keys of `env` whose entries look like secrets, sorted."""
    return sorted(k for k, v in env.items() if looks_like_secret(k, str(v)))


def check_secrets(dep: Deployment) -> list[PlanWarning]:
    """Warn, naming the key (never the value), about secrets in the model environment.

    CreateModel's Environment is not secret storage: anyone with DescribeModel reads it.
    In `env` a value would also be written down by the CDK path (the template, cdk.out,
    the assets bucket, and CDK's Provider framework logs the custom resource's properties
    whole: aws-cdk-lib 2.275 framework.js) and by `promote --write-spec`; both refuse it
    (`refuse_plaintext_secrets`). The SDK warns and keeps it in the SecureString manifest.
    With network isolation (the default) the container cannot reach the Hugging Face Hub
    or any API anyway.
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
                f"env.{key} looks like a secret: give it by reference instead "
                f"({SECRETS_FIELD}: {{{key}: <Secrets Manager ARN>}}); in env the SDK keeps "
                "it in the SecureString manifest and SageMaker's model environment "
                "(DescribeModel shows it), and the CDK path and promote --write-spec "
                f"refuse it{hint}",
            )
        )
    return warnings


def check_secret_refs(dep: Deployment) -> list[PlanWarning]:
    """A variable given by reference may not replace one the plan renders itself."""
    for name in sorted(dep.secret_refs):
        if name in dep.environment:
            raise InputError(
                f"{SECRETS_FIELD}.{name}",
                "is a variable the plan sets itself",
                "a name that is not in the container environment",
            )
    return []


def refuse_plaintext_secrets(env: Mapping[str, str], where: str) -> None:
    """Refuse, naming the variable and the `secrets` field, an `env` value that looks like
    a credential, where it would be written down: the CDK path (the template, `cdk.out`,
    the assets bucket and the provider framework's log of the custom resource's
    properties) and `peagle promote --write-spec` (a stage file meant to be committed)."""
    keys = secret_env_keys(env)
    if keys:
        raise InputError(
            f"env.{keys[0]}",
            f"looks like a secret and {where} would write it in clear",
            f"give it by reference: {SECRETS_FIELD}: {{{keys[0]}: {ARN_EXAMPLE}}}",
        )


VLLM_ARG_PREFIX = "SM_VLLM_"
"""`SM_VLLM_<NAME>` becomes `vllm serve --<name>` (docs/container.md, "Environment")."""


def check_logged_args(dep: Deployment) -> list[PlanWarning]:
    """Warn when an argument vLLM treats as secret reaches an engine that logs it in clear.

    `vllm serve` logs its non-default arguments at start (`non-default args: {...}`,
    into the endpoint's CloudWatch log group). vLLM 0.30.0 masks `api_key`, `hf_token`
    and `watermark_config` there; 0.18.0 and 0.27.1 log them as given (engines.json,
    `logged_args_redacted`, read from each wheel's `log_non_default_args`). An
    `SM_VLLM_API_KEY` or `SM_VLLM_HF_TOKEN` is such an argument, whether the value came
    from `env` or from Secrets Manager.
    """
    env = {**dep.environment, **dict.fromkeys(dep.secret_refs, "")}
    engine: Engine = dep.engine
    sensitive = sensitive_logged_args()
    caps = engine.capabilities
    warnings = []
    for key in sorted(env):
        if not key.startswith(VLLM_ARG_PREFIX):
            continue
        arg = key[len(VLLM_ARG_PREFIX) :].lower()
        if arg not in sensitive or (caps is not None and arg in caps.logged_args_redacted):
            continue
        flag = "--" + arg.replace("_", "-")
        masking = ", ".join(
            v for v, c in capability_table().items() if arg in c.logged_args_redacted
        )
        if caps is None:
            problem = (
                f"{engine.describe()} may log {flag} in clear when it starts; set "
                f"vllm_version, or use an image whose vLLM masks it ({masking})"
            )
        else:
            problem = (
                f"{engine.describe()} logs {flag} in clear when it starts (its "
                "'non-default args' line, in the endpoint's CloudWatch log group); use an "
                f"image whose vLLM masks it ({masking}: the peagle-vllm image, or AWS's "
                f"vllm tags of that version)"
            )
        warnings.append(PlanWarning(f"env.{key}", f"env.{key}: {problem}"))
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
