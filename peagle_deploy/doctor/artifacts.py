"""Artifacts: the model data and the drafter exist where the plan says, and the drafter
passes the P-EAGLE rules the container's preflight applies (peagle_serve.drafter_rules).

Only headers are read: `config.json` and index files with one bounded GET each, and per
safetensors file two ranged GETs (the 8-byte length, then the JSON header). Weights are
never downloaded, and no read takes more than the bytes it asked for, even from a
server that ignores `Range`. JSON is parsed with the container's rules and limits
(`peagle_serve.strict_json`: each key once, depth 64, no NaN, no BOM), so a drafter its
preflight would refuse fails here, before any instance starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from peagle_serve import contract, drafter_rules, strict_json
from peagle_serve.numeric_env import NumericEnvError, numeric_value
from peagle_serve.safetensors_header import (
    INDEX_FILE,
    SafetensorsError,
    TensorInfo,
    header_length,
    index_shards,
    parse_header,
)

from peagle_deploy.doctor import locations
from peagle_deploy.doctor.context import (
    DoctorContext,
    could_not_check,
    error_code,
)
from peagle_deploy.doctor.locations import DataLocation
from peagle_deploy.doctor.result import CheckResult, failed, passed, warned

LIST_LIMIT = 1000
"""Objects listed per location (one ListObjectsV2 page)."""
NOT_FOUND = frozenset({"NoSuchKey", "404", "NotFound"})


class _StopCheckError(Exception):  # control flow, not an error the user sees
    """Ends a check early with the line that explains why."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.detail)
        self.result = result


@dataclass(frozen=True)
class _Listing:
    sizes: dict[str, int]
    """Object key relative to the location's prefix -> size in bytes."""
    truncated: bool


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover - the loop returns at GB


def _cannot_look(check: str, resource: str, what: str, exc: BaseException) -> CheckResult:
    return could_not_check(
        check,
        resource,
        exc,
        denied=f"no permission to {what}",
        fix="run doctor with credentials that may read the location, or check it by hand",
        failed=f"{what} failed",
    )


def owner_args(ctx: DoctorContext, bucket: str) -> dict[str, str]:
    """`ExpectedBucketOwner` for every read of `bucket` (`DoctorContext.bucket_owner`),
    so a bucket of that name in another account is never read."""
    owner = ctx.bucket_owner(bucket)
    return {"ExpectedBucketOwner": owner} if owner else {}


def _bucket(ctx: DoctorContext, loc: DataLocation, check: str) -> None:
    """The bucket exists, belongs to the expected owner, and lives in the endpoint's
    region (when the caller may look)."""
    owner = owner_args(ctx, loc.bucket)
    try:
        head = ctx.client("s3").head_bucket(Bucket=loc.bucket, **owner)
    except Exception as exc:
        if owner and error_code(exc) in ("403", "AccessDenied", "Forbidden"):
            _refuse_other_owner(ctx, loc, check, owner["ExpectedBucketOwner"])
        if error_code(exc) in ("404", "NoSuchBucket", "NotFound"):
            raise _StopCheckError(
                failed(
                    check,
                    loc.uri,
                    f"bucket {loc.bucket} does not exist",
                    f"upload the {loc.label} to an existing bucket in {ctx.region} and point the "
                    "spec at it",
                )
            ) from None
        return  # 403 and friends: region unknown, the listing below says more
    region = head.get("BucketRegion") or head["ResponseMetadata"]["HTTPHeaders"].get(
        "x-amz-bucket-region"
    )
    if region and region != ctx.region:
        # botocore's sagemaker model (ContainerDefinition.Image): artifacts and image
        # must be in the region of the model or endpoint.
        raise _StopCheckError(
            failed(
                check,
                loc.uri,
                f"bucket {loc.bucket} is in {region}, the endpoint in {ctx.region}; SageMaker "
                "reads model artifacts only from its own region",
                f"copy the {loc.label} to a bucket in {ctx.region}",
            )
        )


