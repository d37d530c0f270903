"""Test helpers: read generated Alloy/promtail files back into plan stages.

The behaviour tests run the *generated* files, not the plan they came from: a wrong
escape or a dropped option in a generator then shows up as wrong records.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from obs_iac.plan.model import (
    DropStage,
    JsonStage,
    LabelDropStage,
    LabelsStage,
    LimitStage,
    LogStage,
    MultilineStage,
    RegexStage,
    RuntimeStage,
    StaticLabelsStage,
    StructuredMetadataStage,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "logs"

_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "a": "\a",
                   "b": "\b", "f": "\f", "v": "\v"}  # fmt: skip


def decode_alloy_string(literal: str) -> str:
    """Decodes one Alloy string literal (double-quoted with escapes, or raw backticks)."""
    if literal.startswith("`"):
        assert literal.endswith("`") and len(literal) >= 2, literal
        return literal[1:-1]
    assert literal.startswith('"') and literal.endswith('"') and len(literal) >= 2, literal
    body = literal[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char == '"':
            raise ValueError(f"unescaped quote inside {literal!r}")
        if char != "\\":
            out.append(char)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[nxt])
            i += 2
        elif nxt == "x":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif nxt == "u":
            out.append(chr(int(body[i + 2 : i + 6], 16)))
            i += 6
        else:
            raise ValueError(f"unknown escape \\{nxt} in {literal!r}")
    return "".join(out)


# One value: a string literal, a map, a list, a number, a bool, or a bare expression.
_STRING = r'"(?:[^"\\\n]|\\.)*"|`[^`]*`'
_TOKEN = re.compile(rf"\s*({_STRING}|[{{}}\[\],=]|[A-Za-z_][A-Za-z0-9_.]*|-?[0-9.]+)")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"cannot tokenise {text[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _value(tokens: list[str], i: int) -> tuple[Any, int]:
    tok = tokens[i]
    if tok.startswith(('"', "`")):
        return decode_alloy_string(tok), i + 1
    if tok == "{":
        out: dict[str, Any] = {}
        i += 1
        while tokens[i] != "}":
            key = decode_alloy_string(tokens[i]) if tokens[i].startswith('"') else tokens[i]
            assert tokens[i + 1] == "=", tokens[i:]
            out[key], i = _value(tokens, i + 2)
            if tokens[i] == ",":
                i += 1
        return out, i + 1
    if tok == "[":
        items: list[Any] = []
        i += 1
        while tokens[i] != "]":
            item, i = _value(tokens, i)
            items.append(item)
            if tokens[i] == ",":
                i += 1
        return items, i + 1
    if tok in ("true", "false"):
        return tok == "true", i + 1
    if re.fullmatch(r"-?[0-9.]+", tok):
        return (float(tok) if "." in tok else int(tok)), i + 1
    return tok, i + 1  # a bare expression such as loki.write.default.receiver


def parse_alloy_process(text: str) -> tuple[str, dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """(label, attributes, [(stage name, attributes)]) of the file's one loki.process block."""
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("//") and ln.strip()]
    head = re.fullmatch(r'loki\.process "([A-Za-z_][A-Za-z0-9_]*)" \{', lines[0])
    assert head is not None, lines[0]
    assert lines[-1] == "}"
    attrs: dict[str, Any] = {}
    stages: list[tuple[str, dict[str, Any]]] = []
    current: dict[str, Any] | None = None
    for line in lines[1:-1]:
        stripped = line.strip()
        block = re.fullmatch(r"stage\.(\w+) \{(\})?", stripped)
        if block:
            current = {}
            stages.append((block.group(1), current))
            if block.group(2):
                current = None
            continue
        if stripped == "}":
            current = None
            continue
        name, _, rest = stripped.partition("=")
        tokens = _tokens(rest)
        value, end = _value(tokens, 0)
        assert end == len(tokens), f"trailing tokens in {stripped!r}"
        target = attrs if current is None else current
        target[name.strip()] = value
    return head.group(1), attrs, stages


def stages_from_alloy(text: str) -> list[LogStage]:
    _, _, raw = parse_alloy_process(text)
    out: list[LogStage] = []
    role = "extract"  # roles do not matter to the simulator
    for name, a in raw:
        if name in ("cri", "docker"):
            out.append(RuntimeStage(role="runtime", format=name))  # type: ignore[arg-type]
        elif name == "regex":
            out.append(RegexStage(role=role, expression=a["expression"], source=a.get("source")))
        elif name == "json":
            out.append(JsonStage(role=role, expressions=a["expressions"], source=a.get("source")))
        elif name == "multiline":
            out.append(
                MultilineStage(
                    role="multiline",
                    firstline=a["firstline"],
                    max_lines=a.get("max_lines", 128),
                    max_wait_time=a.get("max_wait_time", "3s"),
                )
            )
        elif name == "labels":
            out.append(LabelsStage(role="labels", values=a["values"]))
        elif name == "static_labels":
            out.append(StaticLabelsStage(role="labels", values=a["values"]))
        elif name == "label_drop":
            out.append(LabelDropStage(role="labels", names=tuple(a["values"])))
        elif name == "structured_metadata":
            out.append(StructuredMetadataStage(role="structured-metadata", values=a["values"]))
        elif name == "drop":
            out.append(
                DropStage(
                    role="drop",
                    expression=a["expression"],
                    source=a.get("source"),
                    reason=a["drop_counter_reason"],
                )
            )
        elif name == "limit":
            out.append(
                LimitStage(
                    role="limit", rate=a["rate"], burst=a["burst"], drop=a.get("drop", False)
                )
            )
        else:
            raise AssertionError(f"unexpected stage {name}")
    return out


def stages_from_promtail(text: str) -> list[LogStage]:
    doc = yaml.safe_load(text)
    (job,) = doc["scrape_configs"]
    out: list[LogStage] = []
    for item in job["pipeline_stages"]:
        assert len(item) == 1, f"promtail needs exactly one key per stage: {item}"
        ((name, a),) = item.items()
        if name in ("cri", "docker"):
            out.append(RuntimeStage(role="runtime", format=name))
        elif name == "regex":
            out.append(
                RegexStage(role="extract", expression=a["expression"], source=a.get("source"))
            )
        elif name == "json":
            out.append(
                JsonStage(role="extract", expressions=a["expressions"], source=a.get("source"))
            )
        elif name == "multiline":
            out.append(
                MultilineStage(
                    role="multiline",
                    firstline=a["firstline"],
                    max_lines=a.get("max_lines", 128),
                    max_wait_time=a.get("max_wait_time", "3s"),
                )
            )
        elif name == "labels":
            out.append(LabelsStage(role="labels", values=a))
        elif name == "static_labels":
            out.append(StaticLabelsStage(role="labels", values=a))
        elif name == "labeldrop":
            out.append(LabelDropStage(role="labels", names=tuple(a)))
        elif name == "structured_metadata":
            out.append(StructuredMetadataStage(role="structured-metadata", values=a))
        elif name == "drop":
            out.append(
                DropStage(
                    role="drop",
                    expression=a["expression"],
                    source=a.get("source"),
                    reason=a.get("drop_counter_reason", ""),
                )
            )
        elif name == "limit":
            out.append(LimitStage(role="limit", rate=a["rate"], burst=a["burst"], drop=a["drop"]))
        else:
            raise AssertionError(f"unexpected stage {name}")
    return out


def fixture_lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding="utf-8").split("\n")[:-1]
