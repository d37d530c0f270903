"""Image classification v3: distributed training on an H100 pool.

SLA: a training epoch completes within its budget so the daily model ships on time.
"""

from obs_iac import GpuFleet, service

service(
    name="image-classify-v3",
    team="vision",
    sla_id="image_classify_v3",
    objective="Daily model trained and published by 06:00 UTC; p95 step time under 450 ms",
    runbook_base_url="https://runbooks.example.com/image-classify-v3",
    gpu=GpuFleet(
        model="H100-SXM5-80GB",
        count=128,
        driver_version="550.54.15",
        dcgm_exporter_version="4.5.3-4.8.2",
        profiling=True,
        temperature_limit_celsius=87,
        extra_fields=("DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
    ),
)
