"""Whether two expressions can ever produce the same output series.

promtool's `duplicate-rules` lint (cmd/promtool/main.go, checkDuplicates, v2.42 and
v3.x) compares only a rule's name and its `labels:`, and merely warns. Two recording
rules of one name are fine when every series they write differs in a label value: the
kube-prometheus `code_verb:apiserver_request_total:increase1h` rules select
`code=~"2.."`, `code=~"3.."`, ... and keep `code` in `sum by (..., code, ...)`.
This module finds such a label: kept in both outputs, and pinned by every selector of
each side to values the other side cannot take.
"""

from __future__ import annotations

import re

from obs_iac.promql import PromQLSyntaxError, parse, selectors
from obs_iac.promql.labelflow import match_op

_REGEX_META = re.compile(r"[.^$*+?()\[\]{}|\\]")


def _pins(expr: str) -> dict[str, tuple[str, str]]:
    """label -> (op, value) where every selector of the expression pins the label alike."""
    try:
        found = selectors(parse(expr))
    except PromQLSyntaxError:
        return {}
    pins: dict[str, tuple[str, str]] = {}
    conflicting: set[str] = set()
    for index, selector in enumerate(found):
        here = {
            m.name: (match_op(m), str(m.value))
            for m in selector.matchers.matchers
            if match_op(m) in ("=", "=~") and m.name != "__name__"
        }
        if index == 0:
            pins = dict(here)
            continue
        for label in list(pins):
            if here.get(label) != pins[label]:
                conflicting.add(label)
    return {k: v for k, v in pins.items() if k not in conflicting}


def _literal_prefix(regex: str) -> str:
    """The characters every match starts with (Prometheus anchors regexes fully)."""
    meta = _REGEX_META.search(regex)
    prefix = regex if meta is None else regex[: meta.start()]
    if meta is not None and meta.group() in "*?{" and prefix:
        prefix = prefix[:-1]  # the last literal may repeat zero times
    return prefix


def _fullmatch(regex: str, value: str) -> bool | None:
    try:
        return re.fullmatch(regex, value) is not None
    except re.error:
        return None


def _disjoint(a: tuple[str, str], b: tuple[str, str]) -> bool:
    (op_a, val_a), (op_b, val_b) = a, b
    if op_a == op_b == "=":
        return val_a != val_b
    if op_a == "=" or op_b == "=":
        literal, regex = (val_a, val_b) if op_a == "=" else (val_b, val_a)
        return _fullmatch(regex, literal) is False
    if "|" in val_a or "|" in val_b:
        return False  # an alternation may start anywhere: no cheap proof
    pa, pb = _literal_prefix(val_a), _literal_prefix(val_b)
    common = min(len(pa), len(pb))
    return common > 0 and pa[:common] != pb[:common]


def outputs_disjoint(
    expr_a: str, labels_a: frozenset[str] | None, expr_b: str, labels_b: frozenset[str] | None
) -> bool:
    """True only when no series of one expression can share its labels with the other's.

    ``labels_*`` are the label-flow output sets (None: open, the selectors' labels kept)."""
    pins_a, pins_b = _pins(expr_a), _pins(expr_b)
    for label in sorted(pins_a.keys() & pins_b.keys()):
        kept = all(out is None or label in out for out in (labels_a, labels_b))
        if kept and _disjoint(pins_a[label], pins_b[label]):
            return True
    return False
