"""Building blocks for ``fleet_view``: the part of one service's plan a fleet-level plugin
reads.

A fleet-level generator or whole-plan lint rule may declare ``fleet_view(shard, ctx)``.
The render engine calls it once per service, on that service's shard, when the shard is
rendered, and keeps the result with the shard's cached output. The plugin's files and
findings are then cached on the views of every service (plus its settings, the files it
reads, the fleet's catalogue and the code): after an edit that leaves every view as it
was (a changed threshold, say), the plugin does not run again. See docs/plugins.md.

The contract: the plugin's output over the whole plan is a function of the services'
views, in plan order, and of what the cache key already holds. A view too narrow gives a
stale file, so a view lists, plainly, every field the plugin reads; ``obs_iac.testing.
assert_view_holds`` checks it on edited fleets. Everything here returns JSON values, so
views are stable across processes and hash seeds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from obs_iac.plan.model import AlertRule, Plan

JSON = Any


def dump(items: Iterable[Any]) -> list[JSON]:
    """Pydantic IR objects, as JSON values."""
    return [item.model_dump(mode="json") for item in items]


def services(plan: Plan, *fields: str) -> list[JSON]:
    """Each service's name and blueprint file (what ``sources_of`` and most headers
    read), plus the named ServicePlan fields."""
    return [
        [svc.name, svc.source.file, *(_json(getattr(svc, f)) for f in fields)]
        for svc in plan.services
    ]


def _json(value: Any) -> JSON:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


def rule_shapes(plan: Plan) -> list[JSON]:
    """The rule groups as a label-flow analysis sees them: per rule its kind, name,
    labels and expression with the numbers masked (see :func:`numbers_masked`)."""
    return [
        [
            group.service,
            group.name,
            [
                [
                    "alert" if isinstance(rule, AlertRule) else "record",
                    rule.alert if isinstance(rule, AlertRule) else rule.record,
                    dict(sorted(rule.labels.items())),
                    numbers_masked(rule.expr),
                ]
                for rule in group.rules
            ],
        ]
        for group in plan.rule_groups
    ]


def extension(plan: Plan, key: str) -> list[JSON]:
    return [_json(item) for item in plan.extensions.get(key, ())]


# A number's value never decides which labels a PromQL expression's output carries (only
# label matchers, grouping, matching modifiers and function arguments that are strings
# do), so a threshold edit leaves the label flow as it was. Masked only where that is
# certain, as in obs_iac.promql.expression_shape: no escapes, no other kinds of string,
# no comments, so that every '"' opens or closes a string and numbers inside strings
# (label values) are never touched.
_UNSURE = re.compile(r"['`#\\]")
_NUMBER = re.compile(r"(?<![\w.:])(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?![\w.:])")


def numbers_masked(expr: str) -> str:
    """``expr`` with its decimal number literals replaced by ``N``, where certain; else
    ``expr`` itself (a view that is merely wider than needed is always correct)."""
    if _UNSURE.search(expr):
        return expr
    parts = expr.split('"')
    if len(parts) % 2 == 0:
        return expr
    for i in range(0, len(parts), 2):
        parts[i] = _NUMBER.sub("N", parts[i])
    return '"'.join(parts)
