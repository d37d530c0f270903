"""What dcgm-exporter really writes on /metrics, per release: the exporter-shape catalogue.

Test inputs that stand for the exporter's output come from here, never from the rule
generator's own idea of the labels. The facts (label order, which release added which
label, HELP/TYPE per field) live in ``exporter_shapes.toml`` and
``dcgm_exporter_default_counters.csv`` beside this module, each with the tag and file of
NVIDIA/dcgm-exporter it was read from; this module only assembles them.
"""

from __future__ import annotations

import csv
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from obs_iac.catalog import dcgm
from obs_iac.config import version_tuple
from obs_iac.diagnostics import Diagnostic, InputError, Severity

XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT_FIELD = "DCGM_EXP_XID_ERRORS_COUNT"
DRIVER_VERSION_FIELD = "DCGM_FI_DRIVER_VERSION"


@dataclass(frozen=True)
class GpuDevice:
    """One GPU (or MIG instance) as DCGM describes it to the exporter."""

    gpu: int
    uuid: str
    model_name: str
    hostname: str
    pci_bus_id: str = ""
    # "nvidia<gpu>" unless given: the exporter formats it from the GPU index.
    device: str = ""
    mig_profile: str | None = None
    mig_instance_id: str | None = None
    # None: the collectors CSV has no DCGM_FI_DRIVER_VERSION `label` row.
    driver_version: str | None = None

    def __post_init__(self) -> None:
        if not self.device:
            object.__setattr__(self, "device", f"nvidia{self.gpu}")
        if (self.mig_profile is None) != (self.mig_instance_id is None):
            raise ValueError("a MIG device needs both mig_profile and mig_instance_id")


