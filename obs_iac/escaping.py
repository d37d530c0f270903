"""Escaping by construction: one function per output language, used by every generator.

Each turns a value into the text that the target program reads back as exactly that value;
``tests/test_escaping.py`` proves it by feeding arbitrary strings through each one and
into the real parser (promql-parser and promtool, Alertmanager's own matcher parser via
``tools/go/amparse``, PyYAML and Go's YAML, json, RE2).

- PromQL and LogQL strings: ``go_string`` (both languages unquote string literals with Go's
  ``strconv.Unquote``: prometheus/prometheus promql/parser/parse.go ``unquoteString``;
  grafana/loki pkg/logql/syntax/lex.go, which scans strings with text/scanner and unquotes
  them with strconv.Unquote).
- Regexes inside those strings: ``regex_literal`` (RE2 syntax, ``re2.escape``) then
  ``go_string``.
- Go templates in alert labels and annotations: ``template_text``. User text is literal
  (``template_literal``) unless the user wrote ``Template("...")``, which is parsed the way
  promtool parses annotations (``obs_iac.lint.gotemplate``) when the blueprint is loaded.
- Alertmanager matchers: ``obs_iac.packs.inhibit.matchers.render`` / ``quote``.
- Alloy strings: ``obs_iac.generators.alloy.alloy_string``.
- YAML and JSON: the serialisers in ``obs_iac.render`` (every string is emitted quoted or
  checked plain-safe there); generators hand them data, never YAML or JSON text.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

# Go's escapes for a double-quoted string literal (strconv.Unquote reads all of them).
_GO_SIMPLE = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_GO_ESCAPES = str.maketrans(
    {c: _GO_SIMPLE.get(c, f"\\x{ord(c):02x}") for c in ("\\", '"', *map(chr, range(0x20)), "\x7f")}
)


def go_string(value: str) -> str:
    """A Go double-quoted string literal meaning exactly ``value`` (PromQL, LogQL).

    Quotes, backslashes and control characters are escaped, so a value can never end the
    string early and change the surrounding expression; everything else is itself."""
    return '"' + value.translate(_GO_ESCAPES) + '"'


_GO_UNESCAPE = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
}
_GO_ESCAPE_SEQ = re.compile(
    r"\\(?:(?P<simple>[abfnrtv\\\"])|x(?P<x>[0-9a-fA-F]{2})|(?P<o>[0-7]{3})"
    r"|u(?P<u>[0-9a-fA-F]{4})|U(?P<U>[0-9a-fA-F]{8}))"
)


# LogQL reads string literals like PromQL (grafana/loki pkg/logql/syntax/lex.go @014a277e:
# prometheus util/strutil.Unquote, which is strconv.Unquote plus single quotes).
logql_string = go_string


def go_unquote(text: str) -> str:
    """What Go's ``strconv.Unquote`` makes of a double-quoted literal; ValueError when Go
    rejects it (unknown escape, raw newline, unescaped quote, invalid code point)."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        raise ValueError(f"{text!r} is not a double-quoted string")
    body = text[1:-1]
    if "\n" in body:
        raise ValueError("a raw newline inside a quoted string; write \\n")
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == '"':
            raise ValueError('an unescaped " inside a quoted string; write \\"')
        if char != "\\":
            out.append(char)
            i += 1
            continue
        m = _GO_ESCAPE_SEQ.match(body, i)
        if m is None:
            raise ValueError(
                f"unknown escape {body[i : i + 2]!r}; Go strings know \\a \\b \\f \\n \\r \\t "
                '\\v \\\\ \\" \\xHH \\OOO \\uHHHH \\UHHHHHHHH (write \\\\ for a backslash)'
            )
        if m.group("simple"):
            out.append(_GO_UNESCAPE[m.group("simple")])
        else:
            digits = m.group("x") or m.group("o") or m.group("u") or m.group("U")
            code = int(digits, 8 if m.group("o") else 16)
            if m.group("o") and code > 255:
                raise ValueError(f"octal escape {m.group(0)!r} is above \\377")
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise ValueError(f"{m.group(0)!r} is not a valid code point")
            out.append(chr(code))
        i = m.end()
    return "".join(out)


