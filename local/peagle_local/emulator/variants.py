"""An emulated endpoint's variants: routing, shadow mirroring, and what each reports.

What SageMaker does with a multi-variant or shadow endpoint config, as the emulator
plays it (docs/platform-facts.md, "Experiments" and "InferenceExperiment"):
- a request goes to one production variant, chosen with probability weight / sum of
  the production weights, which answers it (`x-Amzn-Invoked-Production-Variant`);
- with a shadow variant, a copy of the request goes to it: with probability
  SamplingPercentage / 100 when an InferenceExperiment runs it (`sampling`), else every
  request (what a shadow variant's weight in a plain config means is stated in no source
  read, so the emulator gives it no meaning); its answer is discarded;
- every variant that handled a request gets SageMaker's per-variant CloudWatch metrics
  (`AWS/SageMaker`, dimensions EndpointName and VariantName: Invocations,
  Invocation5XXErrors, ModelLatency, InvocationsPerInstance) and, when it has a
  `VariantBehaviour`, what its container reports: vLLM's series for SageMaker's detailed
  observability (`observability.DetailedMetrics`), and, when it runs the project's
  image, the peagle-serve metric line, in the log stream `<variant>/<instance>` of
  `/aws/sagemaker/Endpoints/<endpoint>`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from peagle_deploy.catalog.images import runs_peagle_serve
from peagle_local.emulator.logs import write_endpoint_logs
from peagle_local.emulator.observability import DetailedMetrics
from peagle_local.emulator.traffic import ContainerWindow, ServedRequest, VariantBehaviour, serve

SAGEMAKER_NAMESPACE = "AWS/SageMaker"


@dataclass(frozen=True)
class Variant:
    name: str
    weight: float
    instances: int
    image: str = ""
    """The image of the variant's model (its config says which model)."""


@dataclass(frozen=True)
class EndpointRef:
    """Which emulated endpoint: moto keys its backends by account and region."""

    account_id: str
    region: str
    name: str


@dataclass(frozen=True)
class Route:
    """Who handles one request: the production variant that answers, the shadows that copy."""

    production: Variant
    shadows: tuple[Variant, ...]


def _variants(raw: list[dict[str, Any]] | None, images: Mapping[str, str]) -> list[Variant]:
    out = []
    for v in raw or []:
        weight = v.get("CurrentWeight", v.get("DesiredWeight", 1.0))
        count = v.get("CurrentInstanceCount", v.get("DesiredInstanceCount", 1))
        name = str(v["VariantName"])
        out.append(Variant(name, float(weight or 0.0), int(count or 1), images.get(name, "")))
    return out


def variant_images(backend: Any, endpoint: Any) -> dict[str, str]:
    """variant -> the image of its model, from the endpoint's config."""
    config = backend.endpoint_configs.get(getattr(endpoint, "endpoint_config_name", ""))
    if config is None:
        return {}
    variants = [
        *config.production_variants,
        *(getattr(config, "shadow_production_variants", None) or []),
    ]
    out = {}
    for v in variants:
        model = backend._models.get(v.get("ModelName"))
        if model is not None:
            out[str(v["VariantName"])] = str((model.primary_container or {}).get("Image", ""))
    return out


def behaviour_from_model(backend: Any, endpoint: Any, variant: str) -> VariantBehaviour | None:
    """How a variant serves when nobody said: as its model's speculative config says (K
    from SM_VLLM_SPECULATIVE_CONFIG; `VariantBehaviour`'s defaults otherwise). None for a
    model that does not draft."""
    import json

    config = backend.endpoint_configs.get(getattr(endpoint, "endpoint_config_name", ""))
    if config is None:
        return None
    variants = [
        *config.production_variants,
        *(getattr(config, "shadow_production_variants", None) or []),
    ]
    entry = next((v for v in variants if v.get("VariantName") == variant), None)
    model = backend._models.get(entry.get("ModelName")) if entry else None
    env = ((model.primary_container or {}).get("Environment") or {}) if model else {}
    try:
        k = int(
            json.loads(env.get("SM_VLLM_SPECULATIVE_CONFIG", "{}")).get("num_speculative_tokens", 0)
        )
    except (ValueError, TypeError, AttributeError):
        return None
    return VariantBehaviour(num_speculative_tokens=k) if k >= 1 else None


