"""Recording rules, burn-rate alerts and their promtool test cases for one SLO.

Two SLI families share one alerting model:
- event SLIs (latency, error ratio): error ratio = bad events / all events over a window;
- time-slice SLIs (freshness, throughput floor): every evaluation is a slice that is
  good or bad, and the error ratio over a window is the share of bad slices.
Either way the alerts compare error ratios with factor * (1 - objective), like Sloth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from obs_iac import conventions
from obs_iac.conventions import SloRecords
from obs_iac.escaping import Template
from obs_iac.labels import SLA_ID, LabelNaming, promql_string
from obs_iac.packs.slo.models import (
    BurnAlert,
    ErrorRatioSli,
    FreshnessSli,
    LatencySli,
    Matchers,
    Series,
    Slo,
    ThroughputSli,
    parse_matcher,
)
from obs_iac.packs.slo.slice_tests import Source, Tier, duration, tier_timelines
from obs_iac.packs.slo.windows import (
    RECORDED_WINDOWS,
    burn_factor,
    error_budget,
    minutes_duration,
    number,
    seconds,
    threshold,
)
from obs_iac.plan.model import AlertRule, AlertTestCase, RecordingRule


def le_value(bound: float) -> str:
    """The `le` label value clients write: Go prints 1 as "1", Python as "1.0"."""
    return f"{bound:g}" if not float(bound).is_integer() else f"{int(bound)}"


def le_matcher(bound: float) -> str:
    text = le_value(bound)
    if float(bound).is_integer():
        # Both spellings exist in the wild; Prometheus 3 normalises them, 2.x does not.
        return f'le=~"{text}|{text}\\\\.0"'
    return f"le={promql_string(text)}"


@dataclass(frozen=True)
class SloContext:
    """What every rule of one SLO needs to spell its selectors."""

    slo: Slo
    sla_id: str
    naming: LabelNaming

    @property
    def sla_label(self) -> str:
        return self.naming.promql(SLA_ID)

    def raw_selector(self, metric: str, extra: str = "", own: Matchers | None = None) -> str:
        parts = [self.naming.matcher(SLA_ID, self.sla_id)]
        for key, raw in sorted({**self.slo.sli.matchers, **(own or {})}.items()):
            name = key if key.isidentifier() else promql_string(key)
            op, value = parse_matcher(raw)
            parts.append(f"{name}{op}{promql_string(value)}")
        if extra:
            parts.append(extra)
        return f"{metric}{{{', '.join(parts)}}}"

    def record_selector(self, record: str) -> str:
        sla = self.naming.matcher(SLA_ID, self.sla_id)
        return f"{record}{{{sla}, slo={promql_string(self.slo.name)}}}"

    def by_sla(self, inner: str) -> str:
        return f"sum by ({self.sla_label}) ({inner})"

    @property
    def on_labels(self) -> str:
        return f"on({self.sla_label}, slo)"


def is_event_sli(slo: Slo) -> bool:
    return isinstance(slo.sli, LatencySli | ErrorRatioSli)


def _event_exprs(ctx: SloContext, window: str, events: str) -> tuple[str, str]:
    """(total events/s, bad events/s) over ``window`` as PromQL; ``events`` is the
    selector of the total already recorded for this window, reused to save a rate()."""
    sli = ctx.slo.sli
    on_sla = f"on({ctx.sla_label})"

    def counted(inner: str) -> str:
        # Client libraries create a labelled counter on its first increment, so a bad (or
        # good) counter may not exist yet: that is zero events, not an unknown ratio.
        return f"({ctx.by_sla(inner)} or {on_sla} 0 * {events})"

    if isinstance(sli, LatencySli):
        name = sli.histogram.name
        total = ctx.by_sla(f"rate({ctx.raw_selector(name + '_count')}[{window}])")
        bucket = ctx.raw_selector(name + "_bucket", le_matcher(sli.threshold_seconds))
        return total, f"{events} - {on_sla} {counted(f'rate({bucket}[{window}])')}"
    assert isinstance(sli, ErrorRatioSli)
    total = ctx.by_sla(f"rate({ctx.raw_selector(sli.total.name)}[{window}])")
    if sli.bad is not None:
        bad = ctx.raw_selector(sli.bad.name, own=sli.bad_matchers)
        return total, counted(f"rate({bad}[{window}])")
    assert sli.good is not None
    good = ctx.raw_selector(sli.good.name, own=sli.good_matchers)
    return total, f"{events} - {on_sla} {counted(f'rate({good}[{window}])')}"


def _bad_slice_expr(ctx: SloContext) -> str:
    sli = ctx.slo.sli
    if isinstance(sli, FreshnessSli):
        metric = ctx.raw_selector(sli.last_success.name)
        bound = seconds(sli.max_age)
        return (
            f"(time() - max by ({ctx.sla_label}) ({metric})) > bool {bound}\n"
            f"or on({ctx.sla_label})\n{ctx.by_sla(f'absent({metric})')}"
        )
    assert isinstance(sli, ThroughputSli)
    metric = ctx.raw_selector(sli.counter.name)
    rate = ctx.by_sla(f"rate({metric}[{sli.rate_window}])")
    return (
        f"{rate} < bool {number(sli.min_per_second)}\n"
        f"or on({ctx.sla_label})\n{ctx.by_sla(f'absent({metric})')}"
    )


def recording_rules(ctx: SloContext) -> list[RecordingRule]:
    slo = ctx.slo
    labels = {"slo": slo.name}
    budget = error_budget(slo.objective)
    out: list[RecordingRule] = []
    if is_event_sli(slo):
        for window in RECORDED_WINDOWS:
            events = ctx.record_selector(SloRecords.events(window))
            total, bad = _event_exprs(ctx, window, events)
            out.append(RecordingRule(record=SloRecords.events(window), expr=total, labels=labels))
            if window == RECORDED_WINDOWS[0]:
                out.append(RecordingRule(record=SloRecords.errors(window), expr=bad, labels=labels))
                ratio = (
                    f"{ctx.record_selector(SloRecords.errors(window))}\n/ {ctx.on_labels}\n{events}"
                )
            else:
                ratio = f"({bad})\n/ on({ctx.sla_label})\n{events}"
            out.append(
                RecordingRule(record=SloRecords.error_ratio(window), expr=ratio, labels=labels)
            )
        first = RECORDED_WINDOWS[0]
        # Traffic-weighted over the whole SLO window, from the cheap 5m rates: the sum of
        # the bad rate over the sum of the total rate (never an average of ratios).
        period_ratio = (
            f"sum_over_time({ctx.record_selector(SloRecords.errors(first))}[{slo.window}])\n"
            f"/ {ctx.on_labels}\n"
            f"sum_over_time({ctx.record_selector(SloRecords.events(first))}[{slo.window}])"
        )
    else:
        out.append(
            RecordingRule(record=SloRecords.BAD_SLICE, expr=_bad_slice_expr(ctx), labels=labels)
        )
        for window in RECORDED_WINDOWS:
            out.append(
                RecordingRule(
                    record=SloRecords.error_ratio(window),
                    expr=f"avg_over_time({ctx.record_selector(SloRecords.BAD_SLICE)}[{window}])",
                    labels=labels,
                )
            )
        period_ratio = f"avg_over_time({ctx.record_selector(SloRecords.BAD_SLICE)}[{slo.window}])"
    out.append(
        RecordingRule(record=SloRecords.error_ratio(slo.window), expr=period_ratio, labels=labels)
    )
    for window in (*RECORDED_WINDOWS, slo.window):
        out.append(
            RecordingRule(
                record=SloRecords.burn_rate(window),
                expr=f"{ctx.record_selector(SloRecords.error_ratio(window))} / {number(budget)}",
                labels=labels,
            )
        )
    out.append(
        RecordingRule(
            record=SloRecords.budget_remaining(slo.window),
            expr=f"1 - {ctx.record_selector(SloRecords.burn_rate(slo.window))}",
            labels=labels,
        )
    )
    sla = ctx.naming.prom(SLA_ID)
    out.append(
        RecordingRule(
            record=SloRecords.OBJECTIVE,
            expr=f"vector({number(slo.objective / 100)})",
            labels={sla: ctx.sla_id, "slo": slo.name},
        )
    )
    return out


def alert_expr(ctx: SloContext, alert: BurnAlert) -> str:
    limit = number(
        threshold(ctx.slo.objective, alert.budget_percent, ctx.slo.window, alert.long_window)
    )
    parts = [
        f"{ctx.record_selector(SloRecords.error_ratio(alert.long_window))} > {limit}",
        f"{ctx.record_selector(SloRecords.error_ratio(alert.short_window))} > {limit}",
    ]
    guard = guard_events(ctx.slo, alert)
    if is_event_sli(ctx.slo) and guard > 0:
        parts.append(
            f"{ctx.record_selector(SloRecords.events(alert.long_window))} * "
            f"{seconds(alert.long_window)} >= {guard}"
        )
    return f"\nand {ctx.on_labels}\n".join(parts)


def guard_events(slo: Slo, alert: BurnAlert) -> int:
    return slo.min_events if alert.min_events is None else alert.min_events


def severity(tier: str) -> str:
    return "critical" if tier == "page" else "warning"


def alert_rules(
    ctx: SloContext, team: str, service: str, runbook_base: str | Template
) -> list[AlertRule]:
    slo = ctx.slo
    out = []
    for alert in slo.selected_alerts:
        name = conventions.slo_alert_name(slo.name, alert.tier, alert.long_window)
        factor = burn_factor(alert.budget_percent, slo.window, alert.long_window)
        limit = threshold(slo.objective, alert.budget_percent, slo.window, alert.long_window)
        labels = {
            "burn_window": alert.long_window,
            "layer": "business",
            "service": service,
            "severity": severity(alert.tier),
            "slo": slo.name,
            "slo_tier": alert.tier,
            "team": team,
        }
        sla_ref = "{{ $labels." + ctx.naming.prom(SLA_ID) + " }}"
        if not ctx.naming.prom(SLA_ID).isidentifier():
            sla_ref = '{{ index $labels "' + ctx.naming.prom(SLA_ID) + '" }}'
        out.append(
            AlertRule(
                alert=name,
                expr=alert_expr(ctx, alert),
                **{"for": alert.for_duration},
                labels=labels,
                annotations={
                    "summary": f"SLO {slo.name} of {sla_ref} burns its error budget over "
                    f"{number(factor)}x as fast as it may ({alert.long_window} and "
                    f"{alert.short_window} windows)",
                    "description": f"At this pace {number(alert.budget_percent)} % of the "
                    f"{slo.window} error budget of SLO {slo.name} ({number(slo.objective)} %) "
                    f"is spent within {alert.long_window}: the error ratio is above "
                    f"{number(limit)} over both the last {alert.long_window} and the last "
                    f"{alert.short_window}.",
                    "runbook_url": conventions.runbook_url(runbook_base, name),
                },
                tests=tuple(test_cases(ctx, alert)),
            )
        )
    return out


# -- promtool test cases -------------------------------------------------------------


def _fmt(value: float) -> str:
    return f"{value:.10g}"


class NoSampleValue(Exception):
    """No synthetic label value satisfies a matcher; the SLO gets no generated tests."""


_CANDIDATES = (
    "synthetic", "500", "503", "200", "204", "404", "429", "5xx", "2xx", "error", "ok",
    "success", "failure", "true", "false", "0", "1",
)  # fmt: skip
_INVERSE = {"=": "!=", "!=": "=", "=~": "!~", "!~": "=~"}


def _sample_value(op: str, pattern: str) -> str:
    import re

    if op == "=":
        return pattern
    for candidate in (pattern, *_CANDIDATES):
        hit = re.fullmatch(pattern, candidate) is not None if "~" in op else candidate == pattern
        if hit == (op in ("=", "=~")):
            return candidate
    raise NoSampleValue(f"{op}{pattern}")


def _series(
    ctx: SloContext,
    series: Series,
    metric: str,
    extra: dict[str, str],
    own: Matchers | None = None,
    invert: bool = False,
) -> str:
    labels: dict[str, str] = {}
    for label in series.labels:
        labels[label] = "synthetic"
    labels[ctx.naming.prom(SLA_ID)] = ctx.sla_id
    for label, raw in ctx.slo.sli.matchers.items():
        labels[label] = _sample_value(*parse_matcher(raw))
    for label, raw in (own or {}).items():
        op, pattern = parse_matcher(raw)
        labels[label] = _sample_value(_INVERSE[op] if invert else op, pattern)
    labels.update(extra)

    def key(name: str) -> str:
        return name if name.isidentifier() else promql_string(name)

    inner = ", ".join(f"{key(k)}={promql_string(v)}" for k, v in sorted(labels.items()))
    return f"{metric}{{{inner}}}"


def _interval_minutes(alert: BurnAlert) -> int:
    """Sparse enough to keep the 3d tier fast, dense enough for 6 samples in the short window."""
    return max(1, seconds(alert.short_window) // 60 // 6)


def _burn_inputs(
    ctx: SloContext, history: int, n: int, per_step: float, ratio: float
) -> tuple[tuple[str, str], ...]:
    """Counters with ``history`` intervals of clean traffic, then ``n`` at error ``ratio``."""
    steps = history + n
    total_values = f"0+{_fmt(per_step)}x{steps}"
    bad_burn = f"0+{_fmt(ratio * per_step)}x{n}"
    good_burn = f"{_fmt(history * per_step)}+{_fmt((1 - ratio) * per_step)}x{n}"
    if history:
        bad_values = f"0x{history - 1} {bad_burn}"
        good_values = f"0+{_fmt(per_step)}x{history - 1} {good_burn}"
    else:
        bad_values, good_values = bad_burn, good_burn
    sli = ctx.slo.sli
    if isinstance(sli, LatencySli):
        bound = le_value(sli.threshold_seconds)
        return (
            (
                _series(ctx, sli.histogram, sli.histogram.name + "_bucket", {"le": bound}),
                good_values,
            ),
            (_series(ctx, sli.histogram, sli.histogram.name + "_count", {}), total_values),
        )
    assert isinstance(sli, ErrorRatioSli)
    part, own = (
        (sli.bad, sli.bad_matchers) if sli.bad is not None else (sli.good, sli.good_matchers)
    )
    assert part is not None
    values, rest = (bad_values, good_values) if sli.bad is not None else (good_values, bad_values)
    counted = (_series(ctx, part, part.name, {}, own), values)
    if part.name == sli.total.name:
        # One counter split by a label (e.g. code): the total is the sum of both parts.
        other = (_series(ctx, part, part.name, {}, own, invert=True), rest)
        if other[0] == counted[0]:
            raise NoSampleValue("the good/bad matchers do not split the counter")
        return (counted, other)
    return (counted, (_series(ctx, sli.total, sli.total.name, {}), total_values))


def test_cases(ctx: SloContext, alert: BurnAlert) -> list[AlertTestCase]:
    try:
        if is_event_sli(ctx.slo):
            return _event_cases(ctx, alert)
        return _slice_cases(ctx, alert)
    except NoSampleValue:
        # Regex matchers no stock value satisfies; docs/slo.md explains how to test by hand.
        return []


# Longest alert window whose tests replay a full clean history before the burn. Longer
# tiers start at the burn level: promtool evaluates every rule of the file once per
# evaluation_interval (~5 ms a step for a hundred rules), so a full history would cost
# 12 simulated hours per case for the 6h tier and 6 days for the 3d tier.
FULL_HISTORY_MAX = "1h"


def _event_cases(ctx: SloContext, alert: BurnAlert) -> list[AlertTestCase]:
    slo = ctx.slo
    limit = threshold(slo.objective, alert.budget_percent, slo.window, alert.long_window)
    step = _interval_minutes(alert)
    n = seconds(alert.long_window) // 60 // step
    guard = guard_events(slo, alert)
    per_step = max(1000.0, math.ceil(4 * guard / n))
    above = min(limit * 1.05, (limit + 1) / 2)
    below = limit * 0.95
    if seconds(alert.long_window) <= seconds(FULL_HISTORY_MAX):
        # A clean history fills the long window, then the burn starts: at exactly the
        # tier's factor the long window crosses the threshold when the burn has filled
        # it, so a burn just above must have fired by then, and one just below never does.
        history, burn = n, n
        detect = f"within {alert.long_window}"
    else:
        # The burn runs from the first sample. Both counters share their timestamps, so
        # rate() extrapolates them alike and any window holding two or more samples shows
        # exactly the burn ratio: two steps suffice.
        history, burn = 0, 2
        detect = "from the start"
        # Every rule reads only the raw counters or records of the same evaluation, so
        # evaluating at the sample interval gives the same values at the sample times
        # and costs a handful of steps instead of one per simulated minute.
        own_step = minutes_duration(step)
    # The burn goes on through the alert's `for`, so the short window never runs dry.
    burn += math.ceil(_for_minutes(alert) / step)
    total = (history + burn) * step
    eval_time = minutes_duration(total)
    if history:
        # Every rule the alert reads computes from the raw counters (sampled every `step`
        # minutes) or from records of the same evaluation, never from recorded history,
        # so the values at an instant do not depend on how often the rules ran before.
        # What the check needs is an evaluation at the check and one `for` before it
        # (the burn has crossed by then, and goes on): a step dividing both. With no
        # `for`, the check alone: two evaluations instead of one per simulated minute.
        hold = _for_minutes(alert)
        own_step = minutes_duration(math.gcd(total, hold) if hold else total)
    exp = {ctx.naming.prom(SLA_ID): ctx.sla_id, "slo": slo.name}
    interval = minutes_duration(step)
    cases = [
        AlertTestCase(
            name=f"burn {number(above / limit)}x the threshold fires {detect}",
            interval=interval,
            input_series=_burn_inputs(ctx, history, burn, per_step, above),
            eval_time=eval_time,
            expect_firing=True,
            exp_labels=exp,
            evaluation_interval=own_step,
        ),
        AlertTestCase(
            name=f"burn {number(below / limit)}x the threshold does not fire",
            interval=interval,
            input_series=_burn_inputs(ctx, history, burn, per_step, below),
            eval_time=eval_time,
            expect_firing=False,
            evaluation_interval=own_step,
        ),
    ]
    if guard > 0:
        # The guard extrapolates the long window's event rate, so a short test run still
        # sees the whole window's count: guard/2 events in it must not page.
        cases.append(
            AlertTestCase(
                name=f"fast burn on fewer than {guard} events does not fire",
                interval=interval,
                input_series=_burn_inputs(ctx, history, burn, guard / (2 * n), above),
                eval_time=eval_time,
                expect_firing=False,
                evaluation_interval=own_step,
            )
        )
    return cases


def _for_minutes(alert: BurnAlert) -> int:
    return math.ceil(seconds(alert.for_duration) / 60) if alert.for_duration != "0s" else 0


def _slice_cases(ctx: SloContext, alert: BurnAlert) -> list[AlertTestCase]:
    """Per tier: the source stops; one evaluation before the bad-slice share crosses the
    threshold the alert is silent, at the crossing it fires (both after `for`)."""
    slo = ctx.slo
    sli = slo.sli
    if isinstance(sli, FreshnessSli):
        source = Source(max_age=seconds(sli.max_age))
        series_of, metric = sli.last_success, sli.last_success.name
        what = f"no success for longer than {sli.max_age}"
    else:
        assert isinstance(sli, ThroughputSli)
        source = Source(rate_window=seconds(sli.rate_window))
        series_of, metric = sli.counter, sli.counter.name
        what = f"throughput below {number(sli.min_per_second)}/s"
    # The tiers of one SLO are planned together: some share one simulated run.
    tiers = tuple(
        Tier(
            threshold(slo.objective, a.budget_percent, slo.window, a.long_window),
            seconds(a.long_window),
            seconds(a.short_window),
            seconds(a.for_duration),
        )
        for a in slo.selected_alerts
    )
    plan = tier_timelines(tiers, source)[slo.selected_alerts.index(alert)]
    if plan is None:
        return []
    last = plan.samples - 1
    if isinstance(sli, FreshnessSli):
        # The gauge holds the time of the last success: the current time, until it
        # freezes at plan.stop (before the first sample if the bound is long).
        fresh = max(-1, plan.stop // plan.sample)
        values = f"0+{plan.sample}x{fresh}" if fresh >= 0 else ""
        values = f"{values} {_fmt(plan.stop)}x{last - fresh - 1}".strip()
    else:
        # Counters start high, so rate() never clamps its extrapolation at zero.
        per_sample = float(_fmt(sli.min_per_second * float(plan.healthy) * plan.sample))
        base = float(_fmt(per_sample * 1000))
        values = f"{_fmt(base)}+{_fmt(per_sample)}x{plan.stop}"
        if last > plan.stop:
            # promtool expands a+bxn by repeated addition; the flat value must be exactly
            # where that ends, as any decrease, however small, reads as a counter reset.
            flat = base
            for _ in range(plan.stop):
                flat += per_sample
            values += f" {flat!r}x{last - plan.stop - 1}"
    series = ((_series(ctx, series_of, metric, {}), values),)
    exp = {ctx.naming.prom(SLA_ID): ctx.sla_id, "slo": slo.name}
    interval, step = duration(plan.sample), duration(plan.step)
    return [
        AlertTestCase(
            name=f"{what}, a bad-slice share {plan.above:.3f}x the threshold over "
            f"{alert.long_window} fires",
            eval_time=duration(plan.fire_at * plan.step),
            expect_firing=True,
            exp_labels=exp,
            interval=interval,
            input_series=series,
            evaluation_interval=step,
        ),
        AlertTestCase(
            name=f"{what}, one evaluation earlier ({plan.below:.3f}x the threshold) it "
            "does not fire",
            eval_time=duration(plan.quiet_at * plan.step),
            expect_firing=False,
            interval=interval,
            input_series=series,
            evaluation_interval=step,
        ),
    ]
