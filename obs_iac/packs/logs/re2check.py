"""Checks a pattern the way Alloy and promtail will run it: with RE2 (Go regexp syntax).

Python's ``re`` accepts constructs RE2 rejects, and the agents only find out at start-up.
We compile with the real RE2 (google-re2) and, before that, look for the usual Perl/Python
constructs ourselves so the message says *why* RE2 has no such thing and what to write
instead; RE2's own messages ("invalid perl operator: (?=") do not.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

# (token, what it is, what to do instead). Checked outside character classes only.
_GROUP_OPENERS: tuple[tuple[str, str, str], ...] = (
    ("(?<=", "a lookbehind", "match the context and capture only the part you need"),
    ("(?<!", "a negative lookbehind", "match the context explicitly or drop the condition"),
    ("(?=", "a lookahead", "match the following text instead, or capture only the part needed"),
    ("(?!", "a negative lookahead", "list what may follow with a character class instead"),
    ("(?>", "an atomic group", "use a plain (?:...) group; RE2 never backtracks anyway"),
    ("(?(", "a conditional", "split it into two patterns or an alternation"),
    ("(?#", "an inline comment", "remove the comment; explain the pattern in Python instead"),
    ("(?P=", "a named backreference", "RE2 cannot refer back to a group; capture both parts"),
    ("(?<", "a named group in (?<name>...) form", "write (?P<name>...): Go accepts (?<name>) "
     "only since Go 1.22, so older agents reject it"),
)  # fmt: skip


@dataclass(frozen=True)
class RegexProblem:
    message: str
    hint: str


def _options() -> Any:
    opts = re2.Options()
    opts.log_errors = False
    return opts


@lru_cache(maxsize=1024)
def compile_re2(pattern: str) -> Any:
    """The compiled RE2 pattern; raises ``re2.error`` if RE2 rejects it."""
    return re2.compile(pattern, _options())


def _scan(pattern: str) -> list[RegexProblem]:
    problems: list[RegexProblem] = []
    in_class = False
    i = 0
    n = len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if not in_class and nxt.isdigit() and nxt != "0":
                problems.append(
                    RegexProblem(
                        f"\\{nxt} is a backreference, which RE2 does not support",
                        "RE2 matches in linear time and cannot refer back to a group; "
                        "capture both parts and compare them downstream",
                    )
                )
            elif nxt == "Z":
                problems.append(
                    RegexProblem(
                        "\\Z is not supported by RE2",
                        "use \\z (end of text); note RE2's $ without (?m) already means "
                        "end of text",
                    )
                )
            elif nxt == "k" and i + 2 < n and pattern[i + 2] in "<{'":
                problems.append(
                    RegexProblem(
                        "\\k<name> is a named backreference, which RE2 does not support",
                        "capture both parts and compare them downstream",
                    )
                )
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
            i += 1
            continue
        if char == "[":
            in_class = True
            # A ']' right after '[' or '[^' is a literal member, not the end.
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            i = j
            continue
        if char == "(":
            for token, what, hint in _GROUP_OPENERS:
                if pattern.startswith(token, i):
                    problems.append(RegexProblem(f"{what} ({token}...) is not RE2 syntax", hint))
                    break
            else:
                if pattern.startswith("(?", i):
                    flags = ""
                    j = i + 2
                    while j < n and pattern[j] not in ":)":
                        flags += pattern[j]
                        j += 1
                    if "x" in flags and flags.replace("-", "").isalpha():
                        problems.append(
                            RegexProblem(
                                "the verbose flag (?x) is not supported by RE2",
                                "write the pattern without insignificant whitespace",
                            )
                        )
        if char in "*+?}" and i + 1 < n and pattern[i + 1] == "+":
            problems.append(
                RegexProblem(
                    f"{char}+ is a possessive quantifier, which RE2 does not support",
                    "use the plain quantifier; RE2 does not backtrack, so it is not needed",
                )
            )
        i += 1
    return problems


def check_pattern(pattern: str, *, what: str, need_named_groups: bool = True) -> list[RegexProblem]:
    """Every reason the agents would reject ``pattern`` or run it uselessly."""
    if not pattern:
        return [RegexProblem(f"{what} is empty", "an empty pattern matches every line")]
    problems = _scan(pattern)
    if problems:
        return problems
    try:
        compiled = compile_re2(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        return [
            RegexProblem(
                f"{what} is not valid RE2: {detail}",
                "Alloy and promtail use Go's RE2 syntax (no lookarounds, backreferences, "
                "possessive or atomic groups); see https://github.com/google/re2/wiki/Syntax",
            )
        ]
    if compiled.search("") is not None:
        problems.append(
            RegexProblem(
                f"{what} matches the empty string",
                "an unanchored search then matches every line; anchor it with ^ and require "
                "at least one character",
            )
        )
    if need_named_groups and compiled.groups > len(compiled.groupindex):
        problems.append(
            RegexProblem(
                f"{what} has {compiled.groups - len(compiled.groupindex)} unnamed capture group(s)",
                "name every capture group (?P<name>...) or make it non-capturing (?:...)",
            )
        )
    return problems


def group_names(pattern: str) -> tuple[str, ...]:
    compiled = compile_re2(pattern)
    return tuple(name for name, _ in sorted(compiled.groupindex.items(), key=lambda kv: kv[1]))
