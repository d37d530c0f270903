"""The ``obs-iac`` command. Heavy modules are imported inside commands so --help is instant."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def _color(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)()) and "NO_COLOR" not in os.environ


def _report(diagnostics: Sequence[Any], fmt: str, root: Path) -> None:
    from obs_iac.diagnostics import SourceCache, format_github, format_json, format_text

    if not diagnostics:
        return
    if fmt == "json":
        click.echo(format_json(diagnostics))
    elif fmt == "github":
        click.echo(format_github(diagnostics))
    else:
        click.echo(format_text(diagnostics, SourceCache(root), color=_color(sys.stderr)), err=True)


def guarded(func: F) -> F:
    """Turns obs-iac's errors into diagnostics and exit codes; tracebacks only with --debug."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        obj = ctx.find_root().params
        debug = bool(obj.get("debug"))
        fmt = kwargs.get("fmt", "text") or "text"
        from obs_iac.diagnostics import ObsIacError

        try:
            return func(*args, **kwargs)
        except BrokenPipeError:
            _pipe_closed()
        except ObsIacError as exc:
            root = _found_root() or Path(".")
            _report(exc.diagnostics, fmt if fmt in ("json", "github") else "text", root)
            if debug and exc.__cause__ is not None:
                traceback.print_exception(exc.__cause__)
            ctx.exit(int(exc.exit_code))
        except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt):
            raise
        except OSError as exc:
            from obs_iac.render.writer import FAULT_ERRNOS, fault

            if exc.errno not in FAULT_ERRNOS:
                _internal(exc, debug)
                ctx.exit(EXIT_INTERNAL)
            # The file system's fault, not obs-iac's: wherever it struck, nothing was
            # swapped in (the writer reports its own faults with more context).
            error = fault(exc, "read or write a file")
            where = _found_root() or Path(".")
            _report(error.diagnostics, fmt if fmt in ("json", "github") else "text", where)
            if debug:
                traceback.print_exc()
            ctx.exit(int(error.exit_code))
        except Exception as exc:
            _internal(exc, debug)
            ctx.exit(EXIT_INTERNAL)

    return wrapper  # type: ignore[return-value]


def _internal(exc: BaseException, debug: bool) -> None:
    if debug:
        traceback.print_exception(exc)
    else:
        click.echo(
            f"internal error: {type(exc).__name__}: {exc}\n"
            "  help: this is a bug in obs-iac; rerun with --debug for the traceback",
            err=True,
        )


EXIT_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a process SIGPIPE ended


def _pipe_closed() -> None:
    """The reader went away (``obs-iac fields | head``): stop quietly, as git and coreutils
    do. Later writes, and the flush at exit, go to /dev/null instead of raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout with no descriptor (captured in-process)
        pass
    finally:
        os.close(devnull)
    sys.exit(EXIT_PIPE)


def _die_of_sigpipe() -> None:
    """Ends the process by SIGPIPE itself, so a shell sees 141 and a parent process sees
    the signal, exactly as for a C program; exit 141 if the signal cannot be raised."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(EXIT_PIPE)


def entry() -> None:
    """The console script: main(), then exit at once. A fleet render leaves millions of
    objects behind; tearing them down one by one at interpreter exit costs seconds and
    serves nothing (mypy exits the same way). For the same reason the cyclic collector
    stays off: a full collection over those objects after a render (what re-enabling it
    leads to) costs about a second at 1,000 services, and the process ends right after."""
    gc.disable()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    except BrokenPipeError:  # a write outside a command (help, usage)
        code = EXIT_PIPE
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the last buffered lines met the closed pipe
        code = EXIT_PIPE
    with contextlib.suppress(BrokenPipeError):
        sys.stderr.flush()
    if code == EXIT_PIPE:
        _die_of_sigpipe()
    os._exit(code)


_GLOBAL_VALUE_OPTIONS = ("--root",)
_GLOBAL_FLAGS = ("--debug",)


