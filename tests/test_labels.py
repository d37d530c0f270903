"""PromQL string literals and the naming strategies of the canonical label model."""

from __future__ import annotations

import random

import promql_parser
import pytest

from obs_iac import labels
from obs_iac.labels import LabelNaming, NamingStrategy, promql_string

TRICKY = [
    "",
    "plain",
    'quote"inside',
    "back\\slash",
    "trailing\\",
    '\\"',
    "new\nline",
    "cr\r\ttab",
    "\x00\x01\x1f\x7f",
    '"} or vector(1) or {a="',
    "' single",
    "`backtick`",
    "ünïcödé ✓ 😀 日本語",
    "\u2028\u2029",
    "{{ $labels.x }}",
    "\\x41 \\n literal escapes",
]


def _random_strings(count: int) -> list[str]:
    rng = random.Random(42)
    alphabet = [
        '"',
        "\\",
        "\n",
        "\r",
        "\t",
        "\x00",
        "\x7f",
        "a",
        "Z",
        "0",
        " ",
        "{",
        "}",
        "é",
        "😀",
        "'",
        "`",
    ]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(count)]


def _matcher_value(expr: str) -> tuple[str, str]:
    node = promql_parser.parse(expr)
    (matcher,) = node.matchers.matchers
    return str(matcher.name), str(matcher.value)


@pytest.mark.parametrize("value", TRICKY + _random_strings(400))
def test_promql_string_round_trips(value: str) -> None:
    # A metric name makes the empty string a legal value too.
    assert _matcher_value("m{a=" + promql_string(value) + "}") == ("a", value)


@pytest.mark.parametrize("value", TRICKY)
def test_a_value_cannot_change_the_expression(value: str) -> None:
    expr = "sum(m{a=" + promql_string(value) + "})"
    node = promql_parser.parse(expr)
    assert type(node).__name__ == "AggregateExpr"
    inner = node.expr
    assert type(inner).__name__ == "VectorSelector"
    assert inner.name == "m"
    assert [(m.name, m.value) for m in inner.matchers.matchers] == [("a", value)]


def test_classic_spellings() -> None:
    naming = LabelNaming()
    assert naming.strategy is NamingStrategy.CLASSIC
    expected = {
        "business.sla_id": "business_sla_id",
        "resource.gpu.id": "resource_gpu_id",
        "host.name": "host_name",
        "k8s.namespace.name": "k8s_namespace_name",
        "k8s.pod.name": "k8s_pod_name",
        "k8s.container.name": "k8s_container_name",
        "framework.pytorch.rank": "framework_pytorch_rank",
        "nccl.group_id": "nccl_group_id",
        "nccl.rank": "nccl_rank",
    }
    assert {k.key for k in labels.CANONICAL_KEYS} == set(expected)
    for key, name in expected.items():
        assert naming.prom(key) == name
        assert naming.promql(key) == name
        assert LabelNaming.loki(key) == name
        assert labels.KEYS_BY_NAME[key].classic == name
        assert labels.canonical_for_spelling(name) is labels.KEYS_BY_NAME[key]
    assert naming.matcher("resource.gpu.id", "nvidia0") == 'resource_gpu_id="nvidia0"'
    assert naming.matcher("business.sla_id", "x", "!=") == 'business_sla_id!="x"'
    assert labels.classic_name("9lives.x-y") == "key_9lives_x_y"


def test_utf8_spellings() -> None:
    naming = LabelNaming(NamingStrategy.UTF8)
    for key in labels.KEYS_BY_NAME:
        assert naming.prom(key) == key
        assert naming.promql(key) == f'"{key}"'
        # Loki never accepts dots in label names, whatever the strategy.
        assert LabelNaming.loki(key) == labels.classic_name(key)
        assert labels.canonical_for_spelling(key) is labels.KEYS_BY_NAME[key]
    matcher = naming.matcher("resource.gpu.id", 'nvi"dia0')
    assert matcher == '"resource.gpu.id"="nvi\\"dia0"'
    assert _matcher_value("m{" + matcher + "}") == ("resource.gpu.id", 'nvi"dia0')


def test_key_examples_match_their_own_patterns() -> None:
    for key in labels.CANONICAL_KEYS:
        assert key.matches(key.example), key.key
        assert not key.matches(key.example + "\n"), key.key
        assert not key.matches('"'), key.key


@pytest.mark.parametrize("text", TRICKY)
def test_template_literal_renders_as_itself(text: str) -> None:
    escaped = labels.template_literal(text)
    assert escaped.replace(labels.TEMPLATE_OPEN_ESCAPED, "{{") == text
    # After escaping, every "{{" opens the one action that prints "{{".
    assert escaped.count("{{") == escaped.count(labels.TEMPLATE_OPEN_ESCAPED) * 2
