"""Progress of a long operation (a log rebuild, compaction or archive, a benchmark), on stderr.

On a terminal it is a live bar (rich), gone once the operation ends; piped, it is a plain line
when the operation starts, at most one per ``interval`` seconds while it runs, and one where it
ends or stops, so a log of the run shows it moved. Commands pass ``enabled=False`` for
``--json``: their stdout stays the JSON document alone and stderr stays quiet. An operation
reports through the :data:`Report` callback, which knows nothing of how it is shown.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any

# ``report(done, total)``: ``done`` units so far, of ``total`` (None while unknown).
Report = Callable[[int, int | None], None]

PLAIN_INTERVAL = 2.0  # seconds between two plain lines


class Progress:
    """A context manager showing ``label``'s progress; :meth:`report` is its :data:`Report`."""

    def __init__(
        self,
        label: str,
        *,
        unit: str = "",
        enabled: bool = True,
        stream: IO[str] | None = None,
        interval: float = PLAIN_INTERVAL,
    ) -> None:
        self.label, self.unit, self.enabled = label, unit, enabled
        self.stream = stream or sys.stderr
        self.interval = interval
        self.done, self.total = 0, None  # type: tuple[int, int | None]
        self._last_line = float("-inf")
        self._printed: tuple[int, int | None] | None = None
        self._bar: Any = None  # a rich Progress, on a terminal
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self.enabled and self.stream.isatty():
            from rich.console import Console
            from rich.progress import Progress as Bar

            self._bar = Bar(console=Console(file=self.stream), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=None)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self.enabled and self.done and self._printed != (self.done, self.total):
            self._line(force=True)  # where it ended (or stopped)

    def report(self, done: int, total: int | None = None) -> None:
        self.done, self.total = done, total if total is not None else self.total
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=self.total)
        else:
            self._line()

    def _line(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_line < self.interval:
            return
        self._last_line, self._printed = now, (self.done, self.total)
        of = f"/{self.total}" if self.total is not None else ""
        unit = f" {self.unit}" if self.unit else ""
        print(f"{self.label}: {self.done}{of}{unit}", file=self.stream, flush=True)
