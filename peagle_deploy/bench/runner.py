"""The sweep over concurrency levels: its results, and the loop that runs them.

Each level is a closed loop (`closed_loop`) in this process, or split over worker
processes (`workers`, `SweepConfig.workers > 1`); either way the level's metrics are
computed once, from every request's output. What a sweep runs is a `SweepConfig`
(`bench.settings`).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from peagle_deploy.bench.closed_loop import DoneHook, LevelRun, closed_loop, gc_tuned
from peagle_deploy.bench.datasets import Dataset, PromptSampler, load_dataset
from peagle_deploy.bench.metrics import AcceptanceStats, RequestOutput, level_metrics
from peagle_deploy.bench.progress import NoProgress, SweepProgress
from peagle_deploy.bench.result_shape import FORMAT_VERSION, check_run
from peagle_deploy.bench.settings import BenchSettings, SweepConfig
from peagle_deploy.bench.targets import Target

__all__ = ["LevelResult", "SweepConfig", "SweepResult", "run_sweep", "run_sweep_async"]

if TYPE_CHECKING:
    from peagle_deploy.bench.workers import WorkerPool


@dataclass
class LevelResult:
    """The metrics of one concurrency level, keyed as `vllm bench serve` keys them."""

    concurrency: int
    metrics: dict[str, Any]
    acceptance: AcceptanceStats | None = None
    cost_per_million_output_tokens: float | None = None

    @property
    def output_throughput(self) -> float:
        return float(self.metrics["output_throughput"])

    def get(self, key: str) -> Any:
        """One metric by its `vllm bench serve` name (None when not measured)."""
        return self.to_dict().get(key)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"concurrency": self.concurrency, **self.metrics}
        if self.acceptance is not None:
            out.update(self.acceptance.to_dict())
        else:
            out["spec_decode_acceptance_rate"] = None
            out["spec_decode_acceptance_length"] = None
        if self.cost_per_million_output_tokens is not None:
            out["cost_per_million_output_tokens"] = self.cost_per_million_output_tokens
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LevelResult:
        metrics = {k: v for k, v in doc.items() if k != "concurrency"}
        acceptance = None
        if doc.get("spec_decode_acceptance_rate") is not None:
            acceptance = AcceptanceStats(
                acceptance_rate=float(doc["spec_decode_acceptance_rate"]),
                acceptance_length=float(doc.get("spec_decode_acceptance_length") or 0.0),
                num_drafts=doc.get("spec_decode_num_drafts"),
                draft_tokens=doc.get("spec_decode_draft_tokens"),
                accepted_tokens=doc.get("spec_decode_accepted_tokens"),
                source=str(doc.get("spec_decode_source", "prometheus")),
                per_position=tuple(doc.get("spec_decode_per_position_acceptance_rates") or ()),
            )
        for key in list(metrics):
            if key.startswith("spec_decode_") or key == "cost_per_million_output_tokens":
                metrics.pop(key)
        return cls(
            concurrency=int(doc["concurrency"]),
            metrics=metrics,
            acceptance=acceptance,
            cost_per_million_output_tokens=doc.get("cost_per_million_output_tokens"),
        )


@dataclass
class SweepResult:
    """One target's sweep. `label`, `kind` and `k` place it in a comparison."""

    label: str
    target: str
    model: str | None
    dataset: str
    config: dict[str, Any]
    levels: list[LevelResult]
    started_at: str
    finished_at: str
    kind: str | None = None
    k: int | None = None

    def level(self, concurrency: int) -> LevelResult:
        for lv in self.levels:
            if lv.concurrency == concurrency:
                return lv
        raise KeyError(f"no level with concurrency {concurrency} in {self.label}")

    @property
    def total_failed(self) -> int:
        return sum(int(lv.metrics.get("failed", 0)) for lv in self.levels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "label": self.label,
            "kind": self.kind,
            "k": self.k,
            "target": self.target,
            "model": self.model,
            "dataset": self.dataset,
            "config": self.config,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "levels": [lv.to_dict() for lv in self.levels],
        }

    @classmethod
    def from_dict(cls, doc: Any, where: str = "run") -> SweepResult:
        """A sweep result read back (checked first: `bench.result_shape`)."""
        check_run(doc, where)
        return cls(
            label=str(doc.get("label") or "target"),
            target=str(doc.get("target") or ""),
            model=doc.get("model"),
            dataset=str(doc.get("dataset") or ""),
            config=dict(doc.get("config") or {}),
            levels=[LevelResult.from_dict(lv) for lv in doc["levels"]],
            started_at=str(doc.get("started_at") or ""),
            finished_at=str(doc.get("finished_at") or ""),
            kind=doc.get("kind"),
            k=doc.get("k"),
        )


