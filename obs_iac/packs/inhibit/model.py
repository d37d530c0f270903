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

    name: str = Field(pattern=EDGE_NAME)
    reason: str = Field(min_length=3, description="Why the edge differs for this service.")
    source_alerts: tuple[str, ...] | None = None
    target_alerts: tuple[str, ...] | None = None
    source_matchers: tuple[str, ...] | None = None
    target_matchers: tuple[str, ...] | None = None
    equal: tuple[str, ...] | None = None


class EdgeDisable(BlueprintModel):
    name: str = Field(pattern=EDGE_NAME)
    reason: str = Field(min_length=3, description="Why this service wants the edge gone.")


class Inhibitions(BlueprintModel):
    add: tuple[EdgeSpec, ...] = ()
    override: tuple[EdgeOverride, ...] = ()
    disable: tuple[EdgeDisable, ...] = ()
