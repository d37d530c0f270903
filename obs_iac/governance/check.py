"""`obs-iac check`: the four conformance dimensions per service, plus the compatibility
matrix, judged from the plan, the rendered artifacts and the lint findings."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from obs_iac import promql
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.governance import compat
from obs_iac.governance.compat import CompatRow, Verdict
from obs_iac.governance.pack import PACK, GovernanceSettings
from obs_iac.governance.stack import stack
from obs_iac.governance.workloads import apply_waivers, profile, signal_slos
from obs_iac.labels import GPU_ID, KEYS_BY_NAME, SLA_ID, LabelNaming
from obs_iac.packs.inhibit.analysis import AlertIndex
from obs_iac.pipeline import Render, Workspace, open_workspace, render
from obs_iac.plan.model import AlertRule, Matcher, Plan, RecordingRule, RelabelRule, ServicePlan
from obs_iac.plugins import discover, plugin_settings

DIMENSIONS = ("collection", "labels", "storage", "alerting", "compatibility")


@dataclass(frozen=True, slots=True)
class Check:
    """One service in one dimension: failures say what is wrong, evidence what was proved,
    waived what failed but the blueprint accepts (``waive=``), with the reason."""

    service: str
    dimension: str
    failures: tuple[str, ...]
    evidence: tuple[str, ...]
    waived: tuple[str, ...] = ()
    # The requirement code of each failure, in order: what ``waive=`` names.
    codes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass(frozen=True, slots=True)
class Governance:
    """Everything check and score read: the render, the settings and the matrix."""

    workspace: Workspace
    result: Render
    settings: GovernanceSettings
    matrix: tuple[CompatRow, ...]
    verdicts: dict[str, tuple[Verdict, ...]] = field(default_factory=dict)
    # The date waivers expire against (injectable for tests).
    today: dt.date = field(default_factory=dt.date.today)

    @property
    def plan(self) -> Plan:
        return self.result.plan

    @property
    def naming(self) -> LabelNaming:
        return LabelNaming(self.plan.naming)

    def findings_for(self, service: str, prefix: str) -> list[Diagnostic]:
        return [
            f
            for f in self.result.findings
            if f.code.startswith(prefix)
            and f.severity == Severity.ERROR
            and f.object_path[:1] == (service,)
        ]


def load(root: Path, today: dt.date | None = None) -> Governance:
    ws = open_workspace(root)
    plugins = discover(ws.config)
    packs = [p for p in plugins.packs if p.name == PACK]
    settings = (
        plugin_settings(packs[0], ws.config.packs, "packs") if packs else GovernanceSettings()
    )
    assert isinstance(settings, GovernanceSettings)
    matrix = compat.load(ws.root, settings.compatibility)
    result = render(ws, plugins)
    verdicts = {
        svc.name: compat.evaluate(
            stack(result.plan, svc, result.artifacts, ws.config, settings), matrix
        )
        for svc in result.plan.services
    }
    return Governance(ws, result, settings, matrix, verdicts, today or dt.date.today())


# --- shared readings of the plan ---------------------------------------------------------


def service_queries(plan: Plan, svc: str) -> Iterator[tuple[str, str, str]]:
    """(owner, datasource, expr) for every expression of one service's rules and panels."""
    for group in plan.rule_groups:
        if group.service != svc:
            continue
        for rule in group.rules:
            owner = (
                f"alert {rule.alert}"
                if isinstance(rule, AlertRule)
                else f"recording rule {rule.record}"
            )
            yield owner, "prometheus", rule.expr
    for row in plan.dashboard_rows:
        if row.service != svc:
            continue
        for panel in row.panels:
            for query in panel.queries:
                yield f"panel {panel.key}", query.datasource, query.expr
    for pipeline in plan.log_pipelines:
        if pipeline.service == svc:
            for alert in pipeline.alerts:
                yield f"log alert {alert.alert}", "loki", alert.expr


def service_alerts(plan: Plan, svc: str) -> list[tuple[str, AlertRule]]:
    return [
        (g.pack, r)
        for g in plan.rule_groups
        if g.service == svc
        for r in g.rules
        if isinstance(r, AlertRule)
    ]


