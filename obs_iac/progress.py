"""A progress bar on stderr for long renders, and nothing at all otherwise.

The engine reports phases ("expanding", "rendering", "writing") and units done; the bar
appears only once a render has run for ``delay`` seconds (short renders stay silent) and
only on a terminal (CI logs and pipes never see control characters). Redraws are rate
limited and the line is cleared on close, so the CLI's final summary prints on a clean
line. Dependency-free and cheap: on a non-terminal the reporter is a no-op object.

Called from one thread (the engine collects worker results in the main thread), so there
is no locking.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, TextIO

Clock = Callable[[], float]

#: At most this many redraws a second: a terminal repaint per finished service would cost
#: more than the service at fleet scale.
REDRAWS_PER_SECOND = 10
#: The line never exceeds this, even on wider terminals, and shrinks on narrower ones.
MAX_COLUMNS = 80


class Progress(Protocol):
    def phase(self, name: str, total: int, unit: str = "services") -> None:
        """Starts a phase of ``total`` units (0 when unknown); the count restarts at 0."""

    def advance(self, n: int = 1) -> None:
        """``n`` more units of the current phase are done."""

    def close(self) -> None:
        """Clears the line if anything was drawn; later calls do nothing."""


class NullProgress:
    """What a pipe, a file, a dumb terminal or a short render gets: nothing, at no cost."""

    def phase(self, name: str, total: int, unit: str = "services") -> None:
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> NullProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _columns(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    if columns <= 0:  # a pseudo-terminal nobody sized reports 0
        columns = MAX_COLUMNS
    # One column short of the edge: writing the last column makes some terminals wrap.
    return max(20, min(columns, MAX_COLUMNS) - 1)


def format_line(
    name: str, done: int, total: int, unit: str, elapsed: float, columns: int = MAX_COLUMNS - 1
) -> str:
    """``rendering  640/1000 services [#########.....]  64%  12.3 s``, at most ``columns``."""
    clock = f"{elapsed:5.1f} s"
    if total <= 0:
        return f"{name:<10} {done} {unit}  {clock}"[:columns]
    shown = min(done, total)
    width = len(str(total))
    count = f"{name:<10} {shown:>{width}}/{total} {unit}".rstrip()
    percent = f"{100 * shown // total:3d}%"
    # "count [bar] percent  clock": the bar takes what is left, at least 10 cells.
    room = columns - len(count) - len(percent) - len(clock) - 6
    if room < 10:
        return f"{count} {percent}  {clock}"[:columns]
    filled = room * shown // total
    return f"{count} [{'#' * filled}{'.' * (room - filled)}] {percent}  {clock}"


class TerminalProgress:
    """The bar itself; use :func:`progress_for`, which decides whether to draw at all."""

    def __init__(self, stream: TextIO, *, delay: float, clock: Clock) -> None:
        self._stream = stream
        self._delay = delay
        self._clock = clock
        self._start = clock()
        self._columns = _columns(stream)
        self._name = ""
        self._unit = "services"
        self._total = 0
        self._done = 0
        self._last_draw: float | None = None
        self._drawn = 0  # characters on the line now, for clearing it
        self._closed = False

    def phase(self, name: str, total: int, unit: str = "services") -> None:
        self._name, self._total, self._unit, self._done = name, total, unit, 0
        # A new phase name is worth a redraw now, not after the next rate-limit window.
        self._draw(force=True)

    def advance(self, n: int = 1) -> None:
        self._done += n
        self._draw(force=False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._drawn:
            # Spaces rather than an erase-line escape: works on any terminal that has \r.
            self._write("\r" + " " * self._drawn + "\r")
            self._drawn = 0

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _draw(self, *, force: bool) -> None:
        if self._closed or not self._name:
            return
        now = self._clock()
        elapsed = now - self._start
        if elapsed < self._delay:
            return
        if (
            not force
            and self._last_draw is not None
            and now - self._last_draw < 1 / REDRAWS_PER_SECOND
        ):
            return
        self._last_draw = now
        line = format_line(self._name, self._done, self._total, self._unit, elapsed, self._columns)
        # Pad over the previous line's tail when this one is shorter (a new phase name).
        pad = " " * max(0, self._drawn - len(line))
        self._write("\r" + line + pad)
        self._drawn = len(line) + len(pad)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            # A closed or broken stderr must not fail the render it reports on.
            self._closed = True


def progress_for(
    stream: TextIO | None = None, *, delay: float = 2.0, clock: Clock = time.monotonic
) -> TerminalProgress | NullProgress:
    """A bar on ``stream`` (default stderr) if it is a terminal that can show one.

    ``TERM=dumb`` (Emacs shells, some CI runners) gets no bar: it may not honour ``\\r``.
    The bar uses no colour, so ``NO_COLOR`` needs nothing further.
    """
    target = sys.stderr if stream is None else stream
    if target is None or os.environ.get("TERM") == "dumb":
        return NullProgress()
    try:
        tty = target.isatty()
    except (AttributeError, OSError, ValueError):
        tty = False
    if not tty:
        return NullProgress()
    return TerminalProgress(target, delay=delay, clock=clock)
