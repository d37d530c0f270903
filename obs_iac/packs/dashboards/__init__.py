"""The dashboards pack: owns the blueprint's ``dashboards`` section (per-panel layout
overrides) and checks it, and every pack's panels, once all packs have contributed.

    service(..., dashboards=Dashboards(overrides={"temperature": PanelOverride(width=6),
                                                  "xid-errors": PanelOverride(hide=True)}))

(a plain dict is accepted too).
"""

from __future__ import annotations

import difflib
from typing import ClassVar

from pydantic import BaseModel, Field

from obs_iac.blueprint.models import BlueprintModel
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.generators.grafana.layout import GRID_COLUMNS, duplicate_keys
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plugins import Contribution, Pack, PackContext

PACK = "dashboards"


class PanelOverride(BlueprintModel):
    """Width, height or hiding of one panel, addressed by its stable key."""

    width: int | None = Field(
        default=None, ge=1, le=GRID_COLUMNS, description="Columns of the 24-column grid."
    )
    height: int | None = Field(default=None, ge=1, le=50, description="Height in grid units.")
    hide: bool = Field(default=False, description="Leave the panel out of the dashboard.")


class Dashboards(BlueprintModel):
    """Layout tweaks of a service's cross-layer dashboard, keyed by stable panel key."""

    overrides: dict[str, PanelOverride] = Field(
        default_factory=dict, description="Per panel key: width, height or hide."
    )


# The name it had before it was exported as ``obs_iac.Dashboards``.
DashboardsSection = Dashboards


class DashboardsPack(Pack):
    name: ClassVar[str] = PACK
    description: ClassVar[str] = "Dashboard layout overrides; checks panel keys across packs."
    sections: ClassVar[dict[str, type[BaseModel]]] = {"dashboards": Dashboards}

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        return Contribution()

    def finalize(
        self, service: ServiceBlueprint, draft: Contribution, ctx: PackContext
    ) -> Contribution:
        """Runs after every pack expanded, so it sees the whole dashboard."""
        out = Contribution()
        rows = [r for r in draft.dashboard_rows if r.service == service.name]
        for key, packs in duplicate_keys(rows).items():
            out.diagnostics.append(
                Diagnostic(
                    "dashboard/duplicate-panel-key",
                    Severity.ERROR,
                    f"panel key {key!r} is contributed {len(packs)} times "
                    f"(packs: {', '.join(sorted(packs))})",
                    hint="panel keys must be unique per dashboard: panel ids and overrides "
                    "derive from them; rename the key in one pack",
                    location=service.location(),
                    object_path=(service.name, "dashboards", key),
                    origin=PACK,
                )
            )
        section = service.section("dashboards")
        if not isinstance(section, Dashboards):
            return out
        known = sorted({p.key for r in rows for p in r.panels})
        for key in sorted(section.overrides):
            if key in known:
                continue
            close = difflib.get_close_matches(key, known, n=1)
            out.diagnostics.append(
                Diagnostic(
                    "dashboard/unknown-panel",
                    Severity.ERROR,
                    f"dashboards.overrides names panel {key!r}, which no pack contributes "
                    f"to the dashboard of {service.name}",
                    hint=(f"did you mean {close[0]!r}? " if close else "")
                    + f"panel keys: {', '.join(known) or 'none'}",
                    location=service.location("dashboards", "overrides", key),
                    object_path=(service.name, "dashboards", "overrides", key),
                    origin=PACK,
                )
            )
        return out
