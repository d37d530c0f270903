"""The framework pack's spanmetrics series against the connector-shape catalogue.

The catalogue (obs_iac/catalog/spanmetrics_shapes.toml) was read off the connector's and
the prometheus exporter's source; the pack computes its names and labels on its own, so
a disagreement here means one of them is wrong about the collector.
"""

from __future__ import annotations

import pytest

from obs_iac.catalog.spanmetrics_shapes import scope_name, spanmetrics_shape
from obs_iac.labels import LabelNaming, NamingStrategy
from obs_iac.packs.framework.model import Framework
from obs_iac.packs.framework.wiring import (
    DEFAULT_BUCKETS_MS,
    DIMENSIONS,
    metric_names,
    series_labels,
)


def _framework(**extra: object) -> Framework:
    return Framework.model_validate(
        {"world_size": 8, "ranks_per_node": 8, "step_time_budget_seconds": 1.0, **extra}
    )


@pytest.mark.parametrize("route", ["prometheus-otlp", "collector-exporter"])
def test_pack_labels_and_names_match_the_catalogue(route: str) -> None:
    fw = _framework(resource_attributes=route, collector_version="0.160.0")
    naming = LabelNaming(NamingStrategy.CLASSIC)
    shape = spanmetrics_shape(route)  # type: ignore[arg-type]
    assert set(series_labels(fw, naming)) == shape.labels(DIMENSIONS)
    names = metric_names(fw)
    assert (names.calls, names.bucket, names.sum, names.count) == (
        "traces_span_metrics_calls_total",
        "traces_span_metrics_duration_milliseconds_bucket",
        "traces_span_metrics_duration_milliseconds_sum",
        "traces_span_metrics_duration_milliseconds_count",
    )
    assert (shape.calls, shape.bucket) == (names.calls, names.bucket)
    assert shape.default_buckets_ms == DEFAULT_BUCKETS_MS


def test_gates_and_units_follow_the_catalogue() -> None:
    naming = LabelNaming(NamingStrategy.CLASSIC)
    fw = _framework(
        collector_version="0.160.0",
        feature_gates=[
            "+spanmetrics.statusCodeConvention.useOtelPrefix",
            "-connector.spanmetrics.includeCollectorInstanceID",
        ],
        duration_unit="s",
        resource_attributes="prometheus-otlp",
    )
    shape = spanmetrics_shape("prometheus-otlp", unit="s")
    want = shape.labels(DIMENSIONS, otel_status=True, collector_instance_id=False)
    assert set(series_labels(fw, naming)) == want
    assert "otel_status_code" in want and "status_code" not in want
    assert metric_names(fw).bucket == shape.bucket == "traces_span_metrics_duration_seconds_bucket"


def test_exporter_route_stores_only_the_scope_name() -> None:
    # The connector's scope has a name and no version or schema URL (connector.go
    # buildMetrics), so otel_scope_version/otel_scope_schema_url are empty and dropped.
    labels = spanmetrics_shape("collector-exporter").labels(DIMENSIONS)
    assert "otel_scope_name" in labels
    assert not {"otel_scope_version", "otel_scope_schema_url"} & labels
    assert scope_name() == "spanmetricsconnector"
    assert "otel_scope_name" not in spanmetrics_shape("prometheus-otlp").labels(DIMENSIONS)
