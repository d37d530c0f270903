"""The governance pack: owns the blueprint's ``components`` section and the repo-wide
defaults in ``[tool.obs-iac.packs.governance]``. It contributes nothing to the plan; the
section is carried into it so `obs-iac check` can read the declared versions.

    service(..., components={"ebpf_collector": "2.8.1", "prometheus": "3.1.0"})

    [tool.obs-iac.packs.governance]
    compatibility = "compatibility.csv"       # rows added to the built-in matrix
    components = { prometheus = "3.1.0", alertmanager = "0.30.1" }
"""

from __future__ import annotations

import difflib
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from obs_iac.blueprint.models import BlueprintModel
from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.governance.compat import parse_version
from obs_iac.governance.workloads import KNOWN_CHECKS
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plugins import Contribution, Pack, PackContext

PACK = "governance"
SECTION = "components"


class Components(BlueprintModel):
    """Versions of the components around a service, checked against the compatibility
    matrix. GPU model, driver, DCGM and dcgm-exporter come from ``gpu``; the OpenTelemetry
    Collector from ``framework.collector_version`` when the service has that section."""

    ebpf_collector: str | None = Field(
        default=None, description="eBPF collector version on the GPU nodes, e.g. '2.8.1'."
    )
    otel_collector: str | None = Field(
        default=None,
        description="OpenTelemetry Collector version, for services without a framework section.",
    )
    prometheus: str | None = Field(
        default=None,
        description="Prometheus that loads this service's rules (default: the repo-wide "
        "value, else prometheus_min_version).",
    )
    alertmanager: str | None = Field(
        default=None,
        description="Alertmanager that routes this service's alerts (default: the repo-wide "
        "value, else alertmanager_min_version).",
    )

    @field_validator("ebpf_collector", "otel_collector", "prometheus", "alertmanager")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        if value is not None and parse_version(value) is None:
            raise ValueError(
                f"version {value!r} does not parse (PEP 440, e.g. '2.8.1' or '3.0.0rc1')"
            )
        return value


class GovernanceSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    compatibility: str | None = Field(
        default=None,
        description="A CSV of extra compatibility rows, relative to the repository root.",
    )
    components: Components = Field(
        default_factory=Components, description="Repo-wide component versions."
    )
    require_otel: bool = Field(
        default=True,
        description="`obs-iac check` collection: every training service must declare "
        "OpenTelemetry wiring (a framework section). Prefer workload='inference'/'batch' "
        "or a per-service waiver; false waives it for every training service.",
    )


class GovernancePack(Pack):
    name: ClassVar[str] = PACK
    sections: ClassVar[dict[str, type[BaseModel]]] = {SECTION: Components}
    config_model: ClassVar[type[BaseModel]] = GovernanceSettings
    description: ClassVar[str] = (
        "Component versions for the compatibility matrix (obs-iac check, obs-iac score)."
    )

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        out = Contribution()
        # A waiver is read by `obs-iac check`, but a misspelt one would silently waive
        # nothing: it is checked here, where it can point at its line.
        for index, waiver in enumerate(service.service.waive):
            if waiver.check in KNOWN_CHECKS:
                continue
            close = difflib.get_close_matches(waiver.check, KNOWN_CHECKS, n=1, cutoff=0.5)
            out.diagnostics.append(
                Diagnostic(
                    "governance/unknown-waiver",
                    Severity.ERROR,
                    f"waive[{index}].check: {waiver.check!r} is no requirement of obs-iac check",
                    hint=(f"did you mean {close[0]!r}? " if close else "")
                    + "requirements: "
                    + ", ".join(c for c in KNOWN_CHECKS if "/" in c)
                    + "; or a whole dimension",
                    location=service.location("waive", index, "check"),
                    object_path=(service.name, "waive", str(index)),
                    origin=PACK,
                )
            )
        return out
