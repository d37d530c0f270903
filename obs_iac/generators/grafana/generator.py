"""The Grafana dashboards generator: one cross-layer dashboard per SLA, a fleet overview,
a file-provisioning config and sidecar ConfigMaps.

The only module that imports grafanalib. grafanalib builds the panel and dashboard
objects; its ``to_json_data()`` output is then cleaned of the pre-schema-36 keys it
still emits (``span``, ``minSpan``, target ``step``/``intervalFactor``, ...) and the
result is serialised by our deterministic JSON writer, not grafanalib's encoder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from grafanalib import core as G
from pydantic import BaseModel, ConfigDict, Field

from obs_iac import conventions
from obs_iac.conventions import Records, SloRecords
from obs_iac.diagnostics import Diagnostic, InputError, Location, PluginError, Severity
from obs_iac.escaping import plain_text
from obs_iac.generators.common import sources_of
from obs_iac.generators.grafana.layout import (
    PlacedRow,
    apply_overrides,
    duplicate_keys,
    place,
    stable_uid,
)
from obs_iac.generators.grafana.queries import (
    VariableNames,
    parametrise,
    result_labels,
    used_variables,
)
from obs_iac.labels import GPU_ID, PYTORCH_RANK, SLA_ID, LabelNaming
from obs_iac.plan import views
from obs_iac.plan.model import DashboardRow, Panel, PanelQuery, Plan, ServicePlan, TableColumn
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
from obs_iac.promql import PromQLSyntaxError, parse
from obs_iac.render.artifact import Artifact
from obs_iac.render.jsontext import dumps_indented

NAME = "grafana-dashboards"
SCHEMA_VERSION = 39
CONFIGMAP_LIMIT = 1024 * 1024

# Keys grafanalib still writes that the current dashboard schema has no use for.
# (Top-level "color", "columns", "fontSize" and "mappings" are the pre-v8 table's.)
_LEGACY_PANEL_KEYS = frozenset(
    {
        "cacheTimeout",
        "color",
        "columns",
        "editable",
        "error",
        "fontSize",
        "height",
        "mappings",
        "maxPerRow",
        "minSpan",
        "span",
    }
)
_LEGACY_TARGET_KEYS = frozenset({"metric", "query", "step", "target", "intervalFactor"})
_LEGACY_DASHBOARD_KEYS = frozenset({"__inputs", "hideControls", "rows", "sharedCrosshair", "style"})


class GrafanaDashboardsConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    folder: str = Field(default="obs-iac", description="Grafana folder for every dashboard.")
    namespace: str = Field(default="monitoring", description="Namespace of the ConfigMaps.")
    configmaps: bool = Field(default=True, description="Write sidecar ConfigMaps.")
    provisioning_path: str = Field(
        default="/var/lib/grafana/dashboards/obs-iac",
        description="Where Grafana reads the dashboard JSON files (provider options.path).",
    )
    refresh: str = Field(default="1m", description="Dashboard auto-refresh interval.")
    time_from: str = Field(default="now-6h", description="Default time range start.")


def ds_ref(kind: str, names: VariableNames) -> dict[str, str]:
    var = names.ds_prometheus if kind == "prometheus" else names.ds_loki
    return {"type": kind, "uid": f"${{{var}}}"}


def dashboard_uid(service: str) -> str:
    return stable_uid("obs-iac", service)


FLEET_UID = stable_uid("obs-iac", "fleet-overview")


def _clean(value: Any) -> Any:
    """Drops nulls recursively: Grafana fills its own defaults for absent keys."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if item is None:
                continue
            out[key] = _clean(item)
        return out
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _to_data(obj: Any) -> Any:
    """grafanalib objects -> plain data, without grafanalib's (slow) JSON encoder."""
    if hasattr(obj, "to_json_data"):
        return _to_data(obj.to_json_data())
    if isinstance(obj, dict):
        return {k: _to_data(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_to_data(v) for v in obj]
    return obj


def _strip_panel(panel: dict[str, Any]) -> dict[str, Any]:
    for key in _LEGACY_PANEL_KEYS:
        panel.pop(key, None)
    if not panel.get("hideTimeOverride"):
        panel.pop("hideTimeOverride", None)
    if not panel.get("transparent"):
        panel.pop("transparent", None)
    for key in ("links", "transformations"):
        if panel.get(key) == []:
            panel.pop(key)
    # grafanalib defaults maxDataPoints to 100, which would thin every series.
    panel.pop("maxDataPoints", None)
    for target in panel.get("targets", []):
        for key in _LEGACY_TARGET_KEYS:
            target.pop(key, None)
        if target.get("interval") == "":
            target.pop("interval")
        if target.get("hide") is False:
            target.pop("hide")
    return panel


def _target(query: PanelQuery, expr: str, names: VariableNames, instant: bool) -> G.Target:
    return G.Target(
        expr=expr,
        legendFormat=query.legend,
        refId=query.ref_id,
        datasource=ds_ref(query.datasource, names),
        instant=instant,
        format="table" if instant else "time_series",
    )


def _panel_object(
    panel: Panel, targets: list[G.Target], ds: dict[str, str], pid: int, grid: dict[str, int]
) -> Any:
    common: dict[str, Any] = {
        "title": panel.title,
        "description": panel.description or None,
        "dataSource": ds,
        "targets": targets,
        "id": pid,
        "gridPos": G.GridPos(**grid),
    }
    if panel.kind == "timeseries":
        return G.TimeSeries(unit=panel.unit, **common)
    if panel.kind in ("stat", "bargauge", "gauge"):
        # grafanalib's BarGauge/GaugePanel write the pre-v7 options; its Stat writes the
        # modern fieldConfig, so the three share it and differ only in options (below).
        return G.Stat(format=panel.unit, reduceCalc="lastNotNull", thresholds=[], **common)
    if panel.kind == "table":
        return G.Table(unit=panel.unit, **common)
    if panel.kind == "logs":
        return G.Logs(showTime=True, wrapLogMessages=True, enableLogDetails=True, **common)
    # heatmap: grafanalib's Heatmap is the legacy (pre-v9) panel; start from a time
    # series and give it the current heatmap options.
    return G.TimeSeries(unit=panel.unit, **common)


_REDUCE = {"calcs": ["lastNotNull"], "fields": "", "values": False}
_MODERN_OPTIONS: dict[str, dict[str, Any]] = {
    "bargauge": {
        "displayMode": "gradient",
        "orientation": "horizontal",
        "reduceOptions": _REDUCE,
        "showUnfilled": True,
    },
    "gauge": {
        "orientation": "auto",
        "reduceOptions": _REDUCE,
        "showThresholdLabels": False,
        "showThresholdMarkers": True,
    },
    "heatmap": {
        "calculate": False,
        "cellGap": 1,
        "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64},
        "yAxis": {"axisPlacement": "left"},
    },
}


def value_field(panel: Panel, ref_id: str) -> str:
    """The name Grafana gives a query's value in a table: ``Value`` for one query,
    ``Value #<refId>`` when the panel has several (Grafana's Prometheus datasource,
    result_transformer.ts: ``transformDFToTable`` names the value field with
    ``getValueText``); the ``merge`` transformation keeps field names as they are."""
    return f"Value #{ref_id}" if len(panel.queries) > 1 else "Value"


# Fields an instant table query returns besides the labels and the value.
TABLE_HIDDEN = ("Time", "__name__")


def table_config(
    panel: Panel, labels: Sequence[frozenset[str] | None]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(transformations, field overrides) that give a table panel its columns: merge the
    queries' frames on their labels, then organize (hide what is not a column, order,
    rename), and set each value column's unit by its new name (overrides apply after
    the transformations)."""
    source = {
        id(c): (c.label if c.label is not None else value_field(panel, str(c.ref_id)))
        for c in panel.columns
    }
    exclude: dict[str, bool] = dict.fromkeys(TABLE_HIDDEN, True)
    shown = {c.label for c in panel.columns if c.label is not None}
    known: set[str] = set()
    for item in labels:
        known |= item or set()
    for label in sorted(known - shown):
        exclude[label] = True
    for query in panel.queries:
        if not any(c.ref_id == query.ref_id for c in panel.columns):
            exclude[value_field(panel, query.ref_id)] = True
    organize = {
        "excludeByName": exclude,
        "indexByName": {source[id(c)]: i for i, c in enumerate(panel.columns)},
        "renameByName": {source[id(c)]: c.title for c in panel.columns},
    }
    transformations: list[dict[str, Any]] = []
    if len(panel.queries) > 1:
        transformations.append({"id": "merge", "options": {}})
    transformations.append({"id": "organize", "options": organize})
    overrides = [_column_override(c) for c in panel.columns if c.ref_id is not None]
    return transformations, overrides


def _column_override(column: TableColumn) -> dict[str, Any]:
    properties: list[dict[str, Any]] = [{"id": "unit", "value": column.unit or "none"}]
    if column.decimals is not None:
        properties.append({"id": "decimals", "value": column.decimals})
    return {"matcher": {"id": "byName", "options": column.title}, "properties": properties}


def panel_json(
    panel: Panel,
    pid: int,
    grid: dict[str, int],
    names: VariableNames,
    exprs: Sequence[str],
    labels: Sequence[frozenset[str] | None] = (),
) -> dict[str, Any]:
    """``labels``: each query's result labels (table panels with columns use them to
    hide every label that is not a column)."""
    kinds = {q.datasource for q in panel.queries}
    ds = ds_ref(sorted(kinds)[0] if len(kinds) == 1 else "prometheus", names)
    if len(kinds) > 1:
        ds = {"type": "datasource", "uid": "-- Mixed --"}
    # Tables show the current value per series; everything else plots over time.
    instant = panel.kind == "table"
    targets = [_target(q, e, names, instant) for q, e in zip(panel.queries, exprs, strict=True)]
    data = _clean(_to_data(_panel_object(panel, targets, ds, pid, grid)))
    data = _strip_panel(data)
    for target in data.get("targets", []):
        if target["datasource"]["type"] == "loki":
            # Loki queries have no "format"; they say range or instant by queryType.
            target.pop("format", None)
            target["queryType"] = "instant" if target.pop("instant", False) else "range"
    if panel.kind in _MODERN_OPTIONS:
        data["type"] = panel.kind
        data["options"] = json.loads(json.dumps(_MODERN_OPTIONS[panel.kind]))
        if panel.kind == "heatmap":
            data["fieldConfig"]["defaults"]["custom"] = {}
    # The IR's unit is authoritative and every panel carries one.
    defaults = data.setdefault("fieldConfig", {}).setdefault("defaults", {})
    defaults["unit"] = panel.unit
    data["fieldConfig"].setdefault("overrides", [])
    if panel.kind == "table":
        for target in data.get("targets", []):
            # A table shows labels and values as columns; it never reads a legend.
            target.pop("legendFormat", None)
        if panel.columns:
            transformations, overrides = table_config(panel, labels)
            data["transformations"] = transformations
            data["fieldConfig"]["overrides"] = overrides
    if panel.kind == "logs" or data["type"] == "logs":
        data["fieldConfig"]["defaults"].pop("custom", None)
    return data


def row_json(row: PlacedRow) -> dict[str, Any]:
    data = _clean(
        _to_data(G.RowPanel(title=row.title, id=row.id, gridPos=G.GridPos(**row.grid.as_dict())))
    )
    data = _strip_panel(data)
    for key in ("datasource", "targets", "fieldConfig"):
        data.pop(key, None)
    return data


def alert_annotations(names: VariableNames, naming: LabelNaming, sla: bool) -> list[Any]:
    expr = 'ALERTS{alertstate="firing"'
    expr += (", " + naming.matcher(SLA_ID, f"${names.sla}")) if sla else ""
    expr += "}"
    return [
        {
            "builtIn": 1,
            "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True,
            "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts",
            "type": "dashboard",
        },
        {
            "datasource": ds_ref("prometheus", names),
            "enable": True,
            "expr": expr,
            "iconColor": "red",
            "name": "Firing alerts",
            "step": "60s",
            "tagKeys": "alertname,severity",
            "titleFormat": "{{alertname}}",
        },
    ]


def _variable(data: Any) -> dict[str, Any]:
    out: dict[str, Any] = _clean(_to_data(data))
    for key in ("useTags", "tagsQuery", "tagValuesQuery", "auto", "auto_min", "auto_count"):
        out.pop(key, None)
    current = out.get("current") or {}
    if current.get("value") is None:
        out.pop("current", None)
    return out


def datasource_variable(name: str, kind: str, label: str) -> dict[str, Any]:
    out = _variable(G.Template(name=name, query=kind, type="datasource", label=label))
    out["options"] = []
    return out


def _dashboard(
    *,
    uid: str,
    title: str,
    description: str,
    tags: list[str],
    panels: list[dict[str, Any]],
    variables: list[dict[str, Any]],
    annotations: list[Any],
    links: list[Any],
    settings: GrafanaDashboardsConfig,
) -> dict[str, Any]:
    board = G.Dashboard(
        title=title,
        uid=uid,
        description=description,
        tags=tags,
        graphTooltip=G.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
        schemaVersion=SCHEMA_VERSION,
        timezone="browser",
        refresh=settings.refresh,
        time=G.Time(settings.time_from, "now"),
        links=links,
    )
    data: dict[str, Any] = _clean(_to_data(board))
    for key in _LEGACY_DASHBOARD_KEYS:
        data.pop(key, None)
    data["panels"] = panels
    data["templating"] = {"list": variables}
    data["annotations"] = {"list": annotations}
    data.pop("id", None)  # provisioning upserts by uid; an id would pin one instance
    data["version"] = 1
    return data


class GrafanaDashboardsGenerator(Generator):
    name: ClassVar[str] = NAME
    description: ClassVar[str] = (
        "Cross-layer Grafana dashboards per SLA, a fleet overview, file provisioning "
        "and sidecar ConfigMaps."
    )
    config_model: ClassVar[type[BaseModel]] = GrafanaDashboardsConfig

    # Each SLA dashboard reads only its service (and the fleet's metric catalogue); the
    # fleet overview and the provisioning file need every service: generate_fleet.
    scope: ClassVar[GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        settings = ctx.settings
        assert isinstance(settings, GrafanaDashboardsConfig)
        boards: list[tuple[dict[str, Any], tuple[str, ...]]] = []
        owners: dict[str, tuple[str, ...]] = {}
        rows_by_service: dict[str, list[DashboardRow]] = {}
        for row in plan.dashboard_rows:
            rows_by_service.setdefault(row.service, []).append(row)
        for svc in plan.services:
            rows = rows_by_service.get(svc.name, [])
            if not rows:
                continue
            board = service_dashboard(plan, svc, rows, ctx.naming, settings)
            boards.append((board, sources_of(plan, [svc.name])))
            owners[str(board["uid"])] = (svc.name,)
        yield from self._artifacts(boards, settings, owners)

    def fleet_view(self, shard: Plan, ctx: GeneratorContext) -> Any:
        # generate_fleet's: the overview links every service with dashboard rows.
        return [views.services(shard, "sla_id", "objective"), bool(shard.dashboard_rows)]

    def generate_fleet(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        settings = ctx.settings
        assert isinstance(settings, GrafanaDashboardsConfig)
        everyone = sources_of(plan, [s.name for s in plan.services])
        if plan.services:
            fleet = fleet_dashboard(plan, ctx.naming, settings)
            # Named after every service: with one service, lint still attributes the
            # overview to it whether it sees the whole plan or the fleet shard.
            names = tuple(s.name for s in plan.services)
            yield from self._artifacts([(fleet, everyone)], settings, {FLEET_UID: names})
        # Every per-SLA dashboard's blueprint is one of the fleet's.
        yield Artifact(
            conventions.GRAFANA_PROVISIONING,
            "yaml",
            provisioning(settings),
            self.name,
            everyone,
        )

    def _artifacts(
        self,
        boards: list[tuple[dict[str, Any], tuple[str, ...]]],
        settings: GrafanaDashboardsConfig,
        owners: Mapping[str, tuple[str, ...]] | None = None,
    ) -> Iterator[Artifact]:
        """A dashboard file per board (and its ConfigMap). ``owners`` (uid -> service)
        names the one service a board belongs to, so lint attributes its queries without
        guessing from blueprint files (a file may declare several services)."""
        too_big: list[Diagnostic] = []
        for board, sources in sorted(boards, key=lambda b: str(b[0]["uid"])):
            uid = str(board["uid"])
            services = (owners or {}).get(uid, ())
            yield Artifact(
                conventions.grafana_dashboard(uid),
                "json",
                board,
                self.name,
                sources,
                services=services,
            )
            if not settings.configmaps:
                continue
            text = dumps_indented(board) + "\n"  # the dashboard file's own bytes
            configmap = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": conventions.grafana_dashboard_configmap(uid),
                    "namespace": settings.namespace,
                    "labels": {
                        "app.kubernetes.io/managed-by": "obs-iac",
                        "grafana_dashboard": "1",
                    },
                    "annotations": {"grafana_folder": settings.folder},
                },
                "data": {f"{uid}.json": text},
            }
            size = len(json.dumps(configmap, ensure_ascii=False).encode())
            if size >= CONFIGMAP_LIMIT:
                too_big.append(
                    Diagnostic(
                        "dashboard/too-large",
                        Severity.ERROR,
                        f"the ConfigMap for dashboard {uid} would be {size} bytes; "
                        "Kubernetes limits a ConfigMap to 1 MiB",
                        hint="hide panels with the dashboards section's overrides, or set "
                        "[tool.obs-iac.generators.grafana-dashboards] configmaps = false "
                        "and provision from files",
                        location=Location(sources[0]) if sources else None,
                        object_path=(uid,),
                        origin=self.name,
                    )
                )
                continue
            yield Artifact(
                conventions.grafana_dashboard_configmap_file(uid),
                "yaml",
                configmap,
                self.name,
                sources,
                services=services,
            )
        if too_big:
            raise InputError(too_big)


def provisioning(settings: GrafanaDashboardsConfig) -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "obs-iac",
                "orgId": 1,
                "folder": settings.folder,
                "type": "file",
                "disableDeletion": False,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 60,
                "options": {"path": settings.provisioning_path, "foldersFromFilesStructure": False},
            }
        ],
    }


def _overrides(svc: ServicePlan) -> Mapping[str, Mapping[str, Any]]:
    section = svc.sections.get("dashboards") or {}
    overrides: Mapping[str, Mapping[str, Any]] = section.get("overrides") or {}
    return overrides


def service_dashboard(
    plan: Plan,
    svc: ServicePlan,
    rows: Sequence[DashboardRow],
    naming: LabelNaming,
    settings: GrafanaDashboardsConfig,
) -> dict[str, Any]:
    dupes = duplicate_keys(rows)
    if dupes:
        raise InputError(
            [
                Diagnostic(
                    "dashboard/duplicate-panel-key",
                    Severity.ERROR,
                    f"panel key {key!r} is used {len(packs)} times in the dashboard of "
                    f"{svc.name} (packs: {', '.join(sorted(packs))})",
                    hint="panel keys must be unique per dashboard: ids and overrides use them",
                    location=Location(svc.source.file, svc.source.line),
                    object_path=(svc.name, "dashboards", key),
                    origin=NAME,
                )
                for key, packs in dupes.items()
            ]
        )
    names = VariableNames.for_naming(naming)
    placed = place(apply_overrides(rows, _overrides(svc)))
    panels: list[dict[str, Any]] = []
    texts: list[str] = []
    filtered_metrics: list[str] = []  # in panel order: the first carrier seeds a variable
    for row in placed:
        panels.append(row_json(row))
        for item in row.panels:
            exprs = []
            for query in item.panel.queries:
                expr, metrics = parametrise(
                    query.expr, query.datasource, svc.sla_id, plan, naming, names
                )
                if query.datasource == "prometheus":
                    _check_parses(expr, query.expr, svc, item.panel.key)
                filtered_metrics += sorted(m for m in metrics if m not in filtered_metrics)
                exprs.append(expr)
            labels = (
                [
                    result_labels(plan, e) if q.datasource == "prometheus" else None
                    for q, e in zip(item.panel.queries, exprs, strict=True)
                ]
                if item.panel.columns
                else []
            )
            data = panel_json(item.panel, item.id, item.grid.as_dict(), names, exprs, labels)
            texts.append(json.dumps(data))
            panels.append(data)
    used = used_variables(texts)
    variables: list[dict[str, Any]] = []
    # Always present: the alert annotation queries Prometheus even without such panels.
    variables.append(datasource_variable(names.ds_prometheus, "prometheus", "Prometheus"))
    if names.ds_loki in used:
        variables.append(datasource_variable(names.ds_loki, "loki", "Loki"))
    sla_var = _variable(
        G.Template(
            name=names.sla,
            query=svc.sla_id,
            default=svc.sla_id,
            type="custom",
            label="SLA",
            refresh=G.REFRESH_NEVER,
        )
    )
    variables.append(sla_var)
    seed = filtered_metrics
    for var, label_key, label in (
        (names.gpu, GPU_ID, "GPU"),
        (names.rank, PYTORCH_RANK, "Rank"),
    ):
        if var not in used:
            continue
        carrier = next((m for m in seed if _has_label(plan, m, naming.prom(label_key))), None)
        if carrier is None:
            continue
        values_query = (
            f"label_values({carrier}{{{naming.matcher(SLA_ID, '$' + names.sla)}}}, "
            f"{naming.prom(label_key)})"
        )
        variable = _variable(
            G.Template(
                name=var,
                query=values_query,
                dataSource=ds_ref("prometheus", names),
                label=label,
                includeAll=True,
                multi=True,
                allValue=".*",
                default="$__all",
                refresh=G.REFRESH_ON_TIME_RANGE_CHANGE,
            )
        )
        variable["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
        variables.append(variable)
    return _dashboard(
        uid=dashboard_uid(svc.name),
        title=f"{svc.name} · {svc.sla_id} (cross-layer)",
        description=(
            f"{plain_text(svc.objective).rstrip('.')}. Team {svc.team}. Generated by obs-iac."
        ),
        tags=["obs-iac", "obs-iac-sla", f"team-{svc.team}"],
        panels=panels,
        variables=variables,
        annotations=alert_annotations(names, naming, sla=True),
        links=[
            _to_data(
                G.DashboardLink(
                    title="Fleet overview",
                    type="link",
                    uri=f"/d/{FLEET_UID}",
                    keepTime=True,
                    icon="dashboard",
                )
            ),
            _to_data(
                G.DashboardLink(
                    title="Runbooks", type="link", uri=plain_text(svc.runbook_base_url), icon="doc"
                )
            ),
        ],
        settings=settings,
    )


def _has_label(plan: Plan, metric: str, label: str) -> bool:
    spec = plan.metric(metric)
    return spec is not None and label in spec.labels


def _check_parses(expr: str, original: str, svc: ServicePlan, key: str) -> None:
    try:
        parse(expr)
    except PromQLSyntaxError as exc:
        raise PluginError(
            [
                Diagnostic(
                    "dashboard/query-rewrite",
                    Severity.ERROR,
                    f"panel {key!r} of {svc.name}: the dashboard form of {original!r} does "
                    f"not parse: {exc}",
                    hint="a bug in the grafana-dashboards generator; please report it",
                    object_path=(svc.name, "dashboards", key),
                    origin=NAME,
                )
            ]
        ) from None


def slo_status_queries(plan: Plan, sla_promql: str) -> list[tuple[TableColumn, str]]:
    """(value column, PromQL) for the fleet SLO table, when the SLO pack recorded
    anything: the objective, the budget left over each SLO's own window, and the 1h burn
    rate. Each query aggregates ``by`` the SLA and SLO labels: that drops ``__name__``
    (which differs between the queries, so the merge would not join their rows) and
    leaves exactly the label columns, as the label flow shows."""
    if plan.metric(SloRecords.OBJECTIVE) is None:
        return []
    windows = sorted(
        m.name.removeprefix(SloRecords.budget_remaining(""))
        for m in plan.metrics
        if m.name.startswith(SloRecords.budget_remaining(""))
    )
    budget = "|".join(re.escape(SloRecords.budget_remaining(w)) for w in windows)
    by = f"max by ({sla_promql}, slo)"
    return [
        (
            TableColumn(title="Objective", ref_id="A", unit="percentunit", decimals=2),
            f"{by} ({SloRecords.OBJECTIVE})",
        ),
        (
            TableColumn(title="Budget left", ref_id="B", unit="percentunit", decimals=1),
            f'{by} ({{__name__=~"{budget}"}})',
        ),
        # A burn rate is a multiple of the sustainable rate (1 = on budget), not a share.
        (
            TableColumn(title="Burn rate 1h", ref_id="C", unit="none", decimals=2),
            f"{by} ({SloRecords.burn_rate('1h')})",
        ),
    ]


def fleet_dashboard(
    plan: Plan, naming: LabelNaming, settings: GrafanaDashboardsConfig
) -> dict[str, Any]:
    names = VariableNames.for_naming(naming)
    sla = naming.prom(SLA_ID)
    sla_q = naming.promql(SLA_ID)  # quoted in PromQL under UTF-8 naming
    legend = f"{{{{{sla}}}}}"
    waste = Records.SLA_GPU_WASTE
    rows = [
        DashboardRow(
            service="(fleet)",
            layer="hardware",
            title="GPU waste",
            pack="fleet",
            panels=(
                Panel(
                    key="waste-by-sla",
                    title="GPU waste rate per SLA",
                    kind="timeseries",
                    unit="percentunit",
                    width=16,
                    queries=(PanelQuery(expr=waste, legend=legend),),
                    description="Idle share of each SLA's GPUs over 5 minutes.",
                ),
                Panel(
                    key="top-wasting",
                    title="Top wasting services",
                    kind="table",
                    unit="percentunit",
                    width=8,
                    # max by: one row per SLA, without __name__ as a column.
                    queries=(PanelQuery(expr=f"topk(10, max by ({sla_q}) ({waste}))"),),
                    columns=(
                        TableColumn(title="SLA", label=sla),
                        TableColumn(title="Idle share", ref_id="A", unit="percentunit", decimals=1),
                    ),
                    description="The ten SLAs with the highest GPU idle share right now.",
                ),
            ),
        )
    ]
    slo = slo_status_queries(plan, sla_q)
    if slo:
        rows.append(
            DashboardRow(
                service="(fleet)",
                layer="business",
                title="SLO status",
                pack="fleet",
                panels=(
                    Panel(
                        key="slo-status",
                        title="SLO status per SLA",
                        kind="table",
                        unit="none",
                        width=24,
                        queries=tuple(
                            PanelQuery(expr=expr, ref_id=str(column.ref_id)) for column, expr in slo
                        ),
                        columns=(
                            TableColumn(title="SLA", label=sla),
                            TableColumn(title="SLO", label="slo"),
                            *(column for column, _expr in slo),
                        ),
                        description="Per SLA and SLO: objective, error budget left over "
                        "the SLO window, and the 1h burn rate.",
                    ),
                ),
            )
        )
    panels: list[dict[str, Any]] = []
    for row in place(rows):
        panels.append(row_json(row))
        for item in row.panels:
            exprs = [q.expr for q in item.panel.queries]
            labels = [result_labels(plan, e) for e in exprs]
            data = panel_json(item.panel, item.id, item.grid.as_dict(), names, exprs, labels)
            panels.append(data)
    with_rows = {r.service for r in plan.dashboard_rows}
    links = [
        _to_data(
            G.DashboardLink(
                title=f"{svc.name} ({svc.sla_id})",
                type="link",
                uri=f"/d/{dashboard_uid(svc.name)}?var-{names.sla}={svc.sla_id}",
                includeVars=False,
                keepTime=True,
                icon="dashboard",
                tooltip=plain_text(svc.objective),
            )
        )
        for svc in plan.services
        if svc.name in with_rows
    ]
    links.append(
        _to_data(
            G.DashboardLink(
                title="Per-SLA dashboards",
                type="dashboards",
                tags=["obs-iac-sla"],
                asDropdown=True,
                includeVars=True,
                keepTime=True,
            )
        )
    )
    return _dashboard(
        uid=FLEET_UID,
        title="obs-iac fleet overview",
        description="GPU waste and SLO status across every SLA-bound service.",
        tags=["obs-iac", "obs-iac-fleet"],
        panels=panels,
        variables=[datasource_variable(names.ds_prometheus, "prometheus", "Prometheus")],
        annotations=alert_annotations(names, naming, sla=False),
        links=links,
        settings=settings,
    )
