"""Run the doctor's reads concurrently, on threads a Ctrl-C never waits for.

A ThreadPoolExecutor joins its threads when the pool closes and again when the
interpreter exits, so a read stalled on a socket (botocore: 60 s read timeout, three
attempts) kept `peagle doctor` alive for minutes after Ctrl-C. Here the workers are
daemon threads that nothing joins: the caller waits on an event in short slices (so the
main thread takes the KeyboardInterrupt at once), and on any interruption the tasks not
started yet are dropped and the running ones are left behind to die with the process.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
WAIT_SLICE_S = 0.05
"""How often the waiting thread wakes up (and can take a KeyboardInterrupt)."""


class _Run:
    def __init__(self, count: int) -> None:
        self.results: list[Any] = [None] * count
        self.errors: list[BaseException | None] = [None] * count
        self.left = count
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.cancelled = threading.Event()
        if count == 0:
            self.done.set()

    def finish(self, index: int, result: Any, error: BaseException | None) -> None:
        with self.lock:
            self.results[index] = result
            self.errors[index] = error
            self.left -= 1
            if self.left == 0:
                self.done.set()


def _work(tasks: queue.SimpleQueue[tuple[int, Callable[[], Any]] | None], run: _Run) -> None:
    while True:
        item = tasks.get()
        if item is None or run.cancelled.is_set():
            return
        index, task = item
        try:
            result, error = task(), None
        except BaseException as exc:  # reported to the caller, which decides
            result, error = None, exc
        run.finish(index, result, error)


def run_all(tasks: Sequence[Callable[[], T]], *, workers: int, name: str) -> list[T]:
    """Every task's result, in order; the first task's exception is raised.

    Interrupted (KeyboardInterrupt, or any exception in the waiting thread), it stops
    handing out tasks and returns at once, without waiting for running ones.
    """
    run = _Run(len(tasks))
    pending: queue.SimpleQueue[tuple[int, Callable[[], Any]] | None] = queue.SimpleQueue()
    for item in enumerate(tasks):
        pending.put(item)
    count = max(1, min(workers, len(tasks)))
    for n in range(count):
        pending.put(None)
        threading.Thread(target=_work, args=(pending, run), name=f"{name}-{n}", daemon=True).start()
    try:
        while not run.done.wait(WAIT_SLICE_S):
            pass
    except BaseException:
        run.cancelled.set()
        raise
    for error in run.errors:
        if error is not None:
            raise error
    return list(run.results)
