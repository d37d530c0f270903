"""dumps_indented writes exactly what json.dumps(indent=2, sort_keys=True,
ensure_ascii=False) writes (or raises what it raises): on generated dashboards, on a
corpus of awkward values and on random documents."""

from __future__ import annotations

import enum
import json
import math
import random
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from obs_iac.pipeline import open_workspace, render
from obs_iac.render import jsontext
from obs_iac.render.jsontext import dumps_indented
from tests.conftest import REPO


def reference(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)


def outcome(fn: Any, data: Any) -> tuple[str, str]:
    try:
        return ("text", fn(data))
    except Exception as exc:
        return (type(exc).__name__, str(exc))


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Ratio(float):
    def __repr__(self) -> str:
        return "not this"


class Count(int):
    def __repr__(self) -> str:
        return "not this"


class Text(str):
    pass


FLOATS = [
    0.0,
    -0.0,
    1e-05,
    1e-07,
    1e16,
    1e15,
    123456789012345680.0,
    0.1,
    1 / 3,
    2.5,
    -1.5e-10,
    5e-324,
    1.7976931348623157e308,
    math.nan,
    math.inf,
    -math.inf,
]
INTS = [0, -1, 1, 2**31, 2**63, 2**64 + 1, -(2**100), 10**300, Level.HIGH, Count(7)]
STRINGS = [
    "",
    "plain",
    'quote " and backslash \\',
    "control \x00\x01\x1f\x7f \b\f\n\r\t",
    "unicode é ß 中文 😀",
    "lone surrogate \ud800",
    "line separators \u2028\u2029",
    'json-ish {"a": [1, 2]}, \': ,',
    "$__rate_interval ${ds_prometheus} {{alertname}}",
    Colour.RED,
    Text("subclass"),
]
CORPUS: list[Any] = [
    *FLOATS,
    *INTS,
    *STRINGS,
    True,
    False,
    None,
    [],
    {},
    (),
    [[], {}, [[]], {"a": {}}],
    (1, (2, (3,))),
    {"b": 1, "a": [1.5, None, True], "c": {"z": "", "y": []}},
    OrderedDict([("z", 1), ("a", 2)]),
    {Text("k"): 1, "j": 2},
    {Colour.RED: 1, "blue": 2},
    {1: "int key", 2: "two"},
    {1.5: "float key"},
    {True: "bool key"},
    {None: "none key"},
    {"a": Ratio(0.5), "b": Ratio(math.nan), "c": Count(3)},
    {"deep": [[[[[[[[[[{"x": 1}]]]]]]]]]]},
    {"nested": {"k": {"k": {"k": {"k": [1, {"k": 2}]}}}}},
    # Errors: json's own message for each.
    {1: "x", "a": "mixed key types cannot be sorted"},
    {"set": {1, 2}},
    {"bytes": b"x"},
    {"object": object()},
    {("tuple", "key"): 1},
]


def deep(levels: int) -> Any:
    value: Any = "leaf"
    for level in range(levels):
        value = {f"level{level}": [value, level]} if level % 2 else [value]
    return value


@pytest.mark.parametrize("data", CORPUS, ids=lambda d: type(d).__name__)
def test_corpus_value_alone_and_nested(data: Any) -> None:
    assert outcome(dumps_indented, data) == outcome(reference, data)
    wrapped = {"value": data, "list": [data, {"again": data}]}
    assert outcome(dumps_indented, wrapped) == outcome(reference, wrapped)


def test_corpus_together() -> None:
    good = [v for v in CORPUS if outcome(reference, v)[0] == "text"]
    assert len(good) > 40
    assert dumps_indented(good) == reference(good)
    assert dumps_indented({str(i): v for i, v in enumerate(good)}) == reference(
        {str(i): v for i, v in enumerate(good)}
    )


def test_deeper_than_the_indent_table() -> None:
    data = deep(150)
    assert dumps_indented(data) == reference(data)


def test_circular_reference_raises_like_json() -> None:
    loop: list[Any] = [1]
    loop.append({"again": loop})
    assert outcome(dumps_indented, loop) == outcome(reference, loop)
    assert outcome(reference, loop) == ("ValueError", "Circular reference detected")


def test_key_cache_never_changes_output() -> None:
    jsontext._KEYS.clear()
    for _ in range(2):  # second round: every key from the cache
        for data in ({"a": 1, "é": [2]}, {Colour.RED: 1}, {"red": 2}):
            assert dumps_indented(data) == reference(data)
    for index in range(jsontext._MAX_KEYS + 10):
        dumps_indented({f"k{index}": index})
    dumps_indented({"after": "clear"})
    assert len(jsontext._KEYS) <= jsontext._MAX_KEYS + 1


def _random_value(rng: random.Random, depth: int) -> Any:
    pick = rng.random()
    if depth > 5 or pick < 0.45:
        return rng.choice(
            [
                rng.choice(FLOATS),
                rng.choice(INTS),
                rng.choice(STRINGS),
                rng.uniform(-1e6, 1e6),
                rng.randint(-(2**70), 2**70),
                rng.random() * 10 ** rng.randint(-30, 30),
                "".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(0, 12))),
                True,
                False,
                None,
            ]
        )
    size = rng.randint(0, 6)
    if pick < 0.7:
        items = [_random_value(rng, depth + 1) for _ in range(size)]
        return tuple(items) if rng.random() < 0.2 else items
    keys = [
        rng.choice(["a", "b", "type", "uid", "", "é", "\n", '"', "0", "Z"]) for _ in range(size)
    ]
    return {f"{k}{rng.randint(0, 3)}": _random_value(rng, depth + 1) for k in keys}


def test_random_documents() -> None:
    rng = random.Random(20261130)
    for _ in range(3000):
        data = _random_value(rng, 0)
        assert dumps_indented(data) == reference(data)


def _json_artifacts(root: Path) -> list[Any]:
    result = render(open_workspace(root))
    return [a.data for a in result.artifacts if a.format == "json"]


def test_every_generated_dashboard(tmp_path: Path) -> None:
    from bench.fleet import make_fleet

    make_fleet(tmp_path / "fleet", 6)
    boards = _json_artifacts(REPO) + _json_artifacts(tmp_path / "fleet")
    assert len(boards) >= 8
    for board in boards:
        assert dumps_indented(board) == reference(board)


def test_serialised_dashboard_and_configmap_text_agree() -> None:
    # The ConfigMap embeds the dashboard file's bytes; both come from dumps_indented.
    import yaml

    result = render(open_workspace(REPO))
    maps = {
        a.path: a
        for a in result.artifacts
        if a.generator == "grafana-dashboards"
        and a.format == "yaml"
        and a.data.get("kind") == "ConfigMap"
    }
    boards = [
        a for a in result.artifacts if a.format == "json" and a.generator == "grafana-dashboards"
    ]
    assert boards and maps
    texts = {
        name: text
        for art in maps.values()
        for name, text in yaml.safe_load(result.files[art.path])["data"].items()
    }
    compared = 0
    for board in boards:
        name = board.path.rsplit("/", 1)[-1]
        if name in texts:
            assert texts[name].encode() == result.files[board.path]
            compared += 1
    assert compared == len(boards)
