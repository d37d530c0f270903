"""Relabelling that turns exporters' native labels into canonical ones: a scrape-config
``metric_relabel_configs`` fragment and the ServiceMonitor ``metricRelabelings`` twin."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from obs_iac import conventions
from obs_iac.generators.common import sources_of
from obs_iac.plan.model import Plan, RelabelRule
from obs_iac.plugins import Generator, GeneratorContext
from obs_iac.render.artifact import Artifact

_CAMEL = {
    "source_labels": "sourceLabels",
    "target_label": "targetLabel",
    "separator": "separator",
    "regex": "regex",
    "replacement": "replacement",
    "action": "action",
}


def _rule(rule: RelabelRule, camel: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("source_labels", "separator", "regex", "target_label", "replacement", "action"):
        value = getattr(rule, key)
        if value in (None, ()):
            continue
        out[_CAMEL[key] if camel else key] = list(value) if isinstance(value, tuple) else value
    return out


class PrometheusRelabelGenerator(Generator):
    name: ClassVar[str] = "prometheus-relabel"
    description: ClassVar[str] = "metric_relabel_configs / metricRelabelings to canonical labels."

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        by_service: dict[str, list[RelabelRule]] = {}
        for rset in plan.relabel_sets:
            by_service.setdefault(rset.service, []).extend(rset.rules)
        for service, rules in sorted(by_service.items()):
            sources = sources_of(plan, [service])
            yield Artifact(
                conventions.metric_relabel_file(service),
                "yaml",
                {"metric_relabel_configs": [_rule(r, camel=False) for r in rules]},
                self.name,
                sources,
            )
            yield Artifact(
                conventions.servicemonitor_relabel_file(service),
                "yaml",
                {"metricRelabelings": [_rule(r, camel=True) for r in rules]},
                self.name,
                sources,
            )
