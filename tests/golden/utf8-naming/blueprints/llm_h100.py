"""Prometheus 3 UTF-8 label names: canonical keys keep their dots and are quoted in PromQL."""

from obs_iac import GpuFleet, service

service(
    name="llm-h100",
    team="llm",
    sla_id="llm_h100",
    objective="Pre-training step time within 5 % of baseline",
    runbook_base_url="https://runbooks.example.com/llm-h100",
    gpu=GpuFleet(
        model="H100-SXM5-80GB",
        count=512,
        driver_version="550.54.15",
        profiling=True,
    ),
)
