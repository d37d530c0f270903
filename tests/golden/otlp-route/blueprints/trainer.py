"""The OTLP route: prometheus_min_version 2.55 lets 'auto' pick Prometheus's OTLP receiver
with otlp.promote_resource_attributes (prometheus/otlp/prometheus.otlp.yml)."""

from obs_iac import GpuFleet, service

service(
    name="llm-pretrain",
    team="foundation",
    sla_id="llm_pretrain",
    objective="Checkpoint every 30 minutes; p95 step time under 2 s",
    runbook_base_url="https://runbooks.example.com/llm-pretrain",
    gpu=GpuFleet(
        model="H100-SXM5-80GB",
        count=16,
        driver_version="550.54.15",
        dcgm_exporter_version="4.5.3-4.8.2",
    ),
    framework={
        "world_size": 16,
        "ranks_per_node": 8,
        "collector_version": "0.160.0",
        "step_time_budget_seconds": 2.0,
    },
)
