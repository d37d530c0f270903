"""The business SLO pack: multiwindow, multi-burn-rate alerts per ``business.sla_id``.

Blueprint section ``slo`` (a list of :class:`Slo`). For each SLO the pack records error
ratios over 5m, 30m, 1h, 2h, 6h, 1d and 3d, the burn rate per window and the error
budget left over the SLO window; alerts follow the SRE-workbook tiers (page 2 % of the
budget in 1h with a 5m short window, 5 % in 6h with 30m; ticket 10 % in 1d with 2h,
10 % in 3d with 6h) with factors computed from the window (see windows.py). Page alerts
inhibit ticket alerts of the same SLA and SLO through an inhibit edge.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from obs_iac import conventions
from obs_iac.conventions import SloRecords
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.labels import SLA_ID, LabelNaming
from obs_iac.packs.slo.models import (
    DEFAULT_ALERTS,
    STANDARD_WINDOWS,
    BurnAlert,
    ErrorRatioSli,
    FreshnessSli,
    LatencySli,
    Series,
    Slo,
    SloSection,
    ThroughputSli,
)
from obs_iac.packs.slo.rules import SloContext, alert_rules, is_event_sli, recording_rules
from obs_iac.packs.slo.windows import RECORDED_WINDOWS, number, seconds, threshold
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plan.model import (
    AlertRule,
    DashboardRow,
    InhibitEdge,
    Matcher,
    MetricSpec,
    MetricType,
    Panel,
    PanelQuery,
    RecordingRule,
    RuleGroup,
)
from obs_iac.plugins import Contribution, Pack, PackContext

PACK = "slo"

__all__ = [
    "DEFAULT_ALERTS",
    "BurnAlert",
    "ErrorRatioSli",
    "FreshnessSli",
    "LatencySli",
    "Series",
    "Slo",
    "SloPack",
    "ThroughputSli",
]


class _Checker:
    """Collects located diagnostics for one service's SLOs."""

    def __init__(self, service: ServiceBlueprint, naming: LabelNaming) -> None:
        self.service = service
        self.naming = naming
        self.problems: list[Diagnostic] = []
        self.names: list[str] = []

    def error(self, code: str, message: str, hint: str, *path: str | int) -> None:
        self.problems.append(
            Diagnostic(
                f"slo/{code}",
                Severity.ERROR,
                message,
                hint=hint,
                location=self.service.location("slo", *path),
                object_path=(self.service.name, f"slo {self._name(path[0] if path else None)}"),
                origin=PACK,
            )
        )

    def _name(self, index: str | int | None) -> str:
        if isinstance(index, int) and index < len(self.names):
            return self.names[index]
        return "?"

    def series(
        self,
        index: int,
        slo: Slo,
        field: str,
        series: Series,
        want: str,
        own: dict[str, str] | None = None,
    ) -> None:
        where = (index, "sli", field)
        sla = self.naming.prom(SLA_ID)
        if series.type != want:
            hint = {
                "histogram": "a latency SLI needs a histogram (…_bucket with `le`); for a "
                "precomputed ratio use an error_ratio SLI",
                "counter": "rate() only means something on a counter",
                "gauge": "freshness reads a gauge holding the Unix time of the last success "
                "(e.g. *_last_success_timestamp_seconds)",
            }[want]
            self.error(
                "series-type",
                f"slo[{index}] {slo.name}: {series.name} is declared as a {series.type}, "
                f"but a {slo.sli.kind} SLI needs a {want}",
                hint,
                *where,
                "type",
            )
        if sla not in series.labels:
            self.error(
                "missing-sla-label",
                f"slo[{index}] {slo.name}: {series.name} does not carry {sla}, so it "
                "cannot be selected per SLA",
                f"add {sla!r} to its labels (and make the instrumentation set it, e.g. from "
                "the pod label business.sla_id)",
                *where,
                "labels",
            )
        for key in sorted({*slo.sli.matchers, *(own or {})}):
            if key not in series.labels:
                self.error(
                    "unknown-matcher-label",
                    f"slo[{index}] {slo.name}: matcher label {key!r} is not among the labels "
                    f"declared for {series.name}",
                    f"declared labels: {', '.join(series.labels)}",
                    index,
                    "sli",
                    "matchers",
                )

    def check(self, slos: tuple[Slo, ...]) -> None:
        self.names = [slo.name for slo in slos]
        seen: dict[str, int] = {}
        declared: dict[str, tuple[int, Series]] = {}
        for index, slo in enumerate(slos):
            if slo.name in seen:
                self.error(
                    "duplicate",
                    f"slo[{index}]: SLO name {slo.name!r} is already used by slo[{seen[slo.name]}]",
                    "SLO names are the `slo` label; make them unique per service",
                    index,
                    "name",
                )
            seen.setdefault(slo.name, index)
            self._window(index, slo)
            self._sli(index, slo)
            self._tiers(index, slo)
            for _field, series in _declared_series(slo):
                first = declared.get(series.name)
                if first is not None and first[1] != series:
                    self.error(
                        "series-conflict",
                        f"slo[{index}] {slo.name}: {series.name} is declared differently "
                        f"than in slo[{first[0]}]",
                        "declare the series once (a variable) and reuse it",
                        index,
                        "sli",
                    )
                declared.setdefault(series.name, (index, series))

    def _window(self, index: int, slo: Slo) -> None:
        if slo.window not in STANDARD_WINDOWS and not slo.allow_nonstandard_window:
            self.error(
                "window",
                f"slo[{index}] {slo.name}: window {slo.window!r} is not 28d or 30d",
                "use 28d or 30d (the windows the standard burn-rate tiers were designed "
                "for), or set allow_nonstandard_window=True to scale the factors to it",
                index,
                "window",
            )
        longest = max((a.long_window for a in slo.alerts), key=seconds, default="1h")
        if seconds(slo.window) <= seconds(longest):
            self.error(
                "window",
                f"slo[{index}] {slo.name}: window {slo.window} is not longer than the "
                f"{longest} alert window",
                "the SLO window must be longer than every burn-rate window",
                index,
                "window",
            )

    def _sli(self, index: int, slo: Slo) -> None:
        sli = slo.sli
        if isinstance(sli, LatencySli):
            self.series(index, slo, "histogram", sli.histogram, "histogram")
            if sli.histogram.type == "histogram":
                if not sli.histogram.buckets:
                    self.error(
                        "buckets",
                        f"slo[{index}] {slo.name}: the buckets of {sli.histogram.name} are "
                        "not declared",
                        "list the histogram's bucket bounds (its `le` values) in buckets=",
                        index,
                        "sli",
                        "histogram",
                    )
                elif sli.threshold_seconds not in sli.histogram.buckets:
                    bound = sli.threshold_seconds
                    below = [b for b in sli.histogram.buckets if b < bound][-1:]
                    above = [b for b in sli.histogram.buckets if b > bound][:1]
                    near = [*below, *above]
                    self.error(
                        "threshold-not-bucket",
                        f"slo[{index}] {slo.name}: threshold {number(sli.threshold_seconds)}s "
                        f"is not a bucket of {sli.histogram.name}",
                        "a classic histogram only counts requests at its bucket bounds, so "
                        "anything else would need interpolation (an estimate, not a count); "
                        f"use {' or '.join(number(b) for b in sorted(near))} or add the bucket",
                        index,
                        "sli",
                        "threshold_seconds",
                    )
        elif isinstance(sli, ErrorRatioSli):
            self.series(index, slo, "total", sli.total, "counter")
            other_field = "good" if sli.good is not None else "bad"
            other = sli.good or sli.bad
            assert other is not None
            own = sli.good_matchers if sli.good is not None else sli.bad_matchers
            self.series(index, slo, other_field, other, "counter", own)
            if other.labels != sli.total.labels:
                only_other = sorted(set(other.labels) - set(sli.total.labels))
                only_total = sorted(set(sli.total.labels) - set(other.labels))
                self.error(
                    "label-mismatch",
                    f"slo[{index}] {slo.name}: {other_field} ({other.name}) and total "
                    f"({sli.total.name}) carry different labels",
                    f"only on {other_field}: {', '.join(only_other) or '-'}; only on total: "
                    f"{', '.join(only_total) or '-'}; the two must count the same events, "
                    "from the same instrumentation",
                    index,
                    "sli",
                    other_field,
                    "labels",
                )
        elif isinstance(sli, FreshnessSli):
            self.series(index, slo, "last_success", sli.last_success, "gauge")
        else:
            self.series(index, slo, "counter", sli.counter, "counter")

    def _tiers(self, index: int, slo: Slo) -> None:
        for number_, alert in enumerate(slo.alerts):
            limit = threshold(slo.objective, alert.budget_percent, slo.window, alert.long_window)
            if limit >= 1:
                self.error(
                    "unreachable-tier",
                    f"slo[{index}] {slo.name}: the {alert.tier} {alert.long_window} alert "
                    f"needs an error ratio above {number(limit)}, which can never happen",
                    "lower budget_percent, use a longer long_window, or raise the objective",
                    index,
                    "alerts",
                    number_,
                )
            if not is_event_sli(slo) and alert.min_events is not None:
                self.error(
                    "guard-not-applicable",
                    f"slo[{index}] {slo.name}: min_events is a traffic guard for event SLIs; "
                    f"a {slo.sli.kind} SLI counts evaluations, not events",
                    "drop min_events from this alert",
                    index,
                    "alerts",
                    number_,
                )


