"""The three faces of a diff: a terminal, a PR comment, and a versioned json document."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from obs_iac.diagnostics import Severity
from obs_iac.diff.compare import Change, DiffResult, Flag

JSON_VERSION = 1
MARKDOWN_LIMIT = 60_000  # characters; GitHub rejects PR comments above 65,536
MAX_DETAIL_LINES = 8  # per object in the terminal; markdown and json list everything
_SIGN = {"added": "+", "removed": "-", "changed": "~"}
_COLOR = {"added": "32", "removed": "31", "changed": "33"}
_SEV_COLOR = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.INFO: "36"}


def _counts(changes: list[Change]) -> Counter[str]:
    return Counter(c.change for c in changes)


def _by_service(result: DiffResult) -> dict[str, tuple[list[Change], list[Flag]]]:
    out: dict[str, tuple[list[Change], list[Flag]]] = {}
    for svc in result.services():
        out[svc] = (
            [c for c in result.changes if c.id.service == svc],
            [f for f in result.flags if f.service == svc],
        )
    return out


def _label(change: Change) -> str:
    if change.id.kind == "panel" and change.title:
        # a panel's identity is a hashed id; people know it by its title
        board = change.id.key.rsplit(" / ", 1)[0] if " / " in change.id.key else ""
        return f"panel {change.title!r}" + (f" in {board}" if board else "")
    title = f" ({change.title})" if change.title and change.title not in change.id.key else ""
    return f"{change.id.kind} {change.id.key}{title}"


def _totals(result: DiffResult) -> str:
    counts = _counts(result.changes)
    services = len({c.id.service for c in result.changes})
    return (
        f"{len(result.changes)} changes in {services} service(s) "
        f"({counts['added']} added, {counts['removed']} removed, {counts['changed']} changed); "
        f"{result.errors} error(s), {result.warnings} warning(s)"
    )


def to_text(result: DiffResult, color: bool = False) -> str:
    def paint(text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color else text

    lines = [f"obs-iac diff: {result.base} -> working tree"]
    if not result.changes and not result.flags:
        lines.append("no changes")
        return "\n".join(lines)
    for svc, (changes, flags) in _by_service(result).items():
        lines.append("")
        lines.append(paint(svc, "1") if color else svc)
        for change in changes:
            sign = _SIGN[change.change]
            head = f"  {sign} {_label(change)}"
            if change.summary != change.change:
                head += ": " + change.summary.removeprefix(change.change + ": ")
            lines.append(paint(head, _COLOR[change.change]))
            minor = [f.summary for f in change.fields if f.minor]
            lines.extend(f"      {text}" for text in minor[:MAX_DETAIL_LINES])
            if len(minor) > MAX_DETAIL_LINES:
                lines.append(
                    f"      ... and {len(minor) - MAX_DETAIL_LINES} more "
                    "(--format json or markdown lists them all)"
                )
        for flag in flags:
            diag = flag.diagnostic
            sev = paint(diag.severity.label, "1;" + _SEV_COLOR[diag.severity])
            lines.append(f"  {sev}[{diag.code}]: {diag.message}")
            if diag.hint:
                lines.append(f"    help: {diag.hint}")
    lines.append("")
    lines.append(_totals(result))
    return "\n".join(lines)


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return text.replace("<", "&lt;")


def _code(value: Any) -> str:
    # Inside a code span entities are not decoded, so only the table's own pipes escape.
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("|", "\\|").replace("\n", " ")
    return f"`{text}`" if "`" not in text else _cell(value)


def _details(svc: str, changes: list[Change]) -> list[str]:
    out = ["", f"<details><summary><b>{_cell(svc)}</b>: {len(changes)} change(s)</summary>"]
    out += ["", "| | Kind | Object | Change |", "|---|---|---|---|"]
    for change in changes:
        shown = change.title if change.id.kind == "panel" and change.title else change.id.key
        out.append(
            f"| {_SIGN[change.change]} | {change.id.kind} | {_code(shown)} "
            f"| {_cell(change.summary)} |"
        )
    detail = [c for c in changes if c.fields]
    if detail:
        out += ["", "| Object | Field | Before | After |", "|---|---|---|---|"]
        for change in detail:
            for fchange in change.fields:
                out.append(
                    f"| {_code(change.id.key)} | {_cell(fchange.path)} "
                    f"| {_code(fchange.before) if fchange.before is not None else '—'} "
                    f"| {_code(fchange.after) if fchange.after is not None else '—'} |"
                )
    out += ["", "</details>"]
    return out


def to_markdown(result: DiffResult, limit: int = MARKDOWN_LIMIT) -> str:
    """A PR comment. Totals and every risk flag always fit; the per-service tables and
    details are cut where the comment would exceed ``limit`` characters (GitHub rejects
    comments above 65,536), with a note saying what was left out."""
    out = [f"### obs-iac diff: `{result.base}` → this change", ""]
    if not result.changes and not result.flags:
        out.append("No change to any generated output.")
        return "\n".join(out) + "\n"
    icon = "❌" if result.errors else ("⚠️" if result.warnings else "✅")
    out.append(f"{icon} {_cell(_totals(result))}")
    if result.flags:
        out += ["", "#### Risk flags", ""]
        for flag in result.flags:
            diag = flag.diagnostic
            mark = {"error": "❌", "warning": "⚠️", "info": "ℹ️"}[diag.severity.label]
            where = f" ({diag.location})" if diag.location else ""
            out.append(
                f"- {mark} **{diag.severity.label}** `{diag.code}` {_cell(flag.service)}: "
                f"{_cell(diag.message)}{_cell(where)}"
            )
            if diag.hint:
                out.append(f"  - help: {_cell(diag.hint)}")
    grouped = _by_service(result)
    rows = ["", "| Service | Added | Removed | Changed | Errors | Warnings |"]
    rows.append("|---|---:|---:|---:|---:|---:|")
    for svc, (changes, flags) in grouped.items():
        counts = _counts(changes)
        errs = sum(1 for f in flags if f.diagnostic.severity is Severity.ERROR)
        warns = sum(1 for f in flags if f.diagnostic.severity is Severity.WARNING)
        rows.append(
            f"| {_cell(svc)} | {counts['added']} | {counts['removed']} | {counts['changed']} "
            f"| {errs} | {warns} |"
        )
    size = sum(len(line) + 1 for line in out)
    left_out = 0
    kept_rows = []
    for row in rows:
        if size + len(row) + 1 > limit // 2:  # half the budget at most for the summary
            left_out += 1
            continue
        kept_rows.append(row)
        size += len(row) + 1
    out[3:3] = kept_rows  # the summary table right under the totals
    skipped = []
    for svc, (changes, _) in grouped.items():
        if not changes:
            continue
        block = _details(svc, changes)
        block_size = sum(len(line) + 1 for line in block)
        if size + block_size > limit - 400:
            skipped.append(svc)
            continue
        out += block
        size += block_size
    if left_out or skipped:
        out += [
            "",
            f"_Cut to fit a comment: {left_out} summary row(s) and the details of "
            f"{len(skipped)} service(s) are left out; `obs-iac diff --format json` (or "
            "`--format markdown` locally) has everything._",
        ]
    return "\n".join(out) + "\n"


def to_json(result: DiffResult) -> str:
    counts = _counts(result.changes)
    payload = {
        "version": JSON_VERSION,
        "base": result.base,
        "changed": result.changed,
        "summary": {
            "added": counts["added"],
            "removed": counts["removed"],
            "changed": counts["changed"],
            "errors": result.errors,
            "warnings": result.warnings,
        },
        "changes": [c.to_json() for c in result.changes],
        "flags": [
            {**f.diagnostic.to_json(), "service": f.service, "acknowledged": f.acknowledged}
            for f in result.flags
        ],
    }
    return json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False, default=str)