def _refuse_other_owner(ctx: DoctorContext, loc: DataLocation, check: str, owner: str) -> None:
    """S3 answers 403 both to a caller without permission and to a bucket whose owner is
    not the expected one; the same request without the owner tells them apart."""
    try:
        ctx.client("s3").head_bucket(Bucket=loc.bucket)
    except Exception:
        return  # 403 either way: a permission problem, reported by the listing below
    raise _StopCheckError(
        failed(
            check,
            loc.uri,
            f"bucket {loc.bucket} is not owned by {owner} (expected_bucket_owner, default "
            "the deploying account): another account's bucket of that name",
            f"use a bucket of {owner}, or set expected_bucket_owner to the account you trust",
        )
    )


def _list(ctx: DoctorContext, loc: DataLocation) -> _Listing:
    """What SageMaker would download: every object whose key starts with the prefix."""
    page = ctx.client("s3").list_objects_v2(
        Bucket=loc.bucket, Prefix=loc.key, MaxKeys=LIST_LIMIT, **owner_args(ctx, loc.bucket)
    )
    sizes: dict[str, int] = {}
    for item in page.get("Contents", []):
        key = str(item["Key"])
        sizes[key.removeprefix(loc.dir_key)] = int(item.get("Size", 0))
    return _Listing(sizes, bool(page.get("IsTruncated")))


def _inspect_location(ctx: DoctorContext, loc: DataLocation, check: str) -> _Listing | None:
    """Raise _StopCheckError unless the location holds data; returns its listing (prefixes only)."""
    try:
        _bucket(ctx, loc, check)
        if not loc.is_prefix:
            head = ctx.client("s3").head_object(
                Bucket=loc.bucket, Key=loc.key, **owner_args(ctx, loc.bucket)
            )
            if int(head.get("ContentLength", 0)) == 0:
                raise _StopCheckError(
                    failed(
                        check, loc.uri, f"the {loc.label} object is empty", f"re-upload {loc.uri}"
                    )
                )
            return None
        listing = _list(ctx, loc)
    except _StopCheckError:
        raise
    except Exception as exc:
        code = error_code(exc)
        if code in NOT_FOUND:
            raise _StopCheckError(
                failed(
                    check, loc.uri, f"the {loc.label} object does not exist", f"upload {loc.uri}"
                )
            ) from None
        if code == "NoSuchBucket":
            raise _StopCheckError(
                failed(
                    check,
                    loc.uri,
                    f"bucket {loc.bucket} does not exist",
                    f"fix the {loc.label} URI",
                )
            ) from None
        raise _StopCheckError(_cannot_look(check, loc.uri, f"list {loc.uri}", exc)) from None
    if not listing.sizes:
        raise _StopCheckError(
            failed(
                check,
                loc.uri,
                f"no objects under the {loc.label} prefix (SageMaker would mount an empty "
                "directory)",
                f"upload the {loc.label} files under {loc.uri}, or fix the URI",
            )
        )
    if not any(listing.sizes.values()):
        raise _StopCheckError(
            failed(
                check,
                loc.uri,
                f"only empty objects under the {loc.label} prefix",
                f"upload the {loc.label} files under {loc.uri}",
            )
        )
    return listing


def _location_line(check: str, loc: DataLocation, listing: _Listing | None) -> CheckResult:
    if listing is None:
        return passed(check, loc.uri, "object exists and is not empty")
    count = f"{len(listing.sizes)}{'+' if listing.truncated else ''} objects"
    return passed(check, loc.uri, f"{count}, {_size(sum(listing.sizes.values()))}")


def check_model_data(ctx: DoctorContext) -> list[CheckResult]:
    """The target weights exist and are not empty."""
    loc = locations.model_data(ctx.plan)
    try:
        listing = _inspect_location(ctx, loc, "model-data.location")
    except _StopCheckError as stop:
        return [stop.result]
    return [_location_line("model-data.location", loc, listing)]


