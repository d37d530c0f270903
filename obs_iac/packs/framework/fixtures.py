"""Synthetic series for the framework alerts' promtool tests.

Spanmetrics series are built with exactly the label set the metric catalogue records
for them (so a test also proves the catalogue), and GPU series exactly as the GPU pack
builds its own test input, so the cross-layer join is exercised on real label sets.
Scenarios derive their numbers from the service's thresholds: a test keeps proving
the rule when someone tunes a threshold.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from obs_iac.catalog import spanmetrics_shapes
from obs_iac.labels import (
    GPU_ID,
    HOST,
    NCCL_GROUP,
    NCCL_RANK,
    PYTORCH_RANK,
    SLA_ID,
    LabelNaming,
)
from obs_iac.packs.framework.model import Framework
from obs_iac.packs.framework.wiring import OtelWiring, status_label
from obs_iac.packs.gpu import GPU_UTIL, TEST_HOST, stored_series
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plan.model import AlertTestCase

HOST_NAME = TEST_HOST
GROUP = "dp0"
CALLS_PER_MINUTE = 60  # one training step per second
Series = list[tuple[str, str]]


def number(value: float) -> str:
    """A sample or bound as Prometheus writes it (FormatFloat 'f', -1)."""
    if math.isinf(value):
        return "+Inf"
    rounded = round(value, 9)
    if rounded.is_integer():
        return str(int(rounded))
    return repr(rounded)


def series(metric: str, labels: dict[str, str]) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{metric}{{{inner}}}"


def counter(segments: list[tuple[int, float]]) -> str:
    """Cumulative samples, one a minute, for (minutes, increase per minute) segments.

    The first segment starts at 0 (t=0) and spans t=1..n; each next one continues from
    where the previous ended, so there is one sample for every minute."""
    terms = []
    total = 0.0
    first = True
    for minutes, step in segments:
        if first:
            terms.append(f"0+{number(step)}x{minutes}")
            total = step * minutes
            first = False
        else:
            start = total + step
            terms.append(f"{number(start)}+{number(step)}x{minutes - 1}")
            total += step * minutes
    return " ".join(terms)


@dataclass(frozen=True)
class Process:
    """One training process (rank) as its spans and its GPU present it."""

    span_labels: dict[str, str]
    gpu_labels: dict[str, str]


class Fixtures:
    def __init__(
        self, service: ServiceBlueprint, fw: Framework, wiring: OtelWiring, naming: LabelNaming
    ) -> None:
        self.service = service
        self.fw = fw
        self.wiring = wiring
        self.naming = naming
        self.status_label, self.status_error = status_label(fw)
        unset = "UNSET" if self.status_label != "status_code" else "STATUS_CODE_UNSET"
        self.status_ok = unset
        self.scale = wiring.names.unit_scale  # histogram units per second

    # -- label sets ----------------------------------------------------------------------
    def process(self, rank: int, gpu_index: int | None = None) -> Process:
        naming = self.naming
        gpu = gpu_index if gpu_index is not None else rank % self.fw.ranks_per_node
        canonical = {
            naming.prom(SLA_ID): self.service.service.sla_id,
            naming.prom(HOST): HOST_NAME,
            naming.prom(GPU_ID): f"nvidia{gpu}",
            naming.prom(PYTORCH_RANK): str(rank),
            naming.prom(NCCL_GROUP): GROUP,
            naming.prom(NCCL_RANK): str(rank),
        }
        values = {
            "service_name": self.wiring.service_name,
            "span_kind": "SPAN_KIND_INTERNAL",
            self.status_label: self.status_ok,
            "job": self.wiring.service_name,
            "instance": f"{HOST_NAME}-rank{rank}",
            "collector_instance_id": "3f2b8c1e-5d4a-4e6f-9a7b-0c1d2e3f4a5b",
            # The connector's own output scope (spanmetrics_shapes.toml), not the SDK's.
            "otel_scope_name": spanmetrics_shapes.scope_name(),
            **canonical,
        }
        wanted = [label for label in self.wiring.labels if label != "span_name"]
        missing = [label for label in wanted if label not in values]
        if missing:
            raise ValueError(f"no fixture value for spanmetrics labels {missing}")
        span_labels = {label: values[label] for label in wanted}
        fleet = self.service.service.gpu
        # The GPU side of the join as Prometheus stores it: catalogue -> scrape ->
        # the GPU pack's relabelling (the same derivation as the GPU pack's own tests).
        gpu_labels = stored_series(GPU_UTIL, fleet, naming, self.service.service.sla_id, gpu=gpu)
        return Process(span_labels=span_labels, gpu_labels=gpu_labels)

    # -- series ----------------------------------------------------------------------------
    def span(
        self,
        proc: Process,
        span: str,
        segments: list[tuple[int, float]],
        bounds: tuple[float, ...] = (),
        status: str | None = None,
    ) -> Series:
        """calls/sum/count (and buckets) of one span of one process; ``segments`` are
        (minutes, duration in seconds of every span in that stretch)."""
        names = self.wiring.names
        labels = {**proc.span_labels, "span_name": span}
        if status is not None:
            labels[self.status_label] = status
        calls = [(m, float(CALLS_PER_MINUTE)) for m, _ in segments]
        durations = [(m, CALLS_PER_MINUTE * d * self.scale) for m, d in segments]
        out: Series = [
            (series(names.calls, labels), counter(calls)),
            (series(names.count, labels), counter(calls)),
            (series(names.sum, labels), counter(durations)),
        ]
        for bound in (*bounds, math.inf):
            le = bound * self.scale if not math.isinf(bound) else bound
            hits = [(m, float(CALLS_PER_MINUTE) if d <= bound else 0.0) for m, d in segments]
            out.append((series(names.bucket, {**labels, "le": number(le)}), counter(hits)))
        return out

    def gpu_utilization(self, proc: Process, percent: float, minutes: int) -> Series:
        return [(series(GPU_UTIL, proc.gpu_labels), f"{number(percent)}x{minutes}")]

    # -- scenarios -----------------------------------------------------------------------
    def starving(self, share_high: bool, gpu_busy: bool, gpu_process: Process) -> Series:
        th = self.fw.thresholds
        step = 0.4
        share = (th.data_load_share + 1) / 2 if share_high else th.data_load_share / 2
        util = (th.gpu_utilization_low + 1) / 2 if gpu_busy else th.gpu_utilization_low / 2
        proc = self.process(0)
        minutes = 30
        return [
            *self.span(proc, self.fw.step_span, [(minutes, step)]),
            *self.span(proc, self.fw.data_load_stage, [(minutes, step * share)]),
            *self.gpu_utilization(gpu_process, round(util * 100, 3), minutes),
        ]

    def regression_base(self) -> float:
        return max(0.1, 2 * self.fw.thresholds.allreduce_min_seconds)

    def allreduce_regression(self, baseline_minutes: int, slowdown: float, until: int) -> Series:
        """All-reduce at ``base`` seconds for the baseline offset (and 10 minutes), then
        ``slowdown`` times that through minute ``until``. Every span lands exactly on a
        bucket bound, so p95 is 0.975 of it and the regression ratio equals the slowdown."""
        base = self.regression_base()
        factor = slowdown
        bounds = tuple(base * 2.0**k for k in range(-1, int(math.log2(factor)) + 2))
        proc = self.process(0)
        calm = baseline_minutes + 10
        return self.span(
            proc, self.fw.allreduce_stage, [(calm, base), (until - calm, base * factor)], bounds
        )

    @staticmethod
    def regression_timeline(baseline_minutes: int, for_minutes: int) -> tuple[str, int]:
        """(evaluation step, minute of the check) for the regression cases.

        The alert compares the recorded p95 now with the same record ``baseline`` earlier,
        so the test must span the offset, but only the evaluations at the check, the
        ``for`` before it and one offset earlier are read; the records in between are
        not. Every rule reads the 1-minute raw spans through 5m rates, so a coarser step
        gives the same values at its instants. The coarsest step that divides the offset
        (the baseline record is then evaluated exactly one offset before each check)
        and whose check still finds the baseline before the slowdown, which starts 10
        minutes after the offset: a day-long baseline costs 26 evaluations, not 1,500.
        """
        calm = baseline_minutes + 10
        for step in (60, 30, 15, 5, 1):
            if baseline_minutes % step:
                continue
            # First evaluation whose 5m window is all slow spans, then `for` later.
            active = -(-(calm + 5) // step) * step
            check = active + -(-for_minutes // step) * step
            if check - baseline_minutes <= calm:
                return ("1h" if step == 60 else f"{step}m"), check
        raise ValueError(f"no evaluation step for a {baseline_minutes}m baseline")

    def regression_factor(self) -> float:
        """A power of two (so spans sit on bucket bounds) at least twice the threshold."""
        return 2.0 ** math.ceil(math.log2(2 * self.fw.thresholds.allreduce_regression_ratio))

    def straggler_factor(self) -> float:
        return round(self.fw.thresholds.straggler_ratio * 1.25, 6)

    def straggler(self, slow: bool) -> Series:
        """Three ranks of one group; rank 2 computes longer and so waits less in
        all-reduce, while every step takes the same wall time."""
        compute = 0.1
        slow_compute = compute * self.straggler_factor()
        step = slow_compute + 0.05
        out: Series = []
        for rank in range(3):
            proc = self.process(rank)
            mine = slow_compute if (slow and rank == 2) else compute
            out += self.span(proc, self.fw.step_span, [(30, step)])
            out += self.span(proc, self.fw.allreduce_stage, [(30, step - mine)])
        return out

    def step_time(self, over: bool) -> Series:
        budget = self.fw.step_time_budget_seconds
        bounds = (budget / 4, budget / 2, budget, budget * 2, budget * 4)
        value = budget * 3 if over else budget * 0.75
        return self.span(self.process(0), self.fw.step_span, [(40, value)], bounds)

    def allreduce_errors(self, failing: bool) -> Series:
        proc = self.process(0)
        ok = self.span(proc, self.fw.allreduce_stage, [(10, 0.05)])
        names = self.wiring.names
        labels = {**proc.span_labels, "span_name": self.fw.allreduce_stage}
        labels[self.status_label] = self.status_error
        errors = counter([(10, 1.0)]) if failing else "0x10"
        return [*ok, (series(names.calls, labels), errors)]

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def offset_minutes(duration: str) -> int:
        match = re.fullmatch(r"([1-9][0-9]*)(m|h|d|w)", duration)
        if match is None:
            raise ValueError(f"unsupported offset {duration!r}")
        factor = {"m": 1, "h": 60, "d": 1440, "w": 10080}[match.group(2)]
        return int(match.group(1)) * factor

    @staticmethod
    def case(
        name: str,
        inputs: Series,
        eval_time: str,
        labels: dict[str, str] | None = None,
        evaluation_interval: str | None = None,
    ) -> AlertTestCase:
        return AlertTestCase(
            name=name,
            input_series=tuple(inputs),
            eval_time=eval_time,
            expect_firing=labels is not None,
            exp_labels=dict(sorted((labels or {}).items())),
            evaluation_interval=evaluation_interval,
        )
