"""Timelines for the per-tier promtool cases of time-slice SLIs (freshness, throughput).

A time-slice SLI records one 0/1 `slo_bad_slice:bool` sample per rule evaluation, and its
error ratio over a window is ``avg_over_time`` of those samples: the share of bad
evaluations. At an evaluation step E that does not divide the window w, a window holds
``N = floor(w / E) + 1`` samples whether the range is closed (Prometheus 2.x) or left-open
(3.x), and a share is a multiple of 1/N. "Just above / just below the threshold θ" needs
1/N to be a small part of θ, so N cannot be small: about 6/θ samples for ±8 %, i.e. one
rule evaluation per sample. The cheapest test is therefore the coarsest step that still
gives that resolution, which is what :func:`choose_step` searches for.

The timeline: the source is healthy for a full long window, then stops (the freshness
gauge freezes, the throughput counter goes flat) and stays stopped. Bad slices are the
most recent ones, so the short window's share is never below the long window's and the
long window decides: the alert becomes active at the first evaluation J where k bad
slices out of N exceed θ. One evaluation earlier the share (k-1)/N is just below θ.
Checks at J-1 (+ `for`) expect silence and at J (+ `for`) firing, so a threshold 10 %
off, or a wrong window, fails one of them.

Everything here is simulated with Prometheus' own arithmetic (window membership,
``rate()`` extrapolation), under both range semantics; a layout on which they disagree,
or a rate exactly at the floor, is rejected rather than guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache

# Largest relative distance from θ of the "just above" and "just below" shares. The
# mutation test moves thresholds by 10 %, which must flip one check of every tier.
PRECISION = 0.08
# Evaluations one case may cost; promtool evaluates every rule of the service's file at
# every step (a few ms a step), so a tier needing more gets the best it can within this.
MAX_STEPS = 2500


@dataclass(frozen=True)
class Source:
    """What feeds the bad-slice rule: a freshness bound, or a throughput rate window."""

    max_age: int | None = None  # seconds, freshness
    rate_window: int | None = None  # seconds, throughput


@dataclass(frozen=True)
class Timeline:
    step: int  # evaluation step, seconds
    sample: int  # input sample interval, seconds; divides step
    stop: int  # freshness: time of the last success (s); throughput: sample index it stops at
    quiet_at: int  # evaluation index of the check that expects silence
    fire_at: int  # evaluation index of the check that expects the alert
    below: float  # long-window share / θ one evaluation before the crossing
    above: float  # long-window share / θ at the crossing
    healthy: Fraction = Fraction(1)  # throughput: healthy rate as a multiple of the floor
    # Evaluation index the input must reach: this tier's firing check, or the latest one
    # of the tiers sharing its run (they then share one input series, hence one run).
    until: int = 0

    @property
    def samples(self) -> int:
        """Input samples needed, indices 0..samples-1, through the last check."""
        return max(self.fire_at, self.until) * (self.step // self.sample) + 1


class _Ambiguous(Exception):
    """A layout whose outcome depends on range semantics or float rounding."""


def _sample_interval(step: int, source: Source) -> int | None:
    """Input interval for a step: every evaluation sees a sample at its own timestamp (the
    gauge is current, not looked back at); for a counter, rate() needs two samples in its
    window, and a window it does not divide holds the same samples in 2.x and 3.x."""
    if source.rate_window is None:
        return step
    for parts in range(1, step + 1):
        if step % parts:
            continue
        interval = step // parts
        if interval < source.rate_window and source.rate_window % interval:
            return interval
    return None


def choose_step(limit: float, long_window: int, short_window: int, source: Source) -> int | None:
    """The coarsest evaluation step whose share resolution brackets ``limit`` within
    PRECISION, or the most precise one within MAX_STEPS."""
    best: tuple[float, int] | None = None
    for step in range(max(1, short_window // 6), 0, -1):
        if long_window % step == 0 or _sample_interval(step, source) is None:
            continue
        n = long_window // step + 1
        if n > MAX_STEPS:
            break
        x = limit * n
        if abs(x - round(x)) < 1e-6:
            continue  # a share exactly at θ: no "just below"
        k = math.floor(x) + 1
        if k > n:
            continue
        above, below = k / n / limit, (k - 1) / n / limit
        if above <= 1 + PRECISION and below >= 1 - PRECISION:
            return step
        error = max(above - 1, 1 - below)
        if best is None or error < best[0]:
            best = (error, step)
    return None if best is None else best[1]


def _resolves(limit: float, long_window: int, step: int) -> bool:
    """Whether a step's share resolution brackets ``limit`` within PRECISION."""
    if long_window % step == 0:
        return False
    n = long_window // step + 1
    x = limit * n
    if abs(x - round(x)) < 1e-6:
        return False
    k = math.floor(x) + 1
    return k <= n and k / n / limit <= 1 + PRECISION and (k - 1) / n / limit >= 1 - PRECISION


