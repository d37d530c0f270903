"""What is derived from the fleet's metric catalogue is computed once per catalogue and
shared by every shard (obs_iac.plan.memo), without changing any finding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.fleet import make_fleet
from obs_iac.diagnostics import Diagnostic
from obs_iac.labels import LabelNaming
from obs_iac.lint.engine import Unit, build_catalogue, corpus_for, planned_catalogue
from obs_iac.lint.rulefile import ParsedGroup, ParsedRule
from obs_iac.plan import memo
from obs_iac.plan.model import MetricSpec, MetricType
from obs_iac.plugins import LintContext
from obs_iac.testing import ScopeFleet, compile_workspace
from tests import test_scope

# The fleet planted with bad cases, whose shards have findings to compare.
bad_fleet = test_scope.bad_fleet

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> ScopeFleet:
    root = tmp_path_factory.mktemp("memo") / "fleet"
    make_fleet(root, 6)
    return compile_workspace(root)


def spec(name: str, labels: tuple[str, ...] = ("job",)) -> MetricSpec:
    return MetricSpec(name=name, type=MetricType.GAUGE, unit="", labels=labels, source="test")


def test_equal_catalogues_share_one_value_and_different_ones_do_not() -> None:
    memo.clear()
    a, b = spec("a"), spec("b")
    built: list[str] = []

    def build(tag: str) -> Any:
        built.append(tag)
        return object()

    first = memo.per_catalogue((a, b), "k", lambda: build("1"))
    # A new tuple of the same objects (what every shard holds), then equal copies.
    assert memo.per_catalogue(tuple([a, b]), "k", lambda: build("2")) is first
    assert memo.per_catalogue((spec("a"), spec("b")), "k", lambda: build("3")) is first
    other = memo.per_catalogue((a,), "k", lambda: build("4"))
    assert other is not first
    assert memo.per_catalogue((a, b), "other key", lambda: build("5")) is not first
    assert built == ["1", "4", "5"]


def test_memory_is_bounded_to_a_few_catalogues() -> None:
    memo.clear()
    for index in range(20):
        memo.per_catalogue((spec(f"m{index}"),), "k", dict)
    assert len(memo._MEMO) == memo._SLOTS
    # The most recent catalogue is kept.
    kept = memo.per_catalogue((spec("m19"),), "k", lambda: None)
    assert kept == {}


def test_shards_share_the_index_and_the_lint_catalogue(fleet: ScopeFleet) -> None:
    memo.clear()
    n = len(fleet.plan.services)
    assert n == 6
    shards = [fleet.compiled.shard(i) for i in range(n)] + [fleet.compiled.shard(None)]
    assert len({id(s.metrics) for s in shards}) == len(shards)  # pydantic copies the tuple
    assert len({id(s.metric_index) for s in shards}) == 1
    assert shards[0].metric_index == {m.name: m for m in fleet.plan.metrics}
    strategy = LabelNaming(fleet.config.naming).strategy
    assert len({id(planned_catalogue(s, strategy)[0]) for s in shards}) == 1


def _service_rules(fleet: ScopeFleet) -> list[tuple[Any, LintContext]]:
    from obs_iac.testing import _scope, _settings

    out = []
    for rule in fleet.plugins.lint_rules:
        if _scope(rule.obj) != "service":
            continue
        ctx = LintContext(
            naming=LabelNaming(fleet.config.naming),
            repo=fleet.config,
            settings=_settings(rule.obj, rule.name, fleet.config),
            inputs=None,
        )
        out.append((rule.obj, ctx))
    return out


def _shard_findings(fleet: ScopeFleet, *, share: bool) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    rules = _service_rules(fleet)
    for index, artifacts in enumerate(fleet.shard_artifacts()):
        if not share:
            memo.clear()
        shard = fleet.compiled.shard(index)
        for rule, ctx in rules:
            found.extend(rule.check(shard, artifacts, ctx))
    return sorted(found, key=Diagnostic.total_key)


def test_sharing_changes_no_finding(bad_fleet: ScopeFleet) -> None:
    alone = _shard_findings(bad_fleet, share=False)
    memo.clear()
    shared = _shard_findings(bad_fleet, share=True)
    assert len({d.code for d in alone}) >= 5, "too few findings to prove anything"
    assert shared == alone


def test_shards_analyse_each_query_shape_once(fleet: ScopeFleet) -> None:
    memo.clear()
    rules = _service_rules(fleet)
    rule, ctx = next((r, c) for r, c in rules if r.code == "dcgm/field-not-collected")
    corpora = []
    for index, artifacts in enumerate(fleet.shard_artifacts()):
        shard = fleet.compiled.shard(index)
        list(rule.check(shard, artifacts, ctx))
        corpora.append(corpus_for(shard, artifacts, ctx))
    assert len({id(c._analyses) for c in corpora}) == 1
    assert all(c.catalogue is corpora[0].catalogue for c in corpora)


def test_records_outside_the_catalogue_get_a_private_copy(fleet: ScopeFleet) -> None:
    memo.clear()
    naming = LabelNaming(fleet.config.naming)
    base, planned = planned_catalogue(fleet.plan, naming.strategy)
    before = dict(base)
    assert "job:new_series:sum" not in planned
    some_metric = next(m.name for m in fleet.plan.metrics if m.source == "dcgm")
    rule = ParsedRule(
        kind="record",
        name="job:new_series:sum",
        expr=f"sum by (job) ({some_metric})",
        line=1,
        expr_line=1,
        index=0,
    )
    unit = Unit(group=ParsedGroup(name="g", line=1, rules=[rule]), file="rules.yaml")
    catalogue, _ = build_catalogue(fleet.plan, [unit], naming, "2.42.0")
    assert catalogue is not base
    assert "job:new_series:sum" in catalogue
    assert base == before  # the shared catalogue is never written to
    plain, _ = build_catalogue(fleet.plan, [], naming, "2.42.0")
    assert plain is base