def route(
    endpoint: Any,
    rng: random.Random,
    *,
    sampling: Mapping[str, int] | None = None,
    images: Mapping[str, str] | None = None,
) -> Route | None:
    """The route of one request on a moto endpoint, None when it has no variant.

    `sampling`: shadow variant -> SamplingPercentage (an InferenceExperiment's); a shadow
    variant without one gets every request."""
    production = _variants(getattr(endpoint, "production_variants", None), images or {})
    if not production:
        return None
    total = sum(v.weight for v in production)
    pick = production[0]
    if total > 0:
        r = rng.random() * total
        for v in production:
            r -= v.weight
            if r < 0:
                pick = v
                break
    shadows = []
    for s in _variants(getattr(endpoint, "shadow_production_variants", None), images or {}):
        share = (sampling or {}).get(s.name, 100) / 100
        if share >= 1 or rng.random() < share:
            shadows.append(s)
    return Route(pick, tuple(shadows))


def instance_id(endpoint_name: str, variant: str, index: int) -> str:
    digest = hashlib.sha256(f"{endpoint_name}/{variant}/{index}".encode()).hexdigest()
    return f"i-{digest[:17]}"


def put_invocation_metrics(
    where: EndpointRef, variant: Variant, *, ok: bool, latency_s: float, at: float
) -> None:
    """SageMaker's per-variant invocation metrics for one request, into moto's CloudWatch."""
    from moto.cloudwatch.models import cloudwatch_backends

    dims = [
        {"Name": "EndpointName", "Value": where.name},
        {"Name": "VariantName", "Value": variant.name},
    ]
    now = datetime.fromtimestamp(at, UTC).replace(tzinfo=None)  # moto keeps naive UTC
    data = [
        ("Invocations", 1.0, "None"),
        ("Invocation5XXErrors", 0.0 if ok else 1.0, "None"),
        ("Invocation4XXErrors", 0.0, "None"),
        ("InvocationsPerInstance", 1.0 / max(1, variant.instances), "None"),
        ("ModelLatency", latency_s * 1e6, "Microseconds"),
    ]
    cloudwatch_backends[where.account_id][where.region].put_metric_data(
        SAGEMAKER_NAMESPACE,
        [
            {"MetricName": n, "Value": v, "Unit": u, "Dimensions": dims, "Timestamp": now}
            for n, v, u in data
        ],
    )


def write_variant_line(
    where: EndpointRef, variant: Variant, served: ServedRequest, instance: str, at: float
) -> None:
    """The metric line the variant's container writes for this request."""
    window = ContainerWindow()
    window.add(served)
    if not window.requests and not window.errors:
        return
    stamp = int(at * 1000)
    line = window.line(
        endpoint=where.name,
        variant=variant.name,
        interval_s=max(served.e2e_s, 1e-3),
        timestamp_ms=stamp,
    )
    write_endpoint_logs(
        where.account_id,
        where.region,
        where.name,
        [line],
        stream=f"{variant.name}/{instance}",
        timestamp_ms=stamp,
    )


def serve_and_report(
    where: EndpointRef,
    variant: Variant,
    behaviour: VariantBehaviour | None,
    rng: random.Random,
    *,
    output_tokens: int,
    difficulty: float,
    at: float,
    streamed: bool = False,
    detailed: DetailedMetrics | None = None,
) -> ServedRequest | None:
    """Serve one request on `variant` (as its behaviour says) and report it as SageMaker
    and the container would; None when the variant has no behaviour (metrics only).

    A request the engine fails after its first token is a 5xx for SageMaker only when it
    was not streamed (a stream's status was 200 already); the container counts it either
    way."""
    if behaviour is None:
        put_invocation_metrics(where, variant, ok=True, latency_s=0.0, at=at)
        return None
    served = serve(behaviour, rng, output_tokens=output_tokens, difficulty=difficulty)
    ok = served.ok and not (served.broken and not streamed)
    put_invocation_metrics(where, variant, ok=ok, latency_s=served.e2e_s, at=at)
    instance = instance_id(where.name, variant.name, rng.randrange(variant.instances))
    if runs_peagle_serve(variant.image):
        write_variant_line(where, variant, served, instance, at)
    if detailed is not None:
        detailed.record(where.name, variant.name, instance, served, at=at)
    return served
