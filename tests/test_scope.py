"""Every built-in generator and lint rule declares a scope (docs/plugins.md, "Scope");
``assert_scope_holds`` proves each declaration on three fleets: the repository's example
blueprints, a synthetic fleet (bench/fleet.py), and a fleet planted with bad cases so
that the lint rules have findings to agree on."""

from __future__ import annotations

import datetime as dt
import importlib.metadata as md
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from bench.fleet import make_fleet
from obs_iac.lint.engine import LintInputs
from obs_iac.lint.rulefile import read_rule_file
from obs_iac.packs.inhibit.matchers import parse_matcher
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plan.model import (
    AlertRule,
    DashboardRow,
    InhibitEdge,
    MetricSpec,
    MetricType,
    Panel,
    PanelQuery,
    Plan,
    RecordingRule,
    RuleGroup,
)
from obs_iac.plugins import (
    Contribution,
    Generator,
    GeneratorContext,
    GeneratorScope,
    LintContext,
    LintRule,
    LintScope,
    Pack,
    PackContext,
)
from obs_iac.promql import PromQLSyntaxError, parse
from obs_iac.render.artifact import Artifact
from obs_iac.testing import (
    ScopeFleet,
    assert_scope_holds,
    compile_blueprints,
    compile_workspace,
    plugin_set,
)
from tests.test_inhibit_blueprint import ADD, BLUEPRINT

REPO = Path(__file__).resolve().parents[1]
LINT_CASES = REPO / "tests" / "lint"
INPUTS = LintInputs(today=dt.date(2026, 6, 1))


def builtin(group: str) -> dict[str, Any]:
    """name -> plugin object, for every plugin obs-iac itself registers in ``group``."""
    out = {}
    for ep in md.entry_points(group=group):
        if ep.dist is not None and ep.dist.name == "obs-iac":
            target = ep.load()
            out[ep.name] = target() if isinstance(target, type) else target
    return dict(sorted(out.items()))


GENERATORS = builtin("obs_iac.generators")
RULES = builtin("obs_iac.lint_rules")
EVERYTHING = {**GENERATORS, **RULES}


# -- fleets ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example_fleet() -> ScopeFleet:
    return compile_workspace(REPO)


@pytest.fixture(scope="module")
def bench_fleet(tmp_path_factory: pytest.TempPathFactory) -> ScopeFleet:
    return compile_workspace(make_fleet(tmp_path_factory.mktemp("bench"), 12))


def _bad_groups(service: ServiceBlueprint) -> list[RuleGroup]:
    """The bad cases of tests/lint/<area>/<name>/bad.yml that the plan can hold (not the
    ones about file structure), as rule groups of this service."""
    groups = []
    # The GPU pack parses every query of a service, so the plan holds no unparsable one;
    # promql/syntax still has a case: functions Prometheus 2.42 does not know.
    cases = [p for p in sorted(LINT_CASES.glob("*/*/bad.yml")) if p.parent.parent.name != "corpus"]
    cases.append(LINT_CASES / "corpus" / "bad" / "limitk-2-42.yml")
    for path in cases:
        parsed = read_rule_file(path, path.name, "2.42.0")
        if parsed.problems or parsed.unreadable:
            continue
        for group in parsed.groups:
            rules: list[RecordingRule | AlertRule] = []
            for rule in group.rules:
                if not _parses(rule.expr):
                    continue
                if rule.kind == "alert":
                    rules.append(
                        AlertRule(
                            alert=rule.name,
                            expr=rule.expr,
                            for_=rule.for_text or "0s",
                            labels={k: str(v) for k, v in rule.labels.items()},
                            annotations={k: str(v) for k, v in rule.annotations.items()},
                        )
                    )
                else:
                    labels = {k: str(v) for k, v in rule.labels.items()}
                    rules.append(RecordingRule(record=rule.name, expr=rule.expr, labels=labels))
            groups.append(
                RuleGroup(
                    name=group.name,
                    service=service.name,
                    pack=BadCases.name,
                    interval=group.interval or None,
                    rules=tuple(rules),
                    source=service.source,
                )
            )
    return groups


