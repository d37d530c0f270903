"""dump_simple must give dump_yaml's bytes for every input, fast path or not."""

from __future__ import annotations

import random
from typing import Any

import pytest

from obs_iac.render import fastyaml
from obs_iac.render.fastyaml import dump_simple
from obs_iac.render.serialize import dump_yaml

# Scalars whose YAML spelling is tricky: quoting, booleans, numbers, indicators,
# escapes, line breaks of every kind, and lengths around the dumper's folding width.
ATOMS: list[Any] = [
    "", " ", "a", "yes", "on", "null", "~", "1", "0x1f", "1e3", "-", "- a", "a: b", "#x",
    "a #b", "'", '"', "\\", "é", "😀", "\x01", "\x7f", "\ufeff",
    " a", "a ", "=~", "[", "{", ",", "&a", "*a", "!a", "|", ">", "%", "@", "`", "? a", ":",
    ".inf", "2001-01-01", "<<", "\n", "a\nb", "\n\n", "x\n", " \n", "\n ", "a\n\n\nb\n\n",
    "sum(x)\n/ on(a)\n  y", "z" * 300, 0, 1, -1, True, False, None, 10**30,
]  # fmt: skip


# What the fast path hands back to PyYAML; rarer, so most trees take the fast path.
RARE: list[Any] = ["\u2028", "\x85", "\r", "\t", "x" * 1000, "y " * 600, 1.5, -0.0, 0.0]


def _atom(rng: random.Random) -> Any:
    return rng.choice(RARE) if rng.random() < 0.02 else rng.choice(ATOMS)


def _text(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return _atom(rng)
    parts = [_atom(rng) for _ in range(rng.randint(1, 3))]
    return "".join(p if isinstance(p, str) else repr(p) for p in parts)


def _key(rng: random.Random) -> str:
    # A multi-line key is always PyYAML's; keep most keys on one line.
    key = str(_text(rng))
    return key if rng.random() < 0.05 else key.replace("\n", " ")


def _tree(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 3 or r < 0.35:
        return _text(rng)
    size = rng.randint(0, 4) if rng.random() < 0.05 else rng.randint(1, 4)
    if r < 0.65:
        return {_key(rng): _tree(rng, depth + 1) for _ in range(size)}
    if r < 0.85:
        return [_tree(rng, depth + 1) for _ in range(size)]
    return tuple(_tree(rng, depth + 1) for _ in range(size))


@pytest.mark.parametrize("seed", range(4))
def test_random_trees_dump_like_pyyaml(seed: int) -> None:
    rng = random.Random(seed)
    fast = 0
    for _ in range(2500):
        tree = _tree(rng)
        assert dump_simple(tree) == dump_yaml(tree), repr(tree)
        fast += _takes_fast_path(tree)
    assert fast > 250  # the comparison must cover the fast path, not only the fallback


def _takes_fast_path(tree: Any) -> bool:
    if not isinstance(tree, (dict, list, tuple)) or not tree:
        return False
    try:
        fastyaml._emit(tree, "", "", [], set())
    except fastyaml._Unsimple:
        return False
    return True


def test_layouts_and_fallbacks() -> None:
    shared = ["x"]
    cases: list[Any] = [
        {"a": [{"b": "c", "d": ["e", {"f": "g"}]}], "h": {"i": {"j": []}, "k": {}}},
        [["a", "b"], [["c"]], {"d": "multi\nline\n"}],
        {"expr": "sum(x)\n/ on(a)\n  y", "n": 1, "t": True, "z": None},
        [shared, shared],  # PyYAML anchors a repeated container
        {"k": shared, "again": {"k": shared}},
        {"empty": ()},
        {1: "non-string key"},
        {"f": 0.5, "g": -0.0},
        {"long": "w " * 3000},
        {"k" * 200: "a long key is a complex key"},
        {"tab": "a\tb\nc"},
    ]
    for data in cases:
        assert dump_simple(data) == dump_yaml(data), repr(data)
