"""The harness obs-iac's own tests use, for plugin authors.

Render a set of blueprints with a given plugin set into memory, compare the result with a
golden tree, check determinism, and run the lint rules, without writing anything::

    from obs_iac.testing import render_blueprints, assert_golden

    result = render_blueprints({"svc.py": SOURCE}, extra_packs=[MyPack()])
    assert_golden(result, Path("tests/golden/my-case"))

Set ``OBS_IAC_UPDATE_GOLDEN=1`` to rewrite golden trees instead of comparing them.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from obs_iac.config import RepoConfig
from obs_iac.diagnostics import Diagnostic
from obs_iac.labels import LabelNaming
from obs_iac.load import load_blueprints
from obs_iac.pipeline import Render, open_workspace, read_inputs, render
from obs_iac.plan.compile import CompiledFleet, compile_fleet
from obs_iac.plan.model import Plan
from obs_iac.plugins import (
    GENERATORS,
    LINT_RULES,
    PACKS,
    GeneratorContext,
    LintContext,
    NoConfig,
    PluginSet,
    discover,
)
from obs_iac.render.artifact import Artifact
from obs_iac.render.serialize import serialize

UPDATE_ENV = "OBS_IAC_UPDATE_GOLDEN"


def plugin_set(
    extra_packs: Iterable[Any] = (),
    extra_generators: Iterable[Any] = (),
    extra_lint_rules: Iterable[Any] = (),
    config: RepoConfig | None = None,
) -> PluginSet:
    """The installed plugins plus plugin objects given directly (not installed)."""

    def named(objs: Iterable[Any], attr: str) -> list[tuple[str, Any]]:
        return [(str(getattr(o, attr)), o) for o in objs]

    return discover(
        config,
        extra={
            PACKS: named(extra_packs, "name"),
            GENERATORS: named(extra_generators, "name"),
            LINT_RULES: named(extra_lint_rules, "code"),
        },
    )


def render_blueprints(
    blueprints: Mapping[str, str] | Path,
    *,
    config: RepoConfig | None = None,
    extra_packs: Iterable[Any] = (),
    extra_generators: Iterable[Any] = (),
    extra_lint_rules: Iterable[Any] = (),
) -> Render:
    """Renders blueprint sources (file name -> Python source) or a blueprints folder."""
    cfg = config or RepoConfig()
    plugins = plugin_set(extra_packs, extra_generators, extra_lint_rules, cfg)
    with tempfile.TemporaryDirectory(prefix="obs-iac-test-") as tmp:
        root = Path(tmp)
        _write_blueprints(root / cfg.blueprints, blueprints)
        return render(open_workspace(root, cfg), plugins)


def _write_blueprints(folder: Path, blueprints: Mapping[str, str] | Path) -> None:
    folder.mkdir(parents=True)
    if isinstance(blueprints, Path):
        for path in sorted(blueprints.rglob("*.py")):
            target = folder / path.relative_to(blueprints)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    else:
        for name, source in blueprints.items():
            (folder / name).write_text(source, encoding="utf-8")


def golden_mismatches(result: Render, expected: Path) -> list[str]:
    """Human-readable differences between a render and a golden tree ([] when equal)."""
    problems: list[str] = []
    on_disk = {
        p.relative_to(expected).as_posix(): p.read_bytes()
        for p in sorted(expected.rglob("*"))
        if p.is_file()
    }
    for rel in sorted(set(on_disk) | set(result.files)):
        if rel not in result.files:
            problems.append(f"{rel}: in the golden tree but no longer rendered")
        elif rel not in on_disk:
            problems.append(f"{rel}: rendered but missing from the golden tree")
        elif on_disk[rel] != result.files[rel]:
            diff = difflib.unified_diff(
                on_disk[rel].decode("utf-8", "replace").splitlines(),
                result.files[rel].decode("utf-8", "replace").splitlines(),
                fromfile=f"golden/{rel}",
                tofile=f"rendered/{rel}",
                lineterm="",
                n=2,
            )
            problems.append("\n".join(list(diff)[:60]))
    return problems


def assert_golden(result: Render, expected: Path) -> None:
    """Compares with the golden tree, or rewrites it when OBS_IAC_UPDATE_GOLDEN=1."""
    if os.environ.get(UPDATE_ENV) == "1":
        if expected.exists():
            for path in sorted(expected.rglob("*"), reverse=True):
                if path.is_file():
                    path.unlink()
                else:
                    path.rmdir()
        for rel, data in result.files.items():
            target = expected / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return
    problems = golden_mismatches(result, expected)
    if problems:
        raise AssertionError(
            f"render differs from {expected} (run with {UPDATE_ENV}=1 to accept):\n"
            + "\n".join(problems)
        )


def assert_deterministic(blueprints: Mapping[str, str] | Path, **kwargs: Any) -> None:
    """Renders twice, the second time with the files in reverse creation order."""
    first = render_blueprints(blueprints, **kwargs)
    if isinstance(blueprints, Mapping):
        blueprints = dict(reversed(list(blueprints.items())))
    second = render_blueprints(blueprints, **kwargs)
    if dict(first.files) != dict(second.files):
        changed = sorted(
            k
            for k in set(first.files) | set(second.files)
            if first.files.get(k) != second.files.get(k)
        )
        raise AssertionError(f"two renders differ in: {', '.join(changed)}")


def lint_findings(result: Render, min_severity: str = "warning") -> list[Diagnostic]:
    """The render's lint findings at or above a severity."""
    order = {"info": 0, "warning": 1, "error": 2}
    return [f for f in result.findings if order[f.severity.label] >= order[min_severity]]


