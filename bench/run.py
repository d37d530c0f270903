"""`make bench`: the figures of issue 12, measured on the `obs-iac` command a user runs.

For each fleet size (bench/fleet.py) the real `obs-iac render` runs in a fresh process
with an emptied output folder and an empty cache, repeated; the median wall time is
reported, with the peak memory of its whole process tree (bench/memory.py: PSS of the
command and its pool workers, sampled every 100 ms). Alongside each repetition, a separate
process renders the same fleet with the reference in-process pipeline and times the
"floor": serialising those same artifacts with json.dumps and libyaml's C dumper.

On the target size (1,000 services, or the largest size given) it also measures:
`--jobs 1` against the default pool (and checks both outputs are identical), an
incremental render after one threshold change (and checks it is byte-identical to a
render without the cache), `obs-iac diff` against generated/ and against git HEAD with a
warm and a cold cache, whether a progress bar reaches a terminal, and, through
bench/lint_bench.py, lint against promtool. Results go to bench/results/latest.{json,md}
with a plot (latest.svg, and latest.png when Chromium is installed); every target of the
issue is listed with its measured value. Targets are checked here, never in unit tests.

Before the engine of issue 12 exists (`render --jobs` / `--no-cache`), the harness runs
without those options and says so in the report.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from fleet import make_fleet  # noqa: E402
from memory import Measured, environ, run_measured  # noqa: E402

# The command under test: the venv's console script, or another build of it (to compare).
CLI = os.environ.get("OBS_IAC_BENCH_CLI") or str(Path(sys.executable).with_name("obs-iac"))
CACHE_ENV = "OBS_IAC_CACHE_DIR"
MIB_TARGET = 1024.0

# The floor: the artifacts of the reference in-process pipeline, serialised by json.dumps
# (C encoder) and libyaml's C dumper with no formatting options, i.e. what any tool
# writing these files must pay. A process of its own, so it never shares a heap (or the
# timed render's clock) with the command being measured.
FLOOR = r"""
import json, sys, time
from pathlib import Path
import yaml
from obs_iac.pipeline import open_workspace, render
result = render(open_workspace(Path(sys.argv[1])))
class Floor(yaml.CSafeDumper):
    pass
Floor.add_representer(tuple, lambda d, v: d.represent_list(list(v)))
floors = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
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
    floors.append(time.perf_counter() - start)
