"""Workload kinds in governance: what `obs-iac check` requires of a training, an
inference and a batch service, and how the maturity items read for each.

A service says its kind in the blueprint (``service(..., workload="inference")``; the
default, ``training``, is what every service was before kinds existed). Each kind names
the one signal that shows the service doing its job, and the conformance requirement
that asks for it:

- training: the framework section (PyTorch/NCCL spans through OpenTelemetry), which
  carries the step-time budget and the per-rank stage timings;
- inference: an SLO on requests (latency or error ratio), because a serving replica is
  judged by the requests it answers, not by training steps;
- batch: an SLO on jobs finishing (freshness of the last success, or a throughput floor).

Packs that know more about a kind (issue 21's inference engines) add to ``PROFILES``'s
``signal_sections``: a section that proves the signal as well as an SLO does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from obs_iac.plan.model import ServicePlan


@dataclass(frozen=True, slots=True)
class WorkloadProfile:
    """What one workload kind needs; data, so a pack can extend it."""

    kind: str
    # The conformance requirement (collection dimension) that asks for the signal.
    requirement: str
    # SLO SLI kinds that show the service doing its job (empty: an SLO is not the signal).
    sli_kinds: tuple[str, ...]
    # Blueprint sections that show it (the framework section for training).
    signal_sections: tuple[str, ...]
    # What is missing, said to the user, and how to add it.
    missing: str
    # Dashboard layers a complete drill-down has for this kind.
    layers: tuple[str, ...]
    # How the maturity item about the workload's own signals is titled.
    signals_title: str


PROFILES: dict[str, WorkloadProfile] = {
    "training": WorkloadProfile(
        kind="training",
        requirement="collection/otel-wiring",
        sli_kinds=(),
        signal_sections=("framework",),
        missing="no OpenTelemetry wiring is declared: add a framework={...} section "
        "(PyTorch/NCCL training spans), declare workload='inference' or 'batch' if the "
        "service does not train, or waive it: waive=[Waiver(check='collection/otel-wiring', "
        "reason=...)]",
        layers=("business", "framework", "hardware", "logs"),
        signals_title="Framework spans with canonical keys",
    ),
    "inference": WorkloadProfile(
        kind="inference",
        requirement="collection/request-sli",
        sli_kinds=("latency", "error_ratio"),
        signal_sections=(),
        missing="an inference service is judged by its requests, and it declares no "
        "request SLO: add slo=[Slo(..., sli=LatencySli(...))] or an ErrorRatioSli on the "
        "serving engine's request series",
        layers=("business", "hardware", "logs"),
        signals_title="Serving signals with canonical keys",
    ),
    "batch": WorkloadProfile(
        kind="batch",
        requirement="collection/job-sli",
        sli_kinds=("freshness", "throughput"),
        signal_sections=(),
        missing="a batch service is judged by its jobs finishing, and it declares no job "
        "SLO: add slo=[Slo(..., sli=FreshnessSli(...))] on the job's last-success "
        "timestamp, or a ThroughputSli floor",
        layers=("business", "hardware", "logs"),
        signals_title="Job signals with canonical keys",
    ),
}


def profile(svc: ServicePlan) -> WorkloadProfile:
    return PROFILES[svc.workload]


def slos(svc: ServicePlan) -> list[dict[str, Any]]:
    raw = svc.sections.get("slo") or []
    return [s for s in raw if isinstance(s, dict)]


def signal_slos(svc: ServicePlan) -> list[dict[str, Any]]:
    """The SLOs whose SLI kind is the workload's own signal."""
    kinds = profile(svc).sli_kinds
    return [s for s in slos(svc) if str((s.get("sli") or {}).get("kind")) in kinds]


_SLI_SERIES = ("histogram", "total", "good", "bad", "last_success", "counter")


def sli_series(slo: dict[str, Any]) -> list[dict[str, Any]]:
    """The series an SLO's SLI reads (as the plan stores them: name, labels, ...)."""
    sli = slo.get("sli") or {}
    return [sli[k] for k in _SLI_SERIES if isinstance(sli.get(k), dict)]


# --- waivers -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WaiverEntry:
    check: str
    reason: str
    until: dt.date | None

    def covers(self, code: str) -> bool:
        """A waiver names one requirement, or a whole dimension."""
        return code == self.check or code.split("/", 1)[0] == self.check

    def active(self, today: dt.date) -> bool:
        return self.until is None or self.until >= today


def waivers(svc: ServicePlan) -> list[WaiverEntry]:
    out = []
    for raw in svc.waivers:
        until = raw.get("until")
        out.append(
            WaiverEntry(
                str(raw.get("check")),
                str(raw.get("reason")),
                dt.date.fromisoformat(str(until)) if until else None,
            )
        )
    return out


# Every requirement `obs-iac check` knows, per dimension: what a waiver may name.
REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "collection": (
        "collection/dcgm-collectors",
        "collection/otel-wiring",
        "collection/request-sli",
        "collection/job-sli",
        "collection/series-produced",
    ),
    "labels": (
        "labels/sla-id-format",
        "labels/recording-rules",
        "labels/alert-labels",
        "labels/query-filters",
        "labels/relabel-format",
    ),
    "storage": ("storage/log-pipeline", "storage/sla-stream-label"),
    "alerting": ("alerting/gpu-fault-matrix", "alerting/static-verification"),
    "compatibility": ("compatibility/matrix",),
}
KNOWN_CHECKS: tuple[str, ...] = (
    *REQUIREMENTS,
    *(code for codes in REQUIREMENTS.values() for code in codes),
)


def apply_waivers(
    svc: ServicePlan, failures: Iterable[tuple[str, str]], today: dt.date
) -> tuple[list[tuple[str, str]], list[str]]:
    """(failures left, waived ones with their reason) for one dimension. An expired
    waiver no longer waives, and the failure says so."""
    entries = waivers(svc)
    left: list[tuple[str, str]] = []
    waived: list[str] = []
    for code, message in failures:
        entry = next((w for w in entries if w.covers(code)), None)
        if entry is None:
            left.append((code, message))
        elif entry.active(today):
            waived.append(f"{message} (waived: {entry.reason})")
        else:
            left.append(
                (code, f"{message} (the waiver for {entry.check} expired on {entry.until})")
            )
    return left, waived
