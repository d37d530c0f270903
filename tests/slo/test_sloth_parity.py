"""For the same SLO, obs-iac's burn-rate alerts use the thresholds and windows Sloth uses.

The reference numbers are Sloth's own (slok/sloth internal/alert/windows/google-30d.yaml and
google-28d.yaml: budget percent and window pair per tier; internal/alert/window.go
getBurnRateFactor: factor = percent * period_hours / 100 / long_window_hours;
internal/prometheus/alert_rules.go: the alert compares the error ratio with
factor * (100 - objective) / 100 over both windows). They are restated here on purpose,
independent of obs_iac/packs/slo/windows.py.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from obs_iac.plan.model import AlertRule
from tests.slo.helpers import cli, make_repo, render_repo

# tier -> (error budget percent, short window hours, long window hours), as in Sloth.
SLOTH_WINDOWS = {
    ("page", "quick"): (2, 5 / 60, 1),
    ("page", "slow"): (5, 0.5, 6),
    ("ticket", "quick"): (10, 2, 24),
    ("ticket", "slow"): (10, 6, 72),
}
WINDOW_NAMES = {5 / 60: "5m", 0.5: "30m", 1: "1h", 2: "2h", 6: "6h", 24: "1d", 72: "3d"}


def sloth_factor(percent: float, period_days: int, long_hours: float) -> float:
    hours_required = percent * period_days * 24 / 100
    return hours_required / long_hours


def sloth_threshold(percent: float, period_days: int, long_hours: float, objective: float) -> float:
    return sloth_factor(percent, period_days, long_hours) * ((100 - objective) / 100)


def test_sloth_factors_are_the_textbook_ones() -> None:
    got = [round(sloth_factor(p, 30, long), 4) for p, _, long in SLOTH_WINDOWS.values()]
    assert got == [14.4, 6.0, 3.0, 1.0]
    got28 = [round(sloth_factor(p, 28, long), 4) for p, _, long in SLOTH_WINDOWS.values()]
    assert got28 == [13.44, 5.6, 2.8, 0.9333]


SPEC = """\
version: "prometheus/v1"
service: "checkout"
slos:
  - name: "requests-availability"
    objective: {objective}
    sli:
      events:
        error_query: sum(rate(http_requests_total{{job="checkout",code=~"5.."}}[{{{{.window}}}}]))
        total_query: sum(rate(http_requests_total{{job="checkout"}}[{{{{.window}}}}]))
    alerting:
      name: CheckoutAvailability
"""


def _ratio_thresholds(alert: AlertRule) -> list[tuple[str, float]]:
    """(window, threshold) for each error-ratio clause of a burn alert expression."""
    pattern = r"slo_error:ratio_rate(\w+)\{[^}]*\} > ([0-9.e+-]+)"
    return [(w, float(v)) for w, v in re.findall(pattern, alert.expr)]


@pytest.mark.parametrize("objective", [99.9, 99.5, 99.0, 95.0])
def test_imported_sloth_spec_alerts_on_sloths_thresholds(tmp_path: Path, objective: float) -> None:
    spec = tmp_path / "sloth.yml"
    spec.write_text(SPEC.format(objective=objective), encoding="utf-8")
    repo = make_repo(tmp_path / "repo", "")
    (repo / "blueprints" / "svc.py").unlink()
    result = cli(repo, "import", "sloth", str(spec), "-o", str(repo / "blueprints" / "c.py"))
    assert result.exit_code == 0, result.output
    plan = render_repo(repo).plan
    alerts = {
        (a.labels["slo_tier"], a.labels["burn_window"]): a
        for g in plan.rule_groups
        if g.pack == "slo"
        for a in g.rules
        if isinstance(a, AlertRule)
    }
    assert len(alerts) == 4
    for (tier, _speed), (percent, short_h, long_h) in SLOTH_WINDOWS.items():
        alert = alerts[(tier, WINDOW_NAMES[long_h])]
        expected = sloth_threshold(percent, 30, long_h, objective)
        clauses = _ratio_thresholds(alert)
        # Sloth's long and short windows, each against the same threshold.
        assert [w for w, _ in clauses] == [WINDOW_NAMES[long_h], WINDOW_NAMES[short_h]]
        for _window, value in clauses:
            assert math.isclose(value, expected, rel_tol=1e-9), (alert.alert, value, expected)
        assert alert.labels["severity"] == ("critical" if tier == "page" else "warning")


def test_windows_and_thresholds_at_28_days(tmp_path: Path) -> None:
    from tests.slo.helpers import HEADER, service_call

    slo = 'Slo(name="errors", objective=99.5, window="28d", sli=ErrorRatioSli(total=REQ, bad=ERR)),'
    make_repo(tmp_path, HEADER + service_call(slo))
    plan = render_repo(tmp_path).plan
    alerts = [a for g in plan.rule_groups for a in g.rules if isinstance(a, AlertRule)]
    slo_alerts = {a.labels["burn_window"]: a for a in alerts if "slo" in a.labels}
    for percent, _short, long_h in SLOTH_WINDOWS.values():
        value = _ratio_thresholds(slo_alerts[WINDOW_NAMES[long_h]])[0][1]
        assert math.isclose(value, sloth_threshold(percent, 28, long_h, 99.5), rel_tol=1e-9)
