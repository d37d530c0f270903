"""The committed alert-storm table (generated/alertmanager/alert-storm.json, written by
obs_iac.generators.alert_storm from the plan alone) held against what a live run saw.

Per scenario and service the set of alerts that fired must equal the table's, alert by
alert and GPU by GPU; every alert Alertmanager muted must be one the table says an edge
can mute. The table's "mutable" count is an upper bound: a source that resolves before
its target fires (an XID's 10m window, say) mutes nothing, and that timing is the live
run's to measure, not the table's. The two SLO phases are one row of the table, because
which phase a ticket alert first fires in depends on when its windows fill."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

TABLE = Path("alertmanager") / "alert-storm.json"
SLO_PHASES = ("slo-slow-burn", "slo-fast-burn")
SLO_ROW = "slo-burn"


def load_table(generated: Path) -> list[dict[str, Any]] | None:
    path = generated / TABLE
    if not path.is_file():
        return None
    rows: list[dict[str, Any]] = json.loads(path.read_text("utf-8"))["alert_storm"]
    return rows


def _key(entry: Mapping[str, Any]) -> tuple[str, str]:
    on = entry.get("resource_gpu_id") or entry.get("slo") or "node"
    return (str(entry["alert"]), str(on))


def compare(
    table: Sequence[Mapping[str, Any]] | None,
    live: Sequence[Mapping[str, Any]],
    services: Collection[str] | None = None,
) -> list[str]:
    """Failures: every way the live storm differs from the committed table."""
    if table is None:
        return [f"{TABLE} is missing from the generated folder: run `obs-iac render`"]
    seen: dict[tuple[str, str], dict[tuple[str, str], Mapping[str, Any]]] = {}
    for a in live:
        scen = SLO_ROW if a["scenario"] in SLO_PHASES else str(a["scenario"])
        seen.setdefault((str(a["service"]), scen), {})[_key(a)] = a
    out: list[str] = []
    for row in table:
        svc, scen = str(row["service"]), str(row["scenario"])
        if services is not None and svc not in services:
            continue
        want = {(str(e["alert"]), str(e["on"])): e for e in row["alerts"]}
        got = seen.pop((svc, scen), {})
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        if missing:
            out.append(
                f"storm {svc}/{scen}: the table predicts {_names(missing)}, which did not fire"
            )
        if extra:
            out.append(f"storm {svc}/{scen}: {_names(extra)} fired, the table does not predict it")
        # Scenarios run at once: an alert muted by a source another scenario fired (an
        # SLA-wide edge such as NCCL errors muting idle GPUs) is outside this row's table.
        here = {str(a["alert"]) for a in got.values()}
        wrong = sorted(
            k
            for k, a in got.items()
            if a["muted"]
            and not want.get(k, {}).get("muted_by")
            and (not a.get("muted_by") or here & set(a["muted_by"]))
        )
        if wrong:
            out.append(f"storm {svc}/{scen}: {_names(wrong)} muted, the table says no edge can")
    # The table models the hardware and SLO faults; the framework scenarios (spans through
    # the Collector) are judged by the live run alone (docs/testing.md).
    modelled = {str(row["scenario"]) for row in table}
    for (svc, scen), got in sorted(seen.items()):
        if (services is None or svc in services) and scen in modelled:
            out.append(f"storm {svc}/{scen}: {_names(sorted(got))} fired, the table has no row")
    return out


def _names(keys: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{alert} on {on}" for alert, on in keys)
