"""The rule that finds a plaintext secret in `env` (refused by `cdk synth` and `promote
--write-spec`, warned about by the SDK), judged by its catches and by its false alarms
(issue 29: it missed `DB_PASS`, `PW`, a bare `KEY`, credentials in URLs and numbers under a
credential's name).

The rule: a value that is a credential whatever its name (a known token format, a
private key, a URL with a password), or a name with a credential noun that ends it or
that only words naming the value's form or copy follow (issue 34: `HF_TOKEN_VALUE`,
`API_KEY_B64`, `PRIVATE_KEY_PEM` were missed), not qualified as a kind that is none nor
as a quantity, on a value that can be one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from peagle_deploy.catalog import MODELS
from peagle_deploy.errors import InputError
from peagle_deploy.plan import build_plan
from peagle_deploy.spec import load_spec
from peagle_deploy.validation.secrets import looks_like_secret, refuse_plaintext_secrets

CAUGHT = {
    "DB_PASS": "hunter2",
    "SMTP_PASS": "hunter2",
    "PW": "hunter2",
    "ADMIN_PW": "hunter2",
    "KEY": "abc123def",
    "DB_PASSWORD": "123456",  # a number is a PIN or a password under this name
    "API_KEY": "12345678",
    "DB_PASSWORD_2": "hunter2",
    "HF_TOKEN": "x",
    "hfToken": "abcdefgh12345678",
    "SM_VLLM_API_KEY": "s3cr3t-value",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "OPENAI_KEY": "abcdefgh12345678",
    "API_KEYS": '["a1", "b2"]',
    "CLIENT_SECRET": "abcdefgh",
    "GH_PAT": "abcdefgh12345678",
    "DB_PWD": "hunter22",
    "HF_AUTH": "abcdefgh12345678",
    "AUTHORIZATION": "Basic dXNlcjpwYXNz",
    # credentials in URLs, whatever the variable is called
    "DATABASE_URL": "postgres://user:pw@host/db",
    "REDIS_URL": "redis://:s3cret@cache:6379/0",
    "MONGO": "mongodb+srv://app:p%40ss@cluster0.example.net/db",
    "SM_VLLM_OTLP_TRACES_ENDPOINT": "https://otel:t0ken@collector:4318",
    # a suffix after the credential noun that still names the value (issue 34)
    "HF_TOKEN_VALUE": "abcdefgh12345678",
    "API_KEY_B64": "YWJjZGVmZ2gxMjM0NTY3OA==",
    "PRIVATE_KEY_PEM": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
    "SERVICE_ACCOUNT_KEY_JSON": '{"type": "service_account"}',
    "CLIENT_SECRET_VALUE": "abcdefgh",
    "DB_PASSWORD_PLAIN": "hunter2",
    "SIGNING_KEY_HEX": "00ff00ff00ff",
    "OPENAI_API_KEY_PROD": "abcdefgh12345678",
    "API_KEY_OLD": "abcdefgh12345678",
    "GH_TOKEN_V2": "abcdefgh12345678",
    "API_KEY_B64_2": "YWJjZGVmZ2gxMjM0NTY3OA==",
    "SECRET_KEY_BASE": "abcdefgh12345678",  # Rails' secret
    "hfTokenValue": "abcdefgh12345678",
}

# Real variables of vLLM, the AWS vLLM / DJL / TGI SageMaker images, Hugging Face and
# CUDA, and names that only look alike: none is a credential.
NOT_CAUGHT = {
    "SM_VLLM_RETURN_TOKENS_AS_TOKEN_IDS": "true",
    "SM_VLLM_TOKENIZER": "/opt/ml/model",
    "SM_VLLM_TOKENIZER_MODE": "auto",
    "SM_VLLM_MAX_NUM_BATCHED_TOKENS": "8192",
    "SM_VLLM_MAX_NUM_SEQS": "64",
    "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.92",
    "SM_VLLM_KV_CACHE_DTYPE": "fp8",
    "KEY_VALUE_CACHE_DTYPE": "fp8",
    "SM_VLLM_ENABLE_PROMPT_TOKENS_DETAILS": "true",
    "SM_VLLM_LONG_PREFILL_TOKEN_THRESHOLD": "512",
    "SM_VLLM_SSL_KEYFILE": "/etc/ssl/key.pem",
    "SM_VLLM_SSL_CERTFILE": "/etc/ssl/cert.pem",
    "SM_VLLM_ALLOWED_ORIGINS": "[]",
    "SM_VLLM_OTLP_TRACES_ENDPOINT": "http://collector:4317",
    "SM_VLLM_HF_CONFIG_PATH": "/opt/ml/model",
    "SM_VLLM_MAX_LOGPROBS": "20",
    "SM_VLLM_PREFIX_CACHING_HASH_ALGO": "sha256",
    "SM_VLLM_ENABLE_AUTO_TOOL_CHOICE": "true",
    "OPTION_MAX_ROLLING_BATCH_SIZE": "64",
    "OPTION_ROLLING_BATCH": "vllm",
    "OPTION_TENSOR_PARALLEL_DEGREE": "max",
    "OPTION_TRUST_REMOTE_CODE": "true",
    "OPTION_SPECULATIVE_DRAFT_MODEL": "/opt/ml/model/draft",
    "HF_MODEL_ID": "openai/gpt-oss-20b",
    "HF_TASK": "text-generation",
    "HF_HUB_OFFLINE": "1",
    "HF_HUB_ENABLE_HF_TRANSFER": "1",
    "HF_TOKEN_PATH": "/opt/ml/.cache/token",
    "HF_ENDPOINT": "https://huggingface.co",
    "TRANSFORMERS_OFFLINE": "1",
    "MAX_BATCH_SIZE": "8",
    "MAX_INPUT_TOKENS": "4096",
    "MAX_TOTAL_TOKENS": "8192",
    "MAX_BATCH_PREFILL_TOKENS": "8192",
    "MAX_TOKEN": "4096",
    "SAGEMAKER_PROGRAM": "inference.py",
    "SAGEMAKER_MODEL_SERVER_TIMEOUT": "3600",
    "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
    "SAGEMAKER_ENV": "1",
    "SM_NUM_GPUS": "1",
    "PASSTHROUGH_HEADERS": "x-request-id",
    "PASS_THROUGH_HEADERS": "x-request-id",
    "AUTH_TIMEOUT": "30",
    "AUTH_ENABLED": "true",
    "TOKEN_COUNT": "4",
    "PROMPT_CACHE_KEY": "abc123",
    "S3_KEY": "models/gpt-oss/",
    "PARTITION_KEY": "tenant",
    "PAD_TOKEN": "<pad>",
    "EOS_TOKEN_ID": "2",
    "PWD": "/opt/ml",
    "SECRET_NAME": "team/hf-token",
    "SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-AbCdEf",
    "KMS_KEY_ID": "1234abcd-12ab-34cd-56ef-1234567890ab",
    "GOOGLE_APPLICATION_CREDENTIALS": "/opt/ml/creds.json",
    "AWS_SHARED_CREDENTIALS_FILE": "/root/.aws/credentials",
    "HF_TOKEN": "",  # empty: unset
    "DB_PASSWORD": "/run/secrets/db",  # where it is read from, not the password
    "HTTP_PROXY": "http://proxy.corp:3128",
    "DATABASE_URL": "postgres://db.internal:5432/app",  # no userinfo
    "WEBHOOK_URL": "https://user@example.com/hook",  # a user name is no credential
    "IPV6_URL": "http://[::1]:8080/x@y",
    "VLLM_USE_V1": "1",
    "VLLM_ATTENTION_BACKEND": "FLASH_ATTN",
    "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
    "VLLM_LOGGING_LEVEL": "INFO",
    "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": "5",
    "NCCL_P2P_DISABLE": "1",
    "OMP_NUM_THREADS": "8",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
    # a credential noun before a word that is not the value: values that could be a
    # credential, so only the name decides (issue 34's false-alarm side)
    "TOKENIZER_PATH": "tokenizer-v2",
    "MAX_TOKENS": "4096",
    "NUM_SPECULATIVE_TOKENS": "5",
    "SM_VLLM_DBO_DECODE_TOKEN_THRESHOLD": "32",
    "SM_VLLM_ALLOWED_TOKEN_IDS": "[1, 2]",
    "VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD": "1024",
    "AWS_ACCESS_KEY_ID": "AKID-not-a-secret",
    "S3_ACCESS_KEY_ID": "minio-admin",
    "HF_TOKEN_FILE": "token.txt",
    "API_KEY_HEADER": "x-api-key",
    "API_KEY_NAME": "prod-key",
    "AUTH_TOKEN_URL": "https://idp.example.com/token",
    "TOKEN_ENDPOINT": "idp.example.com",
    "SECRET_KEY_ID": "k-123",
    "PAD_TOKEN_VALUE": "0",
    "MAX_TOKEN_VALUE": "4096",
    "AUTH_DATA_DIR": "data",
    "PASSWORD_MIN_LENGTH": "12",
}


@pytest.mark.parametrize(("key", "value"), sorted(CAUGHT.items()))
def test_a_plaintext_credential_is_refused_where_it_would_be_written(key: str, value: str) -> None:
    assert looks_like_secret(key, value)
    with pytest.raises(InputError) as err:
        refuse_plaintext_secrets({key: value, "OTHER": "1"}, "cdk synth")
    assert err.value.field == f"env.{key}" and "secrets:" in str(err.value)
    if len(value) >= 6:
        assert value not in str(err.value)


VLLM_VARIABLES = Path(__file__).parent / "data" / "vllm_0_30_0_variables.txt"
VLLM_CREDENTIALS = {
    "SM_VLLM_API_KEY",  # --api-key
    "SM_VLLM_HF_TOKEN",  # --hf-token
    "VLLM_API_KEY",
    "S3_SECRET_ACCESS_KEY",
    # a CORS switch: by its name a credential, by its value (true/false) never one
    "SM_VLLM_ALLOW_CREDENTIALS",
}


def test_the_names_of_vllm_0_30_0_flag_only_its_credentials() -> None:
    """Every option of `vllm serve` (as SM_VLLM_*) and every vllm/envs.py variable, each
    on a value that could be a credential: only the credentials are named as one."""
    names = [
        line
        for line in VLLM_VARIABLES.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert len(names) == 603
    assert {n for n in names if looks_like_secret(n, "abc123xyz")} == VLLM_CREDENTIALS
    assert not looks_like_secret("SM_VLLM_ALLOW_CREDENTIALS", "true")


def test_no_false_alarm_on_real_settings() -> None:
    assert [k for k, v in NOT_CAUGHT.items() if looks_like_secret(k, v)] == []
    refuse_plaintext_secrets(NOT_CAUGHT, "cdk synth")


@pytest.mark.parametrize("model", sorted(MODELS))
def test_no_false_alarm_on_what_the_plan_renders(model: str) -> None:
    """Every catalog model's rendered environment (its source's variables and
    peagle-deploy's own) passes the CDK path's refusal."""
    plan = build_plan(load_spec(model=model))
    env = plan.create_model["PrimaryContainer"]["Environment"]
    refuse_plaintext_secrets(env, "cdk synth")
    assert plan.secret_env_keys == []
