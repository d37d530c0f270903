"""The GPU pack: DCGM fields, canonical relabelling, GPU recording rules and alerts.

dcgm-exporter knows nothing of SLAs; the canonical labels come from three places:
- ``resource_gpu_id``, ``host_name``, ``k8s_*``: relabelled from the exporter's native
  labels (``device``, ``Hostname``/``hostname``, ``exported_*`` or plain pod labels);
- ``business_sla_id``: the workload pod's ``business.sla_id`` label, which the exporter
  copies onto GPU metrics (as ``business_sla_id``) when
  ``DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS=true``.
The pack's own rules only ever use canonical labels.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import ClassVar

from pydantic import BaseModel

from obs_iac import conventions, relabel
from obs_iac.blueprint.models import GpuFleet
from obs_iac.catalog import dcgm, exporter_shapes
from obs_iac.config import version_tuple
from obs_iac.conventions import Records
from obs_iac.diagnostics import Diagnostic, InputError, Severity
from obs_iac.escaping import template_text
from obs_iac.labels import (
    GPU_ID,
    HOST,
    K8S_CONTAINER,
    K8S_NAMESPACE,
    K8S_POD,
    SLA_ID,
    LabelNaming,
    is_classic_label_name,
    promql_string,
)
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plan.model import (
    AlertRule,
    AlertTestCase,
    CollectorField,
    CollectorSet,
    DashboardRow,
    MetricSpec,
    MetricType,
    Panel,
    PanelQuery,
    RecordingRule,
    RelabelRule,
    RelabelSet,
    RuleGroup,
)
from obs_iac.plugins import Contribution, Pack, PackContext
from obs_iac.promql import PromQLSyntaxError, referenced_metrics

PACK = "gpu"

# Fields the pack's own rules read. Old names on purpose: every exporter release up to
# 4.5.3-4.8.2 accepts them, while the DCGM 4.6 names break those exporters.
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER = "DCGM_FI_DEV_POWER_USAGE"
XID = "DCGM_FI_DEV_XID_ERRORS"
# The exporter's XID count pseudo-field and its window label (exporter_shapes.toml).
XID_COUNT = exporter_shapes.XID_COUNT_FIELD
XID_WINDOW_LABEL = "window_size_in_ms"
# The exporter's own CSV calls the XID count a counter, but it counts over a sliding
# window and falls again (expcollector.go getMetrics): a gauge, which the exporter writes
# as given (it does not check pseudo-fields' types).
TYPE_OVERRIDES = {XID_COUNT: "gauge"}
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
NVLINK_TX = "DCGM_FI_PROF_NVLINK_TX_BYTES"
NVLINK_RX = "DCGM_FI_PROF_NVLINK_RX_BYTES"

# Traffic below this is not worth paging about when it drops (bytes/s).
NVLINK_MIN_TRAFFIC = 1e8


def template_label(name: str) -> str:
    """An alert template reference to a label, valid for classic and UTF-8 names."""
    if name.isidentifier():
        return f"{{{{ $labels.{name} }}}}"
    return f'{{{{ index $labels "{name}" }}}}'


def exporter_shape(fleet: GpuFleet) -> exporter_shapes.ExporterShape:
    """The catalogue's shape of the fleet's exporter (an unknown release is a user error)."""
    return exporter_shapes.shape(fleet.dcgm_exporter_version)


def host_label(fleet: GpuFleet) -> str:
    return exporter_shape(fleet).host_label


# The scrape target a ServiceMonitor for the dcgm-exporter chart gives every sample: test
# inputs go through the same target-label merge Prometheus does (honor_labels decides
# whether the exporter's pod/namespace/container survive or become exported_*).
SCRAPE_TARGET = {
    "job": "dcgm-exporter",
    "instance": "10.0.0.1:9400",
    "namespace": "gpu-operator",
    "pod": "nvidia-dcgm-exporter-x7k2p",
    "container": "nvidia-dcgm-exporter",
    "service": "nvidia-dcgm-exporter",
    "endpoint": "gpu-metrics",
}
TEST_HOST = "gpu-node-1"


def test_device(fleet: GpuFleet, gpu: int = 0) -> exporter_shapes.GpuDevice:
    return exporter_shapes.GpuDevice(
        gpu=gpu,
        uuid=f"GPU-8d4c1f5e-2b7a-4c1e-9f00-3a6b5c4d2e1{gpu}",
        model_name=fleet.model,
        hostname=TEST_HOST,
        pci_bus_id=f"00000000:{7 + gpu:02X}:00.0",
    )


def test_pod(sla_id: str) -> exporter_shapes.PodAttribution:
    # business_sla_id reaches GPU series as a pod label (ENABLE_POD_LABELS): the exporter
    # writes the pod's `business.sla_id` label sanitised to business_sla_id.
    return exporter_shapes.PodAttribution(
        namespace="ml-train",
        pod="trainer-0",
        container="trainer",
        labels={"business_sla_id": sla_id},
    )


def stored_series(
    metric: str,
    fleet: GpuFleet,
    naming: LabelNaming,
    sla_id: str,
    *,
    gpu: int = 0,
    value_labels: dict[str, str] | None = None,
) -> dict[str, str]:
    """The labels Prometheus stores for one GPU's ``metric``: the exporter's series from
    the exporter-shape catalogue, merged with the scrape target's labels, then put
    through the pack's own metric_relabel_configs."""
    raw = exporter_shape(fleet).series(
        metric,
        test_device(fleet, gpu),
        kubernetes=test_pod(sla_id),
        honor_labels=True,
        value_labels=value_labels,
    )
    merged = relabel.merge_target_labels(raw, SCRAPE_TARGET, honor_labels=fleet.honor_labels)
    out = relabel.apply(merged, relabel_rules(fleet, naming))
    assert out is not None  # the pack's relabelling never drops a series
    return out


