"""What the spanmetrics connector's series look like in Prometheus, per route.

The counterpart of exporter_shapes for the framework layer: metric names, units, default
buckets and the stored label set, from ``spanmetrics_shapes.toml`` (facts cited to the
connector's and the prometheus exporter's source). Tests compare the framework pack's
own idea of the series with this.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

Route = Literal["prometheus-otlp", "collector-exporter"]


def _label(name: str) -> str:
    """An OTel attribute name as a classic Prometheus label (underscore escaping)."""
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


@dataclass(frozen=True)
class SpanmetricsShape:
    route: Route
    calls: str
    bucket: str
    sum: str
    count: str
    unit: str
    default_buckets_ms: tuple[int, ...]

    def labels(
        self,
        dimensions: Iterable[str],
        *,
        promoted: Iterable[str] = (),
        otel_status: bool = False,
        collector_instance_id: bool = True,
    ) -> frozenset[str]:
        """Label names of a stored calls/duration series (``le`` not included). With
        ``otel_status``, an UNSET span carries no status label; the set names it anyway
        (OK and ERROR spans do)."""
        data = _data()
        conn = data["connector"]
        attrs = list(conn["attributes"])
        if otel_status:
            attrs[attrs.index("status.code")] = conn["otel_status_label"]
        if collector_instance_id:
            attrs.append(conn["collector_instance_label"])
        out = {_label(a) for a in (*attrs, *dimensions, *promoted)}
        out.update(("job", "instance"))
        out.update(data["routes"][self.route]["scope_labels"])
        return frozenset(out)


def spanmetrics_shape(
    route: Route, *, namespace: str | None = None, unit: Literal["ms", "s"] = "ms"
) -> SpanmetricsShape:
    conn = _data()["connector"]
    ns = conn["default_namespace"] if namespace is None else namespace
    prefix = _label(ns) + "_" if ns else ""
    unit_word = _data()["names"]["units"][unit]
    duration = f"{prefix}{conn['duration']}_{unit_word}"
    return SpanmetricsShape(
        route=route,
        calls=f"{prefix}{conn['calls']}_total",
        bucket=f"{duration}_bucket",
        sum=f"{duration}_sum",
        count=f"{duration}_count",
        unit=unit,
        default_buckets_ms=tuple(int(b) for b in conn["default_buckets_ms"]),
    )


def scope_name() -> str:
    return str(_data()["connector"]["scope_name"])


@cache
def _data() -> dict[str, Any]:
    text = resources.files("obs_iac.catalog").joinpath("spanmetrics_shapes.toml").read_text("utf-8")
    return tomllib.loads(text)
