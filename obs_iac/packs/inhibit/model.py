"""The ``inhibitions`` blueprint section: add, override or disable inhibit edges by name."""

from __future__ import annotations

from pydantic import Field

from obs_iac.blueprint.models import BlueprintModel

EDGE_NAME = r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$"


class EdgeSpec(BlueprintModel):
    """A new edge: while a source alert fires, mute the target alerts of this service that
    share every ``equal`` label value. Both sides are scoped to this service."""

    name: str = Field(pattern=EDGE_NAME, description="Stable kebab-case edge name.")
    reason: str = Field(min_length=3, description="Why the target is noise while the source fires.")
    source_alerts: tuple[str, ...] = Field(min_length=1, description="Alert names that inhibit.")
    target_alerts: tuple[str, ...] = Field(min_length=1, description="Alert names to mute.")
    source_matchers: tuple[str, ...] = Field(
        default=(),
        description="Extra Alertmanager matchers on the source side, e.g. 'layer=\"hardware\"'.",
    )
    target_matchers: tuple[str, ...] = Field(
        default=(), description="Extra Alertmanager matchers on the target side."
    )
    equal: tuple[str, ...] = Field(
        min_length=1,
        description="Labels whose values must be equal on source and target (canonical "
        "keys may be written dotted; they are mapped to the repository's spelling).",
    )


class EdgeOverride(BlueprintModel):
    """Replaces parts of an existing edge (a pack's or this blueprint's); unset fields keep
    their value. Giving ``source_alerts`` or ``source_matchers`` rewrites the whole source
    side (likewise for the target side)."""

    name: str = Field(pattern=EDGE_NAME, description="Name of the edge to change.")
    reason: str = Field(min_length=3, description="Why the edge differs for this service.")
    source_alerts: tuple[str, ...] | None = Field(default=None, description="New source alerts.")
    target_alerts: tuple[str, ...] | None = Field(default=None, description="New target alerts.")
    source_matchers: tuple[str, ...] | None = Field(
        default=None, description="New extra source matchers."
    )
    target_matchers: tuple[str, ...] | None = Field(
        default=None, description="New extra target matchers."
    )
    equal: tuple[str, ...] | None = Field(default=None, description="New equal labels.")


class EdgeDisable(BlueprintModel):
    """Removes an edge (a pack's built-in one) for this service."""

    name: str = Field(pattern=EDGE_NAME, description="Name of the edge to remove.")
    reason: str = Field(min_length=3, description="Why this service wants the edge gone.")


class Inhibitions(BlueprintModel):
    """Alertmanager inhibit edges of this service: added, changed or removed by name."""

    add: tuple[EdgeSpec, ...] = Field(default=(), description="Edges to add.")
    override: tuple[EdgeOverride, ...] = Field(default=(), description="Edges to change.")
    disable: tuple[EdgeDisable, ...] = Field(default=(), description="Edges to remove.")