# -- scope ------------------------------------------------------------------------------


@dataclass
class ScopeFleet:
    """A compiled fleet ready to be cut into shards, with the plugins and settings to run
    on it. The artifacts of each way of running the generators are made once and kept,
    since every lint rule checked on the fleet needs them."""

    compiled: CompiledFleet
    plugins: PluginSet
    config: RepoConfig
    # generator name -> the repository files it asked for (see Generator.inputs)
    inputs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    _whole: tuple[Artifact, ...] | None = field(default=None, init=False, repr=False)
    _fleet_level: tuple[Artifact, ...] | None = field(default=None, init=False, repr=False)
    _per_shard: tuple[tuple[Artifact, ...], ...] | None = field(
        default=None, init=False, repr=False
    )

    @property
    def plan(self) -> Plan:
        return self.compiled.plan

    def generator_context(self, generator: Any) -> GeneratorContext:
        return GeneratorContext(
            naming=LabelNaming(self.config.naming),
            repo=self.config,
            settings=_settings(generator, str(generator.name), self.config),
            inputs=dict(self.inputs.get(str(generator.name), {})),
        )

    def whole_artifacts(self) -> tuple[Artifact, ...]:
        """Every generator on the whole plan (``generate`` then ``generate_fleet``)."""
        if self._whole is None:
            out: list[Artifact] = []
            for gen in self.plugins.generators:
                out.extend(_whole_run(gen.obj, self.plan, self.generator_context(gen.obj)))
            self._whole = tuple(sorted(out, key=lambda a: a.path))
        return self._whole

    def fleet_artifacts(self) -> tuple[Artifact, ...]:
        """What fleet-scope generators and every ``generate_fleet`` make: the artifacts
        plan-scope rules and the fleet-shard call of service-scope rules see."""
        if self._fleet_level is None:
            out: list[Artifact] = []
            for gen in self.plugins.generators:
                ctx = self.generator_context(gen.obj)
                if _scope(gen.obj) == "service":
                    out.extend(_fleet_part(gen.obj, self.plan, ctx))
                else:
                    out.extend(gen.obj.generate(self.plan, ctx))
            self._fleet_level = tuple(sorted(out, key=lambda a: a.path))
        return self._fleet_level

    def shard_artifacts(self) -> tuple[tuple[Artifact, ...], ...]:
        """Per service (in the order of plan.services): what service-scope generators
        make from that service's shard."""
        if self._per_shard is None:
            shards = []
            for index in range(len(self.plan.services)):
                shard = self.compiled.shard(index)
                out: list[Artifact] = []
                for gen in self.plugins.generators:
                    if _scope(gen.obj) == "service":
                        out.extend(gen.obj.generate(shard, self.generator_context(gen.obj)))
                shards.append(tuple(sorted(out, key=lambda a: a.path)))
            self._per_shard = tuple(shards)
        return self._per_shard


