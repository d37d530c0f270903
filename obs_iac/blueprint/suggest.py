"""Did-you-mean for unknown keys at any depth of a blueprint model.

pydantic reports an unknown key as ``extra_forbidden`` at a location such as
``("slo", 0, "sli", "latency", "histogrm")`` without saying which model rejected it.
This module walks the models' type annotations along that location, the way pydantic
built it (tuple and dict items, discriminated-union tags, union member names, root
models), to find the fields the key should have been one of.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, RootModel


def _members(tp: Any) -> list[Any]:
    """The non-None alternatives of a type, with Annotated metadata dropped."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _members(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        out: list[Any] = []
        for arg in typing.get_args(tp):
            if arg is not type(None):
                out.extend(_members(arg))
        return out
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _tags(model: type[BaseModel]) -> set[str]:
    """Literal values of the model's fields: a discriminated union names its member by
    the tag (e.g. ``kind="latency"``) in error locations."""
    out: set[str] = set()
    for info in model.model_fields.values():
        if typing.get_origin(info.annotation) is typing.Literal:
            out.update(str(v) for v in typing.get_args(info.annotation))
    return out


def _step(tp: Any, part: str | int) -> tuple[Any, bool] | None:
    """(type after consuming ``part``, whether it was consumed)."""
    members = _members(tp)
    if len(members) > 1:
        for member in members:
            if _is_model(member) and (part == member.__name__ or str(part) in _tags(member)):
                return member, True
        return None
    only = members[0]
    if _is_model(only):
        if issubclass(only, RootModel):
            return only.model_fields["root"].annotation, False
        info = only.model_fields.get(str(part))
        return (info.annotation, True) if info is not None else None
    origin = typing.get_origin(only)
    args = typing.get_args(only)
    if origin in (tuple, list, set, frozenset) and args and isinstance(part, int):
        return args[0], True
    if origin is dict and len(args) == 2:
        return args[1], True
    return None


def model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model whose fields the location's last step names, or None if unknown."""
    tp: Any = root
    parts = list(loc)
    guard = 0
    while parts:
        guard += 1
        if guard > 4 * len(loc) + 8:
            return None
        step = _step(tp, parts[0])
        if step is None:
            return None
        tp, consumed = step
        if consumed:
            parts.pop(0)
    while True:
        members = [m for m in _members(tp) if _is_model(m)]
        if len(members) != 1:
            return None
        model: type[BaseModel] = members[0]
        if issubclass(model, RootModel):
            tp = model.model_fields["root"].annotation
            continue
        return model


def unknown_key_hint(root: type[BaseModel] | None, loc: Sequence[str | int]) -> str | None:
    """'did you mean ...? fields of X: ...' for the unknown key at the end of ``loc``."""
    if root is None or not loc:
        return None
    model = model_at(root, loc[:-1])
    if model is None:
        return None
    known = sorted(model.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}? (a field of {model.__name__})"
    return f"fields of {model.__name__}: {', '.join(known)}"


def blueprint_model_named(name: str) -> type[BaseModel] | None:
    """The blueprint model class whose name a ValidationError carries as its title (a
    model built directly in a blueprint, e.g. ``GpuFleet(...)``); None if not unique."""
    from obs_iac.blueprint.models import BlueprintModel

    found: list[type[BaseModel]] = []
    pending: list[type[BaseModel]] = [BlueprintModel]
    seen: set[type[BaseModel]] = set()
    while pending:
        cls = pending.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if cls.__name__ == name:
            found.append(cls)
        pending.extend(cls.__subclasses__())
    return found[0] if len(found) == 1 else None
