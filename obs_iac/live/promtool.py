"""`obs-iac test` without --live: every generated promtool test file, in one promtool
call, reported per file."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from obs_iac.toolchain import Stack, find_tool


@dataclass(frozen=True)
class FileResult:
    file: str
    passed: bool
    output: str


def run_promtool_tests(generated: Path, stack: Stack) -> tuple[str, list[FileResult]]:
    promtool = find_tool("promtool", stack)
    tests_dir = generated / "prometheus" / "tests"
    files = sorted(p.name for p in tests_dir.glob("*.yml"))
    if not files:
        return promtool.version, []
    # One call over every file; rule_files paths in the tests are relative to tests_dir.
    proc = subprocess.run(
        [str(promtool.path), "test", "rules", *files],
        cwd=tests_dir,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    text = proc.stdout + proc.stderr
    chunks: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        head = line.strip()
        # promtool 2.x prints "Unit Testing:  FILE", 3.x "Processing test file: FILE".
        if head.startswith(("Unit Testing:", "Processing test file:")):
            current = head.split(":", 1)[1].strip()
            chunks[current] = ""
        elif current:
            chunks[current] += line + "\n"
    results = []
    for name in files:
        body = chunks.get(name)
        if body is None:
            results.append(FileResult(name, False, text.strip() or "promtool did not test it"))
        else:
            results.append(FileResult(name, "SUCCESS" in body and "FAILED" not in body, body))
    return promtool.version, results
