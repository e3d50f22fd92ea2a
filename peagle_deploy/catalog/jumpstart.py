"""Resolve a SageMaker JumpStart model id through the sagemaker SDK's JumpStart code.

The SDK is imported only here, only when a spec names a JumpStart id (catalog keys never
reach this module: `import sagemaker...` costs seconds). Offline use: point
AWS_JUMPSTART_MANIFEST_LOCAL_ROOT_DIR_OVERRIDE and AWS_JUMPSTART_SPECS_LOCAL_ROOT_DIR_OVERRIDE
at a folder holding `models_manifest.json` and the spec files it names; the SDK then reads
that folder instead of the JumpStart S3 bucket.

What the SDK resolves and we keep: the image for the instance type, the model data
location, the speculative-decoding additional data source, the default environment, and
the top-ranked config's model-download and health-check timeouts (its `deploy_kwargs`;
3600 s for gpt-oss-20b's `lmi-optimized`, catalog/data/jumpstart.json).
What we change: `HostingEulaKey` is removed (CreateModel rejects it); any source that has
an EULA gets `ModelAccessConfig.AcceptEula` when the spec sets `accept_eula`, and is
refused otherwise, as the SDK's own deploy does.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from peagle_serve.contract import SPECULATIVE_CONFIG_ENV

from peagle_deploy.catalog.models import MODELS, ModelEntry, catalog_match
from peagle_deploy.catalog.source import ModelSource
from peagle_deploy.errors import InputError
from peagle_deploy.spec.models import DrafterKind

MANIFEST_OVERRIDE_ENV = "AWS_JUMPSTART_MANIFEST_LOCAL_ROOT_DIR_OVERRIDE"
SPECS_OVERRIDE_ENV = "AWS_JUMPSTART_SPECS_LOCAL_ROOT_DIR_OVERRIDE"

_JUMPSTART_ID = re.compile(r"^[a-z0-9][a-z0-9.]*(-[a-z0-9.]+)+$")
_last_local_roots: tuple[str | None, str | None] | None = None


def is_jumpstart_candidate(model: str) -> bool:
    """JumpStart ids are lowercase words joined by dashes (`openai-reasoning-gpt-oss-20b`)."""
    return bool(_JUMPSTART_ID.fullmatch(model))


def _s3_source(raw: dict[str, Any]) -> dict[str, Any]:
    """SDK snake_case S3 data source -> CreateModel S3DataSource (only accepted keys)."""
    return {
        "S3Uri": raw["s3_uri"],
        "S3DataType": raw["s3_data_type"],
        "CompressionType": raw["compression_type"],
    }


def _fresh_cache_for_local_roots() -> None:
    """The SDK caches manifests per process; a different local folder must not see stale data."""
    global _last_local_roots  # noqa: PLW0603 (one process-wide SDK cache to keep in step)
    roots = (os.environ.get(MANIFEST_OVERRIDE_ENV), os.environ.get(SPECS_OVERRIDE_ENV))
    if roots != _last_local_roots:
        from sagemaker.core.jumpstart.accessors import JumpStartModelsAccessor

        JumpStartModelsAccessor.reset_cache()
        _last_local_roots = roots


def _eula_refusal(model_id: str, what: str, region: str, eula_key: str) -> InputError:
    from sagemaker.core.jumpstart.utils import get_formatted_eula_message_template

    return InputError(
        "accept_eula",
        f"{what} of JumpStart model {model_id} needs its license accepted: "
        + get_formatted_eula_message_template(model_id, region, eula_key),
        "true (set accept_eula / --accept-eula after reading the license)",
    )


def _speculative_defaults(env: dict[str, str]) -> dict[str, Any]:
    raw = env.get(SPECULATIVE_CONFIG_ENV)
    if not raw:
        return {}
    try:
        config = json.loads(raw)
    except ValueError:
        return {}
    return config if isinstance(config, dict) else {}


def _deploy_timeout(specs: Any, key: str) -> int | None:
    """A timeout from the (config-resolved) spec's deploy_kwargs, when it sets one."""
    value = (getattr(specs, "deploy_kwargs", None) or {}).get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _int_env(env: dict[str, str], key: str) -> int | None:
    try:
        return int(env[key])
    except (KeyError, ValueError):
        return None


