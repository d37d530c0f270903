"""Plugin protocols and discovery.

Three entry-point groups; the built-ins are registered in obs-iac's own pyproject.toml
exactly like a third party's. Discovery runs in separate steps, like flake8's finder:
find (from metadata, sorted), load (a failure names the distribution and entry point),
validate (api_version, names, duplicates, typed config).
"""

from __future__ import annotations

import importlib.metadata as md
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from obs_iac.diagnostics import Diagnostic, Location, PluginError, Severity

if TYPE_CHECKING:
    from obs_iac.config import RepoConfig
    from obs_iac.labels import LabelNaming
    from obs_iac.plan.compile import ServiceBlueprint
    from obs_iac.plan.model import (
        AlertRule,
        CollectorSet,
        DashboardRow,
        InhibitEdge,
        LogPipeline,
        MetricSpec,
        Plan,
        RelabelSet,
        RuleGroup,
    )
    from obs_iac.render.artifact import Artifact

API_VERSION = 1
SUPPORTED_API_VERSIONS = frozenset({1})

PACKS = "obs_iac.packs"
GENERATORS = "obs_iac.generators"
LINT_RULES = "obs_iac.lint_rules"
GROUPS = (PACKS, GENERATORS, LINT_RULES)

Kind = Literal["pack", "generator", "lint-rule"]

# How much of the fleet a generator or lint rule needs to see at once; see docs/plugins.md
# ("Scope"). Narrower scopes let obs-iac run the plugin per service, in parallel, and
# from the incremental cache. The default is the widest, so a plugin that says nothing
# is always correct, only slower.
GeneratorScope = Literal["service", "fleet"]
LintScope = Literal["service", "plan", "fleet"]
KIND_BY_GROUP: dict[str, Kind] = {PACKS: "pack", GENERATORS: "generator", LINT_RULES: "lint-rule"}