def canonical_labels(naming: LabelNaming) -> tuple[str, ...]:
    return tuple(
        naming.prom(k) for k in (SLA_ID, GPU_ID, HOST, K8S_NAMESPACE, K8S_POD, K8S_CONTAINER)
    )


def field_labels(name: str, fleet: GpuFleet, naming: LabelNaming) -> tuple[str, ...]:
    return _field_labels(name, fleet.dcgm_exporter_version, fleet.honor_labels, naming)


@cache
def _field_labels(
    name: str, exporter_version: str, honor_labels: bool, naming: LabelNaming
) -> tuple[str, ...]:
    """Every label a stored series of the field can carry (a MIG device, a driver-version
    label row and an XID code included), derived from the catalogue like test inputs."""
    shape = exporter_shapes.shape(exporter_version)
    device = exporter_shapes.GpuDevice(
        gpu=0,
        uuid="GPU-0",
        model_name="GPU",
        hostname=TEST_HOST,
        pci_bus_id="00000000:07:00.0",
        mig_profile="1g.10gb",
        mig_instance_id="1",
        driver_version="535.129.03",
    )
    given = {label: "0" for label in shape.field_labels(name) if label != "err_msg"}
    raw = shape.series(
        name, device, kubernetes=test_pod("x"), honor_labels=True, value_labels=given
    )
    merged = relabel.merge_target_labels(raw, SCRAPE_TARGET, honor_labels=honor_labels)
    rules = _relabel_rules(honor_labels, naming)
    out = relabel.apply(merged, rules) or {}
    return tuple(sorted(set(out) | set(canonical_labels(naming))))


def relabel_rules(fleet: GpuFleet, naming: LabelNaming) -> tuple[RelabelRule, ...]:
    return _relabel_rules(fleet.honor_labels, naming)


@cache
def _relabel_rules(honor_labels: bool, naming: LabelNaming) -> tuple[RelabelRule, ...]:
    workload = "" if honor_labels else "exported_"
    rules = [
        RelabelRule(
            source_labels=("device",),
            regex="(nvidia[0-9]+)",
            target_label=naming.prom(GPU_ID),
            replacement="$1",
        ),
        # Both spellings of the host label: dcgm-exporter up to 4.5.3-4.8.2 writes
        # `Hostname`, later builds `hostname` (exporter_shapes.toml, d5e5f51). Only one
        # is ever set, so the joined value is "<host>;" or ";<host>": one rule that holds
        # across an exporter upgrade, whichever side of the rename a node is on.
        RelabelRule(
            source_labels=("Hostname", "hostname"),
            regex=";?([^;]+);?",
            target_label=naming.prom(HOST),
            replacement="$1",
        ),
    ]
    for native, key in (
        ("namespace", K8S_NAMESPACE),
        ("pod", K8S_POD),
        ("container", K8S_CONTAINER),
    ):
        rules.append(
            RelabelRule(
                source_labels=(f"{workload}{native}",),
                regex="(.+)",
                target_label=naming.prom(key),
                replacement="$1",
            )
        )
    if naming.prom(SLA_ID) != "business_sla_id":
        rules.append(
            RelabelRule(
                source_labels=("business_sla_id",),
                regex="(.+)",
                target_label=naming.prom(SLA_ID),
                replacement="$1",
            )
        )
    return tuple(rules)


