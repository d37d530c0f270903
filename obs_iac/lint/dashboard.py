"""Lint rules over generated Grafana dashboards (any JSON artifact under
``grafana/dashboards/``), checked on the JSON itself so they hold for any generator.

Hook for query lint / label-flow: :func:`dashboard_queries` yields every query of every
dashboard with its datasource type, so a PromQL/LogQL rule can check them without
knowing the dashboard JSON layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from obs_iac.diagnostics import Diagnostic, Location
from obs_iac.generators.grafana.layout import GRID_COLUMNS, UID_PATTERN, GridPos
from obs_iac.generators.grafana.queries import BUILTIN_VARIABLES, referenced_variables
from obs_iac.plan.model import Plan
from obs_iac.plugins import LintContext, LintRule, LintScope
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


__all__ = [
    "DashboardGrid",
    "DashboardPanelIds",
    "DashboardQuery",
    "DashboardUid",
    "DashboardVariables",
    "dashboard_queries",
]
