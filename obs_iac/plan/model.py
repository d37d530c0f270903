"""The plan: one frozen, pure-data IR per render.

Packs contribute to it, lint rules read it, generators turn it into artifacts. No I/O,
no clock, no environment: the same blueprints and settings give the same plan.
"""

from __future__ import annotations

import enum
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from obs_iac.escaping import Template
from obs_iac.labels import NamingStrategy


class IR(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourceRef(IR):
    """Where in the user's blueprints an IR object comes from."""

    file: str
    line: int | None = None


class MetricType(enum.StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    SUMMARY = "summary"
    INFO = "info"
    UNKNOWN = "unknown"


class MetricSpec(IR):
    """One series name any expression may touch, with what it carries."""

    name: str
    type: MetricType
    unit: str = Field(description="Unit of the value, e.g. 'ratio', 'bytes', 'percent'.")
    labels: tuple[str, ...] = Field(description="Every label the series carries, sorted.")
    source: str = Field(description="Where it comes from: dcgm, recording, spanmetrics, ...")
    help: str = ""


class AlertTestCase(IR):
    """A promtool unit test: synthetic input, and the alerts expected at one instant."""

    name: str
    interval: str = "1m"
    input_series: tuple[tuple[str, str], ...] = Field(description="(series, values) pairs.")
    eval_time: str
    expect_firing: bool
    exp_labels: dict[str, str] = Field(default_factory=dict)
    evaluation_interval: str | None = Field(
        default=None,
        description="Rule evaluation step for this case when it must differ from the "
        "repository's (a day of history at 1m steps costs promtool minutes); cases with "
        "their own step go to their own test file.",
    )


class RecordingRule(IR):
    record: str
    expr: str
    labels: dict[str, str] = Field(default_factory=dict)


class AlertRule(IR):
    alert: str
    expr: str
    for_: str = Field(default="0s", alias="for")
    keep_firing_for: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    tests: tuple[AlertTestCase, ...] = ()

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class RuleGroup(IR):
    name: str
    service: str
    pack: str
    interval: str | None = None
    rules: tuple[RecordingRule | AlertRule, ...]
    source: SourceRef


class RelabelRule(IR):
    """One Prometheus relabel_config; field names as in the scrape config."""

    source_labels: tuple[str, ...] = ()
    separator: str | None = None
    regex: str | None = None
    target_label: str | None = None
    replacement: str | None = None
    action: str = "replace"


class RelabelSet(IR):
    """metric_relabel_configs that turn one source's native labels into canonical ones."""

    service: str
    source: str = Field(description="The scrape target kind, e.g. dcgm-exporter.")
    rules: tuple[RelabelRule, ...]


class CollectorField(IR):
    name: str
    prometheus_type: str
    help: str
    reason: str = Field(description="Why it is collected: a rule name, or 'extra'.")


class CollectorSet(IR):
    """The dcgm-exporter fields one service's exporter must collect."""

    service: str
    exporter_version: str
    fields: tuple[CollectorField, ...]


class Matcher(IR):
    """One Alertmanager label matcher."""

    name: str
    op: Literal["=", "!=", "=~", "!~"] = "="
    value: str


class InhibitEdge(IR):
    """While an alert matching ``source_matchers`` fires, mute alerts matching
    ``target_matchers`` that have the same values for every ``equal`` label."""

    name: str = Field(description="Stable kebab-case name; blueprints override edges by it.")
    service: str | None = Field(description="Owning service, or None for fleet-wide edges.")
    pack: str
    reason: str
    source_matchers: tuple[Matcher, ...]
    target_matchers: tuple[Matcher, ...]
    equal: tuple[str, ...]
    source: SourceRef | None = None


class PanelQuery(IR):
    expr: str
    legend: str = ""
    datasource: Literal["prometheus", "loki"] = "prometheus"
    ref_id: str = "A"


class TableColumn(IR):
    """One column of a table panel: a label of the queries' series, or the value of one
    query (by ref id). The generator turns the columns into Grafana's own table
    mechanics (instant table queries, merge and organize transformations, field
    overrides with units), since a table panel ignores legends."""

    title: str = Field(description="Column header.")
    label: str | None = Field(default=None, description="A label of the series.")
    ref_id: str | None = Field(default=None, description="The query whose value this is.")
    unit: str | None = Field(default=None, description="Grafana unit id of a value column.")
    decimals: int | None = Field(default=None, ge=0, le=10)

    @model_validator(mode="after")
    def _one_source(self) -> TableColumn:
        if (self.label is None) == (self.ref_id is None):
            raise ValueError("a table column is either a label or a query's value")
        return self


class Panel(IR):
    """A dashboard panel in abstract form; the dashboard generator lays it out."""

    key: str = Field(description="Stable key: panel ids and positions derive from it.")
    title: str
    kind: Literal["timeseries", "stat", "table", "logs", "bargauge", "gauge", "heatmap"]
    unit: str = Field(description="Grafana unit id, e.g. percentunit, bytes, s, celsius.")
    queries: tuple[PanelQuery, ...]
    description: str = ""
    width: int = Field(default=12, ge=1, le=24)
    height: int = Field(default=8, ge=1, le=50)
    columns: tuple[TableColumn, ...] = Field(
        default=(), description="Table panels: the columns, in order; other fields are hidden."
    )


class DashboardRow(IR):
    """One layer's row of a service's cross-layer dashboard."""

    service: str
    layer: Literal["business", "framework", "hardware", "logs"]
    title: str
    pack: str
    panels: tuple[Panel, ...]


LogStageRole = Literal[
    "runtime",
    "rank-separation",
    "multiline",
    "extract",
    "labels",
    "structured-metadata",
    "drop",
    "limit",
]


class LogStageBase(IR):
    role: LogStageRole
    why: str = Field(default="", description="One sentence on why the stage is there.")


class RuntimeStage(LogStageBase):
    """Unwraps the container runtime's line format (sets the `stream` label)."""

    kind: Literal["runtime"] = "runtime"
    format: Literal["cri", "docker"]


class RegexStage(LogStageBase):
    """RE2 search (unanchored); every capture group is named and lands in extracted data."""

    kind: Literal["regex"] = "regex"
    expression: str
    source: str | None = Field(default=None, description="Extracted key; None = the line.")


class JsonStage(LogStageBase):
    kind: Literal["json"] = "json"
    expressions: dict[str, str] = Field(description="Extracted key -> JMESPath expression.")
    source: str | None = None


class MultilineStage(LogStageBase):
    """Joins lines into records per stream; `firstline` must match the start of every record."""

    kind: Literal["multiline"] = "multiline"
    firstline: str
    max_lines: int = 128
    max_wait_time: str = "3s"


class LabelsStage(LogStageBase):
    kind: Literal["labels"] = "labels"
    values: dict[str, str] = Field(description="Stream label -> extracted key.")


class StaticLabelsStage(LogStageBase):
    kind: Literal["static_labels"] = "static_labels"
    values: dict[str, str]


class LabelDropStage(LogStageBase):
    kind: Literal["label_drop"] = "label_drop"
    names: tuple[str, ...]


class StructuredMetadataStage(LogStageBase):
    kind: Literal["structured_metadata"] = "structured_metadata"
    values: dict[str, str] = Field(description="Metadata key -> extracted key.")


class DropStage(LogStageBase):
    kind: Literal["drop"] = "drop"
    expression: str
    source: str | None = None
    reason: str = Field(description="drop_counter_reason: the label on the dropped-lines counter.")


class LimitStage(LogStageBase):
    kind: Literal["limit"] = "limit"
    rate: float
    burst: int
    drop: bool = True


LogStage = Annotated[
    RuntimeStage
    | RegexStage
    | JsonStage
    | MultilineStage
    | LabelsStage
    | StaticLabelsStage
    | LabelDropStage
    | StructuredMetadataStage
    | DropStage
    | LimitStage,
    Field(discriminator="kind"),
]


class LogPipeline(IR):
    """One service's log processing, agent-neutral: an ordered list of abstract stages.

    Generators translate it into Alloy ``loki.process`` and promtail ``pipeline_stages``;
    the ``logs_sim`` module runs it over sample logs with RE2."""

    service: str
    sla_id: str
    pack: str
    stages: tuple[LogStage, ...]
    incoming_labels: tuple[str, ...] = Field(
        default=(), description="Labels the agent sets before the pipeline (e.g. pod)."
    )
    stream_labels: tuple[str, ...] = Field(description="Labels each record leaves with, sorted.")
    structured_metadata: tuple[str, ...] = Field(description="Structured metadata keys, sorted.")
    alerts: tuple[AlertRule, ...] = Field(default=(), description="LogQL alerting rules.")
    source: SourceRef


class ServicePlan(IR):
    name: str
    team: str
    sla_id: str
    # Literal text, or a Template the user wrote on purpose (obs_iac.escaping).
    objective: str | Template
    runbook_base_url: str | Template
    source: SourceRef
    gpu: dict[str, Any]
    # A section dumps to whatever its model is: an object, or a list (e.g. `slo`).
    sections: dict[str, Any] = Field(default_factory=dict)
    suppressions: tuple[dict[str, Any], ...] = ()
    acknowledgements: tuple[dict[str, Any], ...] = ()
    workload: Literal["training", "inference", "batch"] = "training"
    waivers: tuple[dict[str, Any], ...] = ()


class Plan(IR):
    schema_version: int = 1
    naming: NamingStrategy
    evaluation_interval: str
    services: tuple[ServicePlan, ...]
    metrics: tuple[MetricSpec, ...]
    rule_groups: tuple[RuleGroup, ...]
    relabel_sets: tuple[RelabelSet, ...]
    collector_sets: tuple[CollectorSet, ...]
    inhibit_edges: tuple[InhibitEdge, ...] = ()
    dashboard_rows: tuple[DashboardRow, ...] = ()
    log_pipelines: tuple[LogPipeline, ...] = ()
    extensions: dict[str, tuple[Any, ...]] = Field(
        default_factory=dict,
        description="IR kinds contributed by third-party packs, keyed by '<pack>/<kind>'.",
    )

    def service(self, name: str) -> ServicePlan:
        for svc in self.services:
            if svc.name == name:
                return svc
        raise KeyError(name)

    def metric(self, name: str) -> MetricSpec | None:
        return self.metric_index.get(name)

    @cached_property
    def metric_index(self) -> dict[str, MetricSpec]:
        # Shared by every shard with this catalogue (read-only): see obs_iac.plan.memo.
        from obs_iac.plan.memo import per_catalogue

        metrics = self.metrics
        return per_catalogue(metrics, "metric_index", lambda: {m.name: m for m in metrics})
