"""The blueprint ``slo`` section: one or more business SLOs per service.

Part of the user-facing schema (v1), versioned with the blueprint models. Semantic
checks that need the whole service (label sets, histogram buckets, windows) happen in
the pack, so they can point at the exact line that is wrong.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, RootModel, field_validator, model_validator

from obs_iac.blueprint.models import BlueprintModel
from obs_iac.packs.slo.windows import seconds

METRIC_NAME_PATTERN = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
LABEL_NAME_PATTERN = r"^[a-zA-Z_][a-zA-Z0-9_.]*$"
DURATION_PATTERN = r"^[1-9][0-9]*(m|h|d|w)$"
SLO_NAME_PATTERN = r"^[a-z][a-z0-9-]{0,47}$"

# Windows the pack records error ratios for; burn-rate alerts may only use these.
Window = Literal["5m", "30m", "1h", "2h", "6h", "1d", "3d"]
STANDARD_WINDOWS = ("28d", "30d")


class Series(BlueprintModel):
    """A series the SLI reads, declared by the user: it joins the plan's metric catalogue,
    so lint rules can check every query against its type and labels."""

    name: str = Field(
        pattern=METRIC_NAME_PATTERN,
        description="Metric name as Prometheus stores it; for a histogram the family name "
        "without _bucket/_count/_sum.",
    )
    type: Literal["counter", "gauge", "histogram"] = Field(description="Prometheus metric type.")
    unit: str = Field(
        pattern=r"^[a-z][a-z0-9_]*$",
        description="Unit of the value: seconds, requests, timestamp_seconds, ...",
    )
    labels: tuple[str, ...] = Field(
        min_length=1,
        description="Every label the series carries (without `le`); must include "
        "business_sla_id so the SLO can be selected per SLA.",
    )
    buckets: tuple[float, ...] = Field(
        default=(),
        description="Histogram bucket upper bounds (`le` values), required for a histogram.",
    )
    help: str = Field(default="", max_length=300, description="What the series measures.")

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for label in value:
            if not re.fullmatch(LABEL_NAME_PATTERN, label):
                raise ValueError(f"{label!r} is not a valid label name")
            if label == "le":
                raise ValueError("do not declare `le`; it is implied for histogram buckets")
        if len(set(value)) != len(value):
            raise ValueError("labels are listed twice")
        return tuple(sorted(value))

    @field_validator("buckets")
    @classmethod
    def _sorted_buckets(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if list(value) != sorted(set(value)):
            raise ValueError("buckets must be strictly increasing")
        return value


Matchers = dict[str, str]
MATCH_OPS = ("=~", "!~", "!=")


def parse_matcher(value: str) -> tuple[str, str]:
    """A matcher value is exact, or starts with an operator: ``"=~5.."``, ``"!=200"``."""
    for op in MATCH_OPS:
        if value.startswith(op):
            return op, value[len(op) :]
    return "=", value


def _check_matchers(value: Matchers) -> Matchers:
    for label, raw in value.items():
        if not re.fullmatch(LABEL_NAME_PATTERN, label):
            raise ValueError(f"{label!r} is not a valid label name")
        op, pattern = parse_matcher(raw)
        if "~" in op:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"matcher {label}{op}{pattern!r}: bad regex: {exc}") from None
    return value


class LatencySli(BlueprintModel):
    """Good events are requests faster than ``threshold_seconds``, read from a histogram:
    good = ``<name>_bucket{le="<threshold>"}``, total = ``<name>_count``."""

    kind: Literal["latency"] = Field(default="latency", description="SLI kind discriminator.")
    histogram: Series = Field(description="The latency histogram (type='histogram').")
    threshold_seconds: float = Field(
        gt=0, description="Latency bound; must be one of the histogram's buckets."
    )
    matchers: Matchers = Field(
        default_factory=dict,
        description="Extra matchers on declared labels, e.g. {'stage': 'inference'}; a value "
        "may start with =~, != or !~.",
    )

    _matchers = field_validator("matchers")(_check_matchers)


class ErrorRatioSli(BlueprintModel):
    """Error ratio from counters: bad/total, or 1 - good/total."""

    kind: Literal["error_ratio"] = Field(
        default="error_ratio", description="SLI kind discriminator."
    )
    total: Series = Field(description="Counter of every event.")
    good: Series | None = Field(default=None, description="Counter of good events.")
    bad: Series | None = Field(default=None, description="Counter of bad events.")
    matchers: Matchers = Field(
        default_factory=dict, description="Extra matchers applied to every series."
    )
    good_matchers: Matchers = Field(
        default_factory=dict, description="Matchers only for `good`, e.g. {'code': '=~2..'}."
    )
    bad_matchers: Matchers = Field(
        default_factory=dict, description="Matchers only for `bad`, e.g. {'code': '=~5..'}."
    )

    _matchers = field_validator("matchers", "good_matchers", "bad_matchers")(_check_matchers)

    @model_validator(mode="after")
    def _one_of(self) -> ErrorRatioSli:
        if (self.good is None) == (self.bad is None):
            raise ValueError("give exactly one of `good` or `bad` next to `total`")
        return self


class FreshnessSli(BlueprintModel):
    """Time since the last successful event must stay under ``max_age``; every evaluation
    in which it does not counts against the budget (time-slice budgeting)."""

    kind: Literal["freshness"] = Field(default="freshness", description="SLI kind discriminator.")
    last_success: Series = Field(
        description="Gauge holding the Unix time of the last success, e.g. "
        "*_last_success_timestamp_seconds."
    )
    max_age: str = Field(pattern=DURATION_PATTERN, description="Bound, e.g. '15m'.")
    matchers: Matchers = Field(
        default_factory=dict, description="Extra label matchers on the series."
    )

    _matchers = field_validator("matchers")(_check_matchers)


class ThroughputSli(BlueprintModel):
    """Throughput must stay above a floor; every evaluation below it (or without data)
    counts against the budget (time-slice budgeting)."""

    kind: Literal["throughput"] = Field(default="throughput", description="SLI kind discriminator.")
    counter: Series = Field(description="Counter of processed events.")
    min_per_second: float = Field(gt=0, description="Floor in events per second.")
    rate_window: Literal["1m", "2m", "5m", "10m"] = Field(
        default="5m", description="Window of the rate() the floor is compared with."
    )
    matchers: Matchers = Field(
        default_factory=dict, description="Extra label matchers on the series."
    )

    _matchers = field_validator("matchers")(_check_matchers)


Sli = Annotated[
    LatencySli | ErrorRatioSli | FreshnessSli | ThroughputSli, Field(discriminator="kind")
]


class BurnAlert(BlueprintModel):
    """One multiwindow burn-rate alert: fires while both windows burn faster than the
    rate that would consume ``budget_percent`` of the budget within ``long_window``."""

    tier: Literal["page", "ticket"] = Field(description="page (critical) or ticket (warning).")
    long_window: Window = Field(description="The window the budget share is spent in.")
    short_window: Window = Field(description="Confirms the burn is still going on.")
    budget_percent: float = Field(
        gt=0, le=100, description="Share of the whole window's error budget spent in long_window."
    )
    min_events: int | None = Field(
        default=None, ge=0, description="Low-traffic guard for this alert; default: the SLO's."
    )
    for_duration: str = Field(
        default="0s", pattern=r"^(0s|[1-9][0-9]*(s|m|h))$", description="Alert `for`."
    )

    @model_validator(mode="after")
    def _short_is_shorter(self) -> BurnAlert:
        if seconds(self.short_window) >= seconds(self.long_window):
            raise ValueError("short_window must be shorter than long_window")
        return self


DEFAULT_ALERTS: tuple[BurnAlert, ...] = (
    BurnAlert(tier="page", long_window="1h", short_window="5m", budget_percent=2),
    BurnAlert(tier="page", long_window="6h", short_window="30m", budget_percent=5),
    BurnAlert(tier="ticket", long_window="1d", short_window="2h", budget_percent=10),
    BurnAlert(tier="ticket", long_window="3d", short_window="6h", budget_percent=10),
)


class Slo(BlueprintModel):
    """One service level objective of a business SLA."""

    name: str = Field(
        pattern=SLO_NAME_PATTERN,
        description="SLO name, unique in the service: the `slo` label on every rule.",
    )
    description: str = Field(default="", max_length=300, description="The SLO in words.")
    objective: float = Field(
        description="Target in percent, strictly between 0 and 100, e.g. 99.5."
    )
    window: str = Field(
        default="30d", pattern=r"^[1-9][0-9]*(d|w)$", description="SLO window: 28d or 30d."
    )
    allow_nonstandard_window: bool = Field(
        default=False,
        description="Accept a window other than 28d/30d (the tier factors scale with it).",
    )
    sli: Sli = Field(description="What counts as a good or bad event (or minute).")
    alerts: tuple[BurnAlert, ...] = Field(
        default=DEFAULT_ALERTS,
        description="Burn-rate tiers; default: page 2%/1h+5m, 5%/6h+30m; ticket 10%/1d+2h, "
        "10%/3d+6h.",
    )
    page: bool = Field(default=True, description="False drops every page-tier alert.")
    ticket: bool = Field(default=True, description="False drops every ticket-tier alert.")
    min_events: int = Field(
        default=10,
        ge=0,
        description="Low-traffic guard: event SLIs alert only when the long window saw at "
        "least this many events (0 disables it).",
    )

    @field_validator("objective")
    @classmethod
    def _objective(cls, value: float) -> float:
        if 0 < value <= 1:
            # The most common SLO typo: a ratio where a percent is expected. As a percent
            # it is still valid, but every burn-rate tier becomes unreachable, which is
            # three errors about budgets for one about units.
            percent = round(value * 100, 9)
            raise ValueError(
                f"objective {value:g} is a ratio, but objectives are percentages: "
                f"did you mean {percent:g} (percent)?"
            )
        if not 0 < value < 100:
            raise ValueError(
                f"objective {value:g} is not a percentage strictly between 0 and 100 "
                "(100 leaves no error budget, 0 promises nothing); e.g. 99.5"
            )
        return value

    @property
    def selected_alerts(self) -> tuple[BurnAlert, ...]:
        return tuple(
            a
            for a in self.alerts
            if (a.tier == "page" and self.page) or (a.tier == "ticket" and self.ticket)
        )


class SloSection(RootModel[tuple[Slo, ...]]):
    """``service(..., slo=[Slo(...), ...])``."""

    model_config = ConfigDict(frozen=True)
