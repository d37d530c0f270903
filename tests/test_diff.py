"""obs-iac diff on a temporary GitOps repository: changes by meaning, risk flags, bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from click.testing import CliRunner

from obs_iac.cli import main
from obs_iac.config import RepoConfig
from obs_iac.diff.compare import Change, DiffResult
from obs_iac.diff.engine import run_diff
from obs_iac.diff.report import to_json, to_markdown, to_text
from obs_iac.pipeline import open_workspace, render
from obs_iac.plan.model import Plan
from obs_iac.plugins import GENERATORS, Generator, GeneratorContext, PluginSet, discover
from obs_iac.render.artifact import Artifact
from obs_iac.render.writer import write
from tests.tools import require_tool

REPO = Path(__file__).resolve().parents[1]
RECOMM = "blueprints/recomm_v2.py"
PYPROJECT = '[tool.obs-iac]\nblueprints = "blueprints"\noutput = "generated"\n'


def git(root: Path, *args: str) -> str:
    proc = subprocess.run(
        [require_tool("git"), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return proc.stdout


def render_into(root: Path, plugins: PluginSet | None = None) -> None:
    ws = open_workspace(root)
    write(ws.output, render(ws, plugins).files)


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    """A GitOps repo with the two example blueprints, rendered and committed."""
    root = tmp_path / "gitops"
    shutil.copytree(REPO / "blueprints", root / "blueprints")
    (root / "pyproject.toml").write_text(PYPROJECT)
    render_into(root)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    yield root


def edit(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, 1))


def ids(result: DiffResult) -> set[tuple[str, str, str, str]]:
    return {(c.id.kind, c.id.service, c.id.key, c.change) for c in result.changes}


def codes(result: DiffResult) -> list[tuple[str, str, str]]:
    return [(f.diagnostic.code, f.diagnostic.severity.label, f.service) for f in result.flags]


def change(result: DiffResult, kind: str, key: str) -> Change:
    found = [c for c in result.changes if c.id.kind == kind and c.id.key == key]
    assert len(found) == 1, ids(result)
    return found[0]


def test_unchanged_repo_reports_nothing(repo: Path) -> None:
    for base in (None, "HEAD"):
        result = run_diff(repo, base)
        assert result.changes == [] and result.flags == []
    assert "no changes" in to_text(run_diff(repo))


@pytest.mark.parametrize("base", [None, "HEAD"])
def test_threshold_change(repo: Path, base: str | None) -> None:
    edit(repo, RECOMM, "profiling=True,", "profiling=True,\n        temperature_limit_celsius=80,")
    result = run_diff(repo, base)
    assert ids(result) == {
        ("alert", "recomm-v2", "GpuTemperatureHigh", "changed"),
        ("file", "recomm-v2", "prometheus/tests/recomm-v2.test.yml", "changed"),
    }
    alert = change(result, "alert", "GpuTemperatureHigh")
    assert alert.fields[0].path == "expr"
    assert alert.fields[0].summary == "expr threshold 85 -> 80"
    assert alert.summary == (
        "expr threshold 85 -> 80; annotations.description, annotations.summary reworded"
    )
    assert result.flags == []
    assert result.base == ("generated/" if base is None else "HEAD")


def test_for_and_threshold_in_one_line(repo: Path) -> None:
    # Edit the committed side: the base had `for: 10m` and threshold 0.2.
    rules = repo / "generated/prometheus/rules/recomm-v2.rules.yml"
    text = rules.read_text()
    text = text.replace("< 0.1\n    for: 30m", "< 0.2\n    for: 10m")
    rules.write_text(text)
    result = run_diff(repo)
    assert change(result, "alert", "GpuUtilizationLow").summary == (
        "expr threshold 0.2 -> 0.1; for 10m -> 30m"
    )


def test_pure_reordering_and_formatting_report_nothing(repo: Path) -> None:
    out = repo / "generated"
    rules = out / "prometheus/rules/recomm-v2.rules.yml"
    data = yaml.safe_load(rules.read_text())
    for group in data["groups"]:
        group["rules"].reverse()
        # keys in another order, `for` spelled in seconds, expr re-spaced
        group["rules"] = [dict(reversed(list(r.items()))) for r in group["rules"]]
        for rule in group["rules"]:
            if rule.get("for") == "30m":
                rule["for"] = "1800s"
            rule["expr"] = rule["expr"].replace(" ", "   ")
    rules.write_text(yaml.safe_dump(data, default_flow_style=True, width=70))
    relabel = out / "prometheus/relabel/dcgm-exporter.metric_relabel_configs.yml"
    rdata = yaml.safe_load(relabel.read_text())
    rdata["metric_relabel_configs"].reverse()
    relabel.write_text(json.dumps(rdata))  # JSON is YAML, formatted nothing alike
    csv_path = out / "dcgm-exporter/recomm-v2/collectors.csv"
    lines = csv_path.read_text().splitlines()
    pairs = [lines[i : i + 2] for i in range(2, len(lines), 2)]
    csv_path.write_text("\n".join(lines[:2] + [x for p in reversed(pairs) for x in p]) + "\n")
    board = out / "grafana/dashboards/obs-iac-recomm-v2.json"
    bdata = json.loads(board.read_text())
    bdata["panels"].reverse()
    board.write_text(json.dumps(bdata, indent=4))
    ws = open_workspace(repo)
    fresh = render(ws).files
    for path in (rules, relabel, csv_path, board):
        assert path.read_bytes() != fresh[str(path.relative_to(out))]  # bytes do differ
    result = run_diff(repo)
    assert result.changes == [] and result.flags == []


def test_alert_removed_is_flagged(repo: Path) -> None:
    edit(repo, RECOMM, "profiling=True,", "profiling=False,")
    edit(repo, RECOMM, '"DCGM_FI_PROF_SM_OCCUPANCY",\n            "DCGM_FI_PROF_DRAM_ACTIVE",', "")
    result = run_diff(repo, "HEAD")
    panels = {(c.title, c.change) for c in result.changes if c.id.kind == "panel"}
    assert panels == {
        ("NVLink throughput vs 1 minute earlier", "removed"),
        ("NVLink throughput", "removed"),
        ("SM active", "removed"),
    }  # the panels below them move up: positions are not changes
    assert {i for i in ids(result) if i[0] != "panel"} == {
        ("alert", "recomm-v2", "GpuNvlinkThroughputDrop", "removed"),
        ("collector", "recomm-v2", "DCGM_FI_PROF_DRAM_ACTIVE", "removed"),
        ("collector", "recomm-v2", "DCGM_FI_PROF_NVLINK_RX_BYTES", "removed"),
        ("collector", "recomm-v2", "DCGM_FI_PROF_NVLINK_TX_BYTES", "removed"),
        ("collector", "recomm-v2", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "removed"),
        ("collector", "recomm-v2", "DCGM_FI_PROF_SM_ACTIVE", "removed"),
        ("collector", "recomm-v2", "DCGM_FI_PROF_SM_OCCUPANCY", "removed"),
        ("file", "recomm-v2", "prometheus/tests/recomm-v2.test.yml", "changed"),
        # the built-in edges stop naming the removed alert
        ("inhibit-edge", "recomm-v2", "gpu-fault-mutes-gpu-symptoms", "changed"),
        ("inhibit-edge", "recomm-v2", "gpu-node-down-mutes-gpu-alerts", "changed"),
        ("file", "(fleet)", "alertmanager/inhibit-matrix.md", "changed"),
        ("file", "(fleet)", "kubernetes/alertmanagerconfigs/global-inhibit-rules.yaml", "changed"),
        ("record", "recomm-v2", "gpu:dcgm_nvlink_throughput:bytes_per_second", "removed"),
        ("record", "recomm-v2", "gpu:dcgm_sm_active:ratio", "removed"),
        ("record", "recomm-v2", "gpu:dcgm_tensor_active:ratio", "removed"),
        # the NVLink alert no longer fires in these scenarios: the storm shrinks
        ("storm", "recomm-v2", "nvlink-drop", "changed"),
        ("storm", "recomm-v2", "row-remap-failure", "changed"),
        ("storm", "recomm-v2", "uncorrectable-ecc", "changed"),
        ("storm", "recomm-v2", "xid-79-twice", "changed"),
    }
    # the removed collectors were only used by removed rules: no field-still-used flag;
    # narrowing an inhibit edge is no paging risk
    assert codes(result) == [("diff/alert-removed", "warning", "recomm-v2")]
    flag = result.flags[0].diagnostic
    assert "GpuNvlinkThroughputDrop" in flag.message
    assert flag.location is not None and flag.location.file == RECOMM


def _drop_host_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    import obs_iac.packs.gpu as gpu

    original = gpu.relabel_rules

    def without_host(fleet: Any, naming: Any) -> Any:
        return tuple(r for r in original(fleet, naming) if r.target_label != "host_name")

    monkeypatch.setattr(gpu, "relabel_rules", without_host)


def test_dropped_canonical_label_is_a_red_line(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # An obs-iac upgrade (here: a patched pack) that stops producing host_name.
    _drop_host_rule(monkeypatch)
    result = run_diff(repo)
    # both services share one relabelling file for the dcgm-exporter scrape job
    changes = ids(result)
    assert ("relabel", "(fleet)", "dcgm-exporter: host.name", "removed") in changes
    # The generated tests feed the exporter's own series through the relabelling, so their
    # inputs follow it; nothing else changes.
    others = changes - {("relabel", "(fleet)", "dcgm-exporter: host.name", "removed")}
    assert others and all(
        kind == "file" and path.startswith("prometheus/tests/") and how == "changed"
        for kind, _svc, path, how in others
    ), others
    assert codes(result) == [("diff/label-dropped", "error", "(fleet)")]
    assert "canonical label host.name (host_name) was removed" in result.flags[0].diagnostic.message
    assert result.errors == 1
    runner = CliRunner()
    cli = runner.invoke(main, ["--root", str(repo), "diff"])
    assert cli.exit_code == 1, cli.output
    assert "error[diff/label-dropped]" in cli.output


def test_acknowledged_label_drop_is_a_warning(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _drop_host_rule(monkeypatch)
    edit(
        repo,
        RECOMM,
        "from obs_iac import ",
        "from obs_iac import Acknowledgement, ",
    )
    edit(
        repo,
        RECOMM,
        'sla_id="recomm_v2",',
        'sla_id="recomm_v2",\n    acknowledge=(Acknowledgement(code="diff/label-dropped", '
        'reason="host_name moves to the node exporter join"),),',
    )
    # shared relabelling: an acknowledgement without a target does not cover it
    assert codes(run_diff(repo)) == [("diff/label-dropped", "error", "(fleet)")]
    edit(repo, RECOMM, 'exporter join"),', 'exporter join", target="host.name"),')
    result = run_diff(repo)
    assert codes(result) == [("diff/label-dropped", "warning", "(fleet)")]
    ack = result.flags[0]
    assert ack.acknowledged == "host_name moves to the node exporter join"
    assert "acknowledged: host_name moves" in ack.diagnostic.message
    assert result.errors == 0
    assert CliRunner().invoke(main, ["--root", str(repo), "diff"]).exit_code == 0


def test_label_spelling_change_is_a_format_change(repo: Path) -> None:
    (repo / "pyproject.toml").write_text(
        PYPROJECT + 'naming = "utf8"\nalertmanager_min_version = "0.27"\n'
    )
    edit(
        repo,
        "blueprints/image_classify_v3.py",
        'equal=("business_sla_id", "host_name", "resource_gpu_id")',
        'equal=("business.sla_id", "host.name", "resource.gpu.id")',
    )
    # The examples declare their SLO series' labels classically, as their repository
    # does; a real switch to UTF-8 redeclares them. Here the SLOs are left out.
    for example in (repo / "blueprints").glob("*.py"):
        text = example.read_text()
        example.write_text(re.sub(r"\n    slo=\[.*?\n    \],", "", text, flags=re.S))
    result = run_diff(repo, "HEAD")
    flagged = {
        (f.service, f.diagnostic.object_path[-1])
        for f in result.flags
        if f.diagnostic.code == "diff/label-format-changed"
    }
    assert ("(fleet)", "dcgm-exporter: resource.gpu.id") in flagged
    assert ("recomm-v2", "GpuTemperatureHigh") in flagged  # business_sla_id -> "business.sla_id"
    formats = [f for f in result.flags if f.diagnostic.code == "diff/label-format-changed"]
    assert all(f.diagnostic.severity.label == "error" for f in formats)
    assert not [f for f in result.flags if f.diagnostic.code == "diff/label-dropped"]


class FakeDashboards(Generator):
    """Stands in for the Grafana generator: uid from service and team, panels by key."""

    name: ClassVar[str] = "fake-dashboards"
    description: ClassVar[str] = "test double"

    def generate(self, plan: Plan, ctx: GeneratorContext) -> Iterator[Artifact]:
        for svc in plan.services:
            panels = [
                {"id": 1000 + i, "title": p.title, "type": p.kind, "gridPos": {"y": i}}
                for row in plan.dashboard_rows
                if row.service == svc.name
                for i, p in enumerate(row.panels)
            ]
            board = {"uid": f"{svc.name}-{svc.team}", "title": svc.name, "panels": panels}
            yield Artifact(f"grafana/dashboards/{board['uid']}.json", "json", board, self.name)


def with_fake_dashboards(cfg: RepoConfig) -> PluginSet:
    return discover(cfg, extra={GENERATORS: [("fake-dashboards", FakeDashboards())]})


def test_dashboard_uid_change_is_flagged(repo: Path) -> None:
    render_into(repo, with_fake_dashboards(RepoConfig()))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "dashboards")
    edit(repo, RECOMM, 'team="recsys"', 'team="ranking"')
    for base in (None, "HEAD"):
        result = run_diff(repo, base, with_fake_dashboards)
        board = change(result, "dashboard", "recomm-v2")
        assert [(f.path, f.before, f.after) for f in board.fields] == [
            ("uid", "recomm-v2-recsys", "recomm-v2-ranking")
        ]
        assert codes(result) == [("diff/dashboard-uid-changed", "warning", "recomm-v2")]
        # the team label of every alert moved too; no panel changed
        assert not [c for c in result.changes if c.id.kind == "panel"]
        assert change(result, "alert", "GpuXidError").summary == ("labels.team recsys -> ranking")


def test_base_ref_does_not_exist(repo: Path) -> None:
    out = CliRunner().invoke(main, ["--root", str(repo), "diff", "--base", "origin/nope"])
    assert out.exit_code == 2
    assert "error[diff/unknown-ref]: --base origin/nope: no such commit" in out.output


def test_base_that_does_not_render(repo: Path) -> None:
    edit(repo, RECOMM, "count=64", "count=0")
    git(repo, "commit", "-q", "-am", "broken")
    edit(repo, RECOMM, "count=0", "count=64")
    out = CliRunner().invoke(main, ["--root", str(repo), "diff", "--base", "HEAD"])
    assert out.exit_code == 2, out.output
    assert "error[diff/base-failed]: --base HEAD" in out.output
    assert "[base HEAD]" in out.output and "count" in out.output


def test_base_outside_a_git_repository(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    shutil.copytree(REPO / "blueprints", root / "blueprints")
    (root / "pyproject.toml").write_text(PYPROJECT)
    out = CliRunner().invoke(main, ["--root", str(root), "diff", "--base", "main"])
    assert out.exit_code == 2
    assert "error[diff/not-a-repository]" in out.output
    # without --base the same tree diffs against generated/ (nothing rendered yet)
    out = CliRunner().invoke(main, ["--root", str(root), "diff", "--exit-code"])
    assert out.exit_code == 1 and "+ alert GpuXidError" in out.output


def test_exit_code_and_formats(repo: Path) -> None:
    runner = CliRunner()
    clean = runner.invoke(main, ["--root", str(repo), "diff", "--exit-code"])
    assert clean.exit_code == 0, clean.output
    edit(repo, RECOMM, "profiling=True,", "profiling=True,\n        temperature_limit_celsius=80,")
    plain = runner.invoke(main, ["--root", str(repo), "diff"])
    assert plain.exit_code == 0
    assert "\x1b[" not in plain.output  # not a TTY: no colour
    assert "~ alert GpuTemperatureHigh: expr threshold 85 -> 80" in plain.output
    dirty = runner.invoke(main, ["--root", str(repo), "diff", "--exit-code"])
    assert dirty.exit_code == 1
    js = runner.invoke(main, ["--root", str(repo), "diff", "--format", "json"])
    payload = json.loads(js.output)
    assert payload["version"] == 1 and payload["changed"] is True
    assert payload["summary"] == {
        "added": 0,
        "removed": 0,
        "changed": 2,
        "errors": 0,
        "warnings": 0,
    }
    keys = [(c["kind"], c["key"]) for c in payload["changes"]]
    assert ("alert", "GpuTemperatureHigh") in keys
    again = runner.invoke(main, ["--root", str(repo), "diff", "--format", "json"])
    assert again.output == js.output
    md = runner.invoke(main, ["--root", str(repo), "diff", "--format", "markdown"]).output
    assert "| recomm-v2 | 0 | 0 | 2 | 0 | 0 |" in md
    assert "<details><summary><b>recomm-v2</b>: 2 change(s)</summary>" in md
    assert "| ~ | alert | `GpuTemperatureHigh` | expr threshold 85 -> 80;" in md
    result = run_diff(repo)
    assert to_json(result) == js.output.rstrip("\n")
    assert to_markdown(result) == md
    assert "\x1b[33m" in to_text(result, color=True)


def test_base_before_obs_iac_existed(tmp_path: Path) -> None:
    root = tmp_path / "new"
    root.mkdir()
    (root / "README.md").write_text("ops repo\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "before obs-iac")
    shutil.copytree(REPO / "blueprints", root / "blueprints")
    (root / "pyproject.toml").write_text(PYPROJECT)
    result = run_diff(root, "main")
    assert ("alert", "recomm-v2", "GpuXidError", "added") in ids(result)
    assert {c.change for c in result.changes} == {"added"}
    # every new inhibit edge that can mute a critical alert is pointed out, nothing else
    assert {f.diagnostic.code for f in result.flags} == {"diff/inhibit-mutes-page"}
    assert result.errors == 0


def test_new_inhibit_edge_that_mutes_a_critical_alert(repo: Path) -> None:
    edit(
        repo,
        RECOMM,
        'sla_id="recomm_v2",',
        """sla_id="recomm_v2",
    inhibitions={
        "add": [
            {
                "name": "util-low-mutes-heat",
                "reason": "an idle GPU cannot overheat for long",
                "source_alerts": ["GpuUtilizationLow"],
                "target_alerts": ["GpuTemperatureHigh"],
                "equal": ["business_sla_id", "host_name", "resource_gpu_id"],
            }
        ],
    },""",
    )
    result = run_diff(repo)
    edge = change(result, "inhibit-edge", "util-low-mutes-heat")
    assert edge.change == "added" and edge.id.service == "recomm-v2"
    assert edge.after is not None
    # Each `equal` label must be present on the target (a label missing on both sides is
    # "equal" to Alertmanager and would mute across hosts).
    assert edge.after["target_matchers"] == [
        'alertname="GpuTemperatureHigh"',
        'business_sla_id=~".+"',
        'host_name=~".+"',
        'resource_gpu_id=~".+"',
        'service="recomm-v2"',
    ]
    flags = [f for f in result.flags if f.diagnostic.code == "diff/inhibit-mutes-page"]
    assert [(f.diagnostic.severity.label, f.service) for f in flags] == [("warning", "recomm-v2")]
    assert "can mute paging alerts: recomm-v2/GpuTemperatureHigh" in flags[0].diagnostic.message


def test_log_stage_removed_by_role(repo: Path) -> None:
    edit(repo, RECOMM, '"nccl-timeout", "xid",', '"nccl-timeout",')
    result = run_diff(repo, "HEAD")
    logs = {i for i in ids(result) if i[0].startswith("log-")}
    assert logs == {
        ("log-pipeline", "recomm-v2", "logs", "changed"),
        ("log-stage", "recomm-v2", "extract: details of 'NVRM: Xid' records", "removed"),
        ("log-stage", "recomm-v2", "structured-metadata", "changed"),
    }
    assert change(result, "log-pipeline", "logs").summary == (
        "structured_metadata[] removed: pci_bus_id; structured_metadata[] removed: xid"
    )
    assert not [f for f in result.flags if f.diagnostic.code == "diff/label-dropped"]
