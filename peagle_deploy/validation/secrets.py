"""Credentials in the model environment: detection, warnings, and redaction for display."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from peagle_serve.contract import (
    HF_MODEL_ID_ENV,
    MODEL_ENV,
    PORT_ENV,
    SM_VLLM_PREFIX,
    SPECULATIVE_CONFIG_ENV,
    V2_RUNNER_ENV,
)

from peagle_deploy.catalog.engines import sensitive_logged_args
from peagle_deploy.deployment import MAX_MODEL_LEN_ENV, TENSOR_PARALLEL_ENV, Deployment
from peagle_deploy.errors import InputError
from peagle_deploy.findings import PlanWarning
from peagle_deploy.redaction import MASK, SECRET_VALUE_RE
from peagle_deploy.secret_refs import ARN_EXAMPLE, SECRETS_FIELD
from peagle_deploy.validation.aws_shapes import partition_of

# When a variable's name ends in one of these nouns (its head: DB_PASSWORD, HF_TOKEN,
# SIGNING_KEY, DB_PASS, a bare KEY), its value is a credential; so it is when only words
# that say how the value is written or which copy it is follow the noun (HF_TOKEN_VALUE,
# API_KEY_B64, PRIVATE_KEY_PEM, API_KEY_PROD: `_VALUE_FORMS`). Before any other word the
# noun only qualifies it (TOKEN_PATH, AUTH_TIMEOUT, PASS_THROUGH_HEADERS, TOKEN_THRESHOLD,
# ACCESS_KEY_ID, KEY_VALUE_CACHE_DTYPE) and the name is no credential's. Plurals that
# count things (MAX_NUM_BATCHED_TOKENS) are not here.
_CREDENTIAL_NOUNS = frozenset(
    {
        "TOKEN",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "PASS",
        "PW",
        "PWD",
        "APIKEY",
        "KEY",
        "KEYS",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "AUTHORIZATION",
        "BEARER",
        "COOKIE",
        "PAT",
    }
)
# A word before the head noun that names a kind of it that is no credential: a lookup
# or public key (PROMPT_CACHE_KEY, S3_KEY), a tokenizer's special token (PAD_TOKEN).
_NOT_CREDENTIAL_KINDS = {
    "KEY": frozenset(
        {
            "CACHE",
            "SORT",
            "PARTITION",
            "PRIMARY",
            "FOREIGN",
            "ROUTING",
            "LOOKUP",
            "PUBLIC",
            "HASH",
            "S3",
            "OBJECT",
            "IDEMPOTENCY",
            "SHARD",
        }
    ),
    "TOKEN": frozenset(
        {"PAD", "BOS", "EOS", "UNK", "SEP", "CLS", "MASK", "START", "END", "STOP", "SPECIAL"}
    ),
}
# A head noun counted or bounded is a number of them, not one (MAX_TOKEN, NUM_KEYS).
_QUANTITY_WORDS = frozenset({"MAX", "MIN", "NUM", "TOTAL", "COUNT"})
# After a credential noun, words that still name the credential: the value itself, how
# it is written (API_KEY_B64, PRIVATE_KEY_PEM, SA_KEY_JSON), which copy it is
# (API_KEY_PROD, TOKEN_OLD), Rails' SECRET_KEY_BASE. Any other word makes the noun a
# qualifier (TOKEN_PATH, KEY_ID, TOKEN_THRESHOLD): a name not listed here is no false
# alarm, since a false alarm refuses a valid deployment on the CDK path.
_VALUE_FORMS = frozenset(
    {
        "VALUE",
        "VAL",
        "STR",
        "STRING",
        "TEXT",
        "RAW",
        "PLAIN",
        "PLAINTEXT",
        "DATA",
        "CONTENT",
        "CONTENTS",
        "B64",
        "BASE64",
        "HEX",
        "PEM",
        "DER",
        "JSON",
        "JWK",
        "ENCODED",
        "PROD",
        "PRODUCTION",
        "DEV",
        "STAGING",
        "OLD",
        "NEW",
        "PRIMARY",
        "SECONDARY",
        "BACKUP",
        "BASE",
    }
)
_VERSION = re.compile(r"V[0-9]+")
# `PWD` alone is the shell's working directory; ending a longer name it is a password.
_NOT_CREDENTIALS_ALONE = frozenset({"PWD"})
# Words of a name: split on `_`, `-`, `.` and camelCase; digits stay with their letters
# (S3_KEY is S3 + KEY, DB_PASSWORD_2 ends in 2).
_WORD = re.compile(r"[A-Z0-9]+(?![a-z])|[A-Z]?[a-z0-9]+")
# Values that are no credential whatever the name: empty, a switch, an absolute file
# path (where a credential is read from: GOOGLE_APPLICATION_CREDENTIALS=/opt/...). A
# number is one (a PIN, DB_PASSWORD=123456).
_PLAIN_VALUE = re.compile(r"(?i)^\s*(true|false|yes|no|on|off|none|null|/[A-Za-z0-9._/-]*)?\s*$")
REDACTED = MASK


def _words(key: str) -> list[str]:
    return [w.upper() for w in _WORD.findall(key)]


def secret_by_name(key: str) -> bool:
    """Whether the variable's name says it holds a credential: a credential noun that is
    its last word (numbers after it aside: DB_PASSWORD_2), or that only words naming the
    value's form or copy follow (HF_TOKEN_VALUE, API_KEY_B64), and that is not qualified
    as a kind that is none (PROMPT_CACHE_KEY, PAD_TOKEN) or as a quantity (MAX_TOKEN).

    Names are split into words, so `SM_VLLM_API_KEY`, `HF_TOKEN`, `HF_AUTH`, `DB_PASS`,
    `PW`, `KEY`, `hfToken`, `AWS_SECRET_ACCESS_KEY` or `PRIVATE_KEY_PEM` match but
    `SM_VLLM_TOKENIZER`, `..._BATCHED_TOKENS`, `AUTH_TIMEOUT`, `HF_TOKEN_PATH`,
    `..._TOKEN_THRESHOLD`, `KEY_VALUE_CACHE_DTYPE`, `PROMPT_CACHE_KEY` or `PWD` do not.
    """
    words = _words(key)
    while words and words[-1].isdigit():
        words.pop()
    return any(
        word in _CREDENTIAL_NOUNS
        and all(_names_the_value(after) for after in words[i + 1 :])
        and _unqualified(words, i)
        for i, word in enumerate(words)
    )


def _names_the_value(word: str) -> bool:
    """A word after a credential noun that still names the credential: its form, its
    copy, a version (V2) or a number."""
    return word in _VALUE_FORMS or word.isdigit() or _VERSION.fullmatch(word) is not None


def _unqualified(words: list[str], i: int) -> bool:
    """The credential noun `words[i]` is not qualified as a kind that is none or as a
    quantity (nor, alone in the name, one that means something else: PWD)."""
    head = words[i]
    if i == 0:
        return len(words) > 1 or head not in _NOT_CREDENTIALS_ALONE
    qualifier = words[i - 1]
    if qualifier in _QUANTITY_WORDS:
        return False
    kinds = _NOT_CREDENTIAL_KINDS.get(head) or _NOT_CREDENTIAL_KINDS.get(head[:-1], frozenset())
    return qualifier not in kinds  # KEYS as KEY


def looks_like_secret(key: str, value: str) -> bool:
    """Whether an environment entry looks like a credential: a value that is one
    whatever its name (`hf_...`, `AKIA...`, a private key, a URL with a password), or a
    credential's name on a value that could be one (not empty, a switch or a path)."""
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


