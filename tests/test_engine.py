"""The render engine (process pool + per-service cache) against the in-process pipeline.

The in-process pipeline (obs_iac.pipeline.render) is the reference: one process, no
cache, every generator and lint rule called once on the whole plan. Whatever the number
of processes and whatever the cache holds, the engine must give the same bytes and the
same findings.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest

from obs_iac import plugins as plugin_api
from obs_iac.diagnostics import Diagnostic, PluginError, Severity
from obs_iac.engine import keys
from obs_iac.engine.cache import CACHE_DIR_ENV
from obs_iac.engine.run import EngineResult, run
from obs_iac.pipeline import Workspace, open_workspace, render
from obs_iac.plan.model import AlertRule, Plan
from obs_iac.render.artifact import Artifact
from obs_iac.render.writer import commit, discard_all, read_manifest
from tests.conftest import REPO, make_repo, tree_bytes
from tests.test_views import EDITED, EDITS

sys.path.insert(0, str(REPO / "bench"))
from fleet import make_fleet


class ServiceNotes(plugin_api.Generator):
    """A toy service-scope generator with a fleet-level index, to exercise the contract
    even where the built-ins are fleet-scope."""

    name: ClassVar[str] = "service-notes"
    scope: ClassVar[plugin_api.GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: plugin_api.GeneratorContext) -> Iterator[Artifact]:
        for svc in plan.services:
            alerts = sorted(
                r.alert
                for g in plan.rule_groups
                if g.service == svc.name
                for r in g.rules
                if isinstance(r, AlertRule)
            )
            yield Artifact(
                path=f"notes/{svc.name}.txt",
                format="text",
                data="\n".join([svc.name, *alerts]),
                generator=self.name,
                sources=(svc.source.file,),
                services=(svc.name,),
            )

    def generate_fleet(self, plan: Plan, ctx: plugin_api.GeneratorContext) -> Iterator[Artifact]:
        yield Artifact(
            path="notes/index.txt",
            format="text",
            data="\n".join(s.name for s in plan.services),
            generator=self.name,
        )


class ServiceAlertCount(plugin_api.LintRule):
    """A toy service-scope lint rule that reports something for every service."""

    code: ClassVar[str] = "toy/alert-count"
    default_severity: ClassVar[Severity] = Severity.INFO
    scope: ClassVar[plugin_api.LintScope] = "service"

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: plugin_api.LintContext
    ) -> Iterable[Diagnostic]:
        for art in artifacts:
            if art.generator == "service-notes":
                count = len(str(art.data).splitlines()) - 1
                yield Diagnostic(self.code, Severity.INFO, f"{art.path}: {count} alerts")


class CrashingGenerator(plugin_api.Generator):
    name: ClassVar[str] = "crashing"
    scope: ClassVar[plugin_api.GeneratorScope] = "service"

    def generate(self, plan: Plan, ctx: plugin_api.GeneratorContext) -> list[Artifact]:
        if any(s.name.endswith("7") for s in plan.services):
            raise RuntimeError("exploded on a seven")
        return []


def with_toys(*extra: tuple[str, Any]) -> plugin_api.PluginSet:
    generators = [("service-notes", ServiceNotes())]
    lint = [("toy/alert-count", ServiceAlertCount())]
    for group, obj in extra:
        (generators if group == plugin_api.GENERATORS else lint).append((obj.name, obj))
    return plugin_api.discover(
        None, extra={plugin_api.GENERATORS: generators, plugin_api.LINT_RULES: lint}
    )


@pytest.fixture(scope="module")
def fleet_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 services: enough for the engine to use a pool of two or three processes."""
    return make_fleet(tmp_path_factory.mktemp("fleet") / "repo", 24)


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))
    return cache


def reference(ws: Workspace, plugins: plugin_api.PluginSet) -> tuple[dict[str, bytes], list[str]]:
    result = render(ws, plugins)
    return dict(result.files), [str(d) + repr(d) for d in result.findings]


