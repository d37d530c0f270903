"""The one place promql-parser is imported: parsing, walking and metric extraction."""

from __future__ import annotations

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


@lru_cache(maxsize=65536)
def referenced_metrics(expr: str) -> frozenset[str]:
    names = set()
    for sel in selectors(parse(expr)):
        name = selector_metric(sel)
        if name:
            names.add(name)
    return frozenset(names)
