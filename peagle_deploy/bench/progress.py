"""How a sweep reports progress: a listener the caller passes in.

The bench library never imports the CLI. `run_sweep(..., progress=listener)` calls the
listener; `RichProgress` is the terminal rendering (a bar per level, a countdown while
waiting for CloudWatch Logs) that the CLI and the promotion gates use.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from peagle_deploy.terminal import plain_console


class SweepProgress(Protocol):
    """Callbacks of one sweep; all are optional to act on.

    `level_advanced` gets running totals of the level (requests done, output tokens).
    `waiting` is called about once a second while the sweep waits for something with a
    known end (`remaining_s` counts down; 0 when the wait is over).
    """

    def level_started(self, label: str, concurrency: int, total: int | None) -> None: ...

    def level_advanced(self, completed: int, output_tokens: int) -> None: ...

    def level_finished(self) -> None: ...

    def waiting(self, why: str, remaining_s: float) -> None: ...


class NoProgress:
    """The silent listener."""

    def level_started(self, label: str, concurrency: int, total: int | None) -> None:
        pass

    def level_advanced(self, completed: int, output_tokens: int) -> None:
        pass

    def level_finished(self) -> None:
        pass

    def waiting(self, why: str, remaining_s: float) -> None:
        pass


class RichProgress:
    """A rich progress bar per level and a countdown for waits, on `console`.

    On a terminal both are live; elsewhere (a pipe, a CI log) bars are off and a wait is
    announced once, in one line. `bars=False` keeps only the wait messages, `waits=False`
    only the bars.
    """

    def __init__(self, console: Any = None, *, bars: bool = True, waits: bool = True) -> None:
        if console is None:
            console = plain_console(stderr=True)
        self.console = console
        self.bars = bars
        self.waits = waits
        self._progress: Any = None
        self._task: Any = None
        self._start = 0.0
        self._live: Any = None
        self._announced = False

    @property
    def live(self) -> bool:
        return bool(self.console.is_terminal)

    def level_started(self, label: str, concurrency: int, total: int | None) -> None:
        if not (self.bars and self.live):
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self._progress.start()
        self._start = time.perf_counter()
        self._task = self._progress.add_task(f"{label} c={concurrency}", total=total, rate="")

    def level_advanced(self, completed: int, output_tokens: int) -> None:
        if self._progress is None:
            return
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        self._progress.update(
            self._task, completed=completed, rate=f"{output_tokens / elapsed:,.0f} tok/s"
        )

    def level_finished(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def waiting(self, why: str, remaining_s: float) -> None:
        if not self.waits:
            return
        if remaining_s <= 0:
            self._announced = False
            if self._live is not None:
                self._live.stop()
                self._live = None
            return
        if not self.live:
            if not self._announced:
                self._announced = True
                self.console.print(f"waiting {remaining_s:.0f} s {why}", highlight=False)
            return
        from rich.text import Text

        text = Text(f"waiting {remaining_s:.0f} s {why}", style="dim")
        if self._live is None:
            from rich.live import Live

            self._live = Live(text, console=self.console, transient=True, auto_refresh=False)
            self._live.start()
        self._live.update(text, refresh=True)
