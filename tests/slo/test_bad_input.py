"""Bad SLO input gives a located diagnostic and exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.slo.helpers import HEADER, cli, line_of, make_repo, service_call


def slo(**fields: str) -> str:
    base = {"name": '"errors"', "objective": "99.5", "sli": "ErrorRatioSli(total=REQ, bad=ERR)"}
    base.update(fields)
    inner = "\n".join(f"    {k}={v}," for k, v in base.items())
    return f"Slo(\n{inner}\n),"


def run(tmp_path: Path, slos: str, extra: str = "") -> tuple[int, str, str]:
    text = HEADER + extra + service_call(slos)
    make_repo(tmp_path, text)
    result = cli(tmp_path, "render")
    return result.exit_code, result.stderr, text


@pytest.mark.parametrize("objective", ["100", "100.5", "0", "-1"])
def test_objective_outside_0_100_is_located(tmp_path: Path, objective: str) -> None:
    code, err, text = run(tmp_path, slo(objective=objective))
    assert code == 2
    line = line_of(text, f"objective={objective},")
    assert f"blueprints/svc.py:{line}:" in err
    assert "strictly between 0 and 100" in err
    assert "Traceback" not in err


def test_objective_in_a_dict_section_is_located(tmp_path: Path) -> None:
    slos = (
        '{"name": "d", "objective": 100, "sli": {"kind": "error_ratio", "total": REQ, "bad": ERR}},'
    )
    code, err, text = run(tmp_path, slos)
    assert code == 2
    line = line_of(text, '"objective": 100')
    assert f"blueprints/svc.py:{line}:" in err


def test_nonstandard_window_needs_the_override(tmp_path: Path) -> None:
    code, err, text = run(tmp_path, slo(window='"7d"'))
    assert code == 2
    assert f"blueprints/svc.py:{line_of(text, 'window=')}:" in err
    assert "error[slo/window]" in err
    assert "allow_nonstandard_window" in err
    code, err, _ = run(tmp_path, slo(window='"7d"', allow_nonstandard_window="True"))
    assert code == 0, err


def test_window_shorter_than_an_alert_window(tmp_path: Path) -> None:
    code, err, _ = run(tmp_path, slo(window='"2d"', allow_nonstandard_window="True"))
    assert code == 2
    assert "not longer than the 3d alert window" in err


def test_latency_on_a_counter(tmp_path: Path) -> None:
    code, err, text = run(tmp_path, slo(sli="LatencySli(histogram=REQ, threshold_seconds=0.25)"))
    assert code == 2
    assert "error[slo/series-type]" in err
    assert "needs a histogram" in err
    assert f"blueprints/svc.py:{line_of(text, 'LatencySli(histogram=REQ')}:" in err


def test_latency_threshold_must_be_a_bucket(tmp_path: Path) -> None:
    code, err, _ = run(tmp_path, slo(sli="LatencySli(histogram=LAT, threshold_seconds=0.3)"))
    assert code == 2
    assert "error[slo/threshold-not-bucket]" in err
    assert "use 0.25 or 0.5" in err


def test_good_and_total_with_different_label_sets(tmp_path: Path) -> None:
    extra = (
        'GOOD = Series(name="req_ok_total", type="counter", unit="requests", '
        'labels=("business_sla_id", "code", "job"))\n'
    )
    code, err, text = run(tmp_path, slo(sli="ErrorRatioSli(total=REQ, good=GOOD)"), extra)
    assert code == 2
    assert "error[slo/label-mismatch]" in err
    assert "only on good: code" in err
    assert f"blueprints/svc.py:{line_of(text, 'good=GOOD')}:" in err


def test_series_without_business_sla_id(tmp_path: Path) -> None:
    extra = 'BARE = Series(name="bare_total", type="counter", unit="x", labels=("job",))\n'
    code, err, _ = run(tmp_path, slo(sli="ErrorRatioSli(total=BARE, bad=BARE)"), extra)
    assert code == 2
    assert "error[slo/missing-sla-label]" in err


def test_duplicate_slo_names(tmp_path: Path) -> None:
    code, err, _ = run(tmp_path, slo() + "\n" + slo())
    assert code == 2
    assert "error[slo/duplicate]" in err


def test_tier_that_can_never_fire(tmp_path: Path) -> None:
    # 14.4 * (1 - 0.9) = 1.44 > 1: no error ratio reaches it.
    code, err, _ = run(tmp_path, slo(objective="90"))
    assert code == 2
    assert "error[slo/unreachable-tier]" in err


def test_good_and_bad_together_is_rejected(tmp_path: Path) -> None:
    code, err, _ = run(tmp_path, slo(sli="ErrorRatioSli(total=REQ, good=ERR, bad=ERR)"))
    assert code == 2
    assert "exactly one of `good` or `bad`" in err


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("kind", "text", "line", "needle"),
    [
        ("sloth", "version: prometheus/v2\nservice: a\nslos: []\n", 1, "not 'prometheus/v1'"),
        ("sloth", "version: prometheus/v1\nservice: a\nslos: [\n", 4, "not valid YAML"),
        (
            "sloth",
            "version: prometheus/v1\nservice: a\nslos:\n  - name: x\n    objective: 100\n"
            "    sli:\n      events:\n        error_query: sum(rate(e[{{.window}}]))\n"
            "        total_query: sum(rate(t[{{.window}}]))\n",
            5,
            "not strictly between 0 and 100",
        ),
        (
            "sloth",
            "version: prometheus/v1\nservice: a\nslos:\n  - name: x\n    objective: 99\n"
            "    sli:\n      raw:\n        error_ratio_query: foo\n",
            7,
            "a raw SLI gives a ratio",
        ),
        ("openslo", "apiVersion: openslo/v0\nkind: SLO\n", 1, "not 'openslo/v1'"),
        (
            "openslo",
            "apiVersion: openslo/v1\nkind: SLO\nmetadata:\n  name: s\nspec:\n  service: a\n"
            "  timeWindow:\n    - duration: 7d\n      isRolling: true\n",
            7,
            "not 28d/4w or 30d/1M",
        ),
    ],
)
def test_invalid_import_files(tmp_path: Path, kind: str, text: str, line: int, needle: str) -> None:
    spec = write(tmp_path, "spec.yml", text)
    result = cli(tmp_path, "import", kind, str(spec))
    assert result.exit_code == 2, result.output
    assert f"spec.yml:{line}:" in result.stderr
    assert f"error[import/{kind}]" in result.stderr
    assert needle in result.stderr
    assert result.stdout == ""
