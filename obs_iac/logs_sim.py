"""A small, faithful model of the Loki pipeline stages obs-iac plans, run with RE2.

Alloy, promtail and Loki cannot run here, so the behaviour tests run the *planned*
pipeline through this model instead. It follows grafana/alloy
``internal/component/loki/process/stages`` (which promtail shares):

- the extracted map starts as a copy of the entry's labels;
- ``cri`` parses ``<RFC3339Nano> <stdout|stderr> <P|F> <content>``, sets the ``stream``
  label, and joins partial (``P``) lines of one stream; unparsable lines pass unchanged;
- ``regex`` is an unanchored search (Go ``FindStringSubmatch``); on a match every named
  group is written to the extracted map, on no match nothing changes;
- ``multiline`` keeps one block per label set (fingerprint at that point); a stream's
  lines pass through unchanged until its first ``firstline`` match; a match flushes the
  open block and starts a new one; ``max_lines`` flushes a full block; the flushed record
  carries the start line's labels and a copy of its extracted map;
- ``labels``/``structured_metadata`` copy extracted values; an empty value is skipped for
  labels (Loki treats an empty label as absent).

Not modelled: ``max_wait_time`` (the fixtures' records arrive together), the rate limit
(``limit`` passes everything: it needs wall-clock time), and JMESPath beyond plain keys
joined with ``||``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from obs_iac.packs.logs.re2check import compile_re2
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

_CRI = r"^(?s)(?P<time>\S+?) (?P<stream>stdout|stderr) (?P<flags>\S+?) (?P<content>.*)$"


@dataclass
class Entry:
    line: str
    labels: dict[str, str] = field(default_factory=dict)
    extracted: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)

    def copy(self) -> Entry:
        return Entry(self.line, dict(self.labels), dict(self.extracted), dict(self.metadata))


def _key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in labels.items() if v != ""))


def _jmespath(expression: str, data: Any) -> Any:
    for alternative in (part.strip() for part in expression.split("||")):
        if not alternative.replace("_", "").isalnum():
            raise NotImplementedError(f"simulator supports plain keys only, not {alternative!r}")
        value = data.get(alternative) if isinstance(data, dict) else None
        if value not in (None, "", [], {}, False):
            return value
    return None


def _string(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _runtime(stage: RuntimeStage, entries: Iterable[Entry]) -> list[Entry]:
    out: list[Entry] = []
    if stage.format == "docker":
        for e in entries:
            try:
                doc = json.loads(e.line)
            except ValueError:
                out.append(e)
                continue
            e.line = str(doc.get("log", "")).removesuffix("\n")
            e.labels["stream"] = str(doc.get("stream", ""))
            e.extracted.update({k: _string(v) for k, v in doc.items()})
            out.append(e)
        return out
    cri = compile_re2(_CRI)
    partial: dict[tuple[tuple[str, str], ...], Entry] = {}
    for e in entries:
        m = cri.search(e.line)
        if m is None:
            out.append(e)
            continue
        e.extracted.update(m.groupdict())
        e.line = m.group("content")
        e.labels["stream"] = m.group("stream")
        fp = _key(e.labels)
        prev = partial.pop(fp, None)
        if prev is not None:
            e.line = prev.line + e.line
        if m.group("flags") == "P":
            partial[fp] = e
            continue
        out.append(e)
    out.extend(partial.values())
    return out


def _multiline(stage: MultilineStage, entries: Iterable[Entry]) -> list[Entry]:
    first = compile_re2(stage.firstline)
    out: list[Entry] = []
    blocks: dict[tuple[tuple[str, str], ...], tuple[Entry | None, list[str]]] = {}

    def flush(key: tuple[tuple[str, str], ...]) -> None:
        start, lines = blocks[key]
        if lines:
            assert start is not None
            record = start.copy()
            record.line = "\n".join(lines)
            out.append(record)
        blocks[key] = (start, [])

    for e in entries:
        key = _key(e.labels)
        matches = first.search(e.line) is not None
        if key not in blocks:
            if not matches:
                out.append(e)  # before the stream's first record start: passes through
                continue
            blocks[key] = (None, [])
        if matches:
            flush(key)
            blocks[key] = (e, [])
        start, lines = blocks[key]
        lines.append(e.line)
        if start is None:  # a flushed block continues with non-matching lines
            start = e
        blocks[key] = (start, lines)
        if len(lines) == stage.max_lines:
            flush(key)
    for key in list(blocks):
        flush(key)
    return out


def run_stage(stage: LogStage, entries: Sequence[Entry]) -> list[Entry]:
    if isinstance(stage, RuntimeStage):
        return _runtime(stage, entries)
    if isinstance(stage, MultilineStage):
        return _multiline(stage, entries)
    if isinstance(stage, LimitStage):
        return list(entries)
    out: list[Entry] = []
    for e in entries:
        if isinstance(stage, RegexStage):
            text = e.line if stage.source is None else _string(e.extracted.get(stage.source))
            if text is not None:
                m = compile_re2(stage.expression).search(text)
                if m is not None:
                    for name, value in m.groupdict().items():
                        e.extracted[name] = "" if value is None else value
        elif isinstance(stage, JsonStage):
            text = e.line if stage.source is None else _string(e.extracted.get(stage.source))
            try:
                doc = json.loads(text or "")
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                for name, expression in stage.expressions.items():
                    e.extracted[name] = _jmespath(expression, doc)
        elif isinstance(stage, LabelsStage):
            for label, src in stage.values.items():
                value = _string(e.extracted.get(src or label))
                if value:
                    e.labels[label] = value
        elif isinstance(stage, StaticLabelsStage):
            e.labels.update(stage.values)
        elif isinstance(stage, LabelDropStage):
            for name in stage.names:
                e.labels.pop(name, None)
        elif isinstance(stage, StructuredMetadataStage):
            for key, src in stage.values.items():
                value = _string(e.extracted.get(src or key))
                if value is not None:
                    e.metadata[key] = value
                if (src or key) in e.labels:  # Alloy moves a named label to metadata
                    e.metadata[key] = e.labels.pop(src or key)
        elif isinstance(stage, DropStage):
            text = e.line if stage.source is None else _string(e.extracted.get(stage.source))
            if text is not None and compile_re2(stage.expression).search(text) is not None:
                continue
        out.append(e)
    return out


def run_pipeline(
    stages: Sequence[LogStage], lines: Iterable[str], labels: dict[str, str] | None = None
) -> list[Entry]:
    """Runs raw lines (as the agent reads them from one file) through the stages."""
    entries = []
    for line in lines:
        start = dict(labels or {})
        entries.append(Entry(line=line, labels=start, extracted=dict(start)))
    for stage in stages:
        entries = run_stage(stage, entries)
    return entries