@dataclass(frozen=True)
class PodAttribution:
    """The pod the kubelet says holds a GPU (Kubernetes mapping, -k)."""

    namespace: str
    pod: str
    container: str
    # Pod labels copied on with DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS, names already
    # sanitised by the exporter (every character outside [a-zA-Z0-9_] becomes "_").
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ExporterShape:
    """The shape of the GPU series of one dcgm-exporter release."""

    tag: str
    host_label: str
    has_pci_bus_id: bool
    has_xid_err_labels: bool
    has_xid_count: bool
    # True for the unreleased line standing in for versions newer than every tag.
    provisional: bool

    def field_labels(self, field_name: str) -> tuple[str, ...]:
        """Label names the field's own values add (beyond the device and pod labels)."""
        if field_name == XID_FIELD and self.has_xid_err_labels:
            return ("err_code", "err_msg")
        if field_name == XID_COUNT_FIELD and self.has_xid_count:
            data = _data()["features"]["xid_count"]
            return (str(data["window_label"]), str(data["code_label"]))
        pseudo = _data().get("pseudo_fields", {}).get(field_name)
        if pseudo is not None and _within(self.tag, pseudo["since"], None):
            return tuple(str(label) for label in pseudo["labels"])
        return ()

    def series(
        self,
        field: str,
        device: GpuDevice,
        *,
        kubernetes: PodAttribution | None = None,
        honor_labels: bool = True,
        value_labels: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """The exact label set the exporter puts on ``field``'s series, in output order.

        ``value_labels`` gives the labels that depend on the sample: ``err_code`` (and
        optionally ``err_msg``, else looked up) on the XID field; ``xid`` (absent: the
        GPU's zero series) and ``window_size_in_ms`` on the XID count. ``honor_labels``
        False renames pod/namespace/container to ``exported_*`` as Prometheus does at a
        scrape whose target labels clash (the chart's ServiceMonitor); the target labels
        themselves belong to the scrape and are not added here.
        """
        given = dict(value_labels or {})
        allowed = set(self.field_labels(field))
        unknown = sorted(set(given) - allowed)
        if unknown:
            raise ValueError(
                f"{field} on dcgm-exporter {self.tag} has no label(s) {', '.join(unknown)}"
            )
        out: dict[str, str] = {"gpu": str(device.gpu), "UUID": device.uuid}
        if self.has_pci_bus_id:
            out["pci_bus_id"] = device.pci_bus_id
        out["device"] = device.device
        out["modelName"] = device.model_name
        if device.mig_profile is not None and device.mig_instance_id is not None:
            out["GPU_I_PROFILE"] = device.mig_profile
            out["GPU_I_ID"] = device.mig_instance_id
        if device.hostname:
            # The template writes the host label only when the host name is non-empty.
            out[self.host_label] = device.hostname

        labels: dict[str, str] = {}
        attributes: dict[str, str] = {}
        if device.driver_version is not None:
            labels[DRIVER_VERSION_FIELD] = device.driver_version
        if field == XID_COUNT_FIELD and self.has_xid_count:
            data = _data()["features"]["xid_count"]
            window = str(data["window_label"])
            labels[window] = given.get(window, str(data["default_window_ms"]))
            if str(data["code_label"]) in given:
                labels[str(data["code_label"])] = given[str(data["code_label"])]
        pseudo = _data().get("pseudo_fields", {}).get(field)
        if pseudo is not None and _within(self.tag, pseudo["since"], None):
            for label in pseudo["labels"]:
                if label == "window_size_in_ms":
                    labels[label] = given.get(label, str(pseudo["default_window_ms"]))
                elif label in given:
                    labels[label] = given[label]
        if field == XID_FIELD and self.has_xid_err_labels:
            code = given.get("err_code", "0")
            attributes["err_code"] = code
            attributes["err_msg"] = given.get("err_msg") or xid_message(int(code))
        if kubernetes is not None:
            labels.update(kubernetes.labels)
            attributes.update(
                pod=kubernetes.pod, namespace=kubernetes.namespace, container=kubernetes.container
            )
            # The exporter drops a pod label that an attribute also names
            # (4.5.3-4.8.2 internal/pkg/transformation/kubernetes.go, "no overlap").
            for key in attributes:
                labels.pop(key, None)
        # Go's text/template ranges over map[string]string in sorted key order.
        for key in sorted(labels):
            out[key] = labels[key]
        for key in sorted(attributes):
            name = key
            if not honor_labels and key in _data()["kubernetes"]["attributes"]:
                name = f"exported_{key}"
            out[name] = attributes[key]
        return out

    def help_and_type(
        self, field: str, collectors: Mapping[str, tuple[str, str]] | None = None
    ) -> tuple[str, str]:
        """``# HELP`` text and ``# TYPE`` of ``field`` as the exporter prints them.

        The exporter echoes the collectors CSV it runs with: ``collectors`` (from
        read_collectors_csv) is that CSV when known. Otherwise this is the row of the
        exporter's own etc/default-counters.csv at this tag (a commented row for the
        DCGM_EXP_* pseudo-fields), else the DCGM catalogue's help and type.
        """
        if collectors is not None and field in collectors:
            return collectors[field]
        rows = _default_counters().get(field, ())
        for state in ("active", "commented"):
            for row in rows:
                if row["state"] == state and _within(self.tag, row["first_tag"], row["last_tag"]):
                    return row["help"], row["prometheus_type"]
        info = dcgm.catalog().get(field)
        if info is None:
            raise KeyError(f"{field} is not a DCGM field or dcgm-exporter pseudo-field")
        return info.exporter_help, info.prometheus_type

    def format_value(self, field: str, value: float) -> str:
        """The value as the exporter prints it: %d for int64 fields, %f for doubles."""
        info = dcgm.catalog().get(field)
        if info is not None and info.value_type == "double":
            return f"{value:f}"
        return str(int(value))


def xid_message(code: int) -> str:
    """``err_msg`` for an XID code (the exporter's xidErrCodeToText)."""
    data = _data()["xid_messages"]
    codes: dict[str, str] = data["codes"]
    if str(code) in codes:
        return codes[str(code)]
    if code < 0 or code > 172:
        return str(data["unknown"])
    raise ValueError(
        f"err_msg for XID {code} is not in obs_iac/catalog/exporter_shapes.toml; pass err_msg"
    )


def known_versions() -> tuple[str, ...]:
    return tuple(str(t) for t in _data()["tags"])


def shape(exporter_version: str) -> ExporterShape:
    """The shape of a release, named by its tag (``4.5.3-4.8.2``) or exporter version
    (``4.8.2``). A version newer than every tag gets the unreleased main-branch shape."""
    tag = _resolve(exporter_version)
    if tag is None:
        tags = known_versions()
        raise InputError(
            [
                Diagnostic(
                    "gpu/unknown-exporter-version",
                    Severity.ERROR,
                    f"dcgm-exporter {exporter_version!r} is not in the exporter-shape "
                    "catalogue, so obs-iac cannot say which labels it emits",
                    hint="use one of "
                    + ", ".join(t for t in tags if t != _unreleased())
                    + " (or a newer release); see obs_iac/catalog/exporter_shapes.toml",
                )
            ]
        )
    return _shape(tag)


@cache
def _shape(tag: str) -> ExporterShape:
    features = _data()["features"]
    lowercase = _within(tag, features["lowercase_hostname"]["since"], None)
    return ExporterShape(
        tag=tag,
        host_label="hostname" if lowercase else "Hostname",
        has_pci_bus_id=_within(tag, features["pci_bus_id"]["since"], None),
        has_xid_err_labels=_within(tag, features["xid_err_labels"]["since"], None),
        has_xid_count=_within(tag, features["xid_count"]["since"], None),
        provisional=tag == _unreleased(),
    )


def read_collectors_csv(text: str) -> dict[str, tuple[str, str]]:
    """field -> (help, type) of a collectors CSV, read as the exporter reads it: `#` in
    the first column starts a comment, blank lines are skipped, each of the three fields
    is trimmed of spaces (internal/pkg/counters/counter_config.go, encoding/csv with
    Comment='#')."""
    out: dict[str, tuple[str, str]] = {}
    for record in csv.reader(
        line for line in text.splitlines() if line.strip() and not line.startswith("#")
    ):
        if len(record) != 3:
            raise ValueError(f"a collectors CSV record has 3 fields, not {len(record)}")
        name, prom_type, help_text = (part.strip() for part in record)
        out[name] = (help_text, prom_type)
    return out


def render_exposition(
    shape: ExporterShape,
    samples: Iterable[tuple[str, Mapping[str, str], float]],
    *,
    collectors: Mapping[str, tuple[str, str]] | None = None,
) -> str:
    """Prometheus text exposition as the exporter writes it: per metric one HELP and one
    TYPE line, then its series in the order given, labels in the order of the mapping.

    Label values are written unescaped, as the exporter's Go template does; metrics come
    in order of first appearance (the exporter's own order is Go map order, i.e. random).
    """
    groups: dict[str, list[tuple[Mapping[str, str], float]]] = {}
    for name, labels, value in samples:
        groups.setdefault(name, []).append((labels, value))
    out: list[str] = []
    for name, rows in groups.items():
        help_text, prom_type = shape.help_and_type(name, collectors)
        out.append(f"# HELP {name} {help_text}\n# TYPE {name} {prom_type}\n")
        for labels, value in rows:
            inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
            out.append(f"{name}{{{inner}}} {shape.format_value(name, value)}\n")
    return "".join(out)


def _unreleased() -> str:
    return str(_data()["unreleased"])


def _order(tag: str) -> int:
    return known_versions().index(tag)


def _within(tag: str, first: str, last: str | None) -> bool:
    index = _order(tag)
    return _order(first) <= index and (last is None or index <= _order(last))


def _resolve(version: str) -> str | None:
    tags = known_versions()
    if version in tags:
        return version
    released = [t for t in tags if t != _unreleased()]
    exporter_part = version.rsplit("-", 1)[-1]
    for tag in released:
        if tag.rsplit("-", 1)[-1] == exporter_part:
            return tag
    try:
        wanted = version_tuple(exporter_part)
    except ValueError:
        return None
    newest = version_tuple(released[-1].rsplit("-", 1)[-1])
    if len(wanted) == 3 and wanted > newest:
        return _unreleased()
    return None


@cache
def _data() -> dict[str, Any]:
    text = resources.files("obs_iac.catalog").joinpath("exporter_shapes.toml").read_text("utf-8")
    return tomllib.loads(text)


@cache
def _default_counters() -> dict[str, tuple[dict[str, str], ...]]:
    text = (
        resources.files("obs_iac.catalog")
        .joinpath("dcgm_exporter_default_counters.csv")
        .read_text("utf-8")
    )
    rows: dict[str, list[dict[str, str]]] = {}
    for row in csv.DictReader(line for line in text.splitlines() if not line.startswith("#")):
        rows.setdefault(row["field"], []).append(row)
    return {k: tuple(v) for k, v in rows.items()}
