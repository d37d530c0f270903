"""The render engine: load, expand, assemble, then render every service's shard and the
fleet-level files, in a process pool and from the cache.

Stages and their unit of work:

1. load and validate every blueprint (main process; cross-service checks need them all);
2. expand each service through the packs: per service, in the pool, cached by
   expansion key (the expansion, and apart from it the metrics it declares);
3. the fleet's metric catalogue, from the declared metrics (main process);
4. render each service's shard (service-scope generators, serialisation, service-scope
   lint rules, and the comparison with the output folder): per service, in a pool
   forked before the main process loads the expansions, cached by shard key;
   meanwhile the main process assembles the whole plan;
5. once the pool is gone, the fleet-level generators and the lint rules that need the
   whole plan (main process);
6. the caller commits: writer.commit() renames what step 4 and 5 staged.

The result is the same whatever the number of processes and whatever the cache holds:
shards are independent, every collection is sorted before it is returned, and tests
compare the engine against the in-process pipeline (obs_iac.pipeline.render).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import datetime as dt
import gc
import hashlib
import json
import multiprocessing
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from obs_iac import conventions
from obs_iac.diagnostics import Diagnostic, InputError, ObsIacError, PluginError, Severity
from obs_iac.engine.cache import Cache, cache_root
from obs_iac.engine.compact import compact
from obs_iac.engine.keys import (
    base_key,
    catalogue_key,
    digest,
    expansion_key,
    shard_key,
)
from obs_iac.lint.suppress import apply_for as apply_suppressions
from obs_iac.load import load_blueprints, no_services
from obs_iac.plan.compile import (
    ServiceBlueprint,
    assemble_plan,
    catalogue_of,
    expand_service,
    pack_contexts,
    service_plan,
    validate_services,
)
from obs_iac.plan.model import MetricSpec, Plan, ServicePlan
from obs_iac.plugins import (
    Contribution,
    GeneratorContext,
    LintContext,
    LoadedPlugin,
    PackContext,
    PluginSet,
    crashed,
    outside_paths,
    plugin_settings,
)
from obs_iac.progress import NullProgress, Progress
from obs_iac.render.artifact import Artifact
from obs_iac.render.serialize import serialize
from obs_iac.render.writer import (
    FileRecord,
    FileState,
    PathGuard,
    check_output_folder,
    discard_all,
    fault,
    stage,
    unsafe_path,
)

Mode = Literal["write", "check", "collect"]
JOBS_ENV = "OBS_IAC_JOBS"
# Below this many services a pool costs more (fork, pickling) than it saves.
MIN_SHARDS_PER_WORKER = 8


Seen = tuple[int, int, int, str]  # size, mtime_ns, inode, sha256 of a file in the output


@dataclass(frozen=True)
class ShardOutput:
    """One shard's rendered files and findings: what the cache stores."""

    files: tuple[tuple[str, str, bytes], ...]  # (path, generator, bytes)
    findings: tuple[Diagnostic, ...]
    problems: tuple[Diagnostic, ...]
    artifacts: tuple[Artifact, ...] | None  # only when a fleet-scope lint rule needs them
    views: tuple[str, ...] = ()  # digest of each fleet-level plugin's fleet_view (see _State)


@dataclass(frozen=True)
class EngineResult:
    whole_plan: Callable[[], Plan]  # assembled on demand: a warm render may never need it
    services: int
    records: tuple[FileRecord, ...]  # sorted by path
    findings: tuple[Diagnostic, ...]
    files: dict[str, bytes] | None  # mode "collect" only
    staged: tuple[str, ...]  # mode "write": what sits next to its target, to be committed
    jobs: int
    output_existed: bool = True  # for discard_all(), when the caller does not commit
    cache_dir: Path | None = None
    cache_hits: int = 0
    cache_misses: int = 0
    # Files found unchanged by stat alone, and what that stat was: remember_output keeps it.
    seen: Mapping[str, Seen] = field(default_factory=dict)
    unchanged_by_stat: frozenset[str] = frozenset()

    @property
    def plan(self) -> Plan:
        return self.whole_plan()


@dataclass
class _Settled:
    records: list[FileRecord] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    staged: list[str] = field(default_factory=list)
    unchanged_by_stat: list[str] = field(default_factory=list)

    def extend(self, other: _Settled) -> None:
        self.records.extend(other.records)
        self.files.update(other.files)
        self.staged.extend(other.staged)
        self.unchanged_by_stat.extend(other.unchanged_by_stat)


