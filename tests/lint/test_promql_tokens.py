"""Version-exact syntax from the tokens, and positioned reasons where promql-parser has
none. The 2.42 verdicts are promtool's own (tests/lint/corpus, test_promtool_agreement)."""

from __future__ import annotations

import pytest

from obs_iac.promql.compat import syntax_error


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("rate(x[300])", "number '300' used as a duration at column 8"),
        ("x offset 50", "number '50' used as a duration"),
        ("x[30:10]", "number '30' used as a duration"),
        ("x @ 5m", "duration '5m' used as an @ timestamp"),
        ("time() - t > 10m", "duration '10m' used as a number"),
        ('{"foo"}', 'quoted name "foo" at column 2'),
        ('sum by ("foo") (x)', "quoted metric and label names need Prometheus 3.0"),
        ("x * 1_000", "underscores in numbers need Prometheus 2.54"),
    ],
)
def test_written_forms_the_floor_rejects(expr: str, says: str) -> None:
    problem = syntax_error(expr, "2.42")
    assert problem is not None and says in problem, problem
    assert syntax_error(expr, "3.0") is None


@pytest.mark.parametrize(
    "expr",
    [
        "sum(anchored)",  # a keyword only in newer grammars, a name everywhere
        'x{smoothed="1"}',
        "max_over_time(deriv(rate(x[5m])[30m:1m])[1h:])",
        "x[5m] offset -1h @ 1609746000",
        'x{a="300", b=~"5m"}',  # numbers and durations inside strings are text
    ],
)
def test_valid_on_both_ends(expr: str) -> None:
    assert syntax_error(expr, "2.42") is None
    assert syntax_error(expr, "3.0") is None


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("up +", "ends after '+' at column 4"),
        ("sum(rate(x[5m])", "unclosed"),
        ("up{a='b}", "unterminated"),
    ],
)
def test_errors_carry_a_position(expr: str, says: str) -> None:
    problem = syntax_error(expr, "2.42")
    assert problem is not None and says in problem, problem
