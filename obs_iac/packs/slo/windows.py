"""Burn-rate arithmetic, shared by the rules, the tests and the importers.

factor = budget_percent / 100 * slo_window / long_window
threshold (on the error ratio) = factor * (1 - objective / 100)

This is the formula of the Google SRE workbook and of Sloth
(internal/alert/window.go getBurnRateFactor). At 30d the default tiers give
14.4 / 6 / 3 / 1; at 28d 13.44 / 5.6 / 2.8 / 0.9333.
"""

from __future__ import annotations

import re

UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
RECORDED_WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")


def seconds(duration: str) -> int:
    match = re.fullmatch(r"([0-9]+)([smhdw])", duration)
    if match is None:
        raise ValueError(f"not a duration: {duration!r}")
    return int(match.group(1)) * UNIT_SECONDS[match.group(2)]


def minutes_duration(minutes: int) -> str:
    """The shortest promtool/Prometheus spelling of a whole number of minutes."""
    if minutes % 1440 == 0:
        return f"{minutes // 1440}d"
    if minutes % 60 == 0:
        return f"{minutes // 60}h"
    return f"{minutes}m"


def burn_factor(budget_percent: float, slo_window: str, long_window: str) -> float:
    return budget_percent / 100 * seconds(slo_window) / seconds(long_window)


def error_budget(objective_percent: float) -> float:
    """The allowed error ratio, e.g. 0.005 for 99.5 %."""
    return (100 - objective_percent) / 100


def threshold(objective_percent: float, budget_percent: float, slo_window: str, long: str) -> float:
    return burn_factor(budget_percent, slo_window, long) * error_budget(objective_percent)


def number(value: float) -> str:
    """A float in PromQL and YAML without binary noise (0.072, not 0.07200000000000006)."""
    text = f"{value:.12g}"
    return text