@dataclass
class _State:
    """What every shard needs; set before the pool forks, so workers inherit it."""

    plugins: PluginSet
    services: list[ServiceBlueprint]
    pack_ctx: dict[str, PackContext]
    expansion_keys: list[str]
    cache: Cache | None
    out: Path
    owned: dict[str, str]
    mode: Mode
    force_adopt: bool
    seen: dict[str, Seen] = field(default_factory=dict)
    guard: PathGuard = field(default_factory=lambda: PathGuard(Path(".")))
    service_plans: list[ServicePlan] = field(default_factory=list)
    pickled: list[bytes] = field(default_factory=list)
    catalogue: tuple[MetricSpec, ...] = ()
    repo: Any = None
    generators: list[tuple[LoadedPlugin, GeneratorContext]] = field(default_factory=list)
    service_rules: list[tuple[LoadedPlugin, LintContext]] = field(default_factory=list)
    shard_keys: list[str] = field(default_factory=list)
    keep_artifacts: bool = False
    plan: Plan | None = None
    fleet_jobs: list[tuple[LoadedPlugin, GeneratorContext, str]] = field(default_factory=list)
    # Fleet-level plugins with a fleet_view, in a fixed order: each shard's output holds
    # the digest of each one's view of that service.
    view_jobs: list[tuple[LoadedPlugin, Any]] = field(default_factory=list)
    base: str = ""

    def whole_plan(self) -> Plan:
        if self.plan is None:
            self.plan = assemble_plan(
                self.service_plans, _expansions(self), self.catalogue, self.repo
            )
        return self.plan


_STATE: _State | None = None
_LAST: list[_State] = []
T = TypeVar("T")


