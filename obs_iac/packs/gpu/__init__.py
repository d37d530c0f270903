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

from dataclasses import dataclass
from functools import cache
from typing import ClassVar

from pydantic import BaseModel

from obs_iac import conventions
from obs_iac.blueprint.models import GpuFleet
from obs_iac.catalog import dcgm
from obs_iac.config import version_tuple
from obs_iac.conventions import Records
from obs_iac.diagnostics import Diagnostic, Severity
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
    template_literal,
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
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ECC_DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
NVLINK_TX = "DCGM_FI_PROF_NVLINK_TX_BYTES"
NVLINK_RX = "DCGM_FI_PROF_NVLINK_RX_BYTES"

# Traffic below this is not worth paging about when it drops (bytes/s).
NVLINK_MIN_TRAFFIC = 1e8
# The last exporter release whose host label is `Hostname`; later builds say `hostname`.
LAST_CAPITAL_HOSTNAME = (4, 8, 2)


def template_label(name: str) -> str:
    """An alert template reference to a label, valid for classic and UTF-8 names."""
    if name.isidentifier():
        return f"{{{{ $labels.{name} }}}}"
    return f'{{{{ index $labels "{name}" }}}}'


def host_label(fleet: GpuFleet) -> str:
    return (
        "Hostname" if version_tuple(fleet.exporter_version) <= LAST_CAPITAL_HOSTNAME else "hostname"
    )


def native_labels(fleet: GpuFleet) -> tuple[str, ...]:
    """Labels dcgm-exporter (and the scrape) put on GPU metrics for this fleet."""
    return _native_labels(fleet.exporter_version, fleet.honor_labels)


@cache
def _native_labels(exporter_version: str, honor_labels: bool) -> tuple[str, ...]:
    host = "Hostname" if version_tuple(exporter_version) <= LAST_CAPITAL_HOSTNAME else "hostname"
    labels = {"gpu", "UUID", "device", "modelName", host, "job", "instance"}
    if version_tuple(exporter_version) >= (3, 5, 0):
        labels.add("pci_bus_id")
    workload = ("pod", "namespace", "container")
    if honor_labels:
        labels.update(workload)
    else:
        # honorLabels: false renames the exporter's workload labels, and pod/namespace/
        # container then describe the exporter pod itself (plus the ServiceMonitor's own).
        labels.update(f"exported_{w}" for w in workload)
        labels.update((*workload, "service", "endpoint"))
    return tuple(sorted(labels))


def canonical_labels(naming: LabelNaming) -> tuple[str, ...]:
    return tuple(
        naming.prom(k) for k in (SLA_ID, GPU_ID, HOST, K8S_NAMESPACE, K8S_POD, K8S_CONTAINER)
    )


def field_labels(name: str, fleet: GpuFleet, naming: LabelNaming) -> tuple[str, ...]:
    return _field_labels(name, fleet.exporter_version, fleet.honor_labels, naming)


@cache
def _field_labels(
    name: str, exporter_version: str, honor_labels: bool, naming: LabelNaming
) -> tuple[str, ...]:
    labels = set(_native_labels(exporter_version, honor_labels)) | set(canonical_labels(naming))
    if name == XID and version_tuple(exporter_version) >= (3, 4, 0):
        labels.update(("err_code", "err_msg"))
    if name == "DCGM_EXP_XID_ERRORS_COUNT":
        labels.update(("window_size_in_ms", "xid"))
    return tuple(sorted(labels))


def relabel_rules(fleet: GpuFleet, naming: LabelNaming) -> tuple[RelabelRule, ...]:
    workload = "" if fleet.honor_labels else "exported_"
    rules = [
        RelabelRule(
            source_labels=("device",),
            regex="(nvidia[0-9]+)",
            target_label=naming.prom(GPU_ID),
            replacement="$1",
        ),
        RelabelRule(
            source_labels=(host_label(fleet),),
            regex="(.+)",
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


@dataclass(frozen=True)
class _TestSeries:
    """Labels of one synthetic GPU as dcgm-exporter + relabelling would present it."""

    labels: dict[str, str]

    def series(self, metric: str) -> str:
        # Escaped like any PromQL literal: a GPU model string may hold quotes or newlines.
        inner = ", ".join(
            f"{k if is_classic_label_name(k) else promql_string(k)}={promql_string(v)}"
            for k, v in sorted(self.labels.items())
        )
        return f"{metric}{{{inner}}}"


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
            fields.append(
                CollectorField(
                    name=name,
                    prometheus_type=info.prometheus_type,
                    help=info.exporter_help,
                    reason=reasons[name],
                )
            )
            if info.prometheus_type != "label":
                out.metrics.append(
                    MetricSpec(
                        name=name,
                        type=MetricType(info.prometheus_type),
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
        sample = _TestSeries(self._test_labels(fleet, naming, svc.sla_id))

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
                    # User text goes through template_literal: annotations are Go
                    # templates, and a stray "{{" must neither break nor change them.
                    "runbook_url": template_literal(
                        conventions.runbook_url(svc.runbook_base_url, name)
                    ),
                    "sla_objective": template_literal(svc.objective),
                    "summary": summary,
                },
                tests=tuple(tests),
            )

        expected = {k: v for k, v in sample.labels.items()}

        def case(name: str, inputs: dict[str, str], eval_time: str, fire: bool) -> AlertTestCase:
            return AlertTestCase(
                name=name,
                input_series=tuple((sample.series(m), v) for m, v in sorted(inputs.items())),
                eval_time=eval_time,
                expect_firing=fire,
                exp_labels=expected if fire else {},
            )

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
                # The field holds the *last* XID code and keeps it after the error, so
                # "> 0" alone would fire forever after one XID; a change in the last 10
                # minutes marks a new one.
                f"{XID}{sel} > 0\nand\nchanges({XID}{sel}[10m]) > 0",
                "critical",
                f"{where} reported an XID error",
                f"{where} reported a new XID error in the last 10 minutes; {XID} holds the "
                "last XID code. See NVIDIA's XID catalogue (e.g. 79: fallen off the bus, "
                "48: double-bit ECC).",
                "0s",
                [
                    case("XID 79 fires", {XID: "0 0 0 79 79 79"}, "5m", True),
                    case("no XID does not fire", {XID: "0x5"}, "5m", False),
                    case("an old XID does not fire forever", {XID: "0 79x25"}, "20m", False),
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

    @staticmethod
    def _test_labels(fleet: GpuFleet, naming: LabelNaming, sla_id: str) -> dict[str, str]:
        labels = {
            "gpu": "0",
            "UUID": "GPU-8d4c1f5e-2b7a-4c1e-9f00-3a6b5c4d2e10",
            "device": "nvidia0",
            "modelName": fleet.model,
            host_label(fleet): "gpu-node-1",
            "job": "dcgm-exporter",
            "instance": "10.0.0.1:9400",
            naming.prom(SLA_ID): sla_id,
            naming.prom(GPU_ID): "nvidia0",
            naming.prom(HOST): "gpu-node-1",
        }
        return labels


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
