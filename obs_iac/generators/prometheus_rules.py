"""Prometheus rule files and PrometheusRule CRDs, one per service."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from obs_iac import conventions
from obs_iac.generators.common import group_dict, groups_by_service, sources_of
from obs_iac.plan.model import Plan
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
from obs_iac.render.artifact import Artifact


class PrometheusRulesConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    crds: bool = Field(default=True, description="Also write PrometheusRule CRDs.")
    plain: bool = Field(default=True, description="Write plain rule files for rule_files.")


class PrometheusRulesGenerator(Generator):
    name: ClassVar[str] = "prometheus-rules"
    description: ClassVar[str] = "Plain Prometheus rule files and PrometheusRule CRDs."
    config_model: ClassVar[type[BaseModel]] = PrometheusRulesConfig
    # One file per service, from that service's rule groups only.
    scope: ClassVar[GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        settings = ctx.settings
        assert isinstance(settings, PrometheusRulesConfig)
        for service, groups in sorted(groups_by_service(plan).items()):
            body = {"groups": [group_dict(g) for g in groups]}
            sources = sources_of(plan, [service])
            if settings.plain:
                yield Artifact(conventions.rule_file(service), "yaml", body, self.name, sources)
            if settings.crds:
                crd = {
                    "apiVersion": "monitoring.coreos.com/v1",
                    "kind": "PrometheusRule",
                    "metadata": {
                        "name": conventions.prometheus_rule_name(service),
                        "namespace": ctx.repo.prometheus_rule_namespace,
                        "labels": {
                            "app.kubernetes.io/managed-by": "obs-iac",
                            "app.kubernetes.io/part-of": service,
                            "release": ctx.repo.prometheus_rule_release,
                        },
                    },
                    "spec": body,
                }
                yield Artifact(
                    conventions.prometheus_rule_crd(service), "yaml", crd, self.name, sources
                )
