"""Child processes of a live run: each in its own process group, logged to a file, and
always stopped (SIGTERM, then SIGKILL to the whole group) on exit, error or Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType


class StackError(Exception):
    """A program of the live stack did not come up, or died; carries its log tail."""


def free_port() -> int:
    """A port nothing listens on now. The program may still lose a race for it, which
    start() detects from its log and retries with another port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_port(preferred: int | None = None) -> int:
    """``preferred`` when it is free, else any free port (a port in use is never an error)."""
    if preferred is not None and port_is_free(preferred):
        return preferred
    return free_port()


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


class Child:
    def __init__(self, name: str, argv: Sequence[str], log: Path, cwd: Path) -> None:
        self.name, self.argv, self.log = name, list(argv), log
        self._log_file = log.open("ab")
        # start_new_session: the child leads its own process group, so stop() can kill
        # whatever it forks, and a Ctrl-C in the terminal reaches only us (we stop it).
        self.proc = subprocess.Popen(
            self.argv,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace)
        # The group may outlive its leader (a forked helper): kill what is left of it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(timeout=grace)
        self._log_file.close()


def http_ok(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return 200 <= int(resp.status) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


class Supervisor:
    """Owns every child of a run; a context manager that stops them all, whatever happens.
    SIGTERM and SIGHUP are turned into KeyboardInterrupt while it is open, so a killed
    run still unwinds through __exit__ and stops its children."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.children: list[Child] = []
        self._previous: dict[int, object] = {}

    def __enter__(self) -> Supervisor:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._previous[sig] = signal.signal(sig, _interrupt)
            except ValueError:  # not the main thread: the caller owns signals
                break
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]

    def stop_all(self) -> None:
        # SIGTERM to every group first, so the programs shut down side by side; then wait
        # (and SIGKILL what is left) one by one.
        for child in self.children:
            if child.alive():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGTERM)
        for child in reversed(self.children):
            child.stop()
        self.children.clear()

    def start(
        self,
        name: str,
        argv: Callable[[int], Sequence[str]],
        ready: Callable[[int], str],
        timeout: float,
        port: int | None = None,
    ) -> tuple[Child, int]:
        """Start ``argv(port)`` and wait until ``ready(port)`` answers 2xx. A port lost to
        another program is retried with a new free port; anything else that keeps the
        program from coming up within ``timeout`` raises StackError with its log tail."""
        log = self.workdir / f"{name}.log"
        deadline = time.monotonic() + timeout
        attempt_port = pick_port(port)
        for _attempt in range(3):
            child = Child(name, argv(attempt_port), log, self.workdir)
            self.children.append(child)
            while time.monotonic() < deadline:
                if not child.alive():
                    break
                if http_ok(ready(attempt_port)):
                    return child, attempt_port
                time.sleep(0.1)
            alive = child.alive()
            child.stop()
            self.children.remove(child)
            tail = log_tail(log)
            if not alive and "address already in use" in tail and time.monotonic() < deadline:
                attempt_port = free_port()
                continue
            why = "exited" if not alive else f"did not answer {ready(attempt_port)}"
            raise StackError(f"{name} {why} within {timeout:g} s; last lines of {log}:\n{tail}")
        raise StackError(f"{name}: no free port after 3 attempts; log:\n{log_tail(log)}")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
