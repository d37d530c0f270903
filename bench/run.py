"""`make bench`: render the synthetic fleet at several sizes, report time and peak memory.

Each measurement runs in a fresh interpreter (so imports and caches count, as they do
for a user) and is repeated; the median is reported. Results go to bench/results/ as
JSON and a markdown table. Targets are ratios, checked here and never in unit tests.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
# The floor: the same artifact data serialised by json.dumps (C encoder) and libyaml's C
# dumper with no formatting options, i.e. what any tool writing these files must pay.
import yaml
class Floor(yaml.CSafeDumper):
    pass
Floor.add_representer(tuple, lambda d, v: d.represent_list(list(v)))
floor_start = time.perf_counter()
for art in result.artifacts:
    if art.format == "json":
        json.dumps(art.data)
    elif art.format == "yaml":
        yaml.dump(art.data, Dumper=Floor)
    elif art.format == "yaml-multi":
        yaml.dump_all(list(art.data), Dumper=Floor)
    elif art.format == "csv":
        "\n".join(",".join(map(str, row)) for row in art.data).encode()
    else:
        str(art.data).encode()
floor = time.perf_counter() - floor_start
print(json.dumps({"seconds": elapsed, "peak_mib": peak_kib / 1024, "files": len(result.files),
                  "floor_seconds": floor}))
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
    floor = statistics.median(r["floor_seconds"] for r in runs)
    seconds = statistics.median(r["seconds"] for r in runs)
    return {
        "seconds_median": seconds,
        "floor_seconds_median": floor,
        "render_over_floor": seconds / floor if floor else float("nan"),
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


REPO = HERE.parent


def timed(cmd: list[str], cwd: Path, repeats: int) -> float:
    """Median wall time of a command (exit status ignored: --check may report drift)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure_startup(tmp: Path, repeats: int) -> dict[str, float]:
    """`obs-iac --help`, and `render --check` on a fresh copy of the two examples."""
    exe = str(Path(sys.executable).with_name("obs-iac"))
    examples = tmp / "examples"
    shutil.copytree(REPO / "blueprints", examples / "blueprints")
    shutil.copy(REPO / "pyproject.toml", examples / "pyproject.toml")
    subprocess.run([exe, "render"], cwd=examples, check=True, capture_output=True)
    return {
        "help_seconds": timed([exe, "--help"], examples, repeats),
        "check_examples_seconds": timed([exe, "render", "--check"], examples, repeats),
    }


