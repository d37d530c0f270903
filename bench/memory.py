"""Peak memory of a whole process tree, sampled from outside while a command runs.

With a process pool, ``ru_maxrss`` of one process is not the memory a render needs: the
workers hold their own plans and artifacts. This samples the command's process and every
descendant every ~100 ms and keeps the largest sum. Each process counts its PSS
(proportional set size, from /proc/<pid>/smaps_rollup), which splits pages shared after
fork() between the processes sharing them, so the sum is what the tree really occupies;
where smaps_rollup is unreadable (old kernels, other users' processes) RSS stands in,
which overcounts shared pages. Linux only.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def _ppid(pid: int) -> int | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; fields resume after ")".
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, from each process's parent in /proc/*/stat
    (/proc/<pid>/task/*/children is not built into every kernel)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            parent = _ppid(int(entry.name))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def process_kib(pid: int) -> tuple[int, str] | None:
    """(KiB, "pss" | "rss") of one process, or None if it is gone."""
    try:
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]), "pss"
    except OSError:
        pass
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]), "rss"
    except OSError:
        return None
    return None


def tree_kib(root: int) -> tuple[int, set[str]]:
    total, kinds = 0, set()
    for pid in descendants(root):
        measured = process_kib(pid)
        if measured is not None:
            total += measured[0]
            kinds.add(measured[1])
    return total, kinds


class TreeSampler:
    """Samples the tree under ``pid`` in a background thread until :meth:`stop`."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.samples = 0
        self.kinds: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return

    def sample(self) -> None:
        kib, kinds = tree_kib(self.pid)
        self.samples += 1
        self.kinds |= kinds
        self.peak_kib = max(self.peak_kib, kib)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mib(self) -> float:
        return self.peak_kib / 1024

    @property
    def method(self) -> str:
        """ "pss", "rss", or "pss+rss" when some processes could only be read by RSS."""
        return "+".join(sorted(self.kinds, reverse=True)) or "none"


@dataclass(frozen=True)
class Measured:
    seconds: float
    peak_mib: float
    method: str
    returncode: int
    stdout: str
    stderr: str


def run_measured(
    cmd: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    interval: float = 0.1,
) -> Measured:
    """Runs ``cmd`` to completion: wall time, and peak PSS of its process tree.

    Output goes to temporary files rather than pipes, so a chatty command can neither
    block on a full pipe nor make the bench thread drain it while timing.
    """
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=out, stderr=err)
        sampler = TreeSampler(proc.pid, interval).start()
        returncode = proc.wait()
        seconds = time.perf_counter() - start
        sampler.stop()
        out.seek(0)
        err.seek(0)
        return Measured(
            seconds=seconds,
            peak_mib=sampler.peak_mib,
            method=sampler.method,
            returncode=returncode,
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
        )


def environ(**changes: str | None) -> dict[str, str]:
    """os.environ with ``changes`` applied (None removes a variable)."""
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env
