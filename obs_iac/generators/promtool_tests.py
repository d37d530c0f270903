"""promtool unit tests for every generated alert: one input that must fire, one that must not."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import Any, ClassVar

from obs_iac import conventions
from obs_iac.escaping import untemplate_literal
from obs_iac.generators.common import groups_by_service, sources_of
from obs_iac.plan.model import AlertRule, AlertTestCase, Plan
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
from obs_iac.render.artifact import Artifact

_LABEL_REF = re.compile(r"\{\{\s*\$labels\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_INDEX_REF = re.compile(r'\{\{\s*index \$labels "([^"]+)"\s*\}\}')


def expand_annotation(template: str, labels: dict[str, str]) -> str:
    """What Prometheus renders for a template that only reads labels. Anything richer is
    left as written, so promtool reports the difference instead of us hiding it.

    ``labels`` are the labels of the result sample: Prometheus fills ``$labels`` before it
    adds the rule's own labels (rules/alerting.go, Eval), and a missing one renders as ""
    (its templates run with missingkey=zero; promtool 2.42 shows the same)."""

    def sub(match: re.Match[str]) -> str:
        return labels.get(match.group(1), "")

    expanded = _INDEX_REF.sub(sub, _LABEL_REF.sub(sub, template))
    return untemplate_literal(expanded)


def _check(alert: AlertRule, case: AlertTestCase) -> dict[str, Any]:
    exp_alerts: list[dict[str, Any]] = []
    if case.expect_firing:
        labels = {**case.exp_labels, **alert.labels}
        exp_alerts.append(
            {
                "exp_labels": dict(sorted(labels.items())),
                "exp_annotations": {
                    k: expand_annotation(v, case.exp_labels)
                    for k, v in sorted(alert.annotations.items())
                },
            }
        )
    return {"eval_time": case.eval_time, "alertname": alert.alert, "exp_alerts": exp_alerts}


def _tests(cases: list[tuple[AlertRule, AlertTestCase]]) -> list[dict[str, Any]]:
    """One promtool test per distinct input: promtool evaluates every rule of the file at
    every step of every test, so cases that share their series (of one alert or of
    several, e.g. the tiers of one time-slice SLO) differ only in which alert they check
    and when, and one simulated run checks any number of them."""
    runs: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[AlertRule, AlertTestCase]]]
    runs = {}
    for alert, case in cases:
        runs.setdefault((case.interval, case.input_series), []).append((alert, case))
    out = []
    for (interval, series), run in runs.items():
        names: dict[str, list[str]] = {}
        for alert, case in run:
            names.setdefault(alert.alert, []).append(case.name)
        out.append(
            {
                "name": " | ".join(f"{a}: {'; '.join(n)}" for a, n in names.items()),
                "interval": interval,
                "input_series": [{"series": s, "values": v} for s, v in series],
                "alert_rule_test": [_check(alert, case) for alert, case in run],
            }
        )
    return out


class PromtoolTestsGenerator(Generator):
    name: ClassVar[str] = "promtool-tests"
    description: ClassVar[str] = "promtool test rules files for every generated alert."
    # One test file per service (and evaluation step), next to its own rule file.
    scope: ClassVar[GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        for service, groups in sorted(groups_by_service(plan).items()):
            by_step: dict[str | None, list[tuple[AlertRule, AlertTestCase]]] = {}
            for group in groups:
                for rule in group.rules:
                    if not isinstance(rule, AlertRule):
                        continue
                    for case in rule.tests:
                        step = case.evaluation_interval
                        if step == plan.evaluation_interval:
                            step = None
                        by_step.setdefault(step, []).append((rule, case))
            for step, cases in sorted(by_step.items(), key=lambda item: item[0] or ""):
                tests = _tests(cases)
                path = conventions.rule_test_file(service, step)
                rules = posixpath.relpath(conventions.rule_file(service), posixpath.dirname(path))
                body = {
                    "rule_files": [rules],
                    "evaluation_interval": step or plan.evaluation_interval,
                    "tests": tests,
                }
                yield Artifact(path, "yaml", body, self.name, sources_of(plan, [service]))
