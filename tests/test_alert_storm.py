"""The committed alert-storm table: derived from the plan (alerts, inhibit edges), held
against a live run's per-alert record (obs_iac.live.storm.compare), and shown by
`obs-iac diff` as a count change. The live run itself is tests/test_live.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from obs_iac.diff.compare import compare as diff_compare
from obs_iac.diff.model import build_model
from obs_iac.generators.alert_storm import PATH, storm_rows
from obs_iac.live import storm
from obs_iac.pipeline import build_plan, open_workspace
from obs_iac.plugins import discover

ROOT = Path(__file__).resolve().parent.parent


def _table() -> list[dict[str, Any]]:
    ws = open_workspace(ROOT)
    return storm_rows(build_plan(ws, discover(ws.config)))


def _row(rows: list[dict[str, Any]], svc: str, scen: str) -> dict[str, Any]:
    return next(r for r in rows if r["service"] == svc and r["scenario"] == scen)


def test_table_follows_the_edges_of_each_service() -> None:
    rows = _table()
    hot = _row(rows, "image-classify-v3", "over-temperature")
    # GPU 0 hot and idle, its peer idle: the hot GPU's idle alert is the one an edge mutes.
    assert (hot["fired"], hot["mutable"]) == (3, 1)
    muted = [(a["alert"], a["on"], a["muted_by"]) for a in hot["alerts"] if a["muted_by"]]
    assert muted == [("GpuUtilizationLow", "nvidia0", ["gpu-hot-mutes-util-low"])]
    # image-classify-v3 adds nvlink-drop-mutes-util-low: every idle GPU of a crashed
    # node has its own NVLink alert, so all eight can be muted; recomm-v2 has no such edge.
    assert _row(rows, "image-classify-v3", "xid-79-twice")["mutable"] == 9
    assert _row(rows, "recomm-v2", "xid-79-twice")["mutable"] == 2
    node = _row(rows, "recomm-v2", "node-down")
    assert {a["alert"]: a["muted_by"] for a in node["alerts"]} == {
        "GpuNodeDown": [],
        "GpuUncorrectableEccErrors": ["gpu-node-down-mutes-gpu-alerts"],
    }


def test_committed_table_is_the_generated_one() -> None:
    committed = json.loads((ROOT / "generated" / PATH).read_text("utf-8"))["alert_storm"]
    assert committed == _table()


def _live_from(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A live record that saw exactly what the table predicts, every mutable alert muted."""
    out = []
    for r in rows:
        for a in r["alerts"]:
            gpu = a["on"] if a["on"].startswith("nvidia") else ""
            slo = a["on"] if not gpu and a["on"] != "node" else ""
            scen = "slo-fast-burn" if r["scenario"] == "slo-burn" else r["scenario"]
            out.append(
                {
                    "service": r["service"],
                    "scenario": scen,
                    "alert": a["alert"],
                    "resource_gpu_id": gpu,
                    "slo": slo,
                    "muted": bool(a["muted_by"]),
                }
            )
    return out


def test_compare_accepts_the_prediction_and_names_each_difference() -> None:
    rows = _table()
    live = _live_from(rows)
    assert storm.compare(rows, live) == []
    # A muted alert that the table says could be muted only in part is fine (timing).
    partly = [{**a, "muted": False} for a in live]
    assert storm.compare(rows, partly) == []
    # One alert that did not fire, one that fired unpredicted, one muted by no edge.
    gone = [
        a
        for a in live
        if not (a["scenario"] == "node-down" and a["alert"] == "GpuUncorrectableEccErrors")
    ]
    assert storm.compare(rows, gone) == [
        "storm image-classify-v3/node-down: the table predicts GpuUncorrectableEccErrors on "
        "nvidia0, which did not fire",
        "storm recomm-v2/node-down: the table predicts GpuUncorrectableEccErrors on "
        "nvidia0, which did not fire",
    ]
    extra = [*live, {**live[0], "alert": "GpuXidError", "resource_gpu_id": "nvidia5"}]
    assert storm.compare(rows, extra) == [
        f"storm {live[0]['service']}/{live[0]['scenario']}: GpuXidError on nvidia5 fired, "
        "the table does not predict it"
    ]
    temp = next(i for i, a in enumerate(live) if a["alert"] == "GpuTemperatureHigh")
    wrong = [*live[:temp], {**live[temp], "muted": True}, *live[temp + 1 :]]
    assert [f for f in storm.compare(rows, wrong) if "no edge can" in f] == [
        f"storm {live[temp]['service']}/over-temperature: GpuTemperatureHigh on nvidia0 "
        "muted, the table says no edge can"
    ]
    assert storm.compare(None, live) == [
        "alertmanager/alert-storm.json is missing from the generated folder: run `obs-iac render`"
    ]


def test_diff_summary_names_the_changed_count() -> None:
    rows = _table()
    before = {PATH: json.dumps({"alert_storm": rows}).encode()}
    fewer = json.loads(json.dumps(rows))
    row = _row(fewer, "image-classify-v3", "xid-79-twice")
    for a in row["alerts"]:
        a["muted_by"] = [e for e in a["muted_by"] if e != "nvlink-drop-mutes-util-low"]
    row["mutable"], row["notified_at_least"] = 2, 15
    after = {PATH: json.dumps({"alert_storm": fewer}).encode()}
    names = {"image-classify-v3", "recomm-v2"}
    changes = diff_compare(build_model(before, {PATH}, names), build_model(after, {PATH}, names))
    assert [(c.id.kind, c.id.service, c.id.key) for c in changes] == [
        ("storm", "image-classify-v3", "xid-79-twice")
    ]
    assert changes[0].summary == (
        "mutable 9 -> 2; notified_at_least 8 -> 15; 8 alert(s) of the scenario changed"
    )
    # The same table on both sides: nothing to say.
    assert (
        diff_compare(build_model(before, {PATH}, names), build_model(before, {PATH}, names)) == []
    )