print(json.dumps({"floor_runs": floors, "files": len(result.files)}))
"""


class BenchError(RuntimeError):
    """A command failed or an output check did not hold: the bench stops, loudly."""


@dataclass(frozen=True)
class Engine:
    """What `obs-iac render` of this checkout supports."""

    jobs: bool
    no_cache: bool

    @classmethod
    def detect(cls) -> Engine:
        proc = subprocess.run([CLI, "render", "--help"], capture_output=True, text=True)
        return cls(jobs="--jobs" in proc.stdout, no_cache="--no-cache" in proc.stdout)

    def render(self, *, jobs: int | None = None, no_cache: bool = False) -> list[str]:
        cmd = [CLI, "render"]
        if jobs is not None and self.jobs:
            cmd += ["--jobs", str(jobs)]
        if no_cache and self.no_cache:
            cmd.append("--no-cache")
        return cmd

    @property
    def default_jobs(self) -> str:
        return f"{os.cpu_count()} (all cores)" if self.jobs else "1 (no --jobs option yet)"


def check(measured: Measured, what: str, ok: tuple[int, ...] = (0,)) -> Measured:
    if measured.returncode not in ok:
        raise BenchError(
            f"{what} exited {measured.returncode}:\n"
            f"{measured.stderr[-3000:]}{measured.stdout[-1000:]}"
        )
    return measured


def fresh_dir(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def median(values: list[float]) -> float:
    return statistics.median(values)


def bar_drawn(stderr: str | bytes) -> bool:
    """A progress bar redraws its line with a bare carriage return; a summary never does."""
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    return re.search(r"\r(?!\n)", text) is not None


# --------------------------------------------------------------------------- render


def measure_render(
    root: Path, repeats: int, engine: Engine, cache: Path, *, jobs: int | None, floor: int
) -> dict[str, Any]:
    """Full renders: emptied generated/ and cache before each. Then the floor, ``floor``
    times over the artifacts of one reference render (0: not measured)."""
    runs: list[Measured] = []
    floors: list[float] = []
    files = 0
    for _ in range(repeats):
        shutil.rmtree(root / "generated", ignore_errors=True)
        fresh_dir(cache)
        runs.append(
            check(
                run_measured(
                    engine.render(jobs=jobs), cwd=root, env=environ(**{CACHE_ENV: str(cache)})
                ),
                f"obs-iac render ({root.name})",
            )
        )
    if floor:
        proc = subprocess.run(
            [sys.executable, "-c", FLOOR, str(root), str(floor)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise BenchError(f"the floor process failed:\n{proc.stderr[-3000:]}")
        data = json.loads(proc.stdout)
        floors = data["floor_runs"]
        files = data["files"]
    seconds = median([r.seconds for r in runs])
    out: dict[str, Any] = {
        "seconds_median": seconds,
        "seconds_runs": [round(r.seconds, 3) for r in runs],
        "peak_mib": max(r.peak_mib for r in runs),
        "memory_method": "+".join(sorted({r.method for r in runs})),
        "bar_on_pipe": any(bar_drawn(r.stderr) for r in runs),
        "files_on_disk": sum(1 for p in (root / "generated").rglob("*") if p.is_file()),
    }
    if floor:
        out["floor_seconds_median"] = median(floors)
        out["render_over_floor"] = seconds / out["floor_seconds_median"]
        out["files"] = files
    return out


# --------------------------------------------------------------------------- edits


def fresh_limits() -> Iterator[int]:
    """GPU temperature limits never used before in this run, none the default (85): every
    edit is a real change, and never one a content-addressed cache has already seen."""
    yield from (*range(86, 121), *range(84, 39, -1))


def set_limit(blueprint: Path, original: str, limit: int) -> None:
    edited = original.replace(
        "profiling=", f"temperature_limit_celsius={limit},\n        profiling=", 1
    )
    if edited == original:
        raise BenchError(f"{blueprint}: no GpuFleet(profiling=...) to put a threshold next to")
    blueprint.write_text(edited)


def tree_differences(left: Path, right: Path) -> list[str]:
    """Relative paths that exist on one side only or differ in bytes."""

    def files(top: Path) -> set[str]:
        return {str(p.relative_to(top)) for p in top.rglob("*") if p.is_file()}

    a, b = files(left), files(right)
    out = [f"only in {left.name}: {p}" for p in sorted(a - b)]
    out += [f"only in {right.name}: {p}" for p in sorted(b - a)]
    out += [
        f"differs: {p}"
        for p in sorted(a & b)
        if (left / p).read_bytes() != (right / p).read_bytes()
    ]
    return out


def render_without_cache(root: Path, engine: Engine, scratch: Path) -> Path:
    """The same blueprints rendered from scratch in a copy: the reference output tree."""
    copy = fresh_dir(scratch / f"{root.name}-nocache")
    shutil.copytree(root / "blueprints", copy / "blueprints")
    shutil.copy(root / "pyproject.toml", copy / "pyproject.toml")
    empty = fresh_dir(scratch / "empty-cache")
    check(
        run_measured(
            engine.render(no_cache=True), cwd=copy, env=environ(**{CACHE_ENV: str(empty)})
        ),
        "obs-iac render --no-cache (reference)",
    )
    return copy / "generated"


def assert_identical(got: Path, want: Path, what: str) -> None:
    differences = tree_differences(got, want)
    if differences:
        shown = "\n  ".join(differences[:20])
        raise BenchError(
            f"{what}: output differs from a render without the cache "
            f"({len(differences)} files):\n  {shown}"
        )


def measure_incremental(
    root: Path,
    repeats: int,
    engine: Engine,
    cache: Path,
    scratch: Path,
    limits: Iterator[int],
    full_seconds: float,
) -> dict[str, Any]:
    """One threshold changed in one blueprint, then `obs-iac render` with the cache warm
    (the full renders just filled it); repeated with a new value each time."""
    blueprint = sorted((root / "blueprints").glob("*.py"))[0]
    original = blueprint.read_text()
    env = environ(**{CACHE_ENV: str(cache)})
    # Warm the cache for exactly this tree (the last full render may have used other jobs).
    check(run_measured(engine.render(), cwd=root, env=env), "obs-iac render (warm-up)")
    runs = []
    for _ in range(repeats):
        set_limit(blueprint, original, next(limits))
        runs.append(check(run_measured(engine.render(), cwd=root, env=env), "incremental render"))
    reference = render_without_cache(root, engine, scratch)
    assert_identical(root / "generated", reference, "incremental render")
    shutil.rmtree(reference.parent)
    blueprint.write_text(original)
    check(run_measured(engine.render(), cwd=root, env=env), "obs-iac render (restore)")
    seconds = median([r.seconds for r in runs])
    return {
        "services": len(list((root / "blueprints").glob("*.py"))),
        "seconds_median": seconds,
        "seconds_runs": [round(r.seconds, 3) for r in runs],
        "peak_mib": max(r.peak_mib for r in runs),
        "full_seconds": full_seconds,
        "ratio": seconds / full_seconds,
        "identical_to_uncached": True,
    }


def measure_diff(
    root: Path,
    repeats: int,
    cache: Path,
    scratch: Path,
    limits: Iterator[int],
    full_seconds: float,
) -> dict[str, Any]:
    """`obs-iac diff` after one threshold change, against generated/ and git HEAD, with the
    cache warm (you rendered before) and cold (an empty cache directory)."""
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    (root / ".gitignore").write_text(".obs-iac-cache/\n")
    if not (root / ".git").exists():
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "fleet"], cwd=root, check=True)
    blueprint = sorted((root / "blueprints").glob("*.py"))[0]
    original = blueprint.read_text()
    out: dict[str, Any] = {"services": len(list((root / "blueprints").glob("*.py")))}
    for base in ("generated", "HEAD"):
        for temperature in ("warm", "cold"):
            runs = []
            changes: list[int] = []
            for _ in range(repeats):
                set_limit(blueprint, original, next(limits))
                cache_dir = cache if temperature == "warm" else fresh_dir(scratch / "cold-cache")
                cmd = [CLI, "diff", "--format", "json"]
                if base == "HEAD":
                    cmd += ["--base", "HEAD"]
                # Exit 1 is a finding (an error flag), not a failure of the command.
                measured = check(
                    run_measured(cmd, cwd=root, env=environ(**{CACHE_ENV: str(cache_dir)})),
                    f"obs-iac diff (base {base}, {temperature} cache)",
                    ok=(0, 1),
                )
                runs.append(measured)
                changes.append(len(json.loads(measured.stdout)["changes"]))
            seconds = median([r.seconds for r in runs])
            out[f"{base}_{temperature}"] = {
                "seconds_median": seconds,
                "seconds_runs": [round(r.seconds, 3) for r in runs],
                "peak_mib": max(r.peak_mib for r in runs),
                "changes": changes[0],
                "ratio": seconds / full_seconds,
            }
            if len(set(changes)) != 1 or changes[0] == 0:
                raise BenchError(f"diff base {base}: expected one stable change set: {changes}")
    blueprint.write_text(original)
    return out


# --------------------------------------------------------------------------- progress


def measure_progress(root: Path, engine: Engine, cache: Path) -> dict[str, Any]:
    """A full render with stderr on a pseudo-terminal: does a progress bar arrive?"""
    shutil.rmtree(root / "generated", ignore_errors=True)
    fresh_dir(cache)
    master, slave = os.openpty()
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            engine.render(),
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=slave,
            env=environ(**{CACHE_ENV: str(cache), "TERM": "xterm", "NO_COLOR": None}),
        )
        os.close(slave)
        received = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO once the command has closed the terminal
                break
            if not chunk:
                break
            received += chunk
        returncode = proc.wait()
    finally:
        os.close(master)
    seconds = time.perf_counter() - start
    if returncode != 0:
        raise BenchError(f"obs-iac render on a terminal exited {returncode}: {received[-2000:]!r}")
    return {"seconds": seconds, "bar_on_terminal": bar_drawn(received)}


# --------------------------------------------------------------------------- startup


def timed(cmd: list[str], cwd: Path, repeats: int) -> float:
    """Median wall time of a command (exit status ignored: --check may report drift)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return median(times)


