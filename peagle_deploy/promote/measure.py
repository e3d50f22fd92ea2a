"""Gathering the measurements the gates judge: the smoke chat and the benchmark sweep.

Both talk to the SOURCE endpoint through the same clients a user's code would use (the
SDK's `PeagleEndpoint.chat` and `peagle bench`'s SageMaker target), so a promotion in
the local rehearsal exercises the same path as one in CI; only the endpoint URLs differ.
"""

from __future__ import annotations

import time
from typing import Any

from peagle_deploy.bench.settings import BenchSettings
from peagle_deploy.promote.evaluate import LevelMeasurement, SmokeOutcome
from peagle_deploy.promote.gates import SmokeGate


def run_smoke(
    endpoint_name: str,
    gate: SmokeGate,
    *,
    region: str | None = None,
    boto_session: Any = None,
) -> SmokeOutcome:
    """One chat request; any error becomes the outcome's `error`, never an exception.

    A smoke failure is a gate verdict (shown in the report), not a crash of the command.
    """
    from peagle_deploy.sdk import PeagleEndpoint

    start = time.perf_counter()
    try:
        endpoint = PeagleEndpoint.from_name(endpoint_name, region=region, boto_session=boto_session)
        answer = endpoint.chat(
            [{"role": "user", "content": gate.prompt}], max_tokens=gate.max_tokens
        )
    except Exception as exc:  # ClientError, ModelError, timeouts: all mean "no answer"
        return SmokeOutcome(text="", error=f"{type(exc).__name__}: {exc}")
    return SmokeOutcome(
        text=_answer_text(answer), latency_ms=(time.perf_counter() - start) * 1000.0
    )


def _answer_text(answer: Any) -> str:
    """Text of a chat answer, whether the SDK returns a string, an object or the raw dict."""
    if isinstance(answer, str):
        return answer
    text = getattr(answer, "text", None)
    if isinstance(text, str):
        return text
    if isinstance(answer, dict):
        choices = answer.get("choices") or []
        if choices:
            message = choices[0].get("message") or {}
            return str(message.get("content") or "")
    return ""


def run_bench(
    endpoint_name: str,
    settings: BenchSettings,
    *,
    region: str | None = None,
    logs_delay_s: float | None = None,
    progress: bool = True,
    dataset_field: str = "gates bench.dataset",
) -> list[LevelMeasurement]:
    """A closed-loop sweep at the gate's levels, reduced to what the gates judge.

    The prompts are read first: a dataset the gates name but that cannot be read is
    refused (naming `dataset_field`) before any request reaches the endpoint.
    """
    from peagle_deploy.bench import SageMakerTarget, SweepConfig, load_dataset, run_sweep

    dataset = load_dataset(settings.dataset, field=dataset_field)

    options: dict[str, Any] = {}
    if logs_delay_s is not None:
        options["logs_delay_s"] = logs_delay_s
    target = SageMakerTarget(endpoint_name, region=region, label=endpoint_name, **options)
    config = SweepConfig(settings=settings, progress=progress)
    result = run_sweep(target, config, dataset=dataset)
    return [measurement_from_level(level) for level in result.levels]


def measurement_from_level(level: Any) -> LevelMeasurement:
    """`peagle bench`'s LevelResult (or its JSON dict) -> LevelMeasurement."""
    doc: dict[str, Any] = level if isinstance(level, dict) else level.to_dict()
    acceptance = doc.get("spec_decode_acceptance_length")
    p99 = doc.get("p99_ttft_ms")
    return LevelMeasurement(
        concurrency=int(doc["concurrency"]),
        output_throughput=float(doc.get("output_throughput") or 0.0),
        p99_ttft_ms=None if p99 is None else float(p99),
        completed=int(doc.get("completed") or 0),
        failed=int(doc.get("failed") or 0),
        spec_decode_acceptance_length=None if acceptance is None else float(acceptance),
    )
