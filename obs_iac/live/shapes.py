"""The exporter-shape catalogue as the live run uses it.

The fake dcgm-exporter must serve what the real exporter emits, never what the rule
generator assumes: series come from ``obs_iac.catalog.exporter_shapes`` (the catalogue
read off NVIDIA/dcgm-exporter at each release tag). Until that module is on this branch a
minimal provisional stand-in with the same API is used, built only from the facts in
/work/shared/reference/facts.md section 2 (NVIDIA/dcgm-exporter render_metrics.go at
4.5.3-4.8.2 and d5e5f51): label order gpu, UUID, pci_bus_id, device, modelName, host
label, `label` fields, then pod/namespace/container; `err_code`/`err_msg` on XID.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class ShapeLike(Protocol):
    @property
    def host_label(self) -> str: ...

    @property
    def has_xid_err_labels(self) -> bool: ...

    def series(
        self,
        field: str,
        device: Any,
        *,
        kubernetes: Any = None,
        honor_labels: bool = True,
        value_labels: Mapping[str, str] | None = None,
    ) -> dict[str, str]: ...

    def help_and_type(self, field: str) -> tuple[str, str]: ...


@dataclass(frozen=True)
class _GpuDevice:
    gpu: int
    uuid: str
    model_name: str
    hostname: str
    pci_bus_id: str = ""
    device: str = ""
    mig_profile: str | None = None
    mig_instance_id: str | None = None
    driver_version: str | None = None

    def __post_init__(self) -> None:
        if not self.device:
            object.__setattr__(self, "device", f"nvidia{self.gpu}")


@dataclass(frozen=True)
class _PodAttribution:
    namespace: str
    pod: str
    container: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Shape:
    tag: str
    host_label: str
    has_xid_err_labels: bool
    helps: Mapping[str, tuple[str, str]]

    def series(
        self,
        field: str,
        device: Any,
        *,
        kubernetes: Any = None,
        honor_labels: bool = True,
        value_labels: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        given = dict(value_labels or {})
        out = {"gpu": str(device.gpu), "UUID": device.uuid, "pci_bus_id": device.pci_bus_id}
        out.update(device=device.device, modelName=device.model_name)
        out[self.host_label] = device.hostname
        attributes: dict[str, str] = {}
        if field == "DCGM_FI_DEV_XID_ERRORS" and self.has_xid_err_labels:
            attributes["err_code"] = given.get("err_code", "0")
            attributes["err_msg"] = given.get("err_msg", "Unknown Error")
        if kubernetes is not None:
            out.update(sorted(kubernetes.labels.items()))
            prefix = "" if honor_labels else "exported_"
            attributes.update(
                {
                    f"{prefix}container": kubernetes.container,
                    f"{prefix}namespace": kubernetes.namespace,
                    f"{prefix}pod": kubernetes.pod,
                }
            )
        for key in sorted(attributes):
            out[key] = attributes[key]
        return out

    def help_and_type(self, field: str) -> tuple[str, str]:
        return self.helps.get(field, (field, "gauge"))

    def format_value(self, field: str, value: float) -> str:
        return str(int(value)) if float(value).is_integer() else f"{value:f}"


def _version_key(tag: str) -> tuple[int, ...]:
    head = tag.split("-")[0]
    return tuple(int(p) for p in head.split(".") if p.isdigit())


def _catalogue() -> Any | None:
    try:
        return importlib.import_module("obs_iac.catalog.exporter_shapes")
    except ImportError:
        return None


def provisional() -> bool:
    """True while the real catalogue is not on this branch (the report says so)."""
    return _catalogue() is None


def gpu_device(**kwargs: Any) -> Any:
    module = _catalogue()
    return (module.GpuDevice if module else _GpuDevice)(**kwargs)


def pod_attribution(**kwargs: Any) -> Any:
    module = _catalogue()
    return (module.PodAttribution if module else _PodAttribution)(**kwargs)


def shape_for(exporter_version: str, helps: Mapping[str, tuple[str, str]]) -> ShapeLike:
    module = _catalogue()
    if module is not None:
        result: ShapeLike = module.shape(exporter_version)
        return result
    lowercase = _version_key(exporter_version) > (4, 5, 3)
    return _Shape(
        tag=exporter_version,
        host_label="hostname" if lowercase else "Hostname",
        has_xid_err_labels=_version_key(exporter_version) >= (4, 0, 0),
        helps=helps,
    )


def render(shape: ShapeLike, samples: Iterable[tuple[str, Mapping[str, str], float]]) -> str:
    module = _catalogue()
    if module is not None:
        text: str = module.render_exposition(shape, samples)
        return text
    groups: dict[str, list[tuple[Mapping[str, str], float]]] = {}
    for name, labels, value in samples:
        groups.setdefault(name, []).append((labels, value))
    out: list[str] = []
    for name, rows in groups.items():
        help_text, prom_type = shape.help_and_type(name)
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {prom_type}\n")
        for labels, value in rows:
            inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
            fmt = str(int(value)) if float(value).is_integer() else f"{value:f}"
            out.append(f"{name}{{{inner}}} {fmt}\n")
    return "".join(out)
