"""The inhibit pack: built-in GPU inhibit edges, a node-down alert to anchor them, and the
``inhibitions`` blueprint section (add / override / disable edges by name).

Every edge is scoped to one service on both sides (``service="<name>"``), so one
service's edge can never mute another service's alerts. Blueprint mistakes found here
(unknown alert, bad regex, unknown label) are errors with the blueprint line; the
static checks of any pack's edges live in ``obs_iac.packs.inhibit.lint``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from obs_iac import conventions
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.labels import GPU_ID, HOST, KEYS_BY_NAME, SLA_ID, LabelNaming, NamingStrategy
from obs_iac.packs.gpu import GPU_TEMP, template_label
from obs_iac.packs.inhibit.analysis import AlertIndex
from obs_iac.packs.inhibit.matchers import (
    MatcherSyntaxError,
    alternation,
    literal_values,
    parse_matcher,
    regex_error,
)
from obs_iac.packs.inhibit.model import EdgeOverride, EdgeSpec, Inhibitions
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plan.model import (
    AlertRule,
    AlertTestCase,
    InhibitEdge,
    Matcher,
    MetricSpec,
    MetricType,
    RuleGroup,
    SourceRef,
)
from obs_iac.plugins import Contribution, Pack, PackContext

PACK = "inhibit"
SECTION = "inhibitions"
NOTES = "inhibit/notes"  # plan.extensions key: warnings found while expanding

NODE_DOWN = "GpuNodeDown"
GPU_HOT = "GpuTemperatureHigh"
GPU_UTIL_LOW = "GpuUtilizationLow"
GPU_FAULTS = ("GpuRowRemapFailure", "GpuUncorrectableEccErrors", "GpuXidError")

# How far back a down exporter's GPUs are still attributed to it. Past this the alert
# resolves: by then Kubernetes has usually removed the endpoint and `up` is gone too.
NODE_LOOKBACK = "10m"


class InhibitSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    exporter_job: str = Field(
        default="dcgm-exporter",
        pattern=r"^[A-Za-z0-9_.:/-]+$",
        description="The `job` label of the dcgm-exporter scrape (for GpuNodeDown).",
    )
    node_down_alert: bool = Field(
        default=True, description="Generate GpuNodeDown and the edge it anchors."
    )
    builtin_edges: bool = Field(default=True, description="Contribute the built-in GPU edges.")


class InhibitPack(Pack):
    name: ClassVar[str] = PACK
    description: ClassVar[str] = (
        "GPU inhibit edges (over-temperature, hardware fault, node down) and the "
        "`inhibitions` blueprint section."
    )
    sections: ClassVar[dict[str, type[BaseModel]]] = {SECTION: Inhibitions}
    config_model: ClassVar[type[BaseModel]] = InhibitSettings

    def metrics(self, ctx: PackContext) -> Iterable[MetricSpec]:
        # `up` is synthetic: metric_relabel_configs never touch it, so it carries only
        # target labels (job, instance and whatever service discovery adds).
        return (
            MetricSpec(
                name="up",
                type=MetricType.GAUGE,
                unit="bool",
                labels=("instance", "job"),
                source="scrape",
                help="1 if the last scrape of the target succeeded.",
            ),
        )

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        settings = ctx.settings
        assert isinstance(settings, InhibitSettings)
        out = Contribution()
        if settings.node_down_alert:
            out.rule_groups.append(
                RuleGroup(
                    name=conventions.rule_group(service.name, PACK),
                    service=service.name,
                    pack=PACK,
                    rules=(node_down_alert(service, ctx.naming, settings.exporter_job),),
                    source=service.source,
                )
            )
        return out

    def finalize(
        self, service: ServiceBlueprint, draft: Contribution, ctx: PackContext
    ) -> Contribution:
        settings = ctx.settings
        assert isinstance(settings, InhibitSettings)
        out = Contribution()
        own = [e for e in draft.inhibit_edges if e.service == service.name]
        builtin = builtin_edges(service, draft, ctx.naming) if settings.builtin_edges else []
        section = service.section(SECTION)
        if not isinstance(section, Inhibitions):
            out.inhibit_edges.extend(builtin)
            return out
        editor = _Editor(service, draft, ctx.naming)
        edges = {e.name: e for e in [*own, *builtin]}
        changed = editor.apply(section, edges)
        out.diagnostics.extend(d for d in editor.problems if d.severity is Severity.ERROR)
        if editor.notes:
            out.extensions[NOTES] = editor.notes
        # Overrides and disables reach edges other packs already put in the draft; the
        # Contribution API only appends, so those are taken out of the draft here.
        replaced = {e.name for e in own}
        if changed & replaced:
            draft.inhibit_edges[:] = [
                e
                for e in draft.inhibit_edges
                if not (e.service == service.name and e.name in changed)
            ]
        keep_from_draft = replaced - changed
        out.inhibit_edges.extend(
            e for name, e in sorted(edges.items()) if name not in keep_from_draft
        )
        return out


def _scoped(
    service: str, names: Sequence[str], extra: Sequence[Matcher] = ()
) -> tuple[Matcher, ...]:
    alert = alternation(names)
    head = [alert] if alert is not None else []
    return (*head, *extra, Matcher(name="service", value=service))


def builtin_edges(
    service: ServiceBlueprint, draft: Contribution, naming: LabelNaming
) -> list[InhibitEdge]:
    """The GPU edges, limited to the alerts this service actually has."""
    gpu = sorted(
        {
            r.alert
            for g in draft.rule_groups
            if g.service == service.name and g.pack == "gpu"
            for r in g.rules
            if isinstance(r, AlertRule)
        }
    )
    names = {a.alert for a in draft.alerts()}
    per_gpu = (naming.prom(SLA_ID), naming.prom(HOST), naming.prom(GPU_ID))
    per_host = (naming.prom(SLA_ID), naming.prom(HOST))
    edges: list[InhibitEdge] = []

    def edge(
        name: str, reason: str, src: Sequence[str], dst: Sequence[str], eq: Sequence[str]
    ) -> None:
        if not src or not dst:
            return
        edges.append(
            InhibitEdge(
                name=name,
                service=service.name,
                pack=PACK,
                reason=reason,
                source_matchers=_scoped(service.name, src),
                target_matchers=_scoped(service.name, dst),
                equal=tuple(sorted(eq)),
                source=service.source,
            )
        )

    if GPU_HOT in names and GPU_UTIL_LOW in names:
        edge(
            "gpu-hot-mutes-util-low",
            "A GPU above its temperature limit throttles its clocks; low utilisation on "
            "that GPU is a symptom of the heat, not a separate problem.",
            [GPU_HOT],
            [GPU_UTIL_LOW],
            per_gpu,
        )
    faults = [n for n in GPU_FAULTS if n in names]
    # Fault alerts never mute each other: every one needs its own RMA decision, and a
    # fault on both sides would let an alert inhibit its own kind.
    symptoms = [n for n in gpu if n not in GPU_FAULTS]
    edge(
        "gpu-fault-mutes-gpu-symptoms",
        "An XID error, failed row remap or uncorrectable ECC error means the GPU itself "
        "is broken; its temperature, utilisation and NVLink alerts follow from that.",
        faults,
        symptoms,
        per_gpu,
    )
    if NODE_DOWN in names:
        edge(
            "gpu-node-down-mutes-gpu-alerts",
            "While a node's dcgm-exporter cannot be scraped, every GPU alert of that node "
            "is stale or a consequence of the outage.",
            [NODE_DOWN],
            gpu,
            per_host,
        )
    return edges


def node_down_alert(service: ServiceBlueprint, naming: LabelNaming, job: str) -> AlertRule:
    """The exporter target of a node is down while it served this SLA's GPUs.

    ``up`` is the only signal of a failed scrape, but it carries target labels only
    (metric relabelling never applies to it), so no host or SLA. The GPU series of the
    same target do carry them after relabelling; joining on ``instance`` against their
    last values attributes the outage to a host and an SLA.
    """
    svc = service.service
    sla, host = naming.promql(SLA_ID), naming.promql(HOST)
    sel = "{" + naming.matcher(SLA_ID, svc.sla_id) + "}"
    expr = (
        f"max by ({sla}, {host}, instance) (last_over_time({GPU_TEMP}{sel}[{NODE_LOOKBACK}]))\n"
        f'and on (instance)\n(up{{job="{job}"}} == 0)'
    )
    where = template_label(naming.prom(HOST))
    target = {"job": job, "instance": "10.0.0.1:9400"}
    gpu_series = {
        "job": job,
        "instance": "10.0.0.1:9400",
        naming.prom(SLA_ID): svc.sla_id,
        naming.prom(HOST): "gpu-node-1",
        naming.prom(GPU_ID): "nvidia0",
    }

    def series(metric: str, labels: dict[str, str]) -> str:
        inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        return f"{metric}{{{inner}}}"

    expected = {
        naming.prom(SLA_ID): svc.sla_id,
        naming.prom(HOST): "gpu-node-1",
        "instance": "10.0.0.1:9400",
    }
    return AlertRule(
        alert=NODE_DOWN,
        expr=expr,
        **{"for": "2m"},
        labels={
            "layer": "hardware",
            "service": svc.name,
            "severity": "critical",
            "team": svc.team,
        },
        annotations={
            "description": f"Prometheus cannot scrape the dcgm-exporter on {where}, which "
            f"served GPUs of SLA {svc.sla_id}; the node may be down or partitioned. Its "
            "GPU alerts are inhibited while this fires.",
            "runbook_url": conventions.runbook_url(svc.runbook_base_url, NODE_DOWN),
            "summary": f"GPU node {where} is unreachable",
        },
        tests=(
            AlertTestCase(
                name="exporter down after serving GPUs fires",
                input_series=(
                    (series(GPU_TEMP, gpu_series), "60 60 60 _ _ _ _ _ _ _"),
                    (series("up", target), "1 1 1 0 0 0 0 0 0 0"),
                ),
                eval_time="7m",
                expect_firing=True,
                exp_labels=expected,
            ),
            AlertTestCase(
                name="healthy exporter does not fire",
                input_series=(
                    (series(GPU_TEMP, gpu_series), "60x9"),
                    (series("up", target), "1x9"),
                ),
                eval_time="7m",
                expect_firing=False,
            ),
        ),
    )


class _Editor:
    """Applies one blueprint's ``inhibitions`` section, collecting located problems."""

    def __init__(self, service: ServiceBlueprint, draft: Contribution, naming: LabelNaming):
        self.service = service
        self.naming = naming
        self.index = AlertIndex(
            draft.metrics, [g for g in draft.rule_groups if g.service == service.name]
        )
        self.alert_names = sorted(self.index.names)
        labels: set[str] = {"alertname"}
        for alert in self.index.alerts:
            labels |= alert.all_labels()
        for metric in draft.metrics:
            labels |= set(metric.labels)
        self.known_labels = frozenset(labels)
        self.problems: list[Diagnostic] = []
        self.notes: list[dict[str, Any]] = []

    def _error(self, message: str, hint: str, path: Sequence[str | int]) -> None:
        self.problems.append(
            Diagnostic(
                "inhibit/blueprint",
                Severity.ERROR,
                message,
                hint=hint,
                location=self.service.location(SECTION, *path),
                object_path=(self.service.name, SECTION, *(str(p) for p in path)),
                origin=PACK,
            )
        )

    def _note(self, message: str, hint: str, path: Sequence[str | int], edge: str) -> None:
        loc = self.service.location(SECTION, *path)
        self.notes.append(
            {
                "code": "inhibit/dotted-label",
                "message": message,
                "hint": hint,
                "file": loc.file,
                "line": loc.line,
                "column": loc.column,
                "service": self.service.name,
                "edge": edge,
            }
        )

    def apply(self, section: Inhibitions, edges: dict[str, InhibitEdge]) -> set[str]:
        changed: set[str] = set()
        for i, dis in enumerate(section.disable):
            if self._exists(dis.name, edges, ("disable", i, "name")):
                del edges[dis.name]
                changed.add(dis.name)
        for i, ov in enumerate(section.override):
            if self._exists(ov.name, edges, ("override", i, "name")):
                edges[ov.name] = self._override(edges[ov.name], ov, ("override", i))
                changed.add(ov.name)
        for i, spec in enumerate(section.add):
            if spec.name in edges:
                self._error(
                    f"inhibitions.add[{i}]: an edge named {spec.name!r} already exists "
                    f"(from pack {edges[spec.name].pack!r})",
                    "use `override` to change it, or pick another name",
                    ("add", i, "name"),
                )
                continue
            edges[spec.name] = self._new(spec, ("add", i))
            changed.add(spec.name)
        return changed

    def _exists(self, name: str, edges: dict[str, InhibitEdge], path: Sequence[str | int]) -> bool:
        if name in edges:
            return True
        close = difflib.get_close_matches(name, sorted(edges), n=1)
        self._error(
            f"inhibitions.{path[0]}[{path[1]}]: no inhibit edge named {name!r} for "
            f"service {self.service.name!r}",
            (f"did you mean {close[0]!r}? " if close else "")
            + f"edges: {', '.join(sorted(edges)) or 'none'}",
            path,
        )
        return False

    def _where(self, path: Sequence[str | int]) -> SourceRef:
        loc = self.service.location(SECTION, *path)
        return SourceRef(file=loc.file, line=loc.line)

    def _side(
        self,
        alerts: Sequence[str],
        matchers: Sequence[str],
        path: Sequence[str | int],
        side: str,
    ) -> tuple[Matcher, ...]:
        for j, name in enumerate(alerts):
            if name not in self.index.names:
                close = difflib.get_close_matches(name, self.alert_names, n=3)
                self._error(
                    f"{side}_alerts[{j}]: service {self.service.name!r} has no alert {name!r}",
                    (f"did you mean {', '.join(repr(c) for c in close)}? " if close else "")
                    + f"alerts: {', '.join(self.alert_names)}",
                    (*path, f"{side}_alerts", j),
                )
        parsed = []
        for j, text in enumerate(matchers):
            where = (*path, f"{side}_matchers", j)
            try:
                matcher = parse_matcher(text)
            except MatcherSyntaxError as exc:
                self._error(f"{side}_matchers[{j}]: {exc}", 'e.g. layer="hardware"', where)
                continue
            spelled = self._label(matcher.name, where, f"{side}_matchers[{j}]")
            if spelled is None:
                continue
            if matcher.op in ("=~", "!~"):
                err = regex_error(matcher.value)
                if err is not None:
                    self._error(
                        f"{side}_matchers[{j}]: invalid regex {matcher.value!r}: {err}",
                        "Alertmanager uses Go RE2 syntax, anchored at both ends",
                        where,
                    )
                    continue
            if spelled == "service":
                self._error(
                    f"{side}_matchers[{j}]: edges are always scoped to service "
                    f"{self.service.name!r}; a service matcher is not allowed",
                    "remove it; declare cross-service edges in the owning pack",
                    where,
                )
                continue
            parsed.append(matcher.model_copy(update={"name": spelled}))
        return _scoped(self.service.name, alerts, parsed)

    def _label(self, name: str, where: Sequence[str | int], what: str) -> str | None:
        """The label as spelled in Alertmanager, or None (with an error) when unknown."""
        spelled = name
        key = KEYS_BY_NAME.get(name)
        if key is not None and self.naming.strategy is NamingStrategy.CLASSIC:
            spelled = self.naming.prom(name)
            edge = str(where[1]) if len(where) > 1 else ""
            self._note(
                f"{what}: {name!r} is the dotted canonical key; under classic naming "
                f"alerts carry it as {spelled!r}, so obs-iac uses {spelled!r}",
                f"write {spelled!r} to silence this warning",
                where,
                edge,
            )
        if spelled not in self.known_labels:
            close = difflib.get_close_matches(spelled, sorted(self.known_labels), n=3)
            self._error(
                f"{what}: no alert of service {self.service.name!r} carries a label {spelled!r}",
                (f"did you mean {', '.join(repr(c) for c in close)}? " if close else "")
                + "an absent label matches as the empty value, so such an edge would "
                "inhibit far more than intended",
                where,
            )
            return None
        return spelled

    def _equal(self, equal: Sequence[str], path: Sequence[str | int]) -> tuple[str, ...]:
        out = []
        for j, name in enumerate(equal):
            spelled = self._label(name, (*path, "equal", j), f"equal[{j}]")
            if spelled is not None:
                out.append(spelled)
        return tuple(sorted(set(out)))

    def _new(self, spec: EdgeSpec, path: tuple[str, int]) -> InhibitEdge:
        return InhibitEdge(
            name=spec.name,
            service=self.service.name,
            pack=PACK,
            reason=spec.reason,
            source_matchers=self._side(spec.source_alerts, spec.source_matchers, path, "source"),
            target_matchers=self._side(spec.target_alerts, spec.target_matchers, path, "target"),
            equal=self._equal(spec.equal, path),
            source=self._where(path),
        )

    def _override(self, edge: InhibitEdge, ov: EdgeOverride, path: tuple[str, int]) -> InhibitEdge:
        update: dict[str, Any] = {"reason": ov.reason, "source": self._where(path)}
        for side in ("source", "target"):
            alerts: tuple[str, ...] | None = getattr(ov, f"{side}_alerts")
            extra: tuple[str, ...] | None = getattr(ov, f"{side}_matchers")
            if alerts is None and extra is None:
                continue
            if alerts is None:
                current = [m for m in getattr(edge, f"{side}_matchers") if m.name == "alertname"]
                kept: list[str] = []
                for m in current:
                    values = literal_values(m)
                    if values is None:
                        self._error(
                            f"inhibitions.override[{path[1]}]: edge {edge.name!r} selects "
                            f"its {side} alerts with {m.op}{m.value!r}, which cannot be kept "
                            f"when only {side}_matchers change",
                            f"give {side}_alerts explicitly",
                            (*path, f"{side}_matchers"),
                        )
                    kept.extend(sorted(values or ()))
                alerts = tuple(kept)
            update[f"{side}_matchers"] = self._side(alerts, extra or (), path, side)
        if ov.equal is not None:
            update["equal"] = self._equal(ov.equal, path)
        return edge.model_copy(update=update)


__all__ = ["InhibitPack", "InhibitSettings", "builtin_edges", "node_down_alert"]