def measure_startup(tmp: Path, repeats: int) -> dict[str, float]:
    """`obs-iac --help`, and `render --check` on a fresh copy of the two examples (rendered
    first, so the check passes and the cache, if any, is warm as on a developer's laptop)."""
    examples = tmp / "examples"
    shutil.copytree(REPO / "blueprints", examples / "blueprints")
    shutil.copy(REPO / "pyproject.toml", examples / "pyproject.toml")
    subprocess.run([CLI, "render"], cwd=examples, check=True, capture_output=True)
    return {
        "help_seconds": timed([CLI, "--help"], examples, repeats),
        "check_examples_seconds": timed([CLI, "render", "--check"], examples, repeats),
    }


# --------------------------------------------------------------------------- lint


def measure_lint(n: int, repeats: int, out: Path) -> dict[str, Any] | None:
    target = out / "lint.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "lint_bench.py"),
            "-n",
            str(n),
            "--repeats",
            str(repeats),
            "--json",
            str(target),
        ],
        capture_output=True,
        text=True,
    )
    print(proc.stdout.strip() or proc.stderr.strip(), flush=True)
    if proc.returncode != 0:
        return None
    data: dict[str, Any] = json.loads(target.read_text())
    return data


def measure_test_loop(repeats: int, out: Path, suite: bool) -> dict[str, Any] | None:
    """Issue 22: per-service promtool time and the `make test` wall time (bench/test_loop.py)."""
    target = out / "test_loop.json"
    cmd = [sys.executable, str(HERE / "test_loop.py"), "--repeats", str(repeats)]
    cmd += ["--json", str(target)] + ([] if suite else ["--no-suite"])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print(proc.stdout.strip() or proc.stderr.strip(), flush=True)
    if not target.is_file():
        return None
    data: dict[str, Any] = json.loads(target.read_text())
    return data