async def run_level(
    target: Target,
    prompts: PromptSampler,
    concurrency: int,
    *,
    max_tokens: int,
    temperature: float,
    num_requests: int | None,
    duration_s: float | None,
    on_done: DoneHook | None = None,
) -> tuple[list[RequestOutput], float]:
    """Run one closed-loop level in this process; returns the outputs and the benchmark
    duration (first request start to last request end)."""
    run = await closed_loop(
        target,
        prompts,
        concurrency,
        max_tokens=max_tokens,
        temperature=temperature,
        num_requests=num_requests,
        duration_s=duration_s,
        on_done=on_done,
    )
    return run.outputs, run.duration


LOGS_WAIT = "for the container's metric lines in CloudWatch Logs (--logs-delay)"


async def run_sweep_async(
    target: Target,
    config: SweepConfig | BenchSettings | None = None,
    *,
    dataset: Dataset | None = None,
    kind: str | None = None,
    k: int | None = None,
    progress: SweepProgress | None = None,
) -> SweepResult:
    """Run every level of `config` against `target` (which this function starts and
    closes). See `run_sweep` for the synchronous form."""
    config = _as_config(config)
    sweep = config.settings
    data = dataset or load_dataset(sweep.dataset)
    listener = progress if progress is not None else default_progress(config.progress)
    started = _now()
    levels: list[LevelResult] = []
    marks: list[tuple[Any, Any]] = []
    pool: WorkerPool | None = None
    try:
        # With workers the target here only discovers the model and takes the marks.
        await target.start(max(sweep.concurrency) if config.workers == 1 else 2)
        if config.workers > 1:
            from peagle_deploy.bench.workers import WorkerPool

            pool = WorkerPool(target, data, config.workers, max(sweep.concurrency))
        for concurrency in sweep.concurrency:
            total = config.requests_for(concurrency)
            if pool is None and sweep.warmup:
                await closed_loop(
                    target,
                    data.sampler(sweep.seed + 1),
                    min(concurrency, sweep.warmup),
                    max_tokens=sweep.max_tokens,
                    temperature=sweep.temperature,
                    num_requests=sweep.warmup,
                    duration_s=None,
                )
            before = await target.acceptance_mark()
            listener.level_started(target.label, concurrency, total)
            try:
                run = await _measure_level(target, data, config, concurrency, total, pool, listener)
            finally:
                listener.level_finished()
            after = await target.acceptance_mark()
            marks.append((before, after))
            metrics = level_metrics(run.outputs, run.duration)
            levels.append(
                LevelResult(
                    concurrency=concurrency,
                    metrics=metrics,
                    cost_per_million_output_tokens=cost_per_million(
                        config.hourly_price, metrics["output_throughput"]
                    ),
                )
            )
        await _read_acceptance(target, levels, marks, listener)
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM through the CLI, a cancelled task) or failed: the
        # workers are mid-level, so they are stopped now rather than asked to finish.
        if pool is not None:
            pool.abort()
        raise
    finally:
        if pool is not None:
            pool.close()  # a no-op after abort()
        await target.close()
    return SweepResult(
        label=target.label,
        target=target.description,
        model=getattr(target, "model", None),
        dataset=data.name,
        config=config.to_dict(),
        levels=levels,
        started_at=started,
        finished_at=_now(),
        kind=kind,
        k=k,
    )