def wiring(plan: Plan, svc: str) -> str | None:
    """The OpenTelemetry connector wired for the service (the framework pack's extension)."""
    for item in plan.extensions.get("framework/otel-wiring", ()):
        data = item if isinstance(item, dict) else getattr(item, "__dict__", {})
        if data.get("service") == svc:
            return str(data.get("connector_id") or "otel-wiring")
    return None


def matcher_hits(matcher: Matcher, value: str) -> bool:
    if matcher.op == "=":
        return matcher.value == value
    if matcher.op == "!=":
        return matcher.value != value
    hit = re.fullmatch(matcher.value, value) is not None
    return hit if matcher.op == "=~" else not hit


# --- the dimensions ------------------------------------------------------------------------

Failures = list[tuple[str, str]]  # (requirement code, message)


def _finish(
    gov: Governance, svc: ServicePlan, dimension: str, failures: Failures, evidence: list[str]
) -> Check:
    """The check of one dimension, after the service's waivers."""
    left, waived = apply_waivers(svc, failures, gov.today)
    unique = list(dict.fromkeys(left))
    return Check(
        svc.name,
        dimension,
        tuple(m for _c, m in unique),
        tuple(evidence),
        tuple(waived),
        tuple(c for c, _m in unique),
    )


def check_workload_signal(gov: Governance, svc: ServicePlan) -> tuple[Failures, list[str]]:
    """The one signal that shows the service doing its job, by workload kind."""
    prof = profile(svc)
    wired = wiring(gov.plan, svc.name)
    if prof.kind == "training":
        if "framework" in svc.sections and wired is None:
            return [
                (
                    prof.requirement,
                    "framework section declared but no OpenTelemetry wiring in the plan",
                )
            ], []
        if wired is None and gov.settings.require_otel:
            return [(prof.requirement, prof.missing)], []
        if wired is None:
            return [], ["training without OpenTelemetry wiring: require_otel = false"]
        return [], [f"training workload: OpenTelemetry wiring, connector {wired}"]
    found = [str(s.get("name")) for s in signal_slos(svc)]
    sections = [name for name in prof.signal_sections if name in svc.sections]
    if not found and not sections:
        return [(prof.requirement, prof.missing)], []
    what = [f"SLO {n}" for n in found] + [f"section {n}" for n in sections]
    note = [f"{prof.kind} workload: {', '.join(what)} ({'/'.join(prof.sli_kinds)} SLIs count)"]
    if wired is not None:
        note.append(f"OpenTelemetry wiring: connector {wired} (not required for {prof.kind})")
    return [], note


def check_collection(gov: Governance, svc: ServicePlan) -> Check:
    plan = gov.plan
    failures: Failures = []
    evidence: list[str] = []
    cset = next((c for c in plan.collector_sets if c.service == svc.name), None)
    collected = {f.name for f in cset.fields} if cset else set()
    if cset is None:
        failures.append(
            ("collection/dcgm-collectors", "no DCGM collector set is declared for the service")
        )
    else:
        evidence.append(f"collector set: {len(collected)} DCGM fields")
    recorded = {r.record for g in plan.rule_groups for r in g.rules if isinstance(r, RecordingRule)}
    wired = wiring(plan, svc.name)
    signal_failures, signal_evidence = check_workload_signal(gov, svc)
    failures += signal_failures
    evidence += signal_evidence
    seen: set[str] = set()
    produced = "collection/series-produced"
    for owner, datasource, expr in service_queries(plan, svc.name):
        if datasource != "prometheus":
            continue
        for name in sorted(promql.referenced_metrics(expr)):
            if name in seen:
                continue
            spec = plan.metric(name)
            source = spec.source if spec else ("dcgm" if name.startswith("DCGM_") else None)
            if source is None:
                failures.append(
                    (produced, f"{owner} uses {name}, which no declared source produces")
                )
            elif source == "dcgm" and name not in collected:
                failures.append(
                    (
                        produced,
                        f"{owner} uses DCGM metric {name}, which the collector set does not "
                        "collect",
                    )
                )
            elif source == "recording" and name not in recorded:
                failures.append((produced, f"{owner} uses {name}, which no recording rule records"))
            elif source == "spanmetrics" and wired is None:
                failures.append(
                    (
                        produced,
                        f"{owner} uses framework series {name}, but the service has no "
                        "OpenTelemetry wiring",
                    )
                )
            else:
                seen.add(name)
    evidence.append(f"{len(seen)} series used by rules and panels, each produced")
    return _finish(gov, svc, "collection", failures, evidence)


