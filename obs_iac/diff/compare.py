"""Two semantic models in, changes by meaning and risk flags out."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from deepdiff import DeepDiff

from obs_iac.diagnostics import Diagnostic, Location, Severity
from obs_iac.diff.model import FLEET, Entity, EntityId, SemanticModel
from obs_iac.labels import canonical_for_spelling
from obs_iac.plan.model import Plan
from obs_iac.promql import PromQLSyntaxError, parse, referenced_metrics, selectors

ChangeType = Literal["added", "removed", "changed"]


@dataclass(frozen=True)
class FieldChange:
    path: str  # e.g. "for", "labels.severity", "source_labels[]"
    before: Any
    after: Any
    summary: str
    minor: bool = False  # wording or test data: listed in the details, counted in summaries


@dataclass(frozen=True)
class Change:
    id: EntityId
    change: ChangeType
    path: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    fields: tuple[FieldChange, ...] = ()
    title: str = ""
    # As written (expressions unnormalised): what label analysis parses.
    raw_before: Mapping[str, Any] = field(default_factory=dict)
    raw_after: Mapping[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """One line: the fields that decide behaviour in full, wording and test data
        only counted (their before/after is in the details)."""
        if self.change != "changed":
            brief = _brief(self.id.kind, self.after or self.before or {})
            return f"{self.change}: {brief}" if brief else self.change
        major = [f.summary for f in self.fields if not f.minor]
        minor = sorted({f.path for f in self.fields if f.minor})
        if minor and self.id.kind == "storm":
            # The counts lead; which alerts moved is in the details.
            count = sum(1 for f in self.fields if f.minor)
            major.append(f"{count} alert(s) of the scenario changed")
        elif minor and self.id.kind == "file":
            major.append(f"{len(self.fields)} value(s) changed")
        elif minor:
            major.append(f"{', '.join(minor)} reworded")
        return "; ".join(major)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.id.kind,
            "service": self.id.service,
            "key": self.id.key,
            "change": self.change,
            "path": self.path,
            "summary": self.summary,
            "before": self.before,
            "after": self.after,
            "fields": [
                {"path": f.path, "before": f.before, "after": f.after, "summary": f.summary}
                for f in self.fields
            ],
        }


def _brief(kind: str, fields: Mapping[str, Any]) -> str:
    """What an added or removed object is, in a few words."""
    if kind == "alert":
        severity = (fields.get("labels") or {}).get("severity", "none")
        return f"severity {severity}, for {fields.get('for', '0s')}"
    if kind == "record":
        return _short(str(fields.get("expr", "")), 70)
    if kind == "collector":
        return f"{fields.get('type', '')}, needed by {fields.get('needed_by') or '?'}"
    if kind == "relabel":
        sources = ",".join(fields.get("source_labels") or ())
        return f"{fields.get('target_label', '')} from {sources or '-'}"
    if kind == "storm":
        return (
            f"{fields.get('fired')} fired, up to {fields.get('mutable')} muted, "
            f"at least {fields.get('notified_at_least')} notified"
        )
    if kind == "inhibit-edge":
        return (
            f"{' & '.join(fields.get('source_matchers') or ())} mutes "
            f"{' & '.join(fields.get('target_matchers') or ())}"
        )
    return ""


@dataclass(frozen=True)
class Acknowledgement:
    service: str
    code: str
    reason: str
    target: str | None = None


@dataclass(frozen=True)
class Flag:
    diagnostic: Diagnostic
    service: str
    acknowledged: str | None = None  # the reason, when the blueprint accepts the risk


@dataclass
class DiffResult:
    base: str
    changes: list[Change] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    @property
    def errors(self) -> int:
        return sum(1 for f in self.flags if f.diagnostic.severity is Severity.ERROR)

    @property
    def warnings(self) -> int:
        return sum(1 for f in self.flags if f.diagnostic.severity is Severity.WARNING)

    def services(self) -> list[str]:
        names = {c.id.service for c in self.changes} | {f.service for f in self.flags}
        return sorted(names, key=lambda s: (s == FLEET, s))


# --- field-level changes --------------------------------------------------------------

_PATH_PART = re.compile(r"\['((?:[^'\\]|\\.)*)'\]|\[(\d+)\]")


def _dotted(path: str) -> str:
    out = []
    for key, index in _PATH_PART.findall(path.removeprefix("root")):
        out.append(key if key else f"[{index}]")
    text = ".".join(out).replace(".[", "[")
    return re.sub(r"\[\d+\]", "[]", text)  # order is ignored, so positions mean nothing


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_NUMBER = re.compile(r"(?<![\w:.\]])(\d+(?:\.\d+)?(?:e[-+]?\d+)?)([smhdwy]|ms)?(?![\w:])")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')


def number_changes(before: str, after: str) -> list[tuple[str, str, str]] | None:
    """(kind, old, new) for each number that differs, if the expressions differ only in
    numbers (thresholds and durations); None when their structure differs."""

    def split(expr: str) -> tuple[str, list[tuple[str, str]]]:
        found: list[tuple[str, str]] = []
        strings: list[str] = []

        def hide(match: re.Match[str]) -> str:
            strings.append(match.group())
            return f"\0{len(strings)}\0"

        masked = _STRING.sub(hide, expr)

        def keep(match: re.Match[str]) -> str:
            found.append((match.group(1), match.group(2) or ""))
            return "#"

        skeleton = _NUMBER.sub(keep, masked)
        return skeleton + "|" + "|".join(strings), found

    skel_a, nums_a = split(before)
    skel_b, nums_b = split(after)
    if skel_a != skel_b or len(nums_a) != len(nums_b):
        return None
    out = []
    for (num_a, unit_a), (num_b, unit_b) in zip(nums_a, nums_b, strict=True):
        if (num_a, unit_a) != (num_b, unit_b):
            kind = "duration" if unit_a or unit_b else "threshold"
            out.append((kind, num_a + unit_a, num_b + unit_b))
    return out


def _expr_summary(before: str, after: str) -> str:
    numbers = number_changes(before, after)
    if numbers:
        return "; ".join(f"expr {kind} {a} -> {b}" for kind, a, b in numbers)
    return f"expr {_short(before, 60)!s} -> {_short(after, 60)!s}"


def field_changes(before: Entity, after: Entity) -> tuple[FieldChange, ...]:
    diff = DeepDiff(
        dict(before.fields), dict(after.fields), ignore_order=True, verbose_level=2
    ).to_dict()
    out: list[FieldChange] = []
    for kind, entries in sorted(diff.items()):
        for raw_path, value in entries.items():
            path = _dotted(raw_path)
            if kind in ("values_changed", "type_changes"):
                old, new = value["old_value"], value["new_value"]
            elif kind.endswith("_added"):
                old, new = None, value
            elif kind.endswith("_removed"):
                old, new = value, None
            else:
                continue
            numbers = (
                number_changes(old, new) if isinstance(old, str) and isinstance(new, str) else None
            )
            if path == "expr" and isinstance(old, str) and isinstance(new, str):
                summary = _expr_summary(old, new)
            elif numbers and " " in str(old):  # prose that differs only in numbers
                summary = f"{path}: " + ", ".join(f"{a} -> {b}" for _, a, b in numbers)
            elif old is None:
                summary = f"{path} added: {_short(new)}"
            elif new is None:
                summary = f"{path} removed: {_short(old)}"
            else:
                summary = f"{path} {_short(old)} -> {_short(new)}"
            minor = (
                before.id.kind == "file"
                or (before.id.kind == "storm" and path.startswith("alerts"))
                or path.startswith("annotations")
                or path.split(".")[-1] in ("description", "help")
            )
            out.append(FieldChange(path, old, new, summary, minor))
    order = {"expr": 0, "for": 1, "keep_firing_for": 2}
    return tuple(
        sorted(out, key=lambda f: (order.get(f.path, 3), f.path.startswith("annotations"), f.path))
    )


def _raw(entity: Entity) -> dict[str, Any]:
    return {**entity.fields, **{k: v for k, v in entity.display.items() if k != "title"}}


def compare(before: SemanticModel, after: SemanticModel) -> list[Change]:
    changes = []
    for eid in sorted(set(before) | set(after), key=EntityId.sort_key):
        old, new = before.get(eid), after.get(eid)
        either = new or old
        title = str(either.display.get("title", "")) if either is not None else ""
        if old is None and new is not None:
            changes.append(
                Change(eid, "added", new.path, None, new.fields, title=title, raw_after=_raw(new))
            )
        elif new is None and old is not None:
            changes.append(
                Change(
                    eid, "removed", old.path, old.fields, None, title=title, raw_before=_raw(old)
                )
            )
        elif old is not None and new is not None and old.fields != new.fields:
            fields = field_changes(old, new)
            if fields:
                changes.append(
                    Change(
                        eid,
                        "changed",
                        new.path,
                        old.fields,
                        new.fields,
                        fields,
                        title,
                        _raw(old),
                        _raw(new),
                    )
                )
    return changes


# --- risk flags -------------------------------------------------------------------------

SEVERITY_RANK = {"page": 5, "critical": 4, "error": 3, "warning": 2, "info": 1, "none": 0}
PAGING = {"page", "critical"}


def canonical_labels(fields: Mapping[str, Any]) -> dict[str, str]:
    """Canonical key -> spelling, for every canonical label an alert/record output keeps
    or selects on."""
    names: set[str] = set(fields.get("labels") or {})
    expr = fields.get("expr")
    if isinstance(expr, str) and expr:
        try:
            node = parse(expr)
        except PromQLSyntaxError:
            node = None
        if node is not None:
            for sel in selectors(node):
                names.update(str(m.name) for m in sel.matchers.matchers)
            names.update(_grouping_labels(node))
    out = {}
    for name in names:
        key = canonical_for_spelling(name)
        if key is not None:
            out[key.key] = name
    return out


def _grouping_labels(node: Any) -> set[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        modifier = getattr(current, "modifier", None)
        if modifier is not None:
            out.update(str(x) for x in (getattr(modifier, "labels", None) or ()))
        for attr in ("lhs", "rhs", "expr", "param", "vector_selector"):
            child = getattr(current, attr, None)
            if child is not None and not isinstance(child, str | int | float):
                stack.append(child)
        stack.extend(getattr(current, "args", None) or ())
    return out


def _entity_name(eid: EntityId) -> str:
    return f"{eid.kind} {eid.key}"


def _flag(
    code: str,
    severity: Severity,
    service: str,
    message: str,
    hint: str,
    eid: EntityId,
    locations: Mapping[str, Location],
) -> Flag:
    diag = Diagnostic(
        code,
        severity,
        message,
        hint=hint,
        location=locations.get(service),
        object_path=(service, eid.kind, eid.key),
        origin="obs-iac diff",
    )
    return Flag(diag, service)


_MATCHER = re.compile(r"^(?P<name>[^=!~]+?)\s*(?P<op>=~|!~|!=|=)\s*(?P<value>.*)$")


def _matches(matcher: str, labels: Mapping[str, str]) -> bool:
    """Whether a matcher can match an alert: labels the rule does not set come from the
    series at run time, so a matcher on them can match."""
    found = _MATCHER.match(matcher)
    if not found:
        return True
    name, op, raw = found["name"].strip(), found["op"], found["value"].strip()
    try:
        value = json.loads(raw) if raw.startswith('"') else raw
    except ValueError:
        value = raw.strip('"')
    if name not in labels:
        return True
    actual = labels[name]
    if op == "=":
        return bool(actual == value)
    if op == "!=":
        return bool(actual != value)
    try:
        hit = re.fullmatch(str(value), actual) is not None
    except re.error:
        return True
    return hit if op == "=~" else not hit


def risk_flags(
    changes: Sequence[Change],
    after_model: SemanticModel,
    after_plan: Plan | None,
    locations: Mapping[str, Location],
) -> list[Flag]:
    flags: list[Flag] = []
    for change in changes:
        eid = change.id
        svc = eid.service
        before, after = change.before or {}, change.after or {}
        if eid.kind in ("alert", "record") and change.change == "changed":
            old, new = canonical_labels(change.raw_before), canonical_labels(change.raw_after)
            for key in sorted(old):
                if key not in new:
                    flags.append(
                        _flag(
                            "diff/label-dropped",
                            Severity.ERROR,
                            svc,
                            f"{_entity_name(eid)} no longer carries the canonical label "
                            f"{old[key]} ({key})",
                            "every output must keep the canonical labels that join the "
                            "layers; restore it, or acknowledge it in the blueprint: "
                            "acknowledge=(Acknowledgement(code='diff/label-dropped', "
                            "reason='...'),)",
                            eid,
                            locations,
                        )
                    )
                elif new[key] != old[key]:
                    flags.append(
                        _flag(
                            "diff/label-format-changed",
                            Severity.ERROR,
                            svc,
                            f"{_entity_name(eid)} spells the canonical label {key} as "
                            f"{new[key]} instead of {old[key]}",
                            "dashboards, silences and queries that use the old spelling stop "
                            "matching; acknowledge it in the blueprint if intended",
                            eid,
                            locations,
                        )
                    )
        label = str((change.raw_after or change.raw_before).get("label") or "")
        if eid.kind == "relabel" and label:
            if change.change == "removed" and not _moved(change, changes):
                flags.append(
                    _flag(
                        "diff/label-dropped",
                        Severity.ERROR,
                        svc,
                        f"the relabelling that produces the canonical label {label} "
                        f"({before.get('target_label')}) was removed from {change.path}",
                        "series scraped with it lose the label; restore the relabel rule, or "
                        "acknowledge it in the blueprint (for relabelling shared by several "
                        f"services: with target='{label}')",
                        eid,
                        locations,
                    )
                )
            elif change.change == "changed":
                moved = [
                    f.path
                    for f in change.fields
                    if f.path.split("[")[0]
                    in ("target_label", "regex", "replacement", "action", "separator")
                ]
                if moved:
                    flags.append(
                        _flag(
                            "diff/label-format-changed",
                            Severity.ERROR,
                            svc,
                            f"the value format of the canonical label {label} changed in "
                            f"{change.path} "
                            f"({', '.join(sorted(set(moved)))})",
                            "existing series, dashboards and silences keep the old values; "
                            "acknowledge it in the blueprint if intended",
                            eid,
                            locations,
                        )
                    )
        if eid.kind == "log-pipeline" and change.change == "changed":
            old_labels = set(before.get("stream_labels") or ()) | set(
                before.get("structured_metadata") or ()
            )
            new_labels = set(after.get("stream_labels") or ()) | set(
                after.get("structured_metadata") or ()
            )
            for name in sorted(old_labels - new_labels):
                if canonical_for_spelling(name) is not None:
                    flags.append(
                        _flag(
                            "diff/label-dropped",
                            Severity.ERROR,
                            svc,
                            f"log records of {svc} no longer carry the canonical label {name}",
                            "logs lose their join key to metrics; restore it or acknowledge it",
                            eid,
                            locations,
                        )
                    )
        if eid.kind == "alert" and change.change == "removed":
            flags.append(
                _flag(
                    "diff/alert-removed",
                    Severity.WARNING,
                    svc,
                    f"alert {eid.key} is removed; nothing alerts on its condition any more",
                    "make sure another alert covers it, or acknowledge it in the blueprint",
                    eid,
                    locations,
                )
            )
        if eid.kind == "alert" and change.change == "changed":
            old_sev = str((before.get("labels") or {}).get("severity", "none"))
            new_sev = str((after.get("labels") or {}).get("severity", "none"))
            if SEVERITY_RANK.get(new_sev, 0) < SEVERITY_RANK.get(old_sev, 0):
                flags.append(
                    _flag(
                        "diff/severity-lowered",
                        Severity.WARNING,
                        svc,
                        f"alert {eid.key} severity lowered from {old_sev} to {new_sev}",
                        "routing follows severity: it may stop paging",
                        eid,
                        locations,
                    )
                )
        if eid.kind == "inhibit-edge" and change.change in ("added", "changed"):
            flags.extend(_inhibit_flags(change, after_model, locations))
        if eid.kind == "inhibit-edge" and change.change == "changed":
            kept = {_canonical_key(n) for n in after.get("equal") or ()}
            for name in sorted(set(before.get("equal") or ())):
                # a respelling (naming = "utf8") is reported on the rules; only a label
                # that is gone in every spelling widens the edge
                if canonical_for_spelling(name) is not None and _canonical_key(name) not in kept:
                    flags.append(
                        _flag(
                            "diff/label-dropped",
                            Severity.ERROR,
                            svc,
                            f"inhibit edge {eid.key!r} no longer requires equal {name}: it "
                            "can now mute alerts that do not share that value with its source",
                            "keep the canonical label in `equal`, or acknowledge it",
                            eid,
                            locations,
                        )
                    )
        if eid.kind == "collector" and change.change == "removed":
            users = _users(eid.key, svc, after_model, after_plan)
            if users:
                flags.append(
                    _flag(
                        "diff/field-still-used",
                        Severity.ERROR,
                        svc,
                        f"DCGM field {eid.key} is no longer collected but "
                        f"{', '.join(users[:5])} still query it",
                        "the exporter stops exporting it and those queries return nothing; "
                        "keep the field in gpu.extra_fields or change the queries",
                        eid,
                        locations,
                    )
                )
        if (
            eid.kind == "dashboard"
            and change.change == "changed"
            and any(f.path == "uid" for f in change.fields)
        ):
            flags.append(
                _flag(
                    "diff/dashboard-uid-changed",
                    Severity.WARNING,
                    svc,
                    f"dashboard {eid.key!r} changes uid from {before.get('uid')} to "
                    f"{after.get('uid')}",
                    "links, bookmarks and alert annotations pointing at the old uid break",
                    eid,
                    locations,
                )
            )
    return flags


def _canonical_key(name: str) -> str:
    key = canonical_for_spelling(name)
    return key.key if key is not None else name


def _moved(change: Change, changes: Sequence[Change]) -> bool:
    """A relabel rule that left one variant file and arrived unchanged in another (the
    relabelling was split or its file renamed) is not a dropped label."""
    return any(
        other.change == "added"
        and other.id.kind == "relabel"
        and other.raw_after.get("label") == change.raw_before.get("label")
        and other.after == change.before
        for other in changes
    )


def _mutable(targets: Sequence[str], model: SemanticModel) -> set[str]:
    """Paging alerts every target matcher can match (alertname is the alert's name)."""
    out = set()
    for entity in model.values():
        if entity.id.kind != "alert":
            continue
        labels = dict(entity.fields.get("labels") or {})
        if labels.get("severity") not in PAGING:
            continue
        labels.setdefault("alertname", entity.id.key.split("@", 1)[0])
        if all(_matches(m, labels) for m in targets):
            out.add(f"{entity.id.service}/{entity.id.key}")
    return out


def _inhibit_flags(
    change: Change, after_model: SemanticModel, locations: Mapping[str, Location]
) -> Iterable[Flag]:
    after = _mutable(list((change.after or {}).get("target_matchers") or ()), after_model)
    # A changed edge is a new risk only for alerts it could not mute before (narrowing
    # an edge, or touching only its source side, is not).
    before = (
        _mutable(list((change.before or {}).get("target_matchers") or ()), after_model)
        if change.change == "changed"
        else set()
    )
    muted = sorted(after - before)
    if muted:
        more = f" and {len(muted) - 5} more" if len(muted) > 5 else ""
        yield _flag(
            "diff/inhibit-mutes-page",
            Severity.WARNING,
            change.id.service,
            f"inhibit edge {change.id.key!r} ({change.change}) can mute paging alerts: "
            f"{', '.join(muted[:5])}{more}",
            "check that its source alert always pages itself while it mutes these",
            change.id,
            locations,
        )


def _users(metric: str, service: str, model: SemanticModel, plan: Plan | None) -> list[str]:
    users = set()
    for entity in model.values():
        if entity.id.service != service or entity.id.kind not in ("alert", "record"):
            continue
        expr = entity.display.get("expr", entity.fields.get("expr"))
        try:
            if isinstance(expr, str) and metric in referenced_metrics(expr):
                users.add(entity.id.key)
        except PromQLSyntaxError:
            continue
    if plan is not None:
        for group in plan.rule_groups:
            if group.service != service:
                continue
            for rule in group.rules:
                name = getattr(rule, "alert", None) or getattr(rule, "record", "")
                try:
                    if metric in referenced_metrics(rule.expr):
                        users.add(str(name))
                except PromQLSyntaxError:
                    continue
        for row in plan.dashboard_rows:
            if row.service != service:
                continue
            for panel in row.panels:
                for query in panel.queries:
                    try:
                        if metric in referenced_metrics(query.expr):
                            users.add(f"panel {panel.key}")
                    except PromQLSyntaxError:
                        continue
    return sorted(users)


def apply_acknowledgements(flags: list[Flag], acks: Sequence[Acknowledgement]) -> list[Flag]:
    """An acknowledged flag stays visible, one severity lower, with its reason."""
    out = []
    for flag in flags:
        diag = flag.diagnostic
        key = diag.object_path[-1] if diag.object_path else ""
        targets = {key, key.rsplit(": ", 1)[-1]}  # relabel keys are "<variant>: <label>"
        ack = next(
            (
                a
                for a in acks
                if a.code == diag.code
                and (
                    (a.service == flag.service and (a.target is None or a.target in targets))
                    # shared (fleet) output: any service may accept it, naming the target
                    or (flag.service == FLEET and a.target in targets)
                )
            ),
            None,
        )
        if ack is None:
            out.append(flag)
            continue
        lowered = Severity(max(int(diag.severity) - 1, int(Severity.INFO)))
        new = Diagnostic(
            diag.code,
            lowered,
            f"{diag.message} (acknowledged: {ack.reason})",
            hint=None,
            location=diag.location,
            object_path=diag.object_path,
            origin=diag.origin,
        )
        out.append(Flag(new, flag.service, ack.reason))
    return out
