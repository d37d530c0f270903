"""What the spanmetrics connector produces for one service, and what must be wired so
the canonical keys arrive in Prometheus as labels.

Two facts decide the label set (facts.md section 5):
- the connector copies each configured *dimension* onto the data points, looking it
  up in span attributes first and resource attributes second; data-point attributes
  always become labels, on either ingestion path;
- everything else on the resource reaches Prometheus only if it is promoted
  (``otlp.promote_resource_attributes``) or copied by the collector's prometheus
  exporter (``resource_constant_labels``). Both paths leave an existing data-point
  label alone (Prometheus: createAttributes skips promoted keys already present; the
  exporter overwrites with the same value), so promoting the dimensions too is safe
  and keeps them on any other OTel metric the job emits.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import quote

from obs_iac.labels import (
    GPU_ID,
    HOST,
    NCCL_GROUP,
    NCCL_RANK,
    PYTORCH_RANK,
    SLA_ID,
    LabelNaming,
    classic_name,
)
from obs_iac.packs.framework import versions
from obs_iac.packs.framework.model import Framework
from obs_iac.plan.model import IR

# The canonical keys every framework series carries, as spanmetrics dimensions.
DIMENSIONS: tuple[str, ...] = (SLA_ID, HOST, GPU_ID, PYTORCH_RANK, NCCL_GROUP, NCCL_RANK)
# A training process's identity: the "rank" level of the recording rules.
RANK_KEYS: tuple[str, ...] = DIMENSIONS

# Connector default explicit buckets (ms), facts.md section 5.
DEFAULT_BUCKETS_MS: tuple[int, ...] = (
    2, 4, 6, 8, 10, 50, 100, 200, 400, 800, 1000, 1400, 2000, 5000, 10000, 15000,
)  # fmt: skip
EXTRA_BUCKETS_MS: tuple[int, ...] = (30000, 60000, 120000, 300000, 600000, 1800000, 3600000)

# Per-process attributes come from the launcher: (key, environment variable).
PROCESS_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    (HOST, "OBS_IAC_HOST_NAME"),
    (GPU_ID, "OBS_IAC_GPU_ID"),
    (PYTORCH_RANK, "RANK"),
    (NCCL_GROUP, "OBS_IAC_NCCL_GROUP_ID"),
    (NCCL_RANK, "OBS_IAC_NCCL_RANK"),
)
SERVICE_INSTANCE_PLACEHOLDER = "${OBS_IAC_HOST_NAME}-rank${RANK}"

# SDKs percent-decode values (spec PR #2670), so escaping more than W3C Baggage needs
# is harmless, while escaping less breaks parsing (`,` `=` `%` space) or the shell that
# sources the env file (`$` backquote `"` `\\`). Keep only unreserved characters raw.
_BAGGAGE_SAFE = "-._~"


def encode_value(value: str) -> str:
    return quote(value, safe=_BAGGAGE_SAFE)


class SpanMetricNames(IR):
    calls: str
    bucket: str
    sum: str
    count: str
    unit_scale: int  # divide by this to get seconds


class OtelWiring(IR):
    """plan.extensions['framework/otel-wiring']: one per service with a framework section."""

    service: str
    sla_id: str
    service_name: str
    collector_version: str
    component_type: str
    connector_id: str
    otlp_http_type: str
    namespace: str
    duration_unit: Literal["ms", "s"]
    buckets_ms: tuple[int, ...]
    dimensions: tuple[str, ...]
    exclude_dimensions: tuple[str, ...]
    feature_gates: tuple[str, ...]
    resource_attributes: Literal["prometheus-otlp", "collector-exporter"]
    promote: tuple[str, ...]
    prometheus_otlp_endpoint: str
    collector_metrics_target: str
    static_attributes: tuple[tuple[str, str], ...]
    process_attributes: tuple[tuple[str, str], ...]
    names: SpanMetricNames
    labels: tuple[str, ...]


def metric_names(fw: Framework) -> SpanMetricNames:
    namespace = versions.effective_namespace(
        fw.collector_version, fw.spanmetrics_namespace, fw.feature_gates
    )
    prefix = classic_name(namespace) + "_" if namespace else ""
    unit = "milliseconds" if fw.duration_unit == "ms" else "seconds"
    duration = f"{prefix}duration_{unit}"
    return SpanMetricNames(
        calls=f"{prefix}calls_total",
        bucket=f"{duration}_bucket",
        sum=f"{duration}_sum",
        count=f"{duration}_count",
        unit_scale=1000 if fw.duration_unit == "ms" else 1,
    )


def status_label(fw: Framework) -> tuple[str, str]:
    """(label name, value of an errored span) under the collector's gates."""
    entry = versions.table()["gates"]["status_code_otel_prefix"]
    if versions.gate("status_code_otel_prefix").enabled(fw.collector_version, fw.feature_gates):
        return str(entry["label"]), str(entry["error_value"])
    return "status_code", "STATUS_CODE_ERROR"


def series_labels(fw: Framework, naming: LabelNaming) -> tuple[str, ...]:
    """Every label a spanmetrics series carries in Prometheus (without ``le``)."""
    labels = {"service_name", "span_name", "span_kind", status_label(fw)[0], "job", "instance"}
    labels.update(naming.prom(k) for k in DIMENSIONS)
    gate = versions.gate("include_collector_instance_id")
    if gate.enabled(fw.collector_version, fw.feature_gates):
        labels.add(str(versions.table()["gates"]["include_collector_instance_id"]["label"]))
    if fw.resource_attributes == "collector-exporter":
        # The prometheus exporter writes the scope's name, version and schema URL; the
        # connector's scope has only a name, and Prometheus drops the empty labels
        # (obs_iac/catalog/spanmetrics_shapes.toml).
        labels.add("otel_scope_name")
    return tuple(sorted(labels))


def buckets_ms(budget_seconds: float) -> tuple[int, ...]:
    """Default buckets, extended so four times the step budget is still resolvable."""
    need = budget_seconds * 4000
    extra: list[int] = []
    for bound in EXTRA_BUCKETS_MS:
        if DEFAULT_BUCKETS_MS[-1] >= need or (extra and extra[-1] >= need):
            break
        extra.append(bound)
    return (*DEFAULT_BUCKETS_MS, *extra)


def build(service: str, sla_id: str, fw: Framework, naming: LabelNaming) -> OtelWiring:
    component = versions.component_type(fw.collector_version)
    return OtelWiring(
        service=service,
        sla_id=sla_id,
        service_name=service,
        collector_version=fw.collector_version,
        component_type=component,
        connector_id=f"{component}/obs-iac-{service}",
        otlp_http_type=versions.otlp_http_exporter_type(fw.collector_version),
        namespace=fw.spanmetrics_namespace,
        duration_unit=fw.duration_unit,
        buckets_ms=buckets_ms(fw.step_time_budget_seconds),
        dimensions=DIMENSIONS,
        exclude_dimensions=(),
        feature_gates=fw.feature_gates,
        # The framework pack resolves 'auto' (resolve_route) before building.
        resource_attributes=(
            "prometheus-otlp"
            if fw.resource_attributes == "prometheus-otlp"
            else "collector-exporter"
        ),
        promote=tuple(sorted(DIMENSIONS)),
        prometheus_otlp_endpoint=fw.prometheus_otlp_endpoint,
        collector_metrics_target=fw.collector_metrics_target,
        static_attributes=((SLA_ID, encode_value(sla_id)),),
        process_attributes=PROCESS_ATTRIBUTES,
        names=metric_names(fw),
        labels=series_labels(fw, naming),
    )
