"""What each service's stack is made of: declared versions, and the features the plan and
the rendered output use (the keys of the compatibility matrix's ``feature:`` rows)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import yaml

from obs_iac import conventions
from obs_iac.blueprint.models import EXPORTER_VERSION_PATTERN
from obs_iac.catalog import dcgm
from obs_iac.config import RepoConfig, version_tuple
from obs_iac.governance.compat import Stack
from obs_iac.governance.pack import SECTION, Components, GovernanceSettings
from obs_iac.labels import NamingStrategy
from obs_iac.packs.framework import EXTENSION as FRAMEWORK_EXTENSION
from obs_iac.plan.model import AlertRule, Plan, ServicePlan
from obs_iac.render.artifact import Artifact


def gpu_family(model: str) -> str:
    return re.split(r"[-_ ]", model.upper(), maxsplit=1)[0]


def _walk(data: Any) -> Iterator[dict[str, Any]]:
    """Every mapping inside a rendered document (rule files and CRDs nest differently)."""
    stack = [data]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            yield current
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)


def _documents(art: Artifact) -> Any:
    """The artifact's data; YAML written as text (to keep its comments) is parsed back."""
    if isinstance(art.data, str) and art.path.endswith((".yml", ".yaml")):
        try:
            return list(yaml.safe_load_all(art.data))
        except yaml.YAMLError:
            return None
    return art.data


def _rendered_features(artifacts: Sequence[Artifact]) -> tuple[dict[str, set[str]], bool]:
    """(rule group name -> group-level features, whether inhibit rules carry names)."""
    by_group: dict[str, set[str]] = {}
    named = False
    for art in artifacts:
        for node in _walk(_documents(art)):
            groups = node.get("groups")
            if isinstance(groups, list):
                for group in groups:
                    if not isinstance(group, dict) or "name" not in group:
                        continue
                    found = by_group.setdefault(str(group["name"]), set())
                    if group.get("labels"):
                        found.add("rule-group-labels")
                    if "query_offset" in group:
                        found.add("rule-query-offset")
            for key in ("inhibit_rules", "inhibitRules"):
                rules = node.get(key)
                if isinstance(rules, list) and any(
                    isinstance(r, dict) and "name" in r for r in rules
                ):
                    named = True
    return by_group, named


def features(plan: Plan, svc: ServicePlan, artifacts: Sequence[Artifact]) -> dict[str, str]:
    """feature name -> the plan object that uses it (the evidence a verdict cites)."""
    out: dict[str, str] = {}
    for cset in plan.collector_sets:
        if cset.service != svc.name:
            continue
        for f in cset.fields:
            entry = dcgm.catalog().get(f.name)
            if entry and entry.first_seen and version_tuple(entry.first_seen) >= (4, 6):
                out.setdefault("dcgm-4.6-field-names", f"collector field {f.name}")
    for rset in plan.relabel_sets:
        if rset.service != svc.name:
            continue
        for rel in rset.rules:
            spellings = [x for x in ("Hostname", "hostname") if x in rel.source_labels]
            # A rule reading both spellings works on either side of the rename.
            for label in spellings if len(spellings) == 1 else ():
                if label in rel.source_labels:
                    out.setdefault(
                        f"host-label-{label}",
                        f"relabel rule {label} -> {rel.target_label} ({rset.source})",
                    )
    by_group, named = _rendered_features(artifacts)
    for group in plan.rule_groups:
        if group.service != svc.name:
            continue
        for feature in sorted(by_group.get(group.name, ())):
            out.setdefault(feature, f"rule group {group.name}")
        for rule in group.rules:
            if isinstance(rule, AlertRule) and rule.keep_firing_for:
                out.setdefault("keep-firing-for", f"alert {rule.alert} in {group.name}")
    for wiring in plan.extensions.get(FRAMEWORK_EXTENSION, ()):
        if getattr(wiring, "service", None) != svc.name:
            continue
        if getattr(wiring, "resource_attributes", None) == "prometheus-otlp":
            out["otlp-receiver"] = f"collector exporter to {wiring.prometheus_otlp_endpoint}"
            out["otlp-promote-resource-attributes"] = (
                f"otlp.promote_resource_attributes in {conventions.prometheus_otlp_fragment()}"
            )
    if named and any(e.service in (svc.name, None) for e in plan.inhibit_edges):
        out["inhibit-rule-name"] = "named inhibit rules in the Alertmanager configuration"
    if plan.naming == NamingStrategy.UTF8:
        out["utf8-label-names"] = "naming = utf8"
    return out


def stack(
    plan: Plan,
    svc: ServicePlan,
    artifacts: Sequence[Artifact],
    repo: RepoConfig,
    settings: GovernanceSettings,
) -> Stack:
    versions: dict[str, str] = {}
    origin: dict[str, str] = {}
    gpu: Mapping[str, Any] = svc.gpu
    versions["driver"], origin["driver"] = str(gpu["driver_version"]), "gpu.driver_version"
    tag = str(gpu.get("dcgm_exporter_version", ""))
    match = re.match(EXPORTER_VERSION_PATTERN, tag)
    if match:
        versions["dcgm"], origin["dcgm"] = match.group(1), f"gpu.dcgm_exporter_version {tag}"
        versions["dcgm-exporter"] = match.group(2)
        origin["dcgm-exporter"] = f"gpu.dcgm_exporter_version {tag}"
    own = Components.model_validate(svc.sections.get(SECTION) or {})
    repo_wide = settings.components
    framework = svc.sections.get("framework")
    fallback = {
        "prometheus": (repo.prometheus_min_version, "prometheus_min_version"),
        "alertmanager": (repo.alertmanager_min_version, "alertmanager_min_version"),
    }
    for component in ("ebpf_collector", "otel_collector", "prometheus", "alertmanager"):
        key = component.replace("_", "-")
        if (
            component == "otel_collector"
            and isinstance(framework, dict)
            and framework.get("collector_version")
        ):
            versions[key] = str(framework["collector_version"])
            origin[key] = "framework.collector_version"
            continue
        value = getattr(own, component)
        if value is not None:
            versions[key], origin[key] = value, f"components.{component}"
        elif getattr(repo_wide, component) is not None:
            versions[key] = getattr(repo_wide, component)
            origin[key] = f"[tool.obs-iac.packs.governance] components.{component}"
        elif component in fallback:
            versions[key] = fallback[component][0]
            origin[key] = f"[tool.obs-iac] {fallback[component][1]}"
    return Stack(
        service=svc.name,
        gpu_family=gpu_family(str(gpu["model"])),
        versions=versions,
        version_origin=origin,
        features=features(plan, svc, artifacts),
    )
