"""The one place promql-parser is imported: parsing, walking and metric extraction."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import promql_parser


class PromQLSyntaxError(ValueError):
    pass


def _register_removed_functions() -> None:
    """promql-parser follows Prometheus 3, which renamed holt_winters; 2.x rules use it."""
    vt = promql_parser.ValueType
    promql_parser.register_extra_functions(
        [
            promql_parser.Function(
                name="holt_winters",
                arg_types=[vt.Matrix, vt.Scalar, vt.Scalar],
                variadic=0,
                return_type=vt.Vector,
            )
        ]
    )


_register_removed_functions()


@lru_cache(maxsize=65536)
def parse(expr: str) -> Any:
    try:
        return promql_parser.parse(expr)
    except (ValueError, RuntimeError) as exc:
        raise PromQLSyntaxError(str(exc)) from None


def children(node: Any) -> list[Any]:
    kind = type(node).__name__
    if kind == "BinaryExpr":
        return [node.lhs, node.rhs]
    if kind in ("AggregateExpr",):
        return [node.expr] + ([node.param] if node.param is not None else [])
    if kind == "Call":
        return list(node.args)
    if kind in ("ParenExpr", "UnaryExpr", "SubqueryExpr"):
        return [node.expr]
    if kind == "MatrixSelector":
        return [node.vector_selector] if hasattr(node, "vector_selector") else []
    return []


def selectors(node: Any) -> list[Any]:
    """Every VectorSelector in the expression, in source order."""
    out: list[Any] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if type(current).__name__ == "VectorSelector":
            out.append(current)
        stack.extend(reversed(children(current)))
    return out


def selector_metric(selector: Any) -> str | None:
    if selector.name:
        return str(selector.name)
    for matcher in selector.matchers.matchers:
        if matcher.name == "__name__" and str(matcher.op) in ("MatchOp.Equal", "="):
            return str(matcher.value)
    return None


# A fleet's expressions differ mostly in the values of their equality matchers (each
# service's own business_sla_id="..."). Such a value decides neither which metrics an
# expression reads nor whether it parses, so expressions that differ only there share
# one parse. Only where that is certain: no escapes, no other kinds of string, no
# comments (so every '"' opens or closes a string), a value of plain characters (never
# empty, as a selector needs one matcher that rejects ""), after `label=` or `label!=`,
# never `__name__`.
_SHAPE_UNSURE = re.compile(r"['`#\\]")
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.:-]+")
_LABEL_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"
_PLACEHOLDER = "_"


def expression_shape(expr: str) -> str:
    """``expr`` with the values of its label equality matchers replaced by one placeholder,
    where that provably changes neither its validity nor the metrics it references."""
    if '"' not in expr or _SHAPE_UNSURE.search(expr):
        return expr
    parts = expr.split('"')
    if len(parts) % 2 == 0:
        return expr  # an unterminated string: let the parser report it
    for i in range(1, len(parts), 2):
        if not _PLAIN_VALUE.fullmatch(parts[i]):
            continue
        if _equality_label(parts[i - 1]) not in (None, "__name__"):
            parts[i] = _PLACEHOLDER
    return '"'.join(parts)


def _equality_label(code: str) -> str | None:
    """The label name if ``code`` ends in `label=` or `label!=` (spaces allowed around the
    operator); not `==`, `<=`, `>=`, nor a name glued to a metric name or number."""
    code = code.rstrip()
    if not code.endswith("="):
        return None
    code = code[:-1]
    if code.endswith("!"):
        code = code[:-1]
    code = code.rstrip()
    before = code.rstrip(_LABEL_CHARS)
    label = code[len(before) :]
    if not label or label[0].isdigit() or before.endswith(":"):
        return None
    return label


@lru_cache(maxsize=65536)
def referenced_metrics(expr: str) -> frozenset[str]:
    shape = expression_shape(expr)
    if shape != expr:
        try:
            return _referenced_metrics(shape)
        except PromQLSyntaxError:
            pass  # the same shape fails the same way; raise with the expression's own text
    return _referenced_metrics(expr)


@lru_cache(maxsize=65536)
def _referenced_metrics(expr: str) -> frozenset[str]:
    names = set()
    for sel in selectors(parse(expr)):
        name = selector_metric(sel)
        if name:
            names.add(name)
    return frozenset(names)
