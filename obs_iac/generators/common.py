"""Small helpers generators share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from obs_iac.plan.model import AlertRule, Plan, RecordingRule, RuleGroup, ServicePlan


def sources_of(plan: Plan, services: Iterable[str]) -> tuple[str, ...]:
    wanted = set(services)
    return tuple(sorted({s.source.file for s in plan.services if s.name in wanted}))


def groups_by_service(plan: Plan) -> dict[str, list[RuleGroup]]:
    out: dict[str, list[RuleGroup]] = {}
    for group in plan.rule_groups:
        out.setdefault(group.service, []).append(group)
    return out


def service_index(plan: Plan) -> dict[str, ServicePlan]:
    return {s.name: s for s in plan.services}


def rule_dict(rule: RecordingRule | AlertRule) -> dict[str, Any]:
    """A rule as rulefmt spells it, keys in the order people read them."""
    if isinstance(rule, RecordingRule):
        out: dict[str, Any] = {"record": rule.record, "expr": rule.expr}
        if rule.labels:
            out["labels"] = dict(sorted(rule.labels.items()))
        return out
    out = {"alert": rule.alert, "expr": rule.expr}
    if rule.for_ not in ("0s", "0m", "0"):
        out["for"] = rule.for_
    if rule.keep_firing_for:
        out["keep_firing_for"] = rule.keep_firing_for
    if rule.labels:
        out["labels"] = dict(sorted(rule.labels.items()))
    if rule.annotations:
        out["annotations"] = dict(sorted(rule.annotations.items()))
    return out


def group_dict(group: RuleGroup) -> dict[str, Any]:
    out: dict[str, Any] = {"name": group.name}
    if group.interval:
        out["interval"] = group.interval
    out["rules"] = [rule_dict(r) for r in group.rules]
    return out