def regex_literal(value: str) -> str:
    """An RE2 pattern matching exactly ``value`` (metacharacters backslash-escaped)."""
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", value)


# --- Go templates (Prometheus alert labels and annotations) --------------------------------

TEMPLATE_OPEN_ESCAPED = '{{ "{{" }}'
# A lone "{" at the very end: escaped too, so that text put before a template action
# (``literal + "{{ $labels.x }}"``) cannot fuse with it into "{{{".
TEMPLATE_BRACE_ESCAPED = '{{ "{" }}'
_TEMPLATE_OPEN = re.compile(r"\{\{|\{\Z")


def template_literal(text: str) -> str:
    """Text that a Prometheus alert template (Go text/template) renders as exactly ``text``.

    Only ``{{`` opens an action, so it is the one sequence to escape; it becomes an action
    that prints ``{{``. A trailing ``{`` becomes one that prints ``{``."""
    if "{" not in text:
        return text
    return _TEMPLATE_OPEN.sub(
        lambda m: TEMPLATE_OPEN_ESCAPED if len(m.group(0)) == 2 else TEMPLATE_BRACE_ESCAPED,
        text,
    )


def untemplate_literal(text: str) -> str:
    """The inverse of ``template_literal`` on text with no other action."""
    return text.replace(TEMPLATE_OPEN_ESCAPED, "{{").replace(TEMPLATE_BRACE_ESCAPED, "{")


class Template(BaseModel):
    """Blueprint text that is a Go template on purpose, e.g.
    ``runbook_base_url=Template("https://runbooks.example.com/{{ $labels.team }}")``.

    Plain strings are always literal; only a ``Template`` reaches an alert annotation
    unescaped, and it is parsed like promtool parses annotations when the blueprint is
    validated, so a broken one is a located error instead of an unloadable rule file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(description="Go template source, e.g. 'https://x/{{ $labels.team }}'.")

    def __init__(self, source: str | None = None, /, **data: Any) -> None:
        if source is not None:
            data["source"] = source
        super().__init__(**data)

    @model_validator(mode="after")
    def _parses(self) -> Template:
        from obs_iac.lint.gotemplate import parse_error

        problem = parse_error(self.source)
        if problem is not None:
            raise ValueError(
                f"Template({self.source!r}) is not a valid alert template: {problem} "
                "(drop Template(...) to use the text literally)"
            )
        return self

    def __str__(self) -> str:
        return self.source


# Tags of the "text or Template" union in blueprint fields. A tagged union reports the
# errors of the branch the value is meant for only; the loader drops the tag from the path.
TEXT_TAG = "text"
TEMPLATE_TAG = "Template"
UNION_TAGS = frozenset({TEXT_TAG, TEMPLATE_TAG})


def _text_or_template(value: Any) -> str:
    return TEMPLATE_TAG if isinstance(value, (Template, dict)) else TEXT_TAG


def text_or_template(text: Any) -> Any:
    """The annotation of a blueprint field that is literal text (constrained by ``text``,
    e.g. ``Annotated[str, StringConstraints(...)]``) or a ``Template``."""
    return Annotated[
        Annotated[text, Tag(TEXT_TAG)] | Annotated[Template, Tag(TEMPLATE_TAG)],
        Discriminator(_text_or_template),
    ]


def template_text(value: str | Template) -> str:
    """``value`` as the source of a Go template: a ``Template`` as written, any other text
    escaped so that it renders as itself."""
    if isinstance(value, Template):
        return value.source
    return template_literal(value)


_ACTION = re.compile(r"\{\{.*?\}\}", re.DOTALL)


def plain_text(value: str | Template) -> str:
    """The text for outputs that are not Go templates (dashboard descriptions, links,
    tooltips): plain text as it is; a ``Template`` with its actions left out, as nothing
    there could expand them."""
    if isinstance(value, Template):
        return _ACTION.sub("", value.source)
    return value
