"""Relabelling that turns exporters' native labels into canonical ones: a scrape-config
``metric_relabel_configs`` fragment and the ServiceMonitor ``metricRelabelings`` twin."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from obs_iac import conventions
from obs_iac.generators.common import sources_of
from obs_iac.plan import views
from obs_iac.plan.model import Plan, RelabelRule
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
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
    """One relabelling per scrape source, shared by every service it serves.

    A scrape job (one dcgm-exporter DaemonSet) takes one ``metric_relabel_configs``, so
    services whose fleets need the same relabelling share one file. Fleets that need
    different relabelling (e.g. exporter versions on either side of the Hostname ->
    hostname rename) get one file each, named after the first service using it.
    """

    name: ClassVar[str] = "prometheus-relabel"
    # Files are shared by every service with the same relabelling, and named after
    # the first of them: a service's file depends on the others.
    scope: ClassVar[GeneratorScope] = "fleet"
    description: ClassVar[str] = "metric_relabel_configs / metricRelabelings to canonical labels."

    def fleet_view(self, shard: Plan, ctx: GeneratorContext) -> Any:
        return {"services": views.services(shard), "relabel": views.dump(shard.relabel_sets)}

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        variants: dict[tuple[str, tuple[RelabelRule, ...]], list[str]] = {}
        for rset in plan.relabel_sets:
            variants.setdefault((rset.source, rset.rules), []).append(rset.service)
        per_source: dict[str, int] = {}
        for source, _ in variants:
            per_source[source] = per_source.get(source, 0) + 1
        for (source, rules), services in sorted(
            variants.items(), key=lambda v: (v[0][0], sorted(v[1]))
        ):
            services = sorted(services)
            variant = source if per_source[source] == 1 else f"{source}-{services[0]}"
            sources = sources_of(plan, services)
            shown = ", ".join(services[:4]) + (
                f" and {len(services) - 4} more" if len(services) > 4 else ""
            )
            note = f"for the {source} scrape job; services: {shown}"
            yield Artifact(
                conventions.metric_relabel_file(variant),
                "yaml",
                {"metric_relabel_configs": [_rule(r, camel=False) for r in rules]},
                self.name,
                sources,
                comment=note,
            )
            yield Artifact(
                conventions.servicemonitor_relabel_file(variant),
                "yaml",
                {"metricRelabelings": [_rule(r, camel=True) for r in rules]},
                self.name,
                sources,
                comment=note,
            )