# --------------------------------------------------------------------------- report


def svg_plot(results: list[dict[str, Any]]) -> str:
    """Render time (with the floor) and peak memory against service count, one log-log
    panel each; the dashed line is exact proportionality through the 100-service point."""
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
    floors = [float(r.get("floor_seconds_median") or 0) for r in results]
    panels = (
        ("render time (s)", [r["seconds_median"] for r in results], "#1f77b4", True),
        ("peak memory, process tree (MiB)", [r["peak_mib"] for r in results], "#d62728", False),
    )
    for i, (label, values, colour, reference) in enumerate(panels):
        y0 = top + i * (panel + gap)
        bottom = y0 + panel
        anchor_i = next((j for j, n in enumerate(ns) if n == 100), 0)
        linear = [values[anchor_i] * n / ns[anchor_i] for n in ns]
        extra = linear + [f for f in floors if f > 0] if reference else []
        y = log_scale(values + extra, bottom, y0)
        out.append(
            f'<line x1="{left}" y1="{bottom}" x2="{width - right}" y2="{bottom}" stroke="black"/>'
        )
        out.append(f'<line x1="{left}" y1="{y0}" x2="{left}" y2="{bottom}" stroke="black"/>')
        title = f"{label}, log-log" + ("; green: the floor, dashed: linear" if reference else "")
        out.append(f'<text x="{left}" y="{y0 - 8}" fill="{colour}">{title}</text>')
        for n in ns:
            out.append(f'<text x="{x(n):.1f}" y="{bottom + 15}" text-anchor="middle">{n:g}</text>')
        if reference:
            pts = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in zip(ns, linear, strict=True))
            out.append(
                f'<polyline points="{pts}" fill="none" stroke="#999" stroke-dasharray="4 4"/>'
            )
            # The floor where it was measured (not above the target size).
            measured = [(n, f) for n, f in zip(ns, floors, strict=True) if f > 0]
            if len(measured) > 1:
                pts = " ".join(f"{x(n):.1f},{y(f):.1f}" for n, f in measured)
                out.append(f'<polyline points="{pts}" fill="none" stroke="#2ca02c"/>')
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


