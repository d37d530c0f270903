"""InfiniBand pack for obs-iac: node_exporter's infiniband collector, joined to GPU services."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from obs_iac.diagnostics import Diagnostic, Severity
from obs_iac.labels import HOST, SLA_ID
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plan.model import (
    AlertRule,
    AlertTestCase,
    DashboardRow,
    InhibitEdge,
    Matcher,
    MetricSpec,
    MetricType,
    Panel,
    PanelQuery,
    RecordingRule,
    RelabelRule,
    RelabelSet,
    RuleGroup,
)
from obs_iac.plugins import Contribution, Pack, PackContext

SECTION = "infiniband"
STATE = "node_infiniband_state_id"
RX_BYTES = "node_infiniband_port_data_received_bytes_total"
TX_BYTES = "node_infiniband_port_data_transmitted_bytes_total"
RX_ERRORS = "node_infiniband_port_errors_received_total"
LINK_DOWNED = "node_infiniband_link_downed_total"
PORT_ACTIVE = 4  # node_exporter: 0 no change, 1 down, 2 init, 3 armed, 4 active, 5 act defer

SLA_HOSTS = "host_name:infiniband_sla_hosts:group"
PORT_THROUGHPUT = "port:infiniband_data:bytes_rate5m"
GPU_UTILIZATION = "gpu:dcgm_gpu_utilization:ratio"  # recorded by the built-in gpu pack


class InfinibandSection(BaseModel):
    """The `infiniband=` section of a service blueprint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hcas: tuple[str, ...] = Field(
        min_length=1, description="HCA device names to watch, e.g. ('mlx5_0', 'mlx5_1')."
    )
    job: str = Field(default="node-exporter", description="The node_exporter scrape job.")
    error_threshold: int = Field(
        default=10, ge=1, description="Receive errors per 10 minutes that raise an alert."
    )
    inhibits_alerts: tuple[str, ...] = Field(
        default=("NcclAllreduceP95Regression",),
        description="Framework alerts of this service that a port-down should mute.",
    )

    @field_validator("hcas")
    @classmethod
    def _device_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for hca in value:
            if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", hca):
                raise ValueError(f"{hca!r} is not an InfiniBand device name like 'mlx5_0'")
        return value


