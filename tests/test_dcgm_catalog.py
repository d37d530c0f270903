"""The shipped DCGM catalogue, exporter acceptance, and the derived collectors.csv."""

from __future__ import annotations

import csv
import shutil
from collections import Counter
from pathlib import Path

import pytest
import yaml

from obs_iac import pipeline
from obs_iac.catalog import dcgm
from obs_iac.packs.gpu import TYPE_OVERRIDES
from obs_iac.promql import referenced_metrics
from tests.conftest import GOLDEN_CASES, PYPROJECT, golden_blueprints

GOLDEN = Path(__file__).parent / "golden"
# A copy of the seed's reference catalogue, with its provenance in the README beside it.
REFERENCE = Path(__file__).parent / "fixtures" / "reference"
REFERENCE_CSV = REFERENCE / "dcgm_fields.csv"
MEASURED = "4.5.3-4.8.2"


def test_catalogue_has_every_row_of_the_reference() -> None:
    catalog = dcgm.catalog()
    assert len(catalog) == 1088
    status = Counter(
        "removed" if f.status.startswith("removed_after_") else f.status for f in catalog.values()
    )
    assert status == {
        "current": 627,
        "deprecated_alias": 324,
        "removed": 133,
        "dcgm_exporter_pseudo_field": 4,
    }
    assert sum(1 for n in catalog if n.startswith("DCGM_FI_PROF_")) == 123
    current_accepted = [
        f for f in catalog.values() if f.status == "current" and dcgm.accepted(f, MEASURED)
    ]
    assert len(current_accepted) == 340


def test_package_data_is_the_reference_csv() -> None:
    import hashlib
    from importlib import resources

    reference = REFERENCE_CSV.read_bytes()
    # The copy is the one its README describes (replacing it means saying where from).
    digest = hashlib.sha256(reference).hexdigest()
    assert f"sha256 {digest}" in (REFERENCE / "README.md").read_text(encoding="utf-8")
    rows = list(csv.DictReader(reference.decode("utf-8").splitlines()))
    status = Counter(
        "removed" if r["status"].startswith("removed_after_") else r["status"] for r in rows
    )
    assert (len(rows), status["current"], status["deprecated_alias"]) == (1088, 627, 324)
    shipped = resources.files("obs_iac.catalog").joinpath("dcgm_fields.csv").read_bytes()
    assert shipped == reference


def test_seed_bogus_field_is_unknown() -> None:
    bogus = "DCGM_FI_DEV_SM__STALL_INST_FETCH_REASON_CYCLES"
    assert bogus not in dcgm.catalog()
    suggestions = dcgm.suggest(bogus, MEASURED)
    assert 1 <= len(suggestions) <= 3
    assert all(dcgm.accepted(dcgm.catalog()[s], MEASURED) for s in suggestions)


def test_dcgm_46_name_rejected_by_older_exporter_with_alias() -> None:
    ratio = dcgm.catalog()["DCGM_FI_DEV_GPU_UTIL_RATIO"]
    assert ratio.field_id == 203
    assert not dcgm.accepted(ratio, MEASURED)
    assert dcgm.accepted_alias(ratio, MEASURED) == "DCGM_FI_DEV_GPU_UTIL"
    assert dcgm.accepted(ratio, "4.6.0-4.9.0")
    old = dcgm.catalog()["DCGM_FI_DEV_GPU_UTIL"]
    assert dcgm.accepted(old, MEASURED)


def test_exporter_help_never_breaks_the_csv() -> None:
    for field in dcgm.catalog().values():
        text = field.exporter_help
        assert text and not any(c in text for c in ",\"'\n\r"), field.name


def _render(case: str, tmp_path: Path) -> pipeline.Render:
    repo = tmp_path / case
    shutil.copytree(golden_blueprints(case), repo / "blueprints")
    config = GOLDEN / case / "pyproject.toml"
    if config.is_file():
        shutil.copy(config, repo / "pyproject.toml")
    else:
        (repo / "pyproject.toml").write_text(PYPROJECT.format(extra=""))
    return pipeline.render(pipeline.open_workspace(repo))


CASES = GOLDEN_CASES


def _collectors(text: str) -> list[list[str]]:
    return [row for row in csv.reader(text.splitlines()) if row and not row[0].startswith("#")]


@pytest.mark.parametrize("case", CASES)
def test_collectors_csv_format_and_acceptance(case: str, tmp_path: Path) -> None:
    result = _render(case, tmp_path)
    catalog = dcgm.catalog()
    exporter = {s.name: s.gpu["dcgm_exporter_version"] for s in result.plan.services}
    for service, tag in exporter.items():
        text = result.files[f"dcgm-exporter/{service}/collectors.csv"].decode()
        assert '"' not in text and "'" not in text.replace("# ", "")
        rows = _collectors(text)
        assert rows
        for line in text.splitlines():
            if line and not line.startswith("#"):
                assert line.count(",") == 2, line
        names = [r[0] for r in rows]
        assert len(names) == len(set(names))
        for name, ptype, help_text in rows:
            field = catalog[name]
            assert dcgm.accepted(field, tag), (service, name)
            # The XID count is written as a gauge (it falls when the window passes).
            assert ptype.strip() == TYPE_OVERRIDES.get(name, field.prometheus_type)
            assert help_text.strip() == field.exporter_help
        configmap = yaml.safe_load(result.files[f"dcgm-exporter/{service}/configmap.yaml"])
        assert configmap["data"]["metrics"] == text


@pytest.mark.parametrize("case", CASES)
def test_derived_fields_cover_every_rule_and_the_extras(case: str, tmp_path: Path) -> None:
    result = _render(case, tmp_path)
    catalog = dcgm.catalog()
    for svc in result.plan.services:
        rows = _collectors(result.files[f"dcgm-exporter/{svc.name}/collectors.csv"].decode())
        collected = {r[0] for r in rows}
        rules = yaml.safe_load(result.files[f"prometheus/rules/{svc.name}.rules.yml"])
        used = {
            metric
            for group in rules["groups"]
            for rule in group["rules"]
            for metric in referenced_metrics(str(rule["expr"]))
            if metric in catalog
        }
        assert used, svc.name
        assert used <= collected, sorted(used - collected)
        assert set(svc.gpu["extra_fields"]) <= collected
        # Nothing collected without a reason: a rule, a dashboard query or an extra.
        dashboards = {
            metric
            for row in result.plan.dashboard_rows
            if row.service == svc.name
            for panel in row.panels
            for query in panel.queries
            if query.datasource == "prometheus"
            for metric in referenced_metrics(query.expr)
        }
        assert collected <= used | dashboards | set(svc.gpu["extra_fields"])
