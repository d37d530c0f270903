"""The framework scenarios of a live run: per service with a framework section, one
training job (NCCL group) per scenario on its own GPU node of the fake exporter, its ranks
real processes sending spans (training.py) through the real Collector (collector.py).

- ``healthy``: a group that stays healthy throughout (every framework alert silent);
- ``data-loader-starvation``: the data load grows to 41 % of the step and the ranks'
  GPUs idle (5 %): TrainingDataLoaderStarvingGpu per rank, GpuUtilizationLow under it;
- ``straggler-rank``: rank 1 computes 2.5 times slower, its peers wait in allreduce and
  every step goes over budget: TrainingStragglerRank, TrainingStepTimeOverBudget;
- ``nccl-errors``: every allreduce span ends with an error status and the GPUs idle:
  NcclCollectiveErrors, GpuUtilizationLow under it.

An alert whose expression compares with an ``offset`` longer than the run (the all-reduce
regression against the same time a day earlier) cannot be made to fire by a scenario of a
run this short; it is reported unproven with that reason."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

from obs_iac.live.inventory import AlertRule
from obs_iac.live.timescale import parse_ms
from obs_iac.live.training import STRAGGLER_RANK, RankSpec, launcher_env

RANKS_PER_GROUP = 3
IDLE_UTIL = 5  # percent, what a GPU waiting on its input or on a failed collective shows
# Uncompressed minutes of history before a fault alert is judged: the fault phase (run.py
# phase_lengths) plus the healthy run.
RUN_MINUTES = 45

# alert -> (scenario, labels it must fire with, given host / group)
PROVES: dict[str, tuple[str, Callable[[str, str], dict[str, str]]]] = {
    "TrainingDataLoaderStarvingGpu": (
        "data-loader-starvation",
        lambda host, group: {
            "host_name": host,
            "resource_gpu_id": "nvidia0",
            "framework_pytorch_rank": "0",
        },
    ),
    "TrainingStragglerRank": (
        "straggler-rank",
        lambda host, group: {
            "host_name": host,
            "framework_pytorch_rank": str(STRAGGLER_RANK),
            "nccl_group_id": group,
        },
    ),
    "TrainingStepTimeOverBudget": ("straggler-rank", lambda host, group: {"nccl_group_id": group}),
    "NcclCollectiveErrors": ("nccl-errors", lambda host, group: {"nccl_group_id": group}),
    "NcclAllreduceP95Regression": ("nccl-errors", lambda host, group: {"nccl_group_id": group}),
}
SCENARIOS = ("data-loader-starvation", "straggler-rank", "nccl-errors")
_OFFSET = re.compile(r"\boffset\s+((?:\d+(?:ms|s|m|h|d|w|y))+)")


@dataclass
class FrameworkGroup:
    service: str
    group: str
    specs: list[RankSpec]
    flag: Synchronized[int] | None = None  # set by run.py once the job exists

    def fault(self) -> None:
        if self.flag is not None:
            self.flag.value = 1


@dataclass
class FrameworkWorld:
    groups: list[FrameworkGroup] = field(default_factory=list)
    healthy_groups: set[str] = field(default_factory=set)


def offset_too_long(expr: str) -> str:
    """The longest ``offset`` of ``expr`` when it exceeds the run's history, else ''."""
    longest = max((parse_ms(m) for m in _OFFSET.findall(expr)), default=0)
    if longest <= RUN_MINUTES * 60_000:
        return ""
    return str(next(m for m in _OFFSET.findall(expr) if parse_ms(m) == longest))


def build(
    svc: Mapping[str, Any],
    alerts: Sequence[AlertRule],
    generated: Path,
    node: Callable[[str], Any],
    scale: int,
    out: FrameworkWorld,
) -> tuple[list[Any], set[str], dict[tuple[str, str], str]]:
    """(scenarios, healthy hosts, unproven alerts) of one service's framework section;
    its rank groups are appended to ``out``."""
    from obs_iac.live.scenarios import Action, Scenario

    name, fw = svc["name"], svc["sections"]["framework"]
    launcher = generated / "otel" / name / "with-otel-resource.sh"
    names = {a.name for a in alerts if a.service == name}
    scenarios: list[Scenario] = []
    healthy: set[str] = set()
    unproven: dict[tuple[str, str], str] = {}
    for a in alerts:
        if a.service != name or a.name not in PROVES:
            continue
        offset = offset_too_long(a.expr)
        if offset:
            minutes = parse_ms(offset) / 60_000
            unproven[(name, a.name)] = (
                f"compares with `offset {offset}`: it needs {offset} of healthy history "
                f"before the fault ({minutes * 60 / scale:g} s at --time-scale {scale}), "
                f"longer than the run ({RUN_MINUTES}m)"
            )

    def group(kind: str) -> tuple[str, str, FrameworkGroup, Any]:
        host, gid = f"{name}-fw-{kind}", kind
        n = node(host)
        specs = [
            RankSpec(
                service=name,
                host=host,
                group=gid,
                rank=r,
                local_rank=r,
                kind=kind,
                budget=float(fw["step_time_budget_seconds"]),
                step_span=fw["step_span"],
                stages=tuple(fw["stages"]),
                data_load_stage=fw["data_load_stage"],
                allreduce_stage=fw["allreduce_stage"],
                env=tuple(sorted(launcher_env(launcher, r, r, host, gid).items())),
            )
            for r in range(RANKS_PER_GROUP)
        ]
        g = FrameworkGroup(name, gid, specs)
        out.groups.append(g)
        return host, gid, g, n

    host, gid, _, _ = group("healthy")
    healthy.add(host)
    out.healthy_groups.add(gid)
    for kind in SCENARIOS:
        host, gid, g, n = group(kind)
        s = Scenario(name=kind, service=name, hosts=(host,))
        s.proves = {
            alert: make(host, gid)
            for alert, (scen, make) in PROVES.items()
            if scen == kind and alert in names and (name, alert) not in unproven
        }

        def fault(g: FrameworkGroup = g, n: Any = n, kind: str = kind) -> None:
            g.fault()
            if kind in ("data-loader-starvation", "nccl-errors"):
                for i in range(RANKS_PER_GROUP):
                    n.set(i, "DCGM_FI_DEV_GPU_UTIL", IDLE_UTIL)

        s.actions.append(Action(0, fault, f"group {gid}: {kind}"))
        scenarios.append(s)
    return scenarios, healthy, unproven


def start(
    fw: FrameworkWorld,
    generated: Path,
    workdir: Path,
    scale: int,
    timeout: float,
    sup: Any,
) -> tuple[Any, list[Any]]:
    """One Collector per service with rank groups, then every rank: (job, collectors).
    The job is None when no service has a framework section."""
    if not fw.groups:
        return None, []
    from obs_iac.live.collector import start_collector
    from obs_iac.live.training import TrainingJob
    from obs_iac.toolchain import find_tool

    tool = find_tool("otelcol", "current")
    collectors = {}
    for svc in sorted({g.service for g in fw.groups}):
        collectors[svc] = start_collector(tool, generated, svc, workdir, scale, timeout, sup)
    job = TrainingJob()
    for g in fw.groups:
        g.flag = job.add_group(g.specs, collectors[g.service].otlp_http)
    job.start()
    return job, list(collectors.values())
