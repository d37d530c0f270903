"""Time compression of a rule file: every duration divided by one factor, so a run of
minutes proves what the committed rules do over days.

What is scaled: `for`, `keep_firing_for`, every range selector and subquery (`[5m]`,
`[1h:5m]`) and every `offset` in an expression. With the scrape, evaluation, resend and
lookback intervals of the assembled stack divided by the same factor, every ratio between
durations is kept: a window still spans the same number of evaluations, `offset 1m` is
still one evaluation back, a `for:` still needs the same number of consecutive firing
evaluations. Thresholds, label matchers, joins and numbers in expressions are left exactly
as generated; values per second (rate, increase / window) are rates in either time base, so
a threshold on them means the same. Only the copy in the run's temporary directory is
scaled; the committed generated/ is read, never written."""

from __future__ import annotations

import re
from typing import Any

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_UNITS_MS["y"] = 365 * _UNITS_MS["d"]
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_DURATION = r"(?:\d+(?:ms|s|m|h|d|w|y))+"
_RANGE = re.compile(rf"\[\s*({_DURATION})\s*(?::\s*({_DURATION})?\s*)?\]")
_OFFSET = re.compile(rf"\boffset\s+(-?)({_DURATION})")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')


class ScaleError(ValueError):
    """A duration that cannot be divided by the factor into whole milliseconds."""


def parse_ms(text: str) -> int:
    pos, total = 0, 0
    for match in _PART.finditer(text):
        if match.start() != pos:
            raise ScaleError(f"not a duration: {text!r}")
        total += int(match.group(1)) * _UNITS_MS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ScaleError(f"not a duration: {text!r}")
    return total


def format_ms(ms: int) -> str:
    if ms % 1000:
        return f"{ms}ms"
    return f"{ms // 1000}s"


def scale_duration(text: str, factor: int) -> str:
    ms = parse_ms(text)
    if ms == 0:
        return "0s"
    scaled = ms // factor
    if scaled == 0 or ms % factor:
        raise ScaleError(
            f"{text} divided by --time-scale {factor} is not a whole number of milliseconds"
        )
    return format_ms(scaled)


def scale_expr(expr: str, factor: int) -> str:
    """``expr`` with every range, subquery step and offset divided by ``factor``; string
    literals (label values, regexes) are never touched."""
    out: list[str] = []
    pos = 0
    for literal in _STRING.finditer(expr):
        out.append(_scale_code(expr[pos : literal.start()], factor))
        out.append(literal.group(0))
        pos = literal.end()
    out.append(_scale_code(expr[pos:], factor))
    return "".join(out)


def _scale_code(code: str, factor: int) -> str:
    def range_(match: re.Match[str]) -> str:
        window = scale_duration(match.group(1), factor)
        if match.group(0).count(":") == 0:
            return f"[{window}]"
        step = match.group(2)
        return f"[{window}:{scale_duration(step, factor) if step else ''}]"

    def offset(match: re.Match[str]) -> str:
        return f"offset {match.group(1)}{scale_duration(match.group(2), factor)}"

    return _OFFSET.sub(offset, _RANGE.sub(range_, code))


def scale_rule_file(doc: dict[str, Any], factor: int) -> dict[str, Any]:
    """A copy of a parsed Prometheus rule file with every duration divided by ``factor``."""
    groups = []
    for group in doc.get("groups") or []:
        new_group = dict(group)
        if "interval" in group:
            new_group["interval"] = scale_duration(str(group["interval"]), factor)
        rules = []
        for rule in group.get("rules") or []:
            new_rule = dict(rule)
            new_rule["expr"] = scale_expr(str(rule["expr"]), factor)
            for key in ("for", "keep_firing_for"):
                if key in rule:
                    new_rule[key] = scale_duration(str(rule[key]), factor)
            rules.append(new_rule)
        new_group["rules"] = rules
        groups.append(new_group)
    return {**doc, "groups": groups}
