"""Reading rule files the way Prometheus does: strict, located, never a traceback.

Three shapes are understood:
- a Prometheus rule file (``groups:``), decoded like rulefmt: unknown fields are errors;
- a PrometheusRule CRD (``kind: PrometheusRule``, ``spec.groups``), several per file;
- a Mimir/Cortex ruler namespace file (``namespace:`` + ``groups:``), several per file.

The YAML is composed into nodes (libyaml) so every problem has a line and a column.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from obs_iac.lint.gotemplate import parse_error as template_error

MAX_BYTES = 8 * 1024 * 1024

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DURATION = re.compile(
    r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$"
)
_UNITS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|0o?[0-7_]+)")
_FLOAT = re.compile(
    r"[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)"
)
_BOOL = frozenset({"true", "True", "TRUE", "false", "False", "FALSE"})


class Node:
    """A composed YAML node: kind map/seq/scalar/null, value, and where it starts.

    Built straight from libyaml's event stream: PyYAML's own composer resolves every
    scalar in Python and is ten times slower on large rule sets.
    """

    __slots__ = ("column", "kind", "line", "plain", "value")

    def __init__(self, kind: str, value: Any, line: int, column: int, plain: bool = False):
        self.kind = kind
        self.value = value
        self.line = line
        self.column = column
        self.plain = plain

    @property
    def tag(self) -> str:
        """The YAML type, as Go's decoder names it in errors."""
        if self.kind in ("map", "seq", "null"):
            return "!!" + self.kind
        if self.plain:
            if self.value in _BOOL:
                return "!!bool"
            if _INT.fullmatch(self.value):
                return "!!int"
            if _FLOAT.fullmatch(self.value):
                return "!!float"
        return "!!str"


def compose_documents(text: str) -> list[Node]:
    """Every document of ``text`` as Nodes; raises yaml.MarkedYAMLError on bad YAML."""
    docs: list[Node] = []
    stack: list[Node] = []
    anchors: dict[str, Node] = {}
    pending_key: list[Node | None] = []

    def add(node: Node, anchor: str | None) -> None:
        if anchor:
            anchors[anchor] = node
        if not stack:
            docs.append(node)
            return
        top = stack[-1]
        if top.kind == "seq":
            top.value.append(node)
        elif pending_key[-1] is None:
            pending_key[-1] = node
        else:
            top.value.append((pending_key[-1], node))
            pending_key[-1] = None

    events: Any = yaml.parse(text, Loader=_Loader)
    for ev in events:
        cls = type(ev)
        if cls is yaml.ScalarEvent:
            mark = ev.start_mark
            plain = ev.implicit[0] and ev.tag is None
            if ev.tag in ("!!null", "tag:yaml.org,2002:null") or (plain and ev.value in _NULLS):
                node = Node("null", "", mark.line + 1, mark.column + 1)
            else:
                node = Node("scalar", ev.value, mark.line + 1, mark.column + 1, plain)
            add(node, ev.anchor)
        elif cls is yaml.MappingStartEvent or cls is yaml.SequenceStartEvent:
            mark = ev.start_mark
            kind = "map" if cls is yaml.MappingStartEvent else "seq"
            node = Node(kind, [], mark.line + 1, mark.column + 1)
            add(node, ev.anchor)
            stack.append(node)
            pending_key.append(None)
        elif cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
            stack.pop()
            pending_key.pop()
        elif cls is yaml.AliasEvent:
            target = anchors.get(ev.anchor)
            if target is not None and any(target is open_node for open_node in stack):
                raise yaml.composer.ComposerError(
                    None, None, f"found recursive alias {ev.anchor!r}", ev.start_mark
                )
            if target is None:
                raise yaml.composer.ComposerError(
                    None, None, f"found undefined alias {ev.anchor!r}", ev.start_mark
                )
            add(target, None)
        elif cls is yaml.DocumentStartEvent:
            anchors = {}
    return docs


def parse_duration(text: str) -> float | None:
    """Seconds of a Prometheus duration (model.ParseDuration), or None if invalid."""
    if text == "0":
        return 0.0
    if not text:
        return None
    m = _DURATION.match(text)
    if m is None:
        return None
    return sum(int(v) * u for v, u in zip(m.groups(), _UNITS, strict=True) if v)


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    line: int | None = None
    column: int | None = None
    hint: str | None = None


@dataclass
class ParsedRule:
    kind: str  # record | alert | query (a dashboard panel)
    name: str
    expr: str
    line: int
    expr_line: int
    index: int
    for_seconds: float = 0.0
    for_text: str = ""
    keep_firing_for: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    expr_ok: bool = True


@dataclass
class ParsedGroup:
    name: str
    line: int
    namespace: str = ""
    interval: str = ""
    interval_seconds: float | None = None
    rules: list[ParsedRule] = field(default_factory=list)


