"""``service(...)``: how a blueprint file registers a service, with its file and line."""

from __future__ import annotations

import contextvars
import sys
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Registration:
    """One ``service(...)`` call as written, before validation."""

    fields: dict[str, Any]
    file: str
    line: int
    column: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


_active: contextvars.ContextVar[list[Registration] | None] = contextvars.ContextVar(
    "obs_iac_registrations", default=None
)


def service(**fields: Any) -> Registration:
    """Declare one SLA-bound service. Validation happens after the whole file has run,
    so every mistake in the file is reported at once with its line."""
    frame = sys._getframe(1)
    reg = Registration(fields=fields, file=frame.f_code.co_filename, line=frame.f_lineno)
    sink = _active.get()
    if sink is not None:
        sink.append(reg)
    return reg


def collecting() -> tuple[list[Registration], contextvars.Token[list[Registration] | None]]:
    sink: list[Registration] = []
    return sink, _active.set(sink)


def stop_collecting(token: contextvars.Token[list[Registration] | None]) -> None:
    _active.reset(token)
