"""The framework pack: PyTorch/NCCL training steps as OpenTelemetry spans, turned into
Prometheus series by the collector's spanmetrics connector, and joined to the GPU layer.

A training script emits one ``train_step`` span per step with one child span per
stage (``data_load``, ``forward``, ``backward``, ``allreduce``, ``optimizer``). The
connector counts them (``traces_span_metrics_calls_total``) and times them
(``traces_span_metrics_duration_milliseconds_*``); its dimensions carry the canonical
keys, so every series says which SLA, host, GPU, rank and NCCL group it belongs to,
spelled exactly as the GPU pack spells them. That is what lets a slow step be traced
to its rank, its GPU and its stage.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from pydantic import BaseModel

from obs_iac import conventions
from obs_iac.config import version_tuple
from obs_iac.conventions import FrameworkRecords as FR
from obs_iac.conventions import Records
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.escaping import regex_literal, template_text
from obs_iac.labels import GPU_ID, HOST, NCCL_GROUP, PYTORCH_RANK, SLA_ID, promql_string
from obs_iac.packs.framework import fixtures, versions
from obs_iac.packs.framework.model import Framework
from obs_iac.packs.framework.wiring import RANK_KEYS, OtelWiring, build
from obs_iac.packs.gpu import template_label
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plan.model import (
    AlertRule,
    AlertTestCase,
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

PACK = "framework"
SECTION = "framework"
EXTENSION = "framework/otel-wiring"
LAYER = "framework"
RATE = "5m"
# `for` of NcclAllreduceP95Regression; its tests evaluate at steps dividing it.
REGRESSION_FOR_MINUTES = 15
# Evaluation step of the cases on steady series (see alerts()).
STEADY_STEP = "2m"

# Inhibition: a broken or straggling collective explains slowness of its group.
CAUSE_ALERTS = ("NcclCollectiveErrors", "TrainingStragglerRank")
# The step-time budget alert is the SLA page itself: no cause of lower severity may mute
# it (inhibit/severity-order), so only the all-reduce regression counts as a symptom.
SYMPTOM_ALERTS = ("NcclAllreduceP95Regression",)
# The GPU pack's idle alert, which a framework cause explains.
GPU_IDLE_ALERT = "GpuUtilizationLow"


def _regex_of(names: Iterable[str]) -> str:
    return "|".join(regex_literal(n) for n in names)


class FrameworkPack(Pack):
    name: ClassVar[str] = PACK
    description: ClassVar[str] = (
        "PyTorch/NCCL training steps via OpenTelemetry spanmetrics: wiring, stage timings, "
        "rank skew, and alerts joined to the GPU layer."
    )
    sections: ClassVar[dict[str, type[BaseModel]]] = {SECTION: Framework}

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        out = Contribution()
        fw = service.section(SECTION)
        if fw is None:
            return out
        assert isinstance(fw, Framework)
        route = resolve_route(fw, ctx.repo.prometheus_min_version)
        fw = fw.model_copy(update={"resource_attributes": route})
        out.diagnostics.extend(check(service, fw, ctx.repo.prometheus_min_version))
        if any(d.severity is Severity.ERROR for d in out.diagnostics):
            return out
        wiring = build(service.name, service.service.sla_id, fw, ctx.naming)
        out.extensions[EXTENSION] = [wiring]
        out.metrics.extend(_span_metrics(wiring))
        builder = _Rules(service, fw, wiring, ctx)
        records = builder.records()
        alerts = builder.alerts()
        out.rule_groups.append(
            RuleGroup(
                name=conventions.rule_group(service.name, PACK),
                service=service.name,
                pack=PACK,
                rules=(*records, *alerts),
                source=service.source,
            )
        )
        out.metrics.extend(builder.record_specs())
        out.inhibit_edges.extend(builder.inhibit_edges())
        out.dashboard_rows.append(builder.dashboard_row())
        return out


def _span_metrics(wiring: OtelWiring) -> list[MetricSpec]:
    names = wiring.names
    unit = "milliseconds" if wiring.duration_unit == "ms" else "seconds"
    labels = wiring.labels
    return [
        MetricSpec(
            name=names.calls,
            type=MetricType.COUNTER,
            unit="calls",
            labels=labels,
            source="spanmetrics",
            help="Spans ended, per span name and dimensions (spanmetrics `calls`).",
        ),
        MetricSpec(
            name=names.bucket,
            type=MetricType.HISTOGRAM,
            unit=unit,
            labels=tuple(sorted((*labels, "le"))),
            source="spanmetrics",
            help="Span duration histogram buckets (spanmetrics `duration`).",
        ),
        MetricSpec(
            name=names.sum,
            type=MetricType.COUNTER,
            unit=unit,
            labels=labels,
            source="spanmetrics",
            help="Total span duration (spanmetrics `duration` sum).",
        ),
        MetricSpec(
            name=names.count,
            type=MetricType.COUNTER,
            unit="calls",
            labels=labels,
            source="spanmetrics",
            help="Spans observed by the duration histogram (spanmetrics `duration` count).",
        ),
    ]


def resolve_route(fw: Framework, prometheus_min_version: str) -> str:
    """The resource-attribute route: 'auto' takes Prometheus's OTLP receiver only where
    the oldest Prometheus the repository supports can load it."""
    if fw.resource_attributes != "auto":
        return fw.resource_attributes
    if _at_least(prometheus_min_version, versions.promote_resource_attributes_since()):
        return "prometheus-otlp"
    return "collector-exporter"


def _at_least(version: str, since: str) -> bool:
    # "2.55" is 2.55.0: pad before comparing, (2, 55) < (2, 55, 0) as tuples.
    have, need = version_tuple(version), version_tuple(since)
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


def check(
    service: ServiceBlueprint, fw: Framework, prometheus_min_version: str = "2.42"
) -> list[Diagnostic]:
    """Mistakes pydantic cannot see: they involve other fields, the GPU fleet, the
    collector release or the oldest Prometheus the output must load in."""
    problems: list[Diagnostic] = []

    def error(code: str, message: str, hint: str, *path: str | int) -> None:
        problems.append(
            Diagnostic(
                f"framework/{code}",
                Severity.ERROR,
                message,
                hint=hint,
                location=service.location(SECTION, *path),
                object_path=(service.name, SECTION, *(str(p) for p in path)),
                origin=PACK,
            )
        )

    seen: dict[str, int] = {}
    for index, stage in enumerate(fw.stages):
        if stage in seen:
            error(
                "duplicate-stage",
                f"framework.stages[{index}]: {stage!r} is already stages[{seen[stage]}]",
                "each stage is one child span name; list it once",
                "stages",
                index,
            )
        seen.setdefault(stage, index)
        if stage == fw.step_span:
            error(
                "stage-is-step",
                f"framework.stages[{index}]: {stage!r} is the step span itself",
                "stages are the children of the step span; rename one of them",
                "stages",
                index,
            )
    for field in ("data_load_stage", "allreduce_stage"):
        value = getattr(fw, field)
        if value not in seen:
            error(
                "unknown-stage",
                f"framework.{field}: {value!r} is not one of the stages ({', '.join(fw.stages)})",
                f"add {value!r} to framework.stages or point {field} at one of them",
                field,
            )

    gpus = service.service.gpu.count
    if fw.world_size > gpus:
        error(
            "ranks-exceed-gpus",
            f"framework.world_size is {fw.world_size} but gpu.count is {gpus}; "
            "every rank needs its own GPU",
            f"lower world_size to at most {gpus} or raise gpu.count",
            "world_size",
        )
    if fw.ranks_per_node > fw.world_size:
        error(
            "ranks-per-node",
            f"framework.ranks_per_node ({fw.ranks_per_node}) is larger than world_size "
            f"({fw.world_size})",
            "ranks_per_node counts the ranks on one node; it cannot exceed the job",
            "ranks_per_node",
        )
    elif fw.world_size % fw.ranks_per_node:
        error(
            "ranks-per-node",
            f"framework.world_size ({fw.world_size}) is not a multiple of ranks_per_node "
            f"({fw.ranks_per_node}); nodes would run different numbers of ranks",
            "use a world_size that fills whole nodes",
            "ranks_per_node",
        )

    version = fw.collector_version
    floor = versions.floor()
    if version_tuple(version) < version_tuple(floor):
        error(
            "collector-names",
            f"framework.collector_version {version}: before contrib v{floor} the spanmetrics "
            "connector's default namespace is empty, so its series are `calls_total` and "
            f"`duration_*`, not the {fw.spanmetrics_namespace} names this service declares",
            f"upgrade the collector to v{floor} or later (see obs_iac/catalog/otel_collector.toml)",
            "collector_version",
        )
    known = {g.id: g for g in versions.gates().values()}
    for index, flag in enumerate(fw.feature_gates):
        gate = known.get(flag.lstrip("+-"))
        if gate is not None and not gate.exists(version):
            error(
                "unknown-feature-gate",
                f"framework.feature_gates[{index}]: {gate.id} does not exist in "
                f"collector-contrib {version} (added in v{gate.since}); the collector "
                "refuses to start with an unknown gate",
                "drop the flag or upgrade framework.collector_version",
                "feature_gates",
                index,
            )
    effective = versions.effective_namespace(version, fw.spanmetrics_namespace, fw.feature_gates)
    if effective != fw.spanmetrics_namespace:
        legacy = versions.gate("legacy_metric_names").id
        flagged = [i for i, f in enumerate(fw.feature_gates) if f.lstrip("+-") == legacy]
        path: tuple[str | int, ...] = ("feature_gates", flagged[0]) if flagged else ()
        error(
            "collector-names",
            f"{legacy} is on in collector-contrib {version}: with namespace "
            f"{fw.spanmetrics_namespace!r} the connector then emits bare `calls` and "
            "`duration`, not the names this service declares",
            "remove the gate, or choose a namespace other than the default",
            *path,
        )
    if fw.resource_attributes == "prometheus-otlp":
        otlp = versions.table()["prometheus"]["otlp"]
        promote = versions.promote_resource_attributes_since()
        if not _at_least(prometheus_min_version, promote):
            error(
                "prometheus-version",
                f"framework.resource_attributes='prometheus-otlp' needs Prometheus "
                f"{promote} (otlp.promote_resource_attributes in "
                f"{conventions.prometheus_otlp_fragment()}; its OTLP receiver arrived in "
                f"{otlp['receiver_feature_since']} behind --enable-feature=otlp-write-receiver, "
                f"--web.enable-otlp-receiver in {otlp['receiver_flag_since']}), but "
                f"prometheus_min_version is {prometheus_min_version}: Prometheus "
                f'{prometheus_min_version} rejects that file ("field otlp not found") and '
                "does not serve /api/v1/otlp",
                f"set resource_attributes='collector-exporter' (or 'auto'), or raise "
                f'[tool.obs-iac] prometheus_min_version to "{promote}" or later',
                "resource_attributes",
            )
    if fw.resource_attributes == "collector-exporter":
        since = versions.resource_constant_labels_since()
        if version_tuple(version) < version_tuple(since):
            error(
                "collector-option",
                f"framework.resource_attributes='collector-exporter' writes the prometheus "
                f"exporter's resource_constant_labels, which collector-contrib {version} "
                f"does not have (since v{since}); the collector would reject its config",
                "upgrade the collector, or use resource_attributes='prometheus-otlp' "
                "(needs prometheus_min_version "
                f"{versions.promote_resource_attributes_since()} or later)",
                "resource_attributes",
            )
    return problems


def _alert_test_labels(
    labels: dict[str, str], keep: Iterable[str], extra: dict[str, str] | None = None
) -> dict[str, str]:
    out = {k: labels[k] for k in keep if k in labels}
    out.update(extra or {})
    return out


class _Rules:
    """Recording rules, alerts, the inhibit edge and the dashboard row of one service."""

    def __init__(
        self, service: ServiceBlueprint, fw: Framework, wiring: OtelWiring, ctx: PackContext
    ) -> None:
        self.service = service
        self.fw = fw
        self.wiring = wiring
        self.naming = ctx.naming
        svc = service.service
        naming = ctx.naming
        self.sla = svc.sla_id
        self.sel_inner = naming.matcher(SLA_ID, svc.sla_id)
        self.sel = "{" + self.sel_inner + "}"
        self.rank_by = ", ".join(naming.promql(k) for k in RANK_KEYS)
        self.gpu_on = ", ".join(naming.promql(k) for k in (SLA_ID, HOST, GPU_ID))
        self.proc_on = ", ".join(naming.promql(k) for k in (SLA_ID, HOST, GPU_ID, PYTORCH_RANK))
        self.group_by = ", ".join(naming.promql(k) for k in (SLA_ID, NCCL_GROUP))
        self.by_sla = naming.promql(SLA_ID)
        scale = wiring.names.unit_scale
        self.to_seconds = f" / {scale}" if scale != 1 else ""
        self.fixtures = fixtures.Fixtures(service, fw, wiring, ctx.naming)

    # -- selectors ---------------------------------------------------------------------
    def spans(self, *names: str) -> str:
        if len(names) == 1:
            match = f"span_name={promql_string(names[0])}"
        else:
            match = f"span_name=~{promql_string(_regex_of(names))}"
        return "{" + self.sel_inner + ", " + match + "}"

    def quantile(self, q: float, by: str, *span: str) -> str:
        bucket = self.wiring.names.bucket
        return (
            f"histogram_quantile({q:g}, sum by ({by}, le) "
            f"(rate({bucket}{self.spans(*span)}[{RATE}]))){self.to_seconds}"
        )

    # -- recording rules ---------------------------------------------------------------
    def records(self) -> list[RecordingRule]:
        fw, n, sel = self.fw, self.wiring.names, self.sel
        every = (fw.step_span, *fw.stages)
        step, ar = fw.step_span, fw.allreduce_stage
        by_span = f"{self.rank_by}, span_name"
        return [
            RecordingRule(record=FR.STAGE_P50, expr=self.quantile(0.5, by_span, *every)),
            RecordingRule(record=FR.STAGE_P95, expr=self.quantile(0.95, by_span, *every)),
            RecordingRule(
                record=FR.STAGE_TIME,
                expr=f"sum by ({by_span}) (rate({n.sum}{self.spans(*every)}[{RATE}]))"
                f"{self.to_seconds}",
            ),
            RecordingRule(
                record=FR.STAGE_CALLS,
                expr=f"sum by ({by_span}) (rate({n.calls}{self.spans(*every)}[{RATE}]))",
            ),
            # Stage time over step time of the same process. group_left keeps the
            # stage's own labels: a one-to-one match with on() would keep only the
            # on() labels and lose span_name, nccl_group_id and nccl_rank.
            RecordingRule(
                record=FR.STAGE_SHARE,
                expr=f"{FR.STAGE_TIME}{self.spans(*fw.stages)}\n"
                f"/ on ({self.proc_on}) group_left ()\n"
                f"{FR.STAGE_TIME}{self.spans(step)}",
            ),
            RecordingRule(
                record=FR.STEPS,
                expr=f"sum by ({self.rank_by}) (rate({n.calls}{self.spans(step)}[{RATE}]))",
            ),
            RecordingRule(
                record=FR.SLA_STEPS,
                expr=f"avg by ({self.by_sla}) ({FR.STEPS}{sel})",
            ),
            # Compute time per step = step time minus the time waiting in the
            # collective. A straggler makes every *other* rank wait in all-reduce, so
            # whole-step times look equal across ranks; compute time does not.
            RecordingRule(
                record=FR.STEP_COMPUTE,
                expr=f"(\n  sum by ({self.rank_by}) (rate({n.sum}{self.spans(step)}[{RATE}]))\n"
                f"  - on ({self.proc_on}) group_left ()\n"
                f"  sum by ({self.proc_on}) (rate({n.sum}{self.spans(ar)}[{RATE}]))\n)\n"
                f"/ on ({self.proc_on}) group_left ()\n"
                f"sum by ({self.proc_on}) (rate({n.count}{self.spans(step)}[{RATE}]))"
                f"{self.to_seconds}",
            ),
            RecordingRule(
                record=FR.RANK_SKEW,
                expr=f"{FR.STEP_COMPUTE}{sel}\n/ on ({self.group_by}) group_left ()\n"
                f"quantile by ({self.group_by}) (0.5, {FR.STEP_COMPUTE}{sel})",
            ),
            RecordingRule(
                record=FR.GROUP_SKEW,
                expr=f"max by ({self.group_by}) ({FR.STEP_COMPUTE}{sel})\n"
                f"/\nquantile by ({self.group_by}) (0.5, {FR.STEP_COMPUTE}{sel})",
            ),
            RecordingRule(record=FR.GROUP_STEP_P95, expr=self.quantile(0.95, self.group_by, step)),
            RecordingRule(record=FR.SLA_STEP_P95, expr=self.quantile(0.95, self.by_sla, step)),
            RecordingRule(
                record=FR.GROUP_ALLREDUCE_P95, expr=self.quantile(0.95, self.group_by, ar)
            ),
            RecordingRule(
                record=FR.GROUP_ALLREDUCE_ERRORS,
                expr=f"sum by ({self.group_by}) (rate({n.calls}"
                + "{"
                + f"{self.sel_inner}, span_name={promql_string(ar)}, "
                f"{self.fixtures.status_label}={promql_string(self.fixtures.status_error)}"
                + "}"
                + f"[{RATE}]))",
            ),
            # The GPU layer's utilisation, relabelled onto each training process. The GPU
            # side is first reduced to exactly the join keys (dcgm-exporter series carry
            # gpu, UUID, pod, ... and may repeat per scrape job), so it is the "one" side;
            # each process on that GPU is a "many" side and keeps its own labels.
            RecordingRule(
                record=FR.RANK_GPU_UTILIZATION,
                expr=f"{FR.STEPS}{sel} * 0\n+ on ({self.gpu_on}) group_left ()\n"
                f"max by ({self.gpu_on}) ({Records.GPU_UTILIZATION}{sel})",
            ),
        ]

    def record_specs(self) -> list[MetricSpec]:
        naming = self.naming
        rank = tuple(sorted(naming.prom(k) for k in RANK_KEYS))
        rank_span = tuple(sorted((*rank, "span_name")))
        group = tuple(sorted(naming.prom(k) for k in (SLA_ID, NCCL_GROUP)))
        sla = (naming.prom(SLA_ID),)
        table: list[tuple[str, tuple[str, ...], str]] = [
            (FR.STAGE_P50, rank_span, "seconds"),
            (FR.STAGE_P95, rank_span, "seconds"),
            (FR.STAGE_TIME, rank_span, "seconds_per_second"),
            (FR.STAGE_CALLS, rank_span, "per_second"),
            (FR.STAGE_SHARE, rank_span, "ratio"),
            (FR.STEPS, rank, "per_second"),
            (FR.SLA_STEPS, sla, "per_second"),
            (FR.STEP_COMPUTE, rank, "seconds"),
            (FR.RANK_SKEW, rank, "ratio"),
            (FR.GROUP_SKEW, group, "ratio"),
            (FR.GROUP_STEP_P95, group, "seconds"),
            (FR.SLA_STEP_P95, sla, "seconds"),
            (FR.GROUP_ALLREDUCE_P95, group, "seconds"),
            (FR.GROUP_ALLREDUCE_ERRORS, group, "per_second"),
            (FR.RANK_GPU_UTILIZATION, rank, "ratio"),
        ]
        return [
            MetricSpec(
                name=name,
                type=MetricType.GAUGE,
                unit=unit,
                labels=labels,
                source="recording",
                help=f"Recorded by the {PACK} pack.",
            )
            for name, labels, unit in table
        ]

    # -- alerts ------------------------------------------------------------------------
    def alerts(self) -> list[AlertRule]:
        fw, th, sel = self.fw, self.fw.thresholds, self.sel
        svc = self.service.service
        naming = self.naming
        static = {"team": svc.team, "service": svc.name, "layer": LAYER}
        rank_where = (
            f"rank {template_label(naming.prom(PYTORCH_RANK))} "
            f"({template_label(naming.prom(GPU_ID))} on {template_label(naming.prom(HOST))})"
        )
        group_where = f"NCCL group {template_label(naming.prom(NCCL_GROUP))}"
        fx = self.fixtures
        rank_keys = [naming.prom(k) for k in RANK_KEYS]
        group_keys = [naming.prom(k) for k in (SLA_ID, NCCL_GROUP)]

        def alert(
            name: str,
            expr: str,
            severity: str,
            for_: str,
            summary: str,
            description: str,
            tests: list[AlertTestCase],
        ) -> AlertRule:
            return AlertRule(
                alert=name,
                expr=expr,
                **{"for": for_},
                labels=dict(sorted({**static, "severity": severity}.items())),
                annotations={
                    "description": description,
                    "runbook_url": conventions.runbook_url(svc.runbook_base_url, name),
                    "summary": summary,
                },
                tests=tuple(tests),
            )

        share = th.data_load_share
        low = th.gpu_utilization_low
        ratio = th.allreduce_regression_ratio
        budget = fw.step_time_budget_seconds
        dl = fw.data_load_stage
        proc0 = fx.process(0)
        other_gpu = fx.process(0, gpu_index=1)

        starving_labels = _alert_test_labels(proc0.span_labels, rank_keys, {"span_name": dl})
        group_labels = _alert_test_labels(proc0.span_labels, group_keys)
        straggler = fx.process(2)
        straggler_labels = _alert_test_labels(straggler.span_labels, rank_keys)

        # Every series is steady from t=0, so the 5m rates hold their value from the
        # first evaluation with two samples. Evaluating every 2 minutes: the alert is
        # active from 2m (the GPU side, another group, is read one evaluation late, well
        # within the 5m lookback), fires after `for` rounded up to the step (12m; 18m for
        # the step time's 15m), and is checked just past that (18m, 22m), never later:
        # each evaluation costs every rule of the file.
        cases_starving = [
            fx.case(
                "data loader starving an idle GPU fires",
                fx.starving(share_high=True, gpu_busy=False, gpu_process=proc0),
                "18m",
                starving_labels,
                evaluation_interval=STEADY_STEP,
            ),
            fx.case(
                "same stall on a busy GPU does not fire",
                fx.starving(share_high=True, gpu_busy=True, gpu_process=proc0),
                "18m",
                evaluation_interval=STEADY_STEP,
            ),
            fx.case(
                "idle GPU with another resource_gpu_id does not fire",
                fx.starving(share_high=True, gpu_busy=False, gpu_process=other_gpu),
                "18m",
                evaluation_interval=STEADY_STEP,
            ),
            fx.case(
                "short data loading on an idle GPU does not fire",
                fx.starving(share_high=False, gpu_busy=False, gpu_process=proc0),
                "18m",
                evaluation_interval=STEADY_STEP,
            ),
        ]
        baseline = fx.offset_minutes(th.baseline_offset)
        step, regression_at = fx.regression_timeline(baseline, REGRESSION_FOR_MINUTES)
        cases_regression = [
            fx.case(
                f"all-reduce {fx.regression_factor():g} times slower than the baseline fires",
                fx.allreduce_regression(baseline, fx.regression_factor(), regression_at),
                f"{regression_at}m",
                group_labels,
                evaluation_interval=step,
            ),
            fx.case(
                "steady all-reduce does not fire",
                fx.allreduce_regression(baseline, 1.0, regression_at),
                f"{regression_at}m",
                evaluation_interval=step,
            ),
        ]
        cases_straggler = [
            fx.case(
                f"one rank computing {fx.straggler_factor():g} times its group median fires",
                fx.straggler(slow=True),
                "18m",
                straggler_labels,
                evaluation_interval=STEADY_STEP,
            ),
            fx.case(
                "balanced ranks do not fire",
                fx.straggler(slow=False),
                "18m",
                evaluation_interval=STEADY_STEP,
            ),
        ]
        cases_budget = [
            fx.case(
                "steps three times over budget fire",
                fx.step_time(over=True),
                "22m",
                group_labels,
                evaluation_interval=STEADY_STEP,
            ),
            fx.case(
                "steps within budget do not fire",
                fx.step_time(over=False),
                "22m",
                evaluation_interval=STEADY_STEP,
            ),
        ]
        cases_errors = [
            fx.case(
                "failing all-reduce spans fire",
                fx.allreduce_errors(failing=True),
                "6m",
                group_labels,
            ),
            fx.case(
                "successful all-reduce spans do not fire", fx.allreduce_errors(failing=False), "6m"
            ),
        ]
        gpu_util = f"{FR.RANK_GPU_UTILIZATION}{sel}"
        return [
            alert(
                "TrainingDataLoaderStarvingGpu",
                f"{FR.STAGE_SHARE}{self.spans(dl)} > {share:g}\n"
                f"and on ({self.proc_on})\n{gpu_util} < {low:g}",
                "warning",
                "10m",
                f"Data loading starves the GPU of {rank_where}",
                f"{rank_where} spends more than {share * 100:g} % of each training step in "
                f"{dl} while its GPU is below {low * 100:g} % utilisation: the input "
                "pipeline, not the GPU, limits the step. Add DataLoader workers, prefetch, "
                "or move decoding off the training process.",
                cases_starving,
            ),
            alert(
                "NcclAllreduceP95Regression",
                f"{FR.GROUP_ALLREDUCE_P95}{sel}\n"
                f"> {ratio:g} * ({FR.GROUP_ALLREDUCE_P95}{sel} offset {th.baseline_offset})\n"
                f"and\n{FR.GROUP_ALLREDUCE_P95}{sel} > {th.allreduce_min_seconds:g}",
                "warning",
                f"{REGRESSION_FOR_MINUTES}m",
                f"All-reduce p95 of {group_where} regressed",
                f"The p95 time of {fw.allreduce_stage} in {group_where} is more than "
                f"{ratio:g} times what it was {th.baseline_offset} earlier. Compare NVLink "
                "and network throughput (hardware row) and look for a straggler rank.",
                cases_regression,
            ),
            alert(
                "TrainingStragglerRank",
                f"{FR.RANK_SKEW}{sel} > {th.straggler_ratio:g}",
                "warning",
                "10m",
                f"{rank_where} is a straggler in {group_where}",
                f"{rank_where} needs more than {th.straggler_ratio:g} times the median "
                f"compute time per step of {group_where}; every other rank waits for it in "
                f"{fw.allreduce_stage}. Check that GPU's clocks, temperature and XID errors.",
                cases_straggler,
            ),
            alert(
                "TrainingStepTimeOverBudget",
                f"{FR.GROUP_STEP_P95}{sel} > {budget:g}",
                "critical",
                "15m",
                f"p95 training step of {group_where} is over its {budget:g} s budget",
                f"The p95 {fw.step_span} time of {group_where} has been above the SLA "
                f"budget of {budget:g} s for 15 minutes ({template_text(svc.objective)}). "
                "Drill down: stage share, rank skew, then the GPUs of the slowest rank.",
                cases_budget,
            ),
            alert(
                "NcclCollectiveErrors",
                f"{FR.GROUP_ALLREDUCE_ERRORS}{sel} > 0",
                "critical",
                "0s",
                f"{fw.allreduce_stage} spans fail in {group_where}",
                f"{fw.allreduce_stage} spans of {group_where} end with an error status, "
                "typically an NCCL watchdog timeout or a lost peer; the job is stalled or "
                "about to restart.",
                cases_errors,
            ),
        ]

    # -- inhibition ----------------------------------------------------------------------
    def inhibit_edges(self) -> list[InhibitEdge]:
        naming = self.naming
        svc = self.service.name
        service = Matcher(name="service", value=svc)
        gpu_idle = Matcher(name="alertname", value=GPU_IDLE_ALERT)
        cross_layer = [
            # The source document's example: a GPU at 5 % looks idle when it is really
            # blocked on a collective, or starved by its input pipeline.
            InhibitEdge(
                name=f"{svc}-nccl-errors-inhibit-gpu-idle",
                service=svc,
                pack=PACK,
                reason="GPUs of a job whose collectives fail sit idle waiting for them; "
                "the NCCL alert is the cause.",
                source_matchers=(Matcher(name="alertname", value="NcclCollectiveErrors"), service),
                target_matchers=(gpu_idle, service),
                equal=(naming.prom(SLA_ID),),
                source=self.service.source,
            ),
            InhibitEdge(
                name=f"{svc}-data-loader-inhibits-gpu-idle",
                service=svc,
                pack=PACK,
                reason="A GPU starved by its rank's data loader is idle because of the loader; "
                "page for the loader.",
                source_matchers=(
                    Matcher(name="alertname", value="TrainingDataLoaderStarvingGpu"),
                    service,
                ),
                target_matchers=(gpu_idle, service),
                equal=(naming.prom(SLA_ID), naming.prom(HOST), naming.prom(GPU_ID)),
                source=self.service.source,
            ),
        ]
        return [self._group_edge(), *cross_layer]

    def _group_edge(self) -> InhibitEdge:
        naming = self.naming
        svc = self.service.name
        return InhibitEdge(
            name=f"{svc}-nccl-cause-inhibits-framework-slowness",
            service=svc,
            pack=PACK,
            reason="A failing collective or a straggler rank makes the whole NCCL group "
            "slow; page for the cause, not for each slow symptom of the same group.",
            source_matchers=(
                Matcher(name="alertname", op="=~", value=_alternation(CAUSE_ALERTS)),
                Matcher(name="service", value=svc),
            ),
            target_matchers=(
                Matcher(name="alertname", op="=~", value=_alternation(SYMPTOM_ALERTS)),
                Matcher(name="service", value=svc),
            ),
            equal=(naming.prom(SLA_ID), naming.prom(NCCL_GROUP)),
            source=self.service.source,
        )

    # -- dashboard -----------------------------------------------------------------------
    def dashboard_row(self) -> DashboardRow:
        fw, sel = self.fw, self.sel
        stages = self.spans(*fw.stages)
        step = self.spans(fw.step_span)
        group_legend = f"{{{{{self.naming.prom(NCCL_GROUP)}}}}}"

        def panel(
            key: str,
            title: str,
            unit: str,
            queries: list[tuple[str, str]],
            desc: str,
        ) -> Panel:
            return Panel(
                key=key,
                title=title,
                kind="timeseries",
                unit=unit,
                description=desc,
                queries=tuple(
                    PanelQuery(expr=e, legend=legend, ref_id=chr(ord("A") + i))
                    for i, (e, legend) in enumerate(queries)
                ),
            )

        return DashboardRow(
            service=self.service.name,
            layer=LAYER,
            title="Framework (PyTorch/NCCL)",
            pack=PACK,
            panels=(
                panel(
                    "framework-stage-p95",
                    "Stage time p95 (slowest rank)",
                    "s",
                    [(f"max by (span_name) ({FR.STAGE_P95}{stages})", "{{span_name}}")],
                    "p95 duration of each training-step stage, for the slowest rank.",
                ),
                panel(
                    "framework-stage-p50",
                    "Stage time p50 (median over ranks)",
                    "s",
                    [
                        (
                            f"quantile by (span_name) (0.5, {FR.STAGE_P50}{stages})",
                            "{{span_name}}",
                        )
                    ],
                    "Median duration of each stage.",
                ),
                panel(
                    "framework-stage-share",
                    "Share of step time per stage",
                    "percentunit",
                    [
                        (
                            f"sum by (span_name) ({FR.STAGE_TIME}{stages})\n"
                            f"/ on () group_left ()\nsum ({FR.STAGE_TIME}{step})",
                            "{{span_name}}",
                        )
                    ],
                    "Time in each stage over time in training steps, all ranks together "
                    "(the source's 'forward share').",
                ),
                panel(
                    "framework-rank-skew",
                    "Rank skew (slowest / median compute time)",
                    "none",
                    [(f"{FR.GROUP_SKEW}{sel}", group_legend)],
                    "1 means balanced ranks; above "
                    f"{fw.thresholds.straggler_ratio:g} a straggler alert fires.",
                ),
                panel(
                    "framework-steps-per-second",
                    "Training steps per second",
                    "ops",
                    [(f"{FR.SLA_STEPS}{sel}", "steps/s")],
                    "Steps per second per rank, averaged over ranks.",
                ),
                panel(
                    "framework-step-p95",
                    "Step time p95 against the SLA budget",
                    "s",
                    [
                        (f"{FR.GROUP_STEP_P95}{sel}", group_legend),
                        (f"vector({fw.step_time_budget_seconds:g})", "budget"),
                    ],
                    "p95 training-step time per NCCL group.",
                ),
                panel(
                    "framework-allreduce-p95",
                    "All-reduce p95 against the baseline",
                    "s",
                    [
                        (f"{FR.GROUP_ALLREDUCE_P95}{sel}", group_legend),
                        (
                            f"{FR.GROUP_ALLREDUCE_P95}{sel} offset {fw.thresholds.baseline_offset}",
                            f"{group_legend} {fw.thresholds.baseline_offset} ago",
                        ),
                    ],
                    "The drill-down step from framework to hardware: compare with NVLink "
                    "throughput.",
                ),
            ),
        )


def _alternation(names: Iterable[str]) -> str:
    return "|".join(sorted(names))
