"""Secrets by reference: an environment variable whose value lives in Secrets Manager.

A spec's `secrets` maps an environment variable name to a secret's full ARN, optionally
followed by `:<json-key>` for one key of a JSON secret:

    secrets:
      HF_TOKEN: arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-token-AbCdEf
      VLLM_API_KEY: arn:aws:secretsmanager:us-east-1:123456789012:secret:llm-AbCdEf:api_key

Nothing the project writes holds the value: plans, templates, `cdk.out`, stage files and
manifests carry the reference. The value is read (GetSecretValue) by whoever calls
CreateModel, just before the call: the SDK with the deployer's credentials, the CDK
path's model provider with its own role, which may read exactly these ARNs. SageMaker
has no secret reference for a model's environment, so the value then sits in the model's
Environment, where `sagemaker:DescribeModel` shows it: grant DescribeModel narrowly.

The full ARN (with Secrets Manager's 6-character suffix) is required, so the IAM grant can
name exactly that secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from peagle_deploy.errors import InputError
from peagle_deploy.redaction import value_excerpt

SECRETS_FIELD = "secrets"
SECRET_ARN_RE = re.compile(
    r"^arn:(?P<partition>aws|aws-cn|aws-us-gov):secretsmanager:(?P<region>[a-z0-9-]{1,32}):"
    r"(?P<account>\d{12}):secret:(?P<name>[A-Za-z0-9/_+=.@-]{1,512})-[A-Za-z0-9]{6}$"
)
JSON_KEY_RE = re.compile(r"^[^\s:][^:]{0,255}$")
ENV_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,1023}$")
MAX_SECRET_BYTES = 65_536
"""Secrets Manager's limit for a secret value (SecretString)."""
ARN_EXAMPLE = "arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 characters>[:<json-key>]"


@dataclass(frozen=True)
class SecretRef:
    """One environment variable given by reference."""

    env_name: str
    arn: str
    json_key: str | None = None

    @property
    def text(self) -> str:
        """The reference as the spec writes it."""
        return f"{self.arn}:{self.json_key}" if self.json_key else self.arn

    @property
    def region(self) -> str:
        match = SECRET_ARN_RE.match(self.arn)
        assert match is not None
        return match["region"]

    @property
    def partition(self) -> str:
        match = SECRET_ARN_RE.match(self.arn)
        assert match is not None
        return match["partition"]


def parse_secret_ref(env_name: str, value: object, field: str = SECRETS_FIELD) -> SecretRef:
    """One `secrets` entry; InputError naming `secrets.<NAME>` and the allowed form."""
    where = f"{field}.{env_name}"
    if not ENV_NAME_RE.match(env_name):
        raise InputError(where, "is not an environment variable name", "[A-Za-z_][A-Za-z0-9_]*")
    if not isinstance(value, str):
        raise InputError(where, f"is {type(value).__name__}", ARN_EXAMPLE)
    parts = value.split(":")
    arn, key = ":".join(parts[:7]), (":".join(parts[7:]) if len(parts) > 7 else None)
    if not SECRET_ARN_RE.match(arn):
        raise InputError(
            where,
            f"{value_excerpt(value)} is not the full ARN of a Secrets Manager secret "
            "(the IAM grant names exactly that secret)",
            ARN_EXAMPLE,
        )
    if key is not None and not JSON_KEY_RE.match(key):
        raise InputError(
            where, f"json key {value_excerpt(key)} is not allowed", "1-256 characters, no ':'"
        )
    return SecretRef(env_name, arn, key)


def parse_secret_refs(
    secrets: Mapping[str, object] | None,
    env: Mapping[str, str] | None = None,
    *,
    region: str | None = None,
    field: str = SECRETS_FIELD,
) -> dict[str, SecretRef]:
    """Every `secrets` entry, checked: a variable is given by value (`env`) or by reference,
    never both; the secret is in the endpoint's region (CreateModel reads it there)."""
    refs = {}
    for name, value in sorted((secrets or {}).items()):
        ref = parse_secret_ref(str(name), value, field)
        if env is not None and name in env:
            raise InputError(
                f"{field}.{name}",
                "is also set in env",
                "one of env (a value) or secrets (a reference)",
            )
        if region is not None and ref.region != region:
            raise InputError(
                f"{field}.{name}",
                f"the secret is in {ref.region}, the endpoint in {region}",
                f"a secret in {region}",
            )
        refs[ref.env_name] = ref
    return refs


def secret_value(ref: SecretRef, secret_string: str) -> str:
    """The value for `ref` from the secret's SecretString (one key of a JSON secret when
    the reference names one). Errors name the variable and the key, never the value."""
    if len(secret_string.encode()) > MAX_SECRET_BYTES:
        raise InputError(f"{SECRETS_FIELD}.{ref.env_name}", "the secret is larger than 64 KiB")
    if ref.json_key is None:
        return secret_string
    from peagle_serve import strict_json  # only where a value is read (not on the plan's path)

    try:  # bounded: a secret nested thousands deep is one line, not a RecursionError
        document = strict_json.loads(secret_string, what="the secret", max_bytes=MAX_SECRET_BYTES)
    except strict_json.JsonSyntaxError:
        document = None
    except strict_json.JsonLimitError as e:
        raise InputError(
            f"{SECRETS_FIELD}.{ref.env_name}",
            f"the secret's JSON is refused: {e.problem}",
            f"a JSON object nested at most {strict_json.MAX_DEPTH} levels, each key once",
        ) from None
    if not isinstance(document, dict) or ref.json_key not in document:
        raise InputError(
            f"{SECRETS_FIELD}.{ref.env_name}",
            f"the secret is not a JSON object with the key {ref.json_key!r}",
            "a JSON secret that has the key",
        )
    value = document[ref.json_key]
    if not isinstance(value, str):
        raise InputError(
            f"{SECRETS_FIELD}.{ref.env_name}",
            f"the secret's {ref.json_key!r} is not a string",
            "a string value",
        )
    return value
