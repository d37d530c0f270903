"""A fast path for :func:`obs_iac.render.serialize.dump_yaml` on simple trees.

PyYAML spends most of a dump in its pure-Python representer, building one node per
value; a fleet's Alertmanager files are thousands of small dicts of short strings. For
trees of dicts, lists and tuples holding single-line strings, ints, booleans and None,
the block layout is fixed, so this writes it directly and asks libyaml only how to spell
each distinct scalar (and remembers). Anything else (floats, multi-line or very long
strings, a container used twice, which PyYAML would anchor) goes to dump_yaml itself,
so the bytes are always exactly dump_yaml's.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from obs_iac.render.serialize import dump_yaml

_MAX_KEY = 128  # longer keys are written as complex keys ("? key")
_MAX_LINE = 1024
_MAX_LITERAL = 4096


# Line breaks for YAML other than "\n": every style writes them as a break plus
# indentation, so their spelling depends on where the scalar sits.
_OTHER_BREAKS = re.compile("[\r\x85\u2028\u2029]")


class _Unsimple(Exception):
    """The tree needs PyYAML itself."""


# typed: 1 and True are equal keys otherwise, and YAML spells them differently.
@lru_cache(maxsize=65536, typed=True)
def _value(value: str | int | bool | None) -> str:
    """A scalar as a block sequence item or mapping value spells it."""
    out = dump_yaml([value])
    if not out.startswith("- ") or out.count("\n") != 1:
        raise _Unsimple
    return out[2:-1]


# Mostly one-off texts (each rule's PromQL): a small memo is enough for the repeated ones.
@lru_cache(maxsize=8192)
def _literal(text: str) -> tuple[str, tuple[str | None, ...]]:
    """A multi-line string as a literal block: its header ("|-", "|+", ...) and its
    lines without the indentation they get as a top-level item (None: an empty line)."""
    out = dump_yaml([text])
    if not out.startswith("- |"):
        raise _Unsimple  # a quoted multi-line scalar: its breaks are indented too
    header, *lines = out[2:-1].split("\n")
    if any(line and not line.startswith("  ") for line in lines):
        raise _Unsimple
    return header, tuple(line[2:] if line else None for line in lines)


@lru_cache(maxsize=4096)
def _key(text: str) -> str:
    """A string as a block mapping key spells it (a simple key: no multi-line forms)."""
    out = dump_yaml({text: "x"})
    if not out.endswith(": x\n") or out.count("\n") != 1:
        raise _Unsimple
    return out[: -len(": x\n")]


def _scalar(value: Any, column: int, indent: int) -> str:
    """``value`` spelled at ``column`` in a node indented by ``indent``, if only that
    indentation changes its spelling. Floats are left to PyYAML: 0.0 and -0.0 would
    share a memo entry."""
    kind = type(value)
    if kind is str:
        if len(value) > _MAX_LITERAL:
            raise _Unsimple  # probing would cost as much as dumping: no gain, only work
        if _OTHER_BREAKS.search(value):
            raise _Unsimple
        if "\n" in value:
            # A literal block's lines sit two columns in from the node that holds it.
            header, lines = _literal(value)
            pad = " " * (indent + 2)
            return header + "".join("\n" if line is None else f"\n{pad}{line}" for line in lines)
    elif kind not in (int, bool) and value is not None:
        raise _Unsimple
    text = _value(value)
    # The emitter folds a long scalar only past column 4096 (its width, counted in
    # characters or bytes): at 4 bytes a character, 1024 keeps clear of it.
    if column + len(text) > _MAX_LINE:
        raise _Unsimple
    return text


def _emit(node: Any, indent: str, first: str, out: list[str], seen: set[int]) -> None:
    """Writes a non-empty container whose first line starts with ``first`` (the
    "- " of an enclosing item, or the indent) and whose other lines with ``indent``."""
    if id(node) in seen:
        raise _Unsimple  # PyYAML would write an anchor and an alias
    seen.add(id(node))
    lead = first
    if type(node) is dict:
        for key, value in node.items():
            if type(key) is not str or len(key) > _MAX_KEY or "\n" in key:
                raise _Unsimple
            if _OTHER_BREAKS.search(key):
                raise _Unsimple
            name = _key(key)
            if type(value) in (dict, list, tuple):
                if not value:
                    if type(value) is tuple:
                        raise _Unsimple  # () is never anchored; keep that rule to PyYAML
                    if id(value) in seen:
                        raise _Unsimple
                    seen.add(id(value))
                    out.append(f"{lead}{name}: {'{}' if type(value) is dict else '[]'}\n")
                else:
                    out.append(f"{lead}{name}:\n")
                    # A list under a key is not indented further; a mapping is.
                    child = indent if type(value) is not dict else indent + "  "
                    _emit(value, child, child, out, seen)
            else:
                text = _scalar(value, len(lead) + len(name) + 2, len(indent))
                out.append(f"{lead}{name}: {text}\n")
            lead = indent
    elif type(node) in (list, tuple):
        for item in node:
            if type(item) in (dict, list, tuple):
                if not item:
                    raise _Unsimple
                _emit(item, indent + "  ", lead + "- ", out, seen)
            else:
                out.append(f"{lead}- {_scalar(item, len(lead) + 2, len(indent))}\n")
            lead = indent
    else:
        raise _Unsimple


def dump_simple(data: Any) -> str:
    """Exactly ``dump_yaml(data)``; fast when ``data`` is a simple tree (see module doc)."""
    if type(data) in (dict, list, tuple) and data:
        out: list[str] = []
        try:
            _emit(data, "", "", out, set())
        except _Unsimple:
            pass
        else:
            return "".join(out)
    return dump_yaml(data)
