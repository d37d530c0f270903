"""Blueprint suppressions: ``service(..., suppress=[Suppression(code, reason, target, until)])``.

A suppression silences findings of one code for one service (optionally one alert or
record). After ``until`` it stops silencing and lint/expired-suppression says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from obs_iac.diagnostics import Diagnostic

if TYPE_CHECKING:
    from obs_iac.plan.model import Plan, ServicePlan


def active(entry: dict[str, Any], today: dt.date) -> bool:
    until = entry.get("until")
    return until is None or dt.date.fromisoformat(str(until)) >= today


def _matches(entry: dict[str, Any], service: str, diag: Diagnostic) -> bool:
    if diag.code != entry.get("code") or not diag.object_path:
        return False
    if diag.object_path[0] != service:
        return False
    target = entry.get("target")
    return target is None or target in diag.object_path[1:]


def apply(plan: Plan, findings: Iterable[Diagnostic], today: dt.date) -> list[Diagnostic]:
    """Findings minus those an active blueprint suppression covers."""
    return apply_for(plan.services, findings, today)


def apply_for(
    services: Iterable[ServicePlan], findings: Iterable[Diagnostic], today: dt.date
) -> list[Diagnostic]:
    """:func:`apply` with the services alone (suppressions are all it reads)."""
    entries = [
        (svc.name, entry) for svc in services for entry in svc.suppressions if active(entry, today)
    ]
    return [d for d in findings if not any(_matches(e, s, d) for s, e in entries)]


def expired(plan: Plan, today: dt.date) -> Iterator[tuple[Any, dict[str, Any]]]:
    for svc in plan.services:
        for entry in svc.suppressions:
            if not active(entry, today):
                yield svc, entry
