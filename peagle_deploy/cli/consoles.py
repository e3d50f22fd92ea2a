"""The rich console every `peagle` command prints with (peagle_deploy.cli.output)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from rich.console import Console, RenderableType

from peagle_deploy.terminal import CONSOLE_OPTIONS


def plain_width_console(*, stderr: bool, pipe_width: Callable[[], int]) -> Console:
    """A console with emoji codes off (`aws:x:` stays as typed; see
    peagle_deploy.terminal) that lays tables out as `_Console` says, `pipe_width()`
    columns wide off a terminal."""
    return _Console(pipe_width, stderr=stderr, **CONSOLE_OPTIONS)


class _Console(Console):
    """Off a terminal (a pipe, a CI log, a file) rich lays output out for 80 columns:
    lines would break mid-sentence and table cells would be wrapped or cut to `…`, so
    greps over `peagle list`, CI logs and `peagle demo > log` would miss names. There,
    plain-text lines are not wrapped; a table gets COLUMNS (else PIPE_WIDTH) columns, its
    long text folded, unless that would cut a cell to `…`: then the width it needs.
    Panels and rules keep 80 columns. On a terminal everything fits the window as usual."""

    def __init__(self, pipe_width: Callable[[], int], **options: Any) -> None:
        super().__init__(**options)
        self._pipe_width = pipe_width

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.is_terminal:
            super().print(*objects, **kwargs)
            return
        if "soft_wrap" not in kwargs and all(isinstance(o, str) for o in objects):
            kwargs["soft_wrap"] = True
        # No table exists unless rich.table was imported: start-up does not import it.
        table_module = sys.modules.get("rich.table")
        tables = [o for o in objects if table_module and isinstance(o, table_module.Table)]
        width = max((self._table_width(t) for t in tables), default=self.width)
        if width == self.width:
            super().print(*objects, **kwargs)
            return
        saved = self.width
        self.width = width
        try:
            super().print(*objects, **kwargs)
        finally:
            self.width = saved

    def _table_width(self, table: RenderableType) -> int:
        """COLUMNS (else PIPE_WIDTH), or the table's full width if that would cut a cell."""
        width = self._pipe_width()
        full = self.measure(table, options=self.options.update_width(4096)).maximum
        if full <= width or not self._cuts(table, width):
            return width
        return full

    def _cuts(self, table: RenderableType, width: int) -> bool:
        """Whether laying `table` out in `width` columns ends a cell in `…`."""
        lines = self.render_lines(table, self.options.update_width(width), pad=False)
        return any("…" in segment.text for line in lines for segment in line)
