"""OpenTelemetry wiring for the framework layer: the resource-attribute env file and
launcher wrapper each training process runs with, the collector's spanmetrics
configuration, and the Prometheus side of the chosen ingestion path.

Everything comes from ``plan.extensions['framework/otel-wiring']`` (the framework
pack's OtelWiring objects); nothing here decides a label or a metric name.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from obs_iac import conventions
from obs_iac.generators.common import sources_of
from obs_iac.labels import KEYS_BY_NAME
from obs_iac.packs.framework import EXTENSION
from obs_iac.packs.framework.wiring import SERVICE_INSTANCE_PLACEHOLDER, OtelWiring
from obs_iac.plan import views
from obs_iac.plan.model import Plan
from obs_iac.plugins import Generator, GeneratorContext, GeneratorScope
from obs_iac.render.artifact import Artifact


def wirings(plan: Plan) -> list[OtelWiring]:
    found = [w for w in plan.extensions.get(EXTENSION, ()) if isinstance(w, OtelWiring)]
    return sorted(found, key=lambda w: w.service)


def _header(plan: Plan, service: str) -> str:
    source = ", ".join(sources_of(plan, [service])) or "the repository's blueprints"
    return conventions.HEADER.format(source=source)


def resource_attributes_value(w: OtelWiring) -> str:
    """OTEL_RESOURCE_ATTRIBUTES: fixed keys already percent-encoded, per-process keys as
    ${VAR} placeholders the launcher expands (values it validates, so nothing there
    needs encoding)."""
    parts = [f"{k}={v}" for k, v in w.static_attributes]
    parts += [f"{k}=${{{var}}}" for k, var in w.process_attributes]
    parts.append(f"service.instance.id={SERVICE_INSTANCE_PLACEHOLDER}")
    return ",".join(parts)


def env_file(plan: Plan, w: OtelWiring) -> str:
    lines = [
        f"# {_header(plan, w.service)}",
        "#",
        f"# OpenTelemetry SDK settings for every training process of {w.service}.",
        "# The per-process values (${...}) are filled in by the launcher, once per rank:",
        f"#   torchrun ... --no-python {conventions.otel_launcher_script(w.service)} "
        "python train.py",
        "# or read by the training script itself (docs/framework.md). Values are",
        "# percent-encoded; keep any value you add that way (',' '=' '%' and spaces break",
        "# the list otherwise).",
        f"OTEL_SERVICE_NAME={w.service_name}",
        f"OTEL_RESOURCE_ATTRIBUTES={resource_attributes_value(w)}",
        "OTEL_TRACES_EXPORTER=otlp",
        "OTEL_METRICS_EXPORTER=none",
        "OTEL_LOGS_EXPORTER=none",
    ]
    return "\n".join(lines) + "\n"


def launcher_script(plan: Plan, w: OtelWiring) -> str:
    """A POSIX sh wrapper run by torchrun for each rank: derive, validate and export the
    per-process resource attributes, then exec the training command."""
    checks = []
    for key, var in w.process_attributes:
        # POSIX ERE has no escapes inside brackets: move the '-' to the end instead.
        pattern = KEYS_BY_NAME[key].value_pattern.replace("\\-]", "-]")
        checks.append(f"check {var} \"{key}\" '^({pattern})$'")
    static = ",".join(f"{k}={v}" for k, v in w.static_attributes)
    return "\n".join(
        [
            "#!/bin/sh",
            f"# {_header(plan, w.service)}",
            "#",
            "# Usage: torchrun --nnodes ... --nproc-per-node ... --no-python \\",
            f"#          {conventions.otel_launcher_script(w.service)} python train.py ...",
            "# torchrun sets RANK and LOCAL_RANK for each process. Override the defaults below",
            "# by exporting OBS_IAC_* before torchrun (e.g. OBS_IAC_GPU_ID when the GPU is",
            "# not nvidia<LOCAL_RANK> on the host, as with CUDA_VISIBLE_DEVICES remapping).",
            "set -eu",
            ': "${RANK:?run this under torchrun (RANK is not set)}"',
            ': "${LOCAL_RANK:?run this under torchrun (LOCAL_RANK is not set)}"',
            'OBS_IAC_HOST_NAME="${OBS_IAC_HOST_NAME:-${NODE_NAME:-$(hostname)}}"',
            'OBS_IAC_GPU_ID="${OBS_IAC_GPU_ID:-nvidia${LOCAL_RANK}}"',
            'OBS_IAC_NCCL_GROUP_ID="${OBS_IAC_NCCL_GROUP_ID:-dp0}"',
            'OBS_IAC_NCCL_RANK="${OBS_IAC_NCCL_RANK:-${RANK}}"',
            "check() {",
            '  eval "value=\\${$1}"',
            "  # The canonical value formats contain no character that needs percent-encoding.",
            '  if ! printf "%s" "$value" | grep -Eq "$3"; then',
            '    echo "obs-iac: $2=$value (from $1) does not match $3" >&2',
            "    exit 64",
            "  fi",
            "}",
            *checks,
            f"OTEL_SERVICE_NAME={w.service_name}",
            # Attributes already set come first: later duplicates win, and the canonical
            # keys must not be overridable by a stray environment variable.
            'OTEL_RESOURCE_ATTRIBUTES="${OTEL_RESOURCE_ATTRIBUTES:+${OTEL_RESOURCE_ATTRIBUTES},}'
            + static
            + ","
            + ",".join(f"{k}=${{{var}}}" for k, var in w.process_attributes)
            + f',service.instance.id={SERVICE_INSTANCE_PLACEHOLDER}"',
            "export OTEL_SERVICE_NAME OTEL_RESOURCE_ATTRIBUTES",
            'exec "$@"',
            "",
        ]
    )


def collector_config(w: OtelWiring) -> dict[str, Any]:
    connector: dict[str, Any] = {
        "namespace": w.namespace,
        "histogram": {
            "unit": w.duration_unit,
            "explicit": {"buckets": [f"{b}ms" for b in w.buckets_ms]},
        },
        "dimensions": [{"name": d} for d in w.dimensions],
    }
    if w.exclude_dimensions:
        connector["exclude_dimensions"] = list(w.exclude_dimensions)
    if w.resource_attributes == "prometheus-otlp":
        exporter_id = f"{w.otlp_http_type}/obs-iac-{w.service}"
        # Prometheus's OTLP endpoint takes cumulative data only (delta is dropped
        # without a feature flag); the connector's default is cumulative.
        exporter: dict[str, Any] = {"metrics_endpoint": f"{w.prometheus_otlp_endpoint}/v1/metrics"}
    else:
        exporter_id = f"prometheus/obs-iac-{w.service}"
        port = w.collector_metrics_target.rsplit(":", 1)[1]
        exporter = {
            "endpoint": f"0.0.0.0:{port}",
            "resource_constant_labels": {"included": list(w.promote)},
        }
    receiver_id = f"otlp/obs-iac-{w.service}"
    return {
        "receivers": {
            receiver_id: {
                "protocols": {
                    "grpc": {"endpoint": "0.0.0.0:4317"},
                    "http": {"endpoint": "0.0.0.0:4318"},
                }
            }
        },
        "connectors": {w.connector_id: connector},
        "exporters": {exporter_id: exporter},
        "service": {
            "pipelines": {
                f"traces/obs-iac-{w.service}": {
                    "receivers": [receiver_id],
                    "exporters": [w.connector_id],
                },
                f"metrics/obs-iac-{w.service}": {
                    "receivers": [w.connector_id],
                    "exporters": [exporter_id],
                },
            }
        },
    }


class OtelWiringGenerator(Generator):
    name: ClassVar[str] = "otel-wiring"
    description: ClassVar[str] = (
        "OTEL_RESOURCE_ATTRIBUTES env file and launcher, spanmetrics collector config, "
        "and the Prometheus OTLP or scrape fragment for the framework layer."
    )

    # Every file is one service's, except the OTLP fragment, which merges what all
    # services promote into prometheus.yml's one global `otlp:` section.
    scope: ClassVar[GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        for w in wirings(plan):
            sources = sources_of(plan, [w.service])
            yield Artifact(
                conventions.otel_env_file(w.service),
                "text",
                env_file(plan, w),
                self.name,
                sources,
                header=False,
            )
            yield Artifact(
                conventions.otel_launcher_script(w.service),
                "text",
                launcher_script(plan, w),
                self.name,
                sources,
                header=False,
            )
            yield Artifact(
                conventions.otel_collector_config(w.service),
                "yaml",
                collector_config(w),
                self.name,
                sources,
            )
            if w.resource_attributes != "prometheus-otlp":
                yield Artifact(
                    conventions.prometheus_collector_scrape(w.service),
                    "yaml",
                    {
                        "scrape_configs": [
                            {
                                "job_name": f"obs-iac-otel-{w.service}",
                                # The exporter sets job/instance from service.name and
                                # service.instance.id; keep them instead of the target's.
                                "honor_labels": True,
                                "static_configs": [{"targets": [w.collector_metrics_target]}],
                            }
                        ]
                    },
                    self.name,
                    sources,
                )

    def fleet_view(self, shard: Plan, ctx: GeneratorContext) -> Any:
        return [views.services(shard), views.extension(shard, EXTENSION)]

    def generate_fleet(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        otlp = [w for w in wirings(plan) if w.resource_attributes == "prometheus-otlp"]
        if otlp:
            promote = sorted({k for w in otlp for k in w.promote})
            yield Artifact(
                conventions.prometheus_otlp_fragment(),
                "yaml",
                # Merge into prometheus.yml (one global `otlp:` section). Needs Prometheus
                # >= 2.55 for promote_resource_attributes, and the receiver enabled with
                # --web.enable-otlp-receiver (3.x) or
                # --enable-feature=otlp-write-receiver (2.47+).
                {"otlp": {"promote_resource_attributes": promote}},
                self.name,
                sources_of(plan, [w.service for w in otlp]),
            )
