"""Turns the packs' literal per-service queries into dashboard queries driven by the
shared template variables, and finds which variables a dashboard really uses.

Packs write queries for one service, with the literal SLA matcher
(``business_sla_id="recomm_v2"``). The dashboard swaps that matcher for the
``$business_sla_id`` variable and, where the metric catalogue says the series carries
the label, adds the GPU and rank filters. Label-flow decides: a filter is only added to
a selector whose metric has the label, so no query ever filters on a label that cannot
be there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from obs_iac.labels import GPU_ID, PYTORCH_RANK, SLA_ID, LabelNaming
from obs_iac.plan.model import Plan
from obs_iac.promql import PromQLSyntaxError
from obs_iac.promql.labelflow import MetricFacts, analyze

# A selector: an optional metric name, then a brace block without nested braces.
_SELECTOR = re.compile(r"(?P<metric>[a-zA-Z_:][a-zA-Z0-9_:]*)?\{(?P<body>[^{}]*)\}")
# $name, ${name}, ${name:format} and the legacy [[name]].
VARIABLE_REF = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)\]\]")
# Variables Grafana itself defines.
BUILTIN_VARIABLES = frozenset(
    {
        "__interval",
        "__interval_ms",
        "__rate_interval",
        "__range",
        "__range_s",
        "__range_ms",
        "__from",
        "__to",
        "__dashboard",
        "__name",
        "__org",
        "__user",
        "__all",
        "__auto",
        "__timeFilter",
        "__url_time_range",
        "timeFilter",
    }
)


@dataclass(frozen=True)
class VariableNames:
    """The dashboard variable names, spelled like the labels they filter on."""

    sla: str
    gpu: str
    rank: str
    ds_prometheus: str = "ds_prometheus"
    ds_loki: str = "ds_loki"

    @classmethod
    def for_naming(cls, naming: LabelNaming) -> VariableNames:
        return cls(
            sla=LabelNaming.loki(SLA_ID),
            gpu=LabelNaming.loki(GPU_ID),
            rank=LabelNaming.loki(PYTORCH_RANK),
        )


def referenced_variables(text: str) -> set[str]:
    return {next(g for g in m.groups() if g) for m in VARIABLE_REF.finditer(text)}


def parametrise(
    expr: str,
    datasource: str,
    sla_id: str,
    plan: Plan,
    naming: LabelNaming,
    names: VariableNames,
) -> tuple[str, set[str]]:
    """The query with variables in place of the service's literal SLA matcher, and the
    label filters (GPU, rank) added where the selected series carry those labels.
    Returns the new expression and the metric names that received a GPU/rank filter."""
    literal = naming.matcher(SLA_ID, sla_id)
    variable = naming.matcher(SLA_ID, f"${names.sla}")
    filtered: set[str] = set()

    def swap(match: re.Match[str]) -> str:
        metric, body = match.group("metric") or "", match.group("body")
        if literal not in body:
            return match.group(0)
        parts = [variable if p.strip() == literal else p for p in _split_matchers(body)]
        spec = plan.metric(metric) if metric and datasource == "prometheus" else None
        if spec is not None:
            for key, var in ((GPU_ID, names.gpu), (PYTORCH_RANK, names.rank)):
                already = any(p.strip().startswith(naming.promql(key)) for p in parts)
                if naming.prom(key) in spec.labels and not already:
                    parts.append(naming.matcher(key, f"${var}", "=~"))
                    filtered.add(metric)
        return f"{metric}{{{', '.join(p.strip() for p in parts)}}}"

    return _SELECTOR.sub(swap, expr), filtered


def _split_matchers(body: str) -> list[str]:
    """Splits a selector body at top-level commas (commas inside strings stay)."""
    parts, current, quote, escaped = [], [], "", False
    for char in body:
        if escaped:
            current.append(char)
            escaped = False
            continue
        if char == "\\" and quote:
            escaped = True
            current.append(char)
            continue
        if char in "\"'`":
            quote = "" if quote == char else (quote or char)
        if char == "," and not quote:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    if "".join(current).strip():
        parts.append("".join(current))
    return parts


def used_variables(texts: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for text in texts:
        out |= referenced_variables(text)
    return out


def result_labels(plan: Plan, expr: str) -> frozenset[str] | None:
    """The labels every series of the query's result carries, by label flow over the
    plan's metric catalogue; None when a series the catalogue does not know makes the
    set open. ``__name__`` is never in it (the catalogue keeps it apart)."""
    catalogue = {
        spec.name: MetricFacts(spec.name, str(spec.type), spec.unit, frozenset(spec.labels))
        for name in _metric_names(expr)
        if (spec := plan.metric(name)) is not None
    }
    try:
        return analyze(expr, catalogue).labels
    except PromQLSyntaxError:
        return None


_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _metric_names(expr: str) -> set[str]:
    # Every identifier is a candidate; those the plan does not catalogue are skipped,
    # which keeps this a lookup per word instead of a catalogue of the whole fleet.
    return set(_NAME.findall(expr))