def resolve_jumpstart(
    model_id: str,
    region: str,
    *,
    accept_eula: bool,
    instance_type: str | None = None,
    version: str = "*",
) -> ModelSource:
    """Image, model data, drafter source and env of a JumpStart model, via the SDK.

    Raises InputError when the id is unknown to JumpStart (or its metadata cannot be read),
    when the instance type has no image, or when an EULA is not accepted.
    """
    import logging  # here: a catalog key's plan (the first command) never needs it

    logging.getLogger("sagemaker").setLevel(logging.ERROR)
    _fresh_cache_for_local_roots()
    specs, config_name = _read_specs(model_id, region, version)
    common: dict[str, Any] = {
        "model_id": model_id,
        "model_version": specs.version,
        "region": region,
        "instance_type": instance_type or specs.default_inference_instance_type,
        "config_name": config_name,
    }
    image_uri, model_uri, env = _artifacts(specs, common)
    model_source = _model_source(specs, model_id, region, model_uri, accept_eula)
    drafter_source = _drafter_source(specs, model_id, region, accept_eula)
    entry = catalog_match(model_id)
    drafter_kind, default_k = _speculative_defaults_of(env, entry)
    return ModelSource(
        name=entry.key if entry is not None else model_id,
        kind="jumpstart",
        image_uri=image_uri,
        model_data_uri=model_uri,
        drafter_uri=drafter_source["S3Uri"] if drafter_source else None,
        drafter_kind=drafter_kind,
        drafter_parallel_tokens=entry.drafter_parallel_tokens.value if entry else None,
        default_num_speculative_tokens=default_k,
        default_instance_type=specs.default_inference_instance_type,
        default_tensor_parallel_size=_int_env(env, "SM_VLLM_TENSOR_PARALLEL_SIZE") or 1,
        default_max_model_len=_int_env(env, "SM_VLLM_MAX_MODEL_LEN"),
        weights_gb=entry.weights_gb.value if entry else None,
        drafter_weights_gb=entry.drafter_weights_gb.value if entry else 0.0,
        kv_cache_gb_per_1k_tokens=entry.kv_cache_gb_per_1k_tokens.value if entry else None,
        gated=specs.is_gated_model(),
        architecture=entry.architecture.value if entry else None,
        drafter_mask_token_key=entry.drafter_mask_token_key.value if entry else None,
        model_data_download_timeout_s=_deploy_timeout(specs, "model_data_download_timeout"),
        container_startup_health_check_timeout_s=_deploy_timeout(
            specs, "container_startup_health_check_timeout"
        ),
        base_env=env,
        model_data_source=model_source,
        drafter_data_source=drafter_source,
        catalog=entry,
    )


def _read_specs(model_id: str, region: str, version: str) -> tuple[Any, str | None]:
    """The model's JumpStart specs, resolved for its top-ranked inference config."""
    from sagemaker.core.jumpstart.enums import JumpStartScriptScope
    from sagemaker.core.jumpstart.utils import (
        get_top_ranked_config_name,
        verify_model_region_and_return_specs,
    )

    scope = JumpStartScriptScope.INFERENCE
    try:
        specs = verify_model_region_and_return_specs(
            model_id=model_id, version=version, scope=scope, region=region
        )
        config_name = (
            get_top_ranked_config_name(
                region=region, model_id=model_id, model_version=specs.version, scope=scope
            )
            if specs.inference_configs
            else None
        )
        if config_name:
            specs = verify_model_region_and_return_specs(
                model_id=model_id,
                version=specs.version,
                scope=scope,
                region=region,
                config_name=config_name,
            )
    except KeyError as exc:
        raise InputError(
            "model",
            f"{model_id!r} is not a catalog key and JumpStart does not know it "
            f"({str(exc).strip(chr(34) + chr(39))[:160]})",
            [*MODELS, "custom", "a JumpStart model id"],
        ) from None
    except Exception as exc:  # botocore: no credentials, no network, access denied
        raise InputError(
            "model",
            f"cannot read JumpStart metadata for {model_id!r}: {type(exc).__name__}: {exc}",
            f"AWS credentials and network access to the region's JumpStart bucket (the "
            f"SDK reads it with the caller's credentials), or {MANIFEST_OVERRIDE_ENV} and "
            f"{SPECS_OVERRIDE_ENV} pointing at a local copy",
        ) from None
    return specs, config_name


