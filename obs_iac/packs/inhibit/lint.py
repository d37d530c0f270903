"""Static checks over every inhibit edge in the plan, whichever pack or blueprint made it.

Each rule is a ``LintRule`` (entry-point group ``obs_iac.lint_rules``, code
``inhibit/<name>``) with a page under ``docs/lint/inhibit/``. They reason about the
alerts Alertmanager will actually receive: alertname + rule labels (known values) and
the labels of the expression's output series (see ``analysis.LabelFlow``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from obs_iac.diagnostics import Diagnostic, Location, Severity
from obs_iac.packs.inhibit.analysis import AlertIndex, AlertInfo, inhibit_view
from obs_iac.packs.inhibit.matchers import literal_values, provably_disjoint, render
from obs_iac.plan.model import InhibitEdge, Plan
from obs_iac.plugins import LintContext, LintRule, LintScope
from obs_iac.render.artifact import Artifact

# Higher pages louder. Unknown severities are not ranked (no finding).
SEVERITY_RANK = {"info": 0, "none": 0, "ticket": 1, "warning": 1, "page": 2, "critical": 2}


def _location(edge: InhibitEdge) -> Location | None:
    if edge.source is None:
        return None
    return Location(edge.source.file, edge.source.line)


def _path(edge: InhibitEdge) -> tuple[str, ...]:
    return (edge.service or "(fleet-wide)", "inhibit", edge.name)


_SUPPRESSIONS: list[tuple[Plan, dict[str, list[Any]]]] = []


def _suppressions(plan: Plan) -> dict[str, list[Any]]:
    """Suppress entries by service name, built once per plan (every rule asks per edge)."""
    if not _SUPPRESSIONS or _SUPPRESSIONS[0][0] is not plan:
        by_service: dict[str, list[Any]] = {}
        for svc in plan.services:
            by_service.setdefault(svc.name, []).extend(svc.suppressions)
        _SUPPRESSIONS[:] = [(plan, by_service)]
    return _SUPPRESSIONS[0][1]


def _suppressed(plan: Plan, edge: InhibitEdge, code: str) -> bool:
    """A service's ``suppress`` entry for this code, for every edge or this edge's name."""
    if edge.service is None:
        return False
    return any(
        sup.get("code") == code and sup.get("target") in (None, edge.name)
        for sup in _suppressions(plan).get(edge.service, ())
    )


def _names(alerts: Iterable[AlertInfo]) -> str:
    return ", ".join(sorted({a.name for a in alerts}))


class InhibitRule(LintRule):
    """Common loop: one edge at a time, honouring per-service suppressions."""

    # An edge's matchers may select alerts of any service (AlertIndex over the plan).
    scope: ClassVar[LintScope] = "plan"

    def fleet_view(self, shard: Plan, ctx: LintContext) -> Any:
        return inhibit_view(shard)

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterator[Diagnostic]:
        index = AlertIndex.of_plan(plan)
        for edge in plan.inhibit_edges:
            if _suppressed(plan, edge, self.code):
                continue
            yield from self.edge(edge, index, plan)

    def edge(self, edge: InhibitEdge, index: AlertIndex, plan: Plan) -> Iterator[Diagnostic]:
        raise NotImplementedError

    def diag(
        self,
        edge: InhibitEdge,
        message: str,
        hint: str,
        severity: Severity | None = None,
    ) -> Diagnostic:
        return Diagnostic(
            self.code,
            severity if severity is not None else self.default_severity,
            f"inhibit edge {edge.name!r}: {message}",
            hint=f"{hint} (see docs/lint/{self.code}.md)",
            location=_location(edge),
            object_path=_path(edge),
            origin=f"pack {edge.pack}",
        )


class UnknownAlert(InhibitRule):
    code: ClassVar[str] = "inhibit/unknown-alert"
    # Blueprint edges naming a missing alert are already input errors (exit 2); a pack's
    # edge usually names another pack's alert, and that pack may simply not be installed:
    # the edge is then dead, not dangerous.
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = "An edge names an alert that no pack generates."

    def edge(self, edge: InhibitEdge, index: AlertIndex, plan: Plan) -> Iterator[Diagnostic]:
        known = sorted(index.names)
        for side, matchers in (("source", edge.source_matchers), ("target", edge.target_matchers)):
            for m in matchers:
                if m.name != "alertname":
                    continue
                for name in sorted(literal_values(m) or ()):
                    if name in index.names:
                        continue
                    close = difflib.get_close_matches(name, known, n=1)
                    yield self.diag(
                        edge,
                        f"{side} matcher {render(m)} names alert {name!r}, which no pack generates",
                        (f"did you mean {close[0]!r}? " if close else "")
                        + "fix the alert name, install the pack that generates it, or "
                        "disable the edge",
                    )


class Overlap(InhibitRule):
    code: ClassVar[str] = "inhibit/overlap"
    description: ClassVar[str] = "Source and target matchers could match the same alert."

    def edge(self, edge: InhibitEdge, index: AlertIndex, plan: Plan) -> Iterator[Diagnostic]:
        both = [a for a in index.sources(edge) if a.matches_all(edge.target_matchers)]
        if both:
            return  # a generated alert on both sides: inhibit/self-inhibition reports it
        if provably_disjoint(edge.source_matchers, edge.target_matchers) is not None:
            return
        yield self.diag(
            edge,
            "its source and target matchers are not provably disjoint, so one alert could "
            "match both; Alertmanager then never inhibits it by its own kind, and from 0.30 "
            "such a source can shadow a genuine source with the same equal labels",
            "pin alertname (or another label) to different values on the two sides",
        )


class SelfInhibition(InhibitRule):
    code: ClassVar[str] = "inhibit/self-inhibition"
    description: ClassVar[str] = "A generated alert matches both sides of an edge."

    def edge(self, edge: InhibitEdge, index: AlertIndex, plan: Plan) -> Iterator[Diagnostic]:
        both = [a for a in index.sources(edge) if a.matches_all(edge.target_matchers)]
        if both:
            yield self.diag(
                edge,
                f"{_names(both)} match both the source and the target side; an alert "
                "is never inhibited by alerts of its own kind, so the edge does not do "
                "what it says for them",
                "remove these alerts from one side",
            )


class EqualMissing(InhibitRule):
    code: ClassVar[str] = "inhibit/equal-missing"
    description: ClassVar[str] = "An `equal` label is not on every alert the edge connects."

    def edge(self, edge: InhibitEdge, index: AlertIndex, plan: Plan) -> Iterator[Diagnostic]:
        sources, targets = index.sources(edge), index.targets(edge)
        for label in edge.equal:
            absent_src = [a for a in sources if a.label_state(label) == "absent"]
            absent_dst = [a for a in targets if a.label_state(label) == "absent"]
            unknown = [a for a in (*sources, *targets) if a.label_state(label) == "unknown"]
            if absent_src or absent_dst:
                parts = []
                if absent_src:
                    parts.append(f"source alerts {_names(absent_src)}")
                if absent_dst:
                    parts.append(f"target alerts {_names(absent_dst)}")
                both = bool(absent_src and absent_dst)
                yield self.diag(
                    edge,
                    f"equal label {label!r} is never on {' and '.join(parts)}; a missing "
                    "label compares as the empty value"
                    + (
                        ", so between these alerts the edge is global: any one of them "
                        "mutes the other everywhere"
                        if both
                        else ", so those alerts can never be paired"
                    ),
                    f"keep {label!r} in the alerts' expressions (e.g. in `by (...)`), or "
                    "drop it from equal",
                )
            elif unknown:
                yield self.diag(
                    edge,
                    f"cannot prove that {_names(unknown)} carry equal label {label!r}: their "
                    "expressions read series that are not in the metric catalogue",
                    "add the series to a pack's metric catalogue, or suppress with a reason",
                    Severity.WARNING,
                )


class Cycle(InhibitRule):
    code: ClassVar[str] = "inhibit/cycle"
    description: ClassVar[str] = "Alerts that inhibit each other, directly or through others."

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterator[Diagnostic]:
        index = AlertIndex.of_plan(plan)
        graph: dict[tuple[str, str], dict[tuple[str, str], InhibitEdge]] = {}
        for edge in plan.inhibit_edges:
            if _suppressed(plan, edge, self.code):
                continue
            for src, dst in index.pairs(edge):
                graph.setdefault(src.key, {}).setdefault(dst.key, edge)
        reported: set[frozenset[tuple[str, str]]] = set()
        for start in sorted(graph):
            path = _find_cycle(graph, start)
            if path is None or frozenset(path) in reported:
                continue
            reported.add(frozenset(path))
            hops = list(zip(path, path[1:] + path[:1], strict=True))
            edges = [graph[a][b] for a, b in hops]
            chain = " -> ".join(f"{a[1]} ({graph[a][b].name})" for a, b in hops)
            yield self.diag(
                edges[0],
                f"inhibition cycle {chain} -> {path[0][1]}: when these fire together they "
                "can mute each other and nobody is notified",
                "decide which alert is the cause and remove the edge that points back at it",
            )


def _find_cycle(
    graph: dict[tuple[str, str], dict[tuple[str, str], InhibitEdge]], start: tuple[str, str]
) -> list[tuple[str, str]] | None:
    """The shortest cycle through ``start`` (breadth-first), as a list of nodes."""
    parents: dict[tuple[str, str], tuple[str, str]] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        nxt = []
        for node in frontier:
            for succ in sorted(graph.get(node, {})):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return list(reversed(path))
                if succ not in seen:
                    seen.add(succ)
                    parents[succ] = node
                    nxt.append(succ)
        frontier = nxt
    return None


class SeverityOrder(InhibitRule):
    code: ClassVar[str] = "inhibit/severity-order"
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = "A lower-severity alert mutes a higher-severity one."

    def edge(self, edge: InhibitEdge, index: AlertIndex, plan: Plan) -> Iterator[Diagnostic]:
        bad = []
        for src, dst in index.pairs(edge):
            s, t = SEVERITY_RANK.get(src.severity or ""), SEVERITY_RANK.get(dst.severity or "")
            if s is not None and t is not None and s < t:
                bad.append(f"{src.name} ({src.severity}) mutes {dst.name} ({dst.severity})")
        if bad:
            yield self.diag(
                edge,
                "; ".join(sorted(set(bad))),
                "a quieter alert should not silence a louder one; swap the sides or raise "
                "the source's severity",
            )


class NoMatch(InhibitRule):
    code: ClassVar[str] = "inhibit/no-match"
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = "An edge whose source or target side matches no alert."

    def edge(self, edge: InhibitEdge, index: AlertIndex, plan: Plan) -> Iterator[Diagnostic]:
        for m in (*edge.source_matchers, *edge.target_matchers):
            if m.name == "alertname" and not (literal_values(m) or set()) <= index.names:
                return  # inhibit/unknown-alert names the culprit
        empty = [
            side
            for side, alerts in (("source", index.sources(edge)), ("target", index.targets(edge)))
            if not alerts
        ]
        if empty:
            yield self.diag(
                edge,
                f"its {' and '.join(empty)} matchers match no generated alert, so it never "
                "inhibits anything",
                "check the matchers against the generated rules, or disable the edge",
            )


class DottedLabel(LintRule):
    """Re-reports the label spellings the inhibit pack mapped while expanding."""

    code: ClassVar[str] = "inhibit/dotted-label"
    # Notes are made while expanding one service and name it.
    scope: ClassVar[LintScope] = "service"
    default_severity: ClassVar[Severity] = Severity.WARNING
    description: ClassVar[str] = "A dotted canonical key in an edge was mapped to its spelling."

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterator[Diagnostic]:
        for note in plan.extensions.get("inhibit/notes", ()):
            if not isinstance(note, dict) or note.get("code") != self.code:
                continue
            suppressed = any(
                s.name == note.get("service")
                and any(
                    x.get("code") == self.code and x.get("target") in (None, note.get("edge"))
                    for x in s.suppressions
                )
                for s in plan.services
            )
            if suppressed:
                continue
            yield Diagnostic(
                self.code,
                self.default_severity,
                str(note["message"]),
                hint=f"{note['hint']} (see docs/lint/{self.code}.md)",
                location=Location(str(note["file"]), note.get("line"), note.get("column")),
                object_path=(str(note.get("service")), "inhibitions"),
                origin="pack inhibit",
            )


class OperatorGlobal(LintRule):
    """Explains which edges the operator output had to put into the global config."""

    code: ClassVar[str] = "inhibit/operator-global"
    # Placement reads every service's alerts; alertmanager-operator is fleet-scope, so
    # its artifacts are among the ones a plan-scope rule sees.
    scope: ClassVar[LintScope] = "plan"
    default_severity: ClassVar[Severity] = Severity.INFO
    description: ClassVar[str] = (
        "An edge cannot live in a namespaced AlertmanagerConfig under the matcher strategy."
    )

    def fleet_view(self, shard: Plan, ctx: LintContext) -> Any:
        return inhibit_view(shard)

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterator[Diagnostic]:
        from obs_iac.generators.alertmanager import OperatorConfig, operator_placement

        if not any(a.generator == "alertmanager-operator" for a in artifacts):
            return
        settings = OperatorConfig.model_validate(
            dict(ctx.repo.generators.get("alertmanager-operator", {}))
        )
        index = AlertIndex.of_plan(plan)
        for edge in plan.inhibit_edges:
            if _suppressed(plan, edge, self.code):
                continue
            where, why = operator_placement(edge, index, settings)
            if where == "global":
                yield Diagnostic(
                    self.code,
                    self.default_severity,
                    f"inhibit edge {edge.name!r} goes to the global AlertmanagerConfig: {why}",
                    hint="see the comments in the generated global-inhibit-rules.yaml "
                    f"(docs/lint/{self.code}.md)",
                    location=_location(edge),
                    object_path=_path(edge),
                    origin=f"pack {edge.pack}",
                )


ALL_RULES: tuple[type[LintRule], ...] = (
    UnknownAlert,
    Overlap,
    SelfInhibition,
    EqualMissing,
    Cycle,
    SeverityOrder,
    NoMatch,
    DottedLabel,
    OperatorGlobal,
)
