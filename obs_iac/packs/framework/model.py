"""The blueprint's ``framework=`` section: how a service trains, and how its spans
reach Prometheus."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from obs_iac.blueprint.models import BlueprintModel

# A stage becomes a span name and then a `span_name` label value that rules and
# dashboards match on: keep it short, bounded and free of characters that need
# quoting anywhere (PromQL strings, YAML, Grafana legends).
SPAN_NAME_PATTERN = r"^[a-z][a-z0-9_.]{0,62}$"
SpanName = Annotated[str, StringConstraints(pattern=SPAN_NAME_PATTERN)]

VERSION = r"^\d+\.\d+\.\d+$"
FEATURE_GATE = r"^[+-]?[A-Za-z][A-Za-z0-9_.]*$"
DURATION = r"^[1-9][0-9]*(m|h|d|w)$"

DEFAULT_STAGES = ("data_load", "forward", "backward", "allreduce", "optimizer")


class FrameworkThresholds(BlueprintModel):
    """When the framework alerts fire."""

    data_load_share: float = Field(
        default=0.3,
        gt=0,
        lt=1,
        description="TrainingDataLoaderStarvingGpu: share of step time in the data-loading "
        "stage above which the loader is suspect (0-1).",
    )
    gpu_utilization_low: float = Field(
        default=0.5,
        gt=0,
        lt=1,
        description="TrainingDataLoaderStarvingGpu: ... while the rank's GPU is below this "
        "utilisation (0-1 ratio of gpu:dcgm_gpu_utilization:ratio).",
    )
    allreduce_regression_ratio: float = Field(
        default=1.5,
        gt=1,
        description="NcclAllreduceP95Regression: p95 all-reduce time above this multiple of "
        "the baseline.",
    )
    allreduce_min_seconds: float = Field(
        default=0.01,
        ge=0,
        description="NcclAllreduceP95Regression: ignore p95 all-reduce times below this.",
    )
    baseline_offset: str = Field(
        default="1d",
        pattern=DURATION,
        description="How far back the all-reduce baseline is taken (PromQL offset).",
    )
    straggler_ratio: float = Field(
        default=1.3,
        gt=1,
        description="TrainingStragglerRank: a rank's compute time per step above this "
        "multiple of its NCCL group's median.",
    )


class Framework(BlueprintModel):
    """A distributed training job: ranks, step stages, and the OpenTelemetry wiring."""

    framework: Literal["pytorch"] = Field(default="pytorch", description="Training framework.")
    distributed_backend: Literal["nccl"] = Field(
        default="nccl", description="torch.distributed backend of the collectives."
    )
    world_size: int = Field(ge=1, le=100_000, description="Number of ranks (processes).")
    ranks_per_node: int = Field(
        default=8, ge=1, le=64, description="Ranks (and GPUs) per node; one GPU per rank."
    )
    step_span: SpanName = Field(
        default="train_step", description="Name of the parent span around one training step."
    )
    stages: tuple[SpanName, ...] = Field(
        default=DEFAULT_STAGES,
        min_length=1,
        description="Child spans of a training step, in order; each is a span name.",
    )
    data_load_stage: SpanName = Field(
        default="data_load", description="The stage that waits for the input pipeline."
    )
    allreduce_stage: SpanName = Field(
        default="allreduce", description="The stage that runs the gradient collective."
    )
    collector_version: str = Field(
        default="0.160.0",
        pattern=VERSION,
        description="opentelemetry-collector-contrib release running the spanmetrics connector.",
    )
    feature_gates: tuple[Annotated[str, StringConstraints(pattern=FEATURE_GATE)], ...] = Field(
        default=(),
        description="The collector's --feature-gates flags (e.g. "
        "'-connector.spanmetrics.includeCollectorInstanceID'); some change series names.",
    )
    spanmetrics_namespace: str = Field(
        default="traces.span.metrics",
        pattern=r"^[a-z][a-z0-9_.]{0,62}$",
        description="The spanmetrics connector's namespace (prefix of the metric names).",
    )
    duration_unit: Literal["ms", "s"] = Field(
        default="ms", description="Unit of the connector's duration histogram."
    )
    resource_attributes: Literal["auto", "prometheus-otlp", "collector-exporter"] = Field(
        default="auto",
        description="How resource attributes reach Prometheus: Prometheus's OTLP receiver "
        "with otlp.promote_resource_attributes (needs prometheus_min_version 2.55 or "
        "later), or the collector's prometheus exporter with resource_constant_labels "
        "(scraped; any Prometheus). 'auto' takes the OTLP route when prometheus_min_version "
        "allows it and the scraped exporter otherwise.",
    )
    prometheus_otlp_endpoint: str = Field(
        default="http://prometheus-operated.monitoring.svc:9090/api/v1/otlp",
        pattern=r"^https?://[^\s\"'<>]+$",
        description="prometheus-otlp: where the collector sends metrics.",
    )
    collector_metrics_target: str = Field(
        default="otel-collector.monitoring.svc:8889",
        pattern=r"^[A-Za-z0-9.\-]+:[0-9]{1,5}$",
        description="collector-exporter: host:port Prometheus scrapes the exporter at.",
    )
    step_time_budget_seconds: float = Field(
        gt=0, le=86_400, description="SLA budget for the p95 training-step time, in seconds."
    )
    thresholds: FrameworkThresholds = Field(
        default_factory=FrameworkThresholds, description="When the framework alerts fire."
    )
