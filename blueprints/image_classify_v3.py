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
    inhibitions={
        "add": [
            {
                "name": "nvlink-drop-mutes-util-low",
                "reason": "A collective stalled on a degraded NVLink idles the GPUs waiting "
                "on it; the utilisation warning is a symptom of the link.",
                "source_alerts": ["GpuNvlinkThroughputDrop"],
                "target_alerts": ["GpuUtilizationLow"],
                "equal": ["business_sla_id", "host_name", "resource_gpu_id"],
            }
        ],
    },
    # torchrun --tee 3 prefixes every line with "[default<local_rank>]:"; the eight local
    # ranks of a node share one container stream.
    logs={
        "runtime": "cri",
        "format": "python-asctime",
        "rank_prefix": "torchrun-tee",
        "rate_limit": {"rate": 500, "burst": 2000},
    },
)
