"""A pack's mistakes stay its own: another pack's bad PromQL does not crash the GPU
pack, and a pack that crashes in finalize is reported as a plugin error naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from obs_iac import pipeline, plugins
from obs_iac.plan.compile import ServiceBlueprint
from obs_iac.plan.model import RecordingRule, RuleGroup, SourceRef
from obs_iac.plugins import Contribution, Pack, PackContext
from tests.conftest import RunCli


class UnparsableQuery(Pack):
    name: ClassVar[str] = "test-unparsable"

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        rule = RecordingRule(record="test:broken:sum", expr="sum(rate(DCGM_FI_DEV_GPU_UTIL[5m])")
        group = RuleGroup(
            name=f"{service.name}-test-broken",
            service=service.name,
            pack=UnparsableQuery.name,
            source=SourceRef(file=service.file, line=service.line),
            rules=(rule,),
        )
        return Contribution(rule_groups=[group])


class CrashingFinalize(Pack):
    name: ClassVar[str] = "test-crashing-finalize"

    def expand(self, service: ServiceBlueprint, ctx: PackContext) -> Contribution:
        return Contribution()

    def finalize(
        self, service: ServiceBlueprint, draft: Contribution, ctx: PackContext
    ) -> Contribution:
        raise RuntimeError("finalize exploded")


def _with_pack(monkeypatch: pytest.MonkeyPatch, pack: Any) -> None:
    real = plugins.discover
    monkeypatch.setattr(
        pipeline,
        "discover",
        lambda repo=None: real(repo, extra={plugins.PACKS: [(pack.name, pack)]}),
    )


def test_bad_promql_from_another_pack_is_a_finding_not_a_crash(
    run_cli: RunCli, gitops: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_pack(monkeypatch, UnparsableQuery())
    result = run_cli(["render"], gitops)
    assert result.exit_code == 1, result.output
    assert "error[promql/syntax]" in result.stderr
    assert "test:broken:sum" in result.stderr
    assert "Traceback" not in result.output
    assert not (gitops / "generated").exists()


def test_a_crash_in_finalize_names_the_pack(
    run_cli: RunCli, gitops: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_pack(monkeypatch, CrashingFinalize())
    result = run_cli(["render"], gitops)
    assert result.exit_code == 3, result.output
    assert "error[plugin/crash]: pack 'test-crashing-finalize' failed on service" in result.stderr
    assert "RuntimeError: finalize exploded" in result.stderr
    assert "Traceback" not in result.output
