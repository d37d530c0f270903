"""The test loop: `python bench/test_loop.py [--repeats 3] [--no-suite] [--json FILE]`.

Measures what issue 22 asks of it, on this checkout:
- per example service, `promtool test rules` on all of its generated test files
  (generated/prometheus/tests/<svc>.*test.yml, one invocation, as a user's CI runs them):
  median wall time and CPU time (user + sys of promtool), target under 10 s;
- the suite as `make test` runs it (`pytest -q -n auto`, CI=true so a
  missing tool fails instead of skipping), wall time, target under 4 minutes.
The load average before and after each is recorded: on a shared machine a figure taken
under load says so. Prints a summary; --json writes the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TESTS = REPO / "generated" / "prometheus" / "tests"
PROMTOOL_TARGET_SECONDS = 10.0
SUITE_TARGET_SECONDS = 240.0


def load() -> float:
    return os.getloadavg()[0]


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Wall and child CPU seconds of one command, with the load average around it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = load()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall": wall,
        "cpu": cpu,
        "load_before": load_before,
        "load_after": load(),
        "returncode": proc.returncode,
        "output": proc.stdout + proc.stderr,
    }


def services() -> list[str]:
    return sorted({p.name.split(".")[0] for p in TESTS.glob("*.test.yml")})


def measure_promtool(repeats: int) -> dict[str, Any]:
    promtool = shutil.which("promtool")
    if promtool is None:
        raise SystemExit("promtool is not installed (apt-get install -y prometheus)")
    version = subprocess.run([promtool, "--version"], capture_output=True, text=True)
    out: dict[str, Any] = {"promtool": (version.stdout or version.stderr).splitlines()[0]}
    per_service = {}
    for service in services():
        files = sorted(p.name for p in TESTS.glob(f"{service}.*test.yml"))
        runs = []
        for _ in range(repeats):
            run = timed([promtool, "test", "rules", *files], TESTS)
            if run["returncode"] != 0:
                raise SystemExit(f"promtool failed on {service}:\n{run['output'][-3000:]}")
            runs.append(run)
        walls = [r["wall"] for r in runs]
        per_service[service] = {
            "files": len(files),
            "tests": sum(
                len(re.findall(r"^- name:", (TESTS / f).read_text(), re.M)) for f in files
            ),
            "wall_median": statistics.median(walls),
            "wall_runs": walls,
            "cpu_median": statistics.median(r["cpu"] for r in runs),
            "load": [round(r["load_before"], 2) for r in runs],
            "met": statistics.median(walls) < PROMTOOL_TARGET_SECONDS,
        }
        print(
            f"promtool {service}: {per_service[service]['wall_median']:.2f} s wall median, "
            f"{per_service[service]['cpu_median']:.2f} s CPU, {len(files)} files "
            f"(load {runs[0]['load_before']:.1f})",
            flush=True,
        )
    out["services"] = per_service
    return out


def measure_suite() -> dict[str, Any]:
    env = {**os.environ, "CI": "true"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "auto"]
    cmd += ["-p", "no:cacheprovider", "--durations=15"]
    run = timed(cmd, REPO, env)
    tail = run["output"].strip().splitlines()
    summary = tail[-1] if tail else ""
    slowest = [line for line in tail if re.match(r"^\d+\.\d+s (call|setup|teardown) ", line)]
    result = {
        "command": "make test (pytest -q -n auto), CI=true",
        "wall": run["wall"],
        "cpu": run["cpu"],
        "load_before": run["load_before"],
        "load_after": run["load_after"],
        "returncode": run["returncode"],
        "summary": summary,
        "slowest": slowest[:15],
        "met": run["returncode"] == 0 and run["wall"] < SUITE_TARGET_SECONDS,
    }
    print(
        f"make test: {run['wall']:.0f} s wall, {run['cpu']:.0f} s CPU, load "
        f"{run['load_before']:.1f} -> {run['load_after']:.1f}: {summary}",
        flush=True,
    )
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-suite", action="store_true", help="Skip timing the whole suite.")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report: dict[str, Any] = {"cores": os.cpu_count()}
    report["promtool"] = measure_promtool(args.repeats)
    if not args.no_suite:
        report["suite"] = measure_suite()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    failed = "suite" in report and report["suite"]["returncode"] != 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
