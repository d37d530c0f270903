"""Enough of Go's text/template parser to reject what Prometheus rejects in alert
labels and annotations (rulefmt's testTemplateParsing): unclosed actions and comments,
unbalanced if/range/with/end, unknown functions and undefined variables.

It also lists the ``$labels`` references a template makes, for the label-flow check.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Go's builtins plus the functions Prometheus 2.42 registers (checked with promtool 2.42).
FUNCTIONS = frozenset(
    [
        "and",
        "or",
        "not",
        "len",
        "index",
        "slice",
        "print",
        "printf",
        "println",
        "html",
        "js",
        "urlquery",
        "call",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
        "humanize",
        "humanize1024",
        "humanizeDuration",
        "humanizePercentage",
        "humanizeTimestamp",
        "toTime",
        "title",
        "toUpper",
        "toLower",
        "match",
        "reReplaceAll",
        "query",
        "first",
        "label",
        "value",
        "strvalue",
        "args",
        "safeHtml",
        "sortByLabel",
        "pathPrefix",
        "externalURL",
        "graphLink",
        "tableLink",
        "parseDuration",
        "stripPort",
        "stripDomain",
    ]
)
KEYWORDS = frozenset(
    [
        "if",
        "else",
        "end",
        "range",
        "with",
        "define",
        "template",
        "block",
        "break",
        "continue",
        "nil",
        "true",
        "false",
    ]
)
OPENERS = frozenset({"if", "range", "with", "define", "block"})
PREDEFINED = ("$", "$labels", "$externalLabels", "$externalURL", "$value")

_TOKEN = re.compile(
    r"""\s+|"(?:[^"\\\n]|\\.)*"|`[^`]*`|'(?:[^'\\\n]|\\.)+'|:=|=|\||\(|\)|,"""
    r"""|\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*|(?:\.[A-Za-z0-9_]+)+|\.|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*"""
    r"""|[-+]?[0-9][0-9a-fA-FxXoObB_.eEpP+-]*|[^\s]"""
)
# Prometheus binds `$labels` to `.Labels` of the alert's template data (prometheus/
# prometheus rules/alerting.go, AlertingRule.Eval: defs `{{$labels := .Labels}}`), so
# `.Labels.x` and `$.Labels.x` read the same label; a variable's `.Labels` does not.
_LABELS = r"(?:\$labels|(?<![\w.)\]])\$?\.Labels)"
_LABEL_DOT = re.compile(_LABELS + r"\.([A-Za-z_][A-Za-z0-9_]*)")
_LABEL_INDEX = re.compile(r"index\s+" + _LABELS + r"""\s+(?:"((?:[^"\\]|\\.)*)"|`([^`]*)`)""")


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|`[^`]*`')


def label_references(text: str) -> list[str]:
    """Labels a template reads from ``$labels`` (``$labels.x``, ``index $labels "x"``),
    inside actions only: literal text (or an escaped ``{{ "{{" }}``) reads nothing."""
    if "{{" not in text:
        return []
    out: list[str] = []
    for body in _actions(text)[0]:
        out += [m.group(1) for m in _LABEL_DOT.finditer(_STRING.sub('""', body))]
        out += [a if a is not None else b for a, b in _LABEL_INDEX.findall(body)]
    return out


def _actions(text: str) -> tuple[list[str], str | None]:
    """The inside of every ``{{ }}`` action, comments removed."""
    out: list[str] = []
    pos = 0
    while True:
        start = text.find("{{", pos)
        if start < 0:
            return out, None
        i = start + 2
        if text.startswith("- ", i) or text.startswith("-\t", i) or text.startswith("-\n", i):
            i += 2
        stripped = text[i:].lstrip(" \t\r\n") if text[i : i + 1] in " \t\r\n" else text[i:]
        if stripped.startswith("/*"):
            j = text.find("*/", i)
            if j < 0:
                return out, "unclosed comment"
            rest = text[j + 2 :]
            m = re.match(r"\s*-?}}" if rest.lstrip().startswith("-") else r"}}", rest)
            if m is None:
                return out, "comment ends before closing delimiter"
            pos = j + 2 + m.end()
            continue
        # Scan to the closing delimiter, skipping over string literals.
        j = i
        quote = ""
        while j < len(text):
            c = text[j]
            if quote:
                if c == "\\" and quote != "`":
                    j += 2
                    continue
                if c == quote:
                    quote = ""
                elif c == "\n" and quote != "`":
                    return out, "unterminated quoted string"
            elif c in "\"`'":
                quote = c
            elif text.startswith("}}", j):
                break
            j += 1
        else:
            return out, "unclosed action"
        body = text[i:j]
        if body.endswith(" -") or body.endswith("\t-") or body.endswith("\n-"):
            body = body[:-2]
        out.append(body)
        pos = j + 2


@lru_cache(maxsize=16384)
def parse_error(text: str) -> str | None:
    """Why Go's template parser (as Prometheus configures it) rejects ``text``, or None."""
    if "{{" not in text:
        return None
    actions, problem = _actions(text)
    if problem:
        return problem
    scopes: list[tuple[str, set[str]]] = [("", set(PREDEFINED))]
    for body in actions:
        tokens = [t for t in _TOKEN.findall(body) if not t.isspace()]
        if not tokens:
            return "missing value for command"
        first = tokens[0]
        if first == "end":
            if len(scopes) == 1:
                return "unexpected {{end}}"
            scopes.pop()
            continue
        if first == "else":
            if len(scopes) == 1 or scopes[-1][0] not in ("if", "range", "with"):
                return "unexpected {{else}}"
            tokens = tokens[1:]
            if not tokens or tokens[0] not in ("if", "with"):
                continue
            tokens = tokens[1:]
            first = ""
        declared: set[str] = set()
        if first in OPENERS:
            tokens = tokens[1:]
            scopes.append((first, set()))
            if first in ("define", "block"):
                continue
        elif first == "template":
            continue
        if not tokens:
            return "missing value for command"
        if tokens[0] == "|":
            return 'unexpected "|" in command'
        if ":=" in tokens:
            idx = tokens.index(":=")
            for tok in tokens[:idx]:
                if not tok.startswith("$") and tok != ",":
                    return f'function "{tok}" not defined'
            declared = {t for t in tokens[:idx] if t.startswith("$")}
            tokens = tokens[idx + 1 :]
        depth = 0
        visible = set().union(*(s for _, s in scopes))
        for tok in tokens:
            if tok == "(":
                depth += 1
            elif tok == ")":
                depth -= 1
                if depth < 0:
                    return "unexpected right paren"
            elif tok.startswith("$"):
                name = tok.split(".", 1)[0]
                if name not in visible and name not in declared:
                    return f"undefined variable {name!r}".replace("'", '"')
            elif tok[0].isalpha() or tok[0] == "_":
                word = tok.split(".", 1)[0]
                if word in KEYWORDS:
                    continue
                if word not in FUNCTIONS:
                    return f'function "{word}" not defined'
        if depth > 0:
            return "unclosed left paren"
        scopes[-1][1].update(declared)
    if len(scopes) > 1:
        return "unexpected EOF"
    return None