def _parses(expr: str) -> bool:
    try:
        parse(expr)
    except PromQLSyntaxError:
        return False
    return True


def _bad_row(service: str) -> DashboardRow:
    """Panels whose queries are valid PromQL but wrong: dashboard queries are linted too."""

    def panel(key: str, expr: str) -> Panel:
        return Panel(
            key=key, title=key, kind="timeseries", unit="short", queries=(PanelQuery(expr=expr),)
        )

    return DashboardRow(
        service=service,
        layer="hardware",
        title="Planted",
        pack=BadCases.name,
        panels=(
            panel("rate-of-gauge", "rate(DCGM_FI_DEV_GPU_TEMP[5m])"),
            panel("percent-vs-ratio", "DCGM_FI_DEV_GPU_UTIL > 0.5"),
            panel("gpu-id", "max by (gpu_id) (DCGM_FI_DEV_GPU_UTIL)"),
            panel("uncollected", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"),
        ),
    )


def _bad_edges(service: str) -> list[InhibitEdge]:
    def edge(name: str, src: str, dst: str, equal: tuple[str, ...]) -> InhibitEdge:
        here = f'service="{service}"'
        return InhibitEdge(
            name=f"{service}-{name}",
            service=service,
            pack=BadCases.name,
            reason="planted by tests/test_scope.py",
            source_matchers=(parse_matcher(src), parse_matcher(here)),
            target_matchers=(parse_matcher(dst), parse_matcher(here)),
            equal=equal,
        )

    per_gpu = ("business_sla_id", "host_name", "resource_gpu_id")
    return [
        edge("typo", 'alertname="GpuTemperatureHihg"', 'alertname="GpuUtilizationLow"', per_gpu),
        edge("gpu-less", 'alertname="GpuNodeDown"', 'alertname="GpuXidError"', per_gpu),
        edge(
            "quiet-mutes-loud", 'alertname="GpuUtilizationLow"', 'alertname="GpuXidError"', per_gpu
        ),
        edge(
            "both-sides",
            'alertname=~"GpuTemperatureHigh|GpuXidError"',
            'alertname=~"GpuTemperatureHigh|GpuUtilizationLow"',
            per_gpu,
        ),
        edge("nothing", 'alertname="GpuXidError"', 'layer="storage"', ("host_name",)),
        edge("back", 'alertname="GpuUtilizationLow"', 'alertname="GpuTemperatureHigh"', per_gpu),
    ]


class BadCases(Pack):
    """Plants bad rule groups, dashboard panels and inhibit edges into every other
    service, so findings differ from shard to shard."""

    name: ClassVar[str] = "scope-bad-cases"

    def metrics(self, ctx: PackContext) -> Iterable[MetricSpec]:
        # A catalogued counter without _total (naming/counter-total), in every shard.
        yield MetricSpec(
            name="scope_bad_requests",
            type=MetricType.COUNTER,
            unit="requests",
            labels=("job",),
            source="scope-test",
        )

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        if service.name == "train-b":
            # An edge whose target is another service's alert: only the whole plan
            # knows train-a's alerts.
            edge = InhibitEdge(
                name="train-b-cross",
                service="train-b",
                pack=BadCases.name,
                reason="planted by tests/test_scope.py",
                source_matchers=(
                    parse_matcher('alertname="GpuNodeDown"'),
                    parse_matcher('business_sla_id="train_b"'),
                ),
                target_matchers=(
                    parse_matcher('alertname="GpuNodeDown"'),
                    parse_matcher('business_sla_id="train_a"'),
                ),
                equal=(),
            )
            return Contribution(inhibit_edges=[edge])
        if not service.name.endswith(("1", "3", "5")):
            return Contribution()
        return Contribution(
            rule_groups=_bad_groups(service),
            dashboard_rows=[_bad_row(service.name)],
            inhibit_edges=_bad_edges(service.name),
        )


class MangledBoards(Generator):
    """A service-scope generator of broken dashboards (one per service), for the
    dashboard/* rules: a bad uid, no title, duplicate panel ids, overlapping panels, an
    unused and an undefined variable, a legend naming a label the series lacks."""

    name: ClassVar[str] = "scope-mangled-boards"
    scope: ClassVar[GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        for svc in plan.services:
            prometheus = {"type": "prometheus", "uid": "prom"}
            undefined = {"expr": 'up{job="$undefined"}', "refId": "A"}
            # Collected by some bench services (gpu.extra_fields), not by others.
            # ... with a legend naming a label it never has (dashboard/legend-labels).
            sm_clock = {
                "expr": "DCGM_FI_DEV_SM_CLOCK",
                "refId": "B",
                "legendFormat": "{{no_such_label}}",
            }
            board = {
                "uid": f"bad uid {svc.name}",
                "title": "",
                "panels": [
                    {
                        "id": 7,
                        "title": "a",
                        "datasource": prometheus,
                        "gridPos": {"x": 0, "y": 0, "w": 12, "h": 8},
                        "targets": [sm_clock],
                    },
                    {
                        "id": 7,
                        "title": "b",
                        "datasource": prometheus,
                        "gridPos": {"x": 6, "y": 0, "w": 30, "h": 8},
                        "targets": [undefined],
                    },
                ],
                "templating": {"list": [{"name": "unused", "type": "custom", "query": "x"}]},
            }
            yield Artifact(
                f"grafana/dashboards/mangled-{svc.name}.json",
                "json",
                board,
                self.name,
                (svc.source.file,),
                services=(svc.name,),
            )


def _service_source(name: str, **sections: str) -> str:
    text = BLUEPRINT.replace("train-a", name).replace("train_a", name.replace("-", "_"))
    return text.format(inhibitions=sections.get("inhibitions", "{}"))


@pytest.fixture(scope="module")
def bad_fleet(tmp_path_factory: pytest.TempPathFactory) -> ScopeFleet:
    root = make_fleet(tmp_path_factory.mktemp("bad"), 6)
    folder = root / "blueprints"
    # An expired suppression, and no logs section (logs/sla-stream-label then reports it).
    expired = (LINT_CASES / "lint" / "expired-suppression" / "bad.blueprint.py").read_text()
    (folder / "expired.py").write_text(expired)
    # Logs that lose the SLA stream label.
    recomm = (REPO / "blueprints" / "recomm_v2.py").read_text()
    marker = 'rank_prefix="pytorch-rank-prefix",'
    assert marker in recomm
    dropped = recomm.replace(marker, marker + '\n        drop_labels=("business_sla_id",),')
    (folder / "recomm_v2.py").write_text(dropped)
    # Dotted label keys in an inhibit edge (inhibit/dotted-label), and a plain neighbour.
    dotted = ADD.format(src='"GpuTemperatureHigh"', sm="", eq='"host.name", "resource.gpu.id"')
    (folder / "train_a.py").write_text(_service_source("train-a", inhibitions=dotted))
    (folder / "train_b.py").write_text(_service_source("train-b"))
    plugins = plugin_set(extra_packs=[BadCases()], extra_generators=[MangledBoards()])
    return compile_workspace(root, plugins=plugins)


# -- the declarations ------------------------------------------------------------------------


def test_every_builtin_declares_its_scope_on_the_class() -> None:
    # Not inherited by accident: each class (or its own base in obs-iac) says it.
    for name, plugin in EVERYTHING.items():
        assert any(
            "scope" in vars(k)
            for k in type(plugin).__mro__[:-1]
            if k
            not in (
                Generator,
                LintRule,
            )
        ), f"{name} does not declare a scope"


def test_the_expensive_plugins_are_per_service() -> None:
    expensive = [
        "grafana-dashboards",
        "promtool-tests",
        "prometheus-rules",
        "dcgm/field-not-collected",
        "dashboard/variables",
        "alert/for-shorter-than-interval",
        "promql/syntax",
        "labels/did-you-mean",
        "promql/label-flow",
    ]
    assert {name: EVERYTHING[name].scope for name in expensive} == dict.fromkeys(
        expensive, "service"
    )


def test_no_builtin_lint_rule_forces_the_slow_path() -> None:
    """A fleet-scope rule makes the engine ship every artifact to one process."""
    fleet_wide = sorted(code for code, rule in RULES.items() if rule.scope == "fleet")
    assert fleet_wide == []


def test_rules_that_read_the_clock_are_not_cached_per_service() -> None:
    assert RULES["lint/expired-suppression"].scope == "plan"


@pytest.mark.parametrize("name", sorted(EVERYTHING))
def test_scope_holds_on_the_examples(name: str, example_fleet: ScopeFleet) -> None:
    result = assert_scope_holds(example_fleet, EVERYTHING[name], lint_inputs=INPUTS)
    assert result.whole == result.sharded
    if name in GENERATORS:
        assert result.whole, f"{name} writes nothing for the examples: a vacuous check"


@pytest.mark.parametrize("name", sorted(EVERYTHING))
def test_scope_holds_on_a_synthetic_fleet(name: str, bench_fleet: ScopeFleet) -> None:
    result = assert_scope_holds(bench_fleet, EVERYTHING[name], lint_inputs=INPUTS)
    assert result.whole == result.sharded


@pytest.fixture(scope="module")
def one_service_fleet(tmp_path_factory: pytest.TempPathFactory) -> ScopeFleet:
    root = tmp_path_factory.mktemp("one")
    (root / "blueprints").mkdir()
    blueprint = LINT_CASES / "dcgm" / "field-not-collected" / "blueprint.py"
    (root / "blueprints" / "svc_a.py").write_text(blueprint.read_text())
    return compile_workspace(root)


@pytest.mark.parametrize("name", sorted(EVERYTHING))
def test_scope_holds_on_one_service(name: str, one_service_fleet: ScopeFleet) -> None:
    # One service: its shard and the whole plan hold the same service, only the
    # fleet-level files (the overview dashboard) move to the fleet-shard call.
    result = assert_scope_holds(one_service_fleet, EVERYTHING[name], lint_inputs=INPUTS)
    assert result.whole == result.sharded


@pytest.mark.parametrize("code", sorted(RULES))
def test_scope_holds_with_findings(code: str, bad_fleet: ScopeFleet) -> None:
    result = assert_scope_holds(bad_fleet, RULES[code], lint_inputs=INPUTS)
    assert result.whole == result.sharded
    if code not in NO_PLANTED_CASE:
        assert result.whole, f"{code}: no finding in the bad fleet, so the check proves nothing"
    if RULES[code].scope == "service" and result.whole:
        # Findings come from more than one call, so the union is really exercised.
        owners = {d.object_path[0] for d in result.whole if d.object_path}
        assert len(owners) > 1 or code in ONE_OWNER, (code, owners)


# Findings the plan cannot hold: structure problems exist only in hand-written files.
NO_PLANTED_CASE = frozenset({"rules/structure"})
# Only one service of the bad fleet carries these mistakes.
ONE_OWNER = frozenset({"lint/expired-suppression", "inhibit/dotted-label"})


def test_a_bad_fleet_covers_every_generator(bad_fleet: ScopeFleet) -> None:
    for name, gen in GENERATORS.items():
        assert assert_scope_holds(bad_fleet, gen).whole, name


# -- a wrong declaration is caught ----------------------------------------------------------


class PeersGenerator(Generator):
    """Claims "service" but lists every service of the plan it is given."""

    name: ClassVar[str] = "scope-peers"
    scope: ClassVar[GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        peers = [s.name for s in plan.services]
        for svc in plan.services:
            yield Artifact(f"peers/{svc.name}.json", "json", {"peers": peers}, self.name)


class LonelyService(LintRule):
    """Claims "service" but compares services: 'the only service of team X'."""

    code: ClassVar[str] = "scope/lonely"
    scope: ClassVar[LintScope] = "service"

    def check(self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext) -> Any:
        from obs_iac.diagnostics import Diagnostic, Severity

        teams = [s.team for s in plan.services]
        for svc in plan.services:
            if teams.count(svc.team) == 1:
                yield Diagnostic(self.code, Severity.WARNING, f"{svc.name} is alone")


class FleetArtifactsOnly(LintRule):
    """Claims "plan" but reads a service-scope generator's files."""

    code: ClassVar[str] = "scope/rule-files"
    scope: ClassVar[LintScope] = "plan"

    def check(self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext) -> Any:
        from obs_iac.diagnostics import Diagnostic, Severity

        for art in artifacts:
            if art.generator == "prometheus-rules":
                yield Diagnostic(self.code, Severity.INFO, art.path)


def test_a_generator_that_reads_other_services_is_caught(bench_fleet: ScopeFleet) -> None:
    with pytest.raises(AssertionError, match="scope-peers"):
        assert_scope_holds(bench_fleet, PeersGenerator())


def test_a_generator_whose_shards_write_one_path_is_caught(bench_fleet: ScopeFleet) -> None:
    class OneFile(PeersGenerator):
        name: ClassVar[str] = "scope-one-file"

        def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
            yield Artifact("peers.json", "json", sorted(s.name for s in plan.services), self.name)

    with pytest.raises(AssertionError, match=r"more than one shard writes peers\.json"):
        assert_scope_holds(bench_fleet, OneFile())


def test_a_service_rule_that_compares_services_is_caught(bench_fleet: ScopeFleet) -> None:
    # Every bench team has one service among 12, so the whole plan says "alone" for all
    # of them; a shard always has exactly one service, so it says so too: agreement...
    assert assert_scope_holds(bench_fleet, LonelyService()).whole
    # ...until two services share a team, which only the whole plan can see.
    shared = compile_workspace_with_shared_team(bench_fleet)
    with pytest.raises(AssertionError, match="scope/lonely"):
        assert_scope_holds(shared, LonelyService())


def compile_workspace_with_shared_team(fleet: ScopeFleet) -> ScopeFleet:
    plan = fleet.plan
    services = tuple(
        s.model_copy(update={"team": "shared"}) if i < 2 else s for i, s in enumerate(plan.services)
    )
    compiled = type(fleet.compiled)(
        plan.model_copy(update={"services": services}), fleet.compiled.contributions, fleet.config
    )
    # Shards take their service from the plan, so they see the shared team one at a time.
    return ScopeFleet(compiled, fleet.plugins, fleet.config, fleet.inputs)


def test_a_plan_rule_that_reads_service_artifacts_is_caught(bench_fleet: ScopeFleet) -> None:
    with pytest.raises(AssertionError, match="scope/rule-files"):
        assert_scope_holds(bench_fleet, FleetArtifactsOnly())


def test_fleet_scope_has_nothing_to_compare(bench_fleet: ScopeFleet) -> None:
    class Anything(PeersGenerator):
        name: ClassVar[str] = "scope-anything"
        scope: ClassVar[GeneratorScope] = "fleet"

    result = assert_scope_holds(bench_fleet, Anything())
    assert result.scope == "fleet" and result.whole == result.sharded and result.whole


@pytest.mark.parametrize(
    ("code", "narrower"),
    [
        ("naming/counter-total", "plan"),  # records lose their generated line
        ("rules/duplicate-group", "service"),  # group names repeat across services
        ("inhibit/no-match", "service"),  # train-b's edge targets train-a's alert
        ("inhibit/cycle", "service"),
        ("inhibit/operator-global", "service"),  # reads the fleet-scope operator output
    ],
)
def test_the_wider_scopes_are_needed(code: str, narrower: str, bad_fleet: ScopeFleet) -> None:
    """Each plugin left wider than "service" fails when declared narrower."""
    rule = RULES[code]
    narrowed = type("Narrowed", (type(rule),), {"scope": narrower})()
    with pytest.raises(AssertionError, match=code):
        assert_scope_holds(bad_fleet, narrowed, lint_inputs=INPUTS)


def test_compile_blueprints_takes_sources_in_memory() -> None:
    fleet = compile_blueprints(
        {"a.py": _service_source("train-a"), "b.py": _service_source("train-b")},
        extra_generators=[PeersGenerator()],
    )
    assert [s.name for s in fleet.plan.services] == ["train-a", "train-b"]
    assert assert_scope_holds(fleet, GENERATORS["prometheus-rules"]).whole
    with pytest.raises(AssertionError, match=r"peers/train-a\.json"):
        assert_scope_holds(fleet, PeersGenerator())
