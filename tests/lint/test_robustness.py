"""Whatever bytes a rule file holds, lint answers with diagnostics, never a traceback."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from obs_iac.lint.rulefile import parse_rule_text
from obs_iac.lint.run import run_lint

CORPUS = sorted((Path(__file__).resolve().parent / "corpus").glob("*/*.yml"))
ODD = [
    "a: &x [*x]\n",
    "groups: &g\n- name: g\n  rules: *g\n",
    "groups:\n- name: g\n  rules:\n  - record: a:b:c\n    expr: up\n    <<: {for: 5m}\n",
    "? [complex, key]\n: value\n",
    "groups:\n- {name: g, rules: [{record: 'a:b:c', expr: [1, 2]}]}\n",
    "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    annotations: {s: '{{'}\n",
    "%YAML 1.1\n---\ngroups: []\n...\n",
    "---\n---\n",
    "groups: !!binary aGVsbG8=\n",
    "\ufeffgroups: []\n",
]


def mutations(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    texts = [p.read_text(encoding="utf-8") for p in CORPUS]
    out = []
    for _ in range(count):
        text = list(rng.choice(texts))
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(text) + 1)
            action = rng.random()
            if action < 0.4 and text:
                del text[min(pos, len(text) - 1)]
            elif action < 0.8:
                text.insert(pos, rng.choice("{}[]()\"':-#&*!|>\n\t ${}=~,"))
            else:
                text[pos:pos] = list(rng.choice(["{{", "}}", "- ", ": ", "\n  ", "[5m]"]))
        out.append("".join(text))
    return out


@pytest.mark.parametrize("text", ODD + mutations(20261130, 300))
def test_any_text_gives_diagnostics_not_exceptions(text: str) -> None:
    parse_rule_text(text, "fuzz.yml")


def test_mutated_files_through_the_whole_lint(tmp_path: Path) -> None:
    for index, text in enumerate(mutations(7, 60)):
        (tmp_path / f"m{index:03d}.yml").write_text(text, encoding="utf-8")
    result = run_lint(tmp_path, (tmp_path,))
    assert result.files == 60
    assert result.diagnostics