CONTAINER_PREFIX = "PEAGLE_"
"""The serving container's own variables (peagle_serve: the metric line's endpoint and
variant names, the metrics reader, the launch command, numeric settings)."""
PLAN_CHECKED = frozenset(
    {
        MODEL_ENV,
        HF_MODEL_ID_ENV,
        PORT_ENV,
        SPECULATIVE_CONFIG_ENV,
        TENSOR_PARALLEL_ENV,
        MAX_MODEL_LEN_ENV,
        V2_RUNNER_ENV,
    }
)
"""Variables of the container contract whose value the plan renders or must check: which
model is served (the model ladder), the port, the speculative config, tensor
parallelism, the context length and the model runner P-EAGLE needs."""


def check_secret_refs(dep: Deployment) -> list[PlanWarning]:
    """What a variable given by reference may be: its value is unknown to the plan, so
    never one the plan renders or checks (the container contract's), and its secret is
    in the endpoint region's partition (the region is checked when it is parsed)."""
    partition = partition_of(dep.region)
    for name, ref in sorted(dep.secret_refs.items()):
        field = f"{SECRETS_FIELD}.{name}"
        if name.startswith(CONTAINER_PREFIX) or name in PLAN_CHECKED or name in dep.environment:
            raise InputError(
                field,
                "is a variable of the serving container's contract, whose value the plan "
                f"sets or checks ({CONTAINER_PREFIX}*, {', '.join(sorted(PLAN_CHECKED))}, "
                "and what the plan renders)",
                "a variable of your own, given by value in env if the container must see it",
            )
        if ref.partition != partition:
            raise InputError(
                field,
                f"the secret is in partition {ref.partition}, the endpoint's region "
                f"{dep.region} in {partition}",
                f"arn:{partition}:secretsmanager:{dep.region}:<account>:secret:<name>-<6 chars>",
            )
    return []