def write_png(svg: Path) -> Path | None:
    """A PNG of the plot through headless Chromium (the dashboard previews' way), if any."""
    from obs_iac.generators.grafana.preview import chromium, svg_to_png

    if chromium() is None:
        return None
    match = re.search(r'width="(\d+)" height="(\d+)"', svg.read_text())
    if match is None:
        return None
    png = svg.with_suffix(".png")
    try:
        svg_to_png(svg, png, int(match[1]), int(match[2]))
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"no PNG: {exc}", file=sys.stderr)
        return None
    return png


def tool_version(name: str) -> str:
    path = shutil.which(name)
    if not path:
        return "not installed"
    proc = subprocess.run([path, "--version"], capture_output=True, text=True)
    return (proc.stdout or proc.stderr).splitlines()[0] if (proc.stdout or proc.stderr) else "?"


def checkout() -> str:
    proc = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True
    )
    return proc.stdout.strip() or "?"


def deviation(results: list[dict[str, Any]]) -> dict[int, float]:
    """Per-service time of each size relative to 100 services (the issue's baseline)."""
    base = next((r["ms_per_service"] for r in results if r["services"] == 100), None)
    if base is None:
        return {}
    return {r["services"]: r["ms_per_service"] / base - 1 for r in results}


def yes_no(met: bool | None) -> str:
    return "not measured" if met is None else ("yes" if met else "**no**")


def targets(report: dict[str, Any], target_n: int) -> list[dict[str, Any]]:
    """The eight targets of issue 12, each with what this run measured."""
    render = {r["services"]: r for r in report["render"]}
    at = render.get(target_n, {})
    rows: list[dict[str, Any]] = []

    def row(target: str, goal: str, measured: str, met: bool | None) -> None:
        rows.append({"target": target, "goal": goal, "measured": measured, "met": met})

    note = "" if target_n == 1000 else f" (at {target_n}, not 1000)"
    ratio = at.get("render_over_floor")
    row(
        "1. render / floor, 1000 services",
        "<= 3x",
        f"{ratio:.2f}x{note}" if ratio else "-",
        ratio <= 3 if ratio and target_n == 1000 else None,
    )
    peak = at.get("peak_mib")
    row(
        "1. peak memory, 1000 services",
        "<= 1024 MiB",
        f"{peak:.0f} MiB{note}" if peak else "-",
        peak <= MIB_TARGET if peak and target_n == 1000 else None,
    )
    devs = {n: d for n, d in deviation(report["render"]).items() if n >= 100}
    sizes = sorted(devs)
    worst = max(devs.values(), key=abs) if len(devs) > 1 else None
    row(
        "2. time per service, 100 upwards",
        "within +-25 % of 100",
        f"{100 * worst:+.0f} % worst ({', '.join(map(str, sizes))})" if worst is not None else "-",
        abs(worst) <= 0.25 if worst is not None and 5000 in devs and 1000 in devs else None,
    )
    lint = report.get("lint")
    row(
        "3. lint / promtool check rules",
        "<= 1.0x",
        f"{lint['ratio']:.2f}x ({lint['services']} services)" if lint else "-",
        lint["ratio"] <= 1.0 if lint and lint["services"] == 1000 else None,
    )
    inc = report.get("incremental")
    row(
        "4. incremental / full render",
        "<= 10 %, byte-identical",
        f"{100 * inc['ratio']:.1f} %, identical{note}" if inc else "-",
        inc["ratio"] <= 0.10 and inc["identical_to_uncached"] if inc and target_n == 1000 else None,
    )
    cores = report.get("jobs_1")
    row(
        "5. cores: default jobs vs --jobs 1",
        "faster, identical output",
        (
            f"{cores['speedup']:.2f}x on {report['machine']['cores']} cores, "
            + ("identical" if cores["identical_output"] else "DIFFERENT")
            if cores
            else "no --jobs option yet"
        ),
        cores["speedup"] > 1.0 and cores["identical_output"] if cores else None,
    )
    st = report["startup"]
    row("6. obs-iac --help", "<= 0.15 s", f"{st['help_seconds']:.3f} s", st["help_seconds"] <= 0.15)
    row(
        "6. render --check, two examples",
        "<= 1 s",
        f"{st['check_examples_seconds']:.3f} s",
        st["check_examples_seconds"] <= 1.0,
    )
    diff = report.get("diff")
    if diff:
        for key, title in (
            ("generated_warm", "generated/, warm cache"),
            ("generated_cold", "generated/, cold cache"),
            ("HEAD_warm", "--base HEAD, warm cache"),
            ("HEAD_cold", "--base HEAD, cold cache"),
        ):
            d = diff[key]
            row(
                f"7. diff / full render ({title})",
                "<= 1.5x",
                f"{d['ratio']:.2f}x{note}",
                d["ratio"] <= 1.5 if target_n == 1000 else None,
            )
    else:
        row("7. diff / full render", "<= 1.5x", "-", None)
    prog = report.get("progress")
    if prog:
        long_enough = prog["seconds"] > 2.5
        on_pipe = any(r["bar_on_pipe"] for r in report["render"])
        row(
            "8. progress bar on a terminal only",
            "bar on a tty after ~2 s; none on a pipe",
            f"tty ({prog['seconds']:.1f} s render): {'bar' if prog['bar_on_terminal'] else 'none'}"
            f"; pipe: {'bar' if on_pipe else 'none'}",
            (prog["bar_on_terminal"] and not on_pipe) if long_enough else None,
        )
    else:
        row("8. progress bar on a terminal only", "bar on a tty after ~2 s", "-", None)
    return rows


