"""``obs-iac import sloth|openslo``: an SLO spec from another tool -> a blueprint file.

Both formats describe SLIs as PromQL, while a blueprint declares the series it reads.
The importer recognises the shapes those specs use in practice:
- events: ``sum(rate(<counter>{...}[{{.window}}]))`` for errors (or good) and total;
- latency: ``<h>_count - <h>_bucket{le="<bound>"}`` over ``<h>_count``;
- OpenSLO ratioMetric: good or bad plus total, as selectors or the Sloth shapes above.
Anything else (raw error-ratio queries, plugins, threshold metrics, time slices) is
refused with a located diagnostic instead of being guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from obs_iac.diagnostics import Diagnostic, InputError, Location, Severity
from obs_iac.labels import SLA_ID_PATTERN
from obs_iac.packs.slo.models import SLO_NAME_PATTERN, STANDARD_WINDOWS
from obs_iac.promql import PromQLSyntaxError, parse

SLOTH_VERSION = "prometheus/v1"
OPENSLO_VERSION = "openslo/v1"
# Sloth's --default-slo-period; its spec has no window of its own.
SLOTH_DEFAULT_WINDOW = "30d"

Path_ = tuple[str | int, ...]


@dataclass
class Doc:
    """A YAML document with the line of every key and item, for located diagnostics."""

    data: Any
    lines: dict[Path_, int]
    file: str
    start: int

    def line(self, *path: str | int) -> int:
        for cut in range(len(path), -1, -1):
            if path[:cut] in self.lines:
                return self.lines[path[:cut]]
        return self.start

    def get(self, *path: str | int) -> Any:
        node = self.data
        for part in path:
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    return None
            elif not isinstance(node, dict):
                return None
            node = node[part] if isinstance(part, int) else node.get(part)
        return node


class _Problems:
    def __init__(self, file: str, kind: str) -> None:
        self.file = file
        self.kind = kind
        self.items: list[Diagnostic] = []

    def add(self, doc: Doc | None, path: Path_, message: str, hint: str) -> None:
        line = doc.line(*path) if doc is not None else None
        where = ".".join(str(p) for p in path)
        self.items.append(
            Diagnostic(
                f"import/{self.kind}",
                Severity.ERROR,
                f"{where}: {message}" if where else message,
                hint=hint,
                location=Location(self.file, line),
                origin="slo",
            )
        )

    def raise_if_any(self) -> None:
        if self.items:
            raise InputError(self.items)


def _to_python(node: yaml.Node, path: Path_, lines: dict[Path_, int]) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key, value in node.value:
            name = str(key.value)
            lines[(*path, name)] = key.start_mark.line + 1
            out[name] = _to_python(value, (*path, name), lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, (*path, i), lines) for i, item in enumerate(node.value)]
    constructor = yaml.constructor.SafeConstructor()
    return constructor.construct_object(node, deep=True)


def read_docs(path: Path, kind: str) -> list[Doc]:
    file = path.as_posix()
    problems = _Problems(file, kind)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.add(None, (), f"cannot read the file: {exc}", "pass a UTF-8 YAML file")
        problems.raise_if_any()
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problems.items.append(
            Diagnostic(
                f"import/{kind}",
                Severity.ERROR,
                f"not valid YAML: {getattr(exc, 'problem', exc)}",
                hint="fix the YAML syntax",
                location=Location(file, mark.line + 1 if mark else None),
                origin="slo",
            )
        )
        problems.raise_if_any()
    docs = []
    for node in nodes:
        if node is None:
            continue
        lines: dict[Path_, int] = {}
        docs.append(Doc(_to_python(node, (), lines), lines, file, node.start_mark.line + 1))
    if not docs:
        problems.add(None, (), "the file holds no YAML document", "pass a spec file")
        problems.raise_if_any()
    return docs


# -- the imported model ----------------------------------------------------------------


@dataclass
class SeriesDecl:
    name: str
    type: str
    unit: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


@dataclass
class ImportedSlo:
    name: str
    objective: float
    window: str
    kind: str  # "error_ratio" | "latency"
    description: str = ""
    total: SeriesDecl | None = None
    bad: SeriesDecl | None = None
    good: SeriesDecl | None = None
    histogram: SeriesDecl | None = None
    threshold: float | None = None
    matchers: dict[str, str] = field(default_factory=dict)
    good_matchers: dict[str, str] = field(default_factory=dict)
    bad_matchers: dict[str, str] = field(default_factory=dict)
    page: bool = True
    ticket: bool = True
    source: str = ""


@dataclass
class ImportedService:
    name: str
    sla_id: str
    slos: list[ImportedSlo]
    origin: str


_OPS = {"MatchOp.Equal": "", "MatchOp.NotEqual": "!=", "MatchOp.Re": "=~", "MatchOp.NotRe": "!~"}


@dataclass(frozen=True)
class _Selector:
    metric: str
    matchers: tuple[tuple[str, str], ...]  # (label, value with op prefix), sorted


def _unwrap(node: Any) -> Any:
    while type(node).__name__ == "ParenExpr":
        node = node.expr
    return node


def _selector(node: Any) -> _Selector | None:
    """``sum(rate(m{...}[w]))``, ``rate(m[w])``, ``increase(...)`` or a bare ``m{...}``."""
    node = _unwrap(node)
    if type(node).__name__ == "AggregateExpr":
        if str(node.op) != "sum":
            return None
        node = _unwrap(node.expr)
    if type(node).__name__ == "Call":
        if str(node.func.name) not in ("rate", "increase") or len(node.args) != 1:
            return None
        node = node.args[0]
        if type(node).__name__ != "MatrixSelector":
            return None
        node = node.vector_selector
    if type(node).__name__ != "VectorSelector" or not node.name:
        return None
    matchers = []
    for m in node.matchers.matchers:
        if m.name == "__name__":
            continue
        op = _OPS.get(str(m.op))
        if op is None:
            return None
        matchers.append((str(m.name), f"{op}{m.value}"))
    return _Selector(str(node.name), tuple(sorted(matchers)))


def _parse(query: str) -> Any | None:
    # Sloth's only template variable; any window parses the same.
    text = re.sub(r"\{\{\s*\.window\s*\}\}", "5m", query)
    try:
        return parse(text)
    except PromQLSyntaxError:
        return None


def _labels_for(selectors: list[_Selector]) -> tuple[str, ...]:
    labels = {"business_sla_id"}
    for sel in selectors:
        labels.update(name for name, _ in sel.matchers if name != "le")
    return tuple(sorted(labels))


def _split(part: _Selector, total: _Selector) -> tuple[dict[str, str], dict[str, str]] | None:
    """(common matchers, matchers only on the part); None if total has its own extras."""
    common = dict(total.matchers)
    own = dict(part.matchers)
    for label, value in common.items():
        if own.get(label) != value:
            return None
    return common, {k: v for k, v in own.items() if k not in common}


def events_sli(
    slo: ImportedSlo,
    part_query: str,
    total_query: str,
    part_is_bad: bool,
) -> str | None:
    """Fills ``slo`` from an events pair; returns why it cannot, or None."""
    part_ast, total_ast = _parse(part_query), _parse(total_query)
    if part_ast is None or total_ast is None:
        return "the query is not valid PromQL"
    total = _selector(total_ast)
    if total is None:
        return "the total query is not sum(rate(<counter>{...}[window])) or a selector"
    part = _selector(part_ast)
    if part is None and part_is_bad:
        # Sloth's latency shape: count - bucket{le="x"}
        node = _unwrap(part_ast)
        if type(node).__name__ == "BinaryExpr" and str(node.op) == "-":
            lhs, rhs = _selector(node.lhs), _selector(node.rhs)
            if (
                lhs is not None
                and rhs is not None
                and lhs == total
                and lhs.metric.endswith("_count")
                and rhs.metric == lhs.metric[: -len("_count")] + "_bucket"
            ):
                rest = dict(rhs.matchers)
                le = rest.pop("le", None)
                if (
                    le is not None
                    and re.fullmatch(r"[0-9.eE+-]+", le)
                    and rest == dict(lhs.matchers)
                ):
                    slo.kind = "latency"
                    slo.threshold = float(le)
                    family = lhs.metric[: -len("_count")]
                    slo.histogram = SeriesDecl(
                        family, "histogram", "seconds", _labels_for([lhs]), (float(le),)
                    )
                    slo.matchers = dict(lhs.matchers)
                    return None
        return (
            "the error query is neither sum(rate(<counter>{...}[window])) nor "
            "<h>_count - <h>_bucket{le=...}"
        )
    if part is None:
        return "the good query is not sum(rate(<counter>{...}[window])) or a selector"
    split = _split(part, total)
    if split is None:
        return "the total query filters on labels the good/bad query does not"
    common, own = split
    labels = _labels_for([part, total])
    slo.kind = "error_ratio"
    slo.matchers = common
    slo.total = SeriesDecl(total.metric, "counter", "events", labels)
    decl = SeriesDecl(part.metric, "counter", "events", labels)
    if part_is_bad:
        slo.bad, slo.bad_matchers = decl, own
    else:
        slo.good, slo.good_matchers = decl, own
    return None


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "slo"


def _sla_id(service: str) -> str:
    sla = re.sub(r"[^a-z0-9]+", "_", service.lower()).strip("_")
    if not sla or not sla[0].isalpha():
        sla = "svc_" + sla
    return sla[:63]


def _objective(
    problems: _Problems, doc: Doc, path: Path_, value: Any, percent: bool = True
) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.add(doc, path, f"expected a number, got {value!r}", "e.g. 99.9")
        return None
    objective = float(value) if percent else float(value) * 100
    if not 0 < objective < 100:
        problems.add(
            doc,
            path,
            f"objective {objective:g} % is not strictly between 0 and 100",
            "obs-iac needs an error budget: 100 % leaves none, 0 % promises nothing",
        )
        return None
    return objective


# -- Sloth -------------------------------------------------------------------------------


def load_sloth(path: Path) -> ImportedService:
    problems = _Problems(path.as_posix(), "sloth")
    docs = read_docs(path, "sloth")
    if len(docs) != 1:
        problems.add(docs[1], (), "a Sloth spec is one YAML document", "split the file")
        problems.raise_if_any()
    doc = docs[0]
    if not isinstance(doc.data, dict):
        problems.add(doc, (), "a Sloth spec is a mapping", f"start with `version: {SLOTH_VERSION}`")
        problems.raise_if_any()
    data: dict[str, Any] = doc.data
    if data.get("version") != SLOTH_VERSION:
        problems.add(
            doc,
            ("version",),
            f"version is {data.get('version')!r}, not {SLOTH_VERSION!r}",
            "only Sloth's prometheus/v1 spec is supported (the Kubernetes CRD form is not)",
        )
        problems.raise_if_any()
    known = {"version", "service", "labels", "slos"}
    for key in sorted(set(data) - known):
        problems.add(doc, (key,), "unknown field in a Sloth spec", f"fields: {sorted(known)}")
    service = data.get("service")
    if not isinstance(service, str) or not service:
        problems.add(doc, ("service",), "service is required", "name the service")
    slos_raw = data.get("slos")
    if not isinstance(slos_raw, list) or not slos_raw:
        problems.add(doc, ("slos",), "at least one SLO is required", "add slos: [...]")
    problems.raise_if_any()
    assert isinstance(service, str) and isinstance(slos_raw, list)
    slos: list[ImportedSlo] = []
    for i, raw in enumerate(slos_raw):
        where: Path_ = ("slos", i)
        if not isinstance(raw, dict):
            problems.add(doc, where, "an SLO is a mapping", "see Sloth's prometheus/v1 spec")
            continue
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            problems.add(doc, (*where, "name"), "name is required", "name the SLO")
            continue
        objective = _objective(problems, doc, (*where, "objective"), raw.get("objective"))
        if objective is None:
            continue
        slo = ImportedSlo(
            name=_slug(name),
            objective=objective,
            window=SLOTH_DEFAULT_WINDOW,
            kind="",
            description=str(raw.get("description", "")),
            source=f"sloth {service}/{name}",
        )
        sli = raw.get("sli") or {}
        events = sli.get("events") if isinstance(sli, dict) else None
        if isinstance(events, dict):
            why = events_sli(
                slo, str(events.get("error_query", "")), str(events.get("total_query", "")), True
            )
            if why is not None:
                problems.add(
                    doc,
                    (*where, "sli", "events"),
                    why,
                    "rewrite the SLI by hand as a blueprint Slo (see docs/slo.md)",
                )
                continue
        elif isinstance(sli, dict) and ("raw" in sli or "plugin" in sli):
            kind = "raw" if "raw" in sli else "plugin"
            problems.add(
                doc,
                (*where, "sli", kind),
                f"a {kind} SLI gives a ratio, not event counts, so its budget and "
                "low-traffic guard cannot be computed",
                "express it as events (error_query/total_query) or write the Slo by hand",
            )
            continue
        else:
            problems.add(
                doc, (*where, "sli"), "sli.events is required", "give error_query and total_query"
            )
            continue
        alerting = raw.get("alerting") or {}
        if isinstance(alerting, dict):
            slo.page = not bool((alerting.get("page_alert") or {}).get("disable", False))
            slo.ticket = not bool((alerting.get("ticket_alert") or {}).get("disable", False))
        slos.append(slo)
    problems.raise_if_any()
    return ImportedService(_slug(service), _sla_id(service), slos, f"Sloth spec {path.name}")


# -- OpenSLO ------------------------------------------------------------------------------

_OPENSLO_WINDOWS = {"28d": "28d", "4w": "28d", "30d": "30d", "1M": "30d"}


def _metric_query(spec: Any) -> str | None:
    if not isinstance(spec, dict):
        return None
    source = spec.get("metricSource")
    if not isinstance(source, dict):
        return None
    inner = source.get("spec")
    query = inner.get("query") if isinstance(inner, dict) else None
    return query if isinstance(query, str) else None


def load_openslo(path: Path) -> ImportedService:
    problems = _Problems(path.as_posix(), "openslo")
    docs = read_docs(path, "openslo")
    slis: dict[str, tuple[Doc, Path_]] = {}
    slo_docs: list[Doc] = []
    for doc in docs:
        if not isinstance(doc.data, dict) or doc.data.get("apiVersion") != OPENSLO_VERSION:
            got = doc.data.get("apiVersion") if isinstance(doc.data, dict) else None
            problems.add(
                doc,
                ("apiVersion",),
                f"apiVersion is {got!r}, not {OPENSLO_VERSION!r}",
                "only OpenSLO v1 documents are supported",
            )
            continue
        kind = doc.data.get("kind")
        if kind == "SLI":
            name = doc.get("metadata", "name")
            if isinstance(name, str):
                slis[name] = (doc, ("spec",))
        elif kind == "SLO":
            slo_docs.append(doc)
        elif kind not in ("Service", "DataSource", "AlertPolicy", "AlertCondition"):
            problems.add(doc, ("kind",), f"unknown kind {kind!r}", "expected SLO (and SLI)")
    if not slo_docs and not problems.items:
        problems.add(docs[0], (), "no `kind: SLO` document", "the file must hold an SLO")
    problems.raise_if_any()
    service_name = ""
    slos: list[ImportedSlo] = []
    for doc in slo_docs:
        name = doc.get("metadata", "name")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
            problems.add(doc, ("metadata", "name"), "metadata.name is required (RFC 1123)", "")
            continue
        service = doc.get("spec", "service")
        if not isinstance(service, str) or not service:
            problems.add(doc, ("spec", "service"), "spec.service is required", "")
            continue
        if service_name and service != service_name:
            problems.add(
                doc,
                ("spec", "service"),
                f"service {service!r} differs from {service_name!r}",
                "a blueprint is one service: import one service's SLOs per file",
            )
            continue
        service_name = service
        method = doc.get("spec", "budgetingMethod")
        if method not in (None, "Occurrences"):
            problems.add(
                doc,
                ("spec", "budgetingMethod"),
                f"budgetingMethod {method!r} is not supported",
                "only Occurrences maps onto event SLIs; write time-slice SLOs by hand",
            )
            continue
        windows = doc.get("spec", "timeWindow")
        duration = doc.get("spec", "timeWindow", 0, "duration")
        if not isinstance(windows, list) or len(windows) != 1 or duration not in _OPENSLO_WINDOWS:
            problems.add(
                doc,
                ("spec", "timeWindow"),
                f"time window {duration!r} is not 28d/4w or 30d/1M",
                "obs-iac's burn-rate tiers are made for 28d or 30d; change the window or "
                "write the Slo by hand with allow_nonstandard_window=True",
            )
            continue
        indicator_path: Path_ = ("spec", "indicator", "spec")
        indicator_doc = doc
        ref = doc.get("spec", "indicatorRef")
        if isinstance(ref, str):
            if ref not in slis:
                problems.add(doc, ("spec", "indicatorRef"), f"no SLI named {ref!r} in the file", "")
                continue
            indicator_doc, indicator_path = slis[ref]
        ratio = indicator_doc.get(*indicator_path, "ratioMetric")
        if not isinstance(ratio, dict):
            threshold_only = indicator_doc.get(*indicator_path, "thresholdMetric") is not None
            note = " (thresholdMetric is not supported)" if threshold_only else ""
            problems.add(
                indicator_doc,
                indicator_path,
                f"the SLI has no ratioMetric{note}",
                "give ratioMetric with good or bad, and total",
            )
            continue
        objectives = doc.get("spec", "objectives")
        if not isinstance(objectives, list) or not objectives:
            problems.add(doc, ("spec", "objectives"), "at least one objective is required", "")
            continue
        rpath = (*indicator_path, "ratioMetric")
        good, bad, total = (_metric_query(ratio.get(k)) for k in ("good", "bad", "total"))
        if total is None or (good is None) == (bad is None):
            problems.add(
                indicator_doc,
                rpath,
                "ratioMetric needs total and exactly one of good or bad, each with "
                "metricSource.spec.query",
                "",
            )
            continue
        for j, objective_raw in enumerate(objectives):
            opath: Path_ = ("spec", "objectives", j)
            if not isinstance(objective_raw, dict):
                problems.add(doc, opath, "an objective is a mapping", "")
                continue
            if "targetPercent" in objective_raw:
                objective = _objective(
                    problems, doc, (*opath, "targetPercent"), objective_raw["targetPercent"]
                )
            else:
                objective = _objective(
                    problems, doc, (*opath, "target"), objective_raw.get("target"), percent=False
                )
            if objective is None:
                continue
            suffix = f"-{_slug(str(objective_raw.get('name') or j))}" if len(objectives) > 1 else ""
            slo = ImportedSlo(
                name=_slug(name + suffix)[:48],
                objective=objective,
                window=_OPENSLO_WINDOWS[str(duration)],
                kind="",
                description=str(doc.get("spec", "description") or ""),
                source=f"openslo {name}",
            )
            why = events_sli(slo, bad or good or "", total, bad is not None)
            if why is not None:
                problems.add(indicator_doc, rpath, why, "write the Slo by hand (docs/slo.md)")
                break
            slos.append(slo)
    problems.raise_if_any()
    return ImportedService(
        _slug(service_name), _sla_id(service_name), slos, f"OpenSLO file {path.name}"
    )


# -- blueprint output ---------------------------------------------------------------------


def _series_var(decl: SeriesDecl) -> str:
    return re.sub(r"[^A-Z0-9]+", "_", decl.name.upper()).strip("_")


def render_blueprint(svc: ImportedService, team: str) -> str:
    assert re.fullmatch(SLA_ID_PATTERN, svc.sla_id)
    series: dict[str, SeriesDecl] = {}
    for slo in svc.slos:
        for decl in (slo.total, slo.good, slo.bad, slo.histogram):
            if decl is None:
                continue
            prior = series.get(decl.name)
            if prior is not None:
                decl.labels = tuple(sorted({*prior.labels, *decl.labels}))
                decl.buckets = tuple(sorted({*prior.buckets, *decl.buckets}))
            series[decl.name] = decl
    # Share the merged declaration between SLOs that read the same series.
    for slo in svc.slos:
        for attr in ("total", "good", "bad", "histogram"):
            decl = getattr(slo, attr)
            if decl is not None:
                setattr(slo, attr, series[decl.name])
    imports = sorted(
        {"Series", "Slo"}
        | {"LatencySli" if s.kind == "latency" else "ErrorRatioSli" for s in svc.slos}
    )
    out = [
        f'"""{svc.name}: imported from {svc.origin} by `obs-iac import`.',
        "",
        "Review every TODO: the spec gave queries, not the series' full label sets,",
        "buckets or the GPU fleet, which a blueprint declares.",
        '"""',
        "",
        "from obs_iac import GpuFleet, service",
        f"from obs_iac.packs.slo import {', '.join(imports)}",
        "",
    ]
    for name in sorted(series):
        decl = series[name]
        out.append(
            f"# TODO: declare every label {decl.name} carries (seen in the queries: "
            f"{', '.join(decl.labels)})."
        )
        out.append(f"{_series_var(decl)} = Series(")
        out.append(f"    name={decl.name!r},")
        out.append(f"    type={decl.type!r},")
        out.append(f"    unit={decl.unit!r},")
        out.append(f"    labels={decl.labels!r},")
        if decl.buckets:
            out.append(f"    buckets={decl.buckets!r},  # TODO: all of the histogram's buckets")
        out.append(")")
    out += [
        "",
        "service(",
        f"    name={svc.name!r},",
        f"    team={team!r},",
        f"    sla_id={svc.sla_id!r},",
        f"    objective={('; '.join(f'{s.name} {s.objective:g} %' for s in svc.slos))!r},",
        f"    runbook_base_url={'https://runbooks.example.com/' + svc.name!r},  # TODO",
        "    # TODO: the GPU fleet this service runs on.",
        '    gpu=GpuFleet(model="H100-SXM5-80GB", count=1, driver_version="550.54.15"),',
        "    slo=[",
    ]
    for slo in svc.slos:
        out.append("        Slo(")
        out.append(f"            name={slo.name!r},")
        if slo.description:
            out.append(f"            description={slo.description!r},")
        out.append(f"            objective={slo.objective!r},")
        out.append(f"            window={slo.window!r},")
        if slo.kind == "latency":
            assert slo.histogram is not None
            out.append(
                f"            sli=LatencySli(histogram={_series_var(slo.histogram)}, "
                f"threshold_seconds={slo.threshold!r}"
                + (f", matchers={slo.matchers!r}" if slo.matchers else "")
                + "),"
            )
        else:
            assert slo.total is not None
            args = [f"total={_series_var(slo.total)}"]
            if slo.bad is not None:
                args.append(f"bad={_series_var(slo.bad)}")
            if slo.good is not None:
                args.append(f"good={_series_var(slo.good)}")
            for attr in ("matchers", "good_matchers", "bad_matchers"):
                if getattr(slo, attr):
                    args.append(f"{attr}={getattr(slo, attr)!r}")
            out.append(f"            sli=ErrorRatioSli({', '.join(args)}),")
        if not slo.page:
            out.append("            page=False,")
        if not slo.ticket:
            out.append("            ticket=False,")
        out.append("        ),")
    out += ["    ],", ")", ""]
    return "\n".join(out)


def check_names(svc: ImportedService, file: str) -> None:
    bad = [s.name for s in svc.slos if not re.fullmatch(SLO_NAME_PATTERN, s.name)]
    if bad:
        raise InputError(
            [
                Diagnostic(
                    "import/name",
                    Severity.ERROR,
                    f"SLO names {bad} cannot be made into obs-iac SLO names",
                    hint="rename them: lowercase letters, digits and '-', at most 48",
                    location=Location(file),
                )
            ]
        )


__all__ = ["STANDARD_WINDOWS", "load_openslo", "load_sloth", "render_blueprint"]
