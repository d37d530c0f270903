"""Blueprints + packs -> one frozen Plan."""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from obs_iac.blueprint.models import CORE_FIELDS, Service
from obs_iac.blueprint.registry import Registration
from obs_iac.config import RepoConfig
from obs_iac.diagnostics import Diagnostic, InputError, Location, PluginError, Severity
from obs_iac.escaping import template_text
from obs_iac.labels import LabelNaming
from obs_iac.load.loader import BlueprintFile, LoadedBlueprints, validation_diagnostics
from obs_iac.plan.model import (
    AlertRule,
    MetricSpec,
    Plan,
    ServicePlan,
    SourceRef,
)
from obs_iac.plugins import (
    Contribution,
    LoadedPlugin,
    PackContext,
    PluginSet,
    crashed,
    plugin_settings,
)


@dataclass(frozen=True)
class ServiceBlueprint:
    """A validated service: core fields, the sections packs own, and where it was written."""

    service: Service
    sections: dict[str, BaseModel]
    file: str
    line: int
    blueprint: BlueprintFile | None = field(default=None, compare=False, repr=False)

    @property
    def tree(self) -> ast.Module | None:
        return self.blueprint.tree if self.blueprint is not None else None

    @property
    def name(self) -> str:
        return self.service.name

    @property
    def source(self) -> SourceRef:
        return SourceRef(file=self.file, line=self.line)

    def section(self, name: str) -> BaseModel | None:
        return self.sections.get(name)

    def location(self, *path: str | int) -> Location:
        """The file and line that wrote a field of this service (e.g. 'gpu', 'extra_fields', 2)."""
        from obs_iac.blueprint.locate import find_call, locate

        call = find_call(self.tree, self.line) if self.tree is not None else None
        if call is None:
            return Location(self.file, self.line)
        line, col = locate(call, path)
        return Location(self.file, line or self.line, col or None)


def _section_owners(
    packs: Iterable[LoadedPlugin],
) -> dict[str, tuple[LoadedPlugin, type[BaseModel]]]:
    owners: dict[str, tuple[LoadedPlugin, type[BaseModel]]] = {}
    problems = []
    for pack in packs:
        for section, model in sorted(pack.obj.sections.items()):
            if section in CORE_FIELDS:
                problems.append(f"pack {pack.name!r} claims core field {section!r}")
            elif section in owners:
                problems.append(
                    f"packs {owners[section][0].name!r} and {pack.name!r} both claim "
                    f"section {section!r}"
                )
            else:
                owners[section] = (pack, model)
    if problems:
        raise PluginError(
            [
                Diagnostic("plugin/section-conflict", Severity.ERROR, p, hint="disable one pack")
                for p in problems
            ]
        )
    return owners


def validate_services(loaded: LoadedBlueprints, plugins: PluginSet) -> list[ServiceBlueprint]:
    owners = _section_owners(plugins.packs)
    problems: list[Diagnostic] = list(loaded.problems)
    services: list[ServiceBlueprint] = []
    for reg in loaded.registrations:
        result = _validate_one(reg, loaded, owners, problems)
        if result is not None:
            services.append(result)
    by_sla: dict[str, ServiceBlueprint] = {}
    by_name: dict[str, ServiceBlueprint] = {}
    for svc in sorted(services, key=lambda s: (s.file, s.line)):
        for index, key, what, field_name in (
            (by_sla, svc.service.sla_id, "business.sla_id", "sla_id"),
            (by_name, svc.service.name, "service name", "name"),
        ):
            first = index.get(key)
            if first is None:
                index[key] = svc
                continue
            problems.append(
                Diagnostic(
                    "blueprint/duplicate",
                    Severity.ERROR,
                    f"{what} {key!r} is declared twice (first at {first.location(field_name)})",
                    hint=f"each service needs its own {what}; rename one of them",
                    location=svc.location(field_name),
                    related=(first.location(field_name),),
                    object_path=(svc.service.name, field_name),
                )
            )
    if problems:
        raise InputError(problems)
    return sorted(services, key=lambda s: s.service.name)