def _declared_series(slo: Slo) -> list[tuple[str, Series]]:
    sli = slo.sli
    if isinstance(sli, LatencySli):
        return [("histogram", sli.histogram)]
    if isinstance(sli, ErrorRatioSli):
        out = [("total", sli.total)]
        if sli.good is not None:
            out.append(("good", sli.good))
        if sli.bad is not None:
            out.append(("bad", sli.bad))
        return out
    if isinstance(sli, FreshnessSli):
        return [("last_success", sli.last_success)]
    return [("counter", sli.counter)]


def catalogue_entries(series: Series) -> list[MetricSpec]:
    """The series a declared metric puts in the catalogue (a histogram is three)."""
    source = "blueprint"
    if series.type == "histogram":
        return [
            MetricSpec(
                name=f"{series.name}_bucket",
                type=MetricType.HISTOGRAM,
                unit=series.unit,
                labels=tuple(sorted((*series.labels, "le"))),
                source=source,
                help=series.help,
            ),
            MetricSpec(
                name=f"{series.name}_count",
                type=MetricType.COUNTER,
                unit="events",
                labels=series.labels,
                source=source,
                help=series.help,
            ),
            MetricSpec(
                name=f"{series.name}_sum",
                type=MetricType.COUNTER,
                unit=series.unit,
                labels=series.labels,
                source=source,
                help=series.help,
            ),
        ]
    return [
        MetricSpec(
            name=series.name,
            type=MetricType(series.type),
            unit=series.unit,
            labels=series.labels,
            source=source,
            help=series.help,
        )
    ]


