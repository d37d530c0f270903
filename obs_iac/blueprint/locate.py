"""Maps a validation error's field path back to the line of the blueprint that wrote it."""

from __future__ import annotations

import ast
from collections.abc import Sequence


def find_call(tree: ast.AST, line: int) -> ast.Call | None:
    """The call a registration or model construction on ``line`` came from: the
    outermost call starting on that line, else the innermost one spanning it."""
    starting: list[ast.Call] = []
    spanning: list[ast.Call] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        end = node.end_lineno or node.lineno
        if node.lineno == line:
            starting.append(node)
        elif node.lineno <= line <= end:
            spanning.append(node)

    def span(node: ast.Call) -> int:
        return (node.end_lineno or node.lineno) - node.lineno

    if starting:
        return max(starting, key=lambda n: (span(n), -n.col_offset))
    if spanning:
        return min(spanning, key=span)
    return None


def locate(node: ast.AST, path: Sequence[str | int]) -> tuple[int, int]:
    """Walks keyword arguments, dict keys, list items and nested constructor calls."""
    current: ast.AST = node
    for part in path:
        nxt: ast.AST | None = None
        if isinstance(current, ast.Call):
            for kw in current.keywords:
                if kw.arg == part:
                    nxt = kw.value
                    break
        elif isinstance(current, ast.Dict):
            for key, value in zip(current.keys, current.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == part:
                    nxt = value
                    break
        elif (
            isinstance(current, (ast.List, ast.Tuple))
            and isinstance(part, int)
            and 0 <= part < len(current.elts)
        ):
            nxt = current.elts[part]
        if nxt is None:
            break
        current = nxt
    return getattr(current, "lineno", 0), getattr(current, "col_offset", -1) + 1
