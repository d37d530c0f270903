"""The user-facing blueprint schema (v1) and the ``service()`` registration function."""

from obs_iac.blueprint.models import (
    CORE_FIELDS,
    SCHEMA_VERSION,
    Acknowledgement,
    GpuFleet,
    Service,
    Suppression,
    Waiver,
    WorkloadKind,
    service_schema,
)
from obs_iac.blueprint.registry import Registration, service

__all__ = [
    "CORE_FIELDS",
    "SCHEMA_VERSION",
    "Acknowledgement",
    "GpuFleet",
    "Registration",
    "Service",
    "Suppression",
    "Waiver",
    "WorkloadKind",
    "service",
    "service_schema",
]