def _validate_one(
    reg: Registration,
    loaded: LoadedBlueprints,
    owners: dict[str, tuple[LoadedPlugin, type[BaseModel]]],
    problems: list[Diagnostic],
) -> ServiceBlueprint | None:
    blueprint = loaded.file(reg.file)
    core = {k: v for k, v in reg.fields.items() if k in CORE_FIELDS}
    name = str(reg.fields.get("name", "?"))
    ok = True
    try:
        service = Service.model_validate(core)
    except ValidationError as exc:
        problems.extend(
            validation_diagnostics(
                exc, reg.file, _tree(blueprint), reg.line, object_path=(name,), model=Service
            )
        )
        ok = False
    sections: dict[str, BaseModel] = {}
    for key in sorted(set(reg.fields) - CORE_FIELDS):
        value = reg.fields[key]
        owner = owners.get(key)
        if owner is None:
            known = sorted([*CORE_FIELDS, *owners])
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            hint += f"installed sections: {', '.join(sorted(owners)) or 'none'}; core fields: "
            hint += ", ".join(sorted(CORE_FIELDS))
            problems.append(
                Diagnostic(
                    "blueprint/unknown-section",
                    Severity.ERROR,
                    f"{key}: no installed pack claims a section of this name",
                    hint=hint,
                    location=_kw_location(reg, _tree(blueprint), key),
                    object_path=(name,),
                )
            )
            ok = False
            continue
        _pack, model = owner
        try:
            sections[key] = value if isinstance(value, model) else model.model_validate(value)
        except ValidationError as exc:
            problems.extend(
                validation_diagnostics(
                    exc,
                    reg.file,
                    _tree(blueprint),
                    reg.line,
                    prefix=(key,),
                    prefix_in_call=True,
                    object_path=(name,),
                    model=model,
                )
            )
            ok = False
    if not ok:
        return None
    return ServiceBlueprint(
        service=service, sections=sections, file=reg.file, line=reg.line, blueprint=blueprint
    )


def _tree(blueprint: BlueprintFile | None) -> ast.Module | None:
    return blueprint.tree if blueprint is not None else None


def _kw_location(reg: Registration, tree: Any, key: str) -> Location:
    from obs_iac.blueprint.locate import find_call, locate

    call = find_call(tree, reg.line) if tree is not None else None
    if call is None:
        return Location(reg.file, reg.line)
    line, col = locate(call, (key,))
    return Location(reg.file, line or reg.line, col or None)


def _merge_metrics(specs: Iterable[MetricSpec]) -> tuple[MetricSpec, ...]:
    merged: dict[str, MetricSpec] = {}
    for spec in specs:
        prior = merged.get(spec.name)
        if prior is None:
            merged[spec.name] = spec
        elif prior != spec:
            # The same series seen from two fleets (e.g. two exporter versions): the
            # catalogue keeps every label either produces.
            labels = tuple(sorted(set(prior.labels) | set(spec.labels)))
            merged[spec.name] = prior.model_copy(update={"labels": labels})
    return tuple(merged[name] for name in sorted(merged))


def pack_contexts(
    plugins: PluginSet, repo: RepoConfig, naming: LabelNaming
) -> dict[str, PackContext]:
    return {
        pack.name: PackContext(
            naming=naming, repo=repo, settings=plugin_settings(pack, repo.packs, "packs")
        )
        for pack in plugins.packs
    }


def expand_service(
    svc: ServiceBlueprint, plugins: PluginSet, contexts: dict[str, PackContext]
) -> Contribution:
    """Runs every pack over one service; the unit of parallel and cached work."""
    total = Contribution()
    for pack in plugins.packs:
        part = _pack_call(pack, svc, pack.obj.expand, svc, contexts[pack.name])
        total.extend(part)
    if any(d.severity is Severity.ERROR for d in total.diagnostics):
        return total  # finalize hooks may rely on what expand validated
    _annotate_objective(total, svc)
    for pack in plugins.packs:
        finalize = getattr(pack.obj, "finalize", None)
        if finalize is not None:
            total.extend(_pack_call(pack, svc, finalize, svc, total, contexts[pack.name]))
    return total


def _pack_call(pack: LoadedPlugin, svc: ServiceBlueprint, fn: Any, *args: Any) -> Contribution:
    """A pack's expand or finalize; a crash becomes a plugin error naming the pack."""
    try:
        result: Contribution = fn(*args)
        return result
    except (InputError, PluginError):
        raise
    except Exception as exc:
        raise crashed(
            pack,
            f"pack {pack.name!r}",
            exc,
            on=f"service {svc.name!r}",
            location=Location(svc.file, svc.line),
        ) from exc


def _annotate_objective(total: Contribution, svc: ServiceBlueprint) -> None:
    """Every alert of a service says which SLA is at stake, whichever pack made it."""
    objective = template_text(svc.service.objective)
    for index, group in enumerate(total.rule_groups):
        if group.service != svc.name:
            continue
        rules = tuple(
            rule.model_copy(
                update={"annotations": {**rule.annotations, "sla_objective": objective}}
            )
            if isinstance(rule, AlertRule) and "sla_objective" not in rule.annotations
            else rule
            for rule in group.rules
        )
        total.rule_groups[index] = group.model_copy(update={"rules": rules})


