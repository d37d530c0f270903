"""The logs pack: one agent-neutral log pipeline per service, LogQL alerts, a logs row.

Pipeline order, and why:

1. runtime (cri/docker) first: it strips the runtime's timestamp prefix, which would
   otherwise make every line look like a record start.
2. rank separation: ranks of one container share one stream and their lines interleave.
   Multiline tracks blocks per label set, so the rank is copied into a *temporary* stream
   label before multiline; each rank then gets its own blocks.
3. multiline, with a firstline that matches the start of every record (never error text).
4. extraction (level, exception class, error details) on whole records.
5. labels: static ``business_sla_id`` and ``service_name``, ``level``, bounded incoming
   labels renamed canonically. The temporary rank label and high-cardinality incoming
   labels (pod) are dropped here: a rank or pod per stream would multiply Loki streams.
6. structured metadata: the rank, pod and error details, queryable without being labels.
7. optional drop and rate limit, last, so they act on whole records.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import BaseModel

from obs_iac import conventions
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.escaping import logql_string
from obs_iac.labels import (
    SLA_ID,
    Cardinality,
    canonical_for_spelling,
    classic_name,
)
from obs_iac.packs.logs import presets
from obs_iac.packs.logs.re2check import check_pattern, group_names
from obs_iac.packs.logs.section import LogsSection
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plan.model import (
    AlertRule,
    DashboardRow,
    DropStage,
    JsonStage,
    LabelDropStage,
    LabelsStage,
    LimitStage,
    LogPipeline,
    LogStage,
    MultilineStage,
    Panel,
    PanelQuery,
    RegexStage,
    RuntimeStage,
    StaticLabelsStage,
    StructuredMetadataStage,
)
from obs_iac.plugins import Contribution, Pack, PackContext

PACK = "logs"
SLA_LABEL = classic_name(SLA_ID)
SERVICE_LABEL = "service_name"  # Loki 3 derives service_name itself unless it is set
LEVEL = "level"
RUNTIME_STREAM = "stream"  # cri and docker stages set it: stdout or stderr
RANK_LABEL = "obs_iac_rank"  # temporary: lives only between rank separation and labels
JSON_PAYLOAD = "obs_iac_json"
RESERVED = frozenset({SLA_LABEL, SERVICE_LABEL, RANK_LABEL})
MAX_LABELS = 15  # Loki's default max_label_names_per_series
MAX_LABEL_NAME = 1024

# Label names as Loki and the agents validate them (prometheus/common's legacy scheme).
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def valid_label_name(name: str) -> bool:
    return (
        _LABEL_NAME.fullmatch(name) is not None
        and not name.startswith("__")
        and len(name) <= MAX_LABEL_NAME
    )


class LogsPack(Pack):
    name: ClassVar[str] = PACK
    description: ClassVar[str] = (
        "Log pipelines (multiline PyTorch tracebacks, rank separation, label discipline), "
        "LogQL alerts and the dashboard's logs row."
    )
    sections: ClassVar[dict[str, type[BaseModel]]] = {"logs": LogsSection}

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        section = service.section("logs")
        if not isinstance(section, LogsSection):
            section = LogsSection()
        out = Contribution()
        out.diagnostics.extend(_check(service, section))
        if any(d.severity is Severity.ERROR for d in out.diagnostics):
            return out
        pipeline = build_pipeline(service, section)
        out.log_pipelines.append(pipeline)
        out.dashboard_rows.append(_dashboard_row(service, section))
        return out


def _diag(
    service: ServiceBlueprint, code: str, message: str, hint: str, *path: str | int
) -> Diagnostic:
    return Diagnostic(
        f"logs/{code}",
        Severity.ERROR,
        message,
        hint=hint,
        location=service.location("logs", *path),
        object_path=(service.name, "logs", *(str(p) for p in path)),
        origin=PACK,
    )


def _extracted_keys(section: LogsSection) -> dict[str, Cardinality]:
    """Every extracted key the pipeline can produce, with its cardinality."""
    keys: dict[str, Cardinality] = {}
    if section.format in ("python-asctime", "python-basic", "json"):
        keys[LEVEL] = Cardinality.BOUNDED
    if section.format == "custom" and section.record_start:
        for name in group_names(section.record_start):
            bounded = name == LEVEL
            keys[name] = Cardinality.BOUNDED if bounded else Cardinality.HIGH
    if section.rank_prefix != "none":
        keys[presets.RANK_PREFIXES[section.rank_prefix].rank_key] = Cardinality.HIGH
    for kind in section.extract:
        pattern = (
            presets.exception_pattern("") if kind == "python-exception" else presets.ERRORS[kind]
        )
        for name in group_names(pattern):
            bounded = name in presets.BOUNDED_EXTRACTED
            keys[name] = Cardinality.BOUNDED if bounded else Cardinality.HIGH
    return keys


def _check(service: ServiceBlueprint, section: LogsSection) -> list[Diagnostic]:
    problems: list[Diagnostic] = []
    if section.record_start is not None:
        found = check_pattern(section.record_start, what="logs.record_start")
        for p in found:
            problems.append(_diag(service, "invalid-regex", p.message, p.hint, "record_start"))
        if not found:
            body = section.record_start
            if body.startswith("(?") and ")" in body:
                flags = body[2 : body.index(")")]
                if flags.isalpha():
                    body = body[body.index(")") + 1 :]
            if not body.startswith(("^", r"\A")):
                problems.append(
                    _diag(
                        service,
                        "unanchored-record-start",
                        "logs.record_start is not anchored with ^: multiline applies it with "
                        "an unanchored search, so text in the middle of a line (a date in a "
                        "message) would start a new record",
                        f"write it as '^{section.record_start}'",
                        "record_start",
                    )
                )
            for name in group_names(section.record_start):
                if not valid_label_name(name) or name in RESERVED:
                    problems.append(
                        _diag(
                            service,
                            "invalid-label-name",
                            f"logs.record_start: group name {name!r} cannot be a Loki label "
                            "or structured metadata key",
                            "use letters, digits and '_' not starting with '__', and not "
                            f"{', '.join(sorted(RESERVED))}",
                            "record_start",
                        )
                    )
    for index, rule in enumerate(section.drop):
        for p in check_pattern(
            rule.expression, what=f"logs.drop[{index}].expression", need_named_groups=False
        ):
            problems.append(
                _diag(service, "invalid-regex", p.message, p.hint, "drop", index, "expression")
            )
    for where, names in (
        ("static_labels", tuple(section.static_labels)),
        ("incoming_labels", tuple(section.incoming_labels)),
        ("drop_labels", section.drop_labels),
    ):
        for index, name in enumerate(names):
            path: tuple[str | int, ...] = (
                (where, name) if where != "drop_labels" else (where, index)
            )
            if not valid_label_name(name):
                problems.append(
                    _diag(
                        service,
                        "invalid-label-name",
                        f"logs.{where}: {name!r} is not a valid Loki label name",
                        "label names match [a-zA-Z_][a-zA-Z0-9_]* and must not start with "
                        f"'__'; e.g. {classic_name(name).lstrip('_') or 'my_label'!r}",
                        *path,
                    )
                )
    for name in sorted(set(section.static_labels) & RESERVED):
        problems.append(
            _diag(
                service,
                "reserved-label",
                f"logs.static_labels: {name!r} is set by the logs pack",
                "remove it; business_sla_id comes from the service's sla_id and "
                "service_name from its name",
                "static_labels",
                name,
            )
        )
    for label, key in sorted(section.incoming_labels.items()):
        if canonical_for_spelling(key) is None:
            problems.append(
                _diag(
                    service,
                    "unknown-key",
                    f"logs.incoming_labels: {key!r} (for label {label!r}) is not a canonical key",
                    "use a canonical key such as k8s.pod.name, k8s.namespace.name, "
                    "k8s.container.name or host.name",
                    "incoming_labels",
                    label,
                )
            )
    if problems:
        return problems
    extracted = _extracted_keys(section)
    incoming = {
        classic_name(key): (label, canonical_for_spelling(key))
        for label, key in section.incoming_labels.items()
    }
    for index, wanted in enumerate(section.stream_labels):
        canon = canonical_for_spelling(wanted)
        name = canon.classic if canon else wanted
        cardinality: Cardinality | None = None
        if canon is not None:
            cardinality = canon.cardinality
        elif wanted in extracted:
            cardinality = extracted[wanted]
        elif wanted in section.incoming_labels:
            inner = canonical_for_spelling(section.incoming_labels[wanted])
            cardinality = inner.cardinality if inner else None
            name = inner.classic if inner else wanted
        if cardinality is Cardinality.HIGH:
            problems.append(
                _diag(
                    service,
                    "high-cardinality-label",
                    f"logs.stream_labels: {wanted!r} has one value per GPU, rank, pod or "
                    "error and must not be a Loki stream label",
                    "it is stored as structured metadata already; filter on it with "
                    f'`{{{SLA_LABEL}="..."}} | {name}="..."`',
                    "stream_labels",
                    index,
                )
            )
        elif cardinality is None or (
            canon is not None and name not in incoming and name != SLA_LABEL
        ):
            known = sorted(
                {
                    *(k for k, c in extracted.items() if c is Cardinality.BOUNDED),
                    *(
                        k
                        for k, (_, c) in incoming.items()
                        if c and c.cardinality is Cardinality.BOUNDED
                    ),
                }
            )
            problems.append(
                _diag(
                    service,
                    "unknown-key",
                    f"logs.stream_labels: nothing in this pipeline produces {wanted!r}",
                    "bounded keys available: "
                    + ", ".join(known or ["none"])
                    + "; map an agent label to it in incoming_labels first",
                    "stream_labels",
                    index,
                )
            )
        elif not valid_label_name(name):
            problems.append(
                _diag(
                    service,
                    "invalid-label-name",
                    f"logs.stream_labels: {wanted!r} is not a valid Loki label name",
                    "label names match [a-zA-Z_][a-zA-Z0-9_]*",
                    "stream_labels",
                    index,
                )
            )
    if problems:
        return problems
    labels = final_stream_labels(section)
    if len(labels) > MAX_LABELS:
        problems.append(
            _diag(
                service,
                "too-many-labels",
                f"the pipeline gives each stream {len(labels)} labels ({', '.join(labels)}); "
                f"Loki rejects more than {MAX_LABELS} by default",
                "drop some with drop_labels, or move them to structured metadata",
                "static_labels",
            )
        )
    return problems


def _incoming_split(section: LogsSection) -> tuple[dict[str, str], dict[str, str]]:
    """(bounded canonical label -> incoming label, high canonical key -> incoming label)."""
    bounded: dict[str, str] = {}
    high: dict[str, str] = {}
    for label, key in sorted(section.incoming_labels.items()):
        if label in section.drop_labels:
            continue
        canon = canonical_for_spelling(key)
        if canon is None:
            continue
        target = bounded if canon.cardinality is Cardinality.BOUNDED else high
        target[canon.classic] = label
    return bounded, high


def final_stream_labels(section: LogsSection) -> tuple[str, ...]:
    bounded, _ = _incoming_split(section)
    labels = {SLA_LABEL, SERVICE_LABEL, *section.static_labels, *bounded}
    if section.runtime != "none":
        labels.add(RUNTIME_STREAM)
    if section.format != "custom" or (
        section.record_start and LEVEL in group_names(section.record_start)
    ):
        labels.add(LEVEL)
    labels.update(_resolve(section, wanted) for wanted in section.stream_labels)
    return tuple(sorted(labels - set(section.drop_labels)))


def _resolve(section: LogsSection, wanted: str) -> str:
    """The label name a stream_labels entry stands for: a canonical key's spelling, the
    canonical spelling of an agent label, or an extracted key as it is."""
    canon = canonical_for_spelling(wanted)
    if canon is None and wanted in section.incoming_labels:
        canon = canonical_for_spelling(section.incoming_labels[wanted])
    return canon.classic if canon is not None else wanted


def _firstline(section: LogsSection) -> str:
    rank = presets.RANK_PREFIXES.get(section.rank_prefix)
    if section.format == "custom":
        # The user's pattern is taken as written: it must allow for any prefix itself.
        assert section.record_start is not None
        return section.record_start
    starts = "|".join((presets.FORMATS[section.format].record_start, *presets.PYTORCH_STARTS))
    if rank is not None and rank.on_every_line:
        return f"^{rank.prefix}(?:{starts})"
    return f"^(?:{starts})"


def build_stages(section: LogsSection, sla_id: str, name: str) -> tuple[LogStage, ...]:
    rank = presets.RANK_PREFIXES.get(section.rank_prefix)
    every_line_prefix = rank.prefix if rank is not None and rank.on_every_line else ""
    stages: list[LogStage] = []
    if section.runtime != "none":
        stages.append(
            RuntimeStage(
                role="runtime",
                format=section.runtime,
                why="strips the runtime's own timestamp so firstline sees what the app wrote",
            )
        )
    if rank is not None:
        stages.append(
            RegexStage(
                role="rank-separation",
                expression=rank.separation,
                why="reads the rank from the line prefix",
            )
        )
        stages.append(
            LabelsStage(
                role="rank-separation",
                values={RANK_LABEL: rank.rank_key},
                why="a temporary per-rank stream, so multiline never joins lines of two ranks",
            )
        )
    stages.append(
        MultilineStage(
            role="multiline",
            firstline=_firstline(section),
            max_lines=section.max_lines,
            max_wait_time=section.max_wait_time,
            why="joins tracebacks to the record they belong to; firstline matches the start "
            "of every record, never error text",
        )
    )
    opt_prefix = f"(?:{every_line_prefix})?" if every_line_prefix else ""
    if section.format == "custom":
        assert section.record_start is not None
        if group_names(section.record_start):
            stages.append(
                RegexStage(
                    role="extract",
                    expression=section.record_start,
                    why="the named groups of the record start",
                )
            )
    elif section.format == "json":
        source: str | None = None
        if every_line_prefix:
            stages.append(
                RegexStage(
                    role="extract",
                    expression=f"^{opt_prefix}(?P<{JSON_PAYLOAD}>\\{{[^\\n]*)",
                    why="the JSON object after the rank prefix",
                )
            )
            source = JSON_PAYLOAD
        stages.append(
            JsonStage(
                role="extract",
                expressions={LEVEL: presets.JSON_LEVEL},
                source=source,
                why="the level, whichever key the JSON logger uses",
            )
        )
    else:
        level = presets.FORMATS[section.format].level
        assert level is not None
        stages.append(
            RegexStage(
                role="extract",
                expression=f"^{opt_prefix}{level}",
                why="the level of the record's first line",
            )
        )
    any_prefix = rank.prefix if rank is not None else ""
    for kind in section.extract:
        if kind == "python-exception":
            expression = presets.exception_pattern(any_prefix)
            why = "the class of the exception finally raised in the record's traceback"
        else:
            expression = presets.ERRORS[kind]
            why = f"details of {presets.ERROR_TEXT[kind]!r} records"
        stages.append(RegexStage(role="extract", expression=expression, why=why))

    bounded, high = _incoming_split(section)
    stages.append(
        StaticLabelsStage(
            role="labels",
            values={
                SLA_LABEL: sla_id,
                SERVICE_LABEL: name,
                **dict(sorted(section.static_labels.items())),
            },
            why="the storage rule: every service's logs are partitioned by business_sla_id",
        )
    )
    label_values: dict[str, str] = {}
    extracted = _extracted_keys(section)
    if LEVEL in extracted:
        label_values[LEVEL] = LEVEL
    for wanted in section.stream_labels:
        canon = canonical_for_spelling(wanted)
        if canon is None and wanted in extracted:
            label_values[wanted] = wanted
    label_values.update(bounded)
    stages.append(
        LabelsStage(
            role="labels",
            values=dict(sorted(label_values.items())),
            why="bounded keys only: level and canonical spellings of bounded agent labels",
        )
    )
    dropped = sorted(
        {
            *(label for canonical, label in bounded.items() if canonical != label),
            *high.values(),
            *section.drop_labels,
            *([RANK_LABEL] if rank is not None else []),
        }
    )
    if dropped:
        stages.append(
            LabelDropStage(
                role="labels",
                names=tuple(dropped),
                why="renamed, high-cardinality and temporary labels leave the stream",
            )
        )
    # Every extracted detail that did not become a label is kept as metadata.
    metadata = {key: key for key in extracted if key not in label_values}
    metadata.update(high)
    if metadata:
        stages.append(
            StructuredMetadataStage(
                role="structured-metadata",
                values=dict(sorted(metadata.items())),
                why="rank, pod and error details stay queryable without creating streams",
            )
        )
    for rule in section.drop:
        stages.append(
            DropStage(
                role="drop",
                expression=rule.expression,
                reason=rule.reason,
                why="records the service does not want stored",
            )
        )
    if section.rate_limit is not None:
        stages.append(
            LimitStage(
                role="limit",
                rate=section.rate_limit.rate,
                burst=section.rate_limit.burst,
                drop=section.rate_limit.drop,
                why="protects Loki from a crash loop's log flood",
            )
        )
    return tuple(stages)


def build_pipeline(service: ServiceBlueprint, section: LogsSection) -> LogPipeline:
    sla_id = service.service.sla_id
    stages = build_stages(section, sla_id, service.name)
    metadata: set[str] = set()
    for stage in stages:
        if isinstance(stage, StructuredMetadataStage):
            metadata.update(stage.values)
    return LogPipeline(
        service=service.name,
        sla_id=sla_id,
        pack=PACK,
        stages=stages,
        incoming_labels=tuple(sorted(section.incoming_labels)),
        stream_labels=final_stream_labels(section),
        structured_metadata=tuple(sorted(metadata)),
        alerts=_alerts(service, section),
        source=service.source,
    )


def selector(sla_id: str, **extra: str) -> str:
    matchers = [f"{SLA_LABEL}={logql_string(sla_id)}"]
    matchers += [f"{k}={logql_string(v)}" for k, v in sorted(extra.items())]
    return "{" + ", ".join(matchers) + "}"


def line_filter(text: str) -> str:
    return f"|= {logql_string(text)}"


def _alerts(service: ServiceBlueprint, section: LogsSection) -> tuple[AlertRule, ...]:
    svc = service.service
    sel = selector(svc.sla_id)
    by = f"sum by ({SLA_LABEL})"
    common = {"team": svc.team}
    alerts: list[AlertRule] = []
    if "cuda-oom" in section.extract:
        alerts.append(
            AlertRule(
                alert="CudaOutOfMemoryBurst",
                expr=f"{by} (count_over_time({sel} {line_filter(presets.ERROR_TEXT['cuda-oom'])} "
                f"[5m])) > {section.oom_burst_threshold}",
                labels={**common, "severity": "warning"},
                annotations={
                    "summary": f"CUDA out-of-memory errors in {svc.name} "
                    f"({{{{ $labels.{SLA_LABEL} }}}})",
                    "description": f"More than {section.oom_burst_threshold} CUDA OOM records "
                    "in 5 minutes; a batch size, sequence length or memory fragmentation "
                    "change is likely. Each traceback counts once (multiline joins it).",
                    "runbook_url": conventions.runbook_url(
                        svc.runbook_base_url, "CudaOutOfMemoryBurst"
                    ),
                },
            )
        )
    if "nccl-timeout" in section.extract:
        alerts.append(
            AlertRule(
                alert="NcclWatchdogTimeout",
                expr=f"{by} (count_over_time({sel} "
                f"{line_filter(presets.ERROR_TEXT['nccl-timeout'])} [10m])) > 0",
                labels={**common, "severity": "critical"},
                annotations={
                    "summary": f"NCCL collective timed out in {svc.name} "
                    f"({{{{ $labels.{SLA_LABEL} }}}})",
                    "description": "The c10d watchdog caught a collective that ran past its "
                    "timeout; the job is hung or about to be torn down. The record's "
                    "structured metadata names the rank and operation.",
                    "runbook_url": conventions.runbook_url(
                        svc.runbook_base_url, "NcclWatchdogTimeout"
                    ),
                },
            )
        )
    return tuple(alerts)


def _dashboard_row(service: ServiceBlueprint, section: LogsSection) -> DashboardRow:
    sla = service.service.sla_id
    sel = selector(sla)
    panels = [
        Panel(
            key="logs-records",
            title="Log records",
            kind="logs",
            unit="none",
            description="Whole records: a traceback is one entry. Rank, pod and exception "
            "class are structured metadata.",
            queries=(PanelQuery(expr=sel, datasource="loki"),),
            width=24,
            height=12,
        ),
        Panel(
            key="logs-error-records",
            title="Error records by level",
            kind="timeseries",
            unit="short",
            description="ERROR and CRITICAL records per 5 minutes.",
            queries=(
                PanelQuery(
                    expr=f"sum by ({LEVEL}) (count_over_time("
                    f'{{{SLA_LABEL}={logql_string(sla)}, {LEVEL}=~"ERROR|CRITICAL"}} [5m]))',
                    legend=f"{{{{{LEVEL}}}}}",
                    datasource="loki",
                ),
            ),
        ),
    ]
    kinds = [k for k in section.extract if k != "python-exception"]
    if kinds:
        panels.append(
            Panel(
                key="logs-gpu-errors",
                title="GPU and NCCL error records",
                kind="timeseries",
                unit="short",
                description="Records per 5 minutes that carry each error.",
                queries=tuple(
                    PanelQuery(
                        expr=f"sum(count_over_time({sel} {line_filter(presets.ERROR_TEXT[k])} "
                        "[5m]))",
                        legend=k,
                        datasource="loki",
                        ref_id=chr(ord("A") + i),
                    )
                    for i, k in enumerate(kinds)
                ),
            )
        )
    if "python-exception" in section.extract:
        panels.append(
            Panel(
                key="logs-exceptions",
                title="Exceptions by class",
                kind="timeseries",
                unit="short",
                description="Records with a traceback per 5 minutes, by the exception "
                "finally raised.",
                queries=(
                    PanelQuery(
                        expr=f"sum by (exception_class) (count_over_time({sel} | "
                        f'exception_class != "" [5m]))',
                        legend="{{exception_class}}",
                        datasource="loki",
                    ),
                ),
            )
        )
    return DashboardRow(
        service=service.name, layer="logs", title="Logs (Loki)", pack=PACK, panels=tuple(panels)
    )
