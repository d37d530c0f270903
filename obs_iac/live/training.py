"""The instrumented training job of a live run: one OS process per rank, each set up the
way docs/framework.md tells users to set up theirs (the OpenTelemetry SDK, a
BatchSpanProcessor with the OTLP exporter, ``Resource.create()`` reading
OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES, a ``train_step`` span with one child span
per stage, the ``allreduce`` span carrying ``nccl.group_id``/``nccl.rank``).

The environment of each rank is what the generated launcher
``otel/<svc>/with-otel-resource.sh`` exports, read by running that script (as torchrun
would, with RANK, LOCAL_RANK and the OBS_IAC_* overrides it documents); nothing of it is
built here.

There is no torch and no GPU: a stage's duration is accounted, not slept. Each span gets
explicit start and end times from a per-rank clock that advances by the stage's simulated
duration, and the rank emits one step per ``STEP_EVERY`` real seconds. Durations are in the
uncompressed time base (a 1.2 s step is 1.2 s in the histogram), while the steps per second
are compressed with every window of the rules: both are what the generated thresholds
compare against (a share of the step, a ratio to the group median, a p95 in seconds).

A group's profile flips from healthy to its fault when the scenario says so (a shared
flag): a slow data loader, one straggler rank whose peers wait for it in allreduce, or
allreduce spans ending with an error status (an NCCL watchdog timeout)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.synchronize
import os
import subprocess
import time
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

STEP_EVERY = 1.0  # real seconds between two steps of one rank (a 5m window: 5 steps)
STRAGGLER_RANK = 1
KINDS = ("healthy", "data-loader-starvation", "straggler-rank", "nccl-errors")


@dataclass(frozen=True)
class RankSpec:
    service: str
    host: str
    group: str
    rank: int
    local_rank: int
    kind: str  # one of KINDS: what the group does once its fault flag is set
    budget: float  # the step budget in seconds (TrainingStepTimeOverBudget's threshold)
    step_span: str
    stages: tuple[str, ...]
    data_load_stage: str
    allreduce_stage: str
    env: tuple[tuple[str, str], ...]  # what the generated launcher exported


def launcher_env(
    launcher: Path, rank: int, local_rank: int, host: str, group: str
) -> dict[str, str]:
    """The OTEL_* variables the generated launcher exports for one rank."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "OBS_IAC_HOST_NAME": host,
        "OBS_IAC_NCCL_GROUP_ID": group,
    }
    out = subprocess.run(
        ["sh", str(launcher), "env", "-0"],
        env=env,
        capture_output=True,
        check=True,
        timeout=10,
    ).stdout.decode("utf-8")
    pairs = (item.split("=", 1) for item in out.split("\0") if "=" in item)
    return {k: v for k, v in pairs if k.startswith("OTEL_")}


def stage_seconds(spec: RankSpec, faulted: bool) -> dict[str, float]:
    """Simulated seconds of each stage of one step, as shares of the step budget: healthy,
    data load and allreduce 0.05 each and the compute stages 0.45 between them (0.55 of
    the budget in all, the data load 9 % of the step)."""
    b = spec.budget
    compute = [s for s in spec.stages if s not in (spec.data_load_stage, spec.allreduce_stage)]
    out = {s: 0.45 * b / max(1, len(compute)) for s in compute}
    out[spec.data_load_stage] = 0.05 * b
    out[spec.allreduce_stage] = 0.05 * b
    if faulted and spec.kind == "data-loader-starvation":
        out[spec.data_load_stage] = 0.35 * b  # 41 % of a 0.85-budget step: under budget
    elif faulted and spec.kind == "straggler-rank":
        slow = 2.5
        if spec.rank == STRAGGLER_RANK:
            for s in compute:
                out[s] *= slow
        else:
            # The peers wait for the straggler inside the collective.
            out[spec.allreduce_stage] += (slow - 1) * 0.45 * b
    return {s: out[s] for s in spec.stages}


def rank_main(
    spec: RankSpec,
    otlp_endpoint: str,
    faulted: Synchronized[int],
    stop: multiprocessing.synchronize.Event,
) -> None:
    os.environ.update(dict(spec.env))
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp_endpoint
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "500"  # ms; the run's flush is 1 s

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Status, StatusCode, set_span_in_context

    provider = TracerProvider(resource=Resource.create())
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    tracer = provider.get_tracer("train")
    nccl = {"nccl.group_id": spec.group, "nccl.rank": str(spec.rank)}
    next_step = time.monotonic()
    try:
        while not stop.is_set():
            bad = bool(faulted.value)
            durations = stage_seconds(spec, bad)
            # The step has just ended: it began its accounted duration ago.
            clock = time.time_ns() - int(sum(durations.values()) * 1e9)
            step = tracer.start_span(spec.step_span, start_time=clock)
            ctx = set_span_in_context(step)
            for name, seconds in durations.items():
                end = clock + int(seconds * 1e9)
                collective = name == spec.allreduce_stage
                attrs: dict[str, Any] = nccl if collective else {}
                span = tracer.start_span(name, context=ctx, start_time=clock, attributes=attrs)
                if collective and bad and spec.kind == "nccl-errors":
                    # What the SDK records when the collective raises inside its span.
                    err = RuntimeError("NCCL watchdog timeout: collective operation timed out")
                    span.record_exception(err)
                    span.set_status(Status(StatusCode.ERROR, str(err)))
                span.end(end_time=end)
                clock = end
            step.end(end_time=clock)
            next_step += STEP_EVERY
            stop.wait(max(0.0, next_step - time.monotonic()))
    finally:
        provider.shutdown()


class TrainingJob:
    """Every rank of every group of the run, as processes of a forkserver (the SDK is
    imported once there, so a rank costs a fork, not an interpreter start)."""

    def __init__(self) -> None:
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(
            [
                "opentelemetry.sdk.trace",
                "opentelemetry.exporter.otlp.proto.http.trace_exporter",
            ]
        )
        self.stop_event = self.ctx.Event()
        self.flags: dict[tuple[str, str], Synchronized[int]] = {}
        self.specs: list[tuple[RankSpec, str]] = []
        self.procs: list[Any] = []

    def add_group(self, specs: list[RankSpec], otlp_endpoint: str) -> Synchronized[int]:
        flag: Synchronized[int] = self.ctx.Value("i", 0)
        self.flags[(specs[0].service, specs[0].group)] = flag
        self.specs += [(s, otlp_endpoint) for s in specs]
        return flag

    def start(self) -> None:
        for spec, endpoint in self.specs:
            flag = self.flags[(spec.service, spec.group)]
            p = self.ctx.Process(
                target=rank_main,
                args=(spec, endpoint, flag, self.stop_event),
                name=f"rank-{spec.service}-{spec.group}-{spec.rank}",
                daemon=True,
            )
            p.start()
            self.procs.append(p)

    def dead(self) -> list[str]:
        return [p.name for p in self.procs if not p.is_alive() and p.exitcode not in (0, None)]

    def stop(self) -> None:
        self.stop_event.set()
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        self.procs.clear()