# --- the drafter ------------------------------------------------------------------------


class RangeIgnoredError(Exception):
    """S3 (or what answers for it) sent more than the bytes asked for."""


def _get(ctx: DoctorContext, bucket: str, key: str, first: int, last: int) -> bytes:
    """Bytes first..last of an object; never more, whatever the server sends."""
    want = last - first + 1
    response = ctx.client("s3").get_object(
        Bucket=bucket, Key=key, Range=f"bytes={first}-{last}", **owner_args(ctx, bucket)
    )
    body = response["Body"]
    try:
        length = response.get("ContentLength")
        if isinstance(length, int) and length > want:
            raise RangeIgnoredError(
                f"S3 answered {length} bytes to a request for bytes {first}-{last} of "
                f"s3://{bucket}/{key} (the Range header was ignored)"
            )
        data = bytes(body.read(want + 1))
    finally:
        body.close()
    if len(data) > want:
        raise RangeIgnoredError(
            f"S3 sent more than the {want} bytes asked for of s3://{bucket}/{key} "
            "(the Range header was ignored)"
        )
    return data


def _json(
    ctx: DoctorContext, bucket: str, key: str, check: str, fix: str, *, max_bytes: int
) -> dict[str, Any]:
    """A JSON file read and parsed by the container's rules (peagle_serve.strict_json):
    what its preflight would refuse after the instance is up is refused here."""
    uri = f"s3://{bucket}/{key}"
    try:
        raw = _get(ctx, bucket, key, 0, max_bytes)  # one byte more than allowed: too big?
    except Exception as exc:
        if error_code(exc) in NOT_FOUND:
            raise _StopCheckError(failed(check, uri, "does not exist", fix)) from None
        raise _StopCheckError(_cannot_look(check, uri, f"read {uri}", exc)) from None
    try:
        value = strict_json.load_bytes(raw, what=uri, max_bytes=max_bytes)
    except strict_json.JsonInputError as exc:
        raise _StopCheckError(failed(check, uri, exc.problem, fix)) from None
    if not isinstance(value, dict):
        raise _StopCheckError(failed(check, uri, "is not a JSON object", fix))
    return value


def _header(ctx: DoctorContext, bucket: str, key: str) -> dict[str, TensorInfo]:
    source = f"s3://{bucket}/{key}"
    try:
        n = header_length(_get(ctx, bucket, key, 0, 7), source)
        return parse_header(_get(ctx, bucket, key, 8, 8 + n - 1), n, source)
    except SafetensorsError:
        raise
    except RecursionError:
        raise SafetensorsError(f"{source}: header is nested too deeply") from None
    except Exception as exc:
        if error_code(exc) == "InvalidRange":
            raise SafetensorsError(f"{source}: shorter than the 8-byte header length") from None
        raise


def engine_mask_token_keys(vllm_version: str | None) -> tuple[drafter_rules.MaskTokenKey, ...]:
    """Where the plan's engine reads the mask token from (catalog/data/engines.json).

    A drafter whose mask token sits under a key only newer engines read passes the
    container's preflight (which knows every key) but fails inside the older engine;
    with an unknown engine, the preflight's keys are the best guess.
    """
    from peagle_deploy.catalog.engines import capabilities_for

    caps = capabilities_for(vllm_version)
    if caps is None:
        return drafter_rules.MASK_TOKEN_KEYS
    # vLLM skips a top-level `mask_token_id: null` (drafter_rules.MaskTokenKey)
    return tuple(
        drafter_rules.MaskTokenKey(key, none_is_absent=key == "mask_token_id")
        for key in caps.mask_token_keys
    )