# Realistic values of each native label, to see what relabelling turns them into.
_SAMPLES = {
    "device": ("nvidia0", "nvidia12"),
    "gpu": ("0", "7"),
    "UUID": ("GPU-8d4c1f5e-2b7a-4c1e-9f00-3a6b5c4d2e10",),
    "uuid": ("GPU-8d4c1f5e-2b7a-4c1e-9f00-3a6b5c4d2e10",),
    "pci_bus_id": ("00000000:07:00.0",),
    "Hostname": ("gpu-node-1",),
    "hostname": ("gpu-node-1",),
    "modelName": ("A100-SXM4-80GB",),
}


def _relabel(rule: RelabelRule, values: dict[str, str]) -> str | None:
    source = (rule.separator or ";").join(values.get(s, "") for s in rule.source_labels)
    match = re.fullmatch(rule.regex or "(.*)", source)
    if match is None:
        return None
    replacement = rule.replacement if rule.replacement is not None else "$1"
    return re.sub(r"\$\{?(\w+)\}?", lambda m: match.group(int(m.group(1)) or 0) or "", replacement)


def check_labels(gov: Governance, svc: ServicePlan) -> Check:
    plan, naming = gov.plan, gov.naming
    sla = naming.prom(SLA_ID)
    failures: Failures = []
    evidence: list[str] = []
    if not KEYS_BY_NAME[SLA_ID].matches(svc.sla_id):
        failures.append(
            (
                "labels/sla-id-format",
                f"sla_id {svc.sla_id!r} does not match the canonical value format",
            )
        )
    records = 0
    for group in plan.rule_groups:
        if group.service != svc.name:
            continue
        for rule in group.rules:
            if isinstance(rule, RecordingRule):
                spec = plan.metric(rule.record)
                if spec is not None and sla not in spec.labels:
                    failures.append(
                        ("labels/recording-rules", f"recording rule {rule.record} leaves out {sla}")
                    )
                else:
                    records += 1
    proven = flowed = 0
    flows = {a.key: a for a in AlertIndex.of_plan(plan).alerts}
    policy = {naming.prom(k.key): k for k in KEYS_BY_NAME.values()}
    for _pack, alert in service_alerts(plan, svc.name):
        # Test data is what the plan shows a label looks like; it must follow the policy.
        for case in alert.tests:
            for name, value in sorted(case.exp_labels.items()):
                key = policy.get(name)
                if key is not None and not key.matches(value):
                    failures.append(
                        (
                            "labels/alert-labels",
                            f"alert {alert.alert}: test {case.name!r} has {name}={value!r}, "
                            f"outside the value format {key.value_pattern}",
                        )
                    )
        firing = [t for t in alert.tests if t.expect_firing]
        wrong = [t.name for t in firing if t.exp_labels.get(sla) != svc.sla_id]
        if wrong:
            failures.append(
                (
                    "labels/alert-labels",
                    f"alert {alert.alert}: test {wrong[0]!r} fires without {sla}={svc.sla_id!r}",
                )
            )
        elif firing:
            proven += 1
        elif alert.labels.get(sla) != svc.sla_id:
            # No test shows the label: follow it through the expression (aggregations
            # included) with the inhibit pack's label flow.
            info = flows.get((svc.name, alert.alert))
            if info is None or not info.has_label(sla):
                state = info.label_state(sla) if info else "unknown"
                failures.append(
                    (
                        "labels/alert-labels",
                        f"alert {alert.alert}: no firing test proves {sla}, and its expression "
                        + ("drops it" if state == "absent" else "is not known to keep it"),
                    )
                )
            else:
                flowed += 1
    evidence.append(
        f"{records} recording rules keep {sla}; {proven} alerts proved by a firing test, "
        f"{flowed} by the label flow of their expression"
    )
    selector = re.compile(rf"{re.escape(sla)}\s*=\s*\"{re.escape(svc.sla_id)}\"")
    queries = 0
    for owner, datasource, expr in service_queries(plan, svc.name):
        if not owner.startswith(("panel ", "log alert ")):
            continue
        queries += 1
        if datasource == "prometheus":
            for sel in promql.selectors(promql.parse(expr)):
                hits = [m for m in sel.matchers.matchers if m.name == sla]
                if not any(str(m.value) == svc.sla_id for m in hits):
                    failures.append(
                        (
                            "labels/query-filters",
                            f"{owner}: selector of {promql.selector_metric(sel)} does not "
                            f"filter on {sla}={svc.sla_id!r}",
                        )
                    )
                    break
        elif not selector.search(expr):
            failures.append(
                (
                    "labels/query-filters",
                    f"{owner}: LogQL selector does not filter on {sla}={svc.sla_id!r}",
                )
            )
    evidence.append(f"{queries} panel and log-alert queries filter on {sla}")
    for rset in plan.relabel_sets:
        if rset.service != svc.name:
            continue
        for rel in rset.rules:
            key = policy.get(rel.target_label or "")
            if key is None or rel.action != "replace":
                continue
            samples = [
                {s: v for s in rel.source_labels}
                for label in rel.source_labels
                for v in _SAMPLES.get(label, (key.example,))
            ]
            for values in samples:
                out = _relabel(rel, values)
                if out is not None and not key.matches(out):
                    failures.append(
                        (
                            "labels/relabel-format",
                            f"relabel {'+'.join(rel.source_labels)} -> {rel.target_label} "
                            f"turns {next(iter(values.values()))!r} into {out!r}, outside the "
                            f"value format {key.value_pattern} (e.g. {key.example!r})",
                        )
                    )
                    break
            else:
                if key.key == GPU_ID:
                    evidence.append(
                        f"{rel.target_label} from {'+'.join(rel.source_labels)} keeps the "
                        f"format {key.value_pattern}"
                    )
    return _finish(gov, svc, "labels", failures, evidence)


