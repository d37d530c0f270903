"""Grafana Alloy ``loki.process`` blocks, one file per service, from the plan's log pipelines.

Alloy is the primary log agent (promtail reached end of life on 2026-03-02). The file
holds only the processing: the user's discovery/``loki.source.*`` components forward a
service's entries to ``loki.process.<service>.receiver``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def alloy_string(value: str) -> str:
    """An Alloy string literal meaning exactly ``value``.

    Regexes read best as raw backtick strings (no backslash doubling); a value that holds
    a backtick or a control character falls back to an escaped double-quoted string."""
    if "`" not in value and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return f"`{value}`"
    return quoted(value)


def quoted(value: str) -> str:
    out = ['"']
    for char in value:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _key(name: str) -> str:
    return name if name.isidentifier() else quoted(name)


def _map(values: Mapping[str, str]) -> str:
    if not values:
        return "{}"
    inner = ", ".join(f"{_key(k)} = {quoted(v)}" for k, v in values.items())
    return "{ " + inner + " }"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _stage(stage: LogStage) -> list[str]:
    """The stage's block, as lines without indentation."""
    body: list[str]
    if isinstance(stage, RuntimeStage):
        return [f"stage.{stage.format} {{}}"]
    if isinstance(stage, RegexStage):
        name, body = "regex", [f"expression = {alloy_string(stage.expression)}"]
        if stage.source:
            body.append(f"source     = {quoted(stage.source)}")
    elif isinstance(stage, JsonStage):
        name, body = "json", [f"expressions = {_map(stage.expressions)}"]
        if stage.source:
            body.append(f"source      = {quoted(stage.source)}")
    elif isinstance(stage, MultilineStage):
        name, body = (
            "multiline",
            [
                f"firstline     = {alloy_string(stage.firstline)}",
                f"max_lines     = {stage.max_lines}",
                f"max_wait_time = {quoted(stage.max_wait_time)}",
            ],
        )
    elif isinstance(stage, LabelsStage):
        name, body = "labels", [f"values = {_map(stage.values)}"]
    elif isinstance(stage, StaticLabelsStage):
        name, body = "static_labels", [f"values = {_map(stage.values)}"]
    elif isinstance(stage, LabelDropStage):
        name = "label_drop"
        body = ["values = [" + ", ".join(quoted(n) for n in stage.names) + "]"]
    elif isinstance(stage, StructuredMetadataStage):
        name, body = "structured_metadata", [f"values = {_map(stage.values)}"]
    elif isinstance(stage, DropStage):
        name, body = "drop", [f"expression          = {alloy_string(stage.expression)}"]
        if stage.source:
            # Alloy's drop source is one comma-separated string, not a list.
            body.append(f"source              = {quoted(stage.source)}")
        body.append(f"drop_counter_reason = {quoted(stage.reason)}")
    elif isinstance(stage, LimitStage):
        name, body = (
            "limit",
            [
                f"rate  = {_number(stage.rate)}",
                f"burst = {stage.burst}",
                f"drop  = {'true' if stage.drop else 'false'}",
            ],
        )
    else:  # pragma: no cover - the union is exhaustive
        raise TypeError(type(stage).__name__)
    return [f"stage.{name} {{", *(f"  {line}" for line in body), "}"]


def render_pipeline(pipeline: LogPipeline, forward_to: tuple[str, ...]) -> str:
    label = conventions.alloy_process_label(pipeline.service)
    lines = [
        f"// {conventions.HEADER.format(source=pipeline.source.file)}",
        f"// Logs of {pipeline.service} (business_sla_id={pipeline.sla_id}): forward them to",
        f"// loki.process.{label}.receiver. Stream labels: {', '.join(pipeline.stream_labels)}.",
        f'loki.process "{label}" {{',
        "  forward_to = [" + ", ".join(forward_to) + "]",
    ]
    role = None
    for stage in pipeline.stages:
        lines.append("")
        if stage.role != role:
            lines.append(f"  // {stage.role}")
            role = stage.role
        if stage.why:
            lines.append(f"  // {stage.why}")
        lines.extend(f"  {line}" for line in _stage(stage))
    lines.append("}")
    return "\n".join(lines) + "\n"


class AlloyConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    forward_to: tuple[str, ...] = Field(
        default=("loki.write.default.receiver",),
        min_length=1,
        description="Receivers the processed entries go to (Alloy expressions).",
    )


class AlloyGenerator(Generator):
    name: ClassVar[str] = "alloy"
    description: ClassVar[str] = "Grafana Alloy loki.process blocks per service."
    config_model: ClassVar[type[BaseModel]] = AlloyConfig
    # One file per service, but fleet-scope on purpose: logs/sla-stream-label is a
    # plan-scope (cross-service) rule that re-reads these files, and plan-scope rules
    # only see fleet-scope artifacts. Cheap to generate (a string per service).
    scope: ClassVar[GeneratorScope] = "fleet"

    def fleet_view(self, shard: Plan, ctx: GeneratorContext) -> Any:
        return {"services": views.services(shard), "pipelines": views.dump(shard.log_pipelines)}

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        settings = ctx.settings
        assert isinstance(settings, AlloyConfig)
        for pipeline in plan.log_pipelines:
            yield Artifact(
                conventions.alloy_file(pipeline.service),
                "text",
                render_pipeline(pipeline, settings.forward_to),
                self.name,
                sources_of(plan, [pipeline.service]),
                services=(pipeline.service,),
            )