def _drafter_config(
    ctx: DoctorContext, loc: DataLocation, files: dict[str, int]
) -> tuple[str, dict[str, Any]]:
    check = "drafter.config"
    config_uri = loc.object_uri("config.json")
    if "config.json" not in files:
        nested = sorted(
            name.split("/")[0]
            for name in files
            if name.count("/") == 1 and name.endswith("/config.json")
        )
        hint = (
            f"; found {nested[0]}/config.json: point the drafter URI at "
            f"{loc.object_uri(nested[0] + '/')}"
            if nested
            else ""
        )
        raise _StopCheckError(
            failed(
                check,
                config_uri,
                f"the drafter has no config.json{hint}",
                "upload the whole drafter checkpoint (config.json and weights)",
            )
        )
    config = _json(
        ctx,
        loc.bucket,
        loc.dir_key + "config.json",
        check,
        "upload the drafter's config.json from its checkpoint",
        max_bytes=strict_json.CONFIG_MAX_BYTES,
    )
    return config_uri, config


def _drafter_tensors(
    ctx: DoctorContext, loc: DataLocation, files: dict[str, int]
) -> dict[str, TensorInfo] | None:
    """Tensors from the safetensors headers; None when the weights are not safetensors."""
    check = "drafter.weights"
    base = loc.dir_key
    weights_uri = loc.uri
    if INDEX_FILE in files:
        index = _json(
            ctx,
            loc.bucket,
            base + INDEX_FILE,
            check,
            "re-upload the checkpoint",
            max_bytes=strict_json.INDEX_MAX_BYTES,
        )
        try:
            names = index_shards(index, loc.object_uri(INDEX_FILE))
        except SafetensorsError as exc:
            raise _StopCheckError(
                failed(check, weights_uri, str(exc), "re-upload the checkpoint")
            ) from None
        missing = [n for n in names if n not in files]
        if missing:
            raise _StopCheckError(
                failed(
                    check,
                    weights_uri,
                    f"{INDEX_FILE} names shard {missing[0]}, which is not in S3",
                    "upload every shard the index names",
                )
            )
    else:
        names = sorted(n for n in files if "/" not in n and n.endswith(".safetensors"))
    if not names:
        if any(n.endswith(drafter_rules.NON_SAFETENSORS_WEIGHT_SUFFIXES) for n in files):
            return None
        raise _StopCheckError(
            failed(check, weights_uri, "the drafter has no weights", "upload the drafter's weights")
        )
    tensors: dict[str, TensorInfo] = {}
    try:
        for name in names:
            tensors.update(_header(ctx, loc.bucket, base + name))
    except SafetensorsError as exc:
        raise _StopCheckError(
            failed(check, weights_uri, f"drafter weights: {exc}", "re-upload the checkpoint")
        ) from None
    except Exception as exc:
        raise _StopCheckError(
            _cannot_look(check, weights_uri, "read the safetensors headers", exc)
        ) from None
    return tensors


def _target_line(
    ctx: DoctorContext, drafter_config: dict[str, Any], drafter_uri: str
) -> CheckResult:
    check = "drafter.target"
    target = locations.model_data(ctx.plan)
    if target.compressed or not target.is_prefix:
        return warned(
            check,
            target.uri,
            "could not check: the model data is an archive; hidden size not compared",
        )
    try:
        target_config = _json(
            ctx,
            target.bucket,
            target.dir_key + "config.json",
            check,
            "upload the target's config.json",
            max_bytes=strict_json.CONFIG_MAX_BYTES,
        )
    except _StopCheckError as stop:
        return warned(
            check,
            stop.result.resource,
            f"could not check the hidden size: target config.json {stop.result.detail}",
        )
    problem = drafter_rules.hidden_size_problem(
        drafter_config, target_config, drafter_uri, target.object_uri("config.json")
    )
    if problem:
        return failed(check, drafter_uri, problem, "use the drafter trained for this target model")
    have = drafter_rules.drafter_target_hidden_size(drafter_config)
    want = drafter_rules.target_hidden_size(target_config)
    if have is None or want is None:
        return warned(check, drafter_uri, "could not check: a hidden size is not declared")
    return passed(check, drafter_uri, f"built for the target's hidden size ({have})")


