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

PYPROJECT = """[tool.obs-iac]
blueprints = "blueprints"
output = "generated"
"""


def blueprint(index: int, rng: random.Random) -> str:
    model, driver = MODELS[rng.randrange(len(MODELS))]
    profiling = rng.random() < 0.7
    extras = list(rng.sample(EXTRAS, k=rng.randint(0, 3)))
    if profiling:
        extras += rng.sample(PROFILING_EXTRAS, k=rng.randint(0, 2))
    name = f"svc-{index:05d}"
    return f'''from obs_iac import GpuFleet, service

service(
    name="{name}",
    team="team-{index % 37:02d}",
    sla_id="svc_{index:05d}",
    objective="Synthetic service {index} for benchmarks",
    runbook_base_url="https://runbooks.example.com/{name}",
    gpu=GpuFleet(
        model="{model}",
        count={rng.choice((8, 16, 32, 64, 128, 256))},
        driver_version="{driver}",
        dcgm_exporter_version="4.5.3-4.8.2",
        profiling={profiling},
        extra_fields={tuple(sorted(extras))!r},
    ),
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
