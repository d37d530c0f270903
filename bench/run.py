"""`make bench`: render the synthetic fleet at several sizes, report time and peak memory.

Each measurement runs in a fresh interpreter (so imports and caches count, as they do
for a user) and is repeated; the median is reported. Results go to bench/results/ as
JSON and a markdown table. Targets are ratios, checked here and never in unit tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fleet import make_fleet  # noqa: E402

MEASURE = r"""
import json, resource, sys, time
from pathlib import Path
start = time.perf_counter()
from obs_iac.pipeline import open_workspace, render
from obs_iac.render.writer import write
ws = open_workspace(Path(sys.argv[1]))
result = render(ws)
write(ws.output, result.files)
elapsed = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "peak_mib": peak_kib / 1024, "files": len(result.files)}))
"""


def measure(root: Path, repeats: int) -> dict[str, float]:
    runs = []
    for _ in range(repeats):
        out = root / "generated"
        if out.exists():
            shutil.rmtree(out)
        proc = subprocess.run(
            [sys.executable, "-c", MEASURE, str(root)],
            check=True,
            capture_output=True,
            text=True,
        )
        runs.append(json.loads(proc.stdout))
    return {
        "seconds_median": statistics.median(r["seconds"] for r in runs),
        "seconds_min": min(r["seconds"] for r in runs),
        "peak_mib": max(r["peak_mib"] for r in runs),
        "files": runs[0]["files"],
    }


MEASURE_DIFF = r"""
import json, resource, sys, time
from pathlib import Path
start = time.perf_counter()
from obs_iac.diff.engine import run_diff
result = run_diff(Path(sys.argv[1]), sys.argv[2] or None)
elapsed = time.perf_counter() - start
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "peak_mib": peak_kib / 1024,
                  "changes": sorted(f"{c.id.kind} {c.id.key}" for c in result.changes)}))
"""


def measure_diff(root: Path, repeats: int) -> dict[str, object]:
    """`obs-iac diff` after one threshold edit, against generated/ and against git HEAD."""
    ws_out = root / "generated"
    assert ws_out.is_dir(), "measure() leaves the last render in place"
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "fleet"], cwd=root, check=True)
    first = sorted((root / "blueprints").glob("*.py"))[0]
    text = first.read_text()
    first.write_text(
        text.replace("profiling=", "temperature_limit_celsius=80,\n        profiling=", 1)
    )
    out: dict[str, object] = {}
    for label, base in (("generated", ""), ("git_head", "HEAD")):
        runs = []
        for _ in range(repeats):
            proc = subprocess.run(
                [sys.executable, "-c", MEASURE_DIFF, str(root), base],
                check=True,
                capture_output=True,
                text=True,
            )
            runs.append(json.loads(proc.stdout))
        out[label] = {
            "seconds_median": statistics.median(r["seconds"] for r in runs),
            "peak_mib": max(r["peak_mib"] for r in runs),
            "changes": runs[0]["changes"],
        }
    return out


def tool_version(name: str) -> str:
    path = shutil.which(name)
    if not path:
        return "not installed"
    proc = subprocess.run([path, "--version"], capture_output=True, text=True)
    return (proc.stdout or proc.stderr).splitlines()[0] if (proc.stdout or proc.stderr) else "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--no-diff", action="store_true", help="Skip the obs-iac diff timing.")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    diff_stats: dict[str, object] | None = None
    with tempfile.TemporaryDirectory(prefix="obs-iac-bench-") as tmp:
        for n in sizes:
            root = make_fleet(Path(tmp) / f"fleet-{n}", n)
            stats = measure(root, args.repeats)
            stats["services"] = n
            stats["ms_per_service"] = 1000 * stats["seconds_median"] / n
            results.append(stats)
            print(
                f"render {n:>5} services: {stats['seconds_median']:.2f} s median "
                f"({stats['ms_per_service']:.1f} ms/service), peak {stats['peak_mib']:.0f} MiB, "
                f"{stats['files']} files",
                flush=True,
            )
            if n == max(sizes) and not args.no_diff:
                diff_stats = measure_diff(root, min(args.repeats, 3))
                diff_stats["services"] = n
                for label in ("generated", "git_head"):
                    d = diff_stats[label]
                    assert isinstance(d, dict)
                    print(
                        f"diff   {n:>5} services, one threshold changed, base {label}: "
                        f"{d['seconds_median']:.2f} s median (render: "
                        f"{stats['seconds_median']:.2f} s), peak {d['peak_mib']:.0f} MiB, "
                        f"{len(d['changes'])} changes: {', '.join(d['changes'])}",
                        flush=True,
                    )
    report = {
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "promtool": tool_version("promtool"),
        },
        "repeats": args.repeats,
        "render": results,
    }
    if diff_stats is not None:
        report["diff"] = diff_stats
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    lines = [
        f"Machine: {report['machine']['cores']} cores, Python {report['machine']['python']}, "
        f"{report['machine']['promtool']}; median of {args.repeats} runs.",
        "",
        "| services | render (s) | ms / service | peak memory (MiB) | files |",
        "|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['services']} | {r['seconds_median']:.2f} | {r['ms_per_service']:.1f} | "
        f"{r['peak_mib']:.0f} | {r['files']} |"
        for r in results
    ]
    if diff_stats is not None:
        n = diff_stats["services"]
        render_s = next(r["seconds_median"] for r in results if r["services"] == n)
        lines += [
            "",
            f"`obs-iac diff` of the {n}-service fleet after one changed threshold:",
            "",
            "| base | diff (s) | render (s) | peak memory (MiB) | changes |",
            "|---|---:|---:|---:|---:|",
        ]
        for label, title in (("generated", "generated/"), ("git_head", "git HEAD (renders both)")):
            d = diff_stats[label]
            assert isinstance(d, dict)
            lines.append(
                f"| {title} | {d['seconds_median']:.2f} | {render_s:.2f} | "
                f"{d['peak_mib']:.0f} | {len(d['changes'])} |"
            )
    (args.out / "latest.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