def hoist_global_options(args: list[str]) -> list[str]:
    """Moves ``--root DIR`` (and ``--debug``) written after the subcommand in front of it:
    they belong to the whole program, and users write them where they think of them
    (``obs-iac render --root ../repo``). Nothing after ``--`` moves."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        if arg in _GLOBAL_VALUE_OPTIONS and i + 1 < len(args):
            front.extend(args[i : i + 2])
            i += 2
            continue
        if arg.startswith(tuple(f"{o}=" for o in _GLOBAL_VALUE_OPTIONS)) or arg in _GLOBAL_FLAGS:
            front.append(arg)
        else:
            rest.append(arg)
        i += 1
    return front + rest


class _Cli(click.Group):
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(list(args)))


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from importlib import metadata

    try:
        version = metadata.version("obs-iac")
    except metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    click.echo(f"obs-iac {version}")
    ctx.exit(0)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The GitOps repository (default: the current folder if it has blueprints/, else "
    "the nearest folder upwards with obs-iac.toml or a pyproject.toml with [tool.obs-iac], "
    "like git). Accepted before or after the subcommand.",
)
@click.option("--debug", is_flag=True, help="Show tracebacks for internal and plugin errors.")
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_version,
    help="Print the obs-iac version and exit.",
)
def main(root: Path | None, debug: bool) -> None:
    """obs-iac: compile service blueprints into DCGM, Prometheus, Alertmanager, Loki and
    Grafana configuration, lint it, and keep generated/ in sync."""


def _found_root() -> Path | None:
    """--root, else the nearest repository at or above the current folder, else None."""
    ctx = click.get_current_context().find_root()
    value = ctx.params.get("root")
    if value:
        return Path(value)
    if "found_root" not in ctx.meta:
        from obs_iac.config import find_root

        ctx.meta["found_root"] = find_root(Path.cwd())
    found: Path | None = ctx.meta["found_root"]
    return found


def _root(required: bool = True) -> Path:
    """The repository the command works on. Commands that can work without one (schema,
    plugins, lint of given files) pass ``required=False`` and get the current folder."""
    found = _found_root()
    if found is not None:
        return found
    if not required:
        return Path(".")
    from obs_iac.diagnostics import Diagnostic, InputError, Severity

    raise InputError(
        [
            Diagnostic(
                "repo/not-found",
                Severity.ERROR,
                f"not in an obs-iac repository: no obs-iac.toml, and no pyproject.toml with "
                f"[tool.obs-iac], in {Path.cwd()} or any folder above it, and no blueprints/ "
                "folder here",
                hint="cd into your GitOps repository, pass --root DIR, or create one with "
                "`obs-iac init DIR`",
            )
        ]
    )


@main.command()
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if generated/ is stale.")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Processes to render with (default: every core, or $OBS_IAC_JOBS); the output is "
    "the same for any number.",
)
@click.option(
    "--no-cache",
    is_flag=True,
    help="Recompute every service instead of reusing the cache (.obs-iac-cache/, or "
    "$OBS_IAC_CACHE_DIR).",
)
@guarded
def render(check: bool, fmt: str, jobs: int | None, no_cache: bool) -> None:
    """Render every blueprint into the output folder (atomically; only owned files)."""
    from obs_iac.pipeline import open_workspace
    from obs_iac.render.lock import repo_lock

    ws = open_workspace(_root())
    # One run at a time writes a repository; a check takes the lock too, so that it
    # never compares a tree another run is swapping.
    with repo_lock(ws.root, "render --check" if check else "render", required=not check):
        _render_locked(ws, check, fmt, jobs, no_cache)


def _render_locked(ws: Any, check: bool, fmt: str, jobs: int | None, no_cache: bool) -> None:
    from obs_iac import conventions
    from obs_iac.engine.run import remember_output
    from obs_iac.engine.run import run as render_engine
    from obs_iac.progress import progress_for
    from obs_iac.render.writer import commit, discard_all, drift_of

    out = ws.output
    if check and os.path.lexists(out / conventions.JOURNAL):
        click.echo(
            f"{ws.config.output}/ is mid-swap: a render was interrupted after it committed "
            f"its journal ({conventions.JOURNAL}); run `obs-iac render` to finish it",
            err=True,
        )
        sys.exit(EXIT_FINDINGS)
    # The bar shows only on a terminal and only after two seconds; it is cleared before
    # anything below is printed.
    result = render_engine(
        ws,
        mode="check" if check else "write",
        jobs=jobs,
        use_cache=not no_cache,
        progress=progress_for(sys.stderr),
    )
    # Informational findings belong to `obs-iac lint`; render speaks up for problems only.
    _report([f for f in result.findings if f.severity.label != "info"], fmt, ws.root)
    blocking = [f for f in result.findings if f.severity.label == "error"]
    if check:
        drift = drift_of(out, result.records)
        if fmt == "json":
            click.echo(
                json.dumps(
                    {
                        "added": drift.added,
                        "changed": drift.changed,
                        "removed": drift.removed,
                        "foreign_conflicts": drift.foreign_conflicts,
                        "clean": drift.clean,
                    },
                    indent=2,
                    sort_keys=True,
                )
            )
        if not drift.clean:
            click.echo(
                f"{ws.config.output}/ is stale; run `obs-iac render` (or `make render`):\n"
                + drift.summary(),
                err=True,
            )
            sys.exit(EXIT_FINDINGS)
        if fmt == "text":
            click.echo(
                f"{ws.config.output}/ is up to date ({len(result.records)} files).", err=True
            )
        sys.exit(EXIT_FINDINGS if blocking else EXIT_OK)
    if blocking:
        discard_all(out, result.output_existed)
        click.echo("not written: fix the errors above first", err=True)
        sys.exit(EXIT_FINDINGS)
    drift = commit(out, result.records, result.staged)
    remember_output(result, out)
    n_add, n_chg, n_rm = len(drift.added), len(drift.changed), len(drift.removed)
    click.echo(
        f"rendered {result.services} services into {ws.config.output}/: "
        f"{n_add} added, {n_chg} changed, {n_rm} removed, "
        f"{len(result.records) - n_add - n_chg} unchanged",
        err=True,
    )


@main.command()
@click.option("--format", "fmt", type=click.Choice(["json"]), default="json", show_default=True)
@guarded
def plan(fmt: str) -> None:
    """Print the compiled plan (the IR every generator reads)."""
    from obs_iac.pipeline import build_plan, open_workspace
    from obs_iac.plugins import discover

    ws = open_workspace(_root())
    result = build_plan(ws, discover(ws.config))
    click.echo(json.dumps(result.model_dump(mode="json", by_alias=True), indent=2, sort_keys=True))


@main.command()
@click.option("--config", "config", is_flag=True, help="Schema of [tool.obs-iac] instead.")
@guarded
def schema(config: bool) -> None:
    """Print the JSON Schema of service blueprints (or of the repo settings), for editors."""
    if config:
        from obs_iac.config import config_schema

        click.echo(json.dumps(config_schema(), indent=2, sort_keys=True))
        return
    from obs_iac.blueprint import service_schema
    from obs_iac.config import load_repo_config
    from obs_iac.plugins import discover

    cfg, _ = load_repo_config(_root(required=False))
    plugins = discover(cfg)
    sections = {s: m for p in plugins.packs for s, m in p.obj.sections.items()}
    click.echo(json.dumps(service_schema(sections), indent=2, sort_keys=True))


@main.command()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@guarded
def plugins(fmt: str) -> None:
    """List installed packs, generators and lint rules, with their distributions."""
    from obs_iac.config import load_repo_config
    from obs_iac.plugins import discover

    cfg, _ = load_repo_config(_root(required=False))
    found = discover(cfg)
    rows = [
        {
            "kind": p.kind,
            "name": p.name,
            "distribution": p.distribution,
            "version": p.version,
            "entry_point": p.entry_point,
            "description": str(getattr(p.obj, "description", "")),
        }
        for p in found.all()
    ]
    if fmt == "json":
        click.echo(json.dumps(rows, indent=2, sort_keys=True))
        return
    for row in rows:
        click.echo(f"{row['kind']:<10} {row['name']:<28} {row['distribution']} {row['version']}")


@main.command()
@click.argument("pattern", required=False, default="")
@click.option("--exporter", default=None, help="Only names this dcgm-exporter tag accepts.")
@guarded
def fields(pattern: str, exporter: str | None) -> None:
    """List DCGM fields (name, id, type, status), optionally filtered by a substring."""
    from obs_iac.catalog import dcgm

    for field in sorted(dcgm.catalog().values(), key=lambda f: (f.field_id, f.name)):
        if pattern.upper() not in field.name:
            continue
        if exporter and not dcgm.accepted(field, exporter):
            continue
        click.echo(
            f"{field.name:<52} {field.field_id:>5} {field.prometheus_type:<8} {field.status}"
        )


@main.command()
@click.option(
    "--base",
    default=None,
    metavar="REF",
    help="Compare with the render of this git ref (rendered with this obs-iac) instead of "
    "the committed output folder.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
)
@click.option("--exit-code", is_flag=True, help="Exit 1 when anything changed.")
@guarded
def diff(base: str | None, fmt: str, exit_code: bool) -> None:
    """Show what a change means for production: rendered output compared by meaning.

    Exits 1 on an unacknowledged error flag (e.g. a dropped canonical label), or with
    --exit-code on any change; 2 on bad input (unknown ref, base that does not render).
    """
    from obs_iac.diff.engine import run_diff
    from obs_iac.diff.report import to_json, to_markdown, to_text
    from obs_iac.render.lock import repo_lock

    # It writes only the cache, but reads generated/: not while a render swaps it.
    with repo_lock(_root(), "diff", required=False):
        result = run_diff(_root(), base)
    if fmt == "json":
        click.echo(to_json(result))
    elif fmt == "markdown":
        click.echo(to_markdown(result), nl=False)
    else:
        click.echo(to_text(result, color=_color(sys.stdout)))
    if result.errors or (exit_code and result.changed):
        sys.exit(EXIT_FINDINGS)


@main.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Scaffold into a directory that is not empty.")
@click.option(
    "--ci",
    type=click.Choice(["github", "gitlab", "none"]),
    default="github",
    show_default=True,
    help="Which CI recipe to add (ci.sh is always written).",
)
@click.option(
    "--from",
    "source",
    default=None,
    metavar="WHEEL|PATH|GIT-URL",
    help="Where the repository installs obs-iac from: a wheel (copied into vendor/), a "
    "source folder, or git+https://...@TAG (default: where this obs-iac came from).",
)
@guarded
def init(directory: Path, force: bool, ci: str, source: str | None) -> None:
    """Scaffold a new GitOps repository in DIRECTORY (blueprints, settings, a Makefile
    with its own venv, a pinned obs-iac, ci.sh and a CI recipe)."""
    from obs_iac.scaffold.gitops import scaffold_repo
    from obs_iac.scaffold.source import from_option, running

    resolved = from_option(source) if source is not None else running()
    written = scaffold_repo(directory, force=force, ci=ci, source=resolved)
    click.echo(f"created {len(written)} files in {directory}:", err=True)
    for rel in written:
        click.echo(f"  {rel}", err=True)
    click.echo(f"obs-iac from: {resolved.note}", err=True)
    click.echo(
        f"next: cd {directory} && make render && git init && git add -A && git commit",
        err=True,
    )


@main.command()
@click.argument("kind", type=click.Choice(["pack", "generator", "lint-rule"]))
@click.argument("name")
@click.option(
    "--dir",
    "parent",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    help="Where to create obs-iac-NAME/.",
)
@guarded
def new(kind: str, name: str, parent: Path) -> None:
    """Scaffold a plugin package (pack, generator or lint rule) with a passing test."""
    from obs_iac.scaffold import scaffold

    target = scaffold(kind, name, parent)
    click.echo(f"created {target}; next: pip install -e {target} && pytest {target}/tests")


@main.command()
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("previews"),
    show_default=True,
    help="Folder for the SVG (and PNG) previews.",
)
@click.option("--png", is_flag=True, help="Also screenshot each SVG in headless Chromium.")
@guarded
def preview(out: Path, png: bool) -> None:
    """Draw each generated dashboard's layout as SVG (and PNG), for review.

    Every preview is drawn into a temporary folder first and moved into --out only when
    all of them succeeded: a failed run leaves the previous previews as they were."""
    import shutil
    import subprocess
    import tempfile

    from obs_iac.diagnostics import Diagnostic, InputError, Severity
    from obs_iac.generators.grafana.preview import chromium, render_svg, size, svg_to_png
    from obs_iac.lint.dashboard import dashboards
    from obs_iac.pipeline import open_workspace
    from obs_iac.pipeline import render as do_render

    browser = chromium() if png else None
    if png and browser is None:
        raise InputError(
            [
                Diagnostic(
                    "preview/no-chromium",
                    Severity.ERROR,
                    "--png needs headless Chromium, which is not installed (looked for "
                    "chromium, chromium-browser and google-chrome on PATH)",
                    hint="install it (Debian/Ubuntu: apt-get install chromium), or leave out "
                    "--png for the SVG previews only",
                )
            ]
        )
    ws = open_workspace(_root())
    result = do_render(ws)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".preview-", dir=out) as tmp:
        staged = Path(tmp)
        names: list[str] = []
        for art in dashboards(result.artifacts):
            uid = str(art.data.get("uid"))
            svg = staged / f"{uid}.svg"
            svg.write_text(render_svg(art.data), encoding="utf-8")
            names.append(svg.name)
            if png:
                width, height = size(art.data)
                try:
                    svg_to_png(svg, staged / f"{uid}.png", width, height, browser)
                except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                    raise InputError(
                        [
                            Diagnostic(
                                "preview/chromium-failed",
                                Severity.ERROR,
                                f"Chromium could not screenshot {uid}: {exc}",
                                hint=f"{out}/ is unchanged; run without --png for the SVGs, "
                                "or check that Chromium starts headless here",
                            )
                        ]
                    ) from None
                names.append(f"{uid}.png")
        for name in names:
            shutil.move(staged / name, out / name)
    count = sum(1 for n in names if n.endswith(".svg"))
    what = "SVG and PNG" if png else "SVG"
    click.echo(f"wrote {count} dashboard previews ({what}) to {out}/", err=True)


@main.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
)
@guarded
def check(fmt: str) -> None:
    """Conformance per service: collection, labels, storage, alerting, compatibility.

    Exits 1 when a service fails a dimension; 2 on bad input (blueprints, matrix CSV).
    """
    from obs_iac.governance.check import load, run_checks, to_json, to_markdown, to_text

    checks = run_checks(load(_root()))
    if fmt == "json":
        click.echo(json.dumps(to_json(checks), indent=2, sort_keys=True))
    elif fmt == "markdown":
        click.echo(to_markdown(checks), nl=False)
    else:
        click.echo(to_text(checks), nl=False)
    if not all(c.passed for c in checks):
        sys.exit(EXIT_FINDINGS)


@main.command()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json", "html"]),
    default="text",
    show_default=True,
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the report to this file instead of stdout.",
)
@guarded
def score(fmt: str, output: Path | None) -> None:
    """Maturity scorecard per service: coverage, correlation, decision (12 items, /60)."""
    from obs_iac.governance.check import load
    from obs_iac.governance.score import render_report, score_all

    cards = score_all(load(_root()))
    text = render_report(cards, fmt)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)


@main.command(name="test")
@click.option("--live", is_flag=True, help="Run the generated config on the real stack.")
@click.option(
    "--stack",
    type=click.Choice(["floor", "current", "both"]),
    default="both",
    show_default=True,
    help="floor: Prometheus 2.42 + Alertmanager 0.25 (Debian); current: 3.x + 0.35 (`make tools`).",
)
@click.option(
    "--time-scale",
    type=click.IntRange(1, 600),
    default=60,
    show_default=True,
    help="--live: divide every duration of the rules and the stack (for:, windows, "
    "offsets, scrape and evaluation intervals) by N; thresholds stay as generated.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text")
@click.option(
    "--timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="--live: seconds each program may take to come up.",
)
@click.option(
    "--upgraded-exporter",
    metavar="VERSION",
    default=None,
    help="--live: the over-temperature and node-down nodes serve this dcgm-exporter "
    "release's shape (a rolling upgrade), the rest the blueprint's pin.",
)
@guarded
def test_(
    live: bool,
    stack: str,
    time_scale: int,
    fmt: str,
    timeout: float,
    upgraded_exporter: str | None,
) -> None:
    """Prove the generated configuration: promtool tests, or (--live) every alert and
    inhibit edge on the real Prometheus and Alertmanager. Exits 1 on a failure, 2 when
    a tool is missing or of the wrong version (run `make tools`). See docs/testing.md."""
    from obs_iac.pipeline import open_workspace

    stacks = ["floor", "current"] if stack == "both" else [stack]
    ws = open_workspace(_root())
    if not live:
        from obs_iac.live.promtool import run_promtool_tests

        ok = True
        report: list[dict[str, Any]] = []
        for name in stacks:
            version, results = run_promtool_tests(ws.output, name)  # type: ignore[arg-type]
            for r in results:
                ok = ok and r.passed
                report.append(
                    {
                        "stack": name,
                        "promtool": version,
                        "file": r.file,
                        "passed": r.passed,
                        "output": r.output,
                    }
                )
        if fmt == "json":
            click.echo(json.dumps(report, indent=2, sort_keys=True))
        else:
            for r_ in report:
                mark = "PASS" if r_["passed"] else "FAIL"
                click.echo(f"{mark} {r_['stack']} promtool {r_['promtool']}: {r_['file']}")
                if not r_["passed"]:
                    click.echo("  " + r_["output"].strip().replace("\n", "\n  "))
        if not ok:
            sys.exit(EXIT_FINDINGS)
        return
    from obs_iac.live import report as live_report
    from obs_iac.live.procs import StackError
    from obs_iac.live.run import run_live
    from obs_iac.live.timescale import ScaleError

    try:
        result = run_live(
            ws.root,
            stacks,
            time_scale=time_scale,
            timeout=timeout,
            upgraded_exporter=upgraded_exporter,
        )
    except (StackError, ScaleError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_FINDINGS if isinstance(exc, StackError) else EXIT_BAD_INPUT)
    if fmt == "json":
        click.echo(live_report.dumps(result), nl=False)
    elif fmt == "markdown":
        click.echo(live_report.to_markdown(result), nl=False)
    else:
        click.echo(live_report.to_text(result), nl=False)
    if not result.passed:
        sys.exit(EXIT_FINDINGS)


@main.group(name="import")
def import_() -> None:
    """Turn an SLO spec from another tool into a blueprint file."""


def _import_spec(kind: str, file: Path, output: Path | None, force: bool, team: str) -> None:
    from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity
    from obs_iac.packs.slo.importers import (
        check_names,
        load_openslo,
        load_sloth,
        render_blueprint,
    )

    loaded = load_sloth(file) if kind == "sloth" else load_openslo(file)
    check_names(loaded, file.as_posix())
    text = render_blueprint(loaded, team)
    if output is None:
        click.echo(text, nl=False)
        return
    if output.exists() and not force:
        raise InputError(
            [
                Diagnostic(
                    "import/exists",
                    Severity.ERROR,
                    f"{output} already exists; not overwritten",
                    hint="pass --force to replace it, or choose another -o path",
                    location=Location(output.as_posix()),
                )
            ]
        )
    output.write_text(text, encoding="utf-8")
    click.echo(f"wrote {output} ({len(loaded.slos)} SLOs); review its TODOs", err=True)


_import_options = [
    click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path)),
    click.option(
        "-o",
        "--output",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Write the blueprint here instead of stdout.",
    ),
    click.option("--force", is_flag=True, help="Overwrite an existing --output file."),
    click.option("--team", default="todo", show_default=True, help="Owning team label."),
]


def _with_import_options(func: F) -> F:
    for option in reversed(_import_options):
        func = option(func)
    return func


@import_.command(name="sloth")
@_with_import_options
@guarded
def import_sloth(file: Path, output: Path | None, force: bool, team: str) -> None:
    """A Sloth prometheus/v1 spec (service, slos[]) -> blueprint (window: Sloth's 30d default)."""
    _import_spec("sloth", file, output, force, team)


@import_.command(name="openslo")
@_with_import_options
@guarded
def import_openslo(file: Path, output: Path | None, force: bool, team: str) -> None:
    """An OpenSLO v1 SLO (with its ratioMetric SLI and objectives) -> blueprint."""
    _import_spec("openslo", file, output, force, team)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--fail-on",
    type=click.Choice(["warning", "error"]),
    default="error",
    show_default=True,
    help="Lowest severity that makes the exit code 1.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
)
@click.option(
    "--info",
    "show_info",
    is_flag=True,
    help="Also print informational findings (json output always has them).",
)
@click.option("--today", default=None, hidden=True, help="Date for suppression expiry (tests).")
@guarded
def lint(
    paths: tuple[Path, ...], fail_on: str, fmt: str, show_info: bool, today: str | None
) -> None:
    """Lint the plan and everything generated, or the given rule files (Prometheus rule
    files, PrometheusRule CRDs, Mimir/Cortex namespace files). Exit 1 on findings at or
    above --fail-on, 2 on unreadable input."""
    import datetime as dt

    from obs_iac.diagnostics import Severity
    from obs_iac.lint.run import run_lint

    try:
        day = dt.date.fromisoformat(today) if today else None
    except ValueError:
        raise click.BadParameter("expected YYYY-MM-DD", param_hint="--today") from None
    root = _root(required=not paths)
    result = run_lint(root, paths, day)
    if fmt == "json" and not result.diagnostics:
        from obs_iac.diagnostics import format_json

        click.echo(format_json([]))  # consumers always get a document
    shown = [
        d for d in result.diagnostics if show_info or fmt == "json" or d.severity > Severity.INFO
    ]
    _report(shown, fmt, root)
    threshold = Severity.WARNING if fail_on == "warning" else Severity.ERROR
    if fmt == "text":
        errors = sum(1 for d in result.diagnostics if d.severity is Severity.ERROR)
        warnings = sum(1 for d in result.diagnostics if d.severity is Severity.WARNING)
        infos = sum(1 for d in result.diagnostics if d.severity is Severity.INFO)
        what = f"{result.files} files" if paths else f"{result.files} rule groups"
        hidden = f" ({infos} notes: --info shows them)" if infos and not show_info else ""
        click.echo(f"lint: {errors} errors, {warnings} warnings in {what}{hidden}", err=True)
    sys.exit(int(result.exit_code(threshold)))


if __name__ == "__main__":  # pragma: no cover
    main()
