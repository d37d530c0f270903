"""PromQL as tokens: what the tree no longer shows.

promql-parser follows the newest grammar and its tree forgets how a thing was written:
`rate(x[300])` and `rate(x[5m])` give the same range, `{"foo"}` the same selector as
`foo`. Prometheus 2.x rejects the first spelling of each, so the version check needs the
tokens. The lexer follows Prometheus' own (promql/parser/lex.go): strings in "", '' or
``; `#` comments to the end of the line; a number directly followed by a unit letter is
a duration (`1h30m`); identifiers may hold colons.

Version facts (prometheus/prometheus CHANGELOG.md at v3.14.0):
- 2.54.0: underscores in number literals (`1_000`, #12821); float literals and durations
  interchangeable, experimental (#9138).
- 3.0.0: "Float literals and time durations being the same is now a stable feature"
  (#15111): `x[300]`, `offset 50`, `[30:10]`, `@ 5m`, `predict_linear(x[1h], 1h)`;
  UTF-8 names on by default (#14705): `{"my.metric"}`, `sum by ("a.b")`.
- 3.7.1: `anchored` and `smoothed` stay valid metric and label names (#17353), as they
  are in every 2.x release.
- every release: `x @ end()[5m]` loads (only a timestamp `@` is refused before a range).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<comment>\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
  | (?P<duration>(?:\d+(?:ms|[smhdwy]))+(?![A-Za-z0-9_]))
  | (?P<number>0[xX][0-9a-fA-F_]+|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,:@(){}\[\]])
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
_MATCH_OPS = frozenset({"=", "!=", "=~", "!~"})


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # string, duration, number, ident, op, bad
    text: str
    offset: int


def tokenize(expr: str) -> list[Token]:
    out: list[Token] = []
    for m in _TOKEN.finditer(expr):
        kind = m.lastgroup or "bad"
        if kind in ("space", "comment"):
            continue
        out.append(Token(kind, m.group(), m.start()))
    return out


def where(expr: str, offset: int) -> str:
    """`line L, column C` of an offset (1-based), as promtool words positions."""
    line = expr.count("\n", 0, offset) + 1
    column = offset - (expr.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}" if "\n" in expr else f"column {column}"


def version_problem(expr: str, version: tuple[int, int]) -> str | None:
    """What in the way ``expr`` is *written* the given release rejects (None: nothing)."""
    tokens = tokenize(expr)
    stack: list[str] = []  # open brackets: "(" "{" "[" and "group(" for grouping lists
    for i, tok in enumerate(tokens):
        prev = tokens[i - 1] if i else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        top = stack[-1] if stack else ""
        if tok.kind == "op":
            if tok.text == "(":
                grouping = prev is not None and prev.kind == "ident" and prev.text in _GROUPING
                stack.append("group(" if grouping else "(")
            elif tok.text in "{[":
                stack.append(tok.text)
            elif tok.text in ")}]" and stack:
                stack.pop()
            continue
        if tok.kind == "number" and "_" in tok.text and version < (2, 54):
            return (
                f"number {tok.text!r} at {where(expr, tok.offset)}: underscores in numbers "
                "need Prometheus 2.54"
            )
        if version >= (3, 0):
            continue
        in_range = top == "["
        after_offset = prev is not None and (
            (prev.kind == "ident" and prev.text == "offset")
            or (prev.text == "-" and i >= 2 and tokens[i - 2].text == "offset")
        )
        after_at = prev is not None and prev.text == "@"
        if tok.kind == "number" and (in_range or after_offset):
            return (
                f"number {tok.text!r} used as a duration at {where(expr, tok.offset)}: "
                "Prometheus 3.0 reads numbers as seconds there; this release needs a unit "
                "(e.g. 5m)"
            )
        if tok.kind == "duration" and not (in_range or after_offset):
            use = "an @ timestamp" if after_at else "a number"
            return (
                f"duration {tok.text!r} used as {use} at {where(expr, tok.offset)}: "
                "durations and numbers are interchangeable only from Prometheus 3.0"
            )
        if tok.kind == "string" and _names_something(top, prev, nxt):
            return (
                f"quoted name {tok.text} at {where(expr, tok.offset)}: quoted metric and "
                "label names need Prometheus 3.0 (UTF-8 names)"
            )
    return None


def _names_something(top: str, prev: Token | None, nxt: Token | None) -> bool:
    """Whether a string token stands where a metric or label name goes."""
    if top == "group(":
        return True  # by ("a"), on ("a"), group_left ("a")
    if top != "{" or prev is None:
        return False
    opens_item = prev.text in ("{", ",")
    if nxt is not None and nxt.text in _MATCH_OPS:
        return opens_item  # {"label"="v"}
    return opens_item and nxt is not None and nxt.text in (",", "}")  # {"metric.name"}


def diagnose(expr: str) -> str | None:
    """A position and reason for an expression promql-parser only calls invalid."""
    tokens = tokenize(expr)
    pairs = {")": "(", "}": "{", "]": "["}
    stack: list[Token] = []
    for tok in tokens:
        if tok.kind == "bad":
            if tok.text in "\"'`":
                return f"unterminated quoted string at {where(expr, tok.offset)}"
            return f"unexpected character {tok.text!r} at {where(expr, tok.offset)}"
        if tok.kind != "op":
            continue
        if tok.text in "({[":
            stack.append(tok)
        elif tok.text in pairs:
            if not stack or stack[-1].text != pairs[tok.text]:
                return f"unexpected {tok.text!r} at {where(expr, tok.offset)}"
            stack.pop()
    if stack:
        tok = stack[-1]
        return f"unclosed {tok.text!r} opened at {where(expr, tok.offset)}"
    if tokens and tokens[-1].kind == "op" and tokens[-1].text not in ")}]":
        tok = tokens[-1]
        return f"the expression ends after {tok.text!r} at {where(expr, tok.offset)}"
    return None


# Words that newer grammars made keywords (extended range selectors, Prometheus 3.7, behind
# a feature flag) but that stay valid names everywhere (#17353). promql-parser rejects
# them as names; a same-length stand-in keeps every offset of the text.
NAME_KEYWORDS = {"anchored": "anchore_", "smoothed": "smoothe_"}


def parser_compatible(expr: str) -> str:
    """``expr`` rewritten where promql-parser is stricter than Prometheus: `anchored` and
    `smoothed` as names (not right after a range's `]`, where they are the experimental
    modifier), and underscores in numbers (2.54+; whether the release accepts them is
    :func:`version_problem`'s business)."""
    out: list[str] = []
    last = 0
    tokens = tokenize(expr)
    for i, tok in enumerate(tokens):
        replacement = None
        if tok.kind == "ident" and tok.text in NAME_KEYWORDS:
            if not (i and tokens[i - 1].text == "]"):
                replacement = NAME_KEYWORDS[tok.text]
        elif tok.kind == "number" and "_" in tok.text:
            replacement = tok.text.replace("_", "")
        if replacement is not None:
            out += [expr[last : tok.offset], replacement]
            last = tok.offset + len(tok.text)
    return _at_after_range("".join([*out, expr[last:]]))


def _at_after_range(expr: str) -> str:
    """`x @ end()[5m]` as `x[5m] @ end()`. Prometheus refuses an `@` before a range only
    when it holds a timestamp (`vs.Timestamp != nil` in promql/parser/generated_parser.y,
    v2.42.0 to v3.14.0); `@ start()` and `@ end()` set another field and pass, while
    promql-parser refuses them. The two spellings mean the same."""
    tokens = tokenize(expr)
    for i in range(len(tokens) - 4):
        at, fn, lpar, rpar, bracket = tokens[i : i + 5]
        if not (
            at.text == "@"
            and fn.text in ("start", "end")
            and (lpar.text, rpar.text, bracket.text) == ("(", ")", "[")
        ):
            continue
        close = next((t for t in tokens[i + 5 :] if t.text == "]"), None)
        if close is None:
            return expr
        modifier = expr[at.offset : rpar.offset + 1]
        moved = (
            expr[: at.offset]
            + expr[bracket.offset : close.offset + 1]
            + " "
            + modifier
            + expr[close.offset + 1 :]
        )
        return _at_after_range(moved)
    return expr
