"""dcgm-exporter collectors.csv and the ConfigMap that carries it (key ``metrics``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from obs_iac import conventions
from obs_iac.generators.common import sources_of
from obs_iac.plan.model import CollectorSet, Plan
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
from obs_iac.render.artifact import Artifact


def collectors_text(collector_set: CollectorSet, header: str) -> str:
    """The exporter's format: '#' comments, then 'field, type, help' with no comma or
    quote inside help (encoding/csv would split or reject the record)."""
    lines = [f"# {header}", "# Format: DCGM field, Prometheus type, help message"]
    for field in collector_set.fields:
        lines.append(f"# {field.name}: needed by {field.reason}")
        lines.append(f"{field.name}, {field.prometheus_type}, {field.help}")
    return "\n".join(lines) + "\n"


class DcgmCollectorsGenerator(Generator):
    name: ClassVar[str] = "dcgm-collectors"
    description: ClassVar[str] = "dcgm-exporter collectors.csv and its ConfigMap."
    # One collectors.csv per collector set; a set belongs to one service.
    scope: ClassVar[GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        for cset in plan.collector_sets:
            sources = sources_of(plan, [cset.service])
            header = conventions.HEADER.format(source=", ".join(sources))
            text = collectors_text(cset, header)
            yield Artifact(
                conventions.collectors_csv(cset.service),
                "text",
                text,
                self.name,
                sources,
                header=False,
            )
            configmap = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": conventions.collectors_configmap_name(cset.service),
                    "namespace": ctx.repo.prometheus_rule_namespace,
                    "labels": {
                        "app.kubernetes.io/managed-by": "obs-iac",
                        "app.kubernetes.io/part-of": cset.service,
                    },
                },
                "data": {"metrics": text},
            }
            yield Artifact(
                conventions.collectors_configmap(cset.service),
                "yaml",
                configmap,
                self.name,
                sources,
            )