class NoConfig(BaseModel):
    """For plugins without settings: any key given is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass
class PackContext:
    """What a pack may read while expanding one service. Grows by fields, never by
    new parameters to ``expand``."""

    naming: LabelNaming
    repo: RepoConfig
    settings: BaseModel


@dataclass
class Contribution:
    """What one pack adds to the plan for one service."""

    metrics: list[MetricSpec] = field(default_factory=list)
    rule_groups: list[RuleGroup] = field(default_factory=list)
    relabel_sets: list[RelabelSet] = field(default_factory=list)
    collector_sets: list[CollectorSet] = field(default_factory=list)
    inhibit_edges: list[InhibitEdge] = field(default_factory=list)
    dashboard_rows: list[DashboardRow] = field(default_factory=list)
    log_pipelines: list[LogPipeline] = field(default_factory=list)
    extensions: dict[str, list[Any]] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    # The list fields above, in the order the plan stores them.
    PLAN_FIELDS: ClassVar[tuple[str, ...]] = (
        "metrics",
        "rule_groups",
        "relabel_sets",
        "collector_sets",
        "inhibit_edges",
        "dashboard_rows",
        "log_pipelines",
    )

    def extend(self, other: Contribution) -> None:
        for name in (*self.PLAN_FIELDS, "diagnostics"):
            getattr(self, name).extend(getattr(other, name))
        for key, items in other.extensions.items():
            self.extensions.setdefault(key, []).extend(items)

    def queries(self) -> list[tuple[str, str]]:
        """(owner, PromQL) for every Prometheus expression this contribution carries."""
        from obs_iac.plan.model import AlertRule

        out: list[tuple[str, str]] = []
        for group in self.rule_groups:
            for rule in group.rules:
                owner = rule.alert if isinstance(rule, AlertRule) else rule.record
                out.append((owner, rule.expr))
        for row in self.dashboard_rows:
            for panel in row.panels:
                for query in panel.queries:
                    if query.datasource == "prometheus":
                        out.append((f"dashboard panel {panel.key}", query.expr))
        return out

    def alerts(self) -> list[AlertRule]:
        from obs_iac.plan.model import AlertRule

        return [r for g in self.rule_groups for r in g.rules if isinstance(r, AlertRule)]


class Pack:
    """A domain expander: blueprint sections it owns -> plan contributions."""

    name: ClassVar[str]
    api_version: ClassVar[int] = API_VERSION
    sections: ClassVar[Mapping[str, type[BaseModel]]] = {}
    config_model: ClassVar[type[BaseModel]] = NoConfig
    description: ClassVar[str] = ""

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        raise NotImplementedError

    def metrics(self, ctx: PackContext) -> Iterable[MetricSpec]:
        """Series this pack knows regardless of any service (e.g. exporter catalogues)."""
        return ()


@dataclass
class GeneratorContext:
    naming: LabelNaming
    repo: RepoConfig
    settings: BaseModel
    # Text of the repository files the generator asked for through an optional
    # ``inputs(settings) -> Iterable[str]`` method (paths relative to the repo root). The
    # pipeline reads them, so generators stay free of I/O.
    inputs: Mapping[str, str] = field(default_factory=dict)


class Generator:
    """A backend: plan -> artifacts. Never writes files, never reads the clock.

    ``scope = "fleet"`` (the default): ``generate`` is called once with the whole plan.
    ``scope = "service"``: ``generate`` is called once per service with that service's
    shard (``plan.services`` holds exactly one service, the other collections only what
    the packs produced for it, ``plan.metrics`` the whole fleet's catalogue), in any
    order, in any process, or not at all when the incremental cache already holds the
    result. Files that need the whole fleet come from the optional
    ``generate_fleet(plan, ctx)``, called once with the whole plan.

    A fleet-level generator (fleet scope, or the ``generate_fleet`` of a service-scope
    one) may declare ``fleet_view(shard, ctx)``: the JSON part of one service's plan it
    reads. Its output is then cached on every service's view (obs_iac.plan.views).
    """

    name: ClassVar[str]
    api_version: ClassVar[int] = API_VERSION
    config_model: ClassVar[type[BaseModel]] = NoConfig
    description: ClassVar[str] = ""
    scope: ClassVar[GeneratorScope] = "fleet"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterable[Artifact]:
        raise NotImplementedError


@dataclass
class LintContext:
    naming: LabelNaming
    repo: RepoConfig
    settings: BaseModel
    # What `obs-iac lint` was asked to check beyond the plan (obs_iac.lint.engine.LintInputs).
    inputs: Any = None


class LintRule:
    """A check over the plan and the artifacts together.

    ``scope = "fleet"`` (the default): ``check`` sees the whole plan and every artifact.
    ``scope = "plan"``: the whole plan, and only the artifacts of fleet-scope generators
    (and ``generate_fleet``): for checks across services that read the plan.
    ``scope = "service"``: called once per service shard (see ``Generator``) with that
    service's artifacts, and once more with the fleet shard (no service; the fleet-level
    artifacts); the findings of all calls together must equal one call on everything.

    A plan-scope rule may declare ``fleet_view(shard, ctx)``, as a fleet-level generator
    does; its findings are then cached on every service's view, the fleet-level
    artifacts and the date.
    """

    code: ClassVar[str]
    api_version: ClassVar[int] = API_VERSION
    default_severity: ClassVar[Severity] = Severity.ERROR
    config_model: ClassVar[type[BaseModel]] = NoConfig
    description: ClassVar[str] = ""
    scope: ClassVar[LintScope] = "fleet"

    @property
    def name(self) -> str:
        return self.code

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterable[Diagnostic]:
        raise NotImplementedError


@dataclass(frozen=True)
class LoadedPlugin:
    kind: Kind
    name: str
    obj: Any
    distribution: str
    version: str
    entry_point: str


def crashed(
    plugin: LoadedPlugin,
    what: str,
    exc: BaseException,
    *,
    on: str | None = None,
    location: Location | None = None,
) -> PluginError:
    """The error for a plugin that raised: ``plugin/crash``, naming it and where to report
    it (the caller raises it ``from exc``, so --debug shows the traceback)."""
    kind = "lint rule" if plugin.kind == "lint-rule" else plugin.kind
    where = f" on {on}" if on else ""
    return PluginError(
        [
            Diagnostic(
                "plugin/crash",
                Severity.ERROR,
                f"{what} failed{where}: {type(exc).__name__}: {exc}",
                hint=f"this is a bug in the {kind}; rerun with --debug for the traceback and "
                f"report it to {plugin.distribution}",
                location=location,
                origin=plugin.entry_point,
            )
        ]
    )


def outside_paths(gen: LoadedPlugin, produced: Iterable[Artifact]) -> list[Diagnostic]:
    """``plugin/bad-path`` for every artifact whose path leaves the output folder."""
    from obs_iac import conventions

    return [
        Diagnostic(
            "plugin/bad-path",
            Severity.ERROR,
            f"generator {gen.name!r} returned the path {art.path!r}, which is outside its "
            "output folder",
            hint=f"report it to {gen.distribution}; artifact paths must be relative and stay "
            "inside the output folder",
            origin=gen.entry_point,
        )
        for art in produced
        if not conventions.is_safe_relative(art.path)
    ]


@dataclass(frozen=True)
class PluginSet:
    packs: tuple[LoadedPlugin, ...]
    generators: tuple[LoadedPlugin, ...]
    lint_rules: tuple[LoadedPlugin, ...]

    def all(self) -> tuple[LoadedPlugin, ...]:
        return self.packs + self.generators + self.lint_rules

    def fingerprint(self) -> str:
        return ";".join(f"{p.kind}:{p.name}={p.distribution}@{p.version}" for p in self.all())


def _plugin_name(obj: Any, kind: Kind) -> str:
    return str(obj.code if kind == "lint-rule" else obj.name)


def _fail(message: str, hint: str, where: str) -> Diagnostic:
    return Diagnostic(
        "plugin/load",
        Severity.ERROR,
        message,
        hint=hint,
        location=Location(where),
        origin=where,
    )


def discover(
    repo: RepoConfig | None = None,
    extra: Mapping[str, Iterable[tuple[str, Any]]] | None = None,
) -> PluginSet:
    """Finds, loads and validates every installed plugin. ``extra`` injects plugin
    objects directly (the testing harness uses it, in place of entry points)."""
    problems: list[Diagnostic] = []
    loaded: dict[str, list[LoadedPlugin]] = {g: [] for g in GROUPS}
    disabled = set(repo.plugins.disable) if repo else set()
    for group in GROUPS:
        kind = KIND_BY_GROUP[group]
        eps = sorted(md.entry_points(group=group), key=lambda e: (e.name, e.value))
        for ep in eps:
            dist = ep.dist.name if ep.dist else "unknown"
            version = ep.dist.version if ep.dist else "0"
            where = f"{dist}: {group}:{ep.name} = {ep.value}"
            try:
                target = ep.load()
                obj = target() if isinstance(target, type) else target
            except Exception as exc:  # a third-party import can raise anything
                problems.append(
                    _fail(
                        f"plugin {ep.name!r} from {dist} failed to load: "
                        f"{type(exc).__name__}: {exc}",
                        f"fix or uninstall {dist}, or disable it in [tool.obs-iac.plugins]",
                        where,
                    )
                )
                continue
            loaded[group].append(LoadedPlugin(kind, "", obj, dist, version, where))
        for name, obj in (extra or {}).get(group, ()):
            loaded[group].append(
                LoadedPlugin(kind, "", obj, "(in-process)", "0", f"(in-process): {name}")
            )
    result: dict[str, list[LoadedPlugin]] = {}
    for group, plugins in loaded.items():
        kind = KIND_BY_GROUP[group]
        seen: dict[str, LoadedPlugin] = {}
        kept: list[LoadedPlugin] = []
        for plugin in plugins:
            try:
                name = _plugin_name(plugin.obj, kind)
                api = int(plugin.obj.api_version)
            except Exception:
                problems.append(
                    _fail(
                        f"{kind} plugin from {plugin.distribution} does not follow the protocol "
                        f"(missing {'code' if kind == 'lint-rule' else 'name'} or api_version)",
                        "subclass obs_iac.plugins.Pack/Generator/LintRule; see docs/plugins.md",
                        plugin.entry_point,
                    )
                )
                continue
            if api not in SUPPORTED_API_VERSIONS:
                problems.append(
                    _fail(
                        f"{kind} {name!r} from {plugin.distribution} wants api_version {api}; "
                        f"this obs-iac supports {sorted(SUPPORTED_API_VERSIONS)}",
                        "upgrade obs-iac or install a release of the plugin built for this API",
                        plugin.entry_point,
                    )
                )
                continue
            if name in seen:
                problems.append(
                    _fail(
                        f"two {kind} plugins are named {name!r}: {seen[name].entry_point} "
                        f"and {plugin.entry_point}",
                        "uninstall one of them, or disable one in [tool.obs-iac.plugins]",
                        plugin.entry_point,
                    )
                )
                continue
            named = LoadedPlugin(
                kind, name, plugin.obj, plugin.distribution, plugin.version, plugin.entry_point
            )
            seen[name] = named
            if name not in disabled:
                kept.append(named)
        result[group] = sorted(kept, key=lambda p: p.name)
    if repo is not None:
        installed = {p.name for group in result.values() for p in group} | disabled
        missing = [name for name in repo.plugins.require if name not in installed]
        if missing:
            problems.append(
                Diagnostic(
                    "plugin/missing",
                    Severity.ERROR,
                    f"required plugins are not installed: {', '.join(missing)}",
                    hint="installed: "
                    + ", ".join(sorted(installed))
                    + f"; expected: {', '.join(repo.plugins.require)}; pip install the "
                    "packages that provide the missing ones",
                    location=Location("[tool.obs-iac.plugins]"),
                )
            )
    if problems:
        raise PluginError(problems)
    return PluginSet(
        packs=tuple(result[PACKS]),
        generators=tuple(result[GENERATORS]),
        lint_rules=tuple(result[LINT_RULES]),
    )


def plugin_settings(
    plugin: LoadedPlugin, raw: Mapping[str, Mapping[str, Any]], section: str
) -> BaseModel:
    """Validates ``[tool.obs-iac.<section>.<name>]`` against the plugin's config model."""
    model: type[BaseModel] = getattr(plugin.obj, "config_model", NoConfig)
    try:
        return model.model_validate(dict(raw.get(plugin.name, {})))
    except ValidationError as exc:
        diags = [
            Diagnostic(
                "config/plugin",
                Severity.ERROR,
                f"[tool.obs-iac.{section}.{plugin.name}] "
                f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}",
                hint=f"settings of {plugin.kind} {plugin.name!r} ({plugin.distribution}): "
                + ", ".join(sorted(model.model_fields) or ["none"]),
                location=Location("pyproject.toml"),
                object_path=("config", section, plugin.name),
                origin=plugin.entry_point,
            )
            for err in exc.errors()
        ]
        from obs_iac.diagnostics import InputError

        raise InputError(diags) from None
