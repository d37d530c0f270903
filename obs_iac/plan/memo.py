"""Values derived from a fleet's metric catalogue, computed once per catalogue, not once
per shard.

Every shard of a render holds the whole fleet's catalogue (``plan.metrics``): tuples
that pydantic builds anew for each shard but that hold the very same ``MetricSpec``
objects, in the same order. Anything a service-scope plugin derives from the catalogue
alone (an index by name, lint facts, analyses made against it, findings about it) would
otherwise cost the fleet's size once per service, which makes a render quadratic.

A derived value must depend on nothing but the catalogue's content and the ``key`` it
is stored under (put every other input in the key), and callers must not mutate it.
Catalogues are matched by content: tuple comparison checks element identity first, so
the shards of one render match in a few microseconds whatever the fleet size.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from obs_iac.plan.model import MetricSpec

T = TypeVar("T")

# A render has one catalogue; tests and `obs-iac diff` alternate between two or so.
_SLOTS = 4
# Most recent first: (catalogue, values derived from it).
_MEMO: list[tuple[tuple[MetricSpec, ...], dict[Hashable, Any]]] = []


def _values(metrics: tuple[MetricSpec, ...]) -> dict[Hashable, Any]:
    for position, (catalogue, values) in enumerate(_MEMO):
        if catalogue is metrics:
            if position:
                _MEMO.insert(0, _MEMO.pop(position))
            return values
        if len(catalogue) == len(metrics) and catalogue == metrics:
            # Keep the tuple just seen: a shard's next lookups then match by identity.
            del _MEMO[position]
            _MEMO.insert(0, (metrics, values))
            return values
    values = {}
    _MEMO.insert(0, (metrics, values))
    del _MEMO[_SLOTS:]
    return values


def per_catalogue(metrics: tuple[MetricSpec, ...], key: Hashable, build: Callable[[], T]) -> T:
    """``build()``, computed once per catalogue content and ``key``."""
    values = _values(metrics)
    try:
        value: T = values[key]
    except KeyError:
        value = values[key] = build()
    return value


def clear() -> None:
    """Forgets every catalogue (tests that count how often something is derived)."""
    _MEMO.clear()
