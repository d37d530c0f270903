"""Lint speed against promtool: `python bench/lint_bench.py [-n 1000]`.

Renders a synthetic fleet of N services (bench/fleet.py) into a temp repository, then,
in the same run and on the same plain rule files, times
- `obs-iac lint <rules dir>` (strict decoding, syntax, label flow and every check), and
- `promtool check rules <files>` (decoding, syntax and templates only),
each in a fresh process, repeated; prints the medians and the ratio (target <= 1.0).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fleet import make_fleet  # noqa: E402

WRITE = """
import sys
from pathlib import Path
from obs_iac.pipeline import build_plan, generate, open_workspace
from obs_iac.plugins import discover
from obs_iac.render.serialize import serialize
from obs_iac.render.writer import write
ws = open_workspace(Path(sys.argv[1]))
plugins = discover(ws.config)
plan = build_plan(ws, plugins)
write(ws.output, {a.path: serialize(a) for a in generate(ws, plan, plugins)})
"""


def timed(cmd: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=1000, help="services in the fleet")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    promtool = shutil.which("promtool")
    if promtool is None:
        print("promtool is not installed (apt-get install prometheus)", file=sys.stderr)
        return 2
    obs_iac = str(Path(sys.executable).with_name("obs-iac"))
    with tempfile.TemporaryDirectory(prefix="obs-iac-lint-bench-") as tmp:
        root = Path(tmp)
        make_fleet(root, args.n)
        # Compile and write the fleet without the verify stage: only the files matter
        # here, and the fleet-wide checks of other packs are not what this measures.
        subprocess.run([sys.executable, "-c", WRITE, str(root)], check=True)
        rules_dir = root / "generated" / "prometheus" / "rules"
        files = sorted(str(p.relative_to(root)) for p in rules_dir.glob("*.yml"))
        # The same files outside the repository: lint reads only them (DCGM catalogue
        # seeded from the GPU pack), as a team linting hand-written rules would.
        alone = root.parent / (root.name + "-files")
        shutil.copytree(rules_dir, alone / "rules")
        lint_times, repo_times, prom_times = [], [], []
        for _ in range(args.repeats):
            seconds, proc = timed([obs_iac, "lint", "rules"], alone)
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                return 2
            lint_times.append(seconds)
            # Inside the repository lint also compiles every blueprint into the plan (for
            # its catalogue and collector sets): reported, but that is compile time.
            seconds, proc = timed([obs_iac, "lint", *files], root)
            if proc.returncode != 0:
                print(proc.stderr[-2000:], file=sys.stderr)
                return 2
            repo_times.append(seconds)
            seconds, proc = timed([promtool, "check", "rules", *files], root)
            if proc.returncode != 0:
                print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
                return 2
            prom_times.append(seconds)
        rules = sum(1 for f in files for line in (root / f).open() if "expr:" in line)
        shutil.rmtree(alone)
    lint_s = statistics.median(lint_times)
    repo_s = statistics.median(repo_times)
    prom_s = statistics.median(prom_times)
    result = {
        "services": args.n,
        "files": len(files),
        "rules": rules,
        "obs_iac_lint_seconds": round(lint_s, 3),
        "promtool_check_rules_seconds": round(prom_s, 3),
        "ratio": round(lint_s / prom_s, 3),
        "obs_iac_lint_in_repo_seconds": round(repo_s, 3),
        "ratio_in_repo": round(repo_s / prom_s, 3),
    }
    print(
        f"{args.n} services, {len(files)} rule files, {rules} rules: "
        f"obs-iac lint {lint_s:.2f}s, promtool check rules {prom_s:.2f}s, "
        f"ratio {lint_s / prom_s:.2f} (target <= 1.0); inside the repo (plus compiling "
        f"{args.n} blueprints) {repo_s:.2f}s, ratio {repo_s / prom_s:.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
