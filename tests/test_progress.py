"""The render progress bar: silent when short or not on a terminal, tidy when shown."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import textwrap

import pytest

from obs_iac.progress import (
    MAX_COLUMNS,
    NullProgress,
    Progress,
    TerminalProgress,
    format_line,
    progress_for,
)


class FakeTty(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _smart_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")


def make(delay: float = 2.0) -> tuple[Progress, FakeTty, FakeClock]:
    stream, clock = FakeTty(), FakeClock()
    return progress_for(stream, delay=delay, clock=clock), stream, clock


def test_silent_before_the_delay() -> None:
    bar, stream, clock = make()
    bar.phase("rendering", 100)
    for _ in range(50):
        clock.now += 0.039  # 1.95 s in all
        bar.advance()
    assert stream.getvalue() == ""


def test_draws_after_the_delay() -> None:
    bar, stream, clock = make()
    bar.phase("rendering", 1000)
    bar.advance(639)
    clock.now += 12.3
    bar.advance()
    line = stream.getvalue()
    assert line.startswith("\r")
    assert "rendering" in line and "640/1000 services" in line and "64%" in line
    assert "12.3 s" in line
    assert "\n" not in line


def test_nothing_on_a_stream_that_is_not_a_terminal() -> None:
    stream, clock = io.StringIO(), FakeClock()
    bar = progress_for(stream, delay=0.0, clock=clock)
    assert isinstance(bar, NullProgress)
    bar.phase("rendering", 10)
    for _ in range(10):
        clock.now += 1.0
        bar.advance()
    bar.close()
    assert stream.getvalue() == ""


def test_dumb_terminal_gets_no_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(progress_for(FakeTty(), delay=0.0), NullProgress)


def test_no_color_still_draws_a_bar_without_escapes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    bar, stream, _ = make(delay=0.0)
    bar.phase("rendering", 4)
    bar.close()
    assert "rendering" in stream.getvalue()
    assert "\x1b" not in stream.getvalue()


def test_close_clears_the_line() -> None:
    bar, stream, clock = make(delay=0.0)
    bar.phase("rendering", 10)
    bar.advance(3)
    drawn = stream.getvalue()
    bar.close()
    tail = stream.getvalue()[len(drawn) :]
    last_line = drawn.rsplit("\r", 1)[-1]
    assert tail == "\r" + " " * len(last_line) + "\r"
    clock.now += 5
    bar.advance()
    bar.close()
    assert stream.getvalue()[len(drawn) :] == tail, "nothing is drawn after close"


def test_close_without_drawing_writes_nothing() -> None:
    bar, stream, _ = make()
    bar.phase("rendering", 10)
    bar.advance()
    bar.close()
    assert stream.getvalue() == ""


def test_redraws_at_most_ten_times_a_second() -> None:
    bar, stream, clock = make(delay=0.0)
    bar.phase("rendering", 10_000)
    for _ in range(1000):
        clock.now += 0.001  # 1000 services in one second
        bar.advance()
    draws = stream.getvalue().count("\r")
    # The phase start draws, then one per 0.1 s window.
    assert 9 <= draws <= 11, draws
    clock.now += 0.2
    bar.advance()
    assert stream.getvalue().count("\r") == draws + 1


def test_a_new_phase_redraws_now_and_covers_the_longer_line() -> None:
    bar, stream, clock = make(delay=0.0)
    bar.phase("expanding", 100_000, unit="services")
    first = stream.getvalue().rsplit("\r", 1)[-1]
    clock.now += 0.01
    bar.phase("writing", 3, unit="files")
    second = stream.getvalue().rsplit("\r", 1)[-1]
    assert "writing" in second and "0/3 files" in second
    assert len(second) >= len(first), "the old line's tail is overwritten with spaces"


@pytest.mark.parametrize("total", [0, 1, 7, 1000, 12_345_678])
def test_line_fits_eighty_columns(total: int) -> None:
    line = format_line("rendering", total // 2, total, "services", 12345.6)
    assert len(line) <= MAX_COLUMNS - 1
    assert line.startswith("rendering")


def test_bar_fills_in_proportion() -> None:
    line = format_line("rendering", 50, 100, "services", 1.0)
    bar = line[line.index("[") + 1 : line.index("]")]
    assert bar.count("#") == len(bar) // 2
    full = format_line("rendering", 120, 100, "services", 1.0)
    assert "100/100" in full and "." not in full[full.index("[") : full.index("]")]


def test_a_broken_stream_does_not_fail_the_render() -> None:
    class Broken(FakeTty):
        def write(self, s: str) -> int:
            raise BrokenPipeError

    bar = progress_for(Broken(), delay=0.0, clock=FakeClock())
    assert isinstance(bar, TerminalProgress)
    bar.phase("rendering", 3)
    bar.advance()
    bar.close()


SNIPPET = textwrap.dedent(
    """
    import sys, time
    from obs_iac.progress import progress_for
    bar = progress_for(sys.stderr, delay=0.0)
    bar.phase("rendering", 30)
    for _ in range(30):
        time.sleep(0.01)
        bar.advance()
    bar.close()
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["TERM"] = "xterm"
    env.pop("NO_COLOR", None)
    return env


def test_end_to_end_on_a_pseudo_terminal_and_a_pipe() -> None:
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", SNIPPET], stderr=slave, stdout=subprocess.DEVNULL, env=_env()
        )
        os.close(slave)
        received = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed its end of the terminal
                break
            if not chunk:
                break
            received += chunk
        assert proc.wait(timeout=30) == 0
    finally:
        os.close(master)
    assert b"rendering" in received, received
    assert re.search(rb"\d+/30 services \[[#.]+\] +\d+%", received), received
    assert received.endswith(b"\r"), "close clears the line and returns to its start"

    piped = subprocess.run(
        [sys.executable, "-c", SNIPPET], capture_output=True, env=_env(), timeout=30, check=True
    )
    assert piped.stderr == b""
