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
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
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
    (args.out / "latest.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
