"""The closed-loop load generator and the sweep over concurrency levels.

At concurrency N, N workers each send a request, wait for it to finish, and send the
next one at once: the number of requests in flight stays N for the whole level (apart
from the drain at its end). This is what `vllm bench serve --max-concurrency N
--request-rate inf` does, and unlike batch-synchronous "waves" (send N, wait for all
N, repeat) it does not let the server idle while the slowest request of a wave ends.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from peagle_deploy.bench.datasets import Dataset, Messages, PromptSampler, load_dataset
from peagle_deploy.bench.metrics import RequestOutput, SpecDecodeStats, level_metrics
from peagle_deploy.bench.targets import Target
from peagle_deploy.errors import SpecError

DEFAULT_LEVELS: tuple[int, ...] = (1, 4, 8, 32, 128)
RESULT_FORMAT_VERSION = 1


@dataclass
class SweepConfig:
    """How a sweep runs. Every field has a CLI flag of the same name.

    Per level: `num_prompts` requests, or as many as start within `duration_s`
    seconds, or whichever limit comes first when both are set; with neither, each
    level runs max(32, 4 x concurrency) requests. `warmup` requests run before each
    level at that level's concurrency (capped at the warm-up count) and are not
    measured.
    """

    concurrency: list[int] = field(default_factory=lambda: list(DEFAULT_LEVELS))
    num_prompts: int | None = None
    duration_s: float | None = None
    warmup: int = 2
    max_tokens: int = 256
    temperature: float = 0.0
    dataset: str = "humaneval"
    seed: int = 0
    hourly_price: float | None = None
    """Price of the whole endpoint per hour (any currency); enables cost per 1M tokens."""
    progress: bool = True

    def validate(self) -> None:
        if not self.concurrency:
            raise SpecError("--concurrency", "no levels given", "comma-separated integers >= 1")
        for c in self.concurrency:
            if not isinstance(c, int) or c < 1:
                raise SpecError("--concurrency", f"{c!r} is not a level", "integers >= 1")
        if self.num_prompts is not None and self.num_prompts < 1:
            raise SpecError("--num-prompts", f"{self.num_prompts} is too small", ">= 1")
        if self.duration_s is not None and self.duration_s <= 0:
            raise SpecError("--duration", f"{self.duration_s} is not positive", "> 0 seconds")
        if self.warmup < 0:
            raise SpecError("--warmup", f"{self.warmup} is negative", ">= 0")
        if self.max_tokens < 1:
            raise SpecError("--max-tokens", f"{self.max_tokens} is too small", ">= 1")
        if not 0.0 <= self.temperature <= 2.0:
            raise SpecError("--temperature", f"{self.temperature} is out of range", "0 to 2")
        if self.hourly_price is not None and self.hourly_price <= 0:
            raise SpecError("--hourly-price", f"{self.hourly_price} is not positive", "> 0")

    def requests_for(self, concurrency: int) -> int | None:
        """The request cap of one level (None: only the duration limits it)."""
        if self.num_prompts is not None:
            return self.num_prompts
        if self.duration_s is not None:
            return None
        return max(32, 4 * concurrency)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("progress")
        return out


@dataclass
class LevelResult:
    """The metrics of one concurrency level, keyed as `vllm bench serve` keys them."""

    concurrency: int
    metrics: dict[str, Any]
    spec_decode: SpecDecodeStats | None = None
    cost_per_million_output_tokens: float | None = None

    @property
    def output_throughput(self) -> float:
        return float(self.metrics["output_throughput"])

    def get(self, key: str) -> Any:
        """One metric by its `vllm bench serve` name (None when not measured)."""
        return self.to_dict().get(key)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"concurrency": self.concurrency, **self.metrics}
        if self.spec_decode is not None:
            out.update(self.spec_decode.to_dict())
        else:
            out["spec_decode_acceptance_rate"] = None
            out["spec_decode_acceptance_length"] = None
        if self.cost_per_million_output_tokens is not None:
            out["cost_per_million_output_tokens"] = self.cost_per_million_output_tokens
        return out

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LevelResult:
        metrics = {k: v for k, v in doc.items() if k != "concurrency"}
        spec = None
        if doc.get("spec_decode_acceptance_rate") is not None:
            spec = SpecDecodeStats(
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
            spec_decode=spec,
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
            "format_version": RESULT_FORMAT_VERSION,
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
    def from_dict(cls, doc: dict[str, Any]) -> SweepResult:
        try:
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
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError("results", f"not a sweep result ({exc})", '{"levels": [...]}') from exc


ProgressHook = Callable[[int, RequestOutput], None]


async def run_level(
    target: Target,
    prompts: PromptSampler,
    concurrency: int,
    *,
    max_tokens: int,
    temperature: float,
    num_requests: int | None,
    duration_s: float | None,
    on_done: ProgressHook | None = None,
) -> tuple[list[RequestOutput], float]:
    """Run one closed-loop level; returns the outputs and the benchmark duration.

    The duration runs from just before the first request to the end of the last one
    (requests started before the deadline are allowed to finish and are counted).
    """
    if num_requests is None and duration_s is None:
        raise ValueError("a level needs a request count or a duration")
    outputs: list[RequestOutput] = []
    issued = 0
    start = time.perf_counter()
    deadline = start + duration_s if duration_s is not None else None

    async def worker() -> None:
        nonlocal issued
        while True:
            if num_requests is not None and issued >= num_requests:
                return
            if deadline is not None and time.perf_counter() >= deadline:
                return
            issued += 1
            messages: Messages = next(prompts)
            try:
                out = await target.request(messages, max_tokens, temperature)
            except Exception as exc:  # a target bug must not stop the other workers
                out = RequestOutput(start_time=time.perf_counter(), error=repr(exc))
            outputs.append(out)
            if on_done is not None:
                on_done(len(outputs), out)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return outputs, time.perf_counter() - start


@contextmanager
def _gc_tuned() -> Iterator[None]:
    """Fewer, cheaper garbage collections while a level runs.

    Every stream event allocates a few dicts, so the default gen-0 threshold (700)
    triggers a collection every ~100 events, and full collections walk every object
    the process has. Freezing what exists before the level and raising the gen-0
    threshold keeps the collector off the hot path (about 6 % of client CPU at
    concurrency 128); cycles are still collected, just less often.
    """
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(max(old[0], 50_000), old[1], old[2])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


class _LevelProgress:
    """A rich progress bar per level; a no-op when disabled or not on a terminal."""

    def __init__(self, enabled: bool, label: str) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.label = label
        self._progress: Any = None
        self._task: Any = None
        self._tokens = 0
        self._start = 0.0

    def begin(self, concurrency: int, total: int | None, duration_s: float | None) -> None:
        if not self.enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        from peagle_deploy.cli.output import err_console

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=err_console,
            transient=False,
        )
        self._progress.start()
        self._tokens = 0
        self._start = time.perf_counter()
        self._task = self._progress.add_task(
            f"{self.label} c={concurrency}",
            total=total if total is not None else None,
            rate="",
        )
        self._duration = duration_s

    def done(self, count: int, out: RequestOutput) -> None:
        if self._progress is None:
            return
        self._tokens += out.output_tokens or 0
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        self._progress.update(
            self._task, completed=count, rate=f"{self._tokens / elapsed:,.0f} tok/s"
        )

    def end(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


async def run_sweep_async(
    target: Target,
    config: SweepConfig | None = None,
    *,
    dataset: Dataset | None = None,
    kind: str | None = None,
    k: int | None = None,
) -> SweepResult:
    """Run every level of `config` against `target` (which this function starts and
    closes). See `run_sweep` for the synchronous form."""
    config = config or SweepConfig()
    config.validate()
    data = dataset or load_dataset(config.dataset)
    started = _now()
    levels: list[LevelResult] = []
    marks: list[tuple[Any, Any]] = []
    try:
        await target.start(max(config.concurrency))
        for concurrency in config.concurrency:
            if config.warmup:
                await run_level(
                    target,
                    data.sampler(config.seed + 1),
                    min(concurrency, config.warmup),
                    max_tokens=config.max_tokens,
                    temperature=config.temperature,
                    num_requests=config.warmup,
                    duration_s=None,
                )
            progress = _LevelProgress(config.progress, target.label)
            total = config.requests_for(concurrency)
            progress.begin(concurrency, total, config.duration_s)
            before = await target.spec_decode_mark()
            try:
                with _gc_tuned():
                    outputs, duration = await run_level(
                        target,
                        data.sampler(config.seed),
                        concurrency,
                        max_tokens=config.max_tokens,
                        temperature=config.temperature,
                        num_requests=total,
                        duration_s=config.duration_s,
                        on_done=progress.done,
                    )
            finally:
                progress.end()
            after = await target.spec_decode_mark()
            marks.append((before, after))
            metrics = level_metrics(outputs, duration)
            levels.append(
                LevelResult(
                    concurrency=concurrency,
                    metrics=metrics,
                    cost_per_million_output_tokens=cost_per_million(
                        config.hourly_price, metrics["output_throughput"]
                    ),
                )
            )
        for lv, (before, after) in zip(levels, marks, strict=True):
            lv.spec_decode = await target.spec_decode_stats(before, after)
    finally:
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


def run_sweep(
    target: Target,
    config: SweepConfig | None = None,
    *,
    dataset: Dataset | None = None,
    kind: str | None = None,
    k: int | None = None,
) -> SweepResult:
    """Run a concurrency sweep against one target and return its results.

    Stable API (the promotion gates call it)::

        from peagle_deploy.bench import SweepConfig, run_sweep, target_from_string
        result = run_sweep(target_from_string("endpoint:my-endpoint", region="us-west-2"),
                           SweepConfig(concurrency=[1, 8], num_prompts=32, max_tokens=256))
        result.level(8).output_throughput, result.level(8).get("p99_ttft_ms")

    Must not be called from inside a running event loop (use `run_sweep_async`).
    """
    return asyncio.run(run_sweep_async(target, config, dataset=dataset, kind=kind, k=k))


def cost_per_million(hourly_price: float | None, output_throughput: float) -> float | None:
    """Price of one million output tokens at the measured throughput (None without a
    price or without throughput)."""
    if hourly_price is None or output_throughput <= 0:
        return None
    return round(hourly_price / (output_throughput * 3600.0) * 1_000_000.0, 6)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def levels_from_text(text: str, flag: str = "--concurrency") -> list[int]:
    """`1,4,8` -> [1, 4, 8], with an error naming the flag."""
    levels: list[int] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise SpecError(
                flag, f"{part!r} is not an integer", "comma-separated integers >= 1"
            ) from None
        if value < 1:
            raise SpecError(flag, f"{value} is below 1", "comma-separated integers >= 1")
        levels.append(value)
    if not levels:
        raise SpecError(flag, "no levels given", "comma-separated integers >= 1")
    return levels


def summary_rows(result: SweepResult, keys: Sequence[str]) -> list[list[Any]]:
    """Table rows (one per level) of the chosen metric keys, for reports and the CLI."""
    return [[lv.to_dict().get(key) for key in keys] for lv in result.levels]
