"""Syntax as a given Prometheus release accepts it.

promql-parser follows the newest PromQL (Prometheus 3 UTF-8 names, ``limitk``,
``sort_by_label``, ``mad_over_time``...), so it accepts expressions an older
Prometheus rejects. This module parses once with promql-parser, then walks the tree
and rejects what the target release (``prometheus_min_version``, 2.42 by default) would
not load, so ``obs-iac lint`` never passes a rule ``promtool check rules`` fails.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from obs_iac.promql import PromQLSyntaxError, children, parse
from obs_iac.promql.tokens import diagnose, parser_compatible, version_problem

# Every function Prometheus 2.42 knows (read off `promtool check rules` 2.42 itself).
FUNCTIONS_2_42 = frozenset(
    [
        "abs",
        "absent",
        "absent_over_time",
        "acos",
        "acosh",
        "asin",
        "asinh",
        "atan",
        "atanh",
        "avg_over_time",
        "ceil",
        "changes",
        "clamp",
        "clamp_max",
        "clamp_min",
        "cos",
        "cosh",
        "count_over_time",
        "days_in_month",
        "day_of_month",
        "day_of_week",
        "day_of_year",
        "deg",
        "delta",
        "deriv",
        "exp",
        "floor",
        "histogram_count",
        "histogram_sum",
        "histogram_fraction",
        "histogram_quantile",
        "holt_winters",
        "hour",
        "idelta",
        "increase",
        "irate",
        "label_replace",
        "label_join",
        "last_over_time",
        "ln",
        "log10",
        "log2",
        "max_over_time",
        "min_over_time",
        "minute",
        "month",
        "pi",
        "predict_linear",
        "present_over_time",
        "quantile_over_time",
        "rad",
        "rate",
        "resets",
        "round",
        "scalar",
        "sgn",
        "sin",
        "sinh",
        "sort",
        "sort_desc",
        "sqrt",
        "stddev_over_time",
        "stdvar_over_time",
        "sum_over_time",
        "tan",
        "tanh",
        "time",
        "timestamp",
        "vector",
        "year",
    ]
)
# Stable functions added later, with the release that added them.
FUNCTIONS_LATER: dict[str, tuple[int, int]] = {
    "histogram_stddev": (2, 50),
    "histogram_stdvar": (2, 50),
    "histogram_avg": (2, 51),
}
# Prometheus 3.0 renamed holt_winters (and put the new name behind a feature flag).
REMOVED: dict[str, tuple[int, int]] = {"holt_winters": (3, 0)}
AGGREGATIONS_2_42 = frozenset(
    [
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
    ]
)
_CLASSIC_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_CLASSIC_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _version(text: str) -> tuple[int, int]:
    parts = [int(p) for p in re.findall(r"\d+", text)[:2]]
    return (parts[0], parts[1] if len(parts) > 1 else 0)


def _check_node(node: Any, version: tuple[int, int]) -> str | None:
    kind = type(node).__name__
    utf8 = version >= (3, 0)
    if kind == "Call":
        name = str(node.func.name)
        if name in REMOVED and version >= REMOVED[name]:
            return f"function {name!r} was removed in Prometheus {REMOVED[name][0]}.0"
        known = name in FUNCTIONS_2_42 or version >= FUNCTIONS_LATER.get(name, (99, 0))
        if not known:
            return (
                f"unknown function with name {name!r} in Prometheus "
                f"{version[0]}.{version[1]} (newer release or experimental feature flag)"
            )
    elif kind == "AggregateExpr":
        op = str(node.op)
        if op not in AGGREGATIONS_2_42:
            return f"aggregation {op!r} needs a newer Prometheus or an experimental flag"
        if node.modifier is not None and not utf8:
            for label in node.modifier.labels:
                if not _CLASSIC_LABEL.fullmatch(label):
                    return f"label name {label!r} needs Prometheus 3 UTF-8 names"
    elif kind == "VectorSelector":
        if getattr(node.matchers, "or_matchers", None):
            return "`or` inside a selector needs a newer Prometheus"
        if not utf8:
            if node.name and not _CLASSIC_METRIC.fullmatch(node.name):
                return f"metric name {node.name!r} needs Prometheus 3 UTF-8 names"
            for m in node.matchers.matchers:
                if not _CLASSIC_LABEL.fullmatch(m.name):
                    return f"label name {m.name!r} needs Prometheus 3 UTF-8 names"
    elif kind == "BinaryExpr" and node.modifier is not None:
        mod = node.modifier
        fill = getattr(mod, "fill_values", None)
        if fill is not None and (fill.lhs is not None or fill.rhs is not None):
            return "fill modifiers need a newer Prometheus"
        names = list(mod.matching.labels) if mod.matching is not None else []
        names += list(getattr(mod, "group_labels", None) or [])
        if not utf8:
            for label in names:
                if not _CLASSIC_LABEL.fullmatch(label):
                    return f"label name {label!r} needs Prometheus 3 UTF-8 names"
    return None


@lru_cache(maxsize=65536)
def syntax_error(expr: str, min_version: str = "2.42") -> str | None:
    """Why ``expr`` would not load in Prometheus ``min_version``, or None if it would."""
    if not expr.strip():
        return "the expression is empty"
    try:
        tree = parse(expr)
    except PromQLSyntaxError as exc:
        try:
            tree = parse(parser_compatible(expr))
        except PromQLSyntaxError:
            reason = str(exc)
            if reason.strip() == "invalid promql query":
                # promql-parser gives no position here; promtool would: find one.
                return diagnose(expr) or reason
            return reason
    version = _version(min_version)
    problem = version_problem(expr, version)
    if problem:
        return problem
    stack = [tree]
    while stack:
        node = stack.pop()
        problem = _check_node(node, version)
        if problem:
            return problem
        stack.extend(children(node))
    return None
