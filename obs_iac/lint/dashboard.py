"""Lint rules over generated Grafana dashboards (any JSON artifact under
``grafana/dashboards/``), checked on the JSON itself so they hold for any generator.

Hook for query lint / label-flow: :func:`dashboard_queries` yields every query of every
dashboard with its datasource type, so a PromQL/LogQL rule can check them without
knowing the dashboard JSON layout.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from obs_iac.diagnostics import Diagnostic, Location
from obs_iac.generators.grafana.layout import GRID_COLUMNS, UID_PATTERN, GridPos
from obs_iac.generators.grafana.queries import BUILTIN_VARIABLES, referenced_variables
from obs_iac.plan.model import Plan
from obs_iac.plugins import LintContext, LintRule, LintScope
from obs_iac.promql import PromQLSyntaxError
from obs_iac.promql.labelflow import MetricFacts, analyze
from obs_iac.render.artifact import Artifact

DASHBOARD_DIR = "grafana/dashboards/"


@dataclass(frozen=True)
class DashboardQuery:
    """One query of a dashboard panel, for query lint and label-flow rules."""

    artifact: str
    uid: str
    panel_id: int | None
    panel_title: str
    datasource: str  # "prometheus", "loki", or the datasource type written
    expr: str
    ref_id: str


def dashboards(artifacts: Iterable[Artifact]) -> Iterator[Artifact]:
    for art in artifacts:
        if (
            art.format == "json"
            and art.path.startswith(DASHBOARD_DIR)
            and isinstance(art.data, dict)
        ):
            yield art


def all_panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Top-level panels and the panels of collapsed rows."""
    for panel in board.get("panels") or []:
        yield panel
        yield from panel.get("panels") or []


def dashboard_queries(artifacts: Iterable[Artifact]) -> Iterator[DashboardQuery]:
    for art in dashboards(artifacts):
        uid = str(art.data.get("uid", ""))
        for panel in all_panels(art.data):
            default = (panel.get("datasource") or {}).get("type", "")
            for target in panel.get("targets") or []:
                if "expr" not in target:
                    continue
                ds = (target.get("datasource") or {}).get("type", default)
                yield DashboardQuery(
                    art.path,
                    uid,
                    panel.get("id"),
                    str(panel.get("title", "")),
                    str(ds),
                    str(target["expr"]),
                    str(target.get("refId", "")),
                )


def _where(art: Artifact) -> Location:
    # Findings point at the blueprint that made the dashboard where there is one.
    return Location(art.sources[0]) if len(art.sources) == 1 else Location(art.path)


class _DashboardRule(LintRule):
    def _diag(self, art: Artifact, message: str, hint: str, *path: str) -> Diagnostic:
        return Diagnostic(
            self.code,
            self.default_severity,
            message,
            hint=hint,
            location=_where(art),
            object_path=(str(art.data.get("uid", art.path)), *path),
            origin=self.code,
        )


class DashboardUid(_DashboardRule):
    code: ClassVar[str] = "dashboard/uid"
    # Per dashboard, plus uniqueness among the dashboards of one call. Across services it
    # holds by construction: a dashboard's file is grafana/dashboards/<uid>.json and the
    # pipeline rejects two artifacts with one path, whichever shards made them; third
    # party dashboards under other paths come from fleet-scope generators unless their
    # author declares otherwise (docs/plugins.md, "Scope").
    scope: ClassVar[LintScope] = "service"
    description: ClassVar[str] = "Dashboard uids use [a-zA-Z0-9-_], at most 40, and are unique."

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterable[Diagnostic]:
        seen: dict[str, str] = {}
        for art in dashboards(artifacts):
            uid = art.data.get("uid")
            if not isinstance(uid, str) or not UID_PATTERN.fullmatch(uid):
                yield self._diag(
                    art,
                    f"{art.path}: uid {uid!r} is not 1-40 characters of [a-zA-Z0-9-_]",
                    "Grafana rejects such uids; derive uids with layout.stable_uid()",
                )
                continue
            if uid in seen:
                yield self._diag(
                    art,
                    f"{art.path}: uid {uid!r} is also used by {seen[uid]}",
                    "uids are unique per Grafana instance; the second would overwrite the first",
                )
            seen.setdefault(uid, art.path)
            if not str(art.data.get("title", "")).strip():
                yield self._diag(
                    art,
                    f"{art.path}: the dashboard has no title",
                    "file provisioning rejects a dashboard with an empty title",
                )


