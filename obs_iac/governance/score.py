"""`obs-iac score`: the maturity scorecard. Three dimensions (coverage, correlation,
decision), four items each, every item 1-5 from what the plan proves, with one line per
plan object that moved the number."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from obs_iac.governance.check import Governance, service_alerts, wiring
from obs_iac.governance.workloads import profile, signal_slos, sli_series
from obs_iac.labels import CANONICAL_KEYS, GPU_ID, HOST, SLA_ID, LabelNaming
from obs_iac.packs.inhibit.analysis import AlertIndex
from obs_iac.plan.model import AlertRule, LogPipeline, RecordingRule, ServicePlan

DIMENSION_ORDER = ("coverage", "correlation", "decision")
MAX_TOTAL = 60
THRESHOLD = 36


@dataclass(frozen=True, slots=True)
class Item:
    key: str
    dimension: str
    title: str
    score: int
    lines: tuple[str, ...]
    raise_it: str

    @property
    def gap(self) -> int:
        return 5 - self.score


@dataclass(frozen=True, slots=True)
class Card:
    service: str
    items: tuple[Item, ...]

    @property
    def total(self) -> int:
        return sum(i.score for i in self.items)

    def dimension(self, name: str) -> int:
        return sum(i.score for i in self.items if i.dimension == name)

    @property
    def flagged(self) -> bool:
        return self.total < THRESHOLD

    def improvements(self) -> tuple[Item, ...]:
        """The three most valuable: coverage before correlation before decision (the
        source's order: nothing correlates what is not collected, and no decision is
        sound before the layers correlate), then by the points to gain."""
        open_items = [i for i in self.items if i.gap > 0]
        order = sorted(open_items, key=lambda i: (DIMENSION_ORDER.index(i.dimension), -i.gap))
        return tuple(order[:3])


def level(share: float) -> int:
    """1 + 4 x share, rounded half up: none = 1, all = 5."""
    return 1 + math.floor(4 * max(0.0, min(1.0, share)) + 0.5)


def _share_line(done: int, total: int, what: str) -> str:
    share = done / total if total else 0.0
    return f"{done}/{total} {what} -> score 1 + 4 x {share:.2f} = {level(share)}"


# --- coverage ------------------------------------------------------------------------------

GPU_SIGNALS = {
    "utilisation": ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    "memory": ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"),
    "thermal and power": ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"),
    "faults (XID, ECC, row remap)": (
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    ),
    "interconnect (NVLink)": ("DCGM_FI_PROF_NVLINK_TX_BYTES", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"),
    "profiling (SM, tensor)": ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
}


def cov_gpu(gov: Governance, svc: ServicePlan) -> Item:
    cset = next((c for c in gov.plan.collector_sets if c.service == svc.name), None)
    fields = {f.name for f in cset.fields} if cset else set()
    lines = []
    done = 0
    for signal, names in GPU_SIGNALS.items():
        hit = sorted(fields.intersection(names))
        done += bool(hit)
        lines.append(f"{signal}: " + (f"collected ({', '.join(hit)})" if hit else "not collected"))
    lines.append(_share_line(done, len(GPU_SIGNALS), "GPU signal families in the collector set"))
    return Item(
        "coverage.gpu",
        "coverage",
        "GPU signal families collected",
        level(done / len(GPU_SIGNALS)),
        tuple(lines),
        "collect the missing families: gpu.profiling=True for SM/tensor/NVLink profiling "
        "fields, gpu.extra_fields for the rest (`obs-iac fields` lists them)",
    )


FRAMEWORK_KEYS = (SLA_ID, HOST, GPU_ID, "framework.pytorch.rank", "nccl.group_id", "nccl.rank")


# The keys that place a serving or batch signal on the GPUs it ran on.
WORKLOAD_KEYS = (SLA_ID, HOST, GPU_ID)


def cov_workload_signals(gov: Governance, svc: ServicePlan) -> Item:
    """Inference and batch: the SLI series of the workload's own SLOs, with the keys
    that join them to the GPU layer."""
    prof = profile(svc)
    naming = gov.naming
    wanted = [naming.prom(k) for k in WORKLOAD_KEYS]
    series = [x for slo in signal_slos(svc) for x in sli_series(slo)]
    labels = {str(label) for x in series for label in x.get("labels", ())}
    lines = [f"{prof.kind} workload; SLIs of kinds {', '.join(prof.sli_kinds)} count"]
    if not series:
        lines.append(f"no {'/'.join(prof.sli_kinds)} SLO: 0/{len(wanted)} keys -> score 1")
        done = 0
    else:
        lines.append("series: " + ", ".join(sorted({str(x.get("name")) for x in series})))
        done = sum(k in labels for k in wanted)
        lines += [f"{k}: {'on the series' if k in labels else 'missing'}" for k in wanted]
        lines.append(_share_line(done, len(wanted), "canonical keys on the workload's SLI series"))
    return Item(
        "coverage.framework",
        "coverage",
        prof.signals_title,
        level(done / len(wanted)),
        tuple(lines),
        f"declare {prof.requirement.split('/', 1)[1].replace('-', ' ')} SLOs on series that "
        f"carry {', '.join(wanted)}, so the {prof.kind} signal joins the GPU it ran on",
    )


def cov_framework(gov: Governance, svc: ServicePlan) -> Item:
    if profile(svc).kind != "training":
        return cov_workload_signals(gov, svc)
    connector = wiring(gov.plan, svc.name)
    item = next(
        (
            i
            for i in gov.plan.extensions.get("framework/otel-wiring", ())
            if (i if isinstance(i, dict) else getattr(i, "__dict__", {})).get("service") == svc.name
        ),
        None,
    )
    data = item if isinstance(item, dict) else getattr(item, "__dict__", {})
    dims = set(data.get("dimensions", ()) or ())
    if connector is None:
        lines = ["no framework section: no OpenTelemetry spans, 0/6 canonical keys -> score 1"]
        done = 0
    else:
        done = sum(k in dims for k in FRAMEWORK_KEYS)
        lines = [f"OpenTelemetry connector {connector}"]
        lines += [f"{k}: {'a span dimension' if k in dims else 'missing'}" for k in FRAMEWORK_KEYS]
        lines.append(_share_line(done, len(FRAMEWORK_KEYS), "canonical keys on framework spans"))
    return Item(
        "coverage.framework",
        "coverage",
        "Framework spans with canonical keys",
        level(done / len(FRAMEWORK_KEYS)),
        tuple(lines),
        "add a framework={...} section (PyTorch/NCCL spans through OpenTelemetry); its "
        "span metrics carry the canonical keys as dimensions",
    )


def cov_logs(gov: Governance, svc: ServicePlan) -> Item:
    pipelines = [p for p in gov.plan.log_pipelines if p.service == svc.name]

    def stages(role: str) -> Callable[[LogPipeline], str]:
        def find(p: LogPipeline) -> str:
            hits = [f"#{n} {st.kind}" for n, st in enumerate(p.stages, 1) if st.role == role]
            return f"stages {', '.join(hits)}" if hits else ""

        return find

    wanted: dict[str, Callable[[LogPipeline], str]] = {
        "runtime unwrapping": stages("runtime"),
        "multi-line records (tracebacks kept whole)": stages("multiline"),
        "error extraction": stages("extract"),
        "structured metadata for high-cardinality keys": lambda p: ", ".join(p.structured_metadata),
        "LogQL alerts": lambda p: ", ".join(a.alert for a in p.alerts),
    }
    lines = []
    done = 0
    if not pipelines:
        lines.append("no log pipeline")
    for name, test in wanted.items():
        found = [f"{p.pack} pipeline: {hit}" for p in pipelines if (hit := test(p))]
        done += bool(found)
        if pipelines:
            lines.append(f"{name}: {'; '.join(found) if found else 'no'}")
    lines.append(_share_line(done, len(wanted), "log pipeline capabilities"))
    return Item(
        "coverage.logs",
        "coverage",
        "Log pipeline capabilities",
        level(done / len(wanted)),
        tuple(lines),
        "give the service a logs={...} section: runtime, format (multiline), extract and "
        "the default LogQL alerts",
    )


def cov_business(gov: Governance, svc: ServicePlan) -> Item:
    plan = gov.plan
    slos = svc.sections.get("slo") or []
    groups = [g for g in plan.rule_groups if g.service == svc.name and g.pack == "slo"]
    records = [r for g in groups for r in g.rules if isinstance(r, RecordingRule)]
    rows = [r for r in plan.dashboard_rows if r.service == svc.name and r.layer == "business"]
    checks = [
        (
            bool(slos),
            f"{len(slos)} SLOs declared in the blueprint"
            + (": " + ", ".join(str(x.get("name")) for x in slos if isinstance(x, dict)))
            * bool(slos),
        ),
        (bool(records), f"{len(records)} SLO recording rules in {len(groups)} rule groups"),
        (bool(rows), f"{len(rows)} business dashboard rows"),
        (
            bool(slos) and all(isinstance(s, dict) and s.get("description") for s in slos),
            "every SLO says in words what it promises",
        ),
    ]
    done = sum(ok for ok, _ in checks)
    lines = [f"{'yes' if ok else 'no'}: {text}" for ok, text in checks]
    lines.append(_share_line(done, len(checks), "business SLA elements"))
    return Item(
        "coverage.business",
        "coverage",
        "Business SLA measured",
        level(done / len(checks)),
        tuple(lines),
        "declare the SLA as slo=[Slo(...)] on the service's own business series",
    )


# --- correlation ---------------------------------------------------------------------------


def corr_join(gov: Governance, svc: ServicePlan) -> Item:
    """Share of framework series (training) or of the workload's SLI series (inference,
    batch) joinable to GPU series on canonical labels."""
    plan, naming = gov.plan, gov.naming
    keys = tuple(naming.prom(k) for k in (SLA_ID, HOST, GPU_ID))
    prof = profile(svc)
    training = prof.kind == "training"
    what = "framework series" if training else f"{prof.kind} SLI series"
    if training:
        groups = [g for g in plan.rule_groups if g.service == svc.name and g.pack == "framework"]
        names = sorted({r.record for g in groups for r in g.rules if isinstance(r, RecordingRule)})
    else:
        names = sorted({str(x.get("name")) for o in signal_slos(svc) for x in sli_series(o)})
    gpu_groups = [g for g in plan.rule_groups if g.service == svc.name and g.pack == "gpu"]
    gpu_records = [r.record for g in gpu_groups for r in g.rules if isinstance(r, RecordingRule)]
    gpu_ok = any(
        (m := plan.metric(n)) is not None and set(keys) <= set(m.labels) for n in gpu_records
    )
    lines = []
    done = 0
    if not gpu_ok:
        lines.append(f"no GPU series carries {', '.join(keys)}: nothing to join to")
    for name in names:
        spec = plan.metric(name)
        labels = set(spec.labels) if spec else set()
        if not training:
            declared = [x for o in signal_slos(svc) for x in sli_series(o) if x.get("name") == name]
            labels |= {str(label) for x in declared for label in x.get("labels", ())}
        missing = [k for k in keys if k not in labels]
        ok = gpu_ok and not missing
        done += ok
        lines.append(
            f"{name}: " + ("joins on " + ", ".join(keys) if ok else "lacks " + ", ".join(missing))
        )
    if not names:
        lines.append(f"no {what}")
    lines.append(_share_line(done, len(names), f"{what} joinable to GPU series"))
    return Item(
        "correlation.join",
        "correlation",
        f"{what[0].upper()}{what[1:]} joinable to GPU series",
        level(done / len(names) if names else 0.0),
        tuple(lines),
        "keep host.name and resource.gpu.id on framework spans (framework section: "
        "OBS_IAC_GPU_ID per process) so per-rank series join the GPU they ran on"
        if training
        else f"label the {prof.kind} SLI series with host and GPU (e.g. relabel the "
        "serving pod to its GPU) so they join the GPU they ran on",
    )


def corr_keys(gov: Governance, svc: ServicePlan) -> Item:
    """Canonical keys spelled the same in at least two signal kinds."""
    plan, naming = gov.plan, gov.naming
    kinds: dict[str, set[str]] = {}
    for g in plan.rule_groups:
        if g.service != svc.name or g.pack not in ("gpu", "framework"):
            continue
        for r in g.rules:
            if isinstance(r, RecordingRule) and (m := plan.metric(r.record)):
                kinds.setdefault(f"{g.pack} metrics", set()).update(m.labels)
    for p in plan.log_pipelines:
        if p.service == svc.name:
            kinds.setdefault("logs", set()).update(p.stream_labels, p.structured_metadata)
    lines = []
    done = 0
    for key in CANONICAL_KEYS:
        spellings = {naming.prom(key.key), LabelNaming.loki(key.key)}
        where = sorted(k for k, labels in kinds.items() if labels & spellings)
        ok = len(where) >= 2
        done += ok
        lines.append(f"{key.key}: in {', '.join(where) if where else 'no signal'}")
    lines.append(_share_line(done, len(CANONICAL_KEYS), "canonical keys shared by 2+ signal kinds"))
    return Item(
        "correlation.keys",
        "correlation",
        "Canonical keys shared across signals",
        level(done / len(CANONICAL_KEYS)),
        tuple(lines),
        "carry the same canonical keys on GPU metrics, framework spans and logs (logs: "
        "incoming_labels / structured metadata for rank and pod)",
    )


def corr_dashboard(gov: Governance, svc: ServicePlan) -> Item:
    # A serving or batch service has no training-framework layer to drill through.
    layers = profile(svc).layers
    rows = {r.layer: r for r in gov.plan.dashboard_rows if r.service == svc.name}
    lines = [
        f"{layer}: "
        + (
            f"row {rows[layer].title!r} ({len(rows[layer].panels)} panels)"
            if layer in rows
            else "no row"
        )
        for layer in layers
    ]
    done = sum(layer in rows for layer in layers)
    lines.append(_share_line(done, len(layers), "drill-down layers on one dashboard"))
    return Item(
        "correlation.dashboard",
        "correlation",
        "Cross-layer drill-down dashboard",
        level(done / len(layers)),
        tuple(lines),
        "add the missing layer's section (slo, framework, logs): each brings its row to "
        "the service's dashboard, filtered by the same sla_id",
    )


def corr_causes(gov: Governance, svc: ServicePlan) -> Item:
    """Inhibit edges whose cause and symptom come from different layers."""
    plan = gov.plan
    index = AlertIndex.of_plan(plan)
    layer_of = {
        (g.service, r.alert): g.pack
        for g in plan.rule_groups
        for r in g.rules
        if isinstance(r, AlertRule)
    }
    lines = []
    cross = 0
    for edge in plan.inhibit_edges:
        if edge.service not in (svc.name, None):
            continue
        layers = {
            (layer_of.get(s.key, "?"), layer_of.get(t.key, "?")) for s, t in index.pairs(edge)
        }
        crossing = sorted(f"{a} -> {b}" for a, b in layers if a != b)
        if crossing:
            cross += 1
            lines.append(f"edge {edge.name}: {', '.join(crossing)}")
    score = {0: 1, 1: 3, 2: 4}.get(cross, 5)
    lines.append(f"{cross} cross-layer inhibit edges (0: 1, 1: 3, 2: 4, 3+: 5) -> score {score}")
    return Item(
        "correlation.causes",
        "correlation",
        "Cross-layer cause edges",
        score,
        tuple(lines),
        "name causes across layers: inhibitions={'add': [...]} from a framework or GPU "
        "cause to the symptom it explains (e.g. NCCL errors mute GPU-idle)",
    )


# --- decision ------------------------------------------------------------------------------


def _alerts(gov: Governance, svc: ServicePlan) -> list[AlertRule]:
    out = [a for _, a in service_alerts(gov.plan, svc.name)]
    for p in gov.plan.log_pipelines:
        if p.service == svc.name:
            out.extend(p.alerts)
    return out


def dec_runbooks(gov: Governance, svc: ServicePlan) -> Item:
    alerts = _alerts(gov, svc)
    missing = sorted(a.alert for a in alerts if not a.annotations.get("runbook_url"))
    done = len(alerts) - len(missing)
    lines = [f"without runbook_url: {', '.join(missing)}"] if missing else []
    lines.append(_share_line(done, len(alerts), "alerts with a runbook_url"))
    return Item(
        "decision.runbooks",
        "decision",
        "Alerts with runbooks",
        level(done / len(alerts) if alerts else 0.0),
        tuple(lines),
        "every alert links <runbook_base_url>/<AlertName>; write the pages and keep "
        "third-party packs' alerts annotated",
    )


def dec_tested_alerts(gov: Governance, svc: ServicePlan) -> Item:
    alerts = _alerts(gov, svc)
    both = [
        a
        for a in alerts
        if any(t.expect_firing for t in a.tests) and any(not t.expect_firing for t in a.tests)
    ]
    untested = sorted({a.alert for a in alerts} - {a.alert for a in both})
    lines = [f"not tested both ways: {', '.join(untested)}"] if untested else []
    lines.append(_share_line(len(both), len(alerts), "alerts with firing and quiet promtool cases"))
    return Item(
        "decision.tested-alerts",
        "decision",
        "Alerts unit-tested (fires and stays quiet)",
        level(len(both) / len(alerts) if alerts else 0.0),
        tuple(lines),
        "give every alert a firing and a non-firing AlertTestCase (LogQL alerts have none "
        "yet: promtool cannot run them)",
    )


def dec_inhibitions(gov: Governance, svc: ServicePlan) -> Item:
    """Edges the end-to-end Alertmanager suite can replay, with no lint finding."""
    plan = gov.plan
    index = AlertIndex.of_plan(plan)
    fires = {
        (g.service, r.alert)
        for g in plan.rule_groups
        for r in g.rules
        if isinstance(r, AlertRule) and any(t.expect_firing for t in r.tests)
    }
    # Info findings (e.g. inhibit/operator-global, a deployment note) do not make an edge
    # untrustworthy; warnings and errors do.
    flagged: dict[str, str] = {}
    for f in gov.result.findings:
        if f.code.startswith("inhibit/") and len(f.object_path) > 2 and f.severity >= 1:
            flagged.setdefault(f.object_path[2], f.code)
    edges = [e for e in plan.inhibit_edges if e.service == svc.name]
    lines = []
    done = 0
    for edge in edges:
        pairs = [(s, t) for s, t in index.pairs(edge) if s.key in fires and t.key in fires]
        if edge.name in flagged:
            lines.append(f"edge {edge.name}: lint finding {flagged[edge.name]}")
        elif not pairs:
            lines.append(f"edge {edge.name}: no source/target pair with firing test data")
        else:
            done += 1
            src, dst = pairs[0]
            lines.append(f"edge {edge.name}: replayable, e.g. {src.name} mutes {dst.name}")
    lines.append(_share_line(done, len(edges), "inhibit edges tested (replayable, lint-clean)"))
    return Item(
        "decision.tested-inhibitions",
        "decision",
        "Inhibitions tested",
        level(done / len(edges) if edges else 0.0),
        tuple(lines),
        "fix the edge's lint findings and give its source and target alerts firing "
        "promtool cases, so the Alertmanager suite can replay the pair",
    )


def dec_burn(gov: Governance, svc: ServicePlan) -> Item:
    slos = [s for s in (svc.sections.get("slo") or []) if isinstance(s, dict)]
    tiers: dict[str, set[str]] = {}
    for _, alert in service_alerts(gov.plan, svc.name):
        slo_name = alert.labels.get("slo")
        if slo_name and alert.labels.get("burn_window"):
            tiers.setdefault(slo_name, set()).add(alert.labels.get("slo_tier", ""))
    lines = []
    done = 0
    for slo in slos:
        have = tiers.get(str(slo.get("name")), set())
        ok = {"page", "ticket"} <= have
        done += ok
        lines.append(f"SLO {slo.get('name')}: burn alerts {', '.join(sorted(have)) or 'none'}")
    lines.append(_share_line(done, len(slos), "SLOs with page and ticket burn-rate alerts"))
    return Item(
        "decision.slo-burn",
        "decision",
        "SLO burn-rate alerts",
        level(done / len(slos) if slos else 0.0),
        tuple(lines),
        "declare SLOs (slo=[...]) and keep both the page and the ticket burn-rate tiers",
    )


ITEMS: tuple[Callable[[Governance, ServicePlan], Item], ...] = (
    cov_gpu,
    cov_framework,
    cov_logs,
    cov_business,
    corr_join,
    corr_keys,
    corr_dashboard,
    corr_causes,
    dec_runbooks,
    dec_tested_alerts,
    dec_inhibitions,
    dec_burn,
)


def score_service(gov: Governance, svc: ServicePlan) -> Card:
    return Card(svc.name, tuple(item(gov, svc) for item in ITEMS))


def score_all(gov: Governance) -> tuple[Card, ...]:
    return tuple(score_service(gov, s) for s in sorted(gov.plan.services, key=lambda s: s.name))


# --- reports -------------------------------------------------------------------------------


def to_json(cards: Sequence[Card]) -> str:
    data = {
        "max": MAX_TOTAL,
        "threshold": THRESHOLD,
        "services": {
            c.service: {
                "total": c.total,
                "flagged": c.flagged,
                "dimensions": {d: c.dimension(d) for d in DIMENSION_ORDER},
                "items": [
                    {
                        "key": i.key,
                        "dimension": i.dimension,
                        "title": i.title,
                        "score": i.score,
                        "explanation": list(i.lines),
                        "how_to_raise": i.raise_it,
                    }
                    for i in c.items
                ],
                "improvements": [i.key for i in c.improvements()] if c.flagged else [],
            }
            for c in cards
        },
    }
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def to_text(cards: Sequence[Card]) -> str:
    out: list[str] = []
    for c in cards:
        dims = ", ".join(f"{d} {c.dimension(d)}/20" for d in DIMENSION_ORDER)
        flag = f"  BELOW {THRESHOLD}: improvement plan needed" if c.flagged else ""
        out.append(f"{c.service}: {c.total}/{MAX_TOTAL} ({dims}){flag}")
        for i in c.items:
            out.append(f"  {i.score}/5  {i.key:<28} {i.title}")
            out.extend(f"         {line}" for line in i.lines)
        if c.flagged:
            out.append("  improvements, most valuable first:")
            out.extend(f"    {n}. {i.key}: {i.raise_it}" for n, i in enumerate(c.improvements(), 1))
        out.append("")
    return "\n".join(out)


def to_markdown(cards: Sequence[Card]) -> str:
    out = [
        "| service | total | " + " | ".join(DIMENSION_ORDER) + " | status |",
        "|---|---|---|---|---|---|",
    ]
    for c in cards:
        status = f"below {THRESHOLD}" if c.flagged else "ok"
        dims = " | ".join(f"{c.dimension(d)}/20" for d in DIMENSION_ORDER)
        out.append(f"| `{c.service}` | **{c.total}/{MAX_TOTAL}** | {dims} | {status} |")
    for c in cards:
        out += ["", f"## {c.service}", "", "| item | score | why |", "|---|---|---|"]
        for i in c.items:
            why = "<br>".join(
                html.escape(line, quote=False).replace("|", "\\|") for line in i.lines
            )
            out.append(f"| {i.key} | {i.score}/5 | {why} |")
        if c.flagged:
            out += ["", "Improvements, most valuable first:", ""]
            out += [f"{n}. **{i.key}**: {i.raise_it}" for n, i in enumerate(c.improvements(), 1)]
    return "\n".join(out) + "\n"


_COLOURS = {"coverage": "#4e79a7", "correlation": "#f28e2b", "decision": "#59a14f"}


def svg_chart(card: Card) -> str:
    """Horizontal bars, one per item, 1-5; dimension by colour; no script, no external refs."""
    bar_h, gap, label_w, unit = 16, 4, 210, 40
    height = len(card.items) * (bar_h + gap) + 24
    width = label_w + 5 * unit + 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'role="img" aria-label="scorecard of {html.escape(card.service)}">'
    ]
    for tick in range(6):
        x = label_w + tick * unit
        parts.append(
            f'<line x1="{x}" y1="0" x2="{x}" y2="{height - 20}" stroke="#ddd"/>'
            f'<text x="{x}" y="{height - 6}" font-size="10" text-anchor="middle">{tick}</text>'
        )
    for n, item in enumerate(card.items):
        y = n * (bar_h + gap)
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 12}" font-size="11" text-anchor="end">'
            f"{html.escape(item.key)}</text>"
            f'<rect x="{label_w}" y="{y}" width="{item.score * unit}" height="{bar_h}" '
            f'fill="{_COLOURS[item.dimension]}"><title>{html.escape(item.title)}: '
            f"{item.score}/5</title></rect>"
            f'<text x="{label_w + item.score * unit + 4}" y="{y + 12}" font-size="11">'
            f"{item.score}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def to_html(cards: Sequence[Card]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(c.service)}</td><td><b>{c.total}/{MAX_TOTAL}</b></td>"
        + "".join(f"<td>{c.dimension(d)}/20</td>" for d in DIMENSION_ORDER)
        + f"<td class={'bad' if c.flagged else 'ok'}>"
        + (f"below {THRESHOLD}" if c.flagged else "ok")
        + "</td></tr>"
        for c in cards
    )
    sections = []
    for c in cards:
        details = "".join(
            f"<details><summary>{html.escape(i.key)}: {i.score}/5</summary><ul>"
            + "".join(f"<li>{html.escape(line)}</li>" for line in i.lines)
            + f"<li><i>raise it:</i> {html.escape(i.raise_it)}</li></ul></details>"
            for i in c.items
        )
        plan = ""
        if c.flagged:
            plan = (
                "<ol>"
                + "".join(
                    f"<li><b>{html.escape(i.key)}</b>: {html.escape(i.raise_it)}</li>"
                    for i in c.improvements()
                )
                + "</ol>"
            )
        sections.append(
            f"<section><h2>{html.escape(c.service)} - {c.total}/{MAX_TOTAL}</h2>"
            f"{svg_chart(c)}{plan}{details}</section>"
        )
    legend = " ".join(
        f'<span style="color:{colour}">&#9632; {d}</span>' for d, colour in _COLOURS.items()
    )
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        "<title>obs-iac fleet scorecard</title><style>"
        "body{font-family:sans-serif;max-width:62em;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px}"
        ".bad{color:#b00}.ok{color:#070}"
        "section{display:inline-block;vertical-align:top;width:29em;break-inside:avoid}"
        "</style></head><body><h1>Fleet maturity scorecard</h1>"
        f"<p>12 items, 1-5 each, out of {MAX_TOTAL}; below {THRESHOLD} needs an improvement "
        f"plan. {legend}</p><table><tr><th>service</th><th>total</th>"
        + "".join(f"<th>{d}</th>" for d in DIMENSION_ORDER)
        + f"<th>status</th></tr>{rows}</table>{''.join(sections)}</body></html>\n"
    )


def render_report(cards: Sequence[Card], fmt: str) -> str:
    return {"json": to_json, "markdown": to_markdown, "html": to_html}.get(fmt, to_text)(cards)
