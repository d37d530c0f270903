"""Builders for synthetic dashboard rows, so tests can add layers the examples lack."""

from __future__ import annotations

from obs_iac.plan.model import DashboardRow, MetricSpec, MetricType, Panel, PanelQuery, Plan


def panel(
    key: str,
    expr: str,
    *,
    unit: str = "s",
    width: int = 12,
    ds: str = "prometheus",
    kind: str = "timeseries",
) -> Panel:
    return Panel(
        key=key,
        title=key.replace("-", " ").title(),
        kind=kind,  # type: ignore[arg-type]
        unit=unit,
        width=width,
        queries=(PanelQuery(expr=expr, datasource=ds),),  # type: ignore[arg-type]
    )


def row(service: str, layer: str, *panels: Panel, pack: str = "test") -> DashboardRow:
    return DashboardRow(
        service=service,
        layer=layer,  # type: ignore[arg-type]
        title=f"{layer.title()} ({pack})",
        pack=pack,
        panels=panels,
    )


def with_metrics(plan: Plan, *specs: MetricSpec) -> Plan:
    metrics = tuple(sorted((*plan.metrics, *specs), key=lambda m: m.name))
    # A fresh Plan, not model_copy: model_copy would carry the cached metric index along.
    fields = {name: getattr(plan, name) for name in Plan.model_fields}
    return Plan(**{**fields, "metrics": metrics})


def metric(name: str, *labels: str) -> MetricSpec:
    return MetricSpec(
        name=name,
        type=MetricType.GAUGE,
        unit="ratio",
        labels=tuple(sorted(labels)),
        source="recording",
    )