VLLM_ARG_PREFIX = SM_VLLM_PREFIX
"""`SM_VLLM_<NAME>` becomes `vllm serve --<name>` (docs/container.md, "Environment")."""
# vLLM reads these from its environment, so under these names a credential never becomes
# an argument: VLLM_API_KEY (vllm/envs.py; the API-key middleware takes `args.api_key or
# [envs.VLLM_API_KEY]`, vllm/entrypoints/serve/middleware/register.py, vLLM 0.30.0) and
# HF_TOKEN (huggingface_hub's get_token reads HF_TOKEN, then HUGGING_FACE_HUB_TOKEN:
# huggingface_hub/utils/_auth.py, 2.4.0). docs/platform-facts.md records both.
FROM_ENVIRONMENT = {"api_key": "VLLM_API_KEY", "hf_token": "HF_TOKEN"}


def vllm_argument(variable: str) -> str | None:
    """The vLLM argument (`api_key`) a container variable becomes, None when it stays an
    environment variable. Every `SM_VLLM_<NAME>` becomes `--<name>` (the AWS images'
    converter and peagle-serve's, container/peagle_serve/envargs.py; a bare `SM_VLLM_`
    names none); the model ladder's variables are the contract's (PLAN_CHECKED)."""
    if variable.startswith(VLLM_ARG_PREFIX) and variable != VLLM_ARG_PREFIX:
        return variable[len(VLLM_ARG_PREFIX) :].lower()
    return None


def _in_clear(dep: Deployment, arg: str) -> str:
    """Why the argument `arg` reaches the endpoint's CloudWatch log in clear."""
    caps = dep.engine.capabilities
    own = (
        "masks it in its own 'non-default args' line"
        if caps is not None and arg in caps.logged_args_redacted
        else "prints it in its 'non-default args' line"
    )
    return (
        "standard-supervisor, which starts vLLM in the AWS vLLM server images and the "
        f"peagle-vllm image, logs the whole command line; {dep.engine.describe()} {own}"
    )


def refuse_secret_arguments(dep: Deployment) -> list[PlanWarning]:
    """Refuse a variable given by reference that becomes a vLLM argument: the argument
    list reaches the endpoint's CloudWatch log in clear on every image (`_in_clear`,
    docs/platform-facts.md), so a secret there would too. One vLLM reads from its
    environment instead is allowed (FROM_ENVIRONMENT)."""
    for name in sorted(dep.secret_refs):
        arg = vllm_argument(name)
        if arg is None:
            continue
        alternative = FROM_ENVIRONMENT.get(arg)
        raise InputError(
            f"{SECRETS_FIELD}.{name}",
            f"becomes vLLM's --{arg.replace('_', '-')} argument, which reaches the "
            f"endpoint's log in clear whatever the image_uri ({_in_clear(dep, arg)})",
            f"{SECRETS_FIELD}: {{{alternative}: <ARN>}}, which vLLM reads from its environment"
            if alternative
            else "a variable that is not a vLLM argument (not SM_VLLM_*)",
        )
    return []


def check_logged_args(dep: Deployment) -> list[PlanWarning]:
    """Warn when a value given in `env` becomes an argument vLLM treats as secret
    (`api_key`, `hf_token`, `watermark_config`: engines.json, `logged_args_redacted`):
    it reaches the endpoint's CloudWatch log in clear (`_in_clear`). By reference it is
    refused (`refuse_secret_arguments`)."""
    sensitive = sensitive_logged_args()
    warnings = []
    for key in sorted(dep.spec.env):
        arg = vllm_argument(key)
        if arg is None or arg not in sensitive:
            continue
        alternative = FROM_ENVIRONMENT.get(arg)
        instead = (
            f"; give it as {alternative} by reference ({SECRETS_FIELD}: {{{alternative}: "
            "<ARN>}), which vLLM reads from its environment"
            if alternative
            else ""
        )
        warnings.append(
            PlanWarning(
                f"env.{key}",
                f"env.{key}: becomes vLLM's --{arg.replace('_', '-')} argument, which "
                f"reaches the endpoint's log in clear ({_in_clear(dep, arg)}){instead}",
            )
        )
    return warnings


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
