"""The semantic model: rendered output as objects keyed by identity, not as bytes.

Both sides of a diff become a ``{EntityId: Entity}`` map. The model is built from the
rendered files themselves (what is committed under ``generated/`` is all the default diff
has), and, when both sides were rendered from blueprints, enriched from the plans with
what has no file yet (inhibit edges, dashboard panels, log stages).

Identity: alerts by name within their service, recording rules by record + labels,
relabel rules by the canonical label they produce, DCGM fields by name, inhibit edges by
name (or by their matchers when only the Alertmanager file exists), dashboards by title,
panels by their stable id/key, log stages by role. Everything else falls back to one
entity per file, compared structurally with order ignored.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import yaml

from obs_iac import conventions
from obs_iac.labels import canonical_for_spelling
from obs_iac.plan.model import Plan
from obs_iac.promql import PromQLSyntaxError, parse

FLEET = "(fleet)"

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class EntityId:
    kind: str
    service: str
    key: str

    def sort_key(self) -> tuple[str, str, str]:
        return (self.service, self.kind, self.key)


@dataclass(frozen=True)
class Entity:
    id: EntityId
    path: str  # the output file it comes from, or "plan"
    fields: Mapping[str, Any]  # normalised: equal meaning gives equal values
    display: Mapping[str, Any] = field(default_factory=dict)  # as written, for people


SemanticModel = dict[EntityId, Entity]


# --- normalisation -------------------------------------------------------------------

_DURATION = re.compile(
    r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$"
)
_UNITS: tuple[tuple[str, int], ...] = (
    ("y", 365 * 86400000),
    ("w", 7 * 86400000),
    ("d", 86400000),
    ("h", 3600000),
    ("m", 60000),
    ("s", 1000),
    ("ms", 1),
)


def duration(value: Any) -> str:
    """``1800s``, ``30m`` and ``0h30m`` are the same ``for``; spell them one way."""
    if value in (None, ""):
        return "0s"
    text = str(value).strip()
    match = _DURATION.match(text)
    if not match or not text:
        return text
    millis = 0
    for group, (_, size) in zip(match.groups(), _UNITS, strict=True):
        millis += int(group or 0) * size
    if millis == 0:
        return "0s"
    out = []
    for unit, size in _UNITS:
        if millis >= size:
            out.append(f"{millis // size}{unit}")
            millis %= size
    return "".join(out)


def squash(text: str) -> str:
    """Collapses whitespace outside quoted strings."""
    out: list[str] = []
    quote: str | None = None
    space = False
    escaped = False
    for char in text.strip():
        if quote:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char.isspace():
            space = True
            continue
        if space and out:
            out.append(" ")
        space = False
        out.append(char)
        if char in "\"'`":
            quote = char
    return "".join(out)


def expr_key(expr: str) -> str:
    """PromQL in canonical form (the parser's own printing); other languages squashed."""
    try:
        return str(parse(expr))
    except PromQLSyntaxError:
        return squash(expr)


def plain(value: Any) -> Any:
    """Tuples to lists, models to dicts: data DeepDiff and json both understand."""
    if hasattr(value, "model_dump"):
        return plain(value.model_dump(mode="json", by_alias=True))
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


# --- parsing files back into data ------------------------------------------------------


def parse_file(path: str, data: bytes) -> Any:
    """The data a rendered file holds, by format; text stays text."""
    text = data.decode("utf-8", errors="replace")
    suffix = PurePosixPath(path).suffix
    try:
        if suffix in (".yaml", ".yml"):
            docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
            return docs[0] if len(docs) == 1 else docs
        if suffix == ".json":
            return json.loads(text)
    except (yaml.YAMLError, ValueError):
        pass  # a hand-broken file is still diffable as text
    return text


# --- which file is a twin of which ----------------------------------------------------

# A PrometheusRule CRD carries the same groups as the plain rule file, the ConfigMap the
# same collectors.csv, and so on. The payload is read from the primary file when the side
# has one, so a change never shows twice; the twin then only contributes its metadata.
_TWINS: tuple[tuple[str, str], ...] = (
    (conventions.prometheus_rule_crd("{}"), conventions.rule_file("{}")),
    (conventions.collectors_configmap("{}"), conventions.collectors_csv("{}")),
    (conventions.servicemonitor_relabel_file("{}"), conventions.metric_relabel_file("{}")),
    ("kubernetes/grafana-dashboards/{}.yaml", "grafana/dashboards/{}.json"),
)


def _pattern(template: str) -> re.Pattern[str]:
    head, tail = template.split("{}")
    return re.compile(f"^{re.escape(head)}(?P<name>[^/]+){re.escape(tail)}$")


_TWIN_PATTERNS = tuple((_pattern(t), _pattern(p), t, p) for t, p in _TWINS)
# Paths whose {} is a service name (relabelling is named by scrape variant, dashboards
# by uid).
SERVICE_PATTERNS = tuple(_pattern(t) for pair in _TWINS[:2] for t in pair)


RULE_PATTERNS = tuple(_pattern(t) for t in _TWINS[0])


def primary_of(path: str) -> str | None:
    for twin_re, _, _, primary in _TWIN_PATTERNS:
        match = twin_re.match(path)
        if match:
            return primary.format(match["name"])
    return None


def partners(path: str) -> set[str]:
    """The twin or primary of a path (both directions)."""
    out = set()
    for twin_re, primary_re, twin, primary in _TWIN_PATTERNS:
        match = twin_re.match(path)
        if match:
            out.add(primary.format(match["name"]))
        match = primary_re.match(path)
        if match:
            out.add(twin.format(match["name"]))
    return out


def service_of(path: str, known: Iterable[str]) -> str:
    names = set(known)
    pure = PurePosixPath(path)
    stem = pure.name.split(".", 1)[0]
    if stem in names:
        return stem
    for part in reversed(pure.parts[:-1]):
        if part in names:
            return part
    return FLEET


# --- extraction -----------------------------------------------------------------------


def _rule_service(group: str, fallback: str) -> str:
    match = re.match(r"^obs-iac\.(?P<service>[a-z][a-z0-9-]*)\.", group)
    return match["service"] if match else fallback


def rule_entities(path: str, data: Any, service: str) -> Iterator[Entity]:
    groups = data.get("groups") if isinstance(data, Mapping) else None
    seen: set[tuple[str, str]] = set()
    for group in groups or ():
        gname = str(group.get("name", ""))
        owner = _rule_service(gname, service)
        for rule in group.get("rules") or ():
            labels = {str(k): str(v) for k, v in (rule.get("labels") or {}).items()}
            expr = str(rule.get("expr", ""))
            if "alert" in rule:
                kind, key = "alert", str(rule["alert"])
                fields: dict[str, Any] = {
                    "expr": expr_key(expr),
                    "for": duration(rule.get("for")),
                    "keep_firing_for": duration(rule.get("keep_firing_for")),
                    "labels": labels,
                    "annotations": {
                        str(k): squash(str(v)) for k, v in (rule.get("annotations") or {}).items()
                    },
                }
            else:
                kind = "record"
                key = str(rule.get("record", ""))
                if labels:
                    key += "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
                fields = {"expr": expr_key(expr), "labels": labels}
            if (kind, key) in seen:
                key = f"{key}@{gname}"  # the same name twice in a service: tell them apart
            seen.add((kind, key))
            fields["group"] = gname
            if group.get("interval"):
                fields["interval"] = duration(group["interval"])
            yield Entity(EntityId(kind, owner, key), path, fields, {"expr": squash(expr)})


_CAMEL = {"sourceLabels": "source_labels", "targetLabel": "target_label"}


def relabel_entities(path: str, rules: Any, service: str) -> Iterator[Entity]:
    counts: dict[str, int] = {}
    for raw in rules or ():
        rule = {_CAMEL.get(str(k), str(k)): plain(v) for k, v in raw.items()}
        rule.setdefault("action", "replace")
        target = rule.get("target_label")
        canonical = canonical_for_spelling(str(target)) if target else None
        if canonical is not None:
            key = canonical.key
        elif target:
            key = str(target)
        else:
            key = f"{rule['action']}:{rule.get('regex', '')}"
        counts[key] = counts.get(key, 0) + 1
        if counts[key] > 1:
            key = f"{key}#{counts[key]}"
        # Relabelling is one file per scrape-source variant, shared by services; the
        # variant (the file's stem, the same for the ServiceMonitor twin) scopes the key.
        variant = PurePosixPath(path).name.split(".", 1)[0]
        display = {"label": canonical.key if canonical is not None else ""}
        yield Entity(EntityId("relabel", service, f"{variant}: {key}"), path, rule, display)


_REASON = re.compile(r"^#\s*(?P<name>[A-Z][A-Z0-9_]+):\s*needed by\s*(?P<reason>.*)$")


def collector_entities(path: str, text: str, service: str) -> Iterator[Entity]:
    reasons: dict[str, str] = {}
    rows: list[list[str]] = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            match = _REASON.match(stripped)
            if match:
                reasons[match["name"]] = match["reason"].strip()
            continue
        rows.extend(csv.reader(io.StringIO(stripped), skipinitialspace=True))
    for row in rows:
        if not row:
            continue
        name = row[0].strip()
        fields = {
            "type": row[1].strip() if len(row) > 1 else "",
            "help": ", ".join(c.strip() for c in row[2:]),
            "needed_by": reasons.get(name, ""),
        }
        yield Entity(EntityId("collector", service, name), path, fields)


def _matcher_text(value: Any) -> str:
    if isinstance(value, Mapping):  # an IR Matcher or an AlertmanagerConfig matcher
        op = value.get("op") or value.get("matchType") or "="
        return f"{value.get('name')}{op}{json.dumps(str(value.get('value', '')))}"
    return squash(str(value))


def _edge_fields(rule: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "source_matchers": sorted(_matcher_text(m) for m in rule.get("source_matchers") or ()),
        "target_matchers": sorted(_matcher_text(m) for m in rule.get("target_matchers") or ()),
        "equal": sorted(str(x) for x in rule.get("equal") or ()),
    }


# The Alertmanager generator writes "# <edge name> (<service>|fleet-wide, pack <p>): why"
# above each rule, because Alertmanager before 0.30 rejects a `name` key.
_EDGE_COMMENT = re.compile(
    r"^#\s*(?P<name>[a-z0-9][a-z0-9-]*)\s+\((?P<scope>[^,()]+),\s*pack\s+[^)]*\):",
    re.MULTILINE,
)


def inhibit_file_entities(path: str, rules: Any, text: str = "") -> Iterator[Entity]:
    rules = list(rules or ())
    named = [(m["name"], m["scope"].strip()) for m in _EDGE_COMMENT.finditer(text)]
    if len(named) != len(rules):
        named = []
    for index, rule in enumerate(rules):
        fields = _edge_fields(rule)
        key, service = str(rule.get("name") or ""), FLEET
        if named:
            key = key or named[index][0]
            service = FLEET if named[index][1] == "fleet-wide" else named[index][1]
        if not key:  # unnamed and uncommented: identity is what the rule matches
            key = (
                " & ".join(fields["source_matchers"])
                + " -> "
                + " & ".join(fields["target_matchers"])
            )
        yield Entity(EntityId("inhibit-edge", service, key), path, fields)


def storm_entities(path: str, rows: Iterable[Any]) -> Iterator[Entity]:
    """One entity per scenario and service of the alert-storm table: its counts are what
    a reviewer reads, so a changed count is the change's summary (storm ... fired 17 -> 9)."""
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        name = str(row.get("scenario", ""))
        fields = {k: plain(row.get(k)) for k in ("fired", "mutable", "notified_at_least")}
        fields["alerts"] = [
            f"{a.get('alert')} on {a.get('on')}"
            + (f" muted by {','.join(a.get('muted_by') or [])}" if a.get("muted_by") else "")
            for a in row.get("alerts") or []
            if isinstance(a, Mapping)
        ]
        yield Entity(EntityId("storm", str(row.get("service", "")), name), path, fields)


def _is_dashboard(data: Any) -> bool:
    return isinstance(data, Mapping) and "panels" in data and "uid" in data


def _flat_panels(panels: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    for panel in panels:
        if not isinstance(panel, Mapping):
            continue
        yield panel
        yield from _flat_panels(panel.get("panels") or ())  # collapsed rows nest panels


def dashboard_entities(path: str, data: Mapping[str, Any], service: str) -> Iterator[Entity]:
    title = str(data.get("title", path))
    meta = {k: plain(v) for k, v in data.items() if k not in ("panels", "version", "id")}
    yield Entity(EntityId("dashboard", service, title), path, meta)
    for panel in _flat_panels(data.get("panels") or ()):
        if panel.get("type") == "row":
            continue
        key = f"{title} / {panel.get('id', panel.get('title', '?'))}"
        # Positions follow from the order of panels; moving one is not a change in meaning.
        fields = {k: plain(v) for k, v in panel.items() if k not in ("gridPos", "id")}
        for target in fields.get("targets") or ():
            if isinstance(target, dict) and "expr" in target:
                target["expr"] = expr_key(str(target["expr"]))
        yield Entity(
            EntityId("panel", service, key), path, fields, {"title": panel.get("title", "")}
        )


def _dashboard_service(data: Mapping[str, Any], service: str, known: Iterable[str]) -> str:
    """Dashboard files are named by uid; the title says which service they show."""
    if service != FLEET:
        return service
    words = re.split(r"[\s·:/()]+", str(data.get("title", "")))
    return next((w for w in words if w in set(known)), FLEET)


_IDENTITY_KEYS = {"groups", "metric_relabel_configs", "metricRelabelings"}


def _k8s_object(data: Any) -> bool:
    return isinstance(data, Mapping) and "apiVersion" in data and "kind" in data


def file_entities(
    path: str, data: bytes, known_services: Collection[str], present: set[str]
) -> Iterator[Entity]:
    """Every entity one rendered file contributes; ``present`` is every path on its side."""
    parsed = parse_file(path, data)
    service = service_of(path, known_services)
    primary = primary_of(path)
    payload = primary is None or primary not in present
    if _k8s_object(parsed):
        meta = parsed.get("metadata") or {}
        name = f"{parsed['kind']}/{meta.get('namespace', '')}/{meta.get('name', '')}"
        head = {k: plain(v) for k, v in parsed.items() if k in ("apiVersion", "kind", "metadata")}
        yield Entity(EntityId("object", service, name), path, head)
        if not payload:
            return
        body = parsed.get("spec") or {}
        if parsed["kind"] == "PrometheusRule":
            yield from rule_entities(path, body, service)
        elif "metricRelabelings" in parsed:
            yield from relabel_entities(path, parsed["metricRelabelings"], service)
        elif parsed["kind"] == "ConfigMap":
            yield from _configmap_payload(path, parsed.get("data") or {}, service, known_services)
        else:
            rest = {k: plain(v) for k, v in parsed.items() if k not in head}
            yield Entity(EntityId("file", service, path), path, {"data": rest})
        return
    if (isinstance(parsed, Mapping) and _IDENTITY_KEYS & set(parsed)) or path.endswith(
        "collectors.csv"
    ):
        # The file itself is an output (a rule_files glob loads it): its appearing or going
        # away is a change even when a twin still carries the same content.
        yield Entity(EntityId("output", service, path), path, {})
    if isinstance(parsed, Mapping) and "groups" in parsed:
        yield from rule_entities(path, parsed, service)
    elif isinstance(parsed, Mapping) and "metric_relabel_configs" in parsed:
        yield from relabel_entities(path, parsed["metric_relabel_configs"], service)
    elif isinstance(parsed, Mapping) and "metricRelabelings" in parsed:
        yield from relabel_entities(path, parsed["metricRelabelings"], service)
    elif (
        isinstance(parsed, Mapping)
        and isinstance(parsed.get("inhibit_rules"), list)
        and "route" not in parsed  # a full alertmanager.yml repeats them: compared as a file
    ):
        text = data.decode("utf-8", errors="replace")
        yield from inhibit_file_entities(path, parsed["inhibit_rules"], text)
        rest = {k: plain(v) for k, v in parsed.items() if k != "inhibit_rules"}
        if rest:
            yield Entity(EntityId("file", service, path), path, {"data": rest})
    elif isinstance(parsed, Mapping) and isinstance(parsed.get("alert_storm"), list):
        yield from storm_entities(path, parsed["alert_storm"])
    elif _is_dashboard(parsed):
        yield from dashboard_entities(
            path, parsed, _dashboard_service(parsed, service, known_services)
        )
    elif isinstance(parsed, str) and path.endswith("collectors.csv"):
        yield from collector_entities(path, parsed, service)
    elif isinstance(parsed, str):
        # Text of unknown structure (Alloy, markdown): compare its lines as a set, so
        # only moving lines around is not a change.
        lines = sorted({squash(x) for x in parsed.splitlines() if x.strip()})
        yield Entity(EntityId("file", service, path), path, {"lines": lines})
    else:
        yield Entity(EntityId("file", service, path), path, {"data": plain(parsed)})


def _configmap_payload(
    path: str, data: Mapping[str, Any], service: str, known: Iterable[str]
) -> Iterator[Entity]:
    for key, value in sorted(data.items()):
        text = str(value)
        if key == "metrics" and "DCGM_" in text:
            yield from collector_entities(path, text, service)
            continue
        try:
            inner = json.loads(text) if key.endswith(".json") else None
        except ValueError:
            inner = None
        if _is_dashboard(inner):
            assert isinstance(inner, Mapping)
            yield from dashboard_entities(path, inner, _dashboard_service(inner, service, known))
        else:
            lines = sorted({squash(x) for x in text.splitlines() if x.strip()})
            yield Entity(EntityId("file", service, f"{path}:{key}"), path, {"lines": lines})


def build_model(
    files: Mapping[str, bytes],
    paths: Iterable[str],
    known_services: Iterable[str],
) -> SemanticModel:
    """Entities of the given paths of one side; ``files`` is the whole side."""
    present = set(files)
    known = tuple(known_services)
    model: SemanticModel = {}
    for path in sorted(paths):
        if path not in files:
            continue
        for entity in file_entities(path, files[path], known, present):
            # A twin read for its payload can repeat an entity of its primary: keep one.
            model.setdefault(entity.id, entity)
    return model


# --- plan-level entities ----------------------------------------------------------------


def plan_entities(plan: Plan, kinds: set[str]) -> SemanticModel:
    """Entities only the plan has (no generator for them on this branch)."""
    model: SemanticModel = {}

    def add(entity: Entity) -> None:
        model.setdefault(entity.id, entity)

    if "inhibit-edge" in kinds:
        for edge in plan.inhibit_edges:
            fields = _edge_fields(plain(edge))
            fields["reason"] = edge.reason
            add(Entity(EntityId("inhibit-edge", edge.service or FLEET, edge.name), "plan", fields))
    if "panel" in kinds:
        for row in plan.dashboard_rows:
            for panel in row.panels:
                fields = plain(panel)
                fields.pop("key", None)
                for query in fields["queries"]:
                    query["expr"] = expr_key(query["expr"])
                fields["row"] = row.title
                key = f"{row.layer}/{panel.key}"
                add(
                    Entity(
                        EntityId("panel", row.service, key), "plan", fields, {"title": panel.title}
                    )
                )
    if "log-stage" in kinds:
        for pipeline in plan.log_pipelines:
            data = plain(pipeline)
            if not isinstance(data, Mapping) or "service" not in data:
                continue
            service = str(data["service"])
            head = {
                k: v
                for k, v in data.items()
                if k in ("incoming_labels", "stream_labels", "structured_metadata")
            }
            add(Entity(EntityId("log-pipeline", service, str(data.get("pack", ""))), "plan", head))
            for key, stage in _stage_keys(list(data.get("stages") or ())):
                add(Entity(EntityId("log-stage", service, key), "plan", stage))
    return model


def _stage_keys(stages: list[Mapping[str, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """A stage is known by its role; several stages of one role (one extract per record
    type) by their one-line ``why``, so removing one does not renumber the others."""
    roles = [str(st.get("role") or st.get("kind") or "stage") for st in stages]
    whys = [str(st.get("why") or "") for st in stages]
    seen: dict[str, int] = {}
    for role, why, stage in zip(roles, whys, stages, strict=True):
        seen[role] = seen.get(role, 0) + 1
        same = [w for r, w in zip(roles, whys, strict=True) if r == role]
        if len(same) == 1:
            yield role, stage
        elif why and same.count(why) == 1:
            yield f"{role}: {why}", stage
        else:
            yield f"{role}#{seen[role]}", stage