def svg_plot(results: list[dict[str, float]]) -> str:
    """Render time and peak memory against service count, one log-log panel each; the
    dashed line is exact proportionality through the 100-service point (or the first)."""
    width, panel, left, right, top, gap = 640, 170, 70, 30, 30, 40
    height = top + 2 * panel + 2 * gap
    ns = [float(r["services"]) for r in results]

    def log_scale(values: list[float], lo_px: float, hi_px: float) -> Callable[[float], float]:
        lo, hi = math.log10(min(values)), math.log10(max(values))
        span = (hi - lo) or 1.0
        return lambda v: lo_px + (math.log10(v) - lo) / span * (hi_px - lo_px)

    x = log_scale(ns, left, width - right)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    panels = (
        ("render time (s)", [r["seconds_median"] for r in results], "#1f77b4", True),
        ("peak memory (MiB)", [r["peak_mib"] for r in results], "#d62728", False),
    )
    for i, (label, values, colour, reference) in enumerate(panels):
        y0 = top + i * (panel + gap)
        bottom = y0 + panel
        anchor_i = next((j for j, n in enumerate(ns) if n == 100), 0)
        linear = [values[anchor_i] * n / ns[anchor_i] for n in ns]
        y = log_scale(values + (linear if reference else []), bottom, y0)
        out.append(
            f'<line x1="{left}" y1="{bottom}" x2="{width - right}" y2="{bottom}" stroke="black"/>'
        )
        out.append(f'<line x1="{left}" y1="{y0}" x2="{left}" y2="{bottom}" stroke="black"/>')
        out.append(f'<text x="{left}" y="{y0 - 8}" fill="{colour}">{label}, log-log</text>')
        for n in ns:
            out.append(f'<text x="{x(n):.1f}" y="{bottom + 15}" text-anchor="middle">{n:g}</text>')
        if reference:
            pts = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in zip(ns, linear, strict=True))
            out.append(
                f'<polyline points="{pts}" fill="none" stroke="#999" stroke-dasharray="4 4"/>'
            )
        pts = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in zip(ns, values, strict=True))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for n, v in zip(ns, values, strict=True):
            out.append(f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"/>')
            text = f"{v:.0f}" if v >= 100 else f"{v:.3g}"
            out.append(
                f'<text x="{x(n) - 6:.1f}" y="{y(v) - 8:.1f}" text-anchor="end" '
                f'fill="{colour}">{text}</text>'
                if n == ns[-1]
                else f'<text x="{x(n) + 6:.1f}" y="{y(v) + 14:.1f}" fill="{colour}">{text}</text>'
            )
    out.append(f'<text x="{width / 2}" y="{height - 6}" text-anchor="middle">services</text></svg>')
    return "\n".join(out) + "\n"


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
    parser.add_argument("--diff-repeats", type=int, default=3, help="Repetitions of the diff.")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = []
    diff_stats: dict[str, object] | None = None
    with tempfile.TemporaryDirectory(prefix="obs-iac-bench-") as tmp:
        startup = measure_startup(Path(tmp), max(args.repeats, 5))
        print(
            f"obs-iac --help: {startup['help_seconds']:.3f} s; render --check on the two "
            f"examples: {startup['check_examples_seconds']:.3f} s",
            flush=True,
        )
        for n in sizes:
            root = make_fleet(Path(tmp) / f"fleet-{n}", n)
            stats = measure(root, args.repeats)
            stats["services"] = n
            stats["ms_per_service"] = 1000 * stats["seconds_median"] / n
            results.append(stats)
            print(
                f"render {n:>5} services: {stats['seconds_median']:.2f} s median "
                f"({stats['ms_per_service']:.1f} ms/service), peak {stats['peak_mib']:.0f} MiB, "
                f"{stats['files']} files, floor {stats['floor_seconds_median']:.2f} s "
                f"(render/floor {stats['render_over_floor']:.1f}x)",
                flush=True,
            )
            if n == max(sizes) and not args.no_diff:
                diff_stats = measure_diff(root, args.diff_repeats)
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
        "startup": startup,
    }
    if diff_stats is not None:
        report["diff"] = diff_stats
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    lines = [
        f"Machine: {report['machine']['cores']} cores, Python {report['machine']['python']}, "
        f"{report['machine']['promtool']}; median of {args.repeats} runs.",
        "",
        "| services | render (s) | ms / service | vs 100 | floor (s) | render / floor "
        "| peak memory (MiB) | files |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = next((r["ms_per_service"] for r in results if r["services"] == 100), None)
    lines += [
        f"| {r['services']} | {r['seconds_median']:.2f} | {r['ms_per_service']:.1f} | "
        + (f"{100 * (r['ms_per_service'] / base - 1):+.0f} % | " if base else "- | ")
        + f"{r['floor_seconds_median']:.2f} | {r['render_over_floor']:.1f}x | "
        f"{r['peak_mib']:.0f} | {r['files']} |"
        for r in results
    ]
    lines += [
        "",
        f"`obs-iac --help`: {startup['help_seconds']:.3f} s; `obs-iac render --check` on the "
        f"two examples: {startup['check_examples_seconds']:.3f} s (median of "
        f"{max(args.repeats, 5)}).",
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
    if len(results) > 1:
        (args.out / "latest.svg").write_text(svg_plot(results))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