@dataclass
class RuleFile:
    path: str
    format: str = "prometheus"  # prometheus | crd | mimir
    groups: list[ParsedGroup] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # findings (exit 1)
    unreadable: list[Problem] = field(default_factory=list)  # cannot be read as text (exit 2)
    # Text that Prometheus would refuse as a whole (not YAML, not a rule file): exit 4.
    refused: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)  # worth saying, never a failure
    skipped_kinds: list[tuple[str, int, int]] = field(default_factory=list)


def _merged(pairs: list[tuple[Node, Node]]) -> list[tuple[Node, Node]]:
    """YAML merge keys (``<<: *anchor``), which Go's yaml.v3 honours too."""
    if not any(k.kind == "scalar" and k.value == "<<" and k.plain for k, _ in pairs):
        return pairs
    own = [(k, v) for k, v in pairs if not (k.kind == "scalar" and k.value == "<<" and k.plain)]
    names = {k.value for k, _ in own}
    out = list(own)
    for k, v in pairs:
        if k.kind == "scalar" and k.value == "<<" and k.plain:
            sources = v.value if v.kind == "seq" else [v]
            for src in sources:
                for mk, mv in src.value if src.kind == "map" else ():
                    if mk.value not in names:
                        names.add(mk.value)
                        out.append((mk, mv))
    return out


def _pos(node: Node) -> tuple[int, int]:
    return node.line, node.column


def _kind(node: Node) -> str:
    return node.tag