@dataclass(frozen=True)
class ScopeResult:
    """What ``assert_scope_holds`` compared: for a generator, (path, bytes) per file; for
    a lint rule, the findings; ``whole`` from one call, ``sharded`` from the calls the
    declared scope allows. Equal when the assertion passed."""

    name: str
    scope: str
    whole: tuple[Any, ...]
    sharded: tuple[Any, ...]


def compile_workspace(
    root: Path, config: RepoConfig | None = None, plugins: PluginSet | None = None
) -> ScopeFleet:
    """Compiles a repository (its pyproject settings unless ``config`` is given)."""
    ws = open_workspace(root, config)
    plugins = plugins or discover(ws.config)
    loaded = load_blueprints(
        ws.root, ws.config.blueprints, timeout=ws.config.blueprint_timeout_seconds
    )
    compiled = compile_fleet(loaded, plugins, ws.config)
    inputs = {}
    for gen in plugins.generators:
        settings = _settings(gen.obj, gen.name, ws.config)
        inputs[gen.name] = read_inputs(ws, gen, settings)
    return ScopeFleet(compiled, plugins, ws.config, inputs)


def compile_blueprints(
    blueprints: Mapping[str, str] | Path,
    *,
    config: RepoConfig | None = None,
    extra_packs: Iterable[Any] = (),
    extra_generators: Iterable[Any] = (),
    extra_lint_rules: Iterable[Any] = (),
) -> ScopeFleet:
    """Like ``render_blueprints``, but stops after the plan: a fleet to check scopes on."""
    cfg = config or RepoConfig()
    plugins = plugin_set(extra_packs, extra_generators, extra_lint_rules, cfg)
    with tempfile.TemporaryDirectory(prefix="obs-iac-test-") as tmp:
        root = Path(tmp)
        _write_blueprints(root / cfg.blueprints, blueprints)
        return compile_workspace(root, cfg, plugins)


def assert_scope_holds(
    fleet: ScopeFleet,
    plugin: Any,
    *,
    lint_inputs: Any = None,
) -> ScopeResult:
    """Runs a generator or lint rule both ways and asserts they agree (docs/plugins.md,
    "Scope").

    Generator, ``scope="service"``: ``generate`` + ``generate_fleet`` on the whole plan
    versus ``generate`` on every service shard + ``generate_fleet`` on the whole plan;
    files are compared by path and serialised bytes, and no two shards may write one
    path. Lint rule, ``"service"``: one call on (whole plan, every artifact) versus one
    call per shard with that shard's artifacts plus one on the fleet shard with the
    fleet-level artifacts; ``"plan"``: (whole plan, every artifact) versus (whole plan,
    fleet-level artifacts). Findings are compared as sets: obs-iac reports a finding
    that several shards make once. A ``"fleet"`` plugin has nothing to compare; the
    result then holds the one run twice. ``lint_inputs`` is the LintContext.inputs
    (e.g. ``LintInputs(today=...)``, so expiry checks do not depend on the clock).
    """
    if hasattr(plugin, "code"):
        return _lint_scope(fleet, plugin, lint_inputs)
    return _generator_scope(fleet, plugin)