def _artifacts(specs: Any, common: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    """The image for the instance type, the model data URI and the default environment."""
    from sagemaker.core.jumpstart.artifacts.environment_variables import (
        _retrieve_default_environment_variables,
    )
    from sagemaker.core.jumpstart.artifacts.image_uris import _retrieve_image_uri
    from sagemaker.core.jumpstart.artifacts.model_uris import _retrieve_model_uri
    from sagemaker.core.jumpstart.enums import JumpStartScriptScope

    scope = JumpStartScriptScope.INFERENCE
    try:
        image_uri = _retrieve_image_uri(image_scope=scope, **common)
    except ValueError:
        raise InputError(
            "instance_type",
            f"JumpStart model {common['model_id']} has no image for {common['instance_type']} "
            f"in {common['region']}",
            specs.supported_inference_instance_types or ["see the model's JumpStart page"],
        ) from None
    model_uri = _retrieve_model_uri(model_scope=scope, **common)
    env = {
        k: str(v)
        for k, v in _retrieve_default_environment_variables(
            script=scope, include_aws_sdk_env_vars=False, **common
        ).items()
    }
    return image_uri, model_uri, env


def _model_source(
    specs: Any, model_id: str, region: str, model_uri: str, accept_eula: bool
) -> dict[str, Any]:
    """The target's S3DataSource; a gated model's needs its EULA accepted."""
    model_source: dict[str, Any] = {
        "S3Uri": model_uri,
        "S3DataType": "S3Prefix" if model_uri.endswith("/") else "S3Object",
        "CompressionType": "None" if model_uri.endswith("/") else "Gzip",
    }
    if specs.is_gated_model():
        if not accept_eula:
            raise _eula_refusal(model_id, "the model", region, specs.hosting_eula_key or "")
        model_source["ModelAccessConfig"] = {"AcceptEula": True}
    return model_source


def _drafter_source(
    specs: Any, model_id: str, region: str, accept_eula: bool
) -> dict[str, Any] | None:
    """The speculative-decoding data source (one drafter channel per model), if any."""
    from sagemaker.core.jumpstart.utils import get_draft_model_content_bucket

    for source in specs.get_speculative_decoding_s3_data_sources():
        source.s3_data_source.set_bucket(
            get_draft_model_content_bucket(provider=source.provider, region=region)
        )
        raw = source.to_json()
        drafter_source = _s3_source(raw["s3_data_source"])
        if raw.get("hosting_eula_key"):  # HostingEulaKey itself never reaches CreateModel
            if not accept_eula:
                raise _eula_refusal(model_id, "the drafter", region, raw["hosting_eula_key"])
            drafter_source["ModelAccessConfig"] = {"AcceptEula": True}
        return drafter_source
    return None


def _speculative_defaults_of(
    env: dict[str, str], entry: ModelEntry | None
) -> tuple[DrafterKind | None, int]:
    """The drafter kind and K the JumpStart config's speculative config states (else the
    catalog entry's, else K=3)."""
    speculative_defaults = _speculative_defaults(env)
    drafter_kind: DrafterKind | None
    if speculative_defaults.get("parallel_drafting"):
        drafter_kind = "p-eagle"
    elif speculative_defaults.get("method") == "eagle3":
        drafter_kind = "eagle3"
    else:
        drafter_kind = entry.drafter_kind if entry is not None else None
    default_k = speculative_defaults.get("num_speculative_tokens")
    if not isinstance(default_k, int) or default_k < 1:
        default_k = entry.default_num_speculative_tokens.value if entry else 3
    return drafter_kind, default_k
