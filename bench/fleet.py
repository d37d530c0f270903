"""A synthetic GitOps repository of N services with realistic GPU fleets.

Deterministic for a given N (seeded), so benchmark runs compare like with like.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

MODELS = (
    ("A100-SXM4-80GB", "535.129.03"),
    ("H100-SXM5-80GB", "550.54.15"),
    ("L40S", "550.90.07"),
    ("A10", "535.183.01"),
    ("H200", "560.35.03"),
)
EXTRAS = (
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
)
PROFILING_EXTRAS = ("DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_DRAM_ACTIVE")

# Dashboards are provisioned from files, not ConfigMaps: at 5,000 services the fleet
# overview is about 2 MB, over Kubernetes' 1 MiB ConfigMap limit (obs-iac refuses it,
# rightly). The same setting at every size keeps the sizes comparable.
PYPROJECT = """[tool.obs-iac]
blueprints = "blueprints"
output = "generated"
# Half the fleet takes Prometheus's OTLP route, which needs 2.55 (a render error below).
prometheus_min_version = "2.55"

[tool.obs-iac.generators.grafana-dashboards]
configmaps = false
"""


RANK_PREFIXES = ("pytorch-rank-prefix", "torchrun-tee")
EXTRACTS = ("cuda-oom", "nccl-timeout", "xid", "python-exception")
LATENCY_BUCKETS = (
    (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    (0.025, 0.05, 0.1, 0.2, 0.5, 1.0),
    (0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
)


def blueprint(index: int, rng: random.Random) -> str:
    """One service shaped like blueprints/recomm_v2.py: a GPU fleet, the framework
    section, logs and two SLOs (request latency and model freshness)."""
    model, driver = MODELS[rng.randrange(len(MODELS))]
    profiling = rng.random() < 0.7
    extras = list(rng.sample(EXTRAS, k=rng.randint(0, 3)))
    if profiling:
        extras += rng.sample(PROFILING_EXTRAS, k=rng.randint(0, 2))
    name = f"svc-{index:05d}"
    sla = f"svc_{index:05d}"
    team = f"team-{index % 37:02d}"
    count = rng.choice((8, 16, 32, 64, 128, 256))
    ranks_per_node = 8 if count >= 8 else count
    buckets = LATENCY_BUCKETS[rng.randrange(len(LATENCY_BUCKETS))]
    threshold = buckets[len(buckets) // 2]
    budget = rng.choice((0.45, 0.8, 1.5, 3.0))
    max_age = rng.choice(("15m", "30m", "1h"))
    if rng.random() < 0.5:
        wiring = '"resource_attributes": "prometheus-otlp",'
    else:
        wiring = (
            '"resource_attributes": "collector-exporter",\n'
            f'        "collector_metrics_target": "otel-collector.{team}.svc:8889",'
        )
    extract = tuple(sorted(rng.sample(EXTRACTS, k=rng.randint(1, len(EXTRACTS)))))
    rate_limit = (
        '\n        "rate_limit": {"rate": 500, "burst": 2000},' if rng.random() < 0.3 else ""
    )
    return f'''from obs_iac import GpuFleet, service
from obs_iac.packs.slo import FreshnessSli, LatencySli, Series, Slo

MODEL_REFRESHED = Series(
    name="{sla}_model_last_success_timestamp_seconds",
    type="gauge",
    unit="timestamp_seconds",
    labels=("business_sla_id", "instance", "job"),
    help="Unix time at which the serving fleet last loaded a freshly trained model.",
)
INFERENCE_LATENCY = Series(
    name="{sla}_inference_duration_seconds",
    type="histogram",
    unit="seconds",
    labels=("business_sla_id", "instance", "job"),
    buckets={buckets!r},
    help="Latency of one inference request.",
)

service(
    name="{name}",
    team="{team}",
    sla_id="{sla}",
    objective="Synthetic service {index} for benchmarks",
    runbook_base_url="https://runbooks.example.com/{name}",
    gpu=GpuFleet(
        model="{model}",
        count={count},
        driver_version="{driver}",
        dcgm_exporter_version="4.5.3-4.8.2",
        profiling={profiling},
        extra_fields={tuple(sorted(extras))!r},
    ),
    logs={{
        "runtime": "cri",
        "format": "python-asctime",
        "rank_prefix": "{RANK_PREFIXES[index % 2]}",
        "extract": {extract!r},{rate_limit}
    }},
    framework={{
        "world_size": {count},
        "ranks_per_node": {ranks_per_node},
        "collector_version": "0.160.0",
        {wiring}
        "step_time_budget_seconds": {budget},
    }},
    slo=[
        Slo(
            name="model-freshness",
            description="The serving model is refreshed within {max_age}.",
            objective=99.5,
            window="28d",
            sli=FreshnessSli(last_success=MODEL_REFRESHED, max_age="{max_age}"),
        ),
        Slo(
            name="inference-latency",
            description="Requests are served within {threshold} s.",
            objective=99.0,
            window="28d",
            sli=LatencySli(histogram=INFERENCE_LATENCY, threshold_seconds={threshold}),
            min_events=100,
        ),
    ],
)
'''


def make_fleet(root: Path, n: int, seed: int = 20261130) -> Path:
    """Writes N blueprints (one file each) under root/blueprints, replacing what was there."""
    rng = random.Random(seed)
    if (root / "blueprints").exists():
        shutil.rmtree(root / "blueprints")
    (root / "blueprints").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    for index in range(n):
        (root / "blueprints" / f"svc_{index:05d}.py").write_text(blueprint(index, rng))
    return root