def check_storage(gov: Governance, svc: ServicePlan) -> Check:
    plan = gov.plan
    loki = LabelNaming.loki(SLA_ID)
    pipelines = [p for p in plan.log_pipelines if p.service == svc.name]
    failures: Failures = []
    evidence: list[str] = []
    if not pipelines:
        failures.append(
            (
                "storage/log-pipeline",
                "no log pipeline: the service's logs are not partitioned by sla_id",
            )
        )
    for p in pipelines:
        if loki not in p.stream_labels:
            failures.append(
                (
                    "storage/sla-stream-label",
                    f"log pipeline ({p.pack}) streams lack the {loki} label",
                )
            )
        else:
            evidence.append(f"log pipeline ({p.pack}) stream labels: {', '.join(p.stream_labels)}")
    failures.extend(
        ("storage/sla-stream-label", f.message)
        for f in gov.findings_for(svc.name, "logs/sla-stream-label")
    )
    return _finish(gov, svc, "storage", failures, evidence)


def gpu_fault_edges(plan: Plan, svc: str) -> list[str]:
    """Edges whose source side matches one of the service's GPU (hardware) alerts."""
    gpu_alerts = [a.alert for pack, a in service_alerts(plan, svc) if pack == "gpu"]
    out = []
    for edge in plan.inhibit_edges:
        if edge.service not in (svc, None):
            continue
        names = [m for m in edge.source_matchers if m.name == "alertname"]
        if names and any(all(matcher_hits(m, a) for m in names) for a in gpu_alerts):
            out.append(edge.name)
    return sorted(out)


def check_alerting(gov: Governance, svc: ServicePlan) -> Check:
    failures: Failures = []
    evidence: list[str] = []
    edges = gpu_fault_edges(gov.plan, svc.name)
    if not edges:
        failures.append(
            (
                "alerting/gpu-fault-matrix",
                "no GPU fault inhibition matrix: no inhibit edge has a GPU alert as source",
            )
        )
    else:
        evidence.append(f"{len(edges)} GPU fault edges: {', '.join(edges)}")
    for finding in gov.findings_for(svc.name, "inhibit/"):
        failures.append(("alerting/static-verification", f"{finding.code}: {finding.message}"))
    if edges and not failures:
        evidence.append("static verification (inhibit/* lint rules): no errors")
    return _finish(gov, svc, "alerting", failures, evidence)


