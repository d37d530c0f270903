"""Recommendation model v2: nightly-to-continuous retraining on an A100 pool.

SLA: the serving model is refreshed within 15 minutes of new training data landing.
"""

from obs_iac import GpuFleet, service

service(
    name="recomm-v2",
    team="recsys",
    sla_id="recomm_v2",
    objective="Recommendation model refreshed within 15 minutes of new data",
    runbook_base_url="https://runbooks.example.com/recomm-v2",
    gpu=GpuFleet(
        model="A100-SXM4-80GB",
        count=64,
        driver_version="535.129.03",
        dcgm_exporter_version="4.5.3-4.8.2",
        profiling=True,
        # The source document's "SM stall" field does not exist in DCGM; SM occupancy
        # and DRAM activity are the real profiling fields closest to what it wanted.
        extra_fields=(
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            "DCGM_FI_PROF_SM_OCCUPANCY",
            "DCGM_FI_PROF_DRAM_ACTIVE",
        ),
    ),
    # containerd writes CRI lines; the trainer logs with asctime first, and PyTorch >= 2.3
    # prefixes uncaught tracebacks with "[rankN]: ", which keeps ranks apart.
    logs={
        "runtime": "cri",
        "format": "python-asctime",
        "rank_prefix": "pytorch-rank-prefix",
        "extract": ("cuda-oom", "nccl-timeout", "xid", "python-exception"),
        "drop": ({"expression": r"^\d{4}-\d{2}-\d{2}[ T][0-9:,.]+ DEBUG ", "reason": "debug"},),
    },
)
