"""Makes an expansion cheaper to keep and to pickle.

Every pydantic instance carries its own ``__pydantic_fields_set__``, a set of the field
names given to it: about 500 bytes, a quarter of a fleet's plan in memory (1,000
services: about 150 MB). Instances of one class almost always have the same one, so the
instances of an expansion share one set per distinct value; pickle keeps the sharing, so
the cache entry and every process that loads it get it too. Short strings (label names,
units, severities) are interned for the same reason.

Sharing is safe because plan models are frozen: pydantic copies the set before it
changes it (``model_copy``), and compares models without it.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel

_SHORT = 64


def compact(root: Any) -> None:
    """Shares fields sets and interns short strings in place, throughout ``root``."""
    fields_sets: dict[tuple[type, frozenset[str]], set[str]] = {}
    seen: set[int] = set()
    stack: list[Any] = [root]
    while stack:
        obj = stack.pop()
        if isinstance(obj, BaseModel):
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            given = obj.__pydantic_fields_set__
            key = (type(obj), frozenset(given))
            shared = fields_sets.setdefault(key, given)
            if shared is not given:
                object.__setattr__(obj, "__pydantic_fields_set__", shared)
            values = obj.__dict__
            for name, value in values.items():
                if type(value) is str:
                    if len(value) <= _SHORT:
                        values[name] = sys.intern(value)
                elif value is not None and not isinstance(value, (int, float, bool)):
                    stack.append(value)
        elif isinstance(obj, (list, tuple)):
            stack.extend(v for v in obj if not isinstance(v, (str, int, float, bool)))
        elif isinstance(obj, dict):
            for name, value in obj.items():
                if type(value) is str and len(value) <= _SHORT:
                    obj[name] = sys.intern(value)
                elif value is not None and not isinstance(value, (str, int, float, bool)):
                    stack.append(value)
        elif hasattr(obj, "__dataclass_fields__"):
            stack.extend(getattr(obj, name) for name in obj.__dataclass_fields__)
