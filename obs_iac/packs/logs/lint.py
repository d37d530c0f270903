"""Lint rule ``logs/sla-stream-label``: every service's logs are stored under its SLA.

The source document's storage rule is "logs partitioned by business.sla_id". In Loki
that means ``business_sla_id`` is a *stream label* of every record, with the service's
own value. The rule checks the plan (any pack's pipeline, not just ours) and the files
the agents will load (Alloy and promtail), so a hand-written stage, a third-party pack
or a ``drop_labels`` entry cannot lose the label unnoticed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

from obs_iac.diagnostics import Diagnostic, Location, Severity
from obs_iac.plan import views
from obs_iac.plan.model import (
    LabelDropStage,
    LabelsStage,
    LogPipeline,
    LogStage,
    Plan,
    ServicePlan,
    StaticLabelsStage,
    StructuredMetadataStage,
)
from obs_iac.plugins import LintContext, LintRule, LintScope
from obs_iac.render.artifact import Artifact

CODE = "logs/sla-stream-label"
LABEL = "business_sla_id"
UNKNOWN = object()  # a label set from extracted data: its value is not fixed


def _final_value(steps: Iterable[tuple[str, Any]]) -> Any:
    """Follows set/drop steps for the SLA label; None = absent at the end."""
    value: Any = None
    for op, arg in steps:
        if op == "set":
            value = arg
        elif op == "drop":
            value = None
    return value


def _plan_steps(stages: Sequence[LogStage]) -> Iterator[tuple[str, Any]]:
    for stage in stages:
        if isinstance(stage, StaticLabelsStage) and LABEL in stage.values:
            yield "set", stage.values[LABEL]
        elif isinstance(stage, LabelsStage) and LABEL in stage.values:
            yield "set", UNKNOWN
        elif isinstance(stage, LabelDropStage) and LABEL in stage.names:
            yield "drop", None
        elif isinstance(stage, StructuredMetadataStage) and LABEL in stage.values.values():
            yield "drop", None  # Alloy moves a label named as a source into metadata


def _promtail_steps(stages: Sequence[dict[str, Any]]) -> Iterator[tuple[str, Any]]:
    for item in stages:
        for kind, body in item.items():
            if kind == "static_labels" and LABEL in body:
                yield "set", body[LABEL]
            elif kind == "labels" and LABEL in body:
                yield "set", UNKNOWN
            elif kind == "labeldrop" and LABEL in body:
                yield "drop", None


_ALLOY_BLOCK = re.compile(r"^\s*stage\.(\w+) \{(.*?)^\s*\}", re.MULTILINE | re.DOTALL)


def _alloy_steps(text: str) -> Iterator[tuple[str, Any]]:
    for match in _ALLOY_BLOCK.finditer(text):
        kind, body = match.group(1), match.group(2)
        if kind == "static_labels":
            found = re.search(rf'\b{LABEL} = "((?:[^"\\]|\\.)*)"', body)
            if found:
                yield "set", found.group(1)
        elif kind == "labels" and re.search(rf"\b{LABEL} =", body):
            yield "set", UNKNOWN
        elif kind == "label_drop" and f'"{LABEL}"' in body:
            yield "drop", None


class SlaStreamLabelRule(LintRule):
    code: ClassVar[str] = CODE
    # "A service has no log pipeline" is only a finding when some other service has one
    # (logs are managed here), a cross-service fact; the files it re-reads come from
    # alloy and promtail, which stay fleet-scope so that a plan-scope rule sees them.
    scope: ClassVar[LintScope] = "plan"
    description: ClassVar[str] = (
        "Every service's logs carry business_sla_id (its own value) as a Loki stream label."
    )

    def fleet_view(self, shard: Plan, ctx: LintContext) -> Any:
        # Plus the alloy and promtail files, which the engine's key holds.
        return [views.services(shard, "sla_id", "source"), views.dump(shard.log_pipelines)]

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterator[Diagnostic]:
        if not plan.log_pipelines:
            return  # logs are not managed by obs-iac in this repository
        by_service: dict[str, list[LogPipeline]] = {}
        for pipeline in plan.log_pipelines:
            by_service.setdefault(pipeline.service, []).append(pipeline)
        files: dict[str, list[Artifact]] = {}
        for art in artifacts:
            for svc in art.services:
                files.setdefault(svc, []).append(art)
        for service in plan.services:
            pipelines = by_service.get(service.name, [])
            if not pipelines:
                yield self._finding(
                    service,
                    f"service {service.name!r} has no log pipeline, so its logs are not "
                    f"stored under {LABEL}",
                    "give it a logs={...} section (or re-enable the logs pack)",
                )
                continue
            planned = [
                d
                for pipeline in pipelines
                for d in self._judge(
                    service,
                    f"pipeline from pack {pipeline.pack!r}",
                    _final_value(_plan_steps(pipeline.stages)),
                )
            ]
            if planned:
                yield from planned
                continue  # the files only repeat the plan's mistake
            # A sound plan: the files must still keep the label (a generator or a hand
            # edit could lose it).
            for art in files.get(service.name, []):
                if art.generator == "promtail" and isinstance(art.data, dict):
                    for job in art.data.get("scrape_configs", []):
                        steps = _promtail_steps(job.get("pipeline_stages", []))
                        yield from self._judge(service, art.path, _final_value(steps))
                elif art.generator == "alloy" and isinstance(art.data, str):
                    yield from self._judge(service, art.path, _final_value(_alloy_steps(art.data)))

    def _judge(self, service: ServicePlan, where: str, value: Any) -> Iterator[Diagnostic]:
        if value is None:
            yield self._finding(
                service,
                f"{where}: logs of {service.name!r} leave the pipeline without the {LABEL} "
                "stream label",
                f"keep the static label {LABEL}={service.sla_id!r}; remove {LABEL} from "
                "drop_labels (or from any label_drop stage)",
            )
        elif value is UNKNOWN:
            yield self._finding(
                service,
                f"{where}: {LABEL} is set from the log line, so records of "
                f"{service.name!r} can land under another SLA",
                f"set it as a static label with the service's value {service.sla_id!r}",
            )
        elif value != service.sla_id:
            yield self._finding(
                service,
                f"{where}: logs of {service.name!r} are stored under {LABEL}={value!r}, "
                f"not the service's {service.sla_id!r}",
                f"use {LABEL}={service.sla_id!r}",
            )

    @staticmethod
    def _finding(service: ServicePlan, message: str, hint: str) -> Diagnostic:
        return Diagnostic(
            CODE,
            Severity.ERROR,
            message,
            hint=hint,
            location=Location(service.source.file, service.source.line),
            object_path=(service.name, "logs"),
            origin="logs",
        )