class InfinibandPack(Pack):
    name: ClassVar[str] = "infiniband"
    description: ClassVar[str] = "InfiniBand port health and throughput, joined to GPU hosts."
    sections: ClassVar[dict[str, type[BaseModel]]] = {SECTION: InfinibandSection}

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        out = Contribution()
        section = service.section(SECTION)
        if not isinstance(section, InfinibandSection):
            return out
        naming = ctx.naming
        host, sla = naming.prom(HOST), naming.prom(SLA_ID)
        if ctx.repo.naming != "classic":
            out.diagnostics.append(
                Diagnostic(
                    "infiniband/naming",
                    Severity.ERROR,
                    "the infiniband pack only supports the classic naming strategy",
                    hint="set naming = 'classic' or remove the infiniband section",
                    location=service.location(SECTION),
                    origin=self.name,
                )
            )
            return out
        sel = "{" + naming.matcher(SLA_ID, service.service.sla_id) + "}"
        devices = "|".join(re.escape(h) for h in section.hcas)
        ports = f'{{device=~"{devices}", job="{section.job}"}}'
        join = f"* on ({host}) group_left ({sla}) {SLA_HOSTS}{sel}"
        records = [
            RecordingRule(
                record=SLA_HOSTS, expr=f"group by ({host}, {sla}) ({GPU_UTILIZATION}{sel})"
            ),
            RecordingRule(
                record=PORT_THROUGHPUT,
                expr=f"(rate({RX_BYTES}{ports}[5m]) + rate({TX_BYTES}{ports}[5m]))\n{join}",
            ),
        ]
        static = {"layer": "hardware", "service": service.name, "team": service.service.team}
        node = {
            "device": "mlx5_0",
            "port": "1",
            host: "gpu-node-1",
            "instance": "gpu-node-1",
            "job": section.job,
        }
        gpu = {sla: service.service.sla_id, host: "gpu-node-1", "resource_gpu_id": "nvidia0"}
        elsewhere = {**node, host: "gpu-node-9", "instance": "gpu-node-9"}

        def series(metric: str, labels: dict[str, str]) -> str:
            return metric + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"

        def case(
            name: str, metric: str, values: str, labels: dict[str, str], fire: bool
        ) -> AlertTestCase:
            return AlertTestCase(
                name=name,
                input_series=(
                    (series("DCGM_FI_DEV_GPU_UTIL", gpu), "80x20"),
                    (series(metric, labels), values),
                ),
                eval_time="10m",
                expect_firing=fire,
                exp_labels={**labels, sla: service.service.sla_id} if fire else {},
            )

        where = "{{ $labels.device }} port {{ $labels.port }} on {{ $labels.host_name }}"
        runbook = service.service.runbook_base_url
        alerts = [
            AlertRule(
                alert="InfinibandPortDown",
                expr=f"({STATE}{ports} != {PORT_ACTIVE})\n{join}",
                **{"for": "2m"},
                labels={**static, "severity": "critical"},
                annotations={
                    "summary": f"InfiniBand {where} is not active",
                    "description": f"InfiniBand {where} left the ACTIVE state; NCCL traffic "
                    "of this service falls back or stalls.",
                    "runbook_url": f"{runbook}/InfinibandPortDown",
                },
                tests=(
                    case("port down fires", STATE, "1x20", node, True),
                    case("active port does not fire", STATE, "4x20", node, False),
                    case("port on another host does not fire", STATE, "1x20", elsewhere, False),
                ),
            ),
            AlertRule(
                alert="InfinibandPortErrors",
                expr=f"(increase({RX_ERRORS}{ports}[10m]) > {section.error_threshold})\n{join}",
                labels={**static, "severity": "warning"},
                annotations={
                    "summary": f"InfiniBand {where} is receiving errors",
                    "description": f"InfiniBand {where} counted more than "
                    f"{section.error_threshold} receive errors in 10 minutes; check the cable "
                    "and the switch port.",
                    "runbook_url": f"{runbook}/InfinibandPortErrors",
                },
                tests=(
                    case("error burst fires", RX_ERRORS, "0+5x20", node, True),
                    case("clean port does not fire", RX_ERRORS, "0x20", node, False),
                ),
            ),
        ]
        out.rule_groups.append(
            RuleGroup(
                name=f"obs-iac.{service.name}.{self.name}",
                service=service.name,
                pack=self.name,
                rules=(*records, *alerts),
                source=service.source,
            )
        )
        node_labels = tuple(sorted(("device", "port", "instance", "job", host)))
        for metric, kind in (
            (STATE, MetricType.GAUGE),
            (RX_BYTES, MetricType.COUNTER),
            (TX_BYTES, MetricType.COUNTER),
            (RX_ERRORS, MetricType.COUNTER),
            (LINK_DOWNED, MetricType.COUNTER),
        ):
            out.metrics.append(
                MetricSpec(
                    name=metric, type=kind, unit="none", labels=node_labels, source="node_exporter"
                )
            )
        out.metrics += [
            MetricSpec(
                name=SLA_HOSTS,
                type=MetricType.GAUGE,
                unit="none",
                labels=(host, sla),
                source="recording",
            ),
            MetricSpec(
                name=PORT_THROUGHPUT,
                type=MetricType.GAUGE,
                unit="bytes_per_second",
                labels=tuple(sorted((*node_labels, sla))),
                source="recording",
            ),
        ]
        out.relabel_sets.append(
            RelabelSet(
                service=service.name,
                source="node-exporter",
                rules=(
                    RelabelRule(
                        source_labels=("instance",),
                        regex="([^:]+)(?::[0-9]+)?",
                        target_label=host,
                        replacement="$1",
                    ),
                ),
            )
        )
        out.inhibit_edges.append(
            InhibitEdge(
                name="infiniband-port-down-inhibits-allreduce-slowness",
                service=service.name,
                pack=self.name,
                reason="a port down on one host slows every all-reduce of the service; the "
                "port is the cause, the slowness its symptom",
                source_matchers=(
                    Matcher(name="alertname", value="InfinibandPortDown"),
                    Matcher(name="service", value=service.name),
                ),
                target_matchers=(
                    Matcher(name="alertname", op="=~", value="|".join(section.inhibits_alerts)),
                    Matcher(name="service", value=service.name),
                ),
                equal=(sla,),
                source=service.source,
            )
        )
        out.dashboard_rows.append(
            DashboardRow(
                service=service.name,
                layer="hardware",
                title="Network (InfiniBand)",
                pack=self.name,
                panels=(
                    Panel(
                        key="infiniband-throughput",
                        title="InfiniBand throughput per port",
                        kind="timeseries",
                        unit="Bps",
                        queries=(
                            PanelQuery(
                                expr=f"{PORT_THROUGHPUT}{sel}",
                                legend="{{host_name}} {{device}}/{{port}}",
                            ),
                        ),
                    ),
                    Panel(
                        key="infiniband-port-state",
                        title="Ports not active",
                        kind="stat",
                        unit="none",
                        queries=(
                            PanelQuery(
                                expr=f"count(({STATE}{ports} != {PORT_ACTIVE}) {join}) or vector(0)"
                            ),
                        ),
                    ),
                ),
            )
        )
        return out
