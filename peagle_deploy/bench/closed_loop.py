"""One closed-loop level: N request loops, each sending the next request the moment its
previous one ends.

The number of requests in flight stays N for the whole level (apart from the drain at
its end). This is what `vllm bench serve --max-concurrency N --request-rate inf` does,
and unlike batch-synchronous "waves" (send N, wait for all N, repeat) it does not let
the server idle while the slowest request of a wave ends.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from peagle_deploy.bench.datasets import Messages
from peagle_deploy.bench.metrics import RequestOutput

if TYPE_CHECKING:
    from peagle_deploy.bench.targets import Target

DoneHook = Callable[[int, RequestOutput], None]
"""Called after each request with (requests done so far in this level, the output)."""


@dataclass
class LevelRun:
    """What one process measured in one level; `start`/`end` are perf_counter seconds."""

    outputs: list[RequestOutput]
    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start


async def closed_loop(
    target: Target,
    prompts: Iterator[Messages],
    concurrency: int,
    *,
    max_tokens: int,
    temperature: float,
    num_requests: int | None,
    duration_s: float | None,
    on_done: DoneHook | None = None,
    deadline: float | None = None,
) -> LevelRun:
    """Run one level. It lasts from just before the first request to the end of the last
    one; requests started before the deadline may finish and are counted. `deadline`
    (perf_counter) overrides `duration_s` when several processes share one."""
    if num_requests is None and duration_s is None:
        raise ValueError("a level needs a request count or a duration")
    outputs: list[RequestOutput] = []
    issued = 0
    start = time.perf_counter()
    if deadline is None and duration_s is not None:
        deadline = start + duration_s

    async def loop() -> None:
        nonlocal issued
        while True:
            if num_requests is not None and issued >= num_requests:
                return
            if deadline is not None and time.perf_counter() >= deadline:
                return
            issued += 1
            messages = next(prompts)
            try:
                out = await target.request(messages, max_tokens, temperature)
            except Exception as exc:  # a target bug must not stop the other loops
                out = RequestOutput(start_time=time.perf_counter(), error=repr(exc))
            outputs.append(out)
            if on_done is not None:
                on_done(len(outputs), out)

    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return LevelRun(outputs, start, time.perf_counter())


@contextmanager
def gc_tuned() -> Iterator[None]:
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
