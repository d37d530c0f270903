"""Alertmanager inhibit rules: a plain ``inhibit_rules`` file, a full config merged into a
user-supplied base, Prometheus Operator AlertmanagerConfig CRDs, and a review matrix.

Rules use ``source_matchers``/``target_matchers`` only (the ``source_match`` maps are
deprecated); ``name`` is written only when the repository's oldest Alertmanager is
0.30 or newer, because older releases reject the unknown key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath
from typing import Any, ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from obs_iac import conventions
from obs_iac.config import version_tuple
from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity
from obs_iac.generators.common import sources_of
from obs_iac.labels import is_classic_label_name
from obs_iac.packs.inhibit.analysis import AlertIndex, AlertInfo, inhibit_view
from obs_iac.packs.inhibit.matchers import render
from obs_iac.plan import views
from obs_iac.plan.model import InhibitEdge, Matcher, Plan
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
from obs_iac.render.artifact import Artifact
from obs_iac.render.fastyaml import dump_simple
from obs_iac.render.serialize import dump_yaml

NAMES_SINCE = (0, 30)
UTF8_SINCE = (0, 27)  # the UTF-8 matcher parser; older releases reject dotted label names
CRITICAL = ("critical", "page")


def with_names(ctx: GeneratorContext) -> bool:
    return version_tuple(ctx.repo.alertmanager_min_version) >= NAMES_SINCE


PRESENT = ".+"


def guarded(edge: InhibitEdge) -> tuple[tuple[Matcher, ...], tuple[Matcher, ...]]:
    """The edge's source and target matchers, each side also requiring every ``equal``
    label to be present (``label=~".+"``).

    Alertmanager compares ``equal`` labels by value and takes a missing label as the
    empty value (inhibit/inhibit.go hasEqual), so two alerts that both lack ``host_name``
    (an exporter upgrade renamed its source label, say) would count as "the same host"
    and an edge would mute across every host. A regex matcher on an absent label sees
    the empty string, which ``.+`` rejects: with these the edge can only match alerts
    that carry every ``equal`` label, and then hasEqual compares real values.
    """

    def side(matchers: tuple[Matcher, ...]) -> tuple[Matcher, ...]:
        have = {(m.name, m.op, m.value) for m in matchers}
        extra = tuple(
            Matcher(name=label, op="=~", value=PRESENT)
            for label in edge.equal
            if (label, "=~", PRESENT) not in have
        )
        return (*matchers, *extra)

    return side(edge.source_matchers), side(edge.target_matchers)


def rule_dict(edge: InhibitEdge, named: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if named:
        out["name"] = edge.name
    source, target = guarded(edge)
    out["source_matchers"] = [render(m) for m in source]
    out["target_matchers"] = [render(m) for m in target]
    if edge.equal:
        out["equal"] = list(edge.equal)
    return out


def _edge_comment(edge: InhibitEdge) -> str:
    scope = edge.service or "fleet-wide"
    return f"# {edge.name} ({scope}, pack {edge.pack}): {' '.join(edge.reason.split())}\n"


def _all_sources(plan: Plan) -> tuple[str, ...]:
    return sources_of(plan, [s.name for s in plan.services])


def _header(plan: Plan) -> str:
    sources = ", ".join(_all_sources(plan)) or "the repository's blueprints"
    return "# " + conventions.HEADER.format(source=sources) + "\n"


class AlertmanagerConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    base_config: str | None = Field(
        default=None,
        description="A hand-written alertmanager.yml (route, receivers, ...), relative to "
        "the repository root. When set, alertmanager/alertmanager.yml is that file with "
        "the generated inhibit rules appended to its own.",
    )

    @field_validator("base_config")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is None:
            return value
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or "\\" in value:
            raise ValueError("must be a path inside the repository (relative, no '..')")
        if path.suffix not in (".yml", ".yaml"):
            raise ValueError("must be a YAML file (.yml or .yaml)")
        return value


class AlertmanagerGenerator(Generator):
    name: ClassVar[str] = "alertmanager"
    scope: ClassVar[GeneratorScope] = "fleet"  # one file with every edge
    description: ClassVar[str] = (
        "alertmanager/inhibit_rules.yml, and a full alertmanager.yml merged into a base config."
    )
    config_model: ClassVar[type[BaseModel]] = AlertmanagerConfig

    def inputs(self, settings: BaseModel) -> Iterable[str]:
        assert isinstance(settings, AlertmanagerConfig)
        return (settings.base_config,) if settings.base_config else ()

    def fleet_view(self, shard: Plan, ctx: GeneratorContext) -> Any:
        return {"services": views.services(shard), "edges": views.dump(shard.inhibit_edges)}

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        settings = ctx.settings
        assert isinstance(settings, AlertmanagerConfig)
        named = with_names(ctx)
        _check_label_names(plan, ctx)
        sources = _all_sources(plan)
        text = _header(plan) + "inhibit_rules:"
        if not plan.inhibit_edges:
            text += " []\n"
        else:
            text += "\n" + "".join(
                _edge_comment(edge) + dump_simple([rule_dict(edge, named)])
                for edge in plan.inhibit_edges
            )
        yield Artifact(
            conventions.ALERTMANAGER_INHIBIT_RULES, "text", text, self.name, sources, header=False
        )
        if settings.base_config is None:
            return
        base = _load_base(settings.base_config, ctx.inputs.get(settings.base_config, ""))
        merged = dict(base)
        own = list(base.get("inhibit_rules") or [])
        merged["inhibit_rules"] = own + [rule_dict(e, named) for e in plan.inhibit_edges]
        yield Artifact(conventions.ALERTMANAGER_CONFIG, "yaml", merged, self.name, sources)


def _check_label_names(plan: Plan, ctx: GeneratorContext) -> None:
    if version_tuple(ctx.repo.alertmanager_min_version) >= UTF8_SINCE:
        return
    bad = sorted(
        {
            f"{edge.name}: {label}"
            for edge in plan.inhibit_edges
            for label in (
                *edge.equal,
                *(m.name for m in edge.source_matchers + edge.target_matchers),
            )
            if not is_classic_label_name(label)
        }
    )
    if bad:
        raise InputError(
            [
                Diagnostic(
                    "alertmanager/label-name",
                    Severity.ERROR,
                    f"Alertmanager {ctx.repo.alertmanager_min_version} rejects label names "
                    f"that are not [a-zA-Z_][a-zA-Z0-9_]*: {', '.join(bad)}",
                    hint="set alertmanager_min_version to 0.27 or later (UTF-8 label names), "
                    'or use naming = "classic"',
                    location=Location("pyproject.toml"),
                    object_path=("config", "alertmanager_min_version"),
                )
            ]
        )


def _load_base(path: str, text: str) -> dict[str, Any]:
    def fail(message: str, line: int | None = None) -> InputError:
        return InputError(
            [
                Diagnostic(
                    "alertmanager/base-config",
                    Severity.ERROR,
                    f"{path}: {message}",
                    hint="base_config must be an Alertmanager configuration file (a YAML "
                    "mapping with route and receivers)",
                    location=Location(path, line),
                )
            ]
        )

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise fail(f"not valid YAML: {exc}", mark.line + 1 if mark else None) from None
    if not isinstance(data, dict):
        raise fail("the top level is not a mapping")
    rules = data.get("inhibit_rules")
    if rules is not None and not isinstance(rules, list):
        raise fail("inhibit_rules is not a list")
    return data


# --- Prometheus Operator ----------------------------------------------------------------

Strategy = Literal["OnNamespace", "OnNamespaceExceptForAlertmanagerNamespace", "None"]
_K8S_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class OperatorConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    matcher_strategy: Strategy = Field(
        default="OnNamespace",
        description="The Alertmanager resource's spec.alertmanagerConfigMatcherStrategy.type.",
    )
    namespace: str = Field(
        default="monitoring", pattern=_K8S_NAME, description="Namespace of per-service CRs."
    )
    alertmanager_namespace: str = Field(
        default="monitoring",
        pattern=_K8S_NAME,
        description="Namespace of the Alertmanager resource (and of its global config).",
    )
    global_config_name: str = Field(
        default="obs-iac-global-inhibit",
        pattern=_K8S_NAME,
        description="Name of the AlertmanagerConfig holding edges that cannot be namespaced.",
    )


def operator_placement(
    edge: InhibitEdge, index: AlertIndex, settings: OperatorConfig
) -> tuple[str, str | None]:
    """('namespaced', None) or ('global', why). Under OnNamespace the operator ANDs
    namespace="<CR namespace>" into both sides, so an edge only works in a namespaced CR
    when every alert it touches carries exactly that namespace."""
    if settings.matcher_strategy == "None":
        return "namespaced", None
    if (
        settings.matcher_strategy == "OnNamespaceExceptForAlertmanagerNamespace"
        and settings.namespace == settings.alertmanager_namespace
    ):
        return "namespaced", None
    ns = settings.namespace
    absent: list[str] = []
    other: list[str] = []
    series: list[str] = []
    touched = {a.key: a for a in (*index.sources(edge), *index.targets(edge))}
    for _, alert in sorted(touched.items()):
        if alert.static.get("namespace") == ns:
            continue
        if alert.label_state("namespace") == "absent":
            absent.append(alert.name)
        elif "namespace" in alert.static:
            other.append(f"{alert.name} (namespace={alert.static['namespace']!r})")
        else:
            series.append(alert.name)
    problems = []
    if absent:
        problems.append(f"no namespace label on {', '.join(absent)}")
    if other:
        problems.append(f"another namespace on {', '.join(other)}")
    if series:
        problems.append(
            f"the namespace label of {', '.join(series)} is the scrape target's "
            f"(e.g. the dcgm-exporter pod's), not {ns!r}"
        )
    if not problems:
        return "namespaced", None
    why = (
        f"under {settings.matcher_strategy} the operator adds namespace={ns!r} to both "
        f"sides, which would not match: {'; '.join(problems)}"
    )
    return "global", why


def _op_matcher(m: Any) -> dict[str, str]:
    return {"name": m.name, "value": m.value, "matchType": m.op}


def _op_rule(edge: InhibitEdge) -> dict[str, Any]:
    source, target = guarded(edge)
    out: dict[str, Any] = {
        "sourceMatch": [_op_matcher(m) for m in source],
        "targetMatch": [_op_matcher(m) for m in target],
    }
    if edge.equal:
        out["equal"] = list(edge.equal)
    return out


class AlertmanagerOperatorGenerator(Generator):
    name: ClassVar[str] = "alertmanager-operator"
    # An edge goes global when its matchers reach other services' alerts.
    scope: ClassVar[GeneratorScope] = "fleet"
    description: ClassVar[str] = (
        "AlertmanagerConfig CRDs for the inhibit edges, respecting the operator's "
        "namespace matcher strategy."
    )
    config_model: ClassVar[type[BaseModel]] = OperatorConfig

    def fleet_view(self, shard: Plan, ctx: GeneratorContext) -> Any:
        return inhibit_view(shard)

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        settings = ctx.settings
        assert isinstance(settings, OperatorConfig)
        index = AlertIndex.of_plan(plan)
        crd_ns = settings.namespace
        if settings.matcher_strategy == "OnNamespaceExceptForAlertmanagerNamespace":
            crd_ns = settings.alertmanager_namespace
        effective = settings.model_copy(update={"namespace": crd_ns})
        local: dict[str, list[InhibitEdge]] = {}
        global_edges: list[tuple[InhibitEdge, str]] = []
        for edge in plan.inhibit_edges:
            where, why = operator_placement(edge, index, effective)
            if where == "global" or edge.service is None:
                global_edges.append((edge, why or "the edge is fleet-wide"))
            else:
                local.setdefault(edge.service, []).append(edge)
        for service, edges in sorted(local.items()):
            crd = {
                "apiVersion": "monitoring.coreos.com/v1alpha1",
                "kind": "AlertmanagerConfig",
                "metadata": {
                    "name": conventions.alertmanager_config_name(service),
                    "namespace": crd_ns,
                    "labels": {
                        "app.kubernetes.io/managed-by": "obs-iac",
                        "app.kubernetes.io/part-of": service,
                    },
                },
                "spec": {"inhibitRules": [_op_rule(e) for e in edges]},
            }
            yield Artifact(
                conventions.alertmanager_config_crd(service),
                "yaml",
                crd,
                self.name,
                sources_of(plan, [service]),
            )
        if not global_edges:
            return
        text = _header(plan)
        text += (
            "# These edges cannot live in a namespaced AlertmanagerConfig: the operator's\n"
            "# namespace matcher would stop them from ever matching. Copy spec.inhibitRules\n"
            "# into the AlertmanagerConfig named by Alertmanager.spec.alertmanagerConfiguration\n"
            "# (the global config, which the operator does not rewrite), or use\n"
            f"# {conventions.ALERTMANAGER_CONFIG} / {conventions.ALERTMANAGER_INHIBIT_RULES}.\n"
        )
        body = {
            "apiVersion": "monitoring.coreos.com/v1alpha1",
            "kind": "AlertmanagerConfig",
            "metadata": {
                "name": settings.global_config_name,
                "namespace": settings.alertmanager_namespace,
                "labels": {"app.kubernetes.io/managed-by": "obs-iac"},
            },
        }
        parts = [text, dump_yaml(body), "spec:\n  inhibitRules:\n"]
        # One join at the end: appending to a growing string is quadratic at fleet size.
        for edge, why in global_edges:
            parts.append(f"  # {edge.name}: {why}\n")
            item = dump_simple([_op_rule(edge)])
            parts.extend(f"  {line}\n" for line in item.splitlines())
        text = "".join(parts)
        yield Artifact(
            conventions.ALERTMANAGER_GLOBAL_INHIBIT_CRD,
            "text",
            text,
            self.name,
            _all_sources(plan),
            header=False,
        )


# --- Review matrix ----------------------------------------------------------------------


def _cell(labels: Iterable[str]) -> str:
    names = sorted(set(labels))
    return ", ".join(f"`{n}`" for n in names) if names else "(all)"


def _md(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


class InhibitMatrixGenerator(Generator):
    name: ClassVar[str] = "inhibit-matrix"
    scope: ClassVar[GeneratorScope] = "fleet"  # one review page for the fleet
    description: ClassVar[str] = (
        "A markdown source x target inhibit matrix with a coverage report, for reviewers."
    )

    def fleet_view(self, shard: Plan, ctx: GeneratorContext) -> Any:
        return inhibit_view(shard)

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        index = AlertIndex.of_plan(plan)
        lines = [
            "<!-- "
            + conventions.HEADER.format(
                source=", ".join(_all_sources(plan)) or "the repository's blueprints"
            )
            + " -->",
            "",
            "# Alertmanager inhibit matrix",
            "",
            "A cell lists the `equal` labels: the row alert mutes the column alert only "
            "while both carry the same values for them. An empty cell means no edge.",
            "",
        ]
        pairs: dict[tuple[str, str], dict[tuple[str, str], set[str]]] = {}
        edges_of: dict[str, list[InhibitEdge]] = {}
        inhibits: dict[tuple[str, str], set[str]] = {}
        inhibited_by: dict[tuple[str, str], set[str]] = {}
        for edge in plan.inhibit_edges:
            edges_of.setdefault(edge.service or "(fleet-wide)", []).append(edge)
            for src, dst in index.pairs(edge):
                pairs.setdefault(src.key, {}).setdefault(dst.key, set()).update(edge.equal)
                inhibits.setdefault(src.key, set()).add(f"{dst.name} ({edge.name})")
                inhibited_by.setdefault(dst.key, set()).add(f"{src.name} ({edge.name})")
        for svc in sorted({a.service for a in index.alerts} | set(edges_of)):
            alerts = list(index.of_service(svc))
            lines += [f"## {svc}", ""]
            rows = [a for a in alerts if a.key in pairs]
            cols = sorted(
                {dst for a in rows for dst in pairs[a.key] if dst[0] == svc}, key=lambda k: k[1]
            )
            if rows and cols:
                lines.append("| source \\ target | " + " | ".join(c[1] for c in cols) + " |")
                lines.append("|---" * (len(cols) + 1) + "|")
                for row in rows:
                    cells = [_cell(pairs[row.key][c]) if c in pairs[row.key] else "" for c in cols]
                    lines.append(f"| **{row.name}** | " + " | ".join(cells) + " |")
                lines.append("")
            else:
                lines += ["No inhibit edge connects two alerts of this service.", ""]
            edges = edges_of.get(svc, [])
            if edges:
                lines += [
                    "### Edges",
                    "",
                    "| edge | pack | source matchers | target matchers | equal | reason |",
                    "|---|---|---|---|---|---|",
                ]
                for e in edges:
                    src_md = "<br>".join(f"`{_md(render(m))}`" for m in e.source_matchers)
                    dst_md = "<br>".join(f"`{_md(render(m))}`" for m in e.target_matchers)
                    lines.append(
                        f"| `{e.name}` | {e.pack} | {src_md} | {dst_md} | {_cell(e.equal)} | "
                        f"{_md(e.reason)} |"
                    )
                lines.append("")
            critical = [a for a in alerts if _critical(a)]
            if critical:
                lines += [
                    "### Coverage of critical alerts",
                    "",
                    "| alert | inhibits | inhibited by |",
                    "|---|---|---|",
                ]
                for a in critical:
                    out = ", ".join(sorted(inhibits.get(a.key, ()))) or "nothing"
                    into = ", ".join(sorted(inhibited_by.get(a.key, ()))) or "nothing"
                    lines.append(f"| {a.name} | {out} | {into} |")
                lines.append("")
        yield Artifact(
            conventions.INHIBIT_MATRIX,
            "text",
            "\n".join(lines),
            self.name,
            _all_sources(plan),
            header=False,
        )


def _critical(alert: AlertInfo) -> bool:
    return alert.severity in CRITICAL
