"""`--workers N`: one level's closed loop in N processes, merged exactly.

Why: one Python process parses about 40k stream events per second; past that the
benchmark measures its own client, not the endpoint (benchmarks/bench_workers.py). Each
worker is a spawned process with its own event loop and its own copy of the target
(`Target.clone()`, started in the worker), running a share of the level's concurrency
and of its requests.

Merging is exact, not an approximation:
- every worker sends back every RequestOutput; the level's metrics are computed once
  from all of them, so a percentile is a percentile of all samples (never an average of
  per-worker percentiles);
- all workers start their measured part at one agreed instant, and the level's window is
  the earliest first-request start to the latest last-request end over all workers,
  which is what one process would measure; throughput is total tokens over that window.
  This needs one clock for all processes: `time.perf_counter` is the system-wide
  monotonic clock on Linux (CLOCK_MONOTONIC), macOS and Windows.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from peagle_deploy.bench.closed_loop import LevelRun, closed_loop, gc_tuned
from peagle_deploy.bench.datasets import Dataset, Messages
from peagle_deploy.bench.metrics import RequestOutput
from peagle_deploy.errors import PeagleError

START_MARGIN_S = 0.25
"""How far ahead the common start instant is set: every worker must be waiting by then."""
PROGRESS_EVERY_S = 0.25
ABORT_WAIT_S = 5.0
"""How long an aborted worker gets to die after SIGTERM before it is killed."""


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` as `parts` integers differing by at most one (larger ones first)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def split_like(total: int, weights: Sequence[int]) -> list[int]:
    """`total` split in proportion to `weights` (largest remainder; sums to `total`)."""
    weight_sum = sum(weights)
    if weight_sum <= 0:
        return [0] * len(weights)
    exact = [total * w / weight_sum for w in weights]
    out = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: exact[i] - out[i], reverse=True)
    for i in by_remainder[: total - sum(out)]:
        out[i] += 1
    return out


def merge_runs(runs: Sequence[LevelRun]) -> LevelRun:
    """All workers' outputs over the window that covers them all."""
    if not runs:
        raise ValueError("no worker ran this level")
    outputs = [out for run in runs for out in run.outputs]
    return LevelRun(outputs, min(r.start for r in runs), max(r.end for r in runs))


@dataclass(frozen=True)
class Share:
    """One worker's part of a level."""

    concurrency: int
    requests: int | None
    warmup: int
    rank: int
    """Position among the active workers: this worker takes prompts rank, rank+A, ..."""
    active: int


@dataclass(frozen=True)
class LevelOrder:
    """What the parent asks a worker to run: its warm-up, or its measured share."""

    share: Share
    seed: int
    max_tokens: int
    temperature: float
    warmup: bool
    start_at: float = 0.0
    """perf_counter instant at which every worker starts its measured requests."""
    deadline: float | None = None
    """perf_counter instant after which no request starts (duration-limited levels)."""


def plan_shares(
    workers: int, concurrency: int, requests: int | None, warmup: int
) -> dict[int, Share]:
    """Worker index -> its share; workers left without concurrency or requests sit out."""
    conc = split_evenly(concurrency, workers)
    reqs: list[int | None] = (
        list(split_like(requests, conc)) if requests is not None else [None] * workers
    )
    active = [i for i in range(workers) if conc[i] > 0 and reqs[i] != 0]
    warm = split_like(warmup, [conc[i] for i in active])
    return {
        i: Share(conc[i], reqs[i], warm[rank], rank, len(active)) for rank, i in enumerate(active)
    }


def _strided(prompts: Iterator[Messages], rank: int, active: int) -> Iterator[Messages]:
    return itertools.islice(prompts, rank, None, active)


# --- the worker process --------------------------------------------------------------
def _worker_main(conn: Connection, target: Any, dataset: Dataset) -> None:
    try:
        asyncio.run(_serve(conn, target, dataset))
    except (KeyboardInterrupt, BrokenPipeError, EOFError):
        pass
    finally:
        conn.close()


async def _serve(conn: Connection, target: Any, dataset: Dataset) -> None:
    """Start the target, then run the parent's LevelOrders until None. Blocking on the
    pipe is fine here: no request is in flight between orders."""
    max_concurrency: int = conn.recv()
    try:
        await target.start(max_concurrency)
    except Exception as exc:
        conn.send(("error", _describe(exc)))
        await target.close()
        return
    conn.send(("ready",))
    try:
        while True:
            order = conn.recv()
            if order is None:  # stop
                return
            try:
                reply = await _run(order, target, dataset, conn)
            except Exception as exc:
                conn.send(("error", _describe(exc)))
                return
            conn.send(reply)
    finally:
        await target.close()