class DashboardPanelIds(_DashboardRule):
    code: ClassVar[str] = "dashboard/panel-ids"
    scope: ClassVar[LintScope] = "service"  # within one dashboard
    description: ClassVar[str] = "Every panel (rows included) has a unique integer id."

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterable[Diagnostic]:
        for art in dashboards(artifacts):
            seen: dict[int, str] = {}
            for panel in all_panels(art.data):
                pid, title = panel.get("id"), str(panel.get("title", ""))
                if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
                    yield self._diag(
                        art,
                        f"panel {title!r} has no positive integer id ({pid!r})",
                        "links, alerts and annotations address panels by id",
                        title,
                    )
                elif pid in seen:
                    yield self._diag(
                        art,
                        f"panels {seen[pid]!r} and {title!r} share id {pid}",
                        "Grafana then shows or links the wrong panel; panel keys must differ",
                        title,
                    )
                else:
                    seen[pid] = title


class DashboardGrid(_DashboardRule):
    code: ClassVar[str] = "dashboard/grid"
    scope: ClassVar[LintScope] = "service"  # within one dashboard
    description: ClassVar[str] = "gridPos stays inside 24 columns and panels do not overlap."

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterable[Diagnostic]:
        for art in dashboards(artifacts):
            placed: list[tuple[str, GridPos]] = []
            for panel in art.data.get("panels") or []:
                title = str(panel.get("title", ""))
                raw = panel.get("gridPos") or {}
                try:
                    grid = GridPos(int(raw["x"]), int(raw["y"]), int(raw["w"]), int(raw["h"]))
                except (KeyError, TypeError, ValueError):
                    yield self._diag(
                        art,
                        f"panel {title!r} has no complete gridPos {{x, y, w, h}}",
                        "every panel needs a position",
                        title,
                    )
                    continue
                if not (
                    0 <= grid.x < GRID_COLUMNS
                    and 1 <= grid.w <= GRID_COLUMNS
                    and grid.x + grid.w <= GRID_COLUMNS
                    and grid.y >= 0
                    and grid.h >= 1
                ):
                    yield self._diag(
                        art,
                        f"panel {title!r} at x={grid.x} w={grid.w} leaves the 24-column grid",
                        "reduce the width (dashboards.overrides.<key>.width) or the offset",
                        title,
                    )
                for other_title, other in placed:
                    if grid.overlaps(other):
                        yield self._diag(
                            art,
                            f"panels {other_title!r} and {title!r} overlap",
                            "Grafana would push one of them down and break the layout",
                            title,
                        )
                placed.append((title, grid))
            yield from self._gaps(art)

    def _gaps(self, art: Artifact) -> Iterator[Diagnostic]:
        """Within each row, the panels starting on one line fill the 24 columns and
        share one height: no hole to the right of a line or under a short panel."""
        row_title = "(top)"
        lines: dict[tuple[str, int], list[tuple[str, GridPos]]] = {}
        for panel in art.data.get("panels") or []:
            raw = panel.get("gridPos") or {}
            try:
                grid = GridPos(int(raw["x"]), int(raw["y"]), int(raw["w"]), int(raw["h"]))
            except (KeyError, TypeError, ValueError):
                continue  # reported above
            if panel.get("type") == "row":
                row_title = str(panel.get("title", ""))
                continue
            lines.setdefault((row_title, grid.y), []).append((str(panel.get("title", "")), grid))
        for (row, y), members in lines.items():
            members.sort(key=lambda m: m[1].x)
            x = 0
            holes = []
            for _title, grid in members:
                if grid.x > x:
                    holes.append(f"{x}-{grid.x - 1}")
                x = max(x, grid.x + grid.w)
            if x < GRID_COLUMNS:
                holes.append(f"{x}-{GRID_COLUMNS - 1}")
            heights = {g.h for _t, g in members}
            if holes:
                yield self._diag(
                    art,
                    f"row {row!r}: the line at y={y} leaves columns {', '.join(holes)} empty",
                    "widen a panel of the line (dashboards.overrides.<key>.width) or move one "
                    "up from the next line",
                    row,
                )
            if len(heights) > 1:
                yield self._diag(
                    art,
                    f"row {row!r}: the panels of the line at y={y} differ in height "
                    f"({', '.join(str(h) for h in sorted(heights))}), leaving a hole under "
                    "the shorter ones",
                    "give the panels of one line one height",
                    row,
                )


# Free text copied from blueprints (the SLA objective) lands in these keys; Grafana shows
# them as written, so a `$` in them is prose, not a variable reference.
_PROSE_KEYS = frozenset({"description", "tooltip"})


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _PROSE_KEYS:
                yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


class DashboardVariables(_DashboardRule):
    code: ClassVar[str] = "dashboard/variables"
    scope: ClassVar[LintScope] = "service"  # within one dashboard
    description: ClassVar[str] = "Every template variable is used, and every reference resolves."

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterable[Diagnostic]:
        for art in dashboards(artifacts):
            variables = (art.data.get("templating") or {}).get("list") or []
            defined = [str(v.get("name", "")) for v in variables]
            used: set[str] = set()
            for text in _texts({k: v for k, v in art.data.items() if k not in ("templating",)}):
                used |= referenced_variables(text)
            # Variables may chain: one variable's query or datasource uses another.
            for var in variables:
                for text in _texts({k: v for k, v in var.items() if k != "name"}):
                    used |= referenced_variables(text) - {str(var.get("name"))}
            for name in defined:
                if name not in used:
                    yield self._diag(
                        art,
                        f"template variable {name!r} is defined but no query uses it",
                        "a filter that filters nothing misleads; use it in a query or drop it",
                        name,
                    )
            for name in sorted(used - set(defined) - BUILTIN_VARIABLES):
                yield self._diag(
                    art,
                    f"${name} is referenced but no template variable defines it",
                    f"define {name!r} under templating.list or fix the reference; defined: "
                    + (", ".join(defined) or "none"),
                    name,
                )