def _generator_scope(fleet: ScopeFleet, gen: Any) -> ScopeResult:
    name, scope = str(gen.name), _scope(gen)
    ctx = fleet.generator_context(gen)
    whole = _files(_whole_run(gen, fleet.plan, ctx))
    if scope != "service":
        return ScopeResult(name, scope, whole, whole)
    produced: list[Artifact] = []
    for index in range(len(fleet.plan.services)):
        produced.extend(gen.generate(fleet.compiled.shard(index), ctx))
    produced.extend(_fleet_part(gen, fleet.plan, ctx))
    paths = [a.path for a in produced]
    twice = sorted({p for p in paths if paths.count(p) > 1})
    if twice:
        raise AssertionError(f"generator {name}: more than one shard writes {', '.join(twice)}")
    sharded = _files(produced)
    if whole != sharded:
        raise AssertionError(f"generator {name} (scope {scope!r}):\n" + _diff_files(whole, sharded))
    return ScopeResult(name, scope, whole, sharded)


def _lint_scope(fleet: ScopeFleet, rule: Any, lint_inputs: Any) -> ScopeResult:
    code, scope = str(rule.code), _scope(rule)
    ctx = LintContext(
        naming=LabelNaming(fleet.config.naming),
        repo=fleet.config,
        settings=_settings(rule, code, fleet.config),
        inputs=lint_inputs,
    )
    whole = _findings(rule.check(fleet.plan, fleet.whole_artifacts(), ctx))
    if scope == "service":
        found: list[Diagnostic] = []
        for index, artifacts in enumerate(fleet.shard_artifacts()):
            found.extend(rule.check(fleet.compiled.shard(index), artifacts, ctx))
        found.extend(rule.check(fleet.compiled.shard(None), fleet.fleet_artifacts(), ctx))
        sharded = _findings(found)
    elif scope == "plan":
        sharded = _findings(rule.check(fleet.plan, fleet.fleet_artifacts(), ctx))
    else:
        return ScopeResult(code, scope, whole, whole)
    if whole != sharded:
        only_whole = [d for d in whole if d not in sharded]
        only_sharded = [d for d in sharded if d not in whole]
        raise AssertionError(
            f"lint rule {code} (scope {scope!r}): {len(whole)} findings on the whole plan, "
            f"{len(sharded)} per {scope}\n"
            + "".join(f"  only whole: {d}\n" for d in only_whole[:10])
            + "".join(f"  only {scope}: {d}\n" for d in only_sharded[:10])
            + (
                "  (the same findings, in different numbers)\n"
                if not only_whole + only_sharded
                else ""
            )
        )
    return ScopeResult(code, scope, whole, sharded)


@dataclass(frozen=True)
class ViewResult:
    """What ``assert_view_holds`` compared: whether every service's view was the same in
    both fleets, and whether the plugin's fleet-level output was."""

    name: str
    views_equal: bool
    output_equal: bool