def check_compatibility(gov: Governance, svc: ServicePlan) -> Check:
    verdicts = gov.verdicts.get(svc.name, ())
    failures = [
        ("compatibility/matrix", f"{v.row.location}: {v.row.describe()}: {v.detail}")
        for v in verdicts
        if v.status == "violated"
    ]
    evidence = [f"{v.row.describe()}: {v.detail}" for v in verdicts if v.status == "ok"]
    return _finish(gov, svc, "compatibility", failures, evidence)


CHECKS = {
    "collection": check_collection,
    "labels": check_labels,
    "storage": check_storage,
    "alerting": check_alerting,
    "compatibility": check_compatibility,
}


def run_checks(gov: Governance) -> tuple[Check, ...]:
    return tuple(
        CHECKS[dim](gov, svc)
        for svc in sorted(gov.plan.services, key=lambda s: s.name)
        for dim in DIMENSIONS
    )


# --- reports -------------------------------------------------------------------------------


def _by_service(checks: Iterable[Check]) -> dict[str, dict[str, Check]]:
    out: dict[str, dict[str, Check]] = {}
    for c in checks:
        out.setdefault(c.service, {})[c.dimension] = c
    return out


def to_text(checks: Sequence[Check]) -> str:
    rows = _by_service(checks)
    width = max([len("service"), *(len(s) for s in rows)])
    lines = ["service".ljust(width) + "  " + "  ".join(d.ljust(13) for d in DIMENSIONS)]
    for svc, dims in rows.items():
        cells = ["pass" if dims[d].passed else "FAIL" for d in DIMENSIONS]
        lines.append(svc.ljust(width) + "  " + "  ".join(c.ljust(13) for c in cells))
    failed = [c for c in checks if not c.passed]
    for c in failed:
        lines.append("")
        lines.append(f"{c.service} {c.dimension}: FAIL")
        lines.extend(
            f"  - [{code}] {reason}" for code, reason in zip(c.codes, c.failures, strict=True)
        )
    for c in checks:
        if c.waived:
            lines.append("")
            lines.append(f"{c.service} {c.dimension}: waived")
            lines.extend(f"  - {reason}" for reason in c.waived)
    lines.append("")
    total = len(rows)
    bad = len({c.service for c in failed})
    lines.append(f"{total - bad} of {total} services conform" + ("" if not bad else "; see above"))
    return "\n".join(lines) + "\n"


def to_markdown(checks: Sequence[Check]) -> str:
    rows = _by_service(checks)
    lines = [
        "| service | " + " | ".join(DIMENSIONS) + " |",
        "|---|" + "---|" * len(DIMENSIONS),
    ]
    for svc, dims in rows.items():
        cells = ["✅ pass" if dims[d].passed else "❌ **fail**" for d in DIMENSIONS]
        lines.append(f"| `{svc}` | " + " | ".join(cells) + " |")
    for c in checks:
        if not c.passed:
            lines.append("")
            lines.append(f"**{c.service} / {c.dimension}**")
            lines.extend(
                f"- `{code}` {_md_escape(reason)}"
                for code, reason in zip(c.codes, c.failures, strict=True)
            )
        if c.waived:
            lines.append("")
            lines.append(f"**{c.service} / {c.dimension}** (waived)")
            lines.extend(f"- {_md_escape(reason)}" for reason in c.waived)
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def to_json(checks: Sequence[Check]) -> dict[str, object]:
    return {
        "passed": all(c.passed for c in checks),
        "services": {
            svc: {
                d: {
                    "passed": c.passed,
                    "failures": list(c.failures),
                    "failure_codes": list(c.codes),
                    "evidence": list(c.evidence),
                    "waived": list(c.waived),
                }
                for d, c in dims.items()
            }
            for svc, dims in sorted(_by_service(checks).items())
        },
    }