def joint_step(tiers: tuple[Tier, ...], source: Source) -> int | None:
    """The coarsest step at which every tier of ``tiers`` resolves its threshold within
    PRECISION (no best effort: a tier that cannot is run on its own)."""
    longest = max(t.long_window for t in tiers)
    for step in range(max(1, min(t.short_window for t in tiers) // 6), 0, -1):
        if longest // step + 1 > MAX_STEPS:
            return None
        if _sample_interval(step, source) is None:
            continue
        if all(_resolves(t.limit, t.long_window, step) for t in tiers):
            return step
    return None


def _freshness_bad(step: int, last_success: int, max_age: int, j: int) -> int:
    """Gauge = time of the last success: the current time until ``last_success``, then
    frozen there (a negative time: the last success predates the test)."""
    now = j * step
    return 1 if now - min(now, last_success) > max_age else 0


def healthy_factor(sample: int, rate_window: int) -> Fraction:
    """The throughput counter's healthy rate as a multiple of the floor: about 2, chosen so
    that no mix of healthy and flat intervals in a rate window averages exactly the floor
    (a window spans at most rate_window/sample + 1 intervals, fewer than m)."""
    m = rate_window // sample + 2
    return Fraction(2 * m + 1, m)


def _throughput_bad(
    step: int, sample: int, stop: int, rate_window: int, j: int, closed: bool
) -> int | None:
    """rate() of a counter rising at healthy_factor() x the floor until sample ``stop``, flat
    after. The first sample sits less than one interval after the window start, so
    rate() extrapolates to the whole window: the result is the mean slope between the
    first and last samples in the window. None: fewer than two samples (no bad-slice
    sample at all, as the absent() fallback only covers a missing series)."""
    last = j * step // sample
    first = last
    while first - 1 >= 0 and (
        (last - first + 1) * sample <= rate_window
        if closed
        else (last - first + 1) * sample < rate_window
    ):
        first -= 1
    if first == last:
        return None
    healthy = Fraction(min(last, stop) - min(first, stop), last - first)
    mean = healthy * healthy_factor(sample, rate_window)
    if mean == 1:
        raise _Ambiguous  # exactly at the floor: float rounding decides, so do not rely on it
    return 1 if mean < 1 else 0


def _share(bad: list[int | None], step: int, window: int, j: int, closed: bool) -> Fraction | None:
    start = max(0, j - window // step - 1)
    got = [
        b
        for i, b in enumerate(bad[start : j + 1], start)
        if b is not None and ((j - i) * step <= window if closed else (j - i) * step < window)
    ]
    return Fraction(sum(got), len(got)) if got else None


def _active(
    bad: list[int | None], step: int, long_window: int, short_window: int, limit: float, j: int
) -> bool:
    """The alert condition at evaluation j; both range semantics must agree."""
    results = set()
    for closed in (True, False):
        shares = [_share(bad, step, w, j, closed) for w in (long_window, short_window)]
        results.add(all(s is not None and s > limit for s in shares))
    if len(results) != 1:
        raise _Ambiguous
    return results.pop()


# A pure function of its arguments (the module constants aside), and a fleet shares a
# handful of (objective, tier, source) combinations: each simulation costs milliseconds,
# so a 1,000-service render would otherwise repeat the same dozen thousands of times.
# typed: 1 and 1.0 are equal keys otherwise; the arithmetic agrees, but keep them apart.
@lru_cache(maxsize=1024, typed=True)
def timeline(
    limit: float, long_window: int, short_window: int, for_seconds: int, source: Source
) -> Timeline | None:
    step = choose_step(limit, long_window, short_window, source)
    if step is None:
        return None
    sample = _sample_interval(step, source)
    assert sample is not None
    per_step = step // sample
    n = long_window // step + 1
    k = math.floor(limit * n) + 1
    hold = math.ceil(for_seconds / step)
    # First bad slice late enough that the long window is full (and past the sample at
    # t=0, which a rate cannot use) one evaluation before the crossing.
    onset = max(n - k + 3, 1)
    if source.max_age is not None:
        # Age exactly max_age one evaluation before the onset (not bad: `> bool`), over it
        # at the onset. A bound longer than the history starts the test already stale-ish.
        stops = [(onset - 1) * step - source.max_age]
    else:
        stops = [onset * per_step + shift for shift in range(per_step * 4 + 8)]
    for stop in stops:
        try:
            return _simulate(limit, long_window, short_window, hold, source, step, sample, stop)
        except _Ambiguous:
            continue
    return None


@dataclass(frozen=True)
class Tier:
    """One burn-rate alert of a time-slice SLO, as its timeline needs it (seconds)."""

    limit: float
    long_window: int
    short_window: int
    for_seconds: int


def _cost(tier: Tier, step: int | None) -> float:
    return math.inf if step is None else tier.long_window / step


@lru_cache(maxsize=1024, typed=True)
def tier_timelines(tiers: tuple[Tier, ...], source: Source) -> tuple[Timeline | None, ...]:
    """A timeline per tier of one SLO, tiers sharing one run where that is cheaper.

    Every tier reads the same bad-slice series, and promtool evaluates every rule of the
    file at each step, so the cost of a run is its number of evaluations. A run long
    enough for the longest window holds the shorter windows too: a shorter tier joins it
    when one step resolves every member's threshold within PRECISION and that run costs
    fewer evaluations than the tiers apart (the 1d and 3d tickets at the default
    objectives: 1,396 evaluations instead of 1,861). Members share the step, the input
    and the time the source stops, each has its own crossing, and the input runs to the
    latest check, so the generator puts them in one test.
    """
    out: dict[int, Timeline | None] = {}
    # Longest window first: it sets the length of the run the others may join.
    pending = sorted(range(len(tiers)), key=lambda i: -tiers[i].long_window)
    while pending:
        lead, rest = pending[0], pending[1:]
        members, step = [lead], choose_step(*_args(tiers[lead]), source)
        alone = {i: choose_step(*_args(tiers[i]), source) for i in rest}
        for i in rest:
            candidate = joint_step(tuple(tiers[j] for j in (*members, i)), source)
            if candidate is None or step is None:
                continue
            apart = _cost(tiers[lead], step) + _cost(tiers[i], alone[i])
            if _cost(tiers[lead], candidate) < apart:
                trial = _joint(tuple(tiers[j] for j in (*members, i)), candidate, source)
                if trial is not None:
                    members.append(i)
                    step = candidate
        joint = (
            _joint(tuple(tiers[j] for j in members), step, source)
            if len(members) > 1 and step is not None
            else None
        )
        plans: tuple[Timeline | None, ...] = joint or ()
        if not plans:
            members = [lead]
            plans = (timeline(*_args(tiers[lead]), tiers[lead].for_seconds, source),)
        out.update(zip(members, plans, strict=True))
        pending = [i for i in pending if i not in members]
    return tuple(out[i] for i in range(len(tiers)))


def _args(tier: Tier) -> tuple[float, int, int]:
    return tier.limit, tier.long_window, tier.short_window


def _joint(tiers: tuple[Tier, ...], step: int, source: Source) -> tuple[Timeline, ...] | None:
    """Timelines of ``tiers`` on one run at ``step``: one stop time, placed for the
    longest window as :func:`timeline` does, must be unambiguous for every tier."""
    sample = _sample_interval(step, source)
    assert sample is not None
    per_step = step // sample
    lead = max(tiers, key=lambda t: t.long_window)
    n = lead.long_window // step + 1
    k = math.floor(lead.limit * n) + 1
    onset = max(n - k + 3, 1)
    if source.max_age is not None:
        stops = [(onset - 1) * step - source.max_age]
    else:
        stops = [onset * per_step + shift for shift in range(per_step * 4 + 8)]
    for stop in stops:
        try:
            plans = [
                _simulate(
                    t.limit,
                    t.long_window,
                    t.short_window,
                    math.ceil(t.for_seconds / step),
                    source,
                    step,
                    sample,
                    stop,
                )
                for t in tiers
            ]
        except _Ambiguous:
            continue
        until = max(p.fire_at for p in plans)
        return tuple(replace(p, until=until) for p in plans)
    return None


def _simulate(
    limit: float,
    long_window: int,
    short_window: int,
    hold: int,
    source: Source,
    step: int,
    sample: int,
    stop: int,
) -> Timeline:
    bad: list[int | None] = []
    crossing = None
    j = 0
    # The onset is placed within a long window of the start; the crossing follows it.
    horizon = 2 * (long_window // step + 1) + 1000
    while j < horizon:
        if source.max_age is not None:
            bad.append(_freshness_bad(step, stop, source.max_age, j))
        else:
            assert source.rate_window is not None
            both = {
                _throughput_bad(step, sample, stop, source.rate_window, j, closed)
                for closed in (True, False)
            }
            if len(both) != 1:
                raise _Ambiguous
            bad.append(both.pop())
        # No bad slice yet: every share is 0, the alert is inactive.
        if any(bad[-1:]) and _active(bad, step, long_window, short_window, limit, j):
            crossing = j
            break
        j += 1
    if crossing is None:
        raise _Ambiguous
    # The source stays stopped, so the shares only grow: active from the crossing on.
    for extra in range(1, hold + 1):
        index = crossing + extra
        if source.max_age is not None:
            bad.append(_freshness_bad(step, stop, source.max_age, index))
        else:
            assert source.rate_window is not None
            bad.append(_throughput_bad(step, sample, stop, source.rate_window, index, True))
        if not _active(bad, step, long_window, short_window, limit, index):
            raise _Ambiguous
    before = _share(bad, step, long_window, crossing - 1, True)
    at = _share(bad, step, long_window, crossing, True)
    assert before is not None and at is not None
    return Timeline(
        step=step,
        sample=sample,
        stop=stop,
        quiet_at=crossing - 1 + hold,
        fire_at=crossing + hold,
        below=float(before) / limit,
        above=float(at) / limit,
        healthy=(
            Fraction(1)
            if source.rate_window is None
            else healthy_factor(sample, source.rate_window)
        ),
    )


def duration(seconds: int) -> str:
    """The shortest exact Prometheus spelling of a whole number of seconds."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
