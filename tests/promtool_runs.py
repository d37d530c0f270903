"""`promtool test rules` for many test files at once, each file's verdict read off the
one report, and each distinct file run once per test session.

promtool starts in a fraction of a second, but a generated test file costs seconds of
simulated rule evaluation, and the same example services are tested from several test
modules (their promtool tests, the framework pack, the inhibit pack). A verdict depends
only on the bytes of the test file and of the rule files it names, so it is kept under
a digest of those bytes: in this process, and in a folder all pytest-xdist workers of
the run share (a lock per digest, so no two workers simulate the same file).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml
from filelock import FileLock

from tests.tools import require_tool

_MEMO: dict[str, Verdict] = {}


@dataclass(frozen=True)
class Verdict:
    """promtool's report for one test file."""

    passed: bool
    output: str


def _digest(test: Path) -> str:
    """The test file and every rule file it names, as promtool resolves them."""
    data = test.read_bytes()
    body = yaml.safe_load(data) or {}
    parts = [promtool_version(), data]
    for name in body.get("rule_files") or ():
        path = Path(name) if Path(name).is_absolute() else test.parent / name
        parts.append(path.read_bytes() if path.is_file() else b"missing")
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


_VERSION: list[bytes] = []


def promtool_version() -> bytes:
    if not _VERSION:
        done = subprocess.run(
            [require_tool("promtool"), "--version"], capture_output=True, check=False
        )
        _VERSION.append(done.stdout + done.stderr)
    return _VERSION[0]


# Set by a session fixture (tests/conftest.py) to a folder every worker of the run sees.
SHARED: Path | None = None


def _shared_dir() -> Path | None:
    if SHARED is not None:
        SHARED.mkdir(parents=True, exist_ok=True)
    return SHARED


def split_report(output: str) -> dict[str, str]:
    """promtool's report per test file, by the name it was given on the command line."""
    sections: dict[str, str] = {}
    current: str | None = None
    for line in output.splitlines(keepends=True):
        if line.startswith("Unit Testing:"):
            current = line.split(":", 1)[1].strip()
            sections[current] = ""
        elif current is not None:
            sections[current] += line
    return sections


def _run(tests: list[Path]) -> dict[Path, Verdict]:
    """One promtool invocation per folder (rule paths are relative to the test file)."""
    out: dict[Path, Verdict] = {}
    by_dir: dict[Path, list[Path]] = {}
    for test in tests:
        by_dir.setdefault(test.parent, []).append(test)
    for folder, group in by_dir.items():
        done = subprocess.run(
            [require_tool("promtool"), "test", "rules", *(t.name for t in group)],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
            timeout=600,
        )
        report = split_report(done.stdout)
        for test in group:
            text = report.get(test.name)
            if text is None:
                # promtool stopped before this file: everything it said is the reason.
                out[test] = Verdict(False, done.stdout)
            else:
                passed = text.strip().startswith("SUCCESS") and "FAILED" not in text
                out[test] = Verdict(passed, text)
    return out


def promtool_test(tests: Iterable[Path]) -> dict[Path, Verdict]:
    """The verdict of ``promtool test rules`` on each file, each distinct file simulated
    once per session; the uncached ones run together in one invocation per folder."""
    wanted = list(tests)
    keys = {test: _digest(test) for test in wanted}
    shared = _shared_dir()
    verdicts: dict[Path, Verdict] = {}
    todo: list[Path] = []
    for test in wanted:
        known = _MEMO.get(keys[test])
        if known is None and shared is not None:
            known = _load(shared / f"{keys[test]}.json")
        if known is None:
            todo.append(test)
        else:
            verdicts[test] = known
    if todo and shared is not None:
        # Claim the files in a fixed order (no deadlock); a file another worker finished
        # meanwhile is read, not run again.
        locks = [FileLock(str(shared / f"{k}.lock")) for k in sorted({keys[t] for t in todo})]
        for lock in locks:
            lock.acquire()
        try:
            still = []
            for test in todo:
                known = _load(shared / f"{keys[test]}.json")
                if known is None:
                    still.append(test)
                else:
                    verdicts[test] = known
            for test, verdict in _run(still).items():
                verdicts[test] = verdict
                (shared / f"{keys[test]}.json").write_text(
                    json.dumps({"passed": verdict.passed, "output": verdict.output})
                )
        finally:
            for lock in reversed(locks):
                lock.release()
    elif todo:
        verdicts.update(_run(todo))
    for test, verdict in verdicts.items():
        _MEMO[keys[test]] = verdict
    return {test: verdicts[test] for test in wanted}


def _load(path: Path) -> Verdict | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return Verdict(bool(data["passed"]), str(data["output"]))


def assert_promtool_passes(tests: Iterable[Path]) -> None:
    """Every file passes; the failures are reported with promtool's own words."""
    verdicts = promtool_test(tests)
    assert verdicts, "no test files given"
    failed = {t.name: v.output for t, v in verdicts.items() if not v.passed}
    assert not failed, "\n".join(f"{name}:\n{text}" for name, text in failed.items())