def series_selector(metric: str, labels: dict[str, str]) -> str:
    """A promtool input-series selector; escaped like any PromQL literal (a GPU model
    string may hold quotes or newlines)."""
    inner = ", ".join(
        f"{k if is_classic_label_name(k) else promql_string(k)}={promql_string(v)}"
        for k, v in sorted(labels.items())
    )
    return f"{metric}{{{inner}}}"


# One input of a test: (metric, labels its values decide, e.g. xid, promtool values).
TestInput = tuple[str, dict[str, str] | None, str]


class GpuPack(Pack):
    name: ClassVar[str] = PACK
    description: ClassVar[str] = (
        "DCGM collectors, canonical relabelling, GPU recording rules, waste rate and "
        "hardware alerts."
    )
    sections: ClassVar[dict[str, type[BaseModel]]] = {}

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        fleet = service.service.gpu
        naming = ctx.naming
        out = Contribution()
        try:
            exporter_shape(fleet)
        except InputError as exc:
            out.diagnostics.extend(
                replace(
                    d,
                    location=service.location("gpu", "dcgm_exporter_version"),
                    object_path=(service.name, "gpu", "dcgm_exporter_version"),
                    origin=PACK,
                )
                for d in exc.diagnostics
            )
            return out
        out.diagnostics.extend(self._check_fields(service, fleet))
        if out.diagnostics:
            return out
        out.relabel_sets.append(
            RelabelSet(
                service=service.name, source="dcgm-exporter", rules=relabel_rules(fleet, naming)
            )
        )
        records, alerts = self._rules(service, ctx)
        out.rule_groups.append(
            RuleGroup(
                name=conventions.rule_group(service.name, PACK),
                service=service.name,
                pack=PACK,
                rules=(*records, *alerts),
                source=service.source,
            )
        )
        out.dashboard_rows.append(self._dashboard_row(service, ctx))
        per_gpu = tuple(sorted(set(field_labels(GPU_UTIL, fleet, naming))))
        for rule in records:
            per_sla = rule.record.startswith("business_sla_id:")
            out.metrics.append(
                MetricSpec(
                    name=rule.record,
                    type=MetricType.GAUGE,
                    unit=rule.record.rsplit(":", 1)[1],
                    labels=(naming.prom(SLA_ID),) if per_sla else per_gpu,
                    source="recording",
                    help=f"Recorded by the {PACK} pack.",
                )
            )
        return out

    def finalize(
        self, service: ServiceBlueprint, draft: Contribution, ctx: PackContext
    ) -> Contribution:
        """Derives the collector set from every query any pack generated."""
        if any(d.severity is Severity.ERROR for d in draft.diagnostics):
            # expand() already reported why this service has no usable field set.
            return Contribution()
        fleet = service.service.gpu
        catalog = dcgm.catalog()
        reasons: dict[str, str] = {}
        for owner, expr in draft.queries():
            try:
                metrics = referenced_metrics(expr)
            except PromQLSyntaxError:
                continue  # promql/syntax reports it, at the rule that holds it
            for metric in sorted(metrics):
                if metric in catalog:
                    reasons.setdefault(metric, owner)
        for extra in fleet.extra_fields:
            if extra in catalog:
                reasons.setdefault(extra, "extra")
        fields = []
        out = Contribution()
        for name in sorted(reasons, key=lambda n: (catalog[n].field_id, n)):
            info = catalog[name]
            if not dcgm.accepted(info, fleet.dcgm_exporter_version):
                out.diagnostics.append(
                    Diagnostic(
                        "gpu/field-not-accepted",
                        Severity.ERROR,
                        f"{reasons[name]} needs {name}, which dcgm-exporter "
                        f"{fleet.dcgm_exporter_version} does not accept",
                        hint="upgrade gpu.dcgm_exporter_version",
                        location=service.location("gpu", "dcgm_exporter_version"),
                        object_path=(service.name, "gpu"),
                        origin=PACK,
                    )
                )
                continue
            prom_type = TYPE_OVERRIDES.get(name, info.prometheus_type)
            fields.append(
                CollectorField(
                    name=name,
                    prometheus_type=prom_type,
                    help=info.exporter_help,
                    reason=reasons[name],
                )
            )
            if prom_type != "label":
                out.metrics.append(
                    MetricSpec(
                        name=name,
                        type=MetricType(prom_type),
                        unit=_unit(info),
                        labels=field_labels(name, fleet, ctx.naming),
                        source="dcgm",
                        help=info.help,
                    )
                )
        out.collector_sets.append(
            CollectorSet(
                service=service.name,
                exporter_version=fleet.dcgm_exporter_version,
                fields=tuple(fields),
            )
        )
        return out

    @staticmethod
    def _dashboard_row(service: ServiceBlueprint, ctx: PackContext) -> DashboardRow:
        naming = ctx.naming
        sel = "{" + naming.matcher(SLA_ID, service.service.sla_id) + "}"
        legend = f"{{{{{naming.prom(HOST)}}}}}/{{{{{naming.prom(GPU_ID)}}}}}"

        def panel(
            key: str, title: str, unit: str, expr: str, desc: str, legend: str = legend
        ) -> Panel:
            return Panel(
                key=key,
                title=title,
                kind="timeseries",
                unit=unit,
                description=desc,
                queries=(PanelQuery(expr=expr, legend=legend),),
            )

        panels = [
            panel(
                "gpu-utilization",
                "GPU utilisation",
                "percentunit",
                f"{Records.GPU_UTILIZATION}{sel}",
                "DCGM_FI_DEV_GPU_UTIL as a 0-1 ratio.",
            ),
            panel(
                "gpu-waste",
                "GPU waste rate (idle share)",
                "percentunit",
                f"{Records.SLA_GPU_WASTE}{sel}",
                "Share of GPU time below the idle threshold over 5 minutes.",
                # One series per SLA: it has no host or GPU to name.
                legend=f"{{{{{naming.prom(SLA_ID)}}}}}",
            ),
            panel(
                "framebuffer-used",
                "Framebuffer used",
                "bytes",
                f"{Records.FRAMEBUFFER_USED_BYTES}{sel}",
                "GPU memory in use.",
            ),
            panel(
                "temperature",
                "GPU temperature",
                "celsius",
                f"{Records.TEMPERATURE}{sel}",
                "Core temperature per GPU.",
            ),
            panel(
                "xid-errors",
                "XID errors (last code)",
                "none",
                f"{XID}{sel}",
                "Last XID error code per GPU; 0 means none.",
            ),
        ]
        if service.service.gpu.profiling:
            panels += [
                panel(
                    "sm-active",
                    "SM active",
                    "percentunit",
                    f"{Records.SM_ACTIVE}{sel}",
                    "Share of cycles with at least one warp on an SM (DCP).",
                ),
                panel(
                    "nvlink-throughput",
                    "NVLink throughput",
                    "Bps",
                    f"{Records.NVLINK_THROUGHPUT}{sel}",
                    "NVLink TX + RX bytes per second.",
                ),
                panel(
                    "nvlink-change-1m",
                    "NVLink throughput vs 1 minute earlier",
                    "percentunit",
                    f"{Records.NVLINK_THROUGHPUT}{sel} / ({Records.NVLINK_THROUGHPUT}{sel} "
                    "offset 1m) - 1",
                    "Negative values are drops; the drill-down step from framework to hardware.",
                ),
            ]
        return DashboardRow(
            service=service.name,
            layer="hardware",
            title="Hardware (DCGM)",
            pack=PACK,
            panels=tuple(panels),
        )

    @staticmethod
    def _check_fields(service: ServiceBlueprint, fleet: GpuFleet) -> list[Diagnostic]:
        catalog = dcgm.catalog()
        problems = []
        for index, name in enumerate(fleet.extra_fields):
            path = (service.name, "gpu", f"extra_fields[{index}]")
            info = catalog.get(name)
            if info is not None and (
                dcgm.accepted(info, fleet.dcgm_exporter_version)
                and (fleet.profiling or not info.is_profiling)
            ):
                continue  # the common case: no diagnostic, so no need to locate the field
            # Locating walks the blueprint's syntax tree: only worth it for a diagnostic.
            where = service.location("gpu", "extra_fields", index)
            if info is None:
                close = dcgm.suggest(name, fleet.dcgm_exporter_version)
                problems.append(
                    Diagnostic(
                        "gpu/unknown-field",
                        Severity.ERROR,
                        f"gpu.extra_fields[{index}]: {name!r} is not a DCGM field",
                        hint=(f"did you mean {', '.join(close)}? " if close else "")
                        + "field names come from dcgm_fields.h; `obs-iac fields` lists them",
                        location=where,
                        object_path=path,
                        origin=PACK,
                    )
                )
                continue
            if not dcgm.accepted(info, fleet.dcgm_exporter_version):
                alias = dcgm.accepted_alias(info, fleet.dcgm_exporter_version)
                problems.append(
                    Diagnostic(
                        "gpu/field-not-accepted",
                        Severity.ERROR,
                        f"gpu.extra_fields[{index}]: dcgm-exporter "
                        f"{fleet.dcgm_exporter_version} does not know {name!r} and would "
                        "exit with 'could not find DCGM field'",
                        hint=(f"use {alias} (same field id {info.field_id}), or " if alias else "")
                        + "upgrade gpu.dcgm_exporter_version",
                        location=where,
                        object_path=path,
                        origin=PACK,
                    )
                )
            if info.is_profiling and not fleet.profiling:
                problems.append(
                    Diagnostic(
                        "gpu/profiling-disabled",
                        Severity.ERROR,
                        f"gpu.extra_fields[{index}]: {name} is a profiling (DCP) field but "
                        "gpu.profiling is false; the exporter would skip it",
                        hint="set gpu.profiling=True (the exporter needs SYS_ADMIN) or drop "
                        "the field",
                        location=where,
                        object_path=path,
                        origin=PACK,
                    )
                )
        return problems

    def _rules(
        self, service: ServiceBlueprint, ctx: PackContext
    ) -> tuple[list[RecordingRule], list[AlertRule]]:
        svc = service.service
        fleet = svc.gpu
        naming = ctx.naming
        sel = "{" + naming.matcher(SLA_ID, svc.sla_id) + "}"
        idle_percent = round(fleet.idle_threshold * 100, 6)
        records = [
            RecordingRule(record=Records.GPU_UTILIZATION, expr=f"{GPU_UTIL}{sel} / 100"),
            RecordingRule(record=Records.GPU_IDLE, expr=f"{GPU_UTIL}{sel} < bool {idle_percent:g}"),
            RecordingRule(record=Records.FRAMEBUFFER_USED_BYTES, expr=f"{FB_USED}{sel} * 1048576"),
            RecordingRule(
                record=Records.FRAMEBUFFER_USED_RATIO,
                expr=f"{FB_USED}{sel} / ({FB_USED}{sel} + {FB_FREE}{sel})",
            ),
            RecordingRule(record=Records.TEMPERATURE, expr=f"{GPU_TEMP}{sel}"),
            RecordingRule(record=Records.POWER, expr=f"{POWER}{sel}"),
        ]
        if fleet.profiling:
            records += [
                RecordingRule(record=Records.SM_ACTIVE, expr=f"{SM_ACTIVE}{sel}"),
                RecordingRule(record=Records.TENSOR_ACTIVE, expr=f"{TENSOR_ACTIVE}{sel}"),
                RecordingRule(
                    record=Records.NVLINK_THROUGHPUT, expr=f"{NVLINK_TX}{sel} + {NVLINK_RX}{sel}"
                ),
            ]
        by_sla = naming.promql(SLA_ID)
        records += [
            RecordingRule(
                record=Records.SLA_GPU_UTILIZATION,
                expr=f"avg by ({by_sla}) ({Records.GPU_UTILIZATION}{sel})",
            ),
            RecordingRule(
                record=Records.SLA_GPU_WASTE,
                expr=f"avg by ({by_sla}) (avg_over_time({Records.GPU_IDLE}{sel}[5m]))",
            ),
        ]

        gpu_id = naming.prom(GPU_ID)
        host = naming.prom(HOST)
        where = f"GPU {template_label(gpu_id)} on {template_label(host)}"
        static = {"team": svc.team, "service": svc.name, "layer": "hardware"}

        def stored(metric: str, value_labels: dict[str, str] | None = None) -> dict[str, str]:
            return stored_series(metric, fleet, naming, svc.sla_id, value_labels=value_labels)

        def alert(
            name: str,
            expr: str,
            severity: str,
            summary: str,
            description: str,
            for_: str,
            tests: list[AlertTestCase],
            keep_firing_for: str | None = None,
        ) -> AlertRule:
            labels = {**static, "severity": severity}
            return AlertRule(
                alert=name,
                expr=expr,
                **{"for": for_},
                keep_firing_for=keep_firing_for,
                labels=dict(sorted(labels.items())),
                annotations={
                    "description": description,
                    # User text goes through template_text: annotations are Go
                    # templates, and a stray "{{" must neither break nor change them.
                    "runbook_url": conventions.runbook_url(svc.runbook_base_url, name),
                    "sla_objective": template_text(svc.objective),
                    "summary": summary,
                },
                tests=tuple(tests),
            )

        def case(
            name: str,
            inputs: dict[str, str] | list[TestInput],
            eval_time: str,
            fire: bool,
            fired: dict[str, str] | None = None,
        ) -> AlertTestCase:
            """A promtool case whose input series carry exactly the labels Prometheus
            would store for them (catalogue -> scrape -> relabelling); a firing alert
            carries the labels of its first input unless ``fired`` says otherwise."""
            if isinstance(inputs, dict):
                inputs = [(m, None, v) for m, v in sorted(inputs.items())]
            series = tuple((series_selector(m, stored(m, vl)), v) for m, vl, v in inputs)
            first = stored(inputs[0][0], inputs[0][1])
            return AlertTestCase(
                name=name,
                input_series=series,
                eval_time=eval_time,
                expect_firing=fire,
                exp_labels=dict(sorted((fired if fired is not None else first).items()))
                if fire
                else {},
            )

        xid79 = {"xid": "79"}
        # What the exporter serves, a scrape a minute: the GPU's zero series (no `xid`)
        # until XID 79 arrives at 3m; 79 again at 4m (count 2) until the first falls
        # out of the 5-minute window at 8m; gone at 9m (the zero series is back); 79
        # again at 16m. A series the exporter stops serving is marked stale at once.
        xid_timeline: list[TestInput] = [
            (XID_COUNT, xid79, "_ _ _ 1 2 2 2 2 1 stale _ _ _ _ _ _ 1 1 1 1 1"),
            (XID_COUNT, None, "0 0 0 stale _ _ _ _ _ 0 0 0 0 0 0 0 stale"),
        ]
        xid_fired = {k: v for k, v in stored(XID_COUNT, xid79).items() if k != XID_WINDOW_LABEL}

        limit = fleet.temperature_limit_celsius
        alerts = [
            alert(
                "GpuTemperatureHigh",
                f"{Records.TEMPERATURE}{sel} > {limit}",
                "critical",
                f"{where} is above {limit} °C",
                f"{where} has been hotter than {limit} °C for 5 minutes; the GPU will "
                "throttle its clocks and may shut down.",
                "5m",
                [
                    case("hot GPU fires", {GPU_TEMP: f"{limit + 5}x15"}, "10m", True),
                    case("GPU at the limit does not fire", {GPU_TEMP: f"{limit}x15"}, "10m", False),
                ],
            ),
            alert(
                "GpuUtilizationLow",
                f"{Records.GPU_UTILIZATION}{sel} < {fleet.idle_threshold:g}",
                "warning",
                f"{where} is below {idle_percent:g} % utilisation",
                f"{where} has been below {idle_percent:g} % utilisation for 30 minutes: "
                "allocated but wasted. Look for a stalled data loader or a hung collective.",
                "30m",
                [
                    case(
                        "idle GPU fires",
                        {GPU_UTIL: f"{max(idle_percent / 2, 0):g}x40"},
                        "35m",
                        True,
                    ),
                    case("busy GPU does not fire", {GPU_UTIL: "60x40"}, "35m", False),
                ],
            ),
            alert(
                "GpuXidError",
                # The exporter's XID count: per GPU and XID code, how often it was seen in
                # the last window (default 5 minutes; a GPU with none has one zero series
                # without `xid`). A new XID, and the same XID again, both raise it above
                # zero; it falls back once the window has passed. DCGM_FI_DEV_XID_ERRORS
                # cannot do this: from 3.3.6-3.4.2 each code is its own series whose value
                # never changes, and a repeat of the last code changes nothing at all.
                f"max without ({XID_WINDOW_LABEL}) ({XID_COUNT}{sel}) > 0",
                "critical",
                f"{where} reported XID {template_label('xid')}",
                f"{where} reported XID {template_label('xid')} within the exporter's XID "
                "window (5 minutes by default; it resolves when the window has passed). "
                "See NVIDIA's XID catalogue (e.g. 79: fallen off the bus, 48: double-bit ECC).",
                "0s",
                [
                    # One timeline: XID 79 at 3m (and again at 4m, in the window), gone
                    # from 9m to 15m, then the same XID 79 once more at 16m.
                    *(
                        case(name, xid_timeline, at, fire, xid_fired)
                        for name, at, fire in (
                            ("a new XID 79 fires", "3m", True),
                            ("XID 79 again within the window keeps firing", "6m", True),
                            ("an XID past the window does not fire", "12m", False),
                            ("the same XID 79 later fires again", "17m", True),
                        )
                    ),
                    case("no XID does not fire", {XID_COUNT: "0x20"}, "10m", False),
                ],
            ),
            alert(
                "GpuRowRemapFailure",
                f"{ROW_REMAP_FAILURE}{sel} > 0",
                "critical",
                f"{where} failed to remap a memory row",
                f"{where} could not remap a failing memory row; the GPU needs a reset and, "
                "if it recurs, an RMA.",
                "0s",
                [
                    case("failed remap fires", {ROW_REMAP_FAILURE: "0 0 1 1 1"}, "4m", True),
                    case("no failure does not fire", {ROW_REMAP_FAILURE: "0x4"}, "4m", False),
                ],
            ),
            alert(
                "GpuUncorrectableEccErrors",
                f"increase({ECC_DBE}{sel}[10m]) > 0",
                "critical",
                f"{where} had uncorrectable (double-bit) ECC errors",
                f"{where} counted double-bit ECC errors in the last 10 minutes; running jobs "
                "may have read corrupted memory.",
                "0s",
                [
                    case("new ECC errors fire", {ECC_DBE: "0 0 0 2 2 2"}, "5m", True),
                    case("old ECC errors do not fire", {ECC_DBE: "3x15"}, "15m", False),
                ],
            ),
        ]
        if fleet.profiling:
            keep = "5m" if version_tuple(ctx.repo.prometheus_min_version) >= (2, 42) else None
            drop = fleet.nvlink_drop_ratio
            nv = f"{Records.NVLINK_THROUGHPUT}{sel}"
            alerts.append(
                alert(
                    "GpuNvlinkThroughputDrop",
                    f"{nv} < {1 - drop:g} * ({nv} offset 1m)\n"
                    f"and\n({nv} offset 1m) > {NVLINK_MIN_TRAFFIC:g}",
                    "warning",
                    f"NVLink throughput of {where} fell by more than {drop * 100:g} %",
                    f"NVLink throughput of {where} dropped by more than {drop * 100:g} % "
                    "against one minute earlier; check for a degraded link or a stalled "
                    "collective.",
                    "0s",
                    [
                        case(
                            "sudden drop fires",
                            {NVLINK_TX: "2e9x5 1e8x5", NVLINK_RX: "0x10"},
                            "6m",
                            True,
                        ),
                        case(
                            "steady traffic does not fire",
                            {NVLINK_TX: "2e9x10", NVLINK_RX: "1e9x10"},
                            "6m",
                            False,
                        ),
                    ],
                    keep_firing_for=keep,
                )
            )
        return records, alerts


def _unit(info: dcgm.DcgmField) -> str:
    text = info.help.lower()
    for marker, unit in (
        ("(in %)", "percent"),
        ("(in mib)", "mebibytes"),
        ("(in mhz)", "megahertz"),
        ("(in w)", "watts"),
        ("(in c)", "celsius"),
        ("(in mj)", "millijoules"),
        ("bytes per second", "bytes_per_second"),
    ):
        if marker in text:
            return unit
    if info.name.startswith("DCGM_FI_PROF_") and ("ratio" in text or "_ACTIVE" in info.name):
        return "ratio"
    return info.unit.lower() or "none"
