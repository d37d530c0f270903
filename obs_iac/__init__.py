"""obs-iac: observability-as-code for GPU/AI compute centers.

Public API for blueprint files::

    from obs_iac import Framework, GpuFleet, Logs, service

Every section of the built-in packs has a typed model here (``Framework``, ``Logs``,
``Inhibitions``, ``Dashboards`` and their parts; ``Slo`` and its SLIs live in
``obs_iac.packs.slo``); a plain dict is accepted wherever a model is.

Names are resolved lazily so that ``obs-iac --help`` does not import pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from obs_iac.blueprint import (
        Acknowledgement,
        GpuFleet,
        Service,
        Suppression,
        Waiver,
        service,
    )
    from obs_iac.diagnostics import Diagnostic, Severity
    from obs_iac.escaping import Template
    from obs_iac.packs.dashboards import Dashboards, PanelOverride
    from obs_iac.packs.framework.model import Framework, FrameworkThresholds
    from obs_iac.packs.inhibit.model import EdgeDisable, EdgeOverride, EdgeSpec, Inhibitions
    from obs_iac.packs.logs.section import DropRule, Logs, RateLimit

__all__ = [
    "Acknowledgement",
    "Dashboards",
    "Diagnostic",
    "DropRule",
    "EdgeDisable",
    "EdgeOverride",
    "EdgeSpec",
    "Framework",
    "FrameworkThresholds",
    "GpuFleet",
    "Inhibitions",
    "Logs",
    "PanelOverride",
    "RateLimit",
    "Service",
    "Severity",
    "Suppression",
    "Template",
    "Waiver",
    "service",
]

_LAZY = {
    "Acknowledgement": "obs_iac.blueprint",
    "GpuFleet": "obs_iac.blueprint",
    "Service": "obs_iac.blueprint",
    "Suppression": "obs_iac.blueprint",
    "Waiver": "obs_iac.blueprint",
    "service": "obs_iac.blueprint",
    "Dashboards": "obs_iac.packs.dashboards",
    "PanelOverride": "obs_iac.packs.dashboards",
    "Framework": "obs_iac.packs.framework.model",
    "FrameworkThresholds": "obs_iac.packs.framework.model",
    "Inhibitions": "obs_iac.packs.inhibit.model",
    "EdgeSpec": "obs_iac.packs.inhibit.model",
    "EdgeOverride": "obs_iac.packs.inhibit.model",
    "EdgeDisable": "obs_iac.packs.inhibit.model",
    "Logs": "obs_iac.packs.logs.section",
    "DropRule": "obs_iac.packs.logs.section",
    "RateLimit": "obs_iac.packs.logs.section",
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
