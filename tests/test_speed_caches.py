"""The memos that make a large fleet fast must give exactly what the uncached code gives."""

from __future__ import annotations

import pytest

from obs_iac.labels import promql_string
from obs_iac.packs.slo import slice_tests
from obs_iac.packs.slo.slice_tests import Source, timeline
from obs_iac.promql import (
    PromQLSyntaxError,
    _referenced_metrics,
    expression_shape,
    referenced_metrics,
)


def test_timeline_memo_is_keyed_on_every_argument() -> None:
    uncached = slice_tests.timeline.__wrapped__
    base = (0.0672, 3600, 300, 0, Source(max_age=900))
    variants = [
        base,
        (0.028, 3600, 300, 0, Source(max_age=900)),
        (0.0672, 21600, 300, 0, Source(max_age=900)),
        (0.0672, 3600, 120, 0, Source(max_age=900)),
        (0.0672, 3600, 300, 120, Source(max_age=900)),
        (0.0672, 3600, 300, 0, Source(max_age=3600)),
        (0.0672, 3600, 300, 0, Source(rate_window=300)),
    ]
    results = [timeline(*args) for args in variants]
    assert results == [uncached(*args) for args in variants]
    # Each argument changes the answer, so a key that dropped one would be caught.
    assert len(set(results)) == len(variants)
    assert timeline(*base) is timeline(*base)


@pytest.mark.parametrize(
    "expr",
    [
        'foo{a="x"} and on() bar{b!="y"}',
        'sum by (a) (foo{a="x"}) / on(a) group_left() bar{c="x"}',
        '{__name__="bar", a="x"}',
        'foo{a=~"x|y"}',
        'foo{a = "x", b != "y"}',
        'rate(foo{a="x.y:z-1"}[5m]) > 0.5',
    ],
)
def test_shapes_read_the_metrics_of_the_expression(expr: str) -> None:
    uncached = _referenced_metrics.__wrapped__  # parses the expression as written
    other = expr.replace('"x', '"other_x')
    assert referenced_metrics(expr) == uncached(expr)
    assert referenced_metrics(other) == uncached(other)


def test_shape_only_abstracts_equality_matcher_values() -> None:
    assert expression_shape('m{a="x", b!="y"}') == 'm{a="_", b!="_"}'
    # Values that decide the metric, the parse or the regex stay as written.
    for kept in (
        '{__name__="m", a="_"}',
        'm{a=~"x"}',
        'm{a!~"x"}',
        'm{a=""}',
        'label_replace(m, "dst", "$1", "src", "(.*)")',
        'm{a="x\\"y"}',
        "m{a='x'}",
        'm{a="x y"}',
        'm == "x"',
    ):
        assert expression_shape(kept) == kept


@pytest.mark.parametrize(
    "expr",
    [
        '{job!="ok"} > 1',  # no matcher rejects "": invalid whatever the value
        'up{job="some_value"} > > 1',
        'up{job="some_value", le="0.5"}[5m] + 1',
    ],
)
def test_an_invalid_expression_raises_its_own_error(expr: str) -> None:
    assert referenced_metrics('up{job="ok"} > 1') == frozenset({"up"})
    with pytest.raises(PromQLSyntaxError) as expected:
        _referenced_metrics.__wrapped__(expr)
    with pytest.raises(PromQLSyntaxError) as got:
        referenced_metrics(expr)
    assert str(got.value) == str(expected.value)


def test_promql_string_escapes_like_the_reference_loop() -> None:
    def reference(value: str) -> str:
        out = ['"']
        for char in value:
            if char in '\\"':
                out.append("\\" + char)
            elif char in "\n\r\t":
                out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
            elif ord(char) < 0x20 or ord(char) == 0x7F:
                out.append(f"\\x{ord(char):02x}")
            else:
                out.append(char)
        return "".join(out) + '"'

    every = "".join(map(chr, range(0x300))) + "\u2028é😀"
    assert promql_string(every) == reference(every)
    for char in every:
        assert promql_string(char) == reference(char)
