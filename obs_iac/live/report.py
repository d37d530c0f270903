"""The live run's report: per stack, each alert and inhibit edge with its verdict, and
the alert storm (fired, muted, notified per scenario, per service and for the fleet), as
text, JSON (CI) or markdown (PR comments). No timestamps: two runs that saw the same
thing print the same report, apart from the measured wall time."""

from __future__ import annotations

import json
from typing import Any

from obs_iac.live.run import LiveResult, StackResult


def _fleet(stack: StackResult) -> list[dict[str, Any]]:
    totals: dict[str, dict[str, int]] = {}
    for row in stack.storm:
        t = totals.setdefault(row["scenario"], {"fired": 0, "muted": 0, "notified": 0})
        for k in t:
            t[k] += int(row[k])
    return [{"service": "(fleet)", "scenario": s, **c} for s, c in sorted(totals.items())]


def to_json(result: LiveResult) -> dict[str, Any]:
    return {
        "passed": result.passed,
        "time_scale": result.time_scale,
        "wall_seconds": result.wall_seconds,
        "timings": result.timings,
        "upgraded_exporter": dict(sorted(result.upgraded.items())),
        "exporter_shapes": "provisional" if result.provisional_shapes else "catalogue",
        "stacks": [
            {
                "stack": s.stack,
                "versions": s.versions,
                "error": s.error,
                "failures": s.failures,
                "alerts": s.alerts,
                "edges": s.edges,
                "storm": s.storm + _fleet(s),
            }
            for s in result.stacks
        ],
    }


def _counts(stack: StackResult) -> str:
    alerts = [a["status"] for a in stack.alerts]
    edges = [e["status"] for e in stack.edges]
    return (
        f"alerts {alerts.count('proven')} proven, {alerts.count('FAILED')} failed, "
        f"{alerts.count('unproven')} unproven; edges {edges.count('proven')} proven, "
        f"{edges.count('unproven')} unproven"
    )


def _header(result: LiveResult) -> list[str]:
    note = (
        f"time compressed {result.time_scale}x (every duration of the rules and of the stack "
        f"divided by {result.time_scale}; thresholds unchanged)"
    )
    phases = ", ".join(f"{k} {v:g} s" for k, v in result.timings.items())
    lines = [
        note,
        f"wall time {result.wall_seconds:g} s ({phases})"
        if phases
        else f"wall time {result.wall_seconds:g} s",
    ]
    if result.upgraded:
        versions = ", ".join(sorted(set(result.upgraded.values())))
        lines.append(
            f"exporter upgrade: {len(result.upgraded)} nodes serve dcgm-exporter {versions} "
            f"({', '.join(sorted(result.upgraded))})"
        )
    if result.provisional_shapes:
        lines.append("exporter shapes: provisional stand-in (catalogue not on this branch)")
    return lines


def to_text(result: LiveResult) -> str:
    out = _header(result)
    for s in result.stacks:
        versions = ", ".join(f"{k} {v}" for k, v in s.versions.items())
        out.append("")
        out.append(f"== {s.stack} ({versions}): {'PASS' if not s.failures else 'FAIL'}")
        out.append(f"   {_counts(s)}")
        for a in s.alerts:
            out.append(
                f"   {a['status']:<8} {a['service']}/{a['alert']}"
                f"{' [' + a['scenario'] + ']' if a['scenario'] else ''}: {a['detail']}"
            )
        for e in s.edges:
            out.append(f"   {e['status']:<8} edge {e['service']}/{e['edge']}: {e['detail']}")
        for f in s.failures:
            out.append(f"   FAIL     {f}")
        out.append("   storm (fired / muted / notified):")
        for row in s.storm + _fleet(s):
            out.append(
                f"     {row['service']:<20} {row['scenario']:<20} "
                f"{row['fired']:>4} {row['muted']:>4} {row['notified']:>4}"
            )
    return "\n".join(out) + "\n"


def storm_markdown(stack: StackResult) -> str:
    lines = [
        "| service | scenario | alerts fired | muted by inhibition | notifications |",
        "|---|---|---:|---:|---:|",
    ]
    for row in stack.storm + _fleet(stack):
        lines.append(
            f"| {row['service']} | {row['scenario']} | {row['fired']} | {row['muted']} "
            f"| {row['notified']} |"
        )
    return "\n".join(lines) + "\n"


def to_markdown(result: LiveResult) -> str:
    out = ["## obs-iac test --live", ""] + [f"- {line}" for line in _header(result)]
    for s in result.stacks:
        versions = ", ".join(f"{k} {v}" for k, v in s.versions.items())
        out += ["", f"### {s.stack}: {versions}: {'pass' if not s.failures else '**FAIL**'}", ""]
        out += [_counts(s), ""]
        out += ["| status | service | alert | scenario | detail |", "|---|---|---|---|---|"]
        out += [
            f"| {a['status']} | {a['service']} | `{a['alert']}` | {a['scenario']} | {a['detail']} |"
            for a in s.alerts
        ]
        out += ["", "| status | service | inhibit edge | detail |", "|---|---|---|---|"]
        out += [
            f"| {e['status']} | {e['service']} | `{e['edge']}` | {e['detail']} |" for e in s.edges
        ]
        if s.failures:
            out += ["", "Failures:", ""] + [f"- {f}" for f in s.failures]
        out += ["", "Alert storm:", "", storm_markdown(s)]
    return "\n".join(out) + "\n"


def dumps(result: LiveResult) -> str:
    return json.dumps(to_json(result), indent=2, sort_keys=True) + "\n"