def fleet_catalogue(
    contributions: Iterable[Contribution],
    plugins: PluginSet,
    contexts: dict[str, PackContext],
) -> tuple[MetricSpec, ...]:
    """Every series the fleet knows: the packs' own catalogues plus what each service's
    expansion declared. Shards share it, so a query is checked against the same
    catalogue whether it is linted alone or with the whole fleet."""
    return catalogue_of((part.metrics for part in contributions), plugins, contexts)


def catalogue_of(
    service_metrics: Iterable[Iterable[MetricSpec]],
    plugins: PluginSet,
    contexts: dict[str, PackContext],
) -> tuple[MetricSpec, ...]:
    """fleet_catalogue() from each service's declared metrics alone."""
    specs: list[MetricSpec] = []
    for pack in plugins.packs:
        specs.extend(pack.obj.metrics(contexts[pack.name]))
    for declared in service_metrics:
        specs.extend(declared)
    return _merge_metrics(specs)


def _check_contributions(contributions: Iterable[Contribution]) -> None:
    diagnostics = [d for c in contributions for d in c.diagnostics]
    if any(d.severity is Severity.ERROR for d in diagnostics):
        raise InputError(diagnostics)


def service_plan(s: ServiceBlueprint) -> ServicePlan:
    return ServicePlan(
        name=s.service.name,
        team=s.service.team,
        sla_id=s.service.sla_id,
        objective=s.service.objective,
        runbook_base_url=s.service.runbook_base_url,
        source=s.source,
        gpu=s.service.gpu.model_dump(mode="json"),
        sections={k: v.model_dump(mode="json") for k, v in sorted(s.sections.items())},
        suppressions=tuple(x.model_dump(mode="json") for x in s.service.suppress),
        acknowledgements=tuple(x.model_dump(mode="json") for x in s.service.acknowledge),
        workload=s.service.workload,
        waivers=tuple(x.model_dump(mode="json") for x in s.service.waive),
    )


def assemble_plan(
    services: Iterable[ServicePlan],
    contributions: Iterable[Contribution],
    catalogue: tuple[MetricSpec, ...],
    repo: RepoConfig,
) -> Plan:
    """The plan of some services: the whole fleet, one service's shard, or (no services)
    the fleet shard. Always with the whole fleet's catalogue."""
    merged = Contribution()
    for part in contributions:
        merged.extend(part)
    return Plan(
        naming=repo.naming,
        evaluation_interval=repo.evaluation_interval,
        services=tuple(sorted(services, key=lambda s: s.name)),
        metrics=catalogue,
        rule_groups=tuple(sorted(merged.rule_groups, key=lambda g: (g.service, g.name))),
        relabel_sets=tuple(sorted(merged.relabel_sets, key=lambda r: (r.service, r.source))),
        collector_sets=tuple(sorted(merged.collector_sets, key=lambda c: c.service)),
        inhibit_edges=tuple(sorted(merged.inhibit_edges, key=lambda e: (e.service or "", e.name))),
        dashboard_rows=tuple(merged.dashboard_rows),
        log_pipelines=tuple(sorted(merged.log_pipelines, key=lambda p: p.service)),
        extensions={k: tuple(v) for k, v in sorted(merged.extensions.items())},
    )


def assemble(
    services: list[ServiceBlueprint],
    contributions: list[Contribution],
    plugins: PluginSet,
    contexts: dict[str, PackContext],
    repo: RepoConfig,
) -> Plan:
    _check_contributions(contributions)
    catalogue = fleet_catalogue(contributions, plugins, contexts)
    return assemble_plan(map(service_plan, services), contributions, catalogue, repo)


@dataclass(frozen=True)
class CompiledFleet:
    """The plan and what it was assembled from, so it can be cut into shards: one per
    service (what its packs produced) and the fleet shard (no service)."""

    plan: Plan
    contributions: tuple[Contribution, ...]  # in the order of plan.services
    repo: RepoConfig

    def shard(self, index: int | None) -> Plan:
        """Service ``index``'s shard, or the fleet shard for None."""
        if index is None:
            return assemble_plan((), (), self.plan.metrics, self.repo)
        return assemble_plan(
            (self.plan.services[index],), (self.contributions[index],), self.plan.metrics, self.repo
        )


def compile_fleet(loaded: LoadedBlueprints, plugins: PluginSet, repo: RepoConfig) -> CompiledFleet:
    naming = LabelNaming(repo.naming)
    services = validate_services(loaded, plugins)
    contexts = pack_contexts(plugins, repo, naming)
    contributions = [expand_service(s, plugins, contexts) for s in services]
    plan = assemble(services, contributions, plugins, contexts, repo)
    return CompiledFleet(plan, tuple(contributions), repo)


def compile_plan(loaded: LoadedBlueprints, plugins: PluginSet, repo: RepoConfig) -> Plan:
    return compile_fleet(loaded, plugins, repo).plan
