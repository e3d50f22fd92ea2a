"""An emulated endpoint's variants: routing, shadow mirroring, and what each reports.

What SageMaker does with a multi-variant or shadow endpoint config, as the emulator
plays it (docs/platform-facts.md, "Experiments: variants and shadow variants"):
- a request goes to one production variant, chosen with probability weight / sum of
  the production weights, which answers it (`x-Amzn-Invoked-Production-Variant`);
- with a shadow variant, a copy of the request goes to it with probability shadow
  weight / production weight (the emulator's reading of the sampling percentage, see
  the facts page); its answer is discarded;
- every variant that handled a request gets SageMaker's per-variant CloudWatch metrics
  (`AWS/SageMaker`, dimensions EndpointName and VariantName: Invocations,
  Invocation5XXErrors, ModelLatency, InvocationsPerInstance) and, when it has a
  `VariantBehaviour`, the metric line its peagle-serve container would write, in the
  log stream `<variant>/<instance>` of `/aws/sagemaker/Endpoints/<endpoint>`.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from peagle_local.emulator.logs import write_endpoint_logs
from peagle_local.emulator.traffic import ContainerWindow, ServedRequest, VariantBehaviour, serve

SAGEMAKER_NAMESPACE = "AWS/SageMaker"


@dataclass(frozen=True)
class Variant:
    name: str
    weight: float
    instances: int


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


def _variants(raw: list[dict[str, Any]] | None) -> list[Variant]:
    out = []
    for v in raw or []:
        weight = v.get("CurrentWeight", v.get("DesiredWeight", 1.0))
        count = v.get("CurrentInstanceCount", v.get("DesiredInstanceCount", 1))
        out.append(Variant(str(v["VariantName"]), float(weight or 0.0), int(count or 1)))
    return out


def route(endpoint: Any, rng: random.Random) -> Route | None:
    """The route of one request on a moto endpoint, None when it has no variant."""
    production = _variants(getattr(endpoint, "production_variants", None))
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
    for s in _variants(getattr(endpoint, "shadow_production_variants", None)):
        share = s.weight / production[0].weight if production[0].weight > 0 else 0.0
        if rng.random() < min(1.0, share):
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
    where: EndpointRef, variant: Variant, served: ServedRequest, rng: random.Random, at: float
) -> None:
    """The metric line the variant's container writes for this request."""
    window = ContainerWindow()
    window.add(served)
    if not window.requests:
        return
    stamp = int(at * 1000)
    line = window.line(
        endpoint=where.name,
        variant=variant.name,
        interval_s=max(served.e2e_s, 1e-3),
        timestamp_ms=stamp,
    )
    index = rng.randrange(variant.instances)
    write_endpoint_logs(
        where.account_id,
        where.region,
        where.name,
        [line],
        stream=f"{variant.name}/{instance_id(where.name, variant.name, index)}",
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
) -> ServedRequest | None:
    """Serve one request on `variant` (as its behaviour says) and report it as SageMaker
    and the container would; None when the variant has no behaviour (metrics only)."""
    if behaviour is None:
        put_invocation_metrics(where, variant, ok=True, latency_s=0.0, at=at)
        return None
    served = serve(behaviour, rng, output_tokens=output_tokens, difficulty=difficulty)
    put_invocation_metrics(where, variant, ok=served.ok, latency_s=served.e2e_s, at=at)
    write_variant_line(where, variant, served, rng, at)
    return served
