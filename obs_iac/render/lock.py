"""The repository lock: one obs-iac run at a time writes a repository.

An editor hook and `make render`, or two CI jobs in one workspace, would otherwise stage,
swap and prune the same files at once. The lock is an ``flock`` on ``.obs-iac.lock`` at
the repository root: the kernel releases it when its holder dies, however it dies, so a
lock left by a killed process is never mistaken for a live one (the file's content, who
holds it, is only read to say so). Pool workers share their parent's lock and die with it
(see obs_iac.engine.run._worker_init).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity

LOCK_FILE = ".obs-iac.lock"
WAIT_ENV = "OBS_IAC_LOCK_WAIT"
# Long enough for an editor hook to wait out a `make render` of a few hundred services.
DEFAULT_WAIT_SECONDS = 60.0
_POLL_SECONDS = 0.05


def wait_seconds() -> float:
    raw = os.environ.get(WAIT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_WAIT_SECONDS
    except ValueError:
        value = DEFAULT_WAIT_SECONDS
    return value if value >= 0 and value != float("inf") else DEFAULT_WAIT_SECONDS


def _holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        return f"{data['command']} (pid {data['pid']} on {data['host']}, since {data['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another obs-iac run (it has not said who it is yet)"


def _locked(path: Path, holder: str, waited: float) -> InputError:
    return InputError(
        [
            Diagnostic(
                "repo/locked",
                Severity.ERROR,
                f"the repository is locked: held by {holder}; waited {waited:g} s",
                hint="wait for that run to finish (or stop it) and run again; "
                f"${WAIT_ENV} sets how long to wait. A lock whose holder died is released "
                "by the kernel: never delete the lock file by hand",
                location=Location(str(path)),
            )
        ]
    )


def _unavailable(path: Path, exc: OSError) -> InputError:
    return InputError(
        [
            Diagnostic(
                "repo/lock-unavailable",
                Severity.ERROR,
                f"cannot create the repository lock {path}: {exc.strerror}",
                hint="obs-iac writes this file at the repository root while it runs; "
                "make the root writable (or render a writable copy)",
                location=Location(str(path)),
            )
        ]
    )


@contextlib.contextmanager
def repo_lock(
    root: Path, command: str, *, wait: float | None = None, required: bool = True
) -> Iterator[None]:
    """Holds the repository lock for ``command``. ``required=False``: a repository where
    the lock file cannot be created (a read-only checkout) is used without it, for
    commands that do not write the output folder."""
    path = root / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if not required and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            yield
            return
        raise _unavailable(path, exc) from None
    try:
        limit = wait_seconds() if wait is None else wait
        started = time.monotonic()
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited >= limit:
                    raise _locked(path, _holder(fd), round(waited, 1)) from None
                if not announced and limit >= 1:
                    print(
                        f"waiting for the repository lock, held by {_holder(fd)}", file=sys.stderr
                    )
                    announced = True
                time.sleep(_POLL_SECONDS)
        info = {
            "command": f"obs-iac {command}",
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        }
        with contextlib.suppress(OSError):  # who holds it is a courtesy, not the lock
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(info, sort_keys=True) + "\n").encode(), 0)
        yield
    finally:
        os.close(fd)
