"""Promtail scrape configs (legacy agent), one per service, from the same log pipelines.

Promtail reached end of life on 2026-03-02; this output exists for fleets that have not
moved to Alloy yet (``alloy convert --source-format=promtail`` reads it, too). Each file
holds one ``scrape_configs`` entry: Kubernetes pod discovery kept to the service's pods
(by their ``business.sla_id`` pod label), the standard ``/var/log/pods`` path, and the
``pipeline_stages`` that implement the plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from obs_iac import conventions
from obs_iac.generators.common import sources_of
from obs_iac.plan import views
from obs_iac.plan.model import (
    DropStage,
    JsonStage,
    LabelDropStage,
    LabelsStage,
    LimitStage,
    LogPipeline,
    LogStage,
    MultilineStage,
    Plan,
    RegexStage,
    RuntimeStage,
    StaticLabelsStage,
    StructuredMetadataStage,
)
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
from obs_iac.render.artifact import Artifact

# Kubernetes pod label names are sanitised into meta label names like Prometheus labels.
SLA_POD_LABEL = "__meta_kubernetes_pod_label_business_sla_id"


def stage_dict(stage: LogStage) -> dict[str, Any]:
    """One pipeline_stages item: exactly one key, as promtail requires."""
    if isinstance(stage, RuntimeStage):
        return {stage.format: {}}
    if isinstance(stage, RegexStage):
        body: dict[str, Any] = {"expression": stage.expression}
        if stage.source:
            body["source"] = stage.source
        return {"regex": body}
    if isinstance(stage, JsonStage):
        body = {"expressions": dict(stage.expressions)}
        if stage.source:
            body["source"] = stage.source
        return {"json": body}
    if isinstance(stage, MultilineStage):
        return {
            "multiline": {
                "firstline": stage.firstline,
                "max_lines": stage.max_lines,
                "max_wait_time": stage.max_wait_time,
            }
        }
    if isinstance(stage, LabelsStage):
        return {"labels": dict(stage.values)}
    if isinstance(stage, StaticLabelsStage):
        return {"static_labels": dict(stage.values)}
    if isinstance(stage, LabelDropStage):
        return {"labeldrop": list(stage.names)}
    if isinstance(stage, StructuredMetadataStage):
        return {"structured_metadata": dict(stage.values)}
    if isinstance(stage, DropStage):
        body = {"expression": stage.expression, "drop_counter_reason": stage.reason}
        if stage.source:
            body["source"] = stage.source
        return {"drop": body}
    if isinstance(stage, LimitStage):
        return {"limit": {"rate": stage.rate, "burst": stage.burst, "drop": stage.drop}}
    raise TypeError(type(stage).__name__)  # pragma: no cover - the union is exhaustive


def scrape_config(pipeline: LogPipeline, log_root: str) -> dict[str, Any]:
    relabel: list[dict[str, Any]] = [
        {
            "source_labels": [SLA_POD_LABEL],
            "regex": pipeline.sla_id,
            "action": "keep",
        }
    ]
    meta = {
        "namespace": "__meta_kubernetes_namespace",
        "pod": "__meta_kubernetes_pod_name",
        "container": "__meta_kubernetes_pod_container_name",
    }
    for label in pipeline.incoming_labels:
        if label in meta:
            relabel.append({"source_labels": [meta[label]], "target_label": label})
    relabel.append(
        {
            "source_labels": ["__meta_kubernetes_pod_uid", "__meta_kubernetes_pod_container_name"],
            "separator": "/",
            "target_label": "__path__",
            "replacement": f"{log_root.rstrip('/')}/*$1/*.log",
        }
    )
    return {
        "job_name": conventions.promtail_job(pipeline.service),
        "kubernetes_sd_configs": [{"role": "pod"}],
        "relabel_configs": relabel,
        "pipeline_stages": [stage_dict(s) for s in pipeline.stages],
    }


class PromtailConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    log_root: str = Field(
        default="/var/log/pods", description="Where the kubelet writes container logs."
    )


class PromtailGenerator(Generator):
    name: ClassVar[str] = "promtail"
    description: ClassVar[str] = "Promtail scrape_configs with pipeline_stages (legacy agent)."
    config_model: ClassVar[type[BaseModel]] = PromtailConfig
    # One file per service, but fleet-scope on purpose: logs/sla-stream-label is a
    # plan-scope (cross-service) rule that re-reads these files, and plan-scope rules
    # only see fleet-scope artifacts. Cheap to generate (a string per service).
    scope: ClassVar[GeneratorScope] = "fleet"

    def fleet_view(self, shard: Plan, ctx: GeneratorContext) -> Any:
        return {"services": views.services(shard), "pipelines": views.dump(shard.log_pipelines)}

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        settings = ctx.settings
        assert isinstance(settings, PromtailConfig)
        for pipeline in plan.log_pipelines:
            yield Artifact(
                conventions.promtail_file(pipeline.service),
                "yaml",
                {"scrape_configs": [scrape_config(pipeline, settings.log_root)]},
                self.name,
                sources_of(plan, [pipeline.service]),
                services=(pipeline.service,),
            )
