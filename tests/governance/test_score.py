"""`obs-iac score`: 12 items, 1-5 each, every number explained by plan objects."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from obs_iac.governance.check import Governance, load
from obs_iac.governance.score import (
    DIMENSION_ORDER,
    THRESHOLD,
    Card,
    Item,
    level,
    score_all,
    to_html,
)
from tests.conftest import REPO, RunCli, make_repo
from tests.governance.test_check import one_service_repo


@pytest.fixture(scope="module")
def examples(tmp_path_factory: pytest.TempPathFactory) -> Governance:
    return load(make_repo(tmp_path_factory.mktemp("ex") / "repo", REPO / "blueprints"))


def test_level_maps_shares_onto_1_to_5() -> None:
    assert [level(s) for s in (0.0, 0.1, 0.125, 0.5, 0.6, 0.875, 1.0)] == [1, 1, 2, 3, 3, 5, 5]


def test_examples_have_a_full_explained_scorecard(examples: Governance) -> None:
    cards = score_all(examples)
    assert [c.service for c in cards] == ["image-classify-v3", "recomm-v2"]
    plan_names = {
        r.record for g in examples.plan.rule_groups for r in g.rules if hasattr(r, "record")
    }
    for card in cards:
        assert len(card.items) == 12
        for dim in DIMENSION_ORDER:
            assert sum(i.dimension == dim for i in card.items) == 4
        assert card.total == sum(i.score for i in card.items) <= 60
        for item in card.items:
            assert 1 <= item.score <= 5
            # The last line states the arithmetic that gives this very number.
            last = re.search(r"-> score (?:1 \+ 4 x [0-9.]+ = )?(\d)$", item.lines[-1])
            assert last and int(last.group(1)) == item.score, (item.key, item.lines)
            assert item.raise_it
    # Explanations name real plan objects: the join item lists framework recording rules.
    join = next(i for i in cards[1].items if i.key == "correlation.join")
    named = [line.split(": ", 1)[0] for line in join.lines[:-1]]
    named_records = [n for n in named if n in plan_names]
    assert named_records and len(named_records) == len(named)


def test_join_share_counts_series_lacking_gpu_labels(examples: Governance) -> None:
    card = score_all(examples)[1]
    join = next(i for i in card.items if i.key == "correlation.join")
    joined = sum("joins on" in line for line in join.lines)
    lacking = sum(": lacks " in line for line in join.lines)
    assert joined and lacking  # per-rank series join; per-group aggregates cannot
    assert join.score == level(joined / (joined + lacking))


def test_improvements_put_coverage_and_correlation_before_decision() -> None:
    def item(key: str, dim: str, score: int) -> Item:
        return Item(key, dim, key, score, (f"-> score {score}",), f"raise {key}")

    card = Card(
        "svc",
        (
            item("d1", "decision", 1),
            item("d2", "decision", 1),
            item("r1", "correlation", 4),
            item("r2", "correlation", 2),
            item("c1", "coverage", 5),
        ),
    )
    assert [i.key for i in card.improvements()] == ["r2", "r1", "d1"]


def test_thin_service_is_flagged_with_three_improvements(run_cli: RunCli, tmp_path: Path) -> None:
    disable = (
        '{"disable": [{"name": "gpu-fault-mutes-gpu-symptoms", "reason": "test"}, '
        '{"name": "gpu-hot-mutes-util-low", "reason": "test"}, '
        '{"name": "gpu-node-down-mutes-gpu-alerts", "reason": "test"}]}'
    )
    repo = one_service_repo(tmp_path, inhibitions=disable, framework=None)
    result = run_cli(["score", "--format", "json"], repo)
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)["services"]["svc-a"]
    assert card["total"] < THRESHOLD and card["flagged"] is True
    assert card["total"] == sum(i["score"] for i in card["items"])
    for item in card["items"]:
        last = re.search(r"-> score (?:1 \+ 4 x [0-9.]+ = )?(\d)$", item["explanation"][-1])
        assert last and int(last.group(1)) == item["score"], item
    improvements = card["improvements"]
    assert len(improvements) == 3
    dims = [k.split(".")[0] for k in improvements]
    assert dims == sorted(dims, key=DIMENSION_ORDER.index)
    text = run_cli(["score"], repo).stdout
    assert f"BELOW {THRESHOLD}" in text and "1. " + improvements[0] in text


def test_reports_in_every_format(run_cli: RunCli, gitops: Path, tmp_path: Path) -> None:
    md = run_cli(["score", "--format", "markdown"], gitops)
    assert md.exit_code == 0
    assert md.stdout.startswith("| service | total | coverage | correlation | decision |")
    out = tmp_path / "fleet.html"
    result = run_cli(["score", "--format", "html", "-o", str(out)], gitops)
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert page.count("<svg") == 2 and page.count("<section>") == 2
    assert "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    data = json.loads(run_cli(["score", "--format", "json"], gitops).stdout)
    totals = {s: d["total"] for s, d in data["services"].items()}
    assert all(f"{t}/60" in page for t in totals.values())


def test_svg_bar_lengths_follow_the_scores(examples: Governance) -> None:
    cards = score_all(examples)
    page = to_html(cards)
    widths = [int(w) for w in re.findall(r'<rect x="\d+" y="\d+" width="(\d+)"', page)]
    assert widths == [i.score * 40 for c in cards for i in c.items]
