"""obs-iac: observability-as-code for GPU/AI compute centers.

Public API for blueprint files::

    from obs_iac import GpuFleet, service

Names are resolved lazily so that ``obs-iac --help`` does not import pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from obs_iac.blueprint import Acknowledgement, GpuFleet, Service, Suppression, service
    from obs_iac.diagnostics import Diagnostic, Severity
    from obs_iac.escaping import Template

__all__ = [
    "Acknowledgement",
    "Diagnostic",
    "GpuFleet",
    "Service",
    "Severity",
    "Suppression",
    "Template",
    "service",
]

_LAZY = {
    "Acknowledgement": "obs_iac.blueprint",
    "GpuFleet": "obs_iac.blueprint",
    "Service": "obs_iac.blueprint",
    "Suppression": "obs_iac.blueprint",
    "service": "obs_iac.blueprint",
    "Diagnostic": "obs_iac.diagnostics",
    "Severity": "obs_iac.diagnostics",
    "Template": "obs_iac.escaping",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'obs_iac' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
