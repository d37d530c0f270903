"""The writer owns only what it wrote, prunes only that, and never leaves a mixed tree."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from obs_iac import conventions, pipeline
from obs_iac.diagnostics import InputError
from obs_iac.render import writer
from tests.conftest import RunCli, tree_bytes, tree_digest

RULES = "prometheus/rules/recomm-v2.rules.yml"


def _render_files(repo: Path) -> dict[str, bytes]:
    return dict(pipeline.render(pipeline.open_workspace(repo)).files)


def _manifest(out: Path) -> dict[str, str]:
    data = json.loads((out / conventions.MANIFEST).read_text())
    assert data["version"] == 1
    files: dict[str, str] = data["files"]
    return files


def test_manifest_lists_exactly_the_owned_files(rendered: Path) -> None:
    out = rendered / "generated"
    on_disk = tree_bytes(out)
    owned = _manifest(out)
    assert set(owned) == set(on_disk) - {conventions.MANIFEST}
    for path, digest in owned.items():
        assert hashlib.sha256(on_disk[path]).hexdigest() == digest
    assert set(owned) == set(_render_files(rendered))


def test_foreign_files_are_never_touched(run_cli: RunCli, rendered: Path) -> None:
    out = rendered / "generated"
    foreign = {
        "README.md": b"hand-written\n",
        "prometheus/rules/custom.rules.yml": b"groups: []\n",
        # Lives in a folder that pruning empties of owned files below.
        "dcgm-exporter/recomm-v2/NOTES.txt": b"keep me\n",
    }
    for rel, data in foreign.items():
        (out / rel).write_bytes(data)
    (rendered / "blueprints/recomm_v2.py").unlink()
    result = run_cli(["render"], rendered)
    assert result.exit_code == 0, result.output
    for rel, data in foreign.items():
        assert (out / rel).read_bytes() == data
    assert not (out / "dcgm-exporter/recomm-v2/collectors.csv").exists()
    assert set(_manifest(out)).isdisjoint(foreign)
    assert run_cli(["render", "--check"], rendered).exit_code == 0


def test_stale_owned_files_are_pruned_with_their_empty_folders(
    run_cli: RunCli, rendered: Path
) -> None:
    out = rendered / "generated"
    before = set(tree_bytes(out))
    (rendered / "blueprints/recomm_v2.py").unlink()
    result = run_cli(["render"], rendered)
    assert result.exit_code == 0, result.output
    after = set(tree_bytes(out))
    gone = before - after
    # Its own files go, and shared files only it needed (e.g. the OTLP fragment) go too.
    assert {p for p in gone if "recomm-v2" in p}
    assert all("image-classify-v3" not in p for p in gone)
    assert not any("recomm-v2" in p for p in after)
    assert not (out / "dcgm-exporter/recomm-v2").exists()
    assert (out / "dcgm-exporter/image-classify-v3").is_dir()
    assert f"{len(gone)} removed" in result.stderr
    assert set(_manifest(out)) == after - {conventions.MANIFEST}


def test_foreign_file_where_obs_iac_wants_to_write(run_cli: RunCli, gitops: Path) -> None:
    out = gitops / "generated"
    (out / "prometheus/rules").mkdir(parents=True)
    (out / RULES).write_text("groups: []  # written by a human\n")
    before = tree_digest(out)
    result = run_cli(["render"], gitops)
    assert result.exit_code == 2, result.output
    assert f"{RULES} exists, differs from what obs-iac would write" in result.stderr
    assert "help: move the file away or delete it" in result.stderr
    assert tree_digest(out) == before
    check = run_cli(["render", "--check"], gitops)
    assert check.exit_code == 1
    assert f"would overwrite a file obs-iac does not own: {RULES}" in check.stderr


def test_identical_foreign_file_is_adopted(run_cli: RunCli, gitops: Path) -> None:
    files = _render_files(gitops)
    out = gitops / "generated"
    (out / RULES).parent.mkdir(parents=True)
    (out / RULES).write_bytes(files[RULES])
    assert run_cli(["render"], gitops).exit_code == 0
    assert RULES in _manifest(out)


def test_check_writes_nothing_and_names_the_stale_file(run_cli: RunCli, rendered: Path) -> None:
    out = rendered / "generated"
    clean = run_cli(["render", "--check"], rendered)
    assert clean.exit_code == 0, clean.output
    assert "up to date" in clean.stderr
    blueprint = rendered / "blueprints/recomm_v2.py"
    blueprint.write_text(
        blueprint.read_text().replace(
            "profiling=True,", "profiling=True,\n        temperature_limit_celsius=80,"
        )
    )
    (out / "prometheus/tests/image-classify-v3.test.yml").unlink()
    before = tree_digest(out)
    stale = run_cli(["render", "--check"], rendered)
    assert stale.exit_code == 1, stale.output
    assert f"would change: {RULES}" in stale.stderr
    assert "would add: prometheus/tests/image-classify-v3.test.yml" in stale.stderr
    assert "generated/ is stale" in stale.stderr
    assert tree_digest(out) == before
    as_json = run_cli(["render", "--check", "--format", "json"], rendered)
    assert as_json.exit_code == 1
    drift = json.loads(as_json.stdout)
    assert drift["clean"] is False
    assert RULES in drift["changed"]
    assert tree_digest(out) == before


def test_check_notices_a_hand_edit_and_a_stale_manifest(run_cli: RunCli, rendered: Path) -> None:
    out = rendered / "generated"
    (out / RULES).write_text((out / RULES).read_text() + "# edited\n")
    result = run_cli(["render", "--check"], rendered)
    assert result.exit_code == 1
    assert f"would change: {RULES}" in result.stderr
    assert run_cli(["render"], rendered).exit_code == 0
    manifest = out / conventions.MANIFEST
    manifest.write_text(manifest.read_text().replace('"version": 1', '"version": 1 '))
    result = run_cli(["render", "--check"], rendered)
    assert result.exit_code == 1
    assert f"would change: {conventions.MANIFEST}" in result.stderr


def test_unreadable_manifest_is_bad_input(run_cli: RunCli, rendered: Path) -> None:
    (rendered / "generated" / conventions.MANIFEST).write_text("{not json")
    result = run_cli(["render"], rendered)
    assert result.exit_code == 2
    assert "error[output/manifest]" in result.stderr
    assert "Traceback" not in result.output


class Crash(Exception):
    pass


def _fail_after(real: Callable[..., Any], n: int) -> Callable[..., Any]:
    calls = {"n": 0}

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if calls["n"] >= n:
            raise Crash(f"simulated crash at call {n}")
        calls["n"] += 1
        return real(*args, **kwargs)

    return wrapped


def _old_and_new(rendered: Path) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    """The rendered tree, and the files of a render that changes, adds and removes files."""
    out = rendered / "generated"
    old = tree_bytes(out)
    (rendered / "blueprints/recomm_v2.py").unlink()
    blueprint = rendered / "blueprints/image_classify_v3.py"
    blueprint.write_text(
        blueprint.read_text()
        .replace("count=128", "count=256")
        .replace("temperature_limit_celsius=87", "temperature_limit_celsius=83")
    )
    extra = rendered / "blueprints/new_svc.py"
    extra.write_text(
        (rendered / "blueprints/image_classify_v3.py")
        .read_text()
        .replace('"image-classify-v3"', '"new-svc"')
        .replace('"image_classify_v3"', '"new_svc"')
    )
    files = _render_files(rendered)
    assert any("new-svc" in p for p in files)
    return out, old, files


def _expected_new(files: dict[str, bytes]) -> dict[str, bytes]:
    return {**files, conventions.MANIFEST: writer.manifest_bytes(files)}


def _count_calls(
    monkeypatch: pytest.MonkeyPatch, name: str, out: Path, files: dict[str, bytes]
) -> int:
    """How many times a clean write calls ``name``; done on a scratch copy of ``out``."""
    import shutil

    scratch = out.parent / "scratch"
    shutil.copytree(out, scratch)
    counter = {"n": 0}
    real = getattr(writer, name) if name != "replace" else os.replace

    def counting(*args: Any, **kwargs: Any) -> Any:
        counter["n"] += 1
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        if name == "replace":
            m.setattr(writer.os, "replace", counting)
        else:
            m.setattr(writer, name, counting)
        writer.write(scratch, files)
    shutil.rmtree(scratch)
    return counter["n"]


def test_crash_during_the_swap_recovers_to_old_or_new(
    rendered: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, old, files = _old_and_new(rendered)
    new = _expected_new(files)
    assert old != new
    total = _count_calls(monkeypatch, "replace", out, files)
    assert total > 3
    for n in range(total):
        # Each round starts from the old tree.
        for rel in tree_bytes(out):
            (out / rel).unlink()
        for rel, data in old.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
        with monkeypatch.context() as m:
            m.setattr(writer.os, "replace", _fail_after(os.replace, n))
            with pytest.raises(Crash):
                writer.write(out, files)
        committed = (out / conventions.JOURNAL).exists()
        assert committed == (n > 0), n
        if committed:
            # Recovery itself may be interrupted; running it again still converges.
            with monkeypatch.context() as m:
                m.setattr(writer.os, "replace", _fail_after(os.replace, 1))
                try:
                    writer.recover(out)
                except Crash:
                    assert (out / conventions.JOURNAL).exists()
        writer.recover(out)
        after = tree_bytes(out)
        assert after == (new if committed else old), f"mixed tree after a crash at replace #{n}"


def test_crash_before_the_journal_commit_leaves_the_old_tree(
    rendered: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    out, old, files = _old_and_new(rendered)
    total = _count_calls(monkeypatch, "_stage", out, files)
    for n in range(total):
        with monkeypatch.context() as m:
            m.setattr(writer, "_stage", _fail_after(writer._stage, n))
            with pytest.raises(Crash):
                writer.write(out, files)
        assert not (out / conventions.JOURNAL).exists()
        staged = {p for p in tree_bytes(out) if p.startswith(conventions.STAGING + "/")}
        assert {p: d for p, d in tree_bytes(out).items() if p not in staged} == old
        writer.recover(out)
        assert tree_bytes(out) == old
    # The next real render completes normally from there.
    assert run_cli(["render"], rendered).exit_code == 0
    assert tree_bytes(out) == _expected_new(files)


def test_next_render_finishes_an_interrupted_swap(
    rendered: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    out, _old, files = _old_and_new(rendered)
    with monkeypatch.context() as m:
        m.setattr(writer.os, "replace", _fail_after(os.replace, 2))
        with pytest.raises(Crash):
            writer.write(out, files)
    assert (out / conventions.JOURNAL).exists()
    result = run_cli(["render"], rendered)
    assert result.exit_code == 0, result.output
    assert tree_bytes(out) == _expected_new(files)


def test_write_refuses_foreign_conflicts_without_writing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "a").mkdir(parents=True)
    (out / "a/b.yml").write_text("mine\n")
    with pytest.raises(InputError) as info:
        writer.write(out, {"a/b.yml": b"theirs\n", "c.yml": b"x\n"})
    assert info.value.diagnostics[0].code == "output/foreign-file"
    assert tree_bytes(out) == {"a/b.yml": b"mine\n"}
