"""Alertmanager matchers: parse the string form, render it, evaluate it, prove disjointness.

Alertmanager regexes are Go RE2, fully anchored (``^(?:...)$``); google-re2 accepts the
same syntax, so a regex that compiles here compiles there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import re2

from obs_iac.escaping import go_unquote, regex_literal
from obs_iac.plan.model import Matcher

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors become diagnostics, not stderr noise

# `name op value`: the name classic or double-quoted (UTF-8, Alertmanager >= 0.27); the value
# double-quoted, or bare without the characters Alertmanager splits or unquotes on.
_MATCHER = re.compile(
    r'^\s*(?P<name>[A-Za-z_:][A-Za-z0-9_:]*|"(?:[^"\\]|\\.)*")\s*'
    r"(?P<op>=~|!~|!=|=)\s*"
    r'(?P<value>"(?:[^"\\]|\\.)*"|[^"\\,{}]*?)\s*$',
    re.DOTALL,
)
_LITERALS = re.compile(r"^[A-Za-z0-9_:\-]+(\|[A-Za-z0-9_:\-]+)*$")
_CLASSIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# What Alertmanager's classic parser (pkg/labels/parse.go ParseMatcher, the meaning of a
# matcher at every release: v0.25 has only it, and from v0.27 the default "fallback" mode
# returns its result whenever it parses) makes of a backslash pair: \n, \" and \\ are
# escapes, any other backslash is a literal one (so "gpu-\d+" is the regex gpu-\d+, and
# "a\tb" is a, backslash, t, b: no tab).
_CLASSIC_ESCAPES = {"n": "\n", '"': '"', "\\": "\\"}


class MatcherSyntaxError(ValueError):
    pass


def _classic_unquote(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(_CLASSIC_ESCAPES.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def parse_matcher(text: str) -> Matcher:
    """``severity="critical"`` / ``alertname=~"Gpu.*"`` -> Matcher, with the value
    Alertmanager reads from the same text. Raises MatcherSyntaxError."""
    match = _MATCHER.match(text)
    if match is None:
        raise MatcherSyntaxError(
            f'{text!r} is not a matcher; write label="value" with one of = != =~ !~ '
            '(quote a value holding , { } \\ or ")'
        )
    op = match.group("op")
    raw_name, raw_value = match.group("name"), match.group("value")
    if raw_name.startswith('"'):
        # A quoted name only parses in the UTF-8 parser, whose strings are Go strings
        # (matcher/parse/token.go: strconv.Unquote); fallback mode then uses its result.
        name, value = go_unquote(raw_name), raw_value
        if raw_value.startswith('"'):
            try:
                value = go_unquote(raw_value)
            except ValueError as exc:
                raise MatcherSyntaxError(
                    f"{text!r}: with a quoted label name the value is a Go string: {exc}"
                ) from None
        return Matcher(name=name, op=op, value=value)
    value = _classic_unquote(raw_value[1:-1]) if raw_value.startswith('"') else raw_value
    return Matcher(name=raw_name, op=op, value=value)


def regex_error(pattern: str) -> str | None:
    """None when RE2 (and hence Alertmanager) accepts the pattern, else its error."""
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        return detail.decode() if isinstance(detail, bytes) else str(detail)
    return None


def quote(value: str) -> str:
    r"""A double-quoted matcher string that both of Alertmanager's parsers read as exactly
    ``value``: only the three escapes they share (``\\``, ``\"``, ``\n``) are used and every
    other character is written as itself, so the classic parser (which keeps an unknown
    ``\x`` as two characters) and the UTF-8 one (strconv.Unquote) agree, and fallback mode
    has nothing to disagree about."""
    return '"' + value.translate(_MATCHER_ESCAPES) + '"'


_MATCHER_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def render(matcher: Matcher) -> str:
    """The string form Alertmanager's ``source_matchers`` parse back to ``matcher``; the
    name is quoted only when it is not a classic label name (UTF-8 names need v0.27)."""
    name = matcher.name
    if not _CLASSIC_NAME.fullmatch(name):
        name = quote(name)
    return f"{name}{matcher.op}{quote(matcher.value)}"


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
    return Matcher(name="alertname", op="=~", value="|".join(regex_literal(n) for n in names))


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