class _Decoder:
    """Strict rulefmt decoding of composed YAML nodes into groups and rules."""

    def __init__(self, out: RuleFile, min_version: tuple[int, int]) -> None:
        self.out = out
        self.version = min_version

    def problem(self, node: Any, message: str, code: str = "rules/structure", **kw: Any) -> None:
        line, col = _pos(node) if node is not None else (None, None)
        self.out.problems.append(Problem(code, message, line, col, **kw))

    def mapping(self, node: Any, allowed: frozenset[str], what: str) -> dict[str, Any] | None:
        if node.kind == "null":
            return {}
        if node.kind != "map":
            self.problem(node, f"cannot unmarshal {_kind(node)} into {what}")
            return None
        out: dict[str, Any] = {}
        for key, value in _merged(node.value):
            name = key.value if key.kind in ("scalar", "null") else str(key.value)
            if name in out:
                first = out[name][0].line
                self.problem(key, f'mapping key "{name}" already defined at line {first}')
                continue
            if allowed and name not in allowed:
                self.problem(
                    key,
                    f"field {name} not found in type {what}",
                    hint=f"allowed here: {', '.join(sorted(allowed))}",
                )
                continue
            out[name] = (key, value)
        return out

    def scalar(self, node: Any, what: str) -> str | None:
        if node.kind == "null":
            return ""
        if node.kind != "scalar":
            self.problem(node, f"cannot unmarshal {_kind(node)} into {what}")
            return None
        return str(node.value)

    def string_map(self, node: Any, what: str) -> dict[str, str]:
        fields = self.mapping(node, frozenset(), what)
        out: dict[str, str] = {}
        for name, (_key, value) in (fields or {}).items():
            text = self.scalar(value, "string")
            if text is not None:
                out[name] = text
        return out

    def duration(self, node: Any, what: str) -> tuple[str, float | None]:
        text = self.scalar(node, what)
        if text is None:
            return "", None
        if node.kind == "null":
            return "", 0.0
        seconds = parse_duration(text)
        if seconds is None:
            self.problem(
                node,
                f'not a valid duration string: "{text}"',
                hint="Prometheus durations are integers with units, e.g. 90s, 5m, 1h30m",
            )
        return text, seconds

    def groups(self, node: Any, namespace: str, group_keys: frozenset[str]) -> None:
        if node.kind == "null":
            return
        if node.kind != "seq":
            self.problem(node, f"cannot unmarshal {_kind(node)} into []rulefmt.RuleGroup")
            return
        seen: dict[str, int] = {}
        for item in node.value:
            fields = self.mapping(item, group_keys, "rulefmt.RuleGroup")
            if fields is None:
                continue
            line, _ = _pos(item)
            name = self.scalar(fields["name"][1], "string") if "name" in fields else ""
            group = ParsedGroup(name=name or "", line=line, namespace=namespace)
            if not group.name:
                self.problem(item, "Groupname must not be empty")
            elif group.name in seen:
                self.problem(
                    item,
                    f'groupname: "{group.name}" is repeated in the same file',
                    code="rules/duplicate-group",
                    hint=f"first defined at line {seen[group.name]}; rename one group",
                )
            else:
                seen[group.name] = line
            if "interval" in fields:
                group.interval, group.interval_seconds = self.duration(
                    fields["interval"][1], "model.Duration"
                )
            if "limit" in fields:
                limit = fields["limit"][1]
                if not (limit.kind == "scalar" and re.fullmatch(r"-?\d+", limit.value)):
                    self.problem(limit, f"cannot unmarshal {_kind(limit)} into int")
            if "labels" in fields:
                self.labels(self.string_map(fields["labels"][1], "map[string]string"), item)
            if "rules" in fields:
                rules = fields["rules"][1]
                if rules.kind == "seq":
                    for index, rule in enumerate(rules.value):
                        parsed = self.rule(rule, index)
                        if parsed is not None:
                            group.rules.append(parsed)
                elif rules.kind != "null":
                    self.problem(rules, f"cannot unmarshal {_kind(rules)} into []rulefmt.Rule")
            self.out.groups.append(group)

    def labels(self, labels: dict[str, str], node: Any) -> None:
        for name in sorted(labels):
            if not _LABEL_NAME.fullmatch(name) or name == "__name__":
                self.problem(node, f"invalid label name: {name}")

    def rule(self, node: Any, index: int) -> ParsedRule | None:
        keys = {"record", "alert", "expr", "for", "labels", "annotations"}
        if self.version >= (2, 42):
            keys.add("keep_firing_for")
        fields = self.mapping(node, frozenset(keys), "rulefmt.Rule")
        if fields is None:
            return None
        line, _ = _pos(node)
        record = self.scalar(fields["record"][1], "string") if "record" in fields else ""
        alert = self.scalar(fields["alert"][1], "string") if "alert" in fields else ""
        expr_node = fields["expr"][1] if "expr" in fields else None
        expr = self.scalar(expr_node, "string") if expr_node is not None else ""
        record, alert, expr = record or "", alert or "", expr or ""
        rule = ParsedRule(
            kind="record" if record else "alert",
            name=record or alert,
            expr=expr,
            line=line,
            expr_line=_pos(expr_node)[0] if expr_node is not None else line,
            index=index,
        )
        if record and alert:
            self.problem(node, "only one of 'record' and 'alert' must be set")
        if not record and not alert:
            self.problem(node, "one of 'record' or 'alert' must be set")
        if not expr:
            self.problem(expr_node if expr_node is not None else node, "field 'expr' must be set")
            rule.expr_ok = False
        if "for" in fields:
            rule.for_text, seconds = self.duration(fields["for"][1], "model.Duration")
            rule.for_seconds = seconds or 0.0
        if "keep_firing_for" in fields:
            rule.keep_firing_for, _s = self.duration(fields["keep_firing_for"][1], "model.Duration")
        if "labels" in fields:
            rule.labels = self.string_map(fields["labels"][1], "map[string]string")
            self.labels(rule.labels, fields["labels"][1])
        if "annotations" in fields:
            rule.annotations = self.string_map(fields["annotations"][1], "map[string]string")
            for name in sorted(rule.annotations):
                if not _LABEL_NAME.fullmatch(name):
                    self.problem(fields["annotations"][1], f"invalid annotation name: {name}")
        if record:
            if rule.annotations:
                self.problem(node, "invalid field 'annotations' in recording rule")
            if rule.for_seconds:
                self.problem(node, "invalid field 'for' in recording rule")
            if rule.keep_firing_for and parse_duration(rule.keep_firing_for):
                self.problem(node, "invalid field 'keep_firing_for' in recording rule")
            if not _METRIC_NAME.fullmatch(record):
                self.problem(fields["record"][1], f"invalid recording rule name: {record}")
        if alert:
            for where, values in (("label", rule.labels), ("annotation", rule.annotations)):
                for key in sorted(values):
                    problem = template_error(values[key])
                    if problem:
                        self.problem(
                            node,
                            f'{where} "{key}": template: __alert_{alert}: {problem}',
                            hint="Prometheus parses labels and annotations as Go templates",
                        )
        return rule


_PROM_GROUP = frozenset({"name", "interval", "limit", "rules"})
_CRD_GROUP = frozenset(
    {"name", "interval", "limit", "rules", "labels", "query_offset", "partial_response_strategy"}
)
_MIMIR_GROUP = frozenset(
    {
        "name",
        "interval",
        "limit",
        "rules",
        "labels",
        "query_offset",
        "evaluation_delay",
        "source_tenants",
        "align_evaluation_time_on_interval",
    }
)


def _prom_group_keys(version: tuple[int, int]) -> frozenset[str]:
    keys = set(_PROM_GROUP)
    if version >= (2, 53):
        keys.add("query_offset")
    if version >= (3, 0):
        keys.add("labels")
    return frozenset(keys)


def _version(text: str) -> tuple[int, int]:
    parts = [int(p) for p in re.findall(r"\d+", text)[:2]]
    return (parts[0], parts[1] if len(parts) > 1 else 0)