class SloPack(Pack):
    name: ClassVar[str] = PACK
    description: ClassVar[str] = (
        "Business SLOs per business.sla_id: error-ratio and burn-rate recording rules, "
        "multiwindow multi-burn-rate alerts with promtool tests, page-inhibits-ticket edge, "
        "business dashboard row."
    )
    sections: ClassVar[dict[str, type[BaseModel]]] = {"slo": SloSection}

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        out = Contribution()
        section = service.section("slo")
        if section is None:
            return out
        assert isinstance(section, SloSection)
        slos = section.root
        checker = _Checker(service, ctx.naming)
        checker.check(slos)
        if checker.problems:
            out.diagnostics.extend(checker.problems)
            return out
        svc = service.service
        rules: list[RecordingRule] = []
        alerts: list[AlertRule] = []
        sla_label = ctx.naming.prom(SLA_ID)
        for slo in slos:
            sctx = SloContext(slo=slo, sla_id=svc.sla_id, naming=ctx.naming)
            records = recording_rules(sctx)
            rules.extend(records)
            alerts.extend(alert_rules(sctx, svc.team, svc.name, svc.runbook_base_url))
            for _field, series in _declared_series(slo):
                out.metrics.extend(catalogue_entries(series))
            for record in records:
                out.metrics.append(
                    MetricSpec(
                        name=record.record,
                        type=MetricType.GAUGE,
                        unit=_record_unit(record.record),
                        labels=tuple(sorted((sla_label, "slo"))),
                        source="recording",
                        help=f"Recorded by the {PACK} pack.",
                    )
                )
        if not slos:
            return out
        out.rule_groups.append(
            RuleGroup(
                name=conventions.rule_group(service.name, PACK),
                service=service.name,
                pack=PACK,
                rules=(*rules, *alerts),
                source=service.source,
            )
        )
        out.inhibit_edges.append(self._inhibit_edge(service, ctx.naming))
        out.dashboard_rows.append(self._dashboard_row(service, slos, ctx.naming))
        return out

    @staticmethod
    def _inhibit_edge(service: ServiceBlueprint, naming: LabelNaming) -> InhibitEdge:
        sla = naming.prom(SLA_ID)
        scope = Matcher(name=sla, value=service.service.sla_id)
        return InhibitEdge(
            name="slo-page-inhibits-ticket",
            service=service.name,
            pack=PACK,
            reason="a page-tier burn alert already covers the slower ticket-tier alerts of "
            "the same SLA and SLO",
            source_matchers=(scope, Matcher(name="slo_tier", value="page")),
            target_matchers=(scope, Matcher(name="slo_tier", value="ticket")),
            equal=(sla, "slo"),
            source=service.source,
        )

    @staticmethod
    def _dashboard_row(
        service: ServiceBlueprint, slos: tuple[Slo, ...], naming: LabelNaming
    ) -> DashboardRow:
        sla = service.service.sla_id
        panels: list[Panel] = []
        for slo in slos:
            sctx = SloContext(slo=slo, sla_id=sla, naming=naming)
            ref = "ABCDEFGHIJ"
            panels.append(
                Panel(
                    key=f"slo-{slo.name}-sli",
                    title=f"{slo.name}: SLI against objective",
                    kind="timeseries",
                    unit="percentunit",
                    description=f"Share of good {_sli_noun(slo)} over the last hour, against "
                    f"the {number(slo.objective)} % objective.",
                    # 9 + 9 + 6 columns: one SLO's three panels fill one line.
                    width=9,
                    queries=(
                        PanelQuery(
                            expr=f"1 - {sctx.record_selector(SloRecords.error_ratio('1h'))}",
                            legend="SLI (1h)",
                            ref_id="A",
                        ),
                        PanelQuery(
                            expr=sctx.record_selector(SloRecords.OBJECTIVE),
                            legend="objective",
                            ref_id="B",
                        ),
                    ),
                )
            )
            panels.append(
                Panel(
                    key=f"slo-{slo.name}-burn-rate",
                    title=f"{slo.name}: burn rate per window",
                    kind="timeseries",
                    unit="none",
                    description="Error-budget burn rate (1 = spending exactly the budget "
                    f"over {slo.window}); the alert tiers fire above their factors.",
                    width=9,
                    queries=tuple(
                        PanelQuery(
                            expr=sctx.record_selector(SloRecords.burn_rate(window)),
                            legend=window,
                            ref_id=ref[i],
                        )
                        for i, window in enumerate(RECORDED_WINDOWS)
                    ),
                )
            )
            panels.append(
                Panel(
                    key=f"slo-{slo.name}-budget",
                    title=f"{slo.name}: error budget remaining ({slo.window})",
                    kind="stat",
                    unit="percentunit",
                    description="Share of the error budget not yet spent over the SLO window; "
                    "negative means the SLO is missed.",
                    queries=(
                        PanelQuery(
                            expr=sctx.record_selector(SloRecords.budget_remaining(slo.window)),
                            legend="remaining",
                        ),
                    ),
                    width=6,
                )
            )
        return DashboardRow(
            service=service.name,
            layer="business",
            title="Business SLOs",
            pack=PACK,
            panels=tuple(panels),
        )


def _sli_noun(slo: Slo) -> str:
    if isinstance(slo.sli, FreshnessSli | ThroughputSli):
        return "evaluations"
    return "events"


def _record_unit(record: str) -> str:
    operation = record.rsplit(":", 1)[1]
    if operation.startswith("rate"):
        return "events_per_second"
    if operation == "bool":
        return "bool"
    return "ratio"
