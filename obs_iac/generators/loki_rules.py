"""Loki ruler rule files (LogQL alerts), one per service.

The ruler reads the Prometheus rule-file layout; load the files per tenant (for local
storage: ``<rules_directory>/<tenant>/``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from obs_iac import conventions
from obs_iac.generators.common import rule_dict, sources_of
from obs_iac.plan.model import Plan
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
from obs_iac.render.artifact import Artifact


class LokiRulesGenerator(Generator):
    name: ClassVar[str] = "loki-rules"
    description: ClassVar[str] = "Loki ruler rule files with LogQL alerts per service."
    # One file per log pipeline; a pipeline belongs to one service.
    scope: ClassVar[GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        for pipeline in plan.log_pipelines:
            if not pipeline.alerts:
                continue
            body = {
                "groups": [
                    {
                        "name": conventions.loki_rule_group(pipeline.service),
                        "rules": [rule_dict(a) for a in pipeline.alerts],
                    }
                ]
            }
            yield Artifact(
                conventions.loki_rule_file(pipeline.service),
                "yaml",
                body,
                self.name,
                sources_of(plan, [pipeline.service]),
                services=(pipeline.service,),
            )
