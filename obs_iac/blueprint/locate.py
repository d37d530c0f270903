"""Maps a validation error's field path back to the line of the blueprint that wrote it."""

from __future__ import annotations

import ast
from collections.abc import Sequence


def find_call(tree: ast.AST, line: int) -> ast.Call | None:
    """The outermost call that starts on ``line`` (where a registration or model was made)."""
    best: ast.Call | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or line):
            if best is None or (node.lineno, -(node.end_lineno or 0)) > (
                best.lineno,
                -(best.end_lineno or 0),
            ):
                best = node
    return best


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
        elif isinstance(current, (ast.List, ast.Tuple)) and isinstance(part, int):
            if 0 <= part < len(current.elts):
                nxt = current.elts[part]
        if nxt is None:
            break
        current = nxt
    return getattr(current, "lineno", 0), getattr(current, "col_offset", -1) + 1