def parse_rule_text(text: str, path: str, min_version: str = "2.42") -> RuleFile:
    out = RuleFile(path=path)
    version = _version(min_version)
    try:
        docs = compose_documents(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        reason = exc.problem or str(exc)
        if exc.context:
            reason = f"{reason} ({exc.context})"
        out.refused.append(Problem("input/yaml", f"not valid YAML: {reason}", line, col))
        return out
    except yaml.YAMLError as exc:
        out.refused.append(Problem("input/yaml", f"not valid YAML: {exc}", 1, 1))
        return out
    docs = [d for d in docs if d.kind != "null" and not (d.kind == "map" and not d.value)]
    if not docs:
        # promtool check rules accepts an empty file, `null` and `{}` (0 rules found), and
        # Prometheus loads it as nothing: say so, do not fail.
        out.notes.append(Problem("input/empty", EMPTY_NOTE, 1, 1, hint=EMPTY_HINT))
        return out
    decoder = _Decoder(out, version)
    for doc in docs:
        _decode_document(doc, decoder, path, version)
    if out.skipped_kinds and not out.groups and out.format == "prometheus":
        kind, line, column = out.skipped_kinds[0]
        close = difflib.get_close_matches(kind, RULE_KINDS, n=1, cutoff=0.6)
        out.refused.append(
            Problem(
                "input/not-rule-file",
                f"not a rule file: it holds Kubernetes objects of kind {kind or '(none)'!r}, "
                "none a PrometheusRule",
                line,
                column,
                hint=(f"did you mean kind: {close[0]}? " if close else "")
                + "the Prometheus Operator only loads `kind: PrometheusRule`",
            )
        )
    return out


EMPTY_NOTE = "the file holds no rule groups; Prometheus loads it and evaluates nothing"
EMPTY_HINT = "a rule file lists its rules under a top-level `groups:`"
RULE_KINDS = ("PrometheusRule",)


def _decode_document(doc: Any, decoder: _Decoder, path: str, version: tuple[int, int]) -> None:
    out = decoder.out
    top: dict[str, Any] = {}
    if doc.kind == "map":
        top = {k.value: (k, v) for k, v in doc.value if k.kind == "scalar"}
    if "kind" in top or "apiVersion" in top:
        kind = decoder.scalar(top["kind"][1], "string") if "kind" in top else ""
        if kind != "PrometheusRule":
            # Another Kubernetes object; fine beside a PrometheusRule, a mistake alone.
            out.skipped_kinds.append((kind or "", *_pos(doc)))
            return
        out.format = "crd"
        spec = top.get("spec")
        if spec is None:
            decoder.problem(doc, "PrometheusRule without spec")
            return
        fields = decoder.mapping(spec[1], frozenset({"groups"}), "PrometheusRuleSpec")
        meta = (
            decoder.mapping(top["metadata"][1], frozenset(), "ObjectMeta")
            if "metadata" in top
            else {}
        )
        namespace = ""
        if meta and "name" in meta:
            namespace = decoder.scalar(meta["name"][1], "string") or ""
        if fields and "groups" in fields:
            decoder.groups(fields["groups"][1], namespace, _CRD_GROUP)
        return
    if "namespace" in top:
        out.format = "mimir"
        fields = decoder.mapping(doc, frozenset({"namespace", "groups"}), "rwrulefmt.RuleNamespace")
        namespace = decoder.scalar(top["namespace"][1], "string") or Path(path).stem
        if fields and "groups" in fields:
            decoder.groups(fields["groups"][1], namespace, _MIMIR_GROUP)
        return
    fields = decoder.mapping(doc, frozenset({"groups"}), "rulefmt.RuleGroups")
    if fields and "groups" in fields:
        decoder.groups(fields["groups"][1], "", _prom_group_keys(version))


def read_rule_file(path: Path, display: str, min_version: str = "2.42") -> RuleFile:
    """Reads one file; whatever is wrong with it becomes a located problem."""
    out = RuleFile(path=display)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            out.unreadable.append(
                Problem(
                    "input/too-large",
                    f"the file is {size} bytes, above the {MAX_BYTES} byte limit for rule files",
                    hint="split it; Prometheus rule files this large are almost always generated "
                    "by mistake",
                )
            )
            return out
        data = path.read_bytes()
    except OSError as exc:
        out.unreadable.append(Problem("input/unreadable", f"cannot read the file: {exc.strerror}"))
        return out
    if b"\x00" in data[:8192]:
        out.unreadable.append(Problem("input/binary", "the file is binary, not YAML", 1, 1))
        return out
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        out.unreadable.append(Problem("input/encoding", "the file is not UTF-8 text", line))
        return out
    return parse_rule_text(text, display, min_version)