async def _measure_level(  # noqa: PLR0917 (private; called once)
    target: Target,
    data: Dataset,
    config: SweepConfig,
    concurrency: int,
    total: int | None,
    pool: WorkerPool | None,
    listener: SweepProgress,
) -> LevelRun:
    sweep = config.settings
    if pool is not None:
        return await asyncio.to_thread(
            pool.run_level,
            concurrency,
            requests=total,
            duration_s=sweep.duration_s,
            warmup=sweep.warmup,
            seed=sweep.seed,
            max_tokens=sweep.max_tokens,
            temperature=sweep.temperature,
            on_progress=listener.level_advanced,
        )
    tokens = 0

    def on_done(count: int, out: RequestOutput) -> None:
        nonlocal tokens
        tokens += out.output_tokens or 0
        listener.level_advanced(count, tokens)

    with gc_tuned():
        return await closed_loop(
            target,
            data.sampler(sweep.seed),
            concurrency,
            max_tokens=sweep.max_tokens,
            temperature=sweep.temperature,
            num_requests=total,
            duration_s=sweep.duration_s,
            on_done=on_done,
        )


async def _read_acceptance(
    target: Target,
    levels: list[LevelResult],
    marks: list[tuple[Any, Any]],
    listener: SweepProgress,
) -> None:
    """Acceptance figures of the levels where something completed.

    A level where nothing completed has nothing to read, and is not waited for: a
    missing endpoint used to fail and then wait --logs-delay for nothing. When the
    target says when its figures will be readable, the wait is a countdown.
    """
    measured = [
        (lv, mark) for lv, mark in zip(levels, marks, strict=True) if lv.metrics.get("completed")
    ]
    ready_at = getattr(target, "acceptance_ready_at", None)
    if measured and ready_at is not None:
        until = max(float(ready_at(after)) for _, (_, after) in measured)
        while (remaining := until - time.time()) > 0:
            listener.waiting(LOGS_WAIT, remaining)
            await asyncio.sleep(min(1.0, remaining))
        listener.waiting(LOGS_WAIT, 0.0)
    for lv, (before, after) in measured:
        lv.acceptance = await target.acceptance_stats(before, after)


def run_sweep(
    target: Target,
    config: SweepConfig | BenchSettings | None = None,
    *,
    dataset: Dataset | None = None,
    kind: str | None = None,
    k: int | None = None,
    progress: SweepProgress | None = None,
) -> SweepResult:
    """Run a concurrency sweep against one target and return its results.

    Stable API (the promotion gates call it)::

        from peagle_deploy.bench import BenchSettings, run_sweep, target_from_string
        result = run_sweep(target_from_string("endpoint:my-endpoint", region="us-west-2"),
                           BenchSettings(concurrency=[1, 8], num_prompts=32, max_tokens=256))
        result.level(8).output_throughput, result.level(8).get("p99_ttft_ms")

    `config` is a SweepConfig, or BenchSettings alone (a SweepConfig with those settings).
    `progress` receives the sweep's progress (default: a bar on a terminal's stderr when
    `config.progress`). Must not be called from inside a running event loop (use
    `run_sweep_async`).
    """
    return asyncio.run(
        run_sweep_async(target, config, dataset=dataset, kind=kind, k=k, progress=progress)
    )


def _as_config(config: SweepConfig | BenchSettings | None) -> SweepConfig:
    if config is None:
        return SweepConfig()
    if isinstance(config, BenchSettings):
        return SweepConfig(settings=config)
    return config


def default_progress(enabled: bool) -> SweepProgress:
    """A progress bar on stderr when enabled and stderr is a terminal, else silence."""
    if enabled and sys.stderr.isatty():
        from peagle_deploy.bench.progress import RichProgress

        return RichProgress()
    return NoProgress()


def cost_per_million(hourly_price: float | None, output_throughput: float) -> float | None:
    """Price of one million output tokens at the measured throughput (None without a
    price or without throughput)."""
    if hourly_price is None or output_throughput <= 0:
        return None
    return round(hourly_price / (output_throughput * 3600.0) * 1_000_000.0, 6)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def summary_rows(result: SweepResult, keys: Sequence[str]) -> list[list[Any]]:
    """Table rows (one per level) of the chosen metric keys, for reports and the CLI."""
    return [[lv.to_dict().get(key) for key in keys] for lv in result.levels]
