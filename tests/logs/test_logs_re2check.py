"""Every pattern is checked with the real RE2 (google-re2), as Alloy and promtail run it."""

from __future__ import annotations

import re

import pytest

from obs_iac.packs.logs import LogsPack, build_stages, presets
from obs_iac.packs.logs.re2check import check_pattern, compile_re2
from obs_iac.packs.logs.section import LogsSection
from obs_iac.plan.model import MultilineStage, RegexStage


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        (r"^(?=ERROR)\w+", "lookahead"),
        (r"^(?!\s)\S", "negative lookahead"),
        (r"(?<=rank)\d+", "lookbehind"),
        (r"(?<!\[)rank", "negative lookbehind"),
        (r"^(\w+) \1$", "backreference"),
        (r"^(?P<a>\w+) (?P=a)$", "named backreference"),
        (r"^(?P<a>\w+) \k<a>$", "named backreference"),
        (r"^(?>a+)b", "atomic group"),
        (r"^a++b", "possessive"),
        (r"^(a)?(?(1)b|c)", "conditional"),
        (r"^(?#the start)\d", "comment"),
        (r"(?x)^ \d + $", "verbose"),
        (r"^Traceback\Z", r"\Z"),
        (r"^(?<level>INFO)", "(?P<name>"),
    ],
)
def test_non_re2_constructs_are_rejected_with_a_reason(pattern: str, fragment: str) -> None:
    problems = check_pattern(pattern, what="p")
    assert problems, f"{pattern!r} must be rejected"
    assert fragment in problems[0].message + problems[0].hint


def test_python_re_accepts_what_re2_rejects() -> None:
    """The reason to check with RE2 at all: Python's re would let these through."""
    for pattern in (r"^(?=ERROR)\w+", r"(?<=rank)\d+", r"^(\w+) \1$"):
        re.compile(pattern)
        assert check_pattern(pattern, what="p")


def test_escaped_parentheses_and_classes_are_not_mistaken_for_constructs() -> None:
    assert check_pattern(r"^\(?=x\) [(?=] \[rank\d+\]: \\1", what="p") == []


def test_rejections_from_re2_itself_are_reported() -> None:
    problems = check_pattern(r"^(?P<level>INFO", what="logs.record_start")
    assert problems and "not valid RE2" in problems[0].message
    assert check_pattern(r"^a{1001}", what="p"), "RE2 caps counted repetition at 1000"


@pytest.mark.parametrize("pattern", ["", "a*", "^", r"(?:x)?", r"^\s*$"])
def test_patterns_that_match_the_empty_string_are_rejected(pattern: str) -> None:
    problems = check_pattern(pattern, what="p")
    assert problems and ("empty" in problems[0].message)


def test_capture_groups_must_be_named() -> None:
    problems = check_pattern(r"^(INFO|ERROR) (?P<logger>\w+)", what="p")
    assert problems and "unnamed capture" in problems[0].message
    assert check_pattern(r"^(?:INFO|ERROR) (?P<logger>\w+)", what="p") == []


def _all_plans() -> list[LogsSection]:
    sections = []
    for fmt in ("python-asctime", "python-basic", "json"):
        for prefix in ("none", "pytorch-rank-prefix", "torchrun-tee"):
            for runtime in ("cri", "docker", "none"):
                sections.append(LogsSection(runtime=runtime, format=fmt, rank_prefix=prefix))
    return sections


def test_every_generated_pattern_is_valid_re2_with_named_groups() -> None:
    seen = 0
    for section in _all_plans():
        for stage in build_stages(section, "recomm_v2", "recomm-v2"):
            if isinstance(stage, RegexStage):
                assert check_pattern(stage.expression, what="regex") == []
                seen += 1
            elif isinstance(stage, MultilineStage):
                assert check_pattern(stage.firstline, what="firstline") == []
                assert stage.firstline.startswith("^")
                seen += 1
    assert seen > 50


def test_firstline_presets_match_record_starts_and_not_traceback_lines() -> None:
    stage = next(
        s
        for s in build_stages(LogsSection(rank_prefix="pytorch-rank-prefix"), "x", "x")
        if isinstance(s, MultilineStage)
    )
    first = compile_re2(stage.firstline)
    for start in (
        "2024-01-31 12:00:00,123 INFO trainer: step 1",
        "2024-01-31T12:00:00.123 ERROR trainer: boom",
        "[rank12]: Traceback (most recent call last):",
        "[rank0]:[E131 12:10:09.456789012 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog",
        "E0131 12:10:15.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] x",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
    ):
        assert first.search(start), start
    for inner in (
        "Traceback (most recent call last):",
        '  File "/app/train.py", line 3, in <module>',
        "ValueError: 2024-01-31 12:00:00 is not a valid date",
        '[rank3]:   File "/app/train.py", line 3, in main',
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory.",
        "During handling of the above exception, another exception occurred:",
        "",
    ):
        assert not first.search(inner), inner


def test_exception_pattern_picks_the_last_exception_of_a_chain() -> None:
    text = "\n".join(
        [
            "2024-01-31 12:00:00,000 ERROR x: failed",
            "Traceback (most recent call last):",
            "KeyError: 'a'",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
            "KeyboardInterrupt",
        ]
    )
    match = compile_re2(presets.exception_pattern("")).search(text)
    assert match and match.group("exception_class") == "KeyboardInterrupt"
    plain = "2024-01-31 12:00:00,000 ERROR x: ValueError: not a traceback"
    assert compile_re2(presets.exception_pattern("")).search(plain) is None


def test_pack_name() -> None:
    assert LogsPack.name == "logs"