def default_jobs() -> int:
    env = os.environ.get(JOBS_ENV, "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _scope(plugin: LoadedPlugin) -> str:
    return str(getattr(plugin.obj, "scope", "fleet"))


class WorkerTraceback(Exception):
    """A traceback from a pool worker, as text (--debug prints it as the cause)."""


def _error_payload(exc: ObsIacError) -> tuple[str, str, tuple[Diagnostic, ...], str]:
    cause = exc.__cause__
    text = "".join(traceback.format_exception(cause)) if cause is not None else ""
    return ("error", type(exc).__name__, tuple(exc.diagnostics), text)


def _call(plugin: LoadedPlugin, what: str, fn: Callable[..., Iterable[T]], *args: Any) -> list[T]:
    try:
        return list(fn(*args))
    except ObsIacError:
        raise
    except Exception as exc:
        raise crashed(plugin, what, exc) from exc


def _unchanged_since(target: Path, seen: Seen) -> bool:
    try:
        st = target.stat()
    except OSError:
        return False
    return (st.st_size, st.st_mtime_ns, st.st_ino) == seen[:3]


def _seen_key(out: Path) -> str:
    return digest(str(out.resolve()))


def load_seen(cache: Cache, out: Path) -> dict[str, Seen]:
    """How this render left the output folder last time (JSON, signed like any entry)."""
    data = cache.read("output", _seen_key(out))
    if data is None:
        return {}
    try:
        raw = json.loads(data)
        return {
            str(path): (int(size), int(mtime), int(inode), str(sha))
            for path, (size, mtime, inode, sha) in raw.items()
        }
    except (ValueError, TypeError, AttributeError):  # damaged: compare every file
        return {}


def remember_output(result: EngineResult, out: Path) -> None:
    """Records how every file in the output folder looks now that it matches
    ``result``, so the next render compares by stat instead of reading it back."""
    if result.cache_dir is None:
        return
    seen: dict[str, Seen] = {}
    for record in result.records:
        if record.path in result.unchanged_by_stat:
            seen[record.path] = result.seen[record.path]  # stat'ed during this render
            continue
        try:
            st = (out / record.path).stat()
        except OSError:
            continue
        seen[record.path] = (st.st_size, st.st_mtime_ns, st.st_ino, record.digest)
    text = json.dumps(seen, sort_keys=True, separators=(",", ":"))
    Cache(result.cache_dir).put("output", _seen_key(out), text.encode())


def _settle(state: _State, path: str, generator: str, data: bytes, settled: _Settled) -> None:
    """Compares one file with the output folder and, when writing, stages it."""
    if state.mode == "collect":
        # The caller compares for itself (obs-iac diff): no need to read the folder.
        settled.records.append(FileRecord(path, hashlib.sha256(data).hexdigest(), generator, "new"))
        settled.files[path] = data
        return
    target = state.out / path
    why = state.guard.reason(path)
    if why is not None:
        raise InputError([unsafe_path(target, path, why)])
    sha = hashlib.sha256(data).hexdigest()
    owned = path in state.owned
    seen = state.seen.get(path)
    if seen is not None and seen[3] == sha and _unchanged_since(target, seen):
        # The file is as this render left it last time (git's index does the same):
        # no need to read it back.
        settled.records.append(FileRecord(path, sha, generator, "same" if owned else "adopt"))
        settled.unchanged_by_stat.append(path)
        return
    try:
        current = target.read_bytes() if target.is_file() else None
    except OSError:
        current = None
    if current is None:
        file_state: FileState = "new"
    elif current == data:
        file_state = "same" if owned else "adopt"
    else:
        file_state = "changed" if owned else "foreign"
    settled.records.append(FileRecord(path, sha, generator, file_state))
    if state.mode == "write" and (
        file_state in ("new", "changed") or (file_state == "foreign" and state.force_adopt)
    ):
        try:
            stage(state.out, path, data)
        except OSError as exc:
            raise fault(exc, f"stage {path}") from None
        settled.staged.append(path)


# -- stage 2: expansion ------------------------------------------------------------------


def _expand(index: int) -> tuple[int, bytes]:
    state = _STATE
    assert state is not None
    svc = state.services[index]
    try:
        contribution = expand_service(svc, state.plugins, state.pack_ctx)
    except ObsIacError as exc:
        return index, pickle.dumps(_error_payload(exc))
    compact(contribution)
    full = pickle.dumps(("ok", contribution), protocol=pickle.HIGHEST_PROTOCOL)
    declared = pickle.dumps(contribution.metrics, protocol=pickle.HIGHEST_PROTOCOL)
    cached = state.cache is not None and not contribution.diagnostics
    if state.cache is not None and cached:
        key = state.expansion_keys[index]
        state.cache.put("expand", key, full)
        state.cache.put("metrics", key, declared)
    payload = ("ok", contribution.metrics, contribution.diagnostics, b"" if cached else full)
    return index, pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


# -- stage 4: shards ---------------------------------------------------------------------


def _contribution(state: _State, index: int) -> Contribution:
    data = state.pickled[index]
    if not data and state.cache is not None:
        data = state.cache.read("expand", state.expansion_keys[index]) or b""
    if data:
        try:
            contribution: Contribution = pickle.loads(data)[1]
            return contribution
        except Exception:
            pass
    # The entry vanished or was damaged after its metrics were read: expand again (the
    # same service gives the same expansion).
    return expand_service(state.services[index], state.plugins, state.pack_ctx)


def _expansions(state: _State) -> list[Contribution]:
    return [_contribution(state, index) for index in range(len(state.service_plans))]


def _render_shard(state: _State, index: int) -> ShardOutput:
    shard = assemble_plan(
        (state.service_plans[index],),
        (_contribution(state, index),),
        state.catalogue,
        state.repo,
    )
    name = state.service_plans[index].name
    artifacts: list[Artifact] = []
    problems: list[Diagnostic] = []
    for gen, ctx in state.generators:
        produced: list[Artifact] = _call(
            gen, f"generator {gen.name!r} on service {name!r}", gen.obj.generate, shard, ctx
        )
        bad = outside_paths(gen, produced)
        problems.extend(bad)
        artifacts.extend(a for a in produced if conventions.is_safe_relative(a.path))
    artifacts.sort(key=lambda a: a.path)
    arts = tuple(artifacts)
    findings: list[Diagnostic] = []
    for rule, lint_ctx in state.service_rules:
        findings.extend(
            _call(
                rule,
                f"lint rule {rule.name!r} on service {name!r}",
                rule.obj.check,
                shard,
                arts,
                lint_ctx,
            )
        )
    return ShardOutput(
        files=tuple((a.path, a.generator, serialize(a)) for a in arts),
        findings=tuple(findings),
        problems=tuple(problems),
        artifacts=arts if state.keep_artifacts else None,
        views=_views(state, shard, name),
    )


def _views(state: _State, shard: Plan, service: str) -> tuple[str, ...]:
    """The digest of every fleet-level plugin's view of this shard. Plugins that share a
    view (the inhibit ones) may return one object: it is encoded once."""
    values: list[Any] = []  # held, so that no id() below is reused
    known: dict[int, str] = {}
    out: list[str] = []
    for plugin, ctx in state.view_jobs:
        what = f"fleet_view of {plugin.name!r} on service {service!r}"
        (value,) = _call(plugin, what, lambda p=plugin, c=ctx: [p.obj.fleet_view(shard, c)])
        values.append(value)
        if id(value) not in known:
            (text,) = _call(plugin, what, lambda v=value: [_encoded(v)])
            known[id(value)] = digest(text)
        out.append(known[id(value)])
    return tuple(out)


def _encoded(view: Any) -> str:
    return json.dumps(view, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _shard(index: int) -> tuple[int, Any]:
    state = _STATE
    assert state is not None
    key = state.shard_keys[index]
    output: ShardOutput | None = None
    if state.cache is not None:
        # Looked up without counting: the count that matters is the main process's.
        cached = state.cache.read("shard", key)
        if cached is not None:
            try:
                output = pickle.loads(cached)
            except Exception:  # a damaged entry is a miss, never an error
                output = None
    hit = output is not None
    if output is None:
        try:
            output = _render_shard(state, index)
        except ObsIacError as exc:
            return index, _error_payload(exc)
        if state.cache is not None and not output.problems:
            state.cache.put("shard", key, pickle.dumps(output, protocol=pickle.HIGHEST_PROTOCOL))
    settled = _Settled()
    try:
        for path, generator, data in output.files:
            _settle(state, path, generator, data, settled)
    except ObsIacError as exc:
        return index, _error_payload(exc)
    payload = ("ok", settled, output.findings, output.problems, output.artifacts, hit)
    return index, (*payload, output.views)


# -- orchestration -----------------------------------------------------------------------


def _pool_size(jobs: int, work: int) -> int:
    # Workers inherit the plan by fork, which is safe and cheap on Linux only (macOS
    # system libraries do not survive a fork; Windows has none).
    if jobs <= 1 or not sys.platform.startswith("linux"):
        return 1
    return max(1, min(jobs, work // MIN_SHARDS_PER_WORKER))


def _advancing(results: Iterator[T], progress: Progress) -> Iterator[T]:
    for result in results:
        yield result
        progress.advance()


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def _worker_init(parent: int) -> None:
    gc.enable()
    # A worker dies with the render that started it: killed with it (kill -9 included),
    # it would go on staging files into a tree another run may be swapping, and hold the
    # repository lock it inherited. Ctrl-C is the parent's to handle: a worker that
    # took it too would print a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above ran
        os._exit(1)


class _Workers:
    """A forked pool, or the calling process when there is one worker. Forked at
    construction, so workers see the _STATE the main process holds at that moment;
    tasks start as soon as they are submitted."""

    def __init__(self, workers: int) -> None:
        self.pool = None
        if workers > 1:
            # Inherited objects go to the permanent generation first, so that a worker's
            # collections never walk (and so copy) the main process's heap; workers
            # collect their own garbage, which would otherwise pile up shard after shard.
            gc.freeze()
            self.pool = multiprocessing.get_context("fork").Pool(
                workers, _worker_init, (os.getpid(),)
            )

    def map(
        self, fn: Callable[[int], tuple[int, T]], items: Iterable[int], chunk: int
    ) -> Iterator[tuple[int, T]]:
        if self.pool is None:
            return (fn(i) for i in items)
        return self.pool.imap_unordered(fn, items, chunksize=chunk)

    def __enter__(self) -> _Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()
            gc.unfreeze()


def _raise(errors: list[tuple[str, Diagnostic, str]]) -> None:
    """Raises what the shards reported: plugin bugs first (exit 3), else input errors."""
    kind = "PluginError" if any(k == "PluginError" for k, _, _ in errors) else "InputError"
    picked = [(d, tb) for k, d, tb in errors if k == kind]
    unique = sorted({d for d, _ in picked}, key=Diagnostic.total_key)
    error = (PluginError if kind == "PluginError" else InputError)(unique)
    trace = next((tb for _, tb in picked if tb), "")
    if trace:
        raise error from WorkerTraceback(trace)
    raise error


def run(
    ws: Any,
    plugins: PluginSet | None = None,
    *,
    mode: Mode = "write",
    jobs: int | None = None,
    use_cache: bool = True,
    lint: bool = True,
    force_adopt: bool = False,
    progress: Progress | None = None,
    cache_dir: Path | None = None,
) -> EngineResult:
    """Renders the workspace ``ws`` (obs_iac.pipeline.Workspace).

    Mode "write" stages changed files next to their targets for the caller to commit or
    discard (obs_iac.render.writer.commit / discard_all); "check" only compares; "collect"
    returns every file's bytes and does not look at the output folder. ``lint=False``
    skips the fleet-level lint rules (service-scope ones are part of a shard's cached
    result and always run). ``cache_dir`` defaults to the workspace's cache."""
    global _STATE
    from obs_iac import pipeline
    from obs_iac.pipeline import _no_cyclic_gc, read_inputs
    from obs_iac.render.writer import read_manifest, recover

    progress = progress or NullProgress()
    jobs = jobs or default_jobs()
    with _no_cyclic_gc():
        plugins = plugins or pipeline.discover(ws.config)
        cache_dir = (cache_dir or cache_root(ws.root)) if use_cache else None
        # A check must not trust what it did not compute: it writes entries, never reads.
        cache = Cache(cache_dir, readable=mode != "check") if cache_dir is not None else None
        loaded = load_blueprints(
            ws.root,
            ws.config.blueprints,
            code_cache=cache,
            timeout=ws.config.blueprint_timeout_seconds,
        )
        if not loaded.registrations and not loaded.problems:
            raise no_services(ws.root, ws.config, ws.config_file, loaded)
        services = validate_services(loaded, plugins)
        repo = ws.config
        pack_ctx = pack_contexts(plugins, repo, ws.naming)
        sources = {f.path: f.source for f in loaded.files}
        plans = [service_plan(s) for s in services]
        base = base_key(plugins, repo)
        keys = [
            expansion_key(base, p, sources.get(s.file, ""))
            for p, s in zip(plans, services, strict=True)
        ]
        out = ws.output
        if mode != "collect":
            check_output_folder(out)
        existed = out.is_dir()
        if mode == "write" and existed:
            recover(out)
        state = _State(
            plugins=plugins,
            services=services,
            pack_ctx=pack_ctx,
            expansion_keys=keys,
            cache=cache,
            out=out,
            owned=read_manifest(out),
            mode=mode,
            force_adopt=force_adopt,
            seen=load_seen(cache, out) if cache is not None and mode == "write" else {},
            repo=repo,
            base=base,
            guard=PathGuard(out),
        )
        _STATE = state
        try:
            result = _run_stages(state, ws, plans, lint, jobs, progress, read_inputs)
            return dataclasses.replace(result, output_existed=existed, cache_dir=cache_dir)
        except BaseException:
            if mode == "write":
                # Whatever the shards staged, including those whose results never
                # arrived: the output folder goes back to exactly what it was.
                discard_all(out, existed)
            raise
        finally:
            # Kept, not freed: freeing a fleet's plan object by object takes about a
            # second at 1,000 services, and the CLI exits right after (see cli.entry).
            _LAST[:] = [state]
            _STATE = None
            progress.close()


def _run_stages(
    state: _State,
    ws: Any,
    plans: list[ServicePlan],
    lint: bool,
    jobs: int,
    progress: Progress,
    read_inputs: Callable[..., dict[str, str]],
) -> EngineResult:
    plugins, repo, cache = state.plugins, state.repo, state.cache
    n = len(plans)
    # Stage 2 gives, per service, the metrics its expansion declares (all the fleet's
    # catalogue needs) and the expansion itself, in the cache or, without one, as pickled
    # bytes. The pool for stage 4 is forked before the main process loads any expansion:
    # workers then start from a small heap, and what they allocate does not land in (and
    # copy) pages of the main process's objects. Each worker unpickles its own shard.
    declared: list[list[MetricSpec] | None] = [None] * n
    pickled: list[bytes] = [b""] * n
    todo: list[int] = []
    for index in range(n):
        data = cache.read("metrics", state.expansion_keys[index]) if cache is not None else None
        if data is not None:
            try:
                declared[index] = pickle.loads(data)
            except Exception:  # a damaged entry is a miss, never an error
                data = None
        if cache is not None:
            cache.count(data is not None)
        if data is None:
            todo.append(index)
    errors: list[tuple[str, Diagnostic, str]] = []
    diagnostics: list[Diagnostic] = []
    progress.phase("expanding", len(todo))
    workers = _pool_size(jobs, len(todo))
    with _Workers(workers) as pool:
        chunk = max(1, len(todo) // (workers * 16))
        for index, payload in _advancing(pool.map(_expand, todo, chunk), progress):
            result = pickle.loads(payload)
            if result[0] == "error":
                errors.extend((result[1], d, result[3]) for d in result[2])
            else:
                _tag, declared[index], found, pickled[index] = result
                diagnostics.extend(found)
    if errors:
        _raise(errors)
    if any(d.severity is Severity.ERROR for d in diagnostics):
        raise InputError(diagnostics)
    catalogue = catalogue_of((d or [] for d in declared), plugins, state.pack_ctx)

    service_gens: list[tuple[LoadedPlugin, GeneratorContext]] = []
    fleet_gens: list[tuple[LoadedPlugin, GeneratorContext]] = []
    inputs_parts: list[str] = []
    for gen in plugins.generators:
        settings = plugin_settings(gen, repo.generators, "generators")
        inputs = read_inputs(ws, gen, settings)
        inputs_parts.extend(f"{gen.name}\0{k}\0{v}" for k, v in sorted(inputs.items()))
        ctx = GeneratorContext(naming=ws.naming, repo=repo, settings=settings, inputs=inputs)
        (service_gens if _scope(gen) == "service" else fleet_gens).append((gen, ctx))
    rules: dict[str, list[tuple[LoadedPlugin, LintContext]]] = {
        "service": [],
        "plan": [],
        "fleet": [],
    }
    for rule in plugins.lint_rules:
        settings = plugin_settings(rule, repo.lint, "lint")
        lint_ctx = LintContext(naming=ws.naming, repo=repo, settings=settings, inputs=None)
        scope = _scope(rule)
        rules[scope if scope in rules else "fleet"].append((rule, lint_ctx))
    state.service_plans = plans
    state.pickled = pickled
    state.catalogue = catalogue
    state.generators = service_gens
    state.service_rules = rules["service"]
    state.keep_artifacts = bool(rules["fleet"])
    state.fleet_jobs = _fleet_jobs(service_gens, fleet_gens)
    state.view_jobs = [
        (plugin, ctx)
        for plugin, ctx, _method in state.fleet_jobs
        if getattr(plugin.obj, "fleet_view", None) is not None
    ] + [(rule, ctx) for rule, ctx in rules["plan"] if getattr(rule.obj, "fleet_view", None)]
    lint_id = ";".join(r.name for r, _ in rules["service"]) + f";keep={state.keep_artifacts}"
    lint_id += ";views=" + ";".join(f"{p.kind}:{p.name}" for p, _ in state.view_jobs)
    shared = digest(catalogue_key(catalogue), *inputs_parts)
    state.shard_keys = [shard_key(k, shared, lint_id) for k in state.expansion_keys]

    progress.phase("rendering", n)
    settled = _Settled()
    findings: list[Diagnostic] = []
    problems: list[tuple[str, Diagnostic, str]] = []
    all_artifacts: list[Artifact] = []
    views: list[tuple[str, ...]] = [()] * n
    # The whole plan is assembled while the workers render, unless this looks like a
    # render after a small edit: then the fleet-level plugins may all come from the
    # cache, and the plan is assembled only if one of them has to run.
    eager = cache is None or state.mode == "collect" or len(todo) * 4 >= n
    workers = _pool_size(jobs, n)
    with _Workers(workers) as pool:
        shard_results = pool.map(_shard, range(n), chunk=max(1, n // (workers * 16)))
        if eager:
            state.whole_plan()
        for index, payload in shard_results:
            progress.advance()
            if payload[0] == "error":
                problems.extend((payload[1], d, payload[3]) for d in payload[2])
                continue
            _tag, part, shard_findings, shard_problems, shard_artifacts, hit, views[index] = payload
            if cache is not None:
                cache.count(hit)
            settled.extend(part)
            findings.extend(shard_findings)
            problems.extend(("PluginError", d, "") for d in shard_problems)
            if shard_artifacts is not None:
                all_artifacts.extend(shard_artifacts)
    # Then, once the workers are gone (peak memory is the main process's plan plus the
    # workers, or the plan plus what the fleet-level work derives from it, never all
    # three), in this process, one after another: the fleet-level generators, then the
    # lint rules that need the whole plan. Whatever they derive from the whole plan (the
    # inhibit pack's alert index, say) is built once.
    progress.phase("rendering the fleet", 0)
    fleet = _Fleet(state, shared, views if not problems else None)
    for job in range(len(state.fleet_jobs)):
        try:
            part, fleet_problems = fleet.generate(job)
        except ObsIacError as exc:
            error = _error_payload(exc)
            problems.extend((error[1], d, error[3]) for d in error[2])
            continue
        settled.extend(part)
        problems.extend(("PluginError", d, "") for d in fleet_problems)
    if lint and not problems:
        findings.extend(fleet.service_lint(rules["service"], lint_id))
        for rule, lint_ctx in rules["plan"]:
            findings.extend(fleet.plan_lint(rule, lint_ctx))
    if not any(d.code == "plugin/crash" for _, d, _ in problems):
        problems.extend(("PluginError", d, "") for d in _path_conflicts(settled.records))
    if problems:
        _raise(problems)
    if lint and rules["fleet"]:
        progress.phase("checking the fleet", 0)
        everything = tuple(sorted(fleet.artifacts() + all_artifacts, key=lambda a: a.path))
        for rule, lint_ctx in rules["fleet"]:
            findings.extend(
                _call(
                    rule,
                    f"lint rule {rule.name!r}",
                    rule.obj.check,
                    state.whole_plan(),
                    everything,
                    lint_ctx,
                )
            )
    findings = apply_suppressions(plans, findings, dt.date.today())
    if cache is not None and state.mode == "write":
        cache.prune()
    return EngineResult(
        whole_plan=state.whole_plan,
        services=n,
        records=tuple(sorted(settled.records, key=lambda r: r.path)),
        findings=tuple(sorted(set(findings), key=Diagnostic.total_key)),
        files=settled.files if state.mode == "collect" else None,
        staged=tuple(sorted(settled.staged)),
        jobs=_pool_size(jobs, n),
        cache_hits=cache.hits if cache else 0,
        cache_misses=cache.misses if cache else 0,
        seen=state.seen,
        unchanged_by_stat=frozenset(settled.unchanged_by_stat),
    )


def _fleet_jobs(
    service_gens: list[tuple[LoadedPlugin, GeneratorContext]],
    fleet_gens: list[tuple[LoadedPlugin, GeneratorContext]],
) -> list[tuple[LoadedPlugin, GeneratorContext, str]]:
    """The fleet-level work, one task per generator: (plugin, context, method name)."""
    jobs = [(gen, ctx, "generate") for gen, ctx in fleet_gens]
    jobs += [
        (gen, ctx, "generate_fleet")
        for gen, ctx in service_gens
        if getattr(gen.obj, "generate_fleet", None) is not None
    ]
    return sorted(jobs, key=lambda job: job[0].name)


@dataclass(frozen=True)
class FleetOutput:
    """One fleet-level generator's files: what the cache stores (its artifacts apart)."""

    files: tuple[tuple[str, str, bytes], ...]  # (path, generator, bytes)


class _Fleet:
    """The fleet-level generators and whole-plan lint rules, each cached on the views of
    every service when it declares a fleet_view (see obs_iac.plan.views): a plugin
    whose views did not change since a render that cached it is not run again, and the
    whole plan is assembled only for one that runs."""

    def __init__(self, state: _State, shared: str, views: list[tuple[str, ...]] | None):
        self.state = state
        self.cache = state.cache
        self.shared = shared
        # One key per fleet-level plugin with a view: the code, the repo config, the
        # catalogue, the generators' input files, and every service's view in plan order.
        self.keys: dict[str, str] = {}
        if views is not None and self.cache is not None:
            for position, (plugin, _ctx) in enumerate(state.view_jobs):
                self.keys[f"{plugin.kind}:{plugin.name}"] = digest(
                    state.base,
                    shared,
                    f"{plugin.kind}:{plugin.name}",
                    *(v[position] for v in views),
                )
        # job -> (its key, its artifacts if they are in memory), for every job that ran
        # or came from the cache.
        self.generated: dict[int, tuple[str | None, list[Artifact] | None]] = {}

    def _key(self, plugin: LoadedPlugin) -> str | None:
        return self.keys.get(f"{plugin.kind}:{plugin.name}")

    def _read(self, kind: str, key: str | None) -> Any:
        if key is None or self.cache is None:
            return None
        data = self.cache.read(kind, key)
        if data is None:
            return None
        try:
            return pickle.loads(data)
        except Exception:  # a damaged entry is a miss, never an error
            return None

    def _put(self, kind: str, key: str | None, value: Any) -> None:
        if key is not None and self.cache is not None:
            self.cache.put(kind, key, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def _run(self, job: int) -> tuple[list[Artifact], list[Diagnostic]]:
        gen, ctx, method = self.state.fleet_jobs[job]
        produced: list[Artifact] = _call(
            gen, f"generator {gen.name!r}", getattr(gen.obj, method), self.state.whole_plan(), ctx
        )
        problems = outside_paths(gen, produced)
        artifacts = sorted(
            (a for a in produced if conventions.is_safe_relative(a.path)), key=lambda a: a.path
        )
        return artifacts, problems

    def generate(self, job: int) -> tuple[_Settled, list[Diagnostic]]:
        """One fleet-level generator's files, compared with the output folder."""
        gen = self.state.fleet_jobs[job][0]
        key = self._key(gen)
        cached = self._read("fleet", key)
        problems: list[Diagnostic] = []
        artifacts: list[Artifact] | None = None
        if isinstance(cached, FleetOutput):
            files = cached.files
        else:
            artifacts, problems = self._run(job)
            files = tuple((a.path, a.generator, serialize(a)) for a in artifacts)
            if not problems:
                self._put("fleet", key, FleetOutput(files))
                self._put("fleet-artifacts", key, tuple(artifacts))
        self.generated[job] = (key, artifacts)
        settled = _Settled()
        for path, generator, data in files:
            _settle(self.state, path, generator, data, settled)
        return settled, problems

    def artifacts(self) -> list[Artifact]:
        """Every fleet-level artifact, in path order: from this render, else the cache,
        else generated again."""
        out: list[Artifact] = []
        for job, (key, artifacts) in sorted(self.generated.items()):
            if artifacts is None:
                cached = self._read("fleet-artifacts", key)
                artifacts = list(cached) if isinstance(cached, tuple) else self._run(job)[0]
                self.generated[job] = (key, artifacts)
            out.extend(artifacts)
        return sorted(out, key=lambda a: a.path)

    def _lint_key(self, what: str, plugin_key: str | None) -> str | None:
        """Lint sees the fleet-level artifacts too: known only when every generator's
        output is keyed. The date is part of it (a suppression can expire overnight)."""
        gen_keys = [key for _job, (key, _) in sorted(self.generated.items())]
        if plugin_key is None or any(key is None for key in gen_keys):
            return None
        return digest(plugin_key, what, dt.date.today().isoformat(), *(k or "" for k in gen_keys))

    def _findings(
        self, key: str | None, compute: Callable[[], list[Diagnostic]]
    ) -> tuple[Diagnostic, ...]:
        cached = self._read("lint", key)
        if isinstance(cached, tuple):
            return cached
        found = tuple(compute())
        self._put("lint", key, found)
        return found

    def service_lint(
        self, rules: list[tuple[LoadedPlugin, LintContext]], lint_id: str
    ) -> tuple[Diagnostic, ...]:
        """Service-scope rules on the fleet shard: no service, the fleet-level artifacts."""
        state = self.state
        names = digest(state.base, self.shared, "service-lint", lint_id)
        key = self._lint_key("service-lint", names)

        def compute() -> list[Diagnostic]:
            fleet_shard = assemble_plan((), (), state.catalogue, state.repo)
            arts = tuple(self.artifacts())
            return [
                d
                for rule, ctx in rules
                for d in _call(
                    rule, f"lint rule {rule.name!r}", rule.obj.check, fleet_shard, arts, ctx
                )
            ]

        return self._findings(key, compute)

    def plan_lint(self, rule: LoadedPlugin, ctx: LintContext) -> tuple[Diagnostic, ...]:
        key = self._lint_key("plan-lint", self._key(rule))

        def compute() -> list[Diagnostic]:
            arts = tuple(self.artifacts())
            plan = self.state.whole_plan()
            return _call(rule, f"lint rule {rule.name!r}", rule.obj.check, plan, arts, ctx)

        return self._findings(key, compute)


def _path_conflicts(records: list[FileRecord]) -> list[Diagnostic]:
    by_path: dict[str, list[str]] = {}
    for record in records:
        by_path.setdefault(record.path, []).append(record.generator)
    conflicts: list[Diagnostic] = []
    for path in sorted(by_path):
        writers = sorted(by_path[path])
        if len(writers) < 2:
            continue
        if len(set(writers)) > 1:
            message = f"generators {writers[0]!r} and {writers[-1]!r} both write {path}"
            hint = "disable one of them in [tool.obs-iac.plugins]"
        else:
            message = f"generator {writers[0]!r} writes {path} for two services"
            hint = "a service-scope generator must name each file after its service"
        conflicts.append(Diagnostic("plugin/path-conflict", Severity.ERROR, message, hint=hint))
    return conflicts
