"""What a given opentelemetry-collector-contrib release produces, read from
``obs_iac/catalog/otel_collector.toml`` (the data, with its sources)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from obs_iac.config import version_tuple


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    text = resources.files("obs_iac.catalog").joinpath("otel_collector.toml").read_text("utf-8")
    return tomllib.loads(text)


def _at_least(version: str, since: str) -> bool:
    return bool(since) and version_tuple(version) >= version_tuple(since)


@dataclass(frozen=True)
class Gate:
    key: str
    id: str
    since: str
    default_on_since: str

    def exists(self, version: str) -> bool:
        return _at_least(version, self.since)

    def enabled(self, version: str, gates: tuple[str, ...]) -> bool:
        """On or off for this release, after the collector's --feature-gates flags."""
        state = self.exists(version) and _at_least(version, self.default_on_since)
        for flag in gates:
            name = flag.lstrip("+-")
            if name == self.id:
                state = not flag.startswith("-")
        return state and self.exists(version)


def gates() -> dict[str, Gate]:
    return {
        key: Gate(key, g["id"], g["since"], g.get("default_on_since", ""))
        for key, g in table()["gates"].items()
    }


def gate(key: str) -> Gate:
    return gates()[key]


def floor() -> str:
    return str(table()["floor"]["version"])


def default_namespace(version: str) -> str:
    entry = table()["default_namespace"]
    return str(entry["value"] if _at_least(version, entry["since"]) else entry["before"])


def component_type(version: str) -> str:
    entry = table()["component_type"]
    return str(entry["new"] if _at_least(version, entry["since"]) else entry["old"])


def otlp_http_exporter_type(version: str) -> str:
    entry = table()["otlp_http_exporter_type"]
    return str(entry["new"] if _at_least(version, entry["since"]) else entry["old"])


def resource_constant_labels_since() -> str:
    return str(table()["prometheus_exporter"]["resource_constant_labels"]["since"])


def promote_resource_attributes_since() -> str:
    return str(table()["prometheus"]["otlp"]["promote_resource_attributes_since"])


def effective_namespace(version: str, namespace: str, flags: tuple[str, ...]) -> str:
    """The namespace the connector really uses when configured with ``namespace``."""
    if gate("legacy_metric_names").enabled(version, flags) and namespace == default_namespace(
        version
    ):
        return ""
    return namespace