def fleet_views(fleet: ScopeFleet, plugin: Any, *, lint_inputs: Any = None) -> tuple[str, ...]:
    """The plugin's ``fleet_view`` of every service, in plan order, as the engine encodes
    it (JSON, keys sorted)."""
    ctx = _context(fleet, plugin, lint_inputs)
    return tuple(
        json.dumps(
            plugin.fleet_view(fleet.compiled.shard(index), ctx),
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        for index in range(len(fleet.plan.services))
    )


def assert_view_holds(
    before: ScopeFleet, after: ScopeFleet, plugin: Any, *, lint_inputs: Any = None
) -> ViewResult:
    """Checks a plugin's ``fleet_view`` on two versions of a fleet (docs/plugins.md,
    "Fleet views"): when every service's view is the same in both, the fleet-level output
    must be too, or the render cache would serve a stale file or finding.

    Generator: the files of ``generate`` (fleet scope) or ``generate_fleet`` (service
    scope) on the whole plan. Lint rule (plan scope): the findings on the whole plan and
    the fleet-level artifacts, compared only when those artifacts are the same as well,
    since the engine's key holds them. Raises AssertionError when the views agree and
    the output does not."""
    name = str(getattr(plugin, "code", None) or plugin.name)
    views_equal = fleet_views(before, plugin, lint_inputs=lint_inputs) == fleet_views(
        after, plugin, lint_inputs=lint_inputs
    )
    if hasattr(plugin, "code"):
        ctx_a, ctx_b = (_context(f, plugin, lint_inputs) for f in (before, after))
        a = _findings(plugin.check(before.plan, before.fleet_artifacts(), ctx_a))
        b = _findings(plugin.check(after.plan, after.fleet_artifacts(), ctx_b))
        same_inputs = _files(before.fleet_artifacts()) == _files(after.fleet_artifacts())
        if views_equal and same_inputs and a != b:
            raise AssertionError(
                f"lint rule {name}: every service's fleet_view is the same, and so are the "
                f"fleet-level files, but the findings differ:\n  before: {a}\n  after: {b}"
            )
        return ViewResult(name, views_equal and same_inputs, a == b)
    files_a = _files(_fleet_level(plugin, before.plan, before.generator_context(plugin)))
    files_b = _files(_fleet_level(plugin, after.plan, after.generator_context(plugin)))
    if views_equal and files_a != files_b:
        raise AssertionError(
            f"generator {name}: every service's fleet_view is the same, but the fleet-level "
            "files differ (the view misses something the generator reads):\n"
            + _diff_files(files_a, files_b)
        )
    return ViewResult(name, views_equal, files_a == files_b)


def _context(fleet: ScopeFleet, plugin: Any, lint_inputs: Any) -> Any:
    if not hasattr(plugin, "code"):
        return fleet.generator_context(plugin)
    return LintContext(
        naming=LabelNaming(fleet.config.naming),
        repo=fleet.config,
        settings=_settings(plugin, str(plugin.code), fleet.config),
        inputs=lint_inputs,
    )


def _fleet_level(gen: Any, plan: Plan, ctx: GeneratorContext) -> list[Artifact]:
    if _scope(gen) == "service":
        return _fleet_part(gen, plan, ctx)
    return list(gen.generate(plan, ctx))


def _scope(plugin: Any) -> str:
    return str(getattr(plugin, "scope", "fleet"))


def _settings(plugin: Any, name: str, config: RepoConfig) -> BaseModel:
    # As the pipeline does: generators' and lint rules' settings share one table.
    model: type[BaseModel] = getattr(plugin, "config_model", NoConfig)
    return model.model_validate(dict(config.generators.get(name, {})))


def _fleet_part(gen: Any, plan: Plan, ctx: GeneratorContext) -> list[Artifact]:
    fleet_part = getattr(gen, "generate_fleet", None)
    return list(fleet_part(plan, ctx)) if fleet_part is not None else []


def _whole_run(gen: Any, plan: Plan, ctx: GeneratorContext) -> list[Artifact]:
    out = list(gen.generate(plan, ctx))
    if _scope(gen) == "service":
        out.extend(_fleet_part(gen, plan, ctx))
    return out


def _files(artifacts: Iterable[Artifact]) -> tuple[tuple[str, bytes], ...]:
    return tuple(sorted((a.path, serialize(a)) for a in artifacts))


def _findings(found: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    # A set, as obs-iac reports them: the same finding from several shards (e.g. about
    # the fleet catalogue every shard holds) is one finding.
    return tuple(sorted(set(found), key=lambda d: (d.sort_key(), repr(d))))


def _diff_files(
    whole: tuple[tuple[str, bytes], ...], sharded: tuple[tuple[str, bytes], ...]
) -> str:
    a, b = dict(whole), dict(sharded)
    lines = []
    for path in sorted(set(a) | set(b)):
        if path not in b:
            lines.append(f"  {path}: made from the whole plan only")
        elif path not in a:
            lines.append(f"  {path}: made from the shards only")
        elif a[path] != b[path]:
            diff = difflib.unified_diff(
                a[path].decode("utf-8", "replace").splitlines(),
                b[path].decode("utf-8", "replace").splitlines(),
                fromfile=f"whole/{path}",
                tofile=f"sharded/{path}",
                lineterm="",
                n=1,
            )
            lines.append("\n".join(list(diff)[:30]))
    return "\n".join(lines)