def _trained_tokens_line(
    ctx: DoctorContext, drafter_config: dict[str, Any], drafter_uri: str
) -> CheckResult | None:
    env = ctx.plan.create_model["PrimaryContainer"].get("Environment", {})
    try:  # the plan refused a bad value already (the container's own rule)
        override = numeric_value(env, contract.DRAFTER_TRAINED_TOKENS_ENV)
    except NumericEnvError:
        override = None
    trained = (
        (contract.DRAFTER_TRAINED_TOKENS_ENV, int(override))
        if override is not None
        else drafter_rules.trained_tokens(drafter_config)
    )
    if trained is None:
        return None
    warning = drafter_rules.trained_tokens_warning(ctx.plan.num_speculative_tokens, trained)
    if warning:
        return warned(
            "drafter.trained-tokens",
            drafter_uri,
            warning,
            f"lower K (--num-speculative-tokens) to {trained[1]} or less",
        )
    return passed(
        "drafter.trained-tokens",
        drafter_uri,
        f"K={ctx.plan.num_speculative_tokens} within the {trained[1]} tokens it was trained for",
    )


def check_drafter(ctx: DoctorContext) -> list[CheckResult]:
    """The drafter exists, and is a P-EAGLE head this target and engine can run."""
    loc = locations.drafter(ctx.plan)
    if loc is None:
        return []
    results: list[CheckResult] = []
    try:
        listing = _inspect_location(ctx, loc, "drafter.location")
        results.append(_location_line("drafter.location", loc, listing))
        if listing is None or loc.compressed:
            results.append(
                warned(
                    "drafter.config",
                    loc.uri,
                    "could not check: a drafter packed in one object cannot be read in place",
                )
            )
            return results
        files = listing.sizes
        config_uri, config = _drafter_config(ctx, loc, files)
        parallel = bool((ctx.plan.speculative_config or {}).get("parallel_drafting"))
        if parallel:
            keys = engine_mask_token_keys(ctx.plan.vllm_version)
            problem = drafter_rules.mask_token_problem(
                config, config_uri, keys
            ) or drafter_rules.mrope_problem(config, config_uri)
            if problem:
                raise _StopCheckError(
                    failed(
                        "drafter.config",
                        config_uri,
                        problem,
                        "use a P-EAGLE head, or --mode eagle3 for a plain EAGLE-3 head",
                    )
                )
            key, value = drafter_rules.find_mask_token(config, keys) or ("?", None)
            results.append(
                passed("drafter.config", config_uri, f"P-EAGLE mask token {key}={value}")
            )
        else:
            results.append(passed("drafter.config", config_uri, "readable EAGLE drafter config"))
        weights_uri = loc.uri
        tensors = _drafter_tensors(ctx, loc, files)
        if tensors is None:
            results.append(
                warned(
                    "drafter.weights",
                    weights_uri,
                    "could not check: no safetensors weights (mask_hidden not checked)",
                )
            )
        elif parallel:
            problem = drafter_rules.mask_hidden_problem(tensors, config, weights_uri)
            if problem:
                raise _StopCheckError(
                    failed(
                        "drafter.weights",
                        weights_uri,
                        problem,
                        "point the drafter at a P-EAGLE checkpoint, or --mode eagle3",
                    )
                )
            shape = next(t.shape for n, t in tensors.items() if drafter_rules.MASK_HIDDEN in n)
            results.append(
                passed(
                    "drafter.weights",
                    weights_uri,
                    f"mask_hidden {list(shape)}, {len(tensors)} tensors",
                )
            )
        else:
            results.append(passed("drafter.weights", weights_uri, f"{len(tensors)} tensors"))
        results.append(_target_line(ctx, config, weights_uri))
        trained = _trained_tokens_line(ctx, config, weights_uri)
        if trained is not None:
            results.append(trained)
    except _StopCheckError as stop:
        results.append(stop.result)
    return results
