"""Small helpers generators share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from obs_iac.plan.model import AlertRule, Plan, RecordingRule, RuleGroup, ServicePlan

_FILES: list[tuple[Plan, dict[str, set[str]]]] = []


def sources_of(plan: Plan, services: Iterable[str]) -> tuple[str, ...]:
    # Generators ask once per service; a scan of the fleet each time would be quadratic.
    # The plan is frozen, so the last plan's name -> file map is kept (one slot).
    if not _FILES or _FILES[0][0] is not plan:
        files: dict[str, set[str]] = {}
        for s in plan.services:
            files.setdefault(s.name, set()).add(s.source.file)
        _FILES[:] = [(plan, files)]
    files = _FILES[0][1]
    return tuple(sorted({f for name in set(services) for f in files.get(name, ())}))


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