def markdown(report: dict[str, Any]) -> str:
    m, s = report["machine"], report["settings"]
    lines = [
        f"Machine: {m['cores']} cores, Python {m['python']}, {m['promtool']}; obs-iac "
        f"{m['obs_iac']} at {m['checkout']}. Median of {s['repeats']} runs; jobs: {s['jobs']}; "
        f"cache: {s['cache']}; peak memory: {s['memory']}.",
        "",
        "| services | render (s) | ms / service | vs 100 | floor (s) | render / floor "
        "| peak memory (MiB) | files |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    devs = deviation(report["render"])
    for r in report["render"]:
        dev = devs.get(r["services"])
        lines.append(
            f"| {r['services']} | {r['seconds_median']:.2f} | {r['ms_per_service']:.1f} | "
            + (f"{100 * dev:+.0f} % | " if dev is not None else "- | ")
            + (
                f"{r['floor_seconds_median']:.2f} | {r['render_over_floor']:.2f}x | "
                if "floor_seconds_median" in r
                else "- | - | "
            )
            + f"{r['peak_mib']:.0f} | {r['files']} |"
        )
    if j1 := report.get("jobs_1"):
        lines += [
            "",
            f"`--jobs 1` at {j1['services']} services: {j1['seconds_median']:.2f} s, peak "
            f"{j1['peak_mib']:.0f} MiB; the default pool is {j1['speedup']:.2f}x faster, "
            + ("with identical output." if j1["identical_output"] else "with DIFFERENT output."),
        ]
    if inc := report.get("incremental"):
        lines += [
            "",
            f"Incremental render ({inc['services']} services, one threshold changed in one "
            f"blueprint, warm cache): {inc['seconds_median']:.2f} s, "
            f"{100 * inc['ratio']:.1f} % of a full render ({inc['full_seconds']:.2f} s); "
            "output byte-identical to a render without the cache.",
        ]
    if diff := report.get("diff"):
        lines += [
            "",
            f"`obs-iac diff` of the {diff['services']}-service fleet after one changed threshold:",
            "",
            "| base | cache | diff (s) | diff / full render | peak memory (MiB) | changes |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for base, title in (("generated", "generated/"), ("HEAD", "git HEAD (renders both)")):
            for temperature in ("warm", "cold"):
                d = diff[f"{base}_{temperature}"]
                lines.append(
                    f"| {title} | {temperature} | {d['seconds_median']:.2f} | "
                    f"{d['ratio']:.2f}x | {d['peak_mib']:.0f} | {d['changes']} |"
                )
    st = report["startup"]
    lines += [
        "",
        f"`obs-iac --help`: {st['help_seconds']:.3f} s; `obs-iac render --check` on the two "
        f"examples: {st['check_examples_seconds']:.3f} s.",
    ]
    if lint := report.get("lint"):
        lines += [
            "",
            f"`obs-iac lint` on the {lint['services']}-service fleet's {lint['files']} rule "
            f"files ({lint['rules']} rules): {lint['obs_iac_lint_seconds']:.2f} s; `promtool "
            f"check rules`: {lint['promtool_check_rules_seconds']:.2f} s "
            f"({lint['ratio']:.2f}x).",
        ]
    if loop := report.get("test_loop"):
        lines += [""]
        for service, st in loop["promtool"]["services"].items():
            lines.append(
                f"`promtool test rules` on the generated tests of {service} ({st['files']} "
                f"files): {st['wall_median']:.2f} s wall, {st['cpu_median']:.2f} s CPU "
                f"(target < 10 s, load {st['load'][0]})."
            )
        if suite := loop.get("suite"):
            lines.append(
                f"`make test`: {suite['wall']:.0f} s wall (target < 240 s, load "
                f"{suite['load_before']:.1f} before, {suite['load_after']:.1f} after): "
                f"{suite['summary']}."
            )
    lines += ["", "| target (issue 12) | goal | measured | met |", "|---|---|---|---|"]
    lines += [
        f"| {t['target']} | {t['goal']} | {t['measured']} | {yes_no(t['met'])} |"
        for t in report["targets"]
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10,100,1000,5000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--target-size",
        type=int,
        default=1000,
        help="Size for --jobs 1, incremental, diff, progress and lint (default 1000; the "
        "largest size if 1000 is not among --sizes).",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--no-diff", action="store_true", help="Skip the obs-iac diff timing.")
    parser.add_argument("--no-lint", action="store_true", help="Skip lint against promtool.")
    parser.add_argument(
        "--no-test-loop",
        action="store_true",
        help="Skip the test loop (per-service promtool time and the whole `make test`).",
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    target_n = args.target_size if args.target_size in sizes else max(sizes)
    engine = Engine.detect()
    if not (engine.jobs and engine.no_cache):
        print(
            "note: `obs-iac render` has no "
            + " / ".join(
                o for o, ok in (("--jobs", engine.jobs), ("--no-cache", engine.no_cache)) if not ok
            )
            + " yet; measuring without",
            flush=True,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "promtool": tool_version("promtool"),
            "obs_iac": metadata.version("obs-iac"),
            "checkout": checkout(),
        },
        "settings": {
            "repeats": args.repeats,
            "target_size": target_n,
            "jobs": engine.default_jobs,
            "engine": {"jobs_option": engine.jobs, "no_cache_option": engine.no_cache},
            "cache": "emptied before every full render",
            "memory": "max over runs of the summed PSS of the command's process tree, "
            "sampled every 100 ms",
        },
        "render": [],
    }
    limits = fresh_limits()
    with tempfile.TemporaryDirectory(prefix="obs-iac-bench-") as tmp_name:
        tmp = Path(tmp_name)
        report["startup"] = startup = measure_startup(tmp, max(args.repeats, 5))
        print(
            f"obs-iac --help: {startup['help_seconds']:.3f} s; render --check on the two "
            f"examples: {startup['check_examples_seconds']:.3f} s",
            flush=True,
        )
        for n in sizes:
            root = make_fleet(tmp / f"fleet-{n}", n)
            cache = tmp / f"cache-{n}"
            # The floor is a target at the target size only: elsewhere it is context,
            # measured once, and above the target size not at all (the reference
            # pipeline holds the whole fleet in memory: about 9 GiB at 5,000 services).
            floor = args.repeats if n == target_n else (1 if n < target_n else 0)
            stats = measure_render(root, args.repeats, engine, cache, jobs=None, floor=floor)
            stats["services"] = n
            stats["ms_per_service"] = 1000 * stats["seconds_median"] / n
            stats.setdefault("files", stats["files_on_disk"] - 1)  # less the manifest
            report["render"].append(stats)
            floor_text = (
                f", floor {stats['floor_seconds_median']:.2f} s (render/floor "
                f"{stats['render_over_floor']:.2f}x)"
                if "floor_seconds_median" in stats
                else ", floor not measured"
            )
            print(
                f"render {n:>5} services: {stats['seconds_median']:.2f} s median "
                f"({stats['ms_per_service']:.1f} ms/service), peak {stats['peak_mib']:.0f} MiB "
                f"({stats['memory_method']}), {stats['files']} files{floor_text}",
                flush=True,
            )
            if n != target_n:
                shutil.rmtree(root)
                shutil.rmtree(cache, ignore_errors=True)
                continue
            full = stats["seconds_median"]
            if engine.jobs:
                pooled = tmp / "pooled-output"
                shutil.copytree(root / "generated", pooled)
                single = measure_render(root, args.repeats, engine, cache, jobs=1, floor=0)
                differences = tree_differences(root / "generated", pooled)
                shutil.rmtree(pooled)
                report["jobs_1"] = {
                    "services": n,
                    "seconds_median": single["seconds_median"],
                    "seconds_runs": single["seconds_runs"],
                    "peak_mib": single["peak_mib"],
                    "speedup": single["seconds_median"] / full,
                    "identical_output": not differences,
                }
                print(
                    f"render {n:>5} services --jobs 1: {single['seconds_median']:.2f} s "
                    f"(pool speedup {single['seconds_median'] / full:.2f}x), "
                    f"{'identical' if not differences else 'DIFFERENT'} output",
                    flush=True,
                )
                if differences:
                    raise BenchError(
                        "--jobs 1 and the default pool wrote different files:\n  "
                        + "\n  ".join(differences[:20])
                    )
            inc = measure_incremental(root, args.repeats, engine, cache, tmp, limits, full)
            report["incremental"] = inc
            print(
                f"incremental render {n:>5} services, one threshold changed: "
                f"{inc['seconds_median']:.2f} s median ({100 * inc['ratio']:.1f} % of full), "
                "byte-identical to an uncached render",
                flush=True,
            )
            if not args.no_diff:
                report["diff"] = diff = measure_diff(root, args.repeats, cache, tmp, limits, full)
                for key in ("generated_warm", "generated_cold", "HEAD_warm", "HEAD_cold"):
                    d = diff[key]
                    print(
                        f"diff   {n:>5} services, base {key}: {d['seconds_median']:.2f} s "
                        f"median ({d['ratio']:.2f}x full), peak {d['peak_mib']:.0f} MiB, "
                        f"{d['changes']} changes",
                        flush=True,
                    )
            report["progress"] = prog = measure_progress(root, engine, cache)
            print(
                f"render {n:>5} services on a terminal ({prog['seconds']:.1f} s): progress "
                f"bar {'shown' if prog['bar_on_terminal'] else 'not shown'}",
                flush=True,
            )
            shutil.rmtree(root)
            shutil.rmtree(cache, ignore_errors=True)
    if not args.no_lint:
        report["lint"] = measure_lint(target_n, args.repeats, args.out)
    if not args.no_test_loop:
        report["test_loop"] = measure_test_loop(args.repeats, args.out, suite=True)
    report["targets"] = targets(report, target_n)
    (args.out / "latest.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    text = markdown(report)
    (args.out / "latest.md").write_text(text)
    if len(report["render"]) > 1:
        svg = args.out / "latest.svg"
        svg.write_text(svg_plot(report["render"]))
        write_png(svg)
    print(text)
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as exc:
        print(f"bench FAILED: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