def collected(result: EngineResult) -> tuple[dict[str, bytes], list[str]]:
    assert result.files is not None
    return dict(result.files), [str(d) + repr(d) for d in result.findings]


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_engine_equals_the_in_process_pipeline(fleet_repo: Path, jobs: int) -> None:
    ws = open_workspace(fleet_repo)
    plugins = with_toys()
    files, findings = reference(ws, plugins)
    assert "notes/index.txt" in files and "notes/svc-00007.txt" in files
    assert any("toy/alert-count" in f for f in findings)
    cold = run(ws, plugins, mode="collect", jobs=jobs)
    assert cold.jobs == min(jobs, 3)
    assert collected(cold) == (files, findings)
    warm = run(ws, plugins, mode="collect", jobs=jobs)
    assert warm.cache_misses == 0
    assert collected(warm) == (files, findings)


def test_examples_through_the_engine_match_generated(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo")
    ws = open_workspace(root)
    result = run(ws, mode="collect")
    expected = tree_bytes(REPO / "generated")
    expected.pop(".obs-iac-manifest.json")
    assert collected(result)[0] == expected


def _copy_of(fleet: Path, tmp_path: Path) -> tuple[Path, Workspace]:
    root = tmp_path / "repo"
    shutil.copytree(fleet, root)
    return root, open_workspace(root)


def _edit_threshold(root: Path, value: str) -> Path:
    first = sorted((root / "blueprints").glob("*.py"))[0]
    text = first.read_text()
    marker = "temperature_limit_celsius="
    if marker in text:
        start = text.index(marker) + len(marker)
        end = text.index(",", start)
        text = text[:start] + value + text[end:]
    else:
        text = text.replace("profiling=", f"{marker}{value},\n        profiling=", 1)
    first.write_text(text)
    return first


def test_incremental_render_redoes_one_service_and_matches_a_full_render(
    fleet_repo: Path, tmp_path: Path
) -> None:
    root, ws = _copy_of(fleet_repo, tmp_path)
    plugins = with_toys()
    run(ws, plugins, mode="collect", jobs=2)
    _edit_threshold(root, "81")
    incremental = run(ws, plugins, mode="collect", jobs=2)
    # One expansion and one shard recomputed; everything else came from the cache.
    assert incremental.cache_misses == 2, incremental
    assert collected(incremental) == reference(ws, plugins)


def test_config_change_misses_the_cache_and_matches_a_full_render(
    fleet_repo: Path, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(fleet_repo, root)
    plugins = with_toys()
    run(open_workspace(root), plugins, mode="collect", jobs=2)
    pyproject = root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            "[tool.obs-iac]\n", '[tool.obs-iac]\nevaluation_interval = "30s"\n'
        )
    )
    ws = open_workspace(root)
    after = run(ws, plugins, mode="collect", jobs=2)
    assert after.cache_hits == 0
    assert collected(after) == reference(ws, plugins)