async def _run(order: LevelOrder, target: Any, dataset: Dataset, conn: Connection) -> Any:
    share = order.share
    prompts = _strided(dataset.sampler(order.seed), share.rank, share.active)
    if order.warmup:
        await closed_loop(
            target,
            prompts,
            min(share.concurrency, share.warmup),
            max_tokens=order.max_tokens,
            temperature=order.temperature,
            num_requests=share.warmup,
            duration_s=None,
        )
        return ("warm",)
    deadline = order.deadline
    tokens = 0
    last_report = 0.0

    def on_done(count: int, out: RequestOutput) -> None:
        nonlocal tokens, last_report
        tokens += out.output_tokens or 0
        now = time.perf_counter()
        if now - last_report >= PROGRESS_EVERY_S:
            last_report = now
            conn.send(("progress", count, tokens))

    await asyncio.sleep(max(0.0, order.start_at - time.perf_counter()))
    with gc_tuned():
        run = await closed_loop(
            target,
            prompts,
            share.concurrency,
            max_tokens=order.max_tokens,
            temperature=order.temperature,
            num_requests=share.requests,
            duration_s=None if deadline is None else deadline - time.perf_counter(),
            deadline=deadline,
            on_done=on_done,
        )
    return ("result", run)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, PeagleError):
        return str(exc)
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


# --- the parent side -------------------------------------------------------------------
Progress = Callable[[int, int], None]
"""(requests done, output tokens) over all workers so far in the level."""


class WorkerPool:
    """N worker processes for one sweep; `run_level` blocks (call it from a thread)."""

    def __init__(self, target: Any, dataset: Dataset, workers: int, max_concurrency: int):
        clone = getattr(target, "clone", None)
        if clone is None:
            from peagle_deploy.errors import InputError

            raise InputError(
                "--workers",
                f"{type(target).__name__} cannot run in worker processes (it has no clone())",
                "1 for this target",
            )
        self.workers = workers
        ctx = multiprocessing.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        share = max(split_evenly(max_concurrency, workers))
        try:
            for i in range(workers):
                parent, child = ctx.Pipe()
                proc = ctx.Process(
                    target=_worker_main,
                    args=(child, clone(), dataset),
                    name=f"peagle-bench-worker-{i}",
                    daemon=True,
                )
                proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
                parent.send(share)  # the most concurrency this worker will run
            self._collect(range(workers), "ready", None)
        except BaseException:
            self.abort()
            raise

    def run_level(
        self,
        concurrency: int,
        *,
        requests: int | None,
        duration_s: float | None,
        warmup: int,
        seed: int,
        max_tokens: int,
        temperature: float,
        on_progress: Progress | None = None,
    ) -> LevelRun:
        shares = plan_shares(self.workers, concurrency, requests, warmup)
        if warmup:
            for i, share in shares.items():
                if share.warmup:
                    order = LevelOrder(share, seed + 1, max_tokens, temperature, warmup=True)
                    self._conns[i].send(order)
            self._collect([i for i, s in shares.items() if s.warmup], "warm", None)
        start_at = time.perf_counter() + START_MARGIN_S
        deadline = start_at + duration_s if duration_s is not None else None
        for i, share in shares.items():
            order = LevelOrder(
                share, seed, max_tokens, temperature, False, start_at=start_at, deadline=deadline
            )
            self._conns[i].send(order)
        runs = self._collect(list(shares), "result", on_progress)
        return merge_runs(runs)

    def _collect(
        self, indices: Sequence[int] | range, expect: str, on_progress: Progress | None
    ) -> list[Any]:
        """Wait for `expect` from each worker in `indices`, relaying progress messages."""
        pending = {self._conns[i]: i for i in indices}
        results: dict[int, Any] = {}
        counts = dict.fromkeys(pending.values(), (0, 0))
        while pending:
            for conn in wait(list(pending)):
                assert isinstance(conn, Connection)
                i = pending[conn]
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    code = self._procs[i].exitcode
                    raise PeagleError(
                        f"--workers: worker {i} ended unexpectedly (exit code {code})"
                    ) from None
                if message[0] == "progress":
                    counts[i] = (message[1], message[2])
                    if on_progress is not None:
                        on_progress(
                            sum(c for c, _ in counts.values()), sum(t for _, t in counts.values())
                        )
                    continue
                if message[0] == "error":
                    raise PeagleError(f"--workers: worker {i}: {message[1]}")
                if message[0] != expect:
                    raise PeagleError(f"--workers: worker {i} answered {message[0]!r}")
                results[i] = message[1] if len(message) > 1 else None
                del pending[conn]
        return [results[i] for i in sorted(results)]

    def abort(self) -> None:
        """Stop every worker now (an interrupted or failed sweep): SIGTERM, then SIGKILL
        for one that is still there after ABORT_WAIT_S. A worker that dies closes its
        streams with it; once no process holds multiprocessing's resource-tracker pipe,
        the tracker ends too."""
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self._procs:
            proc.join(timeout=ABORT_WAIT_S)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=ABORT_WAIT_S)
        for conn in self._conns:
            conn.close()
        self._conns.clear()
        self._procs.clear()

    def close(self) -> None:
        """End the workers after a finished sweep: each is told to stop and given time to
        close its target; one that does not is terminated."""
        for conn in self._conns:
            with contextlib.suppress(OSError, ValueError):  # already gone
                conn.send(None)
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        for conn in self._conns:
            conn.close()
        self._conns.clear()
        self._procs.clear()
