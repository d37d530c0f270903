"""Alertmanager matchers: parse the string form, render it, evaluate it, prove disjointness.

Alertmanager regexes are Go RE2, fully anchored (``^(?:...)$``); google-re2 accepts the
same syntax, so a regex that compiles here compiles there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import re2

from obs_iac.plan.model import Matcher

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors become diagnostics, not stderr noise

# `name op value`: name classic or double-quoted; value double-quoted or bare.
_MATCHER = re.compile(
    r'^\s*(?P<name>[A-Za-z_][A-Za-z0-9_.]*|"(?:[^"\\]|\\.)*")\s*'
    r"(?P<op>=~|!~|!=|=)\s*"
    r'(?P<value>"(?:[^"\\]|\\.)*"|[^"]*?)\s*$'
)
_LITERALS = re.compile(r"^[A-Za-z0-9_:\-]+(\|[A-Za-z0-9_:\-]+)*$")


class MatcherSyntaxError(ValueError):
    pass


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        body = text[1:-1]
        return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)
    return text


def parse_matcher(text: str) -> Matcher:
    """``severity="critical"`` / ``alertname=~"Gpu.*"`` -> Matcher. Raises MatcherSyntaxError."""
    match = _MATCHER.match(text)
    if match is None:
        raise MatcherSyntaxError(
            f'{text!r} is not a matcher; write label="value" with one of = != =~ !~'
        )
    op = match.group("op")
    value = _unquote(match.group("value"))
    name = _unquote(match.group("name"))
    return Matcher(name=name, op=op, value=value)


def regex_error(pattern: str) -> str | None:
    """None when RE2 (and hence Alertmanager) accepts the pattern, else its error."""
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        return detail.decode() if isinstance(detail, bytes) else str(detail)
    return None


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def render(matcher: Matcher) -> str:
    """The string form Alertmanager's ``source_matchers`` parse; names quoted only when
    they are not classic label names."""
    name = matcher.name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        name = _quote(name)
    return f"{name}{matcher.op}{_quote(matcher.value)}"


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> object:
    return re2.compile(f"^(?:{pattern})$", _OPTIONS)


def matches_value(matcher: Matcher, value: str) -> bool:
    """Alertmanager semantics; an absent label is the empty string."""
    if matcher.op == "=":
        return value == matcher.value
    if matcher.op == "!=":
        return value != matcher.value
    hit = _compiled(matcher.value).fullmatch(value) is not None  # type: ignore[attr-defined]
    return hit if matcher.op == "=~" else not hit


def literal_values(matcher: Matcher) -> frozenset[str] | None:
    """The finite set of values a positive matcher accepts, when it is an exact match or a
    plain alternation of literals (``A|B|C``); None otherwise."""
    if matcher.op == "=":
        return frozenset({matcher.value})
    if matcher.op == "=~":
        body = matcher.value
        if body.startswith("(?:") and body.endswith(")"):
            body = body[3:-1]
        if _LITERALS.match(body):
            return frozenset(body.split("|"))
    return None


def alternation(values: Iterable[str]) -> Matcher | None:
    """One matcher accepting exactly these alert names (sorted, so output is stable)."""
    names = sorted(set(values))
    if not names:
        return None
    if len(names) == 1:
        return Matcher(name="alertname", op="=", value=names[0])
    return Matcher(name="alertname", op="=~", value="|".join(re.escape(n) for n in names))


def provably_disjoint(left: Sequence[Matcher], right: Sequence[Matcher]) -> str | None:
    """A label on which no value satisfies both matcher lists, or None when no such label
    can be proven. Sound, not complete: None means 'may overlap'."""
    names = sorted({m.name for m in (*left, *right)})
    for name in names:
        constraints = [m for m in (*left, *right) if m.name == name]
        finite: frozenset[str] | None = None
        for m in constraints:
            vals = literal_values(m)
            if vals is not None:
                finite = vals if finite is None else finite & vals
        if finite is None:
            # Without an enumerable side we cannot prove disjointness, except for an
            # absent label: the empty value is the only one to try then.
            continue
        if not any(all(matches_value(m, v) for m in constraints) for v in finite):
            return name
    return None
