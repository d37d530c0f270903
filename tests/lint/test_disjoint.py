"""Disjoint outputs: when two same-name records cannot write the same series."""

from __future__ import annotations

import pytest

from obs_iac.promql.disjoint import outputs_disjoint
from obs_iac.promql.labelflow import analyze


def disjoint(a: str, b: str) -> bool:
    return outputs_disjoint(a, analyze(a, {}).labels, b, analyze(b, {}).labels)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ('sum by (code) (x{code=~"2.."})', 'sum by (code) (x{code=~"5.."})', True),
        ('x{code="200"}', 'x{code="500"}', True),
        ('x{code="200"}', 'x{code=~"5.."}', True),
        # The label is aggregated away: both write one series without it.
        ('sum(x{code="200"})', 'sum(x{code="500"})', False),
        # Overlapping regexes, alternations and unpinned labels prove nothing.
        ('x{code=~"2.*"}', 'x{code=~"20."}', False),
        ('x{code=~"2..|5.."}', 'x{code=~"5.."}', False),
        ('x{code="200"}', "x", False),
        ('x{code="200"} / y{code="500"}', 'x{code="500"}', False),
    ],
)
def test_outputs_disjoint(a: str, b: str, expected: bool) -> None:
    assert disjoint(a, b) is expected
    assert disjoint(b, a) is expected
