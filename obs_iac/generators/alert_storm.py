"""The alert-storm table, derived statically: for each fault scenario of `obs-iac test
--live` and each service, which generated alerts the fault makes fire and which of them
an inhibit edge can mute, from the plan's alerts and inhibit edges alone.

The scenarios' physical effects (a crashed job idles every GPU of its node, so all eight
utilisation and NVLink alerts follow one broken GPU) are written down once, in
``SCENARIO_EFFECTS``; the live run plays the same faults (obs_iac.live.scenarios) and
holds what really fired and was muted against this table (obs_iac.live.storm), so a
wrong effect or a wrong edge model fails there. Committed under generated/, the table
is what `obs-iac diff` shows when a change alters a scenario's count."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from obs_iac.generators.common import sources_of
from obs_iac.labels import GPU_ID, HOST, classic_name
from obs_iac.packs.inhibit.analysis import AlertIndex, AlertInfo, inhibit_view
from obs_iac.plan.model import InhibitEdge, Plan
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
from obs_iac.render.artifact import Artifact

PATH = "alertmanager/alert-storm.json"
GPUS = tuple(f"nvidia{i}" for i in range(8))
_ALL = GPUS  # every GPU of the node
_CRASH = (("GpuUtilizationLow", _ALL), ("GpuNvlinkThroughputDrop", _ALL))
# scenario -> (alert, GPUs it fires on); () means the node-level alert (no GPU label).
SCENARIO_EFFECTS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    # GPU 0 over its limit throttles; its NVLink peer GPU 1 waits on it.
    "over-temperature": (
        ("GpuTemperatureHigh", ("nvidia0",)),
        ("GpuUtilizationLow", ("nvidia0", "nvidia1")),
    ),
    # Each of these faults kills the job on the node: every GPU idles, collectives stop.
    "xid-79-twice": (("GpuXidError", ("nvidia0",)), *_CRASH),
    "uncorrectable-ecc": (("GpuUncorrectableEccErrors", ("nvidia0",)), *_CRASH),
    "row-remap-failure": (("GpuRowRemapFailure", ("nvidia0",)), *_CRASH),
    "nvlink-drop": (
        ("GpuNvlinkThroughputDrop", ("nvidia0",)),
        ("GpuUtilizationLow", ("nvidia0",)),
    ),
    # An ECC burst, then the exporter stops answering.
    "node-down": (("GpuUncorrectableEccErrors", ("nvidia0",)), ("GpuNodeDown", ())),
}
# The SLO phases: a slow burn (ticket tier) then a fast burn (page tier). Which phase a
# ticket alert first fires in depends on when its windows fill, so the table has one row
# for both; the live run compares the union of its two rows with it.
SLO_SCENARIO = "slo-burn"
# SLI kinds the live run has a scenario for (obs_iac.live.scenarios.build_world).
SLO_KINDS = ("latency", "error_ratio", "freshness")


def _spelt(plan: Plan, key: str) -> str:
    return key if plan.naming == "utf8" else classic_name(key)


def _instances(
    plan: Plan, alerts: Mapping[str, AlertInfo], scenario: str, host: str
) -> list[tuple[AlertInfo, dict[str, str]]]:
    out = []
    for name, gpus in SCENARIO_EFFECTS[scenario]:
        if name not in alerts:
            continue
        a = alerts[name]
        for gpu in gpus or ("",):
            labels = {**a.static, _spelt(plan, HOST): host}
            if gpu:
                labels[_spelt(plan, GPU_ID)] = gpu
            out.append((a, labels))
    return out


def _row(
    index: AlertIndex,
    plan: Plan,
    service: str,
    scenario: str,
    fired: list[tuple[AlertInfo, dict[str, str]]],
) -> dict[str, Any]:
    # Two edges may join the same pair of alerts: each is checked on its own `equal`.
    pairs: dict[tuple[tuple[str, str], tuple[str, str]], list[InhibitEdge]] = {}
    for edge in plan.inhibit_edges:
        if edge.service not in (None, service):
            continue
        for src, dst in index.pairs(edge):
            pairs.setdefault((src.key, dst.key), []).append(edge)
    entries = []
    for dst, dst_labels in fired:
        by = sorted(
            {
                edge.name
                for src, src_labels in fired
                for edge in pairs.get((src.key, dst.key), ())
                if all(src_labels.get(k) == dst_labels.get(k) for k in edge.equal)
            }
        )
        entries.append(
            {
                "alert": dst.name,
                "on": dst_labels.get(_spelt(plan, GPU_ID)) or dst_labels.get("slo") or "node",
                "muted_by": by,
            }
        )
    entries.sort(key=lambda e: (e["alert"], e["on"]))
    mutable = sum(1 for e in entries if e["muted_by"])
    return {
        "service": service,
        "scenario": scenario,
        "fired": len(entries),
        "mutable": mutable,
        "notified_at_least": len(entries) - mutable,
        "alerts": entries,
    }


def storm_rows(plan: Plan) -> list[dict[str, Any]]:
    index = AlertIndex.of_plan(plan)
    rows: list[dict[str, Any]] = []
    for svc in sorted(plan.services, key=lambda s: s.name):
        alerts = {a.name: a for a in index.of_service(svc.name)}
        if svc.gpu:
            for scenario in SCENARIO_EFFECTS:
                fired = _instances(plan, alerts, scenario, f"{svc.name}-{scenario}")
                if fired:
                    rows.append(_row(index, plan, svc.name, scenario, fired))
        kinds = {
            str(s.get("name")): str((s.get("sli") or {}).get("kind"))
            for s in svc.sections.get("slo") or []
            if isinstance(s, Mapping)
        }
        slo_fired = [
            (a, {**a.static})
            for a in alerts.values()
            if a.static.get("slo") in kinds and kinds[a.static["slo"]] in SLO_KINDS
        ]
        if slo_fired:
            rows.append(_row(index, plan, svc.name, SLO_SCENARIO, slo_fired))
    return rows


class AlertStormGenerator(Generator):
    name: ClassVar[str] = "alert-storm"
    scope: ClassVar[GeneratorScope] = "fleet"  # one table for the fleet
    description: ClassVar[str] = (
        "The alert storm per fault scenario and service (fired, mutable by inhibition), "
        "derived from the alerts and inhibit edges; `obs-iac test --live` proves it."
    )

    def fleet_view(self, shard: Plan, ctx: GeneratorContext) -> Any:
        return {
            "inhibit": inhibit_view(shard),
            "gpu": [bool(s.gpu) for s in shard.services],
            "slo": [
                [(s.get("name"), (s.get("sli") or {}).get("kind")) for s in sv.sections["slo"]]
                for sv in shard.services
                if isinstance(sv.sections.get("slo"), list)
            ],
        }

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        rows = storm_rows(plan)
        yield Artifact(
            PATH,
            "json",
            {
                "about": (
                    "Per fault scenario of `obs-iac test --live` and service: the alerts "
                    "the fault fires and the inhibit edges that can mute each one while "
                    "its source fires. `obs-iac test --live` fails when what fires differs."
                ),
                "alert_storm": rows,
            },
            self.name,
            sources_of(plan, [s.name for s in plan.services]),
        )