def test_plugin_code_change_misses_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin edited in place (an editable install: same version) must not be served
    from the cache: the key covers the plugin package's files."""
    package = tmp_path / "site" / "toy_plugin"
    package.mkdir(parents=True)
    source = """
from typing import ClassVar
from obs_iac.plugins import Generator
from obs_iac.render.artifact import Artifact

class Banner(Generator):
    name: ClassVar[str] = "banner"
    scope: ClassVar[str] = "service"

    def generate(self, plan, ctx):
        for svc in plan.services:
            yield Artifact(f"banner/{svc.name}.txt", "text", "BANNER " + svc.name, self.name)
"""
    (package / "__init__.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    root = make_repo(tmp_path / "repo")

    def plugin_set() -> plugin_api.PluginSet:
        module = importlib.import_module("toy_plugin")
        importlib.reload(module)
        keys._package_code.cache_clear()
        return plugin_api.discover(None, extra={plugin_api.GENERATORS: [("b", module.Banner())]})

    ws = open_workspace(root)
    first = run(ws, plugin_set(), mode="collect")
    assert first.files is not None
    assert first.files["banner/recomm-v2.txt"].startswith(b"BANNER")
    (package / "__init__.py").write_text(source.replace('"BANNER "', '"NEW BANNER "'))
    plugins = plugin_set()
    second = run(ws, plugins, mode="collect")
    assert second.cache_hits == 0
    assert second.files is not None
    assert second.files["banner/recomm-v2.txt"].startswith(b"NEW BANNER")
    assert collected(second) == reference(ws, plugins)


def test_plugin_version_is_part_of_the_key() -> None:
    from obs_iac.config import RepoConfig

    plugins = plugin_api.discover()
    bumped = plugin_api.PluginSet(
        packs=tuple(
            plugin_api.LoadedPlugin(p.kind, p.name, p.obj, p.distribution, "99", p.entry_point)
            for p in plugins.packs
        ),
        generators=plugins.generators,
        lint_rules=plugins.lint_rules,
    )
    repo = RepoConfig()
    assert keys.base_key(plugins, repo) != keys.base_key(bumped, repo)
    assert keys.base_key(plugins, repo) == keys.base_key(plugins, RepoConfig())
    assert keys.base_key(plugins, repo) != keys.base_key(plugins, RepoConfig(naming="utf8"))


def test_damaged_cache_entries_are_misses(fleet_repo: Path, _own_cache: Path) -> None:
    ws = open_workspace(fleet_repo)
    plugins = with_toys()
    run(ws, plugins, mode="collect", jobs=1)
    entries = sorted(p for p in _own_cache.rglob("*") if p.is_file())
    assert entries
    for path in entries:
        path.write_bytes(b"\x80garbage")
    again = run(ws, plugins, mode="collect", jobs=1)
    assert collected(again) == reference(ws, plugins)


def test_no_cache_leaves_no_cache_behind(fleet_repo: Path, _own_cache: Path) -> None:
    ws = open_workspace(fleet_repo)
    result = run(ws, with_toys(), mode="collect", use_cache=False, jobs=2)
    assert result.cache_hits == result.cache_misses == 0
    assert not _own_cache.exists()


def test_crash_in_a_worker_is_a_plugin_error_with_its_traceback(fleet_repo: Path) -> None:
    ws = open_workspace(fleet_repo)
    plugins = with_toys((plugin_api.GENERATORS, CrashingGenerator()))
    with pytest.raises(PluginError) as info:
        run(ws, plugins, mode="write", jobs=2)
    messages = [d.message for d in info.value.diagnostics]
    assert (
        "generator 'crashing' on service 'svc-00007' failed: RuntimeError: exploded on a seven"
        in (messages)
    )
    assert "exploded on a seven" in str(info.value.__cause__)
    assert "Traceback" in str(info.value.__cause__)
    # Nothing staged survives, and the output folder was never created.
    assert not (fleet_repo / "generated").exists()


def test_write_mode_stages_and_commits_the_same_tree_as_the_writer(
    fleet_repo: Path, tmp_path: Path
) -> None:
    _root, ws = _copy_of(fleet_repo, tmp_path)
    plugins = with_toys()
    files, _ = reference(ws, plugins)
    result = run(ws, plugins, mode="write", jobs=2)
    assert result.staged == tuple(sorted(files))
    drift = commit(ws.output, result.records, result.staged)
    assert set(drift.added) == set(files)
    on_disk = tree_bytes(ws.output)
    manifest = on_disk.pop(".obs-iac-manifest.json")
    assert on_disk == files
    assert set(read_manifest(ws.output)) == set(files)
    assert b"notes/index.txt" in manifest
    # A second render stages nothing and changes nothing.
    again = run(ws, plugins, mode="write", jobs=2)
    assert again.staged == ()
    assert commit(ws.output, again.records, again.staged).clean
    assert not (ws.output / ".obs-iac-staging").exists()


def test_output_is_independent_of_hash_seed_and_jobs(fleet_repo: Path, tmp_path: Path) -> None:
    import subprocess

    trees = []
    for seed, jobs in (("0", "1"), ("4242", "3")):
        root = tmp_path / f"repo-{seed}"
        shutil.copytree(fleet_repo, root)
        env = {**os.environ, "PYTHONHASHSEED": seed, CACHE_DIR_ENV: str(tmp_path / f"c{seed}")}
        proc = subprocess.run(
            [str(Path(sys.executable).with_name("obs-iac")), "render", "--jobs", jobs],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        trees.append(tree_bytes(root / "generated"))
    assert trees[0] == trees[1]


def test_a_hand_edited_file_is_found_although_unchanged_files_are_not_read_back(
    rendered: Path, run_cli: Any
) -> None:
    """After a render, files are compared by stat (like git's index); an edit changes
    the stat, so it is found and repaired."""
    target = rendered / "generated" / "prometheus" / "rules" / "recomm-v2.rules.yml"
    if not target.exists():
        target = sorted((rendered / "generated").rglob("*.yml"))[0]
    original = target.read_bytes()
    target.write_bytes(original.replace(b"expr:", b"expr: ", 1))
    check = run_cli(["render", "--check"], rendered)
    assert check.exit_code == 1
    assert str(target.relative_to(rendered / "generated")) in check.stderr
    fixed = run_cli(["render"], rendered)
    assert fixed.exit_code == 0, fixed.output
    assert "1 changed" in fixed.stderr
    assert target.read_bytes() == original
    assert run_cli(["render", "--check"], rendered).exit_code == 0


class EveryArtifact(plugin_api.LintRule):
    """A rule that says nothing about its scope: it must see every artifact, so the
    engine ships the shards' artifacts to the main process for it."""

    code: ClassVar[str] = "toy/every-artifact"
    default_severity: ClassVar[Severity] = Severity.INFO

    def check(
        self, plan: Plan, artifacts: tuple[Artifact, ...], ctx: plugin_api.LintContext
    ) -> Iterable[Diagnostic]:
        yield Diagnostic(
            self.code,
            Severity.INFO,
            f"{len(plan.services)} services, {len(artifacts)} artifacts, "
            f"first {artifacts[0].path}, last {artifacts[-1].path}",
        )


def test_a_fleet_scope_rule_sees_every_artifact(fleet_repo: Path) -> None:
    ws = open_workspace(fleet_repo)
    plugins = with_toys((plugin_api.LINT_RULES, EveryArtifact()))
    files, findings = reference(ws, plugins)
    mine = [f for f in findings if "toy/every-artifact" in f]
    assert len(mine) == 1 and f"{len(files)} artifacts" in mine[0]
    for _ in range(2):  # cold, then from the cache
        assert collected(run(ws, plugins, mode="collect", jobs=2)) == (files, findings)


def test_cached_bytecode_reports_the_same_locations(rendered: Path, run_cli: Any) -> None:
    """Blueprints run from cached bytecode the second time; a mistake in one is reported
    at the same file and line either way."""
    bad = rendered / "blueprints" / "broken.py"
    bad.write_text(
        "from obs_iac import GpuFleet, service\n\n"
        "fleet = GpuFleet(model='A100-SXM4-80GB', count='many', driver_version='535.129.03')\n"
    )
    first = run_cli(["render"], rendered)
    second = run_cli(["render"], rendered)
    assert first.exit_code == second.exit_code == 2
    assert "blueprints/broken.py:3" in first.stderr
    assert first.stderr == second.stderr
    assert list((Path(os.environ[CACHE_DIR_ENV]) / "code").rglob("*"))


# -- fleet views: fleet-level plugins cached on what they read ------------------------------


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 services: two workers, and few enough for a reference render per edit."""
    return make_fleet(tmp_path_factory.mktemp("views") / "repo", 16)


def _digests(result: EngineResult) -> dict[str, str]:
    return {r.path: r.digest for r in result.records}


def _sha(files: dict[str, bytes]) -> dict[str, str]:
    return {path: hashlib.sha256(data).hexdigest() for path, data in files.items()}


def _cached_run(
    ws: Workspace, plugins: plugin_api.PluginSet, mode: Literal["write", "collect"] = "collect"
) -> EngineResult:
    """A render that reads the cache (a check never does) and leaves the output folder
    as it was."""
    result = run(ws, plugins, mode=mode, jobs=2)
    if mode == "write":
        discard_all(ws.output, result.output_existed)
    return result


def _rendered_copy(fleet: Path, tmp_path: Path) -> tuple[Path, Workspace, plugin_api.PluginSet]:
    """A copy of ``fleet`` with the built-in plugins, rendered once (the cache is warm)."""
    root, ws = _copy_of(fleet, tmp_path)
    plugins = plugin_api.discover(ws.config)
    _cached_run(ws, plugins)
    return root, ws, plugins


def _assert_full_render(result: EngineResult, ws: Workspace, plugins: Any, what: str) -> None:
    files, findings = reference(ws, plugins)
    assert _digests(result) == _sha(files), what
    assert [str(d) + repr(d) for d in result.findings] == findings, what


def test_a_threshold_edit_reruns_no_fleet_level_plugin(small_fleet: Path, tmp_path: Path) -> None:
    from obs_iac.engine import run as engine

    root, ws, plugins = _rendered_copy(small_fleet, tmp_path)
    assert engine._LAST[0].plan is not None  # a first render runs everything
    _edit_threshold(root, "82")
    # Write mode: a collect assembles the plan eagerly.
    after = _cached_run(ws, plugins, mode="write")
    # Every fleet-level generator and whole-plan rule came from the cache, so the whole
    # plan was never assembled; and the result is a full render's.
    assert engine._LAST[0].plan is None
    _assert_full_render(after, ws, plugins, "threshold")
    # The plan is still there for a caller that asks for it.
    assert len(after.plan.services) == 16


def test_incremental_renders_after_every_kind_of_edit_match_a_full_render(
    small_fleet: Path, tmp_path: Path
) -> None:
    root, ws, plugins = _rendered_copy(small_fleet, tmp_path)
    target = root / "blueprints" / EDITED
    # One after another on the same cache: each edit meets what the previous ones cached.
    for label in ("team", "rank prefix", "threshold", "wiring", "expired suppression", "name"):
        target.write_text(EDITS[label](target.read_text()))
        _assert_full_render(_cached_run(ws, plugins), ws, plugins, label)
    target.unlink()
    after = _cached_run(ws, plugins)
    files, _ = reference(ws, plugins)
    assert set(_digests(after)) == set(files)


class BadView(plugin_api.Generator):
    name: ClassVar[str] = "bad-view"

    def fleet_view(self, shard: Plan, ctx: plugin_api.GeneratorContext) -> Any:
        return {"not json": object()}

    def generate(self, plan: Plan, ctx: plugin_api.GeneratorContext) -> list[Artifact]:
        return []


def test_a_view_that_is_not_json_is_a_plugin_error(small_fleet: Path) -> None:
    ws = open_workspace(small_fleet)
    with pytest.raises(PluginError) as caught:
        run(ws, with_toys((plugin_api.GENERATORS, BadView())), mode="collect", jobs=2)
    # One per service, as for any crash in a shard; each names the plugin and the cause.
    assert len(caught.value.diagnostics) == 16
    for diag in caught.value.diagnostics:
        assert diag.code == "plugin/crash"
        assert "fleet_view of 'bad-view' on service" in diag.message
        assert "TypeError" in diag.message


def test_lint_reruns_on_generated_fleet_files_when_their_cached_artifacts_are_damaged(
    small_fleet: Path, tmp_path: Path, _own_cache: Path
) -> None:
    root, ws, plugins = _rendered_copy(small_fleet, tmp_path)
    damaged = sorted((_own_cache / "fleet-artifacts").rglob("*"))
    assert any(p.is_file() for p in damaged)
    for path in damaged:
        if path.is_file():
            path.write_bytes(b"\x80garbage")
    # Only lint/expired-suppression's view changes: the generators come from the cache,
    # and the rule needs their artifacts, which have to be made again.
    target = root / "blueprints" / EDITED
    target.write_text(EDITS["expired suppression"](target.read_text()))
    after = _cached_run(ws, plugins)
    _assert_full_render(after, ws, plugins, "expired suppression")
    assert any(d.code == "lint/expired-suppression" for d in after.findings)