# A legend's label references: {{label}}, with optional spaces.
LEGEND_REF = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_.]*)\s*\}\}")
# Table fields that are not labels: the sample time, the metric name and the values.
_TABLE_FIELDS = re.compile(r"^(Time|__name__|Value|Value #.+)$")


class DashboardLegendLabels(_DashboardRule):
    """A legend is filled from the series' labels; a label the series does not carry
    becomes an empty string (the fleet's "GPU waste rate" legend once read "/"). The
    label flow over the plan's catalogue says which labels each query's series have.

    A table panel reads no legend: its columns are the series' labels and values, named
    by an ``organize`` transformation; those names must be labels the series carry."""

    code: ClassVar[str] = "dashboard/legend-labels"
    scope: ClassVar[LintScope] = "service"  # per dashboard, with the fleet's catalogue
    description: ClassVar[str] = (
        "Every legend names labels its query's series carry (label flow); table panels "
        "name columns with transformations, not legends."
    )

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: LintContext
    ) -> Iterable[Diagnostic]:
        from obs_iac.lint.engine import planned_catalogue

        boards = list(dashboards(artifacts))
        if not boards:
            return
        catalogue, _names = planned_catalogue(plan, ctx.naming.strategy)
        cache: dict[str, frozenset[str] | None] = {}
        for art in boards:
            for panel in all_panels(art.data):
                yield from self._panel(art, panel, catalogue, cache)

    def _panel(
        self,
        art: Artifact,
        panel: dict[str, Any],
        catalogue: dict[str, MetricFacts],
        cache: dict[str, frozenset[str] | None],
    ) -> Iterator[Diagnostic]:
        title = str(panel.get("title", ""))
        table = panel.get("type") == "table"
        default = (panel.get("datasource") or {}).get("type", "")
        columns: set[str] = set()
        closed = True
        for target in panel.get("targets") or []:
            ds = (target.get("datasource") or {}).get("type", default)
            if ds != "prometheus" or "expr" not in target:
                continue
            expr = str(target["expr"])
            if expr not in cache:
                try:
                    cache[expr] = analyze(expr, catalogue).labels
                except PromQLSyntaxError:
                    cache[expr] = None
            labels = cache[expr]
            legend = str(target.get("legendFormat") or "")
            ref = str(target.get("refId", ""))
            if table:
                if legend:
                    yield self._diag(
                        art,
                        f"table panel {title!r}: query {ref} has the legend {legend!r}, which "
                        "a table never shows",
                        "name columns with an organize transformation (renameByName) and set "
                        "units with field overrides",
                        title,
                    )
                if labels is None:
                    closed = False
                else:
                    columns |= labels
                continue
            if labels is None:
                continue  # a series the catalogue does not know: any label may be there
            missing = [n for n in LEGEND_REF.findall(legend) if n not in labels]
            if missing:
                yield self._diag(
                    art,
                    f"panel {title!r}: the legend {legend!r} of query {ref} names "
                    f"{', '.join(missing)}, which the series of {expr!r} do not carry "
                    f"(they have: {', '.join(sorted(labels)) or 'no labels'})",
                    "Grafana fills a missing label with an empty string; name labels the "
                    "query keeps (see the label flow of by/without/on), or a fixed text",
                    title,
                )
        if table and closed:
            yield from self._columns(art, panel, title, columns)

    def _columns(
        self, art: Artifact, panel: dict[str, Any], title: str, labels: set[str]
    ) -> Iterator[Diagnostic]:
        for step in panel.get("transformations") or []:
            if step.get("id") != "organize":
                continue
            options = step.get("options") or {}
            named = set(options.get("renameByName") or {}) | set(options.get("indexByName") or {})
            for name in sorted(named):
                if _TABLE_FIELDS.match(name) or name in labels:
                    continue
                yield self._diag(
                    art,
                    f"table panel {title!r}: the column {name!r} is no label of its "
                    f"queries' series (they have: {', '.join(sorted(labels)) or 'no labels'})",
                    "a column that is not there stays empty; rename a label the queries keep",
                    title,
                )


__all__ = [
    "DashboardGrid",
    "DashboardLegendLabels",
    "DashboardPanelIds",
    "DashboardQuery",
    "DashboardUid",
    "DashboardVariables",
    "dashboard_queries",
]
