"""An inference fleet on T4s: no DCP profiling, so no SM/tensor/NVLink rules or alert."""

from obs_iac import GpuFleet, service

service(
    name="inference-t4",
    team="serving",
    sla_id="inference_t4",
    objective="p99 inference latency under 80 ms",
    runbook_base_url="https://runbooks.example.com/inference-t4/",
    gpu=GpuFleet(
        model="T4",
        count=16,
        driver_version="535.129.03",
        profiling=False,
        idle_threshold=0.05,
        extra_fields=("DCGM_FI_DEV_SM_CLOCK",),
    ),
)
